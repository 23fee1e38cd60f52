"""results/bench.md's sections are rendered from their own results files: the maze curricula's
records, the population benchmark's runs."""

import json
from pathlib import Path
from dataclasses import replace

from benchmarks.suite.report import _maze_section, _population_section


def test_maze_section_averages_each_agents_curricula(tmp_path):
    runs = [
        {"experiment": "maze", "agent": "gvin", "steps_per_second": 400.0, "env_steps": 1000},
        {"experiment": "maze", "agent": "gvin", "steps_per_second": 500.0, "env_steps": 3000},
        {"experiment": "contextual-maze", "agent": "gvin", "steps_per_second": 9.0,
         "env_steps": 7},
        {"experiment": "maze", "agent": "gvin", "steps_per_second": 1.0, "env_steps": 5,
         "in_progress": {"level": 3}},
    ]
    (tmp_path / "maze.json").write_text(json.dumps({"runs": runs, "curves": {}}))
    lines = _maze_section(tmp_path)
    rows = [line for line in lines if line.startswith("| gvin")]
    assert rows == ["| gvin | this CPU | 2 | 450 | 400 - 500 | 2,000 |"]


def test_no_maze_results_no_section(tmp_path):
    assert _maze_section(tmp_path) == []


def _case(label, ppo, xlvin):
    return {"case": {"label": label, "A": 3, "K": 2}, "steps": 2048,
            "runs": [{"agent": "ppo", "code": "current", "sps": ppo},
                     {"agent": "xlvin", "code": "current", "sps": xlvin}]}


def test_a_partial_planning_run_keeps_the_other_cases_with_their_own_dates():
    from benchmarks.suite.report import render
    from benchmarks.suite.run import merge_cases

    old = {"started": "2026-01-01T00:00:00", "cpu": "AMD EPYC",
           "cases": {"enduro": _case("Enduro", 100.0, 60.0), "freeway": _case("Freeway", 100.0, 50.0)}}
    new = {"started": "2026-02-02T00:00:00", "cpu": "Intel Xeon", "cases": {"freeway": _case("Freeway", 90.0, 72.0)}}
    cases = merge_cases(old, new)
    assert list(cases) == ["enduro", "freeway"]
    assert cases["enduro"]["measured"]["cpu"] == "AMD EPYC"
    assert cases["freeway"]["measured"] == {"started": "2026-02-02T00:00:00", "cpu": "Intel Xeon"}
    assert merge_cases(None, new) == {"freeway": cases["freeway"]}
    text = render({"parts": {"planning": {**new, "cases": cases}}, "machine": {}})
    text = text.split("## 2. Planning")[1].split("\n## ")[0]
    rows = {line.split(" | ")[0]: line for line in text.splitlines() if line.startswith("| ")}
    assert "0.60x (met)" in rows["| Enduro"] and "| >= 0.5x |" in rows["| Enduro"]
    assert "0.80x (met)" in rows["| Freeway"] and "| >= 0.7x |" in rows["| Freeway"]
    assert "- Enduro: measured 2026-01-01T00:00:00" in text and "on AMD EPYC" in text


def test_the_population_benchmark_trains_the_maze_studys_xlvin_online():
    """`--agent xlvin-maze` is the maze ablation's XLVIN cell, the same network and PPO, but
    online for a fixed number of steps, so that every seed of a population takes the same."""
    from benchmarks.suite.population import config
    from xlvin.envs.maze import MAZE_ID
    from xlvin.experiments import maze

    cfg, cell = config("xlvin-maze", 2048), maze.Cell("maze", "xlvin-32-b2", 0).config()
    assert (cfg.train.env, cfg.train.protocol, cfg.ppo.total_steps) == (MAZE_ID, "online", 2048)
    for field, value in maze.AGENTS["xlvin-32-b2"].items():
        assert getattr(cfg.train, field) == value
    assert replace(cfg.ppo, total_steps=1) == replace(cell.ppo, total_steps=1)


def test_the_population_section_holds_each_population_run_under_its_title(tmp_path):
    """Section 6 is the population benchmark's runs, rendered from results/population/*.json
    (what benchmarks/notes.md and docs/benchmarks.md show too); no run, no section."""
    assert _population_section(tmp_path) == []
    (tmp_path / "population").mkdir()
    committed = Path(__file__).parents[1] / "results/population/ppo.json"
    (tmp_path / "population/ppo.json").write_bytes(committed.read_bytes())
    text = "\n".join(_population_section(tmp_path))
    assert "### PPO on CartPole-v1 (`results/population/ppo.json`)" in text
    together = [line for line in text.splitlines() if line.startswith("| together | 64 |")]
    assert len(together) == 1 and "x |" in together[0]
