"""Probes of h_s and chi_s (`xlvin.experiments.executor_probes`): a probe on V* itself, the
optimal actions and the swaps by hand, and `xlvin reproduce executor-probes` on tiny trained maze
runs, with its refusals."""

import json
from pathlib import Path

import numpy as np
import pytest

from tests.tiny_runs import tiny_maze_runs
from xlvin.cli import main
from xlvin.envs.maze_data import maze_split
from xlvin.experiments.executor_latent_trees import maze_states_of
from xlvin.experiments.executor_probes import (
    features,
    optimal_actions,
    others,
    policy_moves,
    probe_scores,
)
from xlvin.experiments.executor_probes_report import markdown, page_blocks
from xlvin.io.saves import file_digest
from xlvin.run.training import load_run


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory, executor_path: Path) -> Path:
    return tiny_maze_runs(tmp_path_factory.mktemp("runs"), executor_path)


def test_a_probe_on_v_star_itself_explains_it_and_no_feature_does_not() -> None:
    train, test = (maze_states_of(maze_split(8, split), 6) for split in ("train", "test"))
    v_train, v_test = train.q_star.max(1, keepdims=True), test.q_star.max(1, keepdims=True)
    exact = probe_scores((v_train, train.q_star), (v_test, test.q_star))
    assert exact["value_r2"] == pytest.approx(1.0, abs=1e-9)
    # Q* as features: the optimal actions' indicator is not linear in it, but close
    assert probe_scores((train.q_star, train.q_star), (test.q_star, test.q_star))[
        "action_accuracy"] > 0.5
    none = probe_scores((np.zeros((len(v_train), 0)), train.q_star),
                        (np.zeros((len(v_test), 0)), test.q_star))
    assert none["value_r2"] <= 0.0  # the training mean, scored about the held-out one
    assert 0 < none["action_accuracy"] < 1


def test_optimal_actions_keep_ties_and_others_are_never_the_state_itself() -> None:
    q = np.array([[1.0, 1.0 - 1e-12, 0.0], [0.0, 2.0, 1.0]])
    assert optimal_actions(q).tolist() == [[True, True, False], [False, True, False]]
    other = others(50)
    assert (other != np.arange(50)).all() and other.min() >= 0 and other.max() < 50
    assert (others(50) == other).all()  # seeded


def test_the_policy_moves_only_when_the_input_read_is_another(runs: Path) -> None:
    agent, _ = load_run(runs / "maze" / "xlvin-32-b2" / "seed100")
    states = maze_states_of(maze_split(8, "test"), 2)
    x = features(agent, states.obs)
    assert {k: v.shape for k, v in x.items()} == {
        "h": (len(states.obs), 10), "chi": (len(states.obs), 16),
        "h+chi": (len(states.obs), 26), "none": (len(states.obs), 0)}
    itself = policy_moves(agent, x["h"], x["chi"], np.arange(len(states.obs)))
    assert itself == {"chi": {"tv": 0.0, "greedy_changed": 0.0},
                      "h": {"tv": 0.0, "greedy_changed": 0.0}}
    moved = policy_moves(agent, x["h"], x["chi"], others(len(states.obs)))
    assert all(0 <= m["tv"] <= 1 and 0 <= m["greedy_changed"] <= 1 for m in moved.values())


