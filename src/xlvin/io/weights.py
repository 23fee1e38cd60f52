"""Weights files: safetensors tensors plus a JSON metadata header, written atomically.

Loading never executes code: safetensors holds raw tensors only, metadata is parsed as JSON.
The header also holds a SHA-256 of the metadata and of every tensor's name, dtype, shape and
bytes, checked whenever the tensors are loaded: a file whose bytes changed after it was written
is refused, not silently used. A file without it (written before the digest existed, or with it
removed) is refused too, unless unsealed files are accepted (`xlvin.io.seals`).
"""

import hashlib
import json
from pathlib import Path
from typing import Any

import torch
from safetensors import SafetensorError, safe_open
from safetensors.torch import load_file, save
from torch import nn

from xlvin.errors import UserError, one_line
from xlvin.io.files import atomic_write_bytes, check_regular
from xlvin.io.seals import unsealed

METADATA_KEY = "xlvin"
DIGEST_KEY = "xlvin-sha256"


def atomic_save_tensors(
    path: Path, tensors: dict[str, torch.Tensor], metadata: dict[str, Any], overwrite: bool = True
) -> None:
    """Save tensors and JSON-serialisable `metadata` to one safetensors file, atomically: a unique
    temporary file, fsync, then rename (a kill never leaves half a file; concurrent writers never
    interleave)."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tensors = {k: v.detach().cpu().contiguous().clone() for k, v in tensors.items()}
    header = json.dumps(metadata)
    data = save(tensors, metadata={METADATA_KEY: header, DIGEST_KEY: digest(header, tensors)})
    atomic_write_bytes(path, data, overwrite)


def digest(header: str, tensors: dict[str, torch.Tensor]) -> str:
    """SHA-256 of the metadata text and of each tensor (name, dtype, shape, bytes), by name."""
    h = hashlib.sha256(header.encode())
    for name in sorted(tensors):
        t = tensors[name].detach().cpu().contiguous()
        h.update(f"\0{name}\0{t.dtype}\0{tuple(t.shape)}\0".encode())
        h.update(t.reshape(-1).view(torch.uint8).numpy().tobytes())
    return h.hexdigest()


def save_weights(
    path: Path, module: nn.Module, metadata: dict[str, Any], overwrite: bool = True
) -> None:
    """Save `module`'s state dict and `metadata` to one safetensors file, atomically (without
    `overwrite`: only if no file is there by then)."""
    atomic_save_tensors(path, module.state_dict(), metadata, overwrite)


def load_weights(
    path: Path, what: str = "weights"
) -> tuple[dict[str, torch.Tensor], dict[str, Any]]:
    """Read (tensors, metadata) written by `save_weights`; one clear UserError if missing or
    corrupt, naming the file as a `what` file."""
    return _read(path, what, tensors=True)


def read_metadata(path: Path, what: str = "weights") -> dict[str, Any]:
    """Only the JSON metadata of a file written by `save_weights` (tensors are not read)."""
    return _read(path, what, tensors=False)[1]


def _read(path: Path, what: str, tensors: bool) -> tuple[dict[str, torch.Tensor], dict[str, Any]]:
    path = Path(path)
    if not path.exists():
        raise UserError(f"{what} file not found: {path}")
    check_regular(path, links=True)
    try:
        with safe_open(str(path), framework="pt") as f:
            header = f.metadata() or {}
        metadata = json.loads(header[METADATA_KEY])
        loaded = load_file(str(path)) if tensors else {}
    except (SafetensorError, OSError, KeyError, ValueError, RecursionError) as err:
        raise UserError(f"corrupt {what} file {path}: {one_line(err)}") from None
    if DIGEST_KEY not in header:
        unsealed(path, f"SHA-256 in its header ({DIGEST_KEY})")
    elif tensors and digest(header[METADATA_KEY], loaded) != header[DIGEST_KEY]:
        raise UserError(f"corrupt {what} file {path}: its tensors or metadata changed after it "
                        "was written (SHA-256 mismatch)")
    if not isinstance(metadata, dict):
        raise UserError(f"corrupt {what} file {path}: metadata is not a JSON object")
    return loaded, metadata


def weights_digest(path: Path) -> str:
    """The SHA-256 a weights file's header holds (checked against its tensors when they are
    loaded), read without reading the tensors, for the result files sealed to it; a file
    without one is one UserError (whatever older files are accepted: files sealed to it say
    it had one)."""
    path = Path(path)
    check_regular(path)
    try:
        with safe_open(str(path), framework="pt") as f:
            header = f.metadata() or {}
    except (SafetensorError, OSError) as err:
        raise UserError(f"corrupt weights file {path}: {one_line(err)}") from None
    if DIGEST_KEY not in header:
        raise UserError(f"{path} holds no SHA-256 in its header ({DIGEST_KEY}), though result "
                        "files beside it are sealed to one: it was removed; refused")
    return header[DIGEST_KEY]


def check_tensors(module: nn.Module, tensors: dict[str, torch.Tensor], source: Path) -> None:
    """Refuse, in one UserError naming the tensor, one whose dtype is not the module's own (which
    `load_state_dict` would cast in silence) or a floating-point one holding NaN or inf: a file
    re-saved with a valid digest is not trusted to hold weights a policy can act with."""
    own = module.state_dict()
    for name, tensor in tensors.items():
        expected = own[name].dtype if name in own else None
        if expected is not None and tensor.dtype != expected:
            raise UserError(f"weights in {source} do not fit this model: {name} is "
                            f"{tensor.dtype}, the model's is {expected}")
        if tensor.is_floating_point() and not bool(torch.isfinite(tensor).all()):
            raise UserError(f"weights in {source} are damaged: {name} holds NaN or inf")


def load_state(module: nn.Module, tensors: dict[str, torch.Tensor], source: Path) -> None:
    """Copy tensors into `module`, with one clear error if names, shapes or dtypes do not match
    or a value is not finite (`check_tensors`)."""
    check_tensors(module, tensors, source)
    try:
        module.load_state_dict(tensors, strict=True)
    except RuntimeError as err:
        raise UserError(f"weights in {source} do not fit this model: {one_line(err)}") from None
