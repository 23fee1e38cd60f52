"""The oracle arm beside the maze study (`oracle_report`): each cell read on levels 1-4, the
pairs worded by their intervals, and a verdict on the latent tree only from 10 cells an arm."""

import json
from pathlib import Path

import pytest

from xlvin.experiments import executor_why_report as why
from xlvin.experiments import oracle_report as oracle
from xlvin.experiments.maze_ablation import HORIZON

CURRICULUM = {"budget": 200000, "dataset": "generated", "dataset_seed": 0, "eval_per_level": 250,
              "first_level": 1, "last_level": 4, "ood_size": 0, "size": 8, "threshold": 0.95,
              "window": 1000}


def _record(agent: str, seed: int, steps: list[int], passed: bool = True,
            held_out: float = 0.9) -> dict:
    """A cell that passed a level every `steps` entry (the last failed unless `passed`)."""
    levels = [{"level": i + 1, "env_steps": s, "episodes": s // 4, "passed": True,
               "held_out": {"8": {str(d): held_out for d in range(1, 9)}}}
              for i, s in enumerate(steps)]
    if not passed:
        levels[-1] = {"level": len(steps), "env_steps": steps[-1], "episodes": 1, "passed": False}
    return {"agent": agent, "seed": seed, "curriculum": CURRICULUM, "levels": levels,
            "in_progress": None, "failed_level": None if passed else len(steps)}


def test_a_cell_is_read_at_level_4_whatever_came_after() -> None:
    full = _record("xlvin-32-b2", 100, [100, 200, 300, 400, 500, 600])
    assert oracle.level_scores(full) == {"steps": 1000, "held_out_8": pytest.approx(0.9)}
    assert oracle.level_scores(_record("xlvin-32-b2", 100, [100, 200], passed=False)) == {
        "steps": HORIZON, "held_out_8": None}
    assert oracle.level_scores(_record("xlvin-32-b2", 100, [100, 200, 300])) is None


def test_only_cells_of_the_protocol_are_read() -> None:
    """A cell of another curriculum (a --quick one, another budget, one that ends before level
    4) is not read beside the oracle's; the study's full curriculum is."""
    ours = _record("xlvin-32-b2", 100, [100] * 4)
    full = {**ours, "curriculum": {**CURRICULUM, "last_level": 0, "ood_size": 16}}
    others = [{**ours, "curriculum": {**CURRICULUM, "budget": 20000}},
              {**ours, "curriculum": {**CURRICULUM, "threshold": 0.8}},
              {**ours, "curriculum": {**CURRICULUM, "last_level": 3}}]
    assert oracle.on_protocol(ours) and oracle.on_protocol(full)
    assert not any(oracle.on_protocol(r) for r in others)
    assert oracle.arm_scores([full, *others], {"XLVIN": "xlvin-32-b2"})["XLVIN"]["seeds"] == [100]


def _write(results: Path, oracle_steps: dict[str, int], seeds: int) -> None:
    (results / "oracle").mkdir(parents=True)
    (results / "ablation").mkdir()
    runs = [_record(agent, 105 + s, [steps + 1000 * s] * 4)
            for agent, steps in oracle_steps.items() for s in range(seeds)]
    (results / "oracle/maze.json").write_text(json.dumps({"runs": runs}))
    study = [_record(agent, 100 + s, [100_000 + 1000 * s] * 10)
             for agent in oracle.STUDY.values() for s in range(12)]
    (results / "ablation/maze.json").write_text(json.dumps({"runs": study}))


@pytest.mark.parametrize("steps, said", [
    ({"xlvin-32-b2-oracle": 10_000, "xlvin-32-b2-oracle-untrained": 90_000,
      "xlvin-32-b2-oracle-zero-chi": 90_000}, "the learned latent tree (b) is what breaks"),
    ({"xlvin-32-b2-oracle": 10_000, "xlvin-32-b2-oracle-untrained": 10_000,
      "xlvin-32-b2-oracle-zero-chi": 90_000}, "the latent tree (b) is not what breaks"),
])
def test_the_verdict_follows_the_oracle_arms_intervals(steps: dict[str, int], said: str,
                                                       tmp_path: Path) -> None:
    _write(tmp_path, steps, 10)
    block = oracle.page_blocks(tmp_path)["why-oracle"]
    assert said in block
    assert "oracle, maze executor is ahead of XLVIN (10 and 12 seeds" in block


