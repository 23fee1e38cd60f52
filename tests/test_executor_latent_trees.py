"""The latent tree against the true one (`xlvin.experiments.executor_latent_trees`): the
true-successor oracle scores hits@1 = 1 at distance 0, and `xlvin reproduce
executor-latent-trees` on tiny trained maze runs, with its refusals."""

import json
from pathlib import Path

import pytest
import torch
from torch import nn

from tests.tiny_runs import tiny_maze_runs
from xlvin.cli import main
from xlvin.envs.maze import AGENT, WALLS
from xlvin.envs.maze_data import MOVES, maze_split
from xlvin.experiments.executor_latent_trees import (latent_tree_scores, maze_states_of,
                                                     uniform_guess)
from xlvin.experiments.executor_latent_trees_report import markdown, page_blocks


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory, executor_path: Path) -> Path:
    return tiny_maze_runs(tmp_path_factory.mktemp("runs"), executor_path)


def oracle(h: torch.Tensor, actions: torch.Tensor) -> torch.Tensor:
    """The true successor of flattened observations h [n, 3 H W] under actions [n]: the agent
    moved by the action, or left where it is when a wall or the border is in the way."""
    obs = h.view(len(h), 3, 8, 8).clone()
    agent = obs[:, AGENT].flatten(1).argmax(1)
    move = torch.as_tensor(MOVES)[actions]  # [n, 2]
    row, col = agent // 8 + move[:, 0], agent % 8 + move[:, 1]
    inside = (row >= 0) & (row < 8) & (col >= 0) & (col < 8)
    free = inside & (obs[torch.arange(len(h)), WALLS, row.clamp(0, 7), col.clamp(0, 7)] == 0)
    target = torch.where(free, row * 8 + col, agent)
    obs[:, AGENT] = 0.0
    obs[:, AGENT].view(len(h), -1)[torch.arange(len(h)), target] = 1.0
    return obs.flatten(1)


def test_the_true_successor_oracle_hits_every_time_at_distance_zero() -> None:
    """With the observation itself as the encoding and the environment's successor as the
    transition, every depth scores hits@1 = 1 and distance 0; no move hits only where the
    action crashes (the agent stays)."""
    states = maze_states_of(maze_split(8, "test"), 3)
    scores = latent_tree_scores(nn.Flatten(), oracle, states, depth=3)
    assert [s["depth"] for s in scores] == [1, 2, 3]
    for s in scores:
        assert s["hit"] == 1.0 and s["moved_hit"] == 1.0
        assert s["distance"] == 0.0 and s["relative"] == 0.0
        assert 0 < s["stay_hit"] < 1 and s["stay_relative"] > 0 and s["spread"] > 0
        assert s["pairs"] % 8 == 0 and 0 < s["moves"] < s["pairs"]
    assert scores[0]["pairs"] == 8 * len(states.maze)  # depth 1: every action of every root


def test_the_chance_level_is_one_over_the_distinct_successors_of_each_node() -> None:
    """`uniform_guess` against a walk of the true trees cell by cell (the environment's rules:
    a move into a wall or off the grid, or onto the goal, ends the episode)."""
    mazes, count, depth = maze_split(8, "test"), 2, 3
    states = maze_states_of(mazes, count)
    sums = [[0.0, 0, 0.0, 0] for _ in range(depth)]  # chance, pairs; where it moves: the same
    for obs, maze in zip(states.obs, states.maze):
        walls, goal = mazes.walls[maze], tuple(mazes.goals[maze])
        nodes = [divmod(int(obs[AGENT].argmax()), 8)]
        for total in sums:
            children = []
            for r, c in nodes:
                moves = [(r + dr, c + dc) for dr, dc in MOVES]
                free = [0 <= m[0] < 8 and 0 <= m[1] < 8 and not walls[m] for m in moves]
                targets = [m if ok else (r, c) for m, ok in zip(moves, free)]
                chance = 1 / len(set(targets))
                total[0], total[1] = total[0] + 8 * chance, total[1] + 8
                total[2], total[3] = total[2] + sum(free) * chance, total[3] + sum(free)
                children += [m for m, ok in zip(moves, free) if ok and m != goal]
            nodes = children
    guess = uniform_guess(states, depth)
    assert [g["depth"] for g in guess] == [1, 2, 3]
    for g, (chance, pairs, moved, moves) in zip(guess, sums):
        assert g["hit"] == pytest.approx(chance / pairs, rel=1e-12)
        assert g["moved_hit"] == pytest.approx(moved / moves, rel=1e-12)
        assert 1 / 8 <= g["moved_hit"] < g["hit"] < 1


