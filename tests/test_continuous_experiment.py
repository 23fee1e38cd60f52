"""`xlvin reproduce continuous`: its options refused before anything is made, its cells, a tiny
run's results computed from its cells, resuming, and the partial table naming unfinished cells."""

import dataclasses
import json
from pathlib import Path

import numpy as np
import pytest

from xlvin import UserError
from xlvin.cli import main
from xlvin.experiments import continuous, final_eval, table1
from xlvin.stats import improvement_over, summarize


@pytest.mark.parametrize("argv, message", [
    (["--envs", "Pendulum-v2"], "unknown environment 'Pendulum-v2'"),
    (["--agents", "ppo,xlvin-tree"], "unknown agent 'xlvin-tree'"),
    (["--agents", "ppo,ppo"], "agent ppo given more than once"),
    (["--seeds", "0"], "--seeds must be in [1, 10000]"),
    (["--first-seed", "-1"], "--first-seed >= 0"),
    (["--budget", "lots"], "--budget must be low, paper or a whole number of env steps >= 1"),
    (["--budget", "0"], "--budget must be low, paper or a whole number of env steps >= 1"),
    (["--envs", "HalfCheetah-v5", "--agents", "xlvin-all"],
     "xlvin-all expands all 7 ^ d joint actions, which only fits envs with at most 64"),
])
def test_bad_options_are_one_line_before_anything_is_made(
    argv: list[str], message: str, tmp_path: Path, capsys: pytest.CaptureFixture
) -> None:
    code = main(["reproduce", "continuous", *argv, "--runs", str(tmp_path / "runs"),
                 "--results", str(tmp_path / "out")])
    err = capsys.readouterr().err.strip()
    assert code == 2 and message in err and "\n" not in err
    assert not (tmp_path / "runs").exists() and not (tmp_path / "out").exists()


def test_cells_and_their_configs() -> None:
    cells = continuous.cells(["Pendulum-v1", "HalfCheetah-v5"], list(continuous.AGENTS), [3, 4])
    pendulum = [c for c in cells if c.env == "Pendulum-v1"]
    cheetah = [c for c in cells if c.env == "HalfCheetah-v5"]
    assert len(pendulum) == 5 * 2 and {c.seed for c in cells} == {3, 4}
    # 7 bins ^ 6 dimensions: every joint action of a node is too many to expand
    assert len(cheetah) == 4 * 2 and all(c.agent != "xlvin-all" for c in cheetah)
    by = {(c.env, c.agent, c.seed): c.config() for c in cells}
    ppo = by["Pendulum-v1", "ppo", 3]
    assert ppo.train.agent == "ppo" and ppo.ppo.use_sde and ppo.train.separate_critic
    assert ppo.ppo.total_steps == continuous.ENVS["Pendulum-v1"].steps
    for agent, method in continuous.AGENTS.items():
        if method is None:
            continue
        cfg = by["Pendulum-v1", agent, 4]
        assert (cfg.train.agent, cfg.train.expansion, cfg.train.action_bins) == ("xlvin", method, 7)
        assert cfg.train.expand == (0 if method == "all" else continuous.EXPAND)
        # every agent of an env trains on PPO's schedule, the Gaussian's options aside
        assert dataclasses.replace(cfg.ppo, use_sde=True, sde_sample_freq=4) == ppo.ppo
    assert {c.steps for c in continuous.cells(["Hopper-v5"], ["ppo"], [0], "paper")} == {1_000_000}


@pytest.fixture
def tiny(monkeypatch: pytest.MonkeyPatch) -> None:
    """Pendulum in rollouts of 2 envs x 32 steps, TransE on 200 random steps, 1 evaluation
    episode."""
    setting = continuous.ENVS["Pendulum-v1"]
    monkeypatch.setitem(continuous.ENVS, "Pendulum-v1", dataclasses.replace(
        setting, ppo=dataclasses.replace(setting.ppo, num_envs=2, num_steps=32)))
    monkeypatch.setattr(continuous, "TRANSE", dataclasses.replace(
        continuous.TRANSE, episodes=2, max_transitions=200, epochs=1))
    monkeypatch.setattr(continuous, "EVAL_EPISODES", 1)


ARGS = ["reproduce", "continuous", "--envs", "Pendulum-v1", "--agents", "ppo,xlvin-gaussian",
        "--budget", "64", "--jobs", "1"]


