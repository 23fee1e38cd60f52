"""Weights files: safetensors tensors plus a JSON metadata header, written atomically.

Loading never executes code: safetensors holds raw tensors only, metadata is parsed as JSON.
The header also holds a SHA-256 of the metadata and of every tensor's name, dtype, shape and
bytes, checked whenever the tensors are loaded: a file whose bytes changed after it was written
is refused, not silently used (files written before the digest existed load unchecked).
"""

import hashlib
import json
import os
import tempfile
from pathlib import Path
from typing import Any

import torch
from safetensors import SafetensorError, safe_open
from safetensors.torch import load_file, save
from torch import nn

from xlvin.errors import UserError, one_line

METADATA_KEY = "xlvin"
DIGEST_KEY = "xlvin-sha256"
#: The suffix of `atomic_write_bytes`'s temporary files (`.NAME.RANDOM.tmp` beside the target).
TEMPORARY_SUFFIX = ".tmp"


def current_umask() -> int:
    """This process's umask (read by setting it and putting it back)."""
    mask = os.umask(0o022)
    os.umask(mask)
    return mask


def atomic_write_bytes(path: Path, data: bytes, overwrite: bool = True) -> None:
    """Write `data` to a temporary file beside `path`, then rename: a crash never leaves half a
    file. The file gets the permissions a plain `open` would give it (0666 less the umask), not the
    temporary file's 0600. An OSError names `path`. Without `overwrite`, the file is linked into
    place only if `path` does not exist by then (a UserError if another process made it first)."""
    path = Path(path)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=TEMPORARY_SUFFIX)
    try:
        os.fchmod(fd, 0o666 & ~current_umask())
        with os.fdopen(fd, "wb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        if overwrite:
            os.replace(tmp, path)
        else:
            os.link(tmp, path)  # fails if path exists: no check-then-write race
            Path(tmp).unlink()
    except FileExistsError:
        Path(tmp).unlink(missing_ok=True)
        raise UserError(f"{path} was written by another process meanwhile; left as it is "
                        "(pass --force to overwrite it)") from None
    except OSError as err:  # a full disk, say: named after the file it could not write
        Path(tmp).unlink(missing_ok=True)
        raise OSError(err.errno, err.strerror, str(path)) from None
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    directory = os.open(path.parent, os.O_RDONLY)  # make the rename itself durable
    try:
        os.fsync(directory)
    finally:
        os.close(directory)


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
    if not path.is_file():
        raise UserError(f"{what} file not found: {path}")
    try:
        with safe_open(str(path), framework="pt") as f:
            header = f.metadata() or {}
        metadata = json.loads(header[METADATA_KEY])
        loaded = load_file(str(path)) if tensors else {}
    except (SafetensorError, OSError, KeyError, ValueError, RecursionError) as err:
        raise UserError(f"corrupt {what} file {path}: {one_line(err)}") from None
    if tensors and DIGEST_KEY in header and digest(header[METADATA_KEY], loaded) != header[DIGEST_KEY]:
        raise UserError(f"corrupt {what} file {path}: its tensors or metadata changed after it "
                        "was written (SHA-256 mismatch)")
    if not isinstance(metadata, dict):
        raise UserError(f"corrupt {what} file {path}: metadata is not a JSON object")
    return loaded, metadata


def load_state(module: nn.Module, tensors: dict[str, torch.Tensor], source: Path) -> None:
    """Copy tensors into `module`, with one clear error if names or shapes do not match."""
    try:
        module.load_state_dict(tensors, strict=True)
    except RuntimeError as err:
        raise UserError(f"weights in {source} do not fit this model: {one_line(err)}") from None
