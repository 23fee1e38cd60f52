"""Numbers read back are checked: summary.json and eval.json carry a SHA-256 tied to the run's
weights, each metrics row one chained to the row before; a changed digit is refused in one line
naming the file and never reaches a table or a resumed run. A file without its seal is refused
in one line naming --accept-unsealed, which reads older runs' files with one notice."""

import json
import os
import re
from pathlib import Path

import pytest
import torch
from safetensors import safe_open
from safetensors.torch import load_file, save_file

from tests.tiny_runs import CELL, reproduce, tiny, tiny_cell_config, unfinished_run
from xlvin.cli import main
from xlvin.experiments import table1
from xlvin.io import seals
from xlvin.io.digests import write_sealed
from xlvin.io.run_dir import read_metrics

TINY = tiny("CartPole-v0")


@pytest.fixture(autouse=True)
def tiny_cells(monkeypatch: pytest.MonkeyPatch) -> None:
    """The cell's config made tiny, as it was trained (`cell_root`) and as its table reads it."""
    monkeypatch.setattr(table1.Cell, "config", tiny_cell_config(table1.Cell.config))


@pytest.fixture(scope="module")
def cell_root(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A finished table-1 cell, trained as the cell (2 updates), its eval.json tied to its
    weights."""
    root = tmp_path_factory.mktemp("runs")
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(table1.Cell, "config", tiny_cell_config(table1.Cell.config))
        table1.run_cell(CELL, root)
    run_dir = CELL.run_dir(root)
    write_sealed(run_dir / table1.EVAL_FILE, {"mean": 89.62, "std": 3.5}, run_dir)
    return root


def copy_of(root: Path, dest: Path) -> Path:
    for path in sorted(root.rglob("*")):
        target = dest / path.relative_to(root)
        if path.is_dir():
            target.mkdir(parents=True, exist_ok=True)
        elif path.name != ".lock":
            target.write_bytes(path.read_bytes())
    return CELL.run_dir(dest)


def test_a_sealed_cell_reads_back_its_numbers(cell_root: Path, tmp_path: Path) -> None:
    assert reproduce(cell_root, tmp_path / "results") == 0
    (run,) = json.loads((tmp_path / "results" / "table1-paper.json").read_text())["runs"]
    assert run["final_return"] == 89.62 and run["episodes"] > 0


@pytest.mark.parametrize("name, pattern, new", [
    (table1.EVAL_FILE, r'"mean": 89\.62', '"mean": 189.62'),
    ("summary.json", r'"ppo_episodes": (\d+)', '"ppo_episodes": 40\\1'),
])
def test_a_changed_digit_never_reaches_the_table(
    cell_root: Path, tmp_path: Path, capsys, name: str, pattern: str, new: str
) -> None:
    run_dir = copy_of(cell_root, tmp_path / "runs")
    text = (run_dir / name).read_text()
    assert re.search(pattern, text), text
    (run_dir / name).write_text(re.sub(pattern, new, text, count=1))
    assert reproduce(tmp_path / "runs", tmp_path / "results") == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("xlvin: error: ") and "\n" not in err, err
    assert f"{run_dir / name}: its numbers do not match its SHA-256" in err
    assert not (tmp_path / "results").exists()


def test_a_changed_digit_in_a_metrics_row_is_refused_on_resume(tmp_path: Path, capsys) -> None:
    run = unfinished_run(tmp_path, "CartPole-v0")
    lines = (run / "metrics.jsonl").read_text().splitlines()
    row = json.loads(lines[1])
    row["charts/episodes"] += 300
    lines[1] = json.dumps(row, sort_keys=True)
    (run / "metrics.jsonl").write_text("\n".join(lines) + "\n")
    capsys.readouterr()
    assert main(["train", *TINY, "--out", str(run), "--resume"]) == 2
    err = capsys.readouterr().err.strip()
    assert err == (f"xlvin: error: corrupt metrics file {run / 'metrics.jsonl'}: line 2 changed "
                   "after it was written (SHA-256 mismatch)")


def strip_seal(path: Path, **changes) -> None:
    """Remove the `sha256` of the JSON file `path`, with its fields `changes` changed."""
    data = json.loads(path.read_text())
    del data["sha256"]
    path.write_text(json.dumps({**data, **changes}))


def test_a_result_file_stripped_of_its_seal_is_refused_naming_the_option(
    cell_root: Path, tmp_path: Path, capsys
) -> None:
    """eval.json edited (89.62 -> 199) and its `sha256` removed, summary.json still sealed:
    refused in one line, no table written; read only when asked to (`--accept-unsealed`)."""
    run_dir = copy_of(cell_root, tmp_path / "runs")
    strip_seal(run_dir / table1.EVAL_FILE, mean=199.0)
    capsys.readouterr()
    assert reproduce(tmp_path / "runs", tmp_path / "results") == 2
    err = capsys.readouterr().err.strip()
    assert err == (f"xlvin: error: {run_dir / table1.EVAL_FILE} holds no SHA-256: xlvin seals "
                   "every such file it writes, so an older xlvin wrote it or its seal was "
                   "removed; pass --accept-unsealed (in Python: XLVIN_ACCEPT_UNSEALED=1 in the "
                   "environment) to read the files of older runs unchecked")
    assert not (tmp_path / "results").exists()


def test_older_runs_are_read_with_accept_unsealed_and_one_notice(
    cell_root: Path, tmp_path: Path, capsys, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Run directories written before digests (the runs going on now) still give their table,
    and still resume, with --accept-unsealed: one notice, the numbers as they are."""
    monkeypatch.setattr(seals, "_noticed", set())
    run_dir = copy_of(cell_root, tmp_path / "runs")
    for name in ("summary.json", table1.EVAL_FILE):
        strip_seal(run_dir / name)
    capsys.readouterr()
    assert reproduce(tmp_path / "runs", tmp_path / "results", "--accept-unsealed") == 0
    notes = [line for line in capsys.readouterr().err.splitlines() if "SHA-256" in line]
    assert len(notes) == 1 and "read unchecked" in notes[0], notes
    (run,) = json.loads((tmp_path / "results" / "table1-paper.json").read_text())["runs"]
    assert run["final_return"] == 89.62
    assert seals.ACCEPT_UNSEALED not in os.environ  # for the command only

    run = unfinished_run(tmp_path / "resume", "CartPole-v0")
    rows = [{k: v for k, v in json.loads(line).items() if k != "sha256"}
            for line in (run / "metrics.jsonl").read_text().splitlines()]
    (run / "metrics.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    before = (run / "metrics.jsonl").read_bytes()
    assert main(["train", *TINY, "--out", str(run), "--resume"]) == 2
    assert "--accept-unsealed" in capsys.readouterr().err
    assert (run / "metrics.jsonl").read_bytes() == before
    assert main(["train", *TINY, "--out", str(run), "--resume", "--accept-unsealed"]) == 0
    with seals.accept_unsealed(True):
        assert read_metrics(run) == rows


def test_a_metrics_row_stripped_of_its_seal_after_sealed_rows_is_refused_even_so(
    tmp_path: Path, capsys
) -> None:
    run = unfinished_run(tmp_path, "CartPole-v0")
    lines = (run / "metrics.jsonl").read_text().splitlines()
    row = json.loads(lines[2])
    del row["sha256"]
    lines[2] = json.dumps(row, sort_keys=True)
    (run / "metrics.jsonl").write_text("\n".join(lines) + "\n")
    capsys.readouterr()
    assert main(["train", *TINY, "--out", str(run), "--resume", "--accept-unsealed"]) == 2
    err = capsys.readouterr().err.strip()
    assert err == (f"xlvin: error: corrupt metrics file {run / 'metrics.jsonl'}: line 3 holds no "
                   "SHA-256 after sealed lines (its seal was removed)")


def test_weights_zeroed_and_stripped_of_their_digest_are_not_evaluated(
    tmp_path: Path, capsys
) -> None:
    run = tmp_path / "run"
    assert main(["train", *TINY, "--out", str(run)]) == 0
    with safe_open(str(run / "model.safetensors"), framework="pt") as f:
        header = f.metadata()
    zeroed = {k: torch.zeros_like(v) for k, v in load_file(str(run / "model.safetensors")).items()}
    save_file(zeroed, str(run / "model.safetensors"), metadata={"xlvin": header["xlvin"]})
    capsys.readouterr()
    assert main(["evaluate", str(run), "--episodes", "2"]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith(f"xlvin: error: {run / 'model.safetensors'} holds no SHA-256 in its "
                          "header (xlvin-sha256): xlvin seals every such file") and "\n" not in err
    assert "--accept-unsealed" in err
    # its summary.json is sealed to the digest the weights no longer hold: refused even so
    assert main(["evaluate", str(run), "--episodes", "2", "--accept-unsealed"]) == 2
    assert capsys.readouterr().err.strip().splitlines()[-1] == (
        f"xlvin: error: {run / 'model.safetensors'} holds no SHA-256 in its header "
        "(xlvin-sha256), though result files beside it are sealed to one: it was removed; refused")
