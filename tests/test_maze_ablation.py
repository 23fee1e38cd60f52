"""The maze executor ablation (`xlvin reproduce maze-ablation`): its arms differ from the committed
XLVIN in exactly the part they take away, its executors are what they say, and its statistics
(env steps to the last level, the level curve's area, held-out success, P(> PPO-32)) are computed
as documented, from run directories as `xlvin reproduce maze` leaves them."""

import dataclasses
import json
from pathlib import Path

import numpy as np
import pytest
import torch

from xlvin.cli import main
from xlvin.errors import UserError
from xlvin.experiments import maze, maze_ablation, maze_ablation_report
from xlvin.experiments.maze_ablation import ARMS, HORIZON, aggregate, cell_scores
from xlvin.io.run_dir import MetricsLogger
from xlvin.nn.executor import VIExecutor
from xlvin.ppo.curriculum import CurriculumConfig
from xlvin.pretrain.executor import pretrain_executor
from xlvin.pretrain.executor_config import DEFAULT_EXECUTORS
from xlvin.run.checks import check_run
from xlvin.envs.spaces import Spaces


def test_each_arm_differs_from_the_committed_xlvin_in_exactly_what_it_ablates() -> None:
    base = dataclasses.asdict(maze.Cell("maze", "xlvin-32-b2", 100).config().train)
    ppo = dataclasses.asdict(maze.Cell("maze", "ppo-32", 100).config().train)
    expected = {
        "xlvin-32-b2-untrained": (base, {"executor": "maze-untrained"}),
        "xlvin-32-b2-random": (base, {"executor": "maze-random"}),
        "xlvin-32-b2-zero-chi": (base, {"zero_chi": True}),
        "ppo-32-transe": (ppo, {"ppo_transe": True}),
    }
    for agent, (reference, changed) in expected.items():
        cfg = maze.Cell("maze", agent, 100).config()
        mine = dataclasses.asdict(cfg.train)
        assert {k: v for k, v in mine.items() if reference[k] != v} == changed, agent
        assert cfg.ppo == maze.MAZE_PPO
        assert check_run(cfg)[0] == Spaces((3, 8, 8), "maze", 8)
    assert set(ARMS.values()) == {"xlvin-32-b2", "ppo-32", *expected}
    assert base["init"] == "orthogonal"  # the committed preset's, stated in the docs


def test_the_ablated_executors_share_the_maze_executors_architecture() -> None:
    maze_cfg = DEFAULT_EXECUTORS["maze"]
    untrained, random = DEFAULT_EXECUTORS["maze-untrained"], DEFAULT_EXECUTORS["maze-random"]
    assert dataclasses.replace(untrained, epochs=maze_cfg.epochs) == maze_cfg and untrained.epochs == 0
    for cfg in (untrained, random):
        assert (cfg.hidden, cfg.layer_norm, cfg.aggregation, cfg.messages) == (
            maze_cfg.hidden, maze_cfg.layer_norm, maze_cfg.aggregation, maze_cfg.messages)
    assert random.family == DEFAULT_EXECUTORS["random"].family != maze_cfg.family
    # untrained: the initial weights of its seed, exactly
    executor, _ = pretrain_executor(dataclasses.replace(untrained, train_graphs=4), progress=False)
    torch.manual_seed(untrained.seed)
    fresh = VIExecutor(hidden=10, aggregation=untrained.aggregation, layer_norm=True)
    mine, theirs = executor.state_dict(), fresh.state_dict()
    assert mine.keys() == theirs.keys()
    assert all(torch.equal(mine[k], theirs[k]) for k in mine)


CURRICULUM = dataclasses.asdict(CurriculumConfig(last_level=3, budget=500, eval_per_level=5))


