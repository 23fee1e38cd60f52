"""Executor files: the weights of a `VIExecutor` in safetensors, with a JSON description
(architecture, graph family, seed, training statistics) in the header metadata, so one file holds
everything and loading never runs code.
"""

from pathlib import Path
from typing import Any

import torch

from xlvin.errors import UserError
from xlvin.io.weights import load_weights, save_weights
from xlvin.nn.executor import VIExecutor

FORMAT = "xlvin-executor/2"


def save_executor(path: Path, executor: VIExecutor, meta: dict[str, Any]) -> None:
    """Write the weights and `meta` (JSON-serialisable) plus the architecture to `path`."""
    header = {
        "format": FORMAT,
        "hidden": executor.hidden,
        "aggregation": executor.processor.aggregation,
        "layer_norm": executor.processor.layer_norm,
        "messages": executor.processor.messages,
        **meta,
    }
    save_weights(path, executor, header)


def _read(path: Path) -> tuple[dict[str, torch.Tensor], dict[str, Any]]:
    tensors, header = load_weights(path, what="executor")
    if not isinstance(header, dict) or header.get("format") != FORMAT:
        raise UserError(f"corrupt executor file {path}: not an {FORMAT} file")
    return tensors, header


def read_executor_meta(path: Path) -> dict[str, Any]:
    """The JSON description stored in an executor file (architecture, family, seed, stats)."""
    return _read(path)[1]


def load_executor(path: Path) -> VIExecutor:
    """Rebuild the `VIExecutor` stored at `path` (in eval mode); a missing or corrupt file is a
    UserError.
    """
    tensors, header = _read(path)
    try:
        executor = VIExecutor(int(header["hidden"]), str(header["aggregation"]),
                              bool(header["layer_norm"]), str(header.get("messages", "relu")))
        executor.load_state_dict(tensors)
    except (KeyError, RuntimeError, ValueError, TypeError) as err:
        reason = str(err).splitlines()[0] if str(err) else type(err).__name__
        raise UserError(f"corrupt executor file {path}: {reason}") from None
    return executor.eval()
