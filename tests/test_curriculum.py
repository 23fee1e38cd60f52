"""The continual maze: its pass and fail rules, its held-out evaluations, exact resume, the
per-level policies, and `xlvin reproduce maze --quick` end to end."""

import json
from pathlib import Path

import numpy as np
import pytest
import torch
from safetensors.torch import load_file

from xlvin.cli import main
from xlvin.envs.maze import AGENT, GOAL, MAZE_ID, WALLS
from xlvin.envs.maze_data import MOVES, bfs_distances, maze_split
from xlvin.experiments import maze, maze_report
from xlvin.io import run_dir as run_dir_module
from xlvin.io.run_dir import read_metrics
from xlvin.nn.policy import ActorCritic
from xlvin.ppo.curriculum import Curriculum, CurriculumConfig
from xlvin.ppo.maze_evaluation import evaluation_starts, success_by_level
from xlvin.ppo.update import PPOConfig
from xlvin.run.training import load_run, train_run


class Oracle(ActorCritic):
    """Moves along a shortest path (BFS on the observed walls), or, with `walls=True`, into a
    wall where one is next to it and else away from the goal: a policy that always succeeds,
    and one that never does."""

    def __init__(self, walls: bool = False) -> None:
        super().__init__()
        self.num_actions, self.into_walls = len(MOVES), walls

    def forward(self, obs: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        o = obs.numpy()
        walls = o[:, WALLS] > 0
        goals = np.argwhere(o[:, GOAL] > 0)[:, 1:]
        agents = np.argwhere(o[:, AGENT] > 0)[:, 1:]
        dist = bfs_distances(walls, goals)
        logits = np.full((len(o), self.num_actions), -30.0, dtype=np.float32)
        for i, (r, c) in enumerate(agents):
            scores = []
            for dr, dc in MOVES:
                d = dist[i, r + dr, c + dc]
                wall = walls[i, r + dr, c + dc]
                scores.append(-(1000 * wall + d) if self.into_walls else (d if d >= 0 else 10**6))
            logits[i, int(np.argmin(scores))] = 30.0
        return torch.from_numpy(logits), torch.zeros(len(o))


def run_rounds(curriculum: Curriculum, policy: ActorCritic, rounds: int) -> None:
    generator = torch.Generator().manual_seed(0)
    for r in range(rounds):
        if curriculum.finished():
            return
        curriculum.collect(policy, r, generator, accelerate=False)


PPO = PPOConfig(num_envs=4, num_steps=32)


def test_an_agent_that_always_succeeds_passes_every_level_in_order() -> None:
    cfg = CurriculumConfig(last_level=4, window=50, threshold=0.95, eval_per_level=10, ood_size=0)
    passed: list[int] = []
    curriculum = Curriculum(MAZE_ID, PPO, cfg, seed=0, on_level_passed=lambda d, _: passed.append(d))
    run_rounds(curriculum, Oracle(), 200)
    assert curriculum.finished() and passed == [1, 2, 3, 4]
    assert [h["level"] for h in curriculum.history] == [1, 2, 3, 4]
    for h in curriculum.history:
        assert h["seconds"] > 0  # each level's own training time
        assert h["passed"] and 50 <= h["episodes"] < 50 + 4 * 32  # the first full window, one rollout late at most
        assert set(h["held_out"]) == {"8"} and h["held_out"]["8"]["-1"] == 1.0  # shortest paths solve every start
    curriculum.close()


def test_an_agent_that_always_fails_fails_its_first_level_on_the_budget() -> None:
    cfg = CurriculumConfig(window=20, budget=300, eval_per_level=5, ood_size=0)
    passed: list[int] = []
    curriculum = Curriculum(MAZE_ID, PPO, cfg, seed=0, on_level_passed=lambda d, _: passed.append(d))
    run_rounds(curriculum, Oracle(walls=True), 1000)
    assert curriculum.finished() and passed == []
    (h,) = curriculum.history
    assert h == {"level": 1, "passed": False, "episodes": h["episodes"], "env_steps": h["env_steps"],
                 "seconds": h["seconds"]}
    assert h["seconds"] > 0
    assert 300 <= h["episodes"] < 300 + 4 * 32  # the level is failed on the first rollout past it
    assert h["env_steps"] % (4 * 32) == 0
    curriculum.close()


def test_held_out_evaluation_subsamples_each_level_and_scores_the_oracle_perfect() -> None:
    mazes = maze_split(8, "test")
    starts = evaluation_starts(mazes, per_level=7, seed=0)
    counts = mazes.level_counts()
    levels = mazes.levels[starts]
    assert all((levels == d).sum() == min(7, n) for d, n in counts.items())
    assert np.array_equal(starts, evaluation_starts(mazes, per_level=7, seed=0))  # same starts for every agent
    assert set(success_by_level(Oracle(), mazes, starts).values()) == {1.0}
    assert set(success_by_level(Oracle(walls=True), mazes, starts).values()) == {0.0}
    # the contextual maze's inverted half: hitting a wall is the success there
    contexts = np.tile([0.9, 0.9], (len(starts), 1))
    assert success_by_level(Oracle(walls=True), mazes, starts, contexts)[-1] == 1.0


def curriculum_args(out: Path) -> list[str]:
    """A tiny PPO-CNN curriculum whose levels pass fast (threshold 0.2 over 20 episodes)."""
    return ["--env", MAZE_ID, "--agent", "ppo", "--hidden", "8", "--protocol", "curriculum",
            "--anneal-lr", "false", "--lr", "3e-3", "--num-envs", "4", "--num-steps", "32",
            "--curriculum-last-level", "3", "--curriculum-window", "20",
            "--curriculum-threshold", "0.2", "--curriculum-budget", "1000",
            "--curriculum-eval-per-level", "5", "--curriculum-ood-size", "0",
            "--checkpoint-every", "4", "--quiet", "--out", str(out)]


class Interrupt(Exception):
    pass


@pytest.mark.slow
def test_an_interrupted_curriculum_resumes_exactly(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    assert main(["train", *curriculum_args(tmp_path / "full")]) == 0
    full = json.loads((tmp_path / "full" / "summary.json").read_text())
    history = full["curriculum"]
    assert [h["level"] for h in history if h["passed"]][:1] == [1]  # at least level 1 passes
    stop_after = len(read_metrics(tmp_path / "full")) // 2
    calls = {"n": 0}
    original = run_dir_module.MetricsLogger.__call__

    def crash(self, step: int, metrics: dict[str, float]) -> None:
        original(self, step, metrics)
        calls["n"] += 1
        if calls["n"] == stop_after:
            raise Interrupt

    with monkeypatch.context() as patch:
        patch.setattr(run_dir_module.MetricsLogger, "__call__", crash)
        with pytest.raises(Interrupt):
            main(["train", *curriculum_args(tmp_path / "cut")])
    # what `xlvin reproduce maze --include-running` reports of it meanwhile: a prefix of the history
    untimed = lambda levels: [{k: v for k, v in h.items() if k != "seconds"} for h in levels]
    running = maze.running_record(maze.Cell("maze", "ppo", 0), tmp_path / "cut")
    assert untimed(running["levels"]) == untimed(history[: len(running["levels"])])
    assert running["in_progress"]["level"] in (1, 2, 3) and running["env_steps"] > 0
    assert main(["train", *curriculum_args(tmp_path / "cut"), "--resume"]) == 0
    cut = json.loads((tmp_path / "cut" / "summary.json").read_text())
    assert untimed(cut["curriculum"]) == untimed(history)
    # a level's seconds count its training before and after the resume, not the pause between
    assert all(0 < h["seconds"] < full["wall_seconds"] + 60 for h in cut["curriculum"])
    for name in ("model.safetensors", *(f"levels/level-{h['level']:02d}.safetensors"
                                        for h in history if h["passed"])):
        a, b = load_file(str(tmp_path / "full" / name)), load_file(str(tmp_path / "cut" / name))
        assert all(torch.equal(a[k], b[k]) for k in a), name
    strip = lambda rows: [{k: v for k, v in r.items() if k != "charts/sps"} for r in rows]
    assert strip(read_metrics(tmp_path / "full")) == strip(read_metrics(tmp_path / "cut"))
    # a passed level's policy loads back and is the one its held-out number was measured on
    passed = [h for h in history if h["passed"]]
    policy, _ = load_run(tmp_path / "full", level=passed[-1]["level"])
    cfg = CurriculumConfig(eval_per_level=5)
    mazes = maze_split(8, "test")
    rates = success_by_level(policy, mazes, evaluation_starts(mazes, cfg.eval_per_level, 0))
    assert {str(d): r for d, r in rates.items()} == passed[-1]["held_out"]["8"]


def test_curriculum_refusals_are_one_line(capsys: pytest.CaptureFixture, tmp_path: Path) -> None:
    cases = [
        (["--env", "CartPole-v1", "--protocol", "curriculum", "--anneal-lr", "false"], "maze envs"),
        (["--env", MAZE_ID, "--agent", "vin", "--protocol", "curriculum"], "--anneal-lr false"),
        (["--env", MAZE_ID, "--agent", "vin", "--protocol", "curriculum", "--anneal-lr", "false",
          "--curriculum-first-level", "40"], "no level in"),
        (["--env", MAZE_ID, "--agent", "vin", "--protocol", "curriculum", "--anneal-lr", "false",
          "--curriculum-threshold", "1.5"], "threshold"),
    ]
    for args, message in cases:
        out = tmp_path / "never"
        assert main(["train", *args, "--out", str(out), "--quiet"]) != 0
        err = capsys.readouterr().err.strip()
        assert message in err and len(err.splitlines()) == 1, err
        assert not out.exists()
    reproduce_cases = [(["--device", "tpu"], "--device must be"),
                       (["--deadline-minutes", "0"], "--deadline-minutes must be a finite number > 0")]
    if not torch.cuda.is_available():
        reproduce_cases.append((["--device", "cuda"], "CUDA GPU"))
    for args, message in reproduce_cases:
        runs = tmp_path / "runs"
        assert main(["reproduce", "maze", "--quick", "--agents", "vin", "--seeds", "1", *args,
                     "--runs", str(runs), "--results", str(tmp_path / "results")]) != 0
        err = capsys.readouterr().err.strip()
        assert message in err and len(err.splitlines()) == 1, err
        assert not runs.exists() and not (tmp_path / "results").exists()


@pytest.mark.slow
def test_reproduce_maze_quick_writes_the_results_and_figures(tmp_path: Path, capsys) -> None:
    """`xlvin reproduce maze --quick` (VIN, one seed): a call whose deadline passed before the
    cell's turn starts nothing (one error line, no run directory); a run cut by a deadline is
    reported as still training and the next call resumes and finishes it: VIN passes level 1
    and generalises to held-out level-1 mazes; maze.json, maze.md and the four figures are
    written; a third call trains nothing and writes the same records."""
    args = ["reproduce", "maze", "--quick", "--agents", "vin", "--seeds", "1", "--jobs", "1",
            "--runs", str(tmp_path / "runs"), "--results", str(tmp_path / "results")]
    run_dir = tmp_path / "runs" / "maze" / "vin" / "seed0"
    capsys.readouterr()
    assert main([*args, "--deadline-minutes", "1e-9"]) != 0
    err = capsys.readouterr().err.strip()
    assert "the deadline passed before any of the 1 cells started" in err, err
    assert not run_dir.exists() and not (tmp_path / "results").exists()
    (cell,) = maze.make_cells("maze", ["vin"], 1, 0, maze.QUICK)
    _, summary = train_run(cell.config(), run_dir, progress=False, deadline=0.0,
                           pretrain_progress=False)
    assert summary["stopped_at_deadline"]
    assert main([*args, "--include-running"]) == 0
    (stopped,) = json.loads((tmp_path / "results" / "maze.json").read_text())["runs"]
    assert stopped["in_progress"]["level"] == 1 and stopped["levels_passed"] == []
    assert (run_dir / "checkpoint.safetensors").is_file() and not (run_dir / "summary.json").exists()
    assert main(args) == 0
    data = json.loads((tmp_path / "results" / "maze.json").read_text())
    (run,) = data["runs"]
    assert run["agent"] == "vin" and run["levels_passed"] == [1]
    (level,) = run["levels"]
    assert level["held_out"]["8"]["1"] >= 0.8  # VIN solves held-out level-1 mazes
    assert set(level["held_out"]) == {"8", "16"}
    for name in ("maze.md", "maze_8x8.png", "maze_16x16.png", "maze_stats.png"):
        assert (tmp_path / "results" / name).stat().st_size > 0
    assert main(args) == 0  # finished: nothing is retrained
    assert json.loads((tmp_path / "results" / "maze.json").read_text())["runs"] == data["runs"]


def test_level_costs_count_the_seeds_that_passed_each_level_and_their_cost() -> None:
    def record(seed: int, levels: list[tuple[int, bool, int, int]], sps: float) -> dict:
        return {"experiment": "maze", "agent": "gvin", "seed": seed, "steps_per_second": sps,
                "levels": [{"level": d, "passed": ok, "episodes": e, "env_steps": s}
                           for d, ok, e, s in levels]}

    records = [record(0, [(1, True, 100, 6_000), (2, False, 900, 12_000)], 100.0),
               record(1, [(1, True, 300, 12_000), (2, True, 50, 600)], 200.0),
               record(2, [(1, True, 200, 3_000)], 50.0)]
    rows = [line for line in maze_report.level_costs(records) if line.startswith("| maze")]
    # level 1: all three passed; medians 200 episodes, 6,000 steps, wall 1.0 of (1, 1, 1) min
    assert rows == ["| maze | gvin | 1 | 3 / 3 | 200 (100 - 300) | 6,000 (3,000 - 12,000) | 1.0 |",
                    "| maze | gvin | 2 | 1 / 2 | 475 (50 - 900) | 6,300 (600 - 12,000) | 1.0 |"]


def test_transe_pretraining_data_comes_from_the_curriculums_training_mazes() -> None:
    from xlvin.run.transe import transe_env_kwargs
    from xlvin.pretrain.random_data import random_transitions
    from xlvin.run.config import RunConfig, TrainConfig

    cfg = RunConfig(train=TrainConfig(env=MAZE_ID, agent="xlvin", protocol="curriculum"),
                    ppo=PPOConfig(anneal_lr=False), curriculum=CurriculumConfig(size=16))
    kwargs = transe_env_kwargs(cfg)
    assert kwargs["size"] == 16 and kwargs["split"] == "train" and kwargs["level"] is None
    data = random_transitions(MAZE_ID, episodes=5, seed=0, env_kwargs=kwargs)
    assert data.obs.shape[1:] == (3, 16, 16) and data.next_obs.shape == data.obs.shape
    online = RunConfig(train=TrainConfig(env=MAZE_ID, agent="xlvin"))
    assert transe_env_kwargs(online) == {}