def record(agent: str, seed: int, level_steps: list[int], failed: bool = False,
           running: bool = False, held: float = 0.5) -> dict:
    """A cell's record with one history entry per level (the last one failed if `failed`)."""
    levels = []
    for i, steps in enumerate(level_steps):
        passed = not (failed and i == len(level_steps) - 1)
        entry = {"level": i + 1, "passed": passed, "episodes": steps // 3, "env_steps": steps,
                 "seconds": steps / 1000}
        if passed:
            entry["held_out"] = {side: {str(d): held for d in range(1, 17)} for side in ("8", "16")}
        levels.append(entry)
    return {"experiment": "maze", "agent": agent, "seed": seed, "curriculum": CURRICULUM,
            "levels": levels, "levels_passed": [h["level"] for h in levels if h["passed"]],
            "failed_level": levels[-1]["level"] if failed else None,
            "in_progress": {"level": 2, "episodes": 5, "window_success": 0.5} if running else None,
            "env_steps": sum(level_steps), "steps_per_second": 1000.0, "episodes": 1,
            "wall_seconds": 1.0}


def test_cell_scores_accumulate_levels_and_count_a_failure_at_the_horizon() -> None:
    done = cell_scores(record("ppo-32", 0, [1000, 2000, 3000], held=0.8))
    assert done["finished"] and done["levels"] == 3
    assert done["steps_at_pass"] == [1000, 3000, 6000] and done["steps_to_last"] == 6000
    assert done["seconds_at_pass"] == [1.0, 3.0, 6.0] and done["seconds_to_last"] == 6.0
    expected = ((HORIZON - 1000) + (HORIZON - 3000) + (HORIZON - 6000)) / (3 * HORIZON)
    assert done["area"] == pytest.approx(expected)
    assert done["held_out_last"]["8"] == pytest.approx(0.8)  # every level 0.8: weighted, 0.8
    failed = cell_scores(record("ppo-32", 1, [1000, 5000], failed=True))
    assert not failed["finished"] and failed["steps_to_last"] is None
    assert failed["steps_to_last_or_horizon"] == HORIZON and failed["held_out_last"] == {}
    assert failed["area"] == pytest.approx((HORIZON - 1000) / (3 * HORIZON))
    assert failed["area"] < done["area"]


def test_aggregate_compares_every_arm_with_ppo_32_in_the_right_direction() -> None:
    records = []
    for seed in range(4):  # XLVIN twice as fast as PPO-32 and better held out; one PPO fails
        records.append(record("xlvin-32-b2", seed, [1000, 1000, 1000 + seed], held=0.9))
        records.append(record("ppo-32", seed, [2000, 2000, 2000 + seed], held=0.6,
                              failed=seed == 3))
    records.append(record("xlvin-32-b2-zero-chi", 7, [1000], running=True))
    rows = {r["arm"]: r for r in aggregate(records)}
    xlvin, ppo = rows["XLVIN (maze executor)"], rows["PPO-32"]
    assert xlvin["steps_to_last_over_ppo"]["p"] == 1.0  # fewer steps is better
    assert xlvin["area_over_ppo"]["p"] == 1.0 and xlvin["held_out_8_over_ppo"]["p"] == 1.0
    assert "steps_to_last_over_ppo" not in ppo
    assert ppo["failed"] == {"3": 3} and ppo["finished"] == [0, 1, 2]
    assert sorted(ppo["steps_to_last"]["per_seed"]) == [6000, 6001, 6002, HORIZON]
    assert len(ppo["held_out_8"]["per_seed"]) == 3  # held out after the last level: finishers
    chi = rows["XLVIN, chi = 0"]
    assert chi["running"] == [7] and chi["seeds"] == [] and chi["steps_to_last"] is None
    assert rows["PPO-32 + TransE term"]["seeds"] == []


