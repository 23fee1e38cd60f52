import dataclasses
from pathlib import Path

import pytest
import torch

from xlvin.io.executor_file import save_executor
from xlvin.nn.executor import VIExecutor

torch.set_num_threads(1)


@pytest.fixture(scope="module")
def executor_path(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A small (untrained) executor file: for tests of the pipeline, not of its quality."""
    torch.manual_seed(0)
    path = tmp_path_factory.mktemp("exec") / "executor.safetensors"
    save_executor(path, VIExecutor(hidden=16, aggregation="max", layer_norm=True), {"family": "test"})
    return path


@pytest.fixture
def tiny_default_executors(monkeypatch: pytest.MonkeyPatch, tmp_path_factory: pytest.TempPathFactory) -> None:
    """`--executor random` (and cartpole) pre-trained on 4 graphs for 1 epoch, cached in a
    fresh folder: for code that uses the default executors, fast (not for their quality)."""
    from xlvin.pretrain.executor_config import DEFAULT_EXECUTORS

    for kind in ("random", "cartpole"):
        monkeypatch.setitem(DEFAULT_EXECUTORS, kind, dataclasses.replace(
            DEFAULT_EXECUTORS[kind], train_graphs=4, epochs=1))
    monkeypatch.setenv("XLVIN_CACHE", str(tmp_path_factory.mktemp("cache")))


@pytest.fixture
def accept_unsealed(monkeypatch: pytest.MonkeyPatch) -> None:
    """Run directories written by hand in a test, as an xlvin from before seals wrote them (no
    weights, no SHA-256): read as `--accept-unsealed` reads them (`xlvin.io.seals`)."""
    from xlvin.io.seals import ACCEPT_UNSEALED

    monkeypatch.setenv(ACCEPT_UNSEALED, "1")