def test_a_tiny_run_tables_its_cells_and_resumes_without_training(
    tiny: None, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    runs, out = tmp_path / "runs", tmp_path / "results"
    argv = [*ARGS, "--seeds", "2", "--runs", str(runs), "--results", str(out)]
    assert main(argv) == 0
    data = json.loads((out / "continuous.json").read_text())
    assert not data["partial"] and data["settings"]["bins"] == 7
    rows = {r["agent"]: r for r in data["rows"]}
    assert set(rows) == {"ppo", "xlvin-gaussian"}
    finals = {}
    for agent, row in rows.items():
        assert row["env"] == "Pendulum-v1" and row["steps"] == 64 and row["seeds"] == [0, 1]
        assert row["unfinished"] == {}
        finals[agent] = [json.loads((runs / "64-steps" / "Pendulum-v1" / agent / f"seed{s}" /
                                     table1.EVAL_FILE).read_text())["mean"] for s in (0, 1)]
        assert row["final"] == {**summarize(np.array(finals[agent])), "per_seed": finals[agent]}
    assert rows["xlvin-gaussian"]["over_ppo"] == {
        **improvement_over(finals["xlvin-gaussian"], finals["ppo"]), "ppo_seeds": 2}
    assert "over_ppo" not in rows["ppo"]
    assert all(r["env_steps"] == 64 for r in data["runs"]) and len(data["runs"]) == 4
    md = (out / "continuous.md").read_text()
    assert "### Pendulum-v1, 64 env steps" in md and "Partial" not in md
    assert (out / "continuous.png").stat().st_size > 0

    def no_training(*args: object, **kwargs: object) -> None:
        raise AssertionError("a finished cell was trained again")

    monkeypatch.setattr(final_eval, "train_run", no_training)
    monkeypatch.setattr(final_eval, "evaluate_run", no_training)
    (out / "continuous.json").unlink()
    md = continuous.reproduce("Pendulum-v1", "ppo,xlvin-gaussian", seeds=2, budget="64",
                              runs=runs, results=out, jobs=1)  # the same from Python
    assert json.loads((out / "continuous.json").read_text())["rows"] == data["rows"]
    assert md == (out / "continuous.md").read_text()

    # a third seed: pending, and one with a config but no summary: started (to resume)
    started = runs / "64-steps" / "Pendulum-v1" / "ppo" / "seed3"
    started.mkdir(parents=True)
    (started / "config.json").write_text("{}")
    more = [*ARGS, "--seeds", "4", "--runs", str(runs), "--results", str(out)]
    assert main([*more, "--include-running"]) == 0
    partial = json.loads((out / "continuous.json").read_text())
    rows = {r["agent"]: r for r in partial["rows"]}
    assert partial["partial"]
    assert rows["ppo"]["unfinished"] == {"2": "pending", "3": "started"}
    assert rows["xlvin-gaussian"]["unfinished"] == {"2": "pending", "3": "pending"}
    assert rows["ppo"]["final"] == data["rows"][0]["final"]  # over the finished seeds only
    md = (out / "continuous.md").read_text()
    assert "**Partial table: 4 cells have not finished**" in md
    assert "s2 (pending), s3 (started)" in md
    chosen = continuous.cells_from_options("Pendulum-v1", "ppo,xlvin-gaussian", 4, 0, "64")
    with pytest.raises(UserError, match="4 cells have not finished"):
        continuous.table(chosen, runs, out)


def test_kept_rows_of_other_envs_stay_in_the_table(tmp_path: Path) -> None:
    record = {"env": "Pendulum-v1", "steps": 64, "agent": "ppo", "seed": 0, "final_return": -1.0,
              "wall_seconds": 1.0}
    continuous.write_results([record], tmp_path)
    other = {**record, "env": "MountainCarContinuous-v0", "final_return": 3.0}
    continuous.write_results([other, {**other, "agent": "xlvin-uniform", "final_return": 5.0}],
                             tmp_path)
    rows = json.loads((tmp_path / "continuous.json").read_text())["rows"]
    assert [(r["env"], r["agent"]) for r in rows] == [
        ("MountainCarContinuous-v0", "ppo"), ("MountainCarContinuous-v0", "xlvin-uniform"),
        ("Pendulum-v1", "ppo")]
    assert rows[1]["over_ppo"]["p"] == 1.0


def test_cells_recorded_in_the_results_count_as_finished_where_their_run_dirs_are_gone(
    tmp_path: Path
) -> None:
    runs, out = tmp_path / "runs", tmp_path / "results"
    chosen = continuous.cells_from_options("Pendulum-v1", "ppo", 3, 0, "64")
    recorded = [{**dataclasses.asdict(c), "final_return": -100.0 * (c.seed + 1), "wall_seconds": 1.0}
                for c in chosen[:2]]
    stranger = {**recorded[0], "seed": 7, "final_return": 5.0}  # not chosen: left out
    continuous.write_results([*recorded, stranger], out)
    partial = json.loads((out / "continuous.json").read_text())
    continuous.table(chosen, runs, out, include_running=True)
    data = json.loads((out / "continuous.json").read_text())
    assert data["runs"] == recorded and partial["rows"][0]["seeds"] == [0, 1, 7]
    row = data["rows"][0]
    assert row["seeds"] == [0, 1] and row["unfinished"] == {"2": "pending"}
    assert row["final"]["per_seed"] == [-100.0, -200.0]
    with pytest.raises(UserError, match="1 cells have not finished"):
        continuous.table(chosen, runs, out)