def test_the_executors_contribution_is_xlvin_against_each_arm_that_changes_only_it() -> None:
    records = []
    for seed in range(4):  # the untrained executor slower and worse held out; chi = 0 level
        records.append(record("xlvin-32-b2", seed, [1000, 1000, 1000 + seed], held=0.9))
        records.append(record("xlvin-32-b2-untrained", seed, [3000, 3000, 3000], held=0.5))
        records.append(record("xlvin-32-b2-zero-chi", seed, [1000, 1000, 1000 + seed], held=0.9))
    contribution = maze_ablation.executor_contribution(aggregate(records))
    assert list(contribution) == ["XLVIN, untrained executor", "XLVIN, chi = 0"]  # no random arm
    untrained, chi = contribution["XLVIN, untrained executor"], contribution["XLVIN, chi = 0"]
    assert untrained["steps_to_last"]["p"] == 1.0 and untrained["held_out_16"]["p"] == 1.0
    assert untrained["area"]["p"] == 1.0
    assert chi["steps_to_last"]["p"] == pytest.approx(0.5)  # the same cells: ties count half
    md = "\n".join(maze_ablation_report.contribution_markdown(contribution))
    assert "| XLVIN, untrained executor | 1.00 [1.00, 1.00] | 1.00 [1.00, 1.00] |" in md
    # each interval also family-wise over the 12 comparisons, never narrower
    assert maze_ablation.FAMILY == 12
    assert "family-wise over the 12 comparisons (Bonferroni: 99.58 %" in md
    for p in (p for arm in contribution.values() for p in arm.values()):
        assert p["family_low"] <= p["low"] <= p["p"] <= p["high"] <= p["family_high"]


def write_cell(root: Path, rec: dict) -> None:
    """A finished cell's run directory as `train_run` leaves it (the files the report reads):
    its metrics have, on level L, updates of approx KL 0.01 L, 0.02 L and 0.09 L (median 0.02 L),
    clip fraction 0.1 L (all three) and entropy 1 / L."""
    run_dir = maze.Cell("maze", rec["agent"], rec["seed"]).run_dir(root)
    run_dir.mkdir(parents=True)
    log, step = MetricsLogger(run_dir), 0
    for h in rec["levels"]:
        for kl in (0.01, 0.02, 0.09):
            step += 64
            log(step, {"curriculum/level": float(h["level"]), "losses/approx_kl": kl * h["level"],
                       "losses/clipfrac": 0.1 * h["level"], "losses/entropy": 1 / h["level"]})
    log.close()
    (run_dir / "summary.json").write_text(json.dumps({
        "curriculum": rec["levels"], "wall_seconds": 12.0,
        "ppo": {"env_steps": rec["env_steps"], "sps": 500.0, "episodes": 10}}))


def test_the_command_reports_the_cells_of_the_seeds_asked_for(
    tmp_path: Path, capsys: pytest.CaptureFixture, accept_unsealed: None
) -> None:
    """The cells are written by hand, as runs from before seals were."""
    rng = np.random.default_rng(0)
    for seed in (100, 101):
        for agent in ARMS.values():
            steps = [int(s) for s in rng.integers(1000, 5000, size=3)]
            write_cell(tmp_path / "runs", record(agent, seed, steps, held=0.7))
    write_cell(tmp_path / "runs", record("ppo-32", 102, [9000], failed=True))  # not asked for
    out = tmp_path / "results"
    args = ["reproduce", "maze-ablation", "--seeds", "2", "--last-level", "3", "--budget", "500",
            "--eval-per-level", "5", "--runs", str(tmp_path / "runs"), "--results", str(out)]
    assert main([*args, "--finished-only"]) == 0
    assert "12 of 12 cells ended" in capsys.readouterr().out
    data = json.loads((out / "maze.json").read_text())
    assert data["arms"] == ARMS and len(data["runs"]) == 12
    assert {r["arm"]: r["seeds"] for r in data["rows"]} == {arm: [100, 101] for arm in ARMS}
    assert (out / "maze.png").stat().st_size > 10_000
    md = (out / "maze.md").read_text()
    assert all(f"| {arm} | 2 (2 / 0) | 0 |" in md for arm in ARMS)
    # PPO's update sizes, read back from each cell's metrics: per level, medians over its updates
    sizes = data["runs"][0]["updates"]
    assert list(sizes) == ["1", "2", "3"]
    assert sizes["2"] == pytest.approx({"updates": 3, "approx_kl": 0.04, "clipfrac": 0.2,
                                        "entropy": 0.5})
    assert ("| PPO-32 | 0.020 / 0.10 / 1.00 (2) | 0.040 / 0.20 / 0.50 (2) "
            "| 0.060 / 0.30 / 0.33 (2) |") in md


