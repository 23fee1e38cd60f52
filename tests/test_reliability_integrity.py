"""What a table says is what ran (issue: Reliability 5). F6: weights re-saved with a valid digest
after one entry was set to NaN or inf, or a tensor cast to another dtype, are refused on load in
one line naming the tensor (`xlvin evaluate`, `Model.load`, `--resume` from a checkpoint). F9: a
Table 1 cell whose directory holds another cell's run (copied, swapped) is not tabled. Each
refusal changes no byte of the run directory."""

import json
import shutil
from pathlib import Path

import pytest
import torch
from test_faults import TINY, one_error_line, snapshot

from tests.tiny_runs import tiny_cell_config, unfinished_run
from xlvin import Model
from xlvin.cli import main
from xlvin.errors import UserError
from xlvin.experiments import table1
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


# ------------------------------------- F9: a cell is tabled only with its own run's numbers

@pytest.fixture
def tiny_cells(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(table1.Cell, "config", tiny_cell_config(table1.Cell.config))


CLASSIC = ["reproduce", "classic", "--protocol", "paper", "--envs", "CartPole-v0", "--agents",
           "ppo", "--seeds", "2"]


@pytest.fixture(scope="module")
def two_seeds(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A runs root with cells CartPole-v0 PPO seeds 0 and 1 of the paper protocol, finished."""
    root = tmp_path_factory.mktemp("cells") / "runs"
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(table1.Cell, "config", tiny_cell_config(table1.Cell.config))
        for seed in (0, 1):
            cell = table1.Cell("paper", "CartPole-v0", "ppo", seed)
            table1.run_cell(cell, root)
    return root


def seed_dir(root: Path, seed: int) -> Path:
    return table1.Cell("paper", "CartPole-v0", "ppo", seed).run_dir(root)


def swap(a: Path, b: Path, names: list[str]) -> None:
    for name in names:
        data = (a / name).read_bytes()
        (a / name).write_bytes((b / name).read_bytes())
        (b / name).write_bytes(data)


def keep_digest_new_seed(run: Path) -> None:
    """The weights' header says seed 1, its SHA-256 left as it was (the one summary.json and
    eval.json are sealed to)."""
    from safetensors import safe_open
    from safetensors.torch import load_file, save_file

    with safe_open(str(run / MODEL), framework="pt") as f:
        header = f.metadata()
    meta = json.loads(header["xlvin"])
    meta["config"]["train"]["seed"] = 1
    save_file(load_file(str(run / MODEL)), str(run / MODEL),
              metadata={**header, "xlvin": json.dumps(meta)})


#: How a cell comes to hold another's run, and the words of the line that refuses it.
COPIES = {
    "cp -a seed0 seed1": (
        lambda s0, s1: (shutil.rmtree(s1), shutil.copytree(s0, s1)),
        ["seed1/config.json records another run (train.seed is 0, the cell's is 1)"]),
    "seeds swapped": (
        lambda s0, s1: swap(s0, s1, [CONFIG, MODEL, "summary.json", "eval.json",
                                     "metrics.jsonl"]),
        ["seed0/config.json records another run (train.seed is 1, the cell's is 0)"]),
    "model, eval and summary swapped": (
        lambda s0, s1: swap(s0, s1, [MODEL, "summary.json", "eval.json"]),
        ["seed0/model.safetensors records another run (train.seed is 1, the cell's is 0)"]),
    "seed 0's files, its header edited": (
        lambda s0, s1: (shutil.rmtree(s1), shutil.copytree(s0, s1), set_seed(s1 / CONFIG, 1),
                        keep_digest_new_seed(s1)),
        ["seed1/model.safetensors", "SHA-256 mismatch"]),
}


def set_seed(path: Path, seed: int) -> None:
    config = json.loads(path.read_text())
    config["train"]["seed"] = seed
    path.write_text(json.dumps(config))


@pytest.mark.parametrize("copy", COPIES)
def test_a_cell_holding_another_cells_run_is_not_tabled(
    copy: str, two_seeds: Path, tmp_path: Path, tiny_cells: None, capsys
) -> None:
    root = tmp_path / "runs"
    shutil.copytree(two_seeds, root, symlinks=True)
    results = tmp_path / "results"
    assert main([*CLASSIC, "--finished-only", "--runs", str(root), "--results",
                 str(results)]) == 0  # the intact cells table
    shutil.rmtree(results)
    change, words = COPIES[copy]
    change(seed_dir(root, 0), seed_dir(root, 1))
    before = snapshot(tmp_path)
    capsys.readouterr()
    assert main([*CLASSIC, "--finished-only", "--runs", str(root), "--results",
                 str(results)]) == 2
    err = one_error_line(capsys)
    assert all(word in err for word in words), err
    assert snapshot(tmp_path) == before and not results.exists()


def test_a_cell_of_a_variant_holding_the_plain_protocols_run_is_not_tabled(
    two_seeds: Path, tmp_path: Path, tiny_cells: None, capsys
) -> None:
    root = tmp_path / "runs"
    variant = table1.Cell("paper", "CartPole-v0", "ppo", 0, variant="kl-0.01").run_dir(root)
    shutil.copytree(seed_dir(two_seeds, 0), variant)
    before = snapshot(tmp_path)
    capsys.readouterr()
    assert main(["reproduce", "classic", "--protocol", "paper", "--envs", "CartPole-v0",
                 "--agents", "ppo", "--seeds", "1", "--variant", "kl-0.01", "--finished-only",
                 "--runs", str(root), "--results", str(tmp_path / "results")]) == 2
    assert ("config.json records another run (ppo.target_kl is 0.0, the cell's is 0.01)"
            in one_error_line(capsys))
    assert snapshot(tmp_path) == before


def test_the_plain_cell_holding_a_variants_run_is_not_tabled(
    tmp_path: Path, tiny_cells: None, capsys
) -> None:
    """The reverse copy: a kl-0.01 run moved into the plain protocol's cell of the same seed,
    env and agent differs from the cell only in what the variant sets, which is compared too."""
    root = tmp_path / "runs"
    kl = table1.Cell("paper", "CartPole-v0", "ppo", 0, variant="kl-0.01")
    table1.run_cell(kl, root)
    shutil.move(kl.run_dir(root), seed_dir(root, 0))
    before = snapshot(tmp_path)
    capsys.readouterr()
    assert main([*CLASSIC[:-1], "1", "--finished-only", "--runs", str(root), "--results",
                 str(tmp_path / "results")]) == 2
    assert ("config.json records another run (ppo.target_kl is 0.01, the cell's is 0.0)"
            in one_error_line(capsys))
    assert snapshot(tmp_path) == before


def _sibling_cases():
    from xlvin.experiments import atari, continuous, maze

    def in_dir(module):
        return lambda cell, root: module.cell_record(cell, cell.run_dir(root))

    return {  # a cell, the cell whose run is copied into its directory, the field apart, reading
        "maze chi=0 into maze xlvin-32-b2": (
            maze.Cell("maze", "xlvin-32-b2", 0), maze.Cell("maze", "xlvin-32-b2-zero-chi", 0),
            "train.zero_chi", in_dir(maze)),
        "maze seed 1 into seed 0": (
            maze.Cell("maze", "ppo", 0), maze.Cell("maze", "ppo", 1), "train.seed", in_dir(maze)),
        "atari xlvin-cp into xlvin-r": (
            atari.Cell("Freeway", "xlvin-r", 0), atari.Cell("Freeway", "xlvin-cp", 0),
            "train.executor", in_dir(atari)),
        "continuous uniform into all": (
            continuous.Cell("Pendulum-v1", "xlvin-all", 0, 1000),
            continuous.Cell("Pendulum-v1", "xlvin-uniform", 0, 1000), "train.expand",
            continuous.cell_record),
    }


@pytest.mark.parametrize("case", list(_sibling_cases()))
def test_maze_atari_and_continuous_cells_holding_another_cells_run_are_not_tabled(
    case: str, tmp_path: Path,
) -> None:
    """The other experiments check what their directories hold as Table 1's do: another
    agent's (or arm's, or seed's) config.json in a cell's directory is one UserError naming the
    field, before any number of it is read."""
    cell, other, field, record = _sibling_cases()[case]
    run_dir = cell.run_dir(tmp_path)
    run_dir.mkdir(parents=True)
    (run_dir / CONFIG).write_text(json.dumps(other.config().to_json()))
    with pytest.raises(UserError, match=f"records another run \\({field} is"):
        record(cell, tmp_path)