def test_reproduce_on_tiny_trained_runs(runs: Path, tmp_path: Path,
                                        capsys: pytest.CaptureFixture) -> None:
    results = tmp_path / "results" / "why-executor"
    assert main(["reproduce", "executor-probes", "--runs", str(runs), "--results", str(results),
                 "--seeds", "2", "--arms", "xlvin-32-b2,ppo-32-transe,ppo-32", "--mazes", "3",
                 "--train-mazes", "5", "--jobs", "1"]) == 0
    assert capsys.readouterr().out.endswith(
        f"wrote {results}/probes.md, .json, .png from 3 cells; runs under {runs}\n")
    data = json.loads((results / "probes.json").read_text())
    assert (results / "probes.md").read_text() == markdown(data)
    assert (results / "probes.png").read_bytes().startswith(b"\x89PNG")
    assert [(r["arm"], r["seed"], r["policy"]) for r in data["runs"]] == [
        ("xlvin-32-b2", 100, "final"), ("xlvin-32-b2", 101, "after level 1"),
        ("ppo-32-transe", 100, "final")]
    xlvin, ppo = data["rows"]
    assert set(xlvin["probes"]) == {"h", "chi", "h+chi", "none"} and xlvin["seeds"] == [100, 101]
    assert set(ppo["probes"]) == {"h", "none"} and ppo["moves"] is None
    for run in data["runs"]:
        assert run["states"] == data["setup"]["states"]
        assert run["digest"] == file_digest(runs / run["run"] / (
            "model.safetensors" if run["policy"] == "final" else "levels/level-01.safetensors"))
        for scores in run["probes"].values():
            assert scores["value_r2"] <= 1 and 0 <= scores["action_accuracy"] <= 1
    for swap in xlvin["moves"].values():
        assert 0 <= swap["tv"]["iqm"] <= 1 and 0 <= swap["greedy_changed"]["iqm"] <= 1
    block = page_blocks(tmp_path / "results")["why-probes"]
    assert block.startswith(f"On {data['setup']['states']['test']} held-out 8x8 states")
    assert "another state's chi_s moves the policy" in block
    assert "XLVIN (maze executor) (2 seeds): V* R^2 from h_s" in block
    # a later call bringing one cell keeps the two it does not bring (measured elsewhere)
    assert main(["reproduce", "executor-probes", "--runs", str(runs), "--results", str(results),
                 "--seeds", "1", "--arms", "ppo-32-transe", "--mazes", "3", "--train-mazes",
                 "5", "--jobs", "1"]) == 0
    assert json.loads((results / "probes.json").read_text()) == data
    # other training mazes than the kept cells': one line before anything is measured
    capsys.readouterr()
    assert main(["reproduce", "executor-probes", "--runs", str(runs), "--results", str(results),
                 "--seeds", "1", "--mazes", "3", "--train-mazes", "4", "--jobs", "1"]) == 2
    err = capsys.readouterr().err.strip()
    assert "measured with train_mazes 5, not 4 as now" in err and len(err.splitlines()) == 1
    assert json.loads((results / "probes.json").read_text()) == data
    # a results file that is not the code's is refused before anything is measured
    (results / "probes.json").write_text(json.dumps({"runs": [{"arm": "xlvin-32-b2"}]}))
    assert main(["reproduce", "executor-probes", "--runs", str(runs), "--results", str(results),
                 "--seeds", "1", "--mazes", "3", "--train-mazes", "5", "--jobs", "1"]) == 2
    assert "probes.json" in capsys.readouterr().err


@pytest.mark.parametrize("extra, message", [
    (["--arms", "xlvin-32-b2-oracle"], "unknown arm 'xlvin-32-b2-oracle'"),
    (["--mazes", "-1"], "--mazes must be in [0, 833]"),
    (["--train-mazes", "0"], "--train-mazes must be in [1, 5000]"),
    (["--seeds", "1"], "none of the 6 cells has a finished run or a passed level"),
])
def test_bad_input_is_one_line_and_writes_nothing(
    extra: list[str], message: str, runs: Path, tmp_path: Path, capsys: pytest.CaptureFixture
) -> None:
    before = sorted(str(p) for p in runs.rglob("*"))
    results = tmp_path / "results"
    assert main(["reproduce", "executor-probes", "--runs", str(runs), "--results", str(results),
                 "--first-seed", "102", *extra]) != 0
    err = capsys.readouterr().err.strip()
    assert message in err and len(err.splitlines()) == 1, err
    assert not results.exists() and sorted(str(p) for p in runs.rglob("*")) == before
