"""The quickstart's golden fixture (tests/fixtures/quickstart-golden.json) and a reduced run of
its XLVIN-R path in CI: the `authors-random` executor and the CartPole-v0 TransE pre-trained on
a few graphs and episodes, then XLVIN-R trained for 3 updates under protocol `paper`, all in
reproducible mode (conftest). Their tensor digests and evaluations are pinned in
tests/fixtures/kernels/quickstart-reduced.json with the CPU and library versions they were
recorded with, as test_kernels.py pins its digest: reproducible mode promises them on every
x86-64 CPU with AVX2. The whole quickstart is checked against the fixture by
scripts/check_golden.py (about 30 minutes on 2 cores)."""

import dataclasses
import hashlib
import json
from importlib.metadata import version
from pathlib import Path

import pytest

from xlvin.experiments import table1
from xlvin.io.weights import load_weights
from xlvin.pretrain import shipped
from xlvin.pretrain.executor import DEFAULT_EXECUTORS
from xlvin.pretrain.files import (
    cached_executor_path,
    executor_config,
    executors_dir,
    shared_transe_path,
)
from xlvin.train.run import train_run
from xlvin.train.run_config import check_run, transe_key

FIXTURES = Path(__file__).parent / "fixtures"
GOLDEN = json.loads((FIXTURES / "quickstart-golden.json").read_text())
REDUCED = FIXTURES / "kernels" / "quickstart-reduced.json"
LIBRARIES = ("torch", "numpy", "gymnasium")


def golden_digest(path: Path) -> str:
    """The golden fixture's digest of a weights file: SHA-256 over its tensors in name order,
    each name followed by the tensor's raw bytes (scripts/check_golden.py computes it so)."""
    tensors, _ = load_weights(path)
    digest = hashlib.sha256()
    for name in sorted(tensors):
        digest.update(name.encode() + tensors[name].contiguous().numpy().tobytes())
    return digest.hexdigest()


def test_the_shipped_files_are_the_golden_quickstarts() -> None:
    """The quickstart uses the shipped executor and TransE: they are the files whose digests
    the fixture recorded, so a run of it on another CPU checks training and evaluation there."""
    for label, name in (("authors-random executor", "authors-random"),
                        ("CartPole-v0 TransE", "CartPole-v0 (paper protocol)")):
        (entry,) = [e for e in shipped.manifest() if e["name"] == name]
        path = shipped.path(entry)
        assert golden_digest(path)[:16] == GOLDEN["tensor_sha256_prefixes"][label], label
        assert entry["kernels"] == "reproducible" and shipped.tensors_sha256(path) == entry["tensors_sha256"]
    assert set(GOLDEN["libraries"]) == set(LIBRARIES)
    for numbers in GOLDEN["agents"].values():
        assert len(numbers["final"]) == len(numbers["max_eval"]) == len(GOLDEN["seeds"])


def reduced_run(root: Path) -> dict:
    """The quickstart's XLVIN-R seed 0, reduced: its executor's pre-training on 8 graphs, its
    TransE's on 100 random episodes for 1 epoch, 3 updates with 5-episode evaluations; the
    digests of the three sets of weights and the evaluations."""
    cfg = table1.Cell("paper", "CartPole-v0", "xlvin-r", 0).config()
    cfg = dataclasses.replace(
        cfg, transe=dataclasses.replace(cfg.transe, episodes=100, epochs=1),
        low_data=dataclasses.replace(cfg.low_data, updates=3, eval_points=3, eval_episodes=5))
    run_dir = root / "run"
    _, summary = train_run(cfg, run_dir, progress=False, pretrain_progress=False)
    files = {
        "executor": cached_executor_path(executor_config(cfg.train.executor, cfg.train),
                                         executors_dir()),
        "transe": shared_transe_path(transe_key(cfg, *check_run(cfg)), cfg.train.env),
        "policy": run_dir / "model.safetensors",
    }
    return {
        "tensors_sha256": {part: shipped.tensors_sha256(path) for part, path in files.items()},
        "eval_returns": [p["eval_return"] for p in summary["ppo"]["progress"]],
        "kernels": summary["kernels"]["mode"],
    }


def test_a_reduced_quickstart_gives_the_pinned_weights(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setitem(DEFAULT_EXECUTORS, "authors-random", dataclasses.replace(
        DEFAULT_EXECUTORS["authors-random"], train_graphs=4, states=5, actions=2))
    monkeypatch.setenv("XLVIN_CACHE", str(tmp_path / "cache"))
    got = reduced_run(tmp_path)
    assert got["kernels"] == "reproducible" and len(got["eval_returns"]) == 3
    pinned = json.loads(REDUCED.read_text())
    versions = {name: version(name) for name in LIBRARIES}
    if versions != pinned["versions"]:
        pytest.skip(f"the pinned digests hold for {pinned['versions']}, not {versions}")
    for part, digest in pinned["tensors_sha256"].items():  # the first that differs says where
        assert got["tensors_sha256"][part] == digest, f"{part}: recorded on {pinned['cpu']}"
    assert got["eval_returns"] == pinned["eval_returns"]