@pytest.mark.parametrize("extra, message", [
    (["--seeds", "0"], "--seeds must be in"),
    (["--budget", "0"], "budget must be >= 1"),
    (["--device", "tpu"], "device"),
])
def test_bad_input_is_one_line_and_creates_nothing(
    extra: list[str], message: str, tmp_path: Path, capsys: pytest.CaptureFixture
) -> None:
    runs, out = tmp_path / "runs", tmp_path / "results"
    assert main(["reproduce", "maze-ablation", "--runs", str(runs), "--results", str(out),
                 *extra]) != 0
    err = capsys.readouterr().err.strip()
    assert message in err and len(err.splitlines()) == 1, err
    assert not runs.exists() and not out.exists()


def test_cells_come_seed_by_seed_so_a_cut_run_leaves_every_arm_the_same_seeds() -> None:
    cells = maze_ablation.cells([100, 101], CurriculumConfig())
    assert [(c.seed, c.agent) for c in cells[:6]] == [(100, a) for a in ARMS.values()]
    assert {c.seed for c in cells[6:]} == {101}


def test_results_of_cells_run_elsewhere_are_kept(tmp_path: Path) -> None:
    """A second machine's cells add to the committed results rather than replace them."""
    first = [record(agent, 100, [1000, 2000, 3000]) for agent in ARMS.values()]
    maze_ablation_report.write_results(first, tmp_path)
    data = json.loads((tmp_path / "maze.json").read_text())
    data["geometry"] = {"mazes": 56, "levels": [1, 2, 9],
                        "transe_only": {"rho": 0.2, "value_r2": 0.05},
                        "arms": {"PPO-32": {"1": {"rho": {"per_seed": {"100": -0.5}}}},
                                 "XLVIN, chi = 0": {"2": {"rho": {"per_seed": {"100": -0.4}},
                                                          "value_r2": {"per_seed": {"100": 0.3}}}}}}
    (tmp_path / "maze.json").write_text(json.dumps(data))
    again = [record("ppo-32", 100, [500, 500, 500]), record("ppo-32", 101, [4000, 4000, 4000])]
    maze_ablation_report.write_results(again, tmp_path)
    data = json.loads((tmp_path / "maze.json").read_text())
    runs = {(r["agent"], r["seed"]): r for r in data["runs"]}
    assert len(runs) == 7 and runs[("ppo-32", 100)]["env_steps"] == 1500  # the new record wins
    rows = {r["arm"]: r for r in data["rows"]}
    assert rows["PPO-32"]["seeds"] == [100, 101] and rows["XLVIN, chi = 0"]["seeds"] == [100]
    # geometry: a cell recomputed drops its old rho (its run may have changed); others stay
    assert "PPO-32" not in data["geometry"]["arms"]
    chi = data["geometry"]["arms"]["XLVIN, chi = 0"]["2"]
    assert chi["rho"]["per_seed"] == {"100": -0.4} and chi["value_r2"]["iqm"] == pytest.approx(0.3)
    assert data["geometry"]["transe_only"] == {"rho": 0.2, "value_r2": 0.05}
    md = (tmp_path / "maze.md").read_text()
    assert "| XLVIN, chi = 0 | - | -0.40 (1) | - |" in md  # one cell: its value, no interval


def test_corrupt_earlier_results_are_one_clear_error(tmp_path: Path) -> None:
    (tmp_path / "maze.json").write_text('{"runs": [{"agent": 3}]}')
    with pytest.raises(UserError, match="corrupt results"):
        maze_ablation_report.write_results([record("ppo-32", 100, [1000, 1000, 1000])], tmp_path)


def test_another_experiments_maze_json_is_refused_not_merged(tmp_path: Path) -> None:
    """`reproduce maze` writes RESULTS/maze.json too: pointed at its folder, the ablation says so
    in one line and leaves the file as it was."""
    other = json.dumps({"runs": [record("vin", 0, [1000, 1000, 1000])]})
    (tmp_path / "maze.json").write_text(other)
    with pytest.raises(UserError, match="not the maze ablation's .*vin.*results/ablation"):
        maze_ablation_report.write_results([record("ppo-32", 100, [1000, 1000, 1000])], tmp_path)
    assert (tmp_path / "maze.json").read_text() == other and not (tmp_path / "maze.md").exists()


