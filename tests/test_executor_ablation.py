"""The executor ablation (`xlvin reproduce executor-ablation`): its arms, its cells, its table."""

import dataclasses
import json
from pathlib import Path

import pytest

from xlvin.cli import main
from xlvin.experiments import executor_ablation as ablation
from xlvin.experiments import table1


def test_arms_share_cells_where_they_coincide() -> None:
    cells = ablation.cells(["paper", "ours"], ["CartPole-v0"], [0, 1])
    # 7 arms per protocol, one of which (K = 1 under paper, K = 2 under ours) is XLVIN-R itself
    assert len(cells) == 2 * 6 * 2
    assert table1.Cell("paper", "CartPole-v0", "xlvin-r", 0) in cells
    assert table1.Cell("ours", "CartPole-v0", "xlvin-r", 1, variant="depth-1") in cells
    for cell in cells:
        assert cell.variant in table1.VARIANTS  # every arm is a real Table-1 variant


def record(protocol: str, arm: str, seed: int, final: float, best: float,
           init: str | None = None) -> dict:
    init = init or ablation.PROTOCOL_INIT[protocol]
    agent, variant = ablation.arm_variant(protocol, init, arm)
    return {"protocol": protocol, "env": "CartPole-v0", "agent": agent, "variant": variant,
            "seed": seed, "arm": arm, "final_return": final, "max_eval_return": best,
            "init": init}


def test_an_init_other_than_the_protocols_is_a_variant_of_every_arm() -> None:
    own = ablation.cells(["paper"], ["CartPole-v0"], [0])
    both = ablation.cells(["paper"], ["CartPole-v0"], [0], ["pytorch", "orthogonal"])
    assert set(own) < set(both) and len(both) == 2 * len(own)
    orthogonal = set(both) - set(own)
    assert table1.Cell("paper", "CartPole-v0", "xlvin-r", 0, variant="orthogonal-init") in orthogonal
    assert table1.Cell("paper", "CartPole-v0", "xlvin-r", 0,
                       variant="orthogonal-init+untrained-executor") in orthogonal
    for cell in both:
        cfg = cell.config()
        assert cfg.train.init == ("orthogonal" if cell in orthogonal else "pytorch")
        base = table1.Cell("paper", "CartPole-v0", cell.agent, 0,
                           variant=cell.variant.replace("orthogonal-init", "").strip("+")).config()
        # the init is all that differs from the protocol's own cell of the arm
        assert cfg == dataclasses.replace(base, train=dataclasses.replace(base.train,
                                                                          init=cfg.train.init))
    ours = ablation.cells(["ours"], ["CartPole-v0"], [0], ["pytorch"])
    assert all(c.config().train.init == "pytorch" and c.variant.startswith("pytorch-init")
               for c in ours)


def test_each_init_is_compared_with_the_ppo_of_the_same_init(tmp_path: Path) -> None:
    records = [record("paper", "PPO + TransE term", s, 50.0, 60.0, "pytorch") for s in range(4)]
    records += [record("paper", "PPO + TransE term", s, 5.0, 6.0, "orthogonal") for s in range(4)]
    records += [record("paper", "XLVIN-R", s, 20.0 + s, 30.0, init)
                for s in range(4) for init in ("pytorch", "orthogonal")]
    md = ablation.write_results(records, tmp_path)
    rows = {(r["init"], r["arm"]): r
            for r in json.loads((tmp_path / "executor.json").read_text())["rows"]}
    assert rows[("pytorch", "XLVIN-R")]["final_over_ppo"]["p"] == 0.0
    assert rows[("orthogonal", "XLVIN-R")]["final_over_ppo"]["p"] == 1.0
    assert "| CartPole-v0 | orthogonal | XLVIN-R | 4 |" in md
    assert "| CartPole-v0 | pytorch (protocol's) | XLVIN-R | 4 |" in md


