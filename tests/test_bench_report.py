"""results/bench.md's maze section is rendered from the finished curricula's own records."""

import json

from benchmarks.report import _maze_section


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