def test_a_bad_deadline_is_refused_before_any_pretraining(tmp_path: Path, capsys,
                                                          monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("XLVIN_CACHE", str(tmp_path / "cache"))
    code = main(["reproduce", "maze-ablation", "--deadline-minutes", "-1", "--runs",
                 str(tmp_path / "runs"), "--results", str(tmp_path / "results")])
    assert code == 2 and "--deadline-minutes" in capsys.readouterr().err
    assert not (tmp_path / "runs").exists() and not (tmp_path / "results").exists()
    assert not (tmp_path / "cache").exists()  # no executor was pre-trained


def test_the_cells_a_results_file_holds_are_recorded(tmp_path: Path) -> None:
    """`reproduce maze-ablation --skip-recorded`: the (agent, seed) of every run the results
    keep, and no other (the committed file, its runs cut to seeds 100 and 101)."""
    data = json.loads((Path(__file__).parent.parent / "results/ablation/maze.json").read_text())
    data["runs"] = [r for r in data["runs"] if r["seed"] in (100, 101)]
    # a cell reported while still training (--include-running) trains on
    data["runs"][0]["in_progress"] = {"level": 3, "episodes": 10, "window_success": 0.5}
    (tmp_path / "maze.json").write_text(json.dumps(data))
    held = maze_ablation_report.recorded(tmp_path)
    cells = maze_ablation.cells([100, 101, 102], CurriculumConfig(budget=maze_ablation.BUDGET))
    first = (data["runs"][0]["agent"], data["runs"][0]["seed"])
    assert [(c.agent, c.seed) for c in cells if not held(c)] == [first] + [
        (agent, 102) for agent in ARMS.values()]
    assert not maze_ablation_report.recorded(tmp_path / "none")(cells[0])


@pytest.mark.parametrize("seeds, chi_steps, said", [
    (9, 1000, "The study reads its verdicts once every arm has 10 seeds or more"),
    (10, 1000, "So what separates XLVIN from PPO-32 on mazes comes with its network"),
    (10, 8000, "XLVIN is ahead of PPO-32 on the env steps to pass level 10; chi = 0 is not "
               "ahead of PPO-32. Against each executor arm, on the statistics with 10 cells or "
               "more a side (the others are not compared): untrained executor: not separated on "
               "the env steps to pass level 10, the area under the level curve, held-out 8x8 "
               "success and held-out 16x16 success;"),
])
def test_the_pages_reading_of_the_study_says_only_what_its_verdicts_allow(
    seeds: int, chi_steps: int, said: str, tmp_path: Path
) -> None:
    """The sentence after the verdicts is rendered from them: nothing before every arm has 10
    seeds (an interim look), the network-not-executor reading only where XLVIN and chi = 0 are
    both ahead of PPO-32 and no arm with an executor's output is separated from XLVIN on any
    statistic compared, else what each says."""
    records = []
    for seed in range(seeds):
        for agent in ("xlvin-32-b2", "xlvin-32-b2-untrained", "xlvin-32-b2-random"):
            records.append(record(agent, seed, [1000, 1000, 1000 + seed]))
        records.append(record("xlvin-32-b2-zero-chi", seed, [chi_steps, 1000, 1000 + seed]))
        records.append(record("ppo-32", seed, [3000, 3000, 3000 + seed]))
        records.append(record("ppo-32-transe", seed, [1000, 5000], failed=True))
    rows = aggregate(records)
    data = {"rows": rows, "baseline": "PPO-32", "runs": records,
            "executor_contribution": maze_ablation.executor_contribution(rows)}
    (tmp_path / "ablation").mkdir()
    (tmp_path / "ablation/maze.json").write_text(json.dumps(data))
    reading = maze_ablation_report.page_blocks(tmp_path)["maze-ablation-reading"]
    assert said in reading, reading
    if chi_steps > 3000:  # chi = 0 slower than PPO-32: XLVIN is ahead of it on env steps
        assert "chi = 0: XLVIN ahead on the env steps to pass level 10" in reading
        # every seed apart: it stays separated read as one family of 12
        assert ("XLVIN stays ahead of chi = 0 on the env steps to pass level 10 (P = 1.00 "
                "[1.00, 1.00], family-wise [1.00, 1.00]); ahead of chi = 0 on the area under "
                "the level curve (P = 1.00 [1.00, 1.00], family-wise [1.00, 1.00]); no other "
                "verdict stays separated.") in reading
    else:  # no verdict separated alone: nothing read together
        assert "Read together" not in reading
    assert reading.endswith(f"failed a level in {seeds} of {seeds} cells (level 2).")


def test_the_geometry_prose_compares_only_arms_with_10_cells_or_more(tmp_path: Path) -> None:
    """An arm with 9 cells after the last level is 'not compared' with XLVIN, whatever its
    interval; arms with 10 are compared."""
    def per_seed(n: int, value: float) -> dict[str, float]:
        return {str(100 + i): value + 0.01 * i for i in range(n)}

    cells = {arm: 10 for arm in maze_ablation.ARMS}
    cells["XLVIN, untrained executor"] = 9
    geo = {"mazes": 56, "levels": [1, 2, 9], "transe_only": {"rho": 0.2, "value_r2": 0.05},
           "arms": {arm: {level: {"rho": {"per_seed": per_seed(n, -0.5)},
                                  "value_r2": {"per_seed": per_seed(n, 0.3)}}
                          for level in ("1", "2", "9")} for arm, n in cells.items()}}
    (tmp_path / "ablation").mkdir()
    (tmp_path / "ablation/maze.json").write_text(
        json.dumps({"geometry": maze_ablation.summarize_geometry(geo)}))
    prose = maze_ablation_report.geometry_blocks(tmp_path)["ablation-geometry-prose"]
    assert ("untrained executor and XLVIN are not compared (value R^2 after level 9, 9 and 10 "
            "cells, fewer than 10") in prose
    assert "chi = 0 and XLVIN are not separated (value R^2 after level 9, 10 and 10 cells" in prose


def test_the_reading_says_which_executor_arms_neither_side_separates() -> None:
    """An executor arm not separated from PPO-32 (with 10 cells) is named: not separated from
    XLVIN is not equal to it."""
    def row(n: int, p: float, low: float, high: float) -> dict:
        return {"steps_to_last": {"n": n},
                "steps_to_last_over_ppo": {"p": p, "low": low, "high": high}}

    rows = {"XLVIN, untrained executor": row(10, 0.57, 0.31, 0.81),
            "XLVIN, executor of random graphs": row(10, 0.8, 0.6, 0.95),
            "XLVIN, chi = 0": row(9, 0.5, 0.2, 0.8)}
    said = maze_ablation_report._behind_xlvin_and_ppo(rows)
    assert said == (" Not separated is not equal: the untrained executor is not separated from "
                    "PPO-32 on the env steps to pass level 10 either.")
    rows["XLVIN, untrained executor"] = row(10, 0.9, 0.7, 1.0)
    assert maze_ablation_report._behind_xlvin_and_ppo(rows) == ""


def test_a_harvest_counts_the_cells_still_training_that_it_leaves_out(
    monkeypatch: pytest.MonkeyPatch
) -> None:
    """A study's report (`--finished-only`) writes the ended cells and says how many are still
    training, left out; with `--include-running` they are written and counted."""
    from types import SimpleNamespace

    from xlvin.experiments import registry

    ended, running = {"in_progress": None}, {"in_progress": {"level": 3}}
    monkeypatch.setattr(registry, "_curricula_so_far", lambda cells, runs, include: (
        [ended, running], 0) if include else ([ended], 1))
    written: list[list[dict]] = []
    report = registry._study_report(lambda records, args: written.append(records) or "page",
                                    "x.md")
    args = SimpleNamespace(include_running=False, results=Path("r"), runs=Path("runs"))
    assert report([1, 2, 3], None, None, args) == (
        "page\nwrote r/x.md: 1 of 3 cells ended, 1 still training (left out); runs under runs")
    assert written == [[ended]]
    args.include_running = True
    assert report([1, 2, 3], None, None, args).endswith(
        "1 of 3 cells ended, 1 still training; runs under runs")
    assert written[-1] == [ended, running]