def test_rows_compare_each_arm_with_the_protocols_own_ppo(tmp_path: Path) -> None:
    records = [record("paper", "PPO + TransE term", s, 10.0 + s, 50.0) for s in range(4)]
    records += [record("paper", "XLVIN-R", s, 100.0 + s, 200.0) for s in range(4)]
    records += [record("paper", "XLVIN-R, chi = 0", s, float(s), 20.0) for s in range(4)]
    md = ablation.write_results(records, tmp_path)
    rows = {r["arm"]: r for r in json.loads((tmp_path / "executor.json").read_text())["rows"]}
    assert rows["XLVIN-R"]["final_over_ppo"]["p"] == 1.0
    assert rows["XLVIN-R, chi = 0"]["final_over_ppo"]["p"] == 0.0
    assert rows["XLVIN-R, chi = 0"]["max_eval_over_ppo"]["p"] == 0.0
    assert "final_over_ppo" not in rows["PPO + TransE term"]  # the baseline itself
    assert rows["XLVIN-R"]["final"]["per_seed"] == [100.0, 101.0, 102.0, 103.0]
    assert rows["XLVIN-R"]["final"]["iqm"] == pytest.approx(101.5)
    assert "| CartPole-v0 | pytorch (protocol's) | XLVIN-R | 4 | **101.5" in md
    assert (tmp_path / "executor.png").stat().st_size > 0


def test_finished_only_with_nothing_finished_is_one_line(tmp_path: Path, capsys) -> None:
    code = main(["reproduce", "executor-ablation", "--finished-only", "--runs", str(tmp_path),
                 "--results", str(tmp_path / "results")])
    err = capsys.readouterr().err.strip()
    assert code == 2 and err.startswith("xlvin: error: no cell of the ablation has finished")
    assert not (tmp_path / "results").exists()


def test_results_use_the_seeds_every_arm_has_finished(tmp_path: Path, accept_unsealed) -> None:
    """Seeds that only some arms have (Table 1's own cells, say) are left out of every arm (the
    cells written by hand, as runs from before seals were)."""
    def finish(cell: table1.Cell) -> None:
        run_dir = cell.run_dir(tmp_path)
        run_dir.mkdir(parents=True)
        progress = [{"updates": 1, "episodes": 10, "transitions": 300, "eval_return": 50.0}]
        (run_dir / "summary.json").write_text(json.dumps({
            "ppo": {"progress": progress, "episode_returns": [20.0]}, "ppo_episodes": 10,
            "ppo_transitions": 300, "transe_transitions": 0, "wall_seconds": 1.0}))
        (run_dir / table1.EVAL_FILE).write_text(json.dumps({"mean": 40.0, "std": 0.0}))

    for cell in ablation.cells(["paper"], ["CartPole-v0"], [0, 1]):
        finish(cell)
    finish(table1.Cell("paper", "CartPole-v0", "xlvin-r", 7))  # a seed of one arm only
    records = ablation.finished_records(tmp_path, ["paper"], ["CartPole-v0"])
    assert {r["seed"] for r in records} == {0, 1}
    assert len(records) == 2 * len(ablation.ARMS)


@pytest.mark.parametrize("inits", ["xavier", "pytorch,pytorch", ","])
def test_a_bad_init_is_one_line_and_creates_nothing(inits: str, tmp_path: Path, capsys) -> None:
    code = main(["reproduce", "executor-ablation", "--inits", inits, "--runs", str(tmp_path / "r"),
                 "--results", str(tmp_path / "results")])
    err = capsys.readouterr().err.strip()
    assert code == 2 and "init" in err and len(err.splitlines()) == 1, err
    assert not (tmp_path / "r").exists() and not (tmp_path / "results").exists()


def test_rows_of_another_init_in_the_results_are_kept(tmp_path: Path) -> None:
    """The committed rows of one init stay when the other init's cells are reported alone."""
    first = [record("paper", arm, s, 10.0 + s, 20.0, "pytorch")
             for arm in ("PPO + TransE term", "XLVIN-R") for s in range(3)]
    ablation.write_results(first, tmp_path)
    data = json.loads((tmp_path / "executor.json").read_text())
    for row in data["rows"]:
        del row["init"]  # as written before inits were an option
    (tmp_path / "executor.json").write_text(json.dumps(data))
    second = [record("paper", arm, s, 30.0, 40.0, "orthogonal")
              for arm in ("PPO + TransE term", "XLVIN-R") for s in range(3)]
    md = ablation.write_results(second, tmp_path)
    rows = json.loads((tmp_path / "executor.json").read_text())["rows"]
    assert [(r["init"], r["arm"]) for r in rows] == [
        ("pytorch", "PPO + TransE term"), ("pytorch", "XLVIN-R"),
        ("orthogonal", "PPO + TransE term"), ("orthogonal", "XLVIN-R")]
    assert rows[1]["final"]["per_seed"] == [10.0, 11.0, 12.0]
    assert "| CartPole-v0 | orthogonal | XLVIN-R | 3 |" in md
    # the same init again replaces its rows, not adds to them
    ablation.write_results(second, tmp_path)
    assert len(json.loads((tmp_path / "executor.json").read_text())["rows"]) == 4


