"""A file stands for its config: a cached or shipped pre-trained file is used only when its
header records the config it is asked for (family, seed, epochs, every training setting), and
`xlvin evaluate` (and everything that loads a run) uses weights only beside the config.json of
the same run. Anything else is one error line, before anything is made."""

import json
import shutil
from pathlib import Path

import pytest
from safetensors import safe_open
from safetensors.torch import load_file, save_file

from tests.tiny_runs import TINY
from xlvin.cli import main
from xlvin.errors import UserError
from xlvin.io.weights import digest
from xlvin.pretrain import shipped
from xlvin.pretrain.files import (
    cached_executor,
    cached_executor_path,
    executor_config,
    executors_dir,
    shared_transe_file,
    shared_transe_path,
)


def one_error_line(capsys: pytest.CaptureFixture) -> str:
    err = capsys.readouterr().err.strip()
    assert err.startswith("xlvin: error: ") and len(err.splitlines()) == 1, err
    return err


def shipped_file(name: str) -> Path:
    (entry,) = [e for e in shipped.manifest() if e["name"] == name]
    return shipped.path(entry)


@pytest.fixture
def cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("XLVIN_CACHE", str(tmp_path / "cache"))
    return tmp_path / "cache"


def test_the_untrained_executor_copied_over_the_cached_random_one_is_never_trained_with(
    cache: Path, tmp_path: Path, capsys
) -> None:
    random = executor_config("random")
    cached = cached_executor_path(random, executors_dir())
    cached.parent.mkdir(parents=True)
    shutil.copyfile(shipped_file("untrained"), cached)
    run = tmp_path / "run"
    argv = ["train", *TINY, "--agent", "xlvin-r", "--transe-episodes", "2", "--out", str(run)]
    assert main(argv) == 2
    err = one_error_line(capsys)
    assert (f"{cached} does not hold the executor it is cached as: its header records epochs 0, "
            "the config asks 10; remove it") in err, err
    assert not run.exists()
    shutil.copyfile(shipped_file("random"), cached)  # the file it stands for: used
    assert cached_executor(random, executors_dir()) == cached


@pytest.mark.parametrize("change", ["family", "seed", "hidden", "lr", "missing", "not a dict"])
def test_a_cached_executor_whose_header_differs_in_any_field_is_refused(
    cache: Path, change: str
) -> None:
    random = executor_config("random")
    cached = cached_executor_path(random, executors_dir())
    cached.parent.mkdir(parents=True)
    source = shipped_file("random")
    with safe_open(str(source), framework="pt") as f:
        header = json.loads(f.metadata()["xlvin"])
    edits = {"family": ("family", "erdos_renyi_weighted"), "seed": ("seed", 1),
             "hidden": ("hidden", 51), "lr": ("lr", 0.002000001)}
    if change in edits:
        header[edits[change][0]] = edits[change][1]
    elif change == "missing":
        del header["batch_steps"]
    text = json.dumps(header if change != "not a dict" else [header])
    tensors = load_file(str(source))  # sealed again, as anyone can: the check is on the content
    save_file(tensors, str(cached), metadata={"xlvin": text, "xlvin-sha256": digest(text, tensors)})
    with pytest.raises(UserError) as err:
        cached_executor(random, executors_dir())
    assert "does not hold the executor it is cached as" in str(err.value) or (
        "metadata is not a JSON object" in str(err.value)), err.value
    assert "\n" not in str(err.value)


def test_another_envs_transe_pre_training_in_the_cache_is_refused(cache: Path) -> None:
    (cartpole,) = [e for e in shipped.manifest() if e["name"].startswith("CartPole-v0")]
    key = cartpole["config"]
    cached = shared_transe_path(key, "CartPole-v0")
    cached.parent.mkdir(parents=True)
    shutil.copyfile(shipped_file("Acrobot-v1 (paper protocol)"), cached)

    def never():
        raise AssertionError("made afresh")

    with pytest.raises(UserError, match=r"does not hold the TransE pre-training it is cached as: "
                       r"its header records env \"Acrobot-v1\", the config asks \"CartPole-v0\""):
        shared_transe_file(key, "CartPole-v0", never, never, None, "", False, False)
    shutil.copyfile(shipped.path(cartpole), cached)
    assert shared_transe_file(key, "CartPole-v0", never, never, None, "", False, False) == cached


@pytest.fixture(scope="module")
def finished_run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    run = tmp_path_factory.mktemp("finished") / "run"
    assert main(["train", *TINY, "--out", str(run)]) == 0
    return run


def copy_of(run: Path, dest: Path) -> Path:
    shutil.copytree(run, dest, ignore=shutil.ignore_patterns(".lock"))
    return dest


def test_evaluate_refuses_a_config_json_of_another_env(
    finished_run: Path, tmp_path: Path, capsys
) -> None:
    run = copy_of(finished_run, tmp_path / "run")
    config = json.loads((run / "config.json").read_text())
    config["train"]["env"] = "Acrobot-v1"
    (run / "config.json").write_text(json.dumps(config))
    assert main(["evaluate", str(run), "--episodes", "2"]) == 2
    err = one_error_line(capsys)
    assert (f"{run / 'config.json'} and {run / 'model.safetensors'} describe different runs "
            "(train.env differ: train.env is \"Acrobot-v1\" in one, \"CartPole-v1\" in the "
            "other); refused") in err, err


@pytest.mark.parametrize("content", [
    "[" * 1000 + "]" * 1000,
    json.dumps({"train": {"env": "CartPole-v1", "x": 1}}),
    json.dumps(json.loads("{}")),
    "nested",
])
def test_evaluate_refuses_a_config_json_that_is_no_run_config(
    finished_run: Path, tmp_path: Path, capsys, content: str
) -> None:
    run = copy_of(finished_run, tmp_path / "run")
    if content == "nested":  # {"train": {"train": ... {} ...}}, 1,000 levels
        content = '{"train": ' * 1000 + "{}" + "}" * 1000
    (run / "config.json").write_text(content)
    assert main(["evaluate", str(run), "--episodes", "2"]) == 2
    assert "config.json" in one_error_line(capsys)


def test_evaluate_still_reads_its_own_run(finished_run: Path, capsys) -> None:
    assert main(["evaluate", str(finished_run), "--episodes", "2"]) == 0
