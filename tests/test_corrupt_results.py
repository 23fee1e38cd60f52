"""Result files that are not what the code wrote (empty, truncated, another type, bytes
flipped): every reader gives one line on stderr and a non-zero exit, never a traceback."""

import json
from pathlib import Path

import pytest

from tests.tiny_runs import EVAL, SUMMARY, finished_cell, reproduce
from xlvin.cli import main
from xlvin.errors import UserError
from xlvin.experiments import atari, maze, table1

#: The cells here are written by hand (`finished_cell`), as runs from before seals were.
pytestmark = pytest.mark.usefixtures("accept_unsealed")


def half(text: str) -> str:
    return text[: len(text) // 2]


@pytest.mark.parametrize("name, content", [
    ("summary.json", ""), ("summary.json", half(json.dumps(SUMMARY))), ("summary.json", "[]"),
    ("summary.json", json.dumps({**SUMMARY, "ppo": {"progress": [{}]}})),
    (table1.EVAL_FILE, half(json.dumps(EVAL))),
])
def test_a_corrupt_table1_cell_is_one_line(tmp_path: Path, capsys, name: str, content: str) -> None:
    run_dir = finished_cell(tmp_path / "runs")
    assert reproduce(tmp_path / "runs", tmp_path / "results") == 0  # the intact cell reads
    capsys.readouterr()
    (run_dir / name).write_text(content)
    assert reproduce(tmp_path / "runs", tmp_path / "results2") == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("xlvin: error: corrupt results in") and "\n" not in err
    assert str(run_dir) in err
    assert not (tmp_path / "results2").exists()


def test_flipped_bytes_in_a_cell_are_one_line(tmp_path: Path, capsys) -> None:
    run_dir = finished_cell(tmp_path / "runs")
    (run_dir / "summary.json").write_bytes(b"\xff\xfe" + json.dumps(SUMMARY).encode())
    assert reproduce(tmp_path / "runs", tmp_path / "results") == 2
    assert capsys.readouterr().err.startswith("xlvin: error: corrupt results in")


def test_a_truncated_table_of_the_other_protocol_is_one_line(tmp_path: Path, capsys) -> None:
    finished_cell(tmp_path / "runs")
    results = tmp_path / "results"
    results.mkdir()
    (results / "table1-ours.json").write_text('{"rows": [')
    assert reproduce(tmp_path / "runs", results) == 2
    err = capsys.readouterr().err
    assert err.startswith("xlvin: error: corrupt results in") and "table1-ours.json" in err


@pytest.mark.parametrize("content", [
    '{"rows": [{}], "runs": []}', '{"rows": [], "runs": [{}]}',
    json.dumps({"rows": [], "runs": [{}] * 10**6}), '{"rows": [], "runs": {}}',
    '{"rows": [{"protocol": "ours", "env": "CartPole-v0", "agent": "ppo", "strict": false, '
    '"variant": "", "final": {"iqm": "high"}}], "runs": []}',
])
def test_a_malformed_table_of_the_other_protocol_is_one_line_before_anything_is_written(
    tmp_path: Path, capsys, content: str
) -> None:
    """Its rows and runs are what the combined table reads: a field missing or of another type
    is one line at once, and this protocol's table1-paper.* is not rewritten (it was, before
    the combined table's KeyError)."""
    finished_cell(tmp_path / "runs")
    results = tmp_path / "results"
    results.mkdir()
    (results / "table1-ours.json").write_text(content)
    assert reproduce(tmp_path / "runs", results) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith(f"xlvin: error: corrupt results in {results / 'table1-ours.json'} (")
    assert "\n" not in err
    assert sorted(p.name for p in results.iterdir()) == ["table1-ours.json"]


def test_maze_and_atari_records_read_corrupt_files_as_one_error(tmp_path: Path) -> None:
    (tmp_path / "summary.json").write_text("[]")
    with pytest.raises(UserError, match="corrupt results in"):
        maze.cell_record(maze.Cell("maze", "ppo", 0), tmp_path)
    (tmp_path / atari.EVAL_FILE).write_text('{"mean": ')
    with pytest.raises(UserError, match="corrupt results in"):
        atari.cell_record(atari.Cell("Freeway", "ppo", 0), tmp_path)


def test_a_table_never_mixes_kernel_modes(tmp_path: Path, capsys) -> None:
    """This suite runs in reproducible mode, as `xlvin reproduce` does by default: a cell that
    `sweep` trained on the CPU's own kernels is refused in one line saying how to proceed; cells
    of the table's mode, and cells recorded before modes were (no `kernels`), are tabled."""
    root = tmp_path / "runs"
    for seed, mode in enumerate(["reproducible", "cpu-default"]):
        run_dir = table1.Cell("paper", "CartPole-v0", "ppo", seed).run_dir(root)
        run_dir.mkdir(parents=True)
        (run_dir / "summary.json").write_text(json.dumps({**SUMMARY, "kernels": {"mode": mode}}))
        (run_dir / table1.EVAL_FILE).write_text(json.dumps(EVAL))
    args = ["reproduce", "classic", "--protocol", "paper", "--envs", "CartPole-v0", "--agents",
            "ppo", "--seeds", "2", "--finished-only", "--runs", str(root)]
    assert main([*args, "--results", str(tmp_path / "mixed")]) == 2
    err = capsys.readouterr().err.strip().splitlines()[-1]
    assert err == ("xlvin: error: 1 of 2 cells were trained with cpu-default kernels (first: "
                   "CartPole-v0 ppo seed 1), this table is reproducible: pass --no-reproducible "
                   "to table them under their mode, or move them away to retrain them under this one")
    assert not (tmp_path / "mixed").exists()
    (table1.Cell("paper", "CartPole-v0", "ppo", 1).run_dir(root) / "summary.json").write_text(
        json.dumps(SUMMARY))
    assert main([*args, "--results", str(tmp_path / "one")]) == 0
    runs = json.loads((tmp_path / "one" / "table1-paper.json").read_text())["runs"]
    assert [r["kernels"] for r in runs] == ["reproducible", None]  # each row says its mode
