"""docs/mazes.md's reading of the three measurements (`executor_why_report`): it says only what
their verdicts allow, and counts the oracle arm's ended cells."""

import json
from pathlib import Path

import pytest

from tests.test_oracle_report import CURRICULUM, _record
from xlvin.experiments import executor_why_report as why


def _write(results: Path, seeds: int, untrained_p: float, oracle_runs: list[dict]) -> None:
    folder = results / "why-executor"
    folder.mkdir(parents=True)
    comparisons = [
        {"x": "maze", "y": y, "protocol": protocol, "reference": "tree",
         "improvement": {"p": p, "low": p - 0.02, "high": min(p + 0.02, 1.0)}}
        for y, p in (("maze-untrained", untrained_p), ("maze-random", 0.7))
        for protocol in ("planner", "pre-training")]
    (folder / "true-trees.json").write_text(json.dumps(
        {"setup": {"mazes": 833}, "comparisons": comparisons}))
    rows = [{"arm": arm, "depth": depth, "seeds": list(range(seeds))}
            for arm in ("XLVIN (maze executor)", "XLVIN, chi = 0") for depth in (1, 4)]
    (folder / "latent-trees.json").write_text(json.dumps({"rows": rows}))
    (folder / "probes.json").write_text(json.dumps(
        {"rows": [{"arm": "PPO-32", "seeds": list(range(seeds + 1))}]}))
    if oracle_runs:
        (results / "oracle").mkdir()
        (results / "oracle/maze.json").write_text(json.dumps({"runs": oracle_runs}))


@pytest.mark.parametrize("seeds, said", [
    (4, "the maze study's ended cells measured so far give 4 to 5 an arm: at this power neither "
        "link is shown to break or to hold"),
    (10, "(b) and (c) have 10 seeds an arm or more: their verdicts are the sentences above"),
])
def test_the_trained_links_are_read_only_from_10_seeds_an_arm(seeds: int, said: str,
                                                               tmp_path: Path) -> None:
    _write(tmp_path, seeds, 0.82, [])
    reading = why.page_blocks(tmp_path)["why-reading"]
    assert said in reading
    assert "(a) does not break before learning" in reading
    assert "`xlvin-32-b2-oracle` 0 of 10" in reading


def test_link_a_is_not_claimed_where_an_executor_is_not_separated(tmp_path: Path) -> None:
    _write(tmp_path, 10, 0.5, [])
    reading = why.page_blocks(tmp_path)["why-reading"]
    assert "(a) is not established" in reading and "does not break" not in reading


def test_the_oracle_arms_ended_cells_are_counted(tmp_path: Path) -> None:
    """The cells of the oracle's protocol that ended (passed level 4 or failed before it), as
    the oracle's own page counts them: not one still training, nor one of another curriculum."""
    runs = [_record("xlvin-32-b2-oracle", 105, [100] * 4),
            {**_record("xlvin-32-b2-oracle", 106, [100] * 2),
             "in_progress": {"level": 3, "episodes": 5, "window_success": 0.5}},
            {**_record("xlvin-32-b2-oracle-untrained", 105, [100] * 4),
             "curriculum": {**CURRICULUM, "budget": 20000}},
            _record("xlvin-32-b2-oracle-zero-chi", 105, [100] * 2, passed=False),
            _record("xlvin-32-b2", 105, [100] * 4)]
    _write(tmp_path, 4, 0.82, runs)
    reading = why.page_blocks(tmp_path)["why-reading"]
    assert ("`xlvin-32-b2-oracle` 1 of 10, `xlvin-32-b2-oracle-untrained` 0 of 10, "
            "`xlvin-32-b2-oracle-zero-chi` 1 of 10") in reading


def test_no_reading_before_the_three_measurements_have_results(tmp_path: Path) -> None:
    assert why.page_blocks(tmp_path) == {}
