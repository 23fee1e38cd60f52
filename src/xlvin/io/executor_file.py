"""Executor files: the weights of a `VIExecutor` in safetensors, with a JSON description
(architecture, graph family, seed, training statistics) in the header metadata, so one file holds
everything and loading never runs code.
"""

from pathlib import Path
from typing import Any

import torch

from xlvin.errors import UserError, one_line
from xlvin.io.weights import check_tensors, load_weights, save_weights
from xlvin.nn.executor import AGGREGATIONS, MESSAGES, VIExecutor

FORMAT = "xlvin-executor/2"
#: The widest executor a file may describe (a 4096-wide processor already holds ~200 MB).
MAX_HIDDEN = 4096


def save_executor(
    path: Path, executor: VIExecutor, meta: dict[str, Any], overwrite: bool = True
) -> None:
    """Write the weights and `meta` (JSON-serialisable) plus the architecture to `path` (without
    `overwrite`: only if no file is there by then)."""
    header = {
        "format": FORMAT,
        "hidden": executor.hidden,
        "aggregation": executor.processor.aggregation,
        "layer_norm": executor.processor.layer_norm,
        "messages": executor.processor.messages,
        **meta,
    }
    save_weights(path, executor, header, overwrite)


def _read(path: Path) -> tuple[dict[str, torch.Tensor], dict[str, Any]]:
    tensors, header = load_weights(path, what="executor")
    if not isinstance(header, dict) or header.get("format") != FORMAT:
        raise UserError(f"corrupt executor file {path}: not an {FORMAT} file")
    return tensors, header


def executor_architecture(header: Any, source: Path) -> dict[str, Any]:
    """The processor's constructor arguments (hidden, aggregation, layer_norm, messages) from an
    executor description, every field checked; anything else is one UserError."""
    if not isinstance(header, dict):
        raise UserError(f"corrupt executor description in {source}: not a JSON object")
    hidden, aggregation = header.get("hidden"), header.get("aggregation")
    layer_norm, messages = header.get("layer_norm"), header.get("messages", "relu")
    checks = [
        (type(hidden) is int and 1 <= hidden <= MAX_HIDDEN, f"hidden must be in [1, {MAX_HIDDEN}]"),
        (aggregation in AGGREGATIONS, f"aggregation must be one of {', '.join(AGGREGATIONS)}"),
        (type(layer_norm) is bool, "layer_norm must be true or false"),
        (messages in MESSAGES, f"messages must be one of {', '.join(MESSAGES)}"),
    ]
    for ok, message in checks:
        if not ok:
            raise UserError(f"corrupt executor description in {source}: {message}")
    return {"hidden": hidden, "aggregation": aggregation, "layer_norm": layer_norm,
            "messages": messages}


def read_executor_meta(path: Path) -> dict[str, Any]:
    """The JSON description stored in an executor file (architecture, family, seed, stats)."""
    return _read(path)[1]


def load_executor(path: Path) -> VIExecutor:
    """Rebuild the `VIExecutor` stored at `path` (in eval mode); a missing or corrupt file is a
    UserError.
    """
    tensors, header = _read(path)
    executor = VIExecutor(**executor_architecture(header, path))
    check_tensors(executor, tensors, path)
    try:
        executor.load_state_dict(tensors)
    except RuntimeError as err:
        raise UserError(f"corrupt executor file {path}: {one_line(err)}") from None
    return executor.eval()
