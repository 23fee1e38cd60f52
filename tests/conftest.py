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