def test_seeds_trained_on_several_machines_add_up_and_a_seed_again_replaces_its_own(
    tmp_path: Path
) -> None:
    """A study's first seeds, committed from one machine (their run directories gone), stay
    when the next seeds are reported on another; a seed reported again replaces its values."""
    arms = ("PPO + TransE term", "XLVIN-R")
    ablation.write_results([record("paper", arm, s, 10.0 + s, 20.0) for arm in arms
                            for s in range(3)], tmp_path)
    md = ablation.write_results([record("paper", arm, s, 50.0 + s, 60.0) for arm in arms
                                 for s in (2, 300, 301)], tmp_path)
    rows = json.loads((tmp_path / "executor.json").read_text())["rows"]
    assert [r["seeds"] for r in rows] == [[0, 1, 2, 300, 301]] * 2
    assert rows[1]["final"]["per_seed"] == [10.0, 11.0, 52.0, 350.0, 351.0]
    assert rows[1]["max_eval"]["per_seed"] == [20.0, 20.0, 60.0, 60.0, 60.0]
    assert "| CartPole-v0 | pytorch (protocol's) | XLVIN-R | 5 |" in md


def test_skip_recorded_trains_only_the_cells_the_results_do_not_hold(
    tmp_path: Path, monkeypatch, capsys
) -> None:
    """A study goes on on another machine: the seeds its results file holds are not retrained
    (every arm of seeds 0 and 1 here, written by a report); the other cells are."""
    arms = list(ablation.ARMS)
    ablation.write_results([record("paper", arm, s, 10.0, 20.0) for arm in arms for s in (0, 1)],
                           tmp_path / "results")
    trained: list[table1.Cell] = []

    def run_cells(experiment, cells, *args, **kwargs):  # trains nothing: no report follows
        trained.extend(cells)
        return [], 0.0

    monkeypatch.setattr("xlvin.commands.reproduce.run_cells", run_cells)
    args = ["reproduce", "executor-ablation", "--protocols", "paper", "--envs", "CartPole-v0",
            "--seeds", "3", "--runs", str(tmp_path / "runs"), "--results",
            str(tmp_path / "results")]
    assert main(args + ["--skip-recorded"]) == 2
    assert trained == ablation.cells(["paper"], ["CartPole-v0"], [2])
    assert "12 of the 18 cells are already in" in capsys.readouterr().out
    trained.clear()
    assert main(args) == 2  # without the option: every cell, as before
    assert len(trained) == 18
    assert main(args + ["--skip-recorded", "--finished-only"]) == 2
    assert "--skip-recorded" in capsys.readouterr().err and not trained[18:]


@pytest.mark.parametrize("separate", [False, True])
def test_the_prose_says_pre_training_adds_nothing_only_where_no_untrained_arm_is_separated(
    separate: bool, tmp_path: Path
) -> None:
    """The committed rows with every untrained executor's seeds made XLVIN-R's (P = 0.5), and
    then one setting's worse than XLVIN-R on every seed: the claim that pre-training adds
    nothing is made only in the first."""
    data = json.loads((Path(__file__).parents[1] / "results/ablation/executor.json").read_text())
    rows = {(r["protocol"], r["init"], r["env"], r["arm"]): r for r in data["rows"]}
    for (protocol, init, env, arm), row in rows.items():
        if arm == "XLVIN-R, untrained executor":
            for stat in ("final", "max_eval"):
                row[stat]["per_seed"] = rows[protocol, init, env, "XLVIN-R"][stat]["per_seed"]
    if separate:
        row = rows["ours", "orthogonal", "CartPole-v0", "XLVIN-R, untrained executor"]
        row["final"]["per_seed"] = [-1.0] * len(row["final"]["per_seed"])
    (tmp_path / "ablation").mkdir()
    (tmp_path / "ablation/executor.json").write_text(json.dumps(data))
    prose = ablation.page_blocks(tmp_path)["executor-prose"]
    claim = "pre-training the executor on value iteration adds nothing we can measure"
    assert (claim in prose) is not separate