def test_reproduce_on_tiny_trained_runs(runs: Path, tmp_path: Path,
                                        capsys: pytest.CaptureFixture) -> None:
    results = tmp_path / "results" / "why-executor"
    assert main(["reproduce", "executor-latent-trees", "--runs", str(runs), "--results",
                 str(results), "--seeds", "3", "--mazes", "3", "--depth", "2",
                 "--jobs", "1"]) == 0
    assert capsys.readouterr().out.endswith(
        f"wrote {results}/latent-trees.md, .json, .png from 3 cells; runs under {runs}\n")
    data = json.loads((results / "latent-trees.json").read_text())
    assert (results / "latent-trees.md").read_text() == markdown(data)
    assert data["uniform_guess"] == uniform_guess(maze_states_of(maze_split(8, "test"), 3), 2)
    assert (results / "latent-trees.png").read_bytes().startswith(b"\x89PNG")
    assert [(r["arm"], r["seed"], r["policy"]) for r in data["runs"]] == [
        ("xlvin-32-b2", 100, "final"), ("xlvin-32-b2", 101, "after level 1"),
        ("ppo-32-transe", 100, "final")]
    assert [(r["agent"], r["depth"], r["seeds"]) for r in data["rows"]] == [
        ("xlvin-32-b2", 1, [100, 101]), ("xlvin-32-b2", 2, [100, 101]),
        ("ppo-32-transe", 1, [100]), ("ppo-32-transe", 2, [100])]
    for run in data["runs"]:
        assert run["states"] == data["setup"]["states"] and len(run["depths"]) == 2
        for s in run["depths"]:
            assert 0 <= s["hit"] <= 1 and 0 <= s["moved_hit"] <= 1 and 0 <= s["stay_hit"] <= 1
            assert s["relative"] > 0 and s["distance"] > 0 and s["spread"] > 0
    depth1 = data["runs"][0]["depths"][0]
    assert depth1["pairs"] == 8 * data["setup"]["states"]
    # the no-move reference does not depend on the transition model: the same for one encoder
    assert data["runs"][0]["depths"][0]["stay_hit"] == data["runs"][1]["depths"][0]["stay_hit"]
    row = data["rows"][0]
    assert row["hit"]["per_seed"] == [r["depths"][0]["hit"] for r in data["runs"][:2]]
    assert row["hit"]["iqm_low"] <= row["hit"]["iqm"] <= row["hit"]["iqm_high"]
    block = page_blocks(tmp_path / "results")["why-latent-trees"]
    assert block.startswith(f"On {data['setup']['states']} held-out 8x8 states")
    assert "XLVIN (maze executor) (2 seeds) at depth 2: hits@1" in block
    assert "PPO-32 + TransE term (1 seed) at depth 1" in block
    # a later call (another machine: the runs of seed 101 gone) keeps the cells it does not bring
    common = ["--runs", str(runs), "--results", str(results), "--depth", "2", "--jobs", "1"]
    assert main(["reproduce", "executor-latent-trees", *common, "--seeds", "1",
                 "--mazes", "3"]) == 0
    assert json.loads((results / "latent-trees.json").read_text()) == data
    # --skip-recorded measures only the policies the results do not hold measured (by their
    # files' digests): none here, so nothing is measured or written
    capsys.readouterr()
    assert main(["reproduce", "executor-latent-trees", *common, "--seeds", "3", "--mazes", "3",
                 "--skip-recorded"]) == 0
    out = capsys.readouterr()
    assert "3 of the 3 cells are already in" in out.out and "latent trees" not in out.err
    assert json.loads((results / "latent-trees.json").read_text()) == data
    # a record of another policy file (its digest) is measured again, the others kept
    other = json.loads(json.dumps(data))
    other["runs"][1]["digest"], other["runs"][1]["states"] = "0" * 64, -1
    (results / "latent-trees.json").write_text(json.dumps(other))
    assert main(["reproduce", "executor-latent-trees", *common, "--seeds", "3", "--mazes", "3",
                 "--skip-recorded"]) == 0
    assert "2 of the 3 cells are already in" in capsys.readouterr().out
    assert json.loads((results / "latent-trees.json").read_text()) == data
    # --ended-only: the run still training (seed 101, after level 1) is left out
    assert main(["reproduce", "executor-latent-trees", *common, "--seeds", "3", "--mazes", "3",
                 "--ended-only", "--results", str(tmp_path / "ended")]) == 0
    ended = json.loads((tmp_path / "ended" / "latent-trees.json").read_text())
    assert [(r["arm"], r["seed"], r["policy"]) for r in ended["runs"]] == [
        ("xlvin-32-b2", 100, "final"), ("ppo-32-transe", 100, "final")]
    # measured otherwise, they are not mixed: one line before anything is measured (no
    # progress bar), the file left as it was
    capsys.readouterr()
    assert main(["reproduce", "executor-latent-trees", *common, "--seeds", "1",
                 "--mazes", "2"]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("xlvin: error: ") and len(err.splitlines()) == 1, err
    assert "measured with mazes 3, not 2 as now" in err
    assert json.loads((results / "latent-trees.json").read_text()) == data


@pytest.mark.parametrize("extra, message", [
    (["--arms", "ppo-32"], "unknown arm 'ppo-32'"),
    (["--mazes", "5000"], "--mazes must be in [0, 833]"),
    (["--depth", "0"], "--depth must be >= 1"),
    (["--first-seed", "7"], "none of the 100 cells has a finished run or a passed level"),
])
def test_bad_input_is_one_line_and_writes_nothing(
    extra: list[str], message: str, runs: Path, tmp_path: Path, capsys: pytest.CaptureFixture
) -> None:
    before = sorted(str(p) for p in runs.rglob("*"))
    results = tmp_path / "results"
    assert main(["reproduce", "executor-latent-trees", "--runs", str(runs), "--results",
                 str(results), *extra]) != 0
    err = capsys.readouterr().err.strip()
    assert message in err and len(err.splitlines()) == 1, err
    assert not results.exists() and sorted(str(p) for p in runs.rglob("*")) == before
