"""Files that cannot lie (issue: integrity): a weights file or checkpoint whose bytes changed
after it was written, and a metrics log with flipped bytes or lost rows, are refused in one
line, and the refusal changes no byte of the run directory."""

from pathlib import Path

import pytest
import torch
from test_faults import TINY, one_error_line, snapshot, unfinished_copy

from xlvin.cli import main
from xlvin.errors import UserError
from xlvin.io.checkpoint import CHECKPOINT
from xlvin.io.run_dir import METRICS, MODEL
from xlvin.io.weights import load_weights, save_weights


def flip_middle(path: Path, count: int = 16) -> None:
    """XOR `count` bytes in the middle of the file's tensor data (past its header)."""
    data = bytearray(path.read_bytes())
    header = 8 + int.from_bytes(data[:8], "little")
    middle = header + (len(data) - header) // 2
    for i in range(middle, middle + count):
        data[i] ^= 0xFF
    path.write_bytes(bytes(data))


def test_weights_with_flipped_tensor_bytes_are_refused(tmp_path: Path) -> None:
    torch.manual_seed(0)
    path = tmp_path / "w.safetensors"
    save_weights(path, torch.nn.Linear(32, 32), {"note": "x"})
    tensors, meta = load_weights(path)
    assert meta == {"note": "x"} and set(tensors) == {"weight", "bias"}
    flip_middle(path)
    with pytest.raises(UserError, match="SHA-256 mismatch"):
        load_weights(path)


@pytest.fixture(scope="module")
def finished(tmp_path_factory: pytest.TempPathFactory) -> Path:
    run = tmp_path_factory.mktemp("integrity") / "run"
    assert main(["train", *TINY, "--out", str(run)]) == 0
    return run


def test_evaluate_refuses_a_model_with_flipped_bytes(finished: Path, tmp_path: Path, capsys) -> None:
    run = tmp_path / "run"
    run.mkdir()
    for p in finished.iterdir():
        if p.is_file():
            (run / p.name).write_bytes(p.read_bytes())
    flip_middle(run / MODEL)
    capsys.readouterr()
    assert main(["evaluate", str(run), "--episodes", "2"]) == 2
    assert "SHA-256 mismatch" in one_error_line(capsys)


@pytest.mark.parametrize("damage", ["checkpoint bytes", "metrics bytes", "metrics halved"])
def test_resume_refuses_a_damaged_run_and_changes_nothing(
    damage: str, finished: Path, tmp_path: Path, capsys
) -> None:
    run = unfinished_copy(finished, tmp_path / "run", finished)
    if damage == "checkpoint bytes":
        flip_middle(run / CHECKPOINT)
        message = "SHA-256 mismatch"
    elif damage == "metrics bytes":
        data = bytearray((run / METRICS).read_bytes())
        data[len(data) // 3] ^= 0xFF
        (run / METRICS).write_bytes(bytes(data))
        message = "corrupt metrics file"
    else:
        text = (run / METRICS).read_text()
        (run / METRICS).write_text(text[: len(text) // 2])
        message = "rows are missing"
    before = snapshot(tmp_path)
    capsys.readouterr()
    assert main(["train", *TINY, "--out", str(run), "--resume"]) == 2
    assert message in one_error_line(capsys)
    assert snapshot(tmp_path) == before
