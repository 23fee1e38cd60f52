"""The pre-trained files shipped with xlvin: their manifest, their use by runs whose config
matches, and their re-creation (`--verify`)."""

import dataclasses
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from xlvin.cli import main
from xlvin.errors import UserError
from xlvin.pretrain import files, shipped
from xlvin.pretrain.executor_config import DEFAULT_EXECUTORS, ExecutorConfig, executor_key

#: The reproducible-mode hashes of default executors that committed results were trained with:
#: a changed default executor config would silently leave them.
PINNED = {"authors-random": "498f85d193dd", "maze": "c63eef076fc9",
          "maze-untrained": "ba6b260f5aef", "maze-random": "0dccf5b76283",
          "untrained": "85b63fb031cf", "random": "518d1ec9f33b", "cartpole": "bde0ee37066d"}


@pytest.mark.parametrize("name", sorted(PINNED))
def test_the_default_executors_keep_their_configs(name: str) -> None:
    assert shipped.config_hash(executor_key(DEFAULT_EXECUTORS[name]), True) == PINNED[name]


def test_every_shipped_file_matches_its_manifest() -> None:
    """Each file carries its config's hash in its name and holds the tensors the manifest
    records; each executor's config is a default executor's (or a variant of one)."""
    entries = shipped.manifest()
    assert {"authors-random", "maze", "untrained"} <= {e["name"] for e in entries}
    for entry in entries:
        assert entry["file"].endswith(f"-{entry['config_hash']}.safetensors")
        assert shipped.config_hash(entry["config"], True) == entry["config_hash"]
        assert shipped.tensors_sha256(shipped.path(entry)) == entry["tensors_sha256"]
        assert entry["kernels"] == "reproducible" and entry["command"].startswith("xlvin ")
        if entry["name"] in DEFAULT_EXECUTORS:
            assert entry["config"] == executor_key(DEFAULT_EXECUTORS[entry["name"]])


def test_a_matching_run_uses_the_shipped_file_and_says_so_once(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("XLVIN_CACHE", str(tmp_path))
    monkeypatch.setattr(files, "_announced", set())
    path = files.executor_file("authors-random", progress=True)
    assert path.parent == shipped.DATA and path.name.endswith("-498f85d193dd.safetensors")
    assert files.executor_file("authors-random", progress=True) == path
    lines = capsys.readouterr().err.splitlines()
    assert lines == [f"using the shipped executor 'authors-random' ({path.name}, pre-trained in "
                     "reproducible mode)"]
    assert not any(tmp_path.iterdir())  # nothing trained, nothing cached


def test_the_cache_comes_before_the_shipped_file(tmp_path: Path) -> None:
    cfg = DEFAULT_EXECUTORS["untrained"]
    cached = files.cached_executor_path(cfg, tmp_path)
    cached.write_bytes(shipped.path(shipped.find(executor_key(cfg))).read_bytes())
    assert files.cached_executor(cfg, tmp_path) == cached


TINY = ExecutorConfig(states=4, actions=2, train_graphs=4, epochs=2, hidden=8)


@pytest.fixture
def tiny_shipped(tmp_path: Path) -> Path:
    """A data folder shipping one tiny trained executor (made here in the default kernel mode)."""
    data = tmp_path / "data"
    name = files.cached_executor_path(TINY, tmp_path).name
    files.make_executor(TINY, data / name)
    entry = {"file": name, "kind": "executor", "name": "tiny", "config": executor_key(TINY),
             "config_hash": name[-24:-12], "tensors_sha256": shipped.tensors_sha256(data / name),
             "kernels": "cpu-default", "command": "xlvin pretrain-executor ..."}
    (data / shipped.MANIFEST).write_text(json.dumps({"format": shipped.FORMAT, "files": [entry]}))
    return data


def _remake(entry: dict, out: Path) -> None:
    files.make_executor(ExecutorConfig(**{k: v for k, v in entry["config"].items()
                                          if k != "format"}), out)


def test_verify_recreates_a_trained_executor_bit_for_bit(tiny_shipped: Path) -> None:
    [(entry, seconds, problem)] = shipped.verify(shipped.entries("executor", [], tiny_shipped),
                                                 _remake, tiny_shipped)
    assert entry["name"] == "tiny" and problem is None and seconds > 0


def test_verify_names_a_difference(tiny_shipped: Path) -> None:
    def other_seed(entry: dict, out: Path) -> None:
        _remake({**entry, "config": {**entry["config"], "seed": 1}}, out)

    [(_, _, problem)] = shipped.verify(shipped.entries("executor", ["tiny"], tiny_shipped),
                                       other_seed, tiny_shipped)
    assert problem is not None and problem.startswith("re-created tensors differ")


def test_an_unknown_shipped_name_lists_the_known_ones(tiny_shipped: Path) -> None:
    with pytest.raises(UserError, match="no shipped executor file named 'nope'; shipped: tiny"):
        shipped.entries("executor", ["nope"], tiny_shipped)


def test_pretrain_executor_without_verify_needs_graphs_and_out(
    capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["pretrain-executor", "--out", "x.safetensors"]) == 2
    assert "needs --graphs and --out (or --verify)" in capsys.readouterr().err


def test_verify_reproduces_a_shipped_executor_in_reproducible_mode(tmp_path: Path) -> None:
    """`xlvin pretrain-executor --verify untrained`: the command a user runs, in a process of
    its own (reproducible mode is set before torch loads)."""
    env = {**os.environ, "XLVIN_CACHE": str(tmp_path)}
    done = subprocess.run([sys.executable, "-m", "xlvin.cli", "pretrain-executor", "--verify",
                           "untrained"], capture_output=True, text=True, env=env, timeout=600)
    assert done.returncode == 0, done.stderr
    assert "(untrained): bit-identical tensors, re-created in" in done.stdout


def test_a_config_no_file_matches_is_pretrained_with_its_progress(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setitem(DEFAULT_EXECUTORS, "random", dataclasses.replace(TINY, seed=3))
    monkeypatch.setenv("XLVIN_CACHE", str(tmp_path))
    path = files.executor_file("random", progress=True)
    assert path.parent == tmp_path / "executors" and path.exists()
    assert "pre-training executor" in capsys.readouterr().err
