"""Executor files: the weights of a `VIExecutor` in safetensors, with a JSON description
(architecture, graph family, seed, training statistics) in the header metadata, so one file holds
everything and loading never runs code.
"""

import json
from pathlib import Path
from typing import Any

import torch
from safetensors import SafetensorError, safe_open
from safetensors.torch import save_file

from xlvin.errors import UserError
from xlvin.nn.executor import VIExecutor

FORMAT = "xlvin-executor/1"
_KEY = "xlvin_executor"


def save_executor(path: Path, executor: VIExecutor, meta: dict[str, Any]) -> None:
    """Write the weights and `meta` (JSON-serialisable) plus the architecture to `path`."""
    header = {
        "format": FORMAT,
        "hidden": executor.hidden,
        "aggregation": executor.processor.aggregation,
        "layer_norm": executor.processor.layer_norm,
        **meta,
    }
    tensors = {k: v.detach().contiguous() for k, v in executor.state_dict().items()}
    Path(path).parent.mkdir(parents=True, exist_ok=True)
    save_file(tensors, str(path), metadata={_KEY: json.dumps(header)})


def _read(path: Path) -> tuple[dict[str, torch.Tensor], dict[str, Any]]:
    try:
        with safe_open(str(path), framework="pt") as f:
            header = json.loads((f.metadata() or {})[_KEY])
            tensors = {k: f.get_tensor(k) for k in f.keys()}
    except FileNotFoundError:
        raise UserError(f"executor file not found: {path}") from None
    except (SafetensorError, OSError, KeyError, ValueError) as err:
        reason = str(err).splitlines()[0] if str(err) else type(err).__name__
        raise UserError(f"corrupt executor file {path}: {reason}") from None
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
                              bool(header["layer_norm"]))
        executor.load_state_dict(tensors)
    except (KeyError, RuntimeError, ValueError, TypeError) as err:
        reason = str(err).splitlines()[0] if str(err) else type(err).__name__
        raise UserError(f"corrupt executor file {path}: {reason}") from None
    return executor.eval()