def test_no_verdict_from_fewer_than_10_cells_an_arm(tmp_path: Path) -> None:
    _write(tmp_path, {"xlvin-32-b2-oracle": 10_000, "xlvin-32-b2-oracle-untrained": 90_000,
                      "xlvin-32-b2-oracle-zero-chi": 90_000}, 9)
    block = oracle.page_blocks(tmp_path)["why-oracle"]
    assert "breaks" not in block and "which it has not yet" in block
    assert ("oracle, maze executor and oracle, untrained executor are not compared (9 seeds "
            "each") in block
    assert "oracle, maze executor 9 cells (seeds 105-113)" in block
    assert oracle.page_blocks(tmp_path)["why-oracle-headline"].endswith(
        "chi = 0: 9, 9, 9 of 10 cells): too few cells to read yet.")
    assert oracle.page_blocks(tmp_path / "nothing") == {}
    (tmp_path / "oracle/maze.json").unlink()
    block = oracle.page_blocks(tmp_path)["why-oracle"]
    assert "no cell yet of oracle, maze executor, oracle, untrained executor, oracle," in block
    assert "oracle, maze executor and" not in block and "XLVIN and XLVIN, chi = 0" in block


def test_the_reading_of_docs_says_the_oracle_verdict(tmp_path: Path) -> None:
    _write(tmp_path, {"xlvin-32-b2-oracle": 10_000, "xlvin-32-b2-oracle-untrained": 90_000,
                      "xlvin-32-b2-oracle-zero-chi": 90_000}, 10)
    folder = tmp_path / "why-executor"
    folder.mkdir()
    (folder / "true-trees.json").write_text(json.dumps({"setup": {"mazes": 1}, "comparisons": []}))
    (folder / "latent-trees.json").write_text(json.dumps({"rows": [
        {"arm": "XLVIN", "depth": 1, "seeds": list(range(9))}]}))
    (folder / "probes.json").write_text(json.dumps({"rows": [{"seeds": list(range(9))}]}))
    reading = why.page_blocks(tmp_path)["why-reading"]
    assert "`xlvin-32-b2-oracle` 10 of 10" in reading
    assert "it says that on the true tree the pre-trained executor is ahead of both" in reading


def test_the_reproduce_entry_runs_the_declared_protocol_seed_by_seed(tmp_path: Path) -> None:
    """`xlvin reproduce executor-oracle`: seeds 105-114, levels 1-4, held-out 8x8 only, the
    three agents of a seed together; the same cells (directories and configs) as `reproduce
    maze` with the protocol's flags, so runs of either resume under the other."""
    from xlvin.cli import build_parser
    from xlvin.experiments import maze
    from xlvin.experiments.registry import EXPERIMENTS

    args = build_parser().parse_args(["reproduce", "executor-oracle", "--seeds", "2"])
    assert args.first_seed == 105
    cells = EXPERIMENTS["executor-oracle"].cells(2, args)
    assert [(c.agent, c.seed) for c in cells] == [
        (agent, seed) for seed in (105, 106) for agent in oracle.ORACLE.values()]
    curriculum = cells[0].config().curriculum
    assert (curriculum.last_level, curriculum.ood_size, curriculum.budget) == (4, 0, 200_000)
    flags = build_parser().parse_args(
        ["reproduce", "maze", "--agents", ",".join(oracle.ORACLE.values()), "--budget",
         "200000", "--last-level", "4", "--ood-size", "0", "--seeds", "2", "--first-seed", "105"])
    same = maze.cells_from_options("maze", 2, flags, 105)
    assert sorted((c.run_dir(tmp_path), c.config().to_json().__repr__()) for c in cells) == sorted(
        (c.run_dir(tmp_path), c.config().to_json().__repr__()) for c in same)


def test_skip_recorded_leaves_the_cells_the_results_hold(tmp_path: Path) -> None:
    """`--skip-recorded`: a cell whose ended record results/oracle/maze.json holds (trained on
    another machine) is not trained again; one still training there is."""
    from xlvin.cli import build_parser
    from xlvin.experiments import maze_report
    from xlvin.experiments.registry import EXPERIMENTS

    args = build_parser().parse_args(["reproduce", "executor-oracle", "--seeds", "1"])
    cells = EXPERIMENTS["executor-oracle"].cells(1, args)
    runs = [_record(cells[0].agent, 105, [1000] * 4),
            {**_record(cells[1].agent, 105, [1000] * 2),
             "in_progress": {"level": 3, "episodes": 5, "window_success": 0.5}}]
    for run in runs:
        run.update({"experiment": "maze", "levels_passed": [h["level"] for h in run["levels"]],
                    "env_steps": sum(h["env_steps"] for h in run["levels"]),
                    "steps_per_second": 100.0, "episodes": 10, "wall_seconds": 40.0})
    (tmp_path / "maze.json").write_text(json.dumps({"runs": runs}))
    held = maze_report.recorded(tmp_path)
    assert [held(c) for c in cells] == [True, False, False]
