"""What a table says is what ran (issue: Reliability 5, F6): weights re-saved with a valid digest
after one entry was set to NaN or inf, or a tensor cast to another dtype, are refused on load in
one line naming the tensor (`xlvin evaluate`, `Model.load`, `--resume` from a checkpoint), and
the refusal changes no byte of the run directory."""

import json
from pathlib import Path

import pytest
import torch
from test_faults import TINY, one_error_line, snapshot

from tests.tiny_runs import unfinished_run
from xlvin import Model
from xlvin.cli import main
from xlvin.errors import UserError
from xlvin.io.checkpoint import CHECKPOINT
from xlvin.io.executor_file import load_executor
from xlvin.io.run_dir import CONFIG, MODEL
from xlvin.io.weights import atomic_save_tensors, load_weights

#: One change of one tensor, and a word of the line that refuses it.
DAMAGE = {
    "nan": (lambda t: t.flatten().index_fill(0, torch.tensor([3]), float("nan")).view_as(t),
            "NaN or inf"),
    "inf": (lambda t: t.flatten().index_fill(0, torch.tensor([0]), float("inf")).view_as(t),
            "NaN or inf"),
    "-inf": (lambda t: t.flatten().index_fill(0, torch.tensor([1]), -float("inf")).view_as(t),
             "NaN or inf"),
    "int32": (lambda t: t.to(torch.int32), "torch.int32"),
    "float64": (lambda t: t.to(torch.float64), "torch.float64"),
}
#: The tensor damaged: the first layer's weights.
TENSOR = "encoder.net.0.weight"


def resave(path: Path, name: str, damage: str, what: str = "weights") -> None:
    """Change tensor `name` of the weights file `path` by DAMAGE[damage] and save it again, with
    a valid digest (as anyone who can write the file can)."""
    tensors, meta = load_weights(path, what)
    tensors[name] = DAMAGE[damage][0](tensors[name])
    atomic_save_tensors(path, tensors, meta)


@pytest.fixture(scope="module")
def finished(tmp_path_factory: pytest.TempPathFactory) -> Path:
    run = tmp_path_factory.mktemp("weights") / "run"
    assert main(["train", *TINY, "--out", str(run)]) == 0
    return run


def policy_copy(run: Path, dest: Path) -> Path:
    """The run's config and weights (its summary, sealed to the weights' digest, left out)."""
    dest.mkdir()
    for name in (CONFIG, MODEL):
        (dest / name).write_bytes((run / name).read_bytes())
    return dest


@pytest.mark.parametrize("damage", DAMAGE)
def test_evaluate_refuses_weights_that_are_not_finite_or_of_another_dtype(
    damage: str, finished: Path, tmp_path: Path, capsys
) -> None:
    run = policy_copy(finished, tmp_path / "run")
    resave(run / MODEL, TENSOR, damage)
    before = snapshot(tmp_path)
    capsys.readouterr()
    assert main(["evaluate", str(run), "--episodes", "1"]) == 2
    err = one_error_line(capsys)
    assert TENSOR in err and DAMAGE[damage][1] in err, err
    with pytest.raises(UserError, match=TENSOR):
        Model.load(run)
    assert snapshot(tmp_path) == before


@pytest.mark.parametrize("damage", ["nan", "int32"])
def test_resume_refuses_a_checkpoint_whose_weights_are_damaged(
    damage: str, tmp_path: Path, capsys
) -> None:
    run = unfinished_run(tmp_path)
    resave(run / CHECKPOINT, f"model/{TENSOR}", damage, "checkpoint")
    before = snapshot(tmp_path)
    capsys.readouterr()
    assert main(["train", *TINY, "--out", str(run), "--resume"]) == 2
    err = one_error_line(capsys)
    assert TENSOR in err and DAMAGE[damage][1] in err, err
    assert snapshot(tmp_path) == before


def test_the_untouched_weights_still_load_and_evaluate(finished: Path, tmp_path: Path,
                                                       capsys) -> None:
    run = policy_copy(finished, tmp_path / "run")
    capsys.readouterr()
    assert main(["evaluate", str(run), "--episodes", "1", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["episodes"] == 1


@pytest.mark.parametrize("damage", ["inf", "int32"])
def test_an_executor_file_whose_weights_are_damaged_is_refused(
    damage: str, executor_path: Path, tmp_path: Path
) -> None:
    path = tmp_path / "executor.safetensors"
    path.write_bytes(executor_path.read_bytes())
    tensors, _ = load_weights(path, "executor")
    name = next(n for n, t in sorted(tensors.items()) if t.is_floating_point() and t.dim() == 2)
    resave(path, name, damage, "executor")
    with pytest.raises(UserError, match=f"{name} .*{DAMAGE[damage][1]}"):
        load_executor(path)
    load_executor(executor_path)  # the undamaged file loads
