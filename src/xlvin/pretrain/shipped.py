"""The pre-trained files shipped with xlvin (package data under xlvin/pretrain/data) and their
manifest, manifest.json: per file its kind (executor or TransE), name, config (everything that
determines it but the kernel mode), the hash its cache file is named by, the SHA-256 of its
tensors, the kernel mode it was made in (`xlvin.kernels`), for an executor whether it was
trained on the accelerated path (`accelerate`, `xlvin.accel.numpy_executor` or
`dense_executor`: the paths make other bits), the one command that re-creates it and the
seconds that took.

A run whose config matches a shipped file uses it instead of pre-training
(`xlvin.pretrain.files`), in either kernel mode: the shipped weights are those of reproducible
mode, the same on every x86-64 CPU with AVX2. `xlvin pretrain-executor --verify` and `xlvin
pretrain-transe --verify` re-create them and compare tensor digests (`verify`)."""

import hashlib
import json
import tempfile
import time
from collections.abc import Callable
from functools import cache
from pathlib import Path
from typing import Any

from xlvin.errors import UserError
from xlvin.io.weights import digest, load_weights
from xlvin.kernels import pinned

DATA = Path(__file__).parent / "data"
MANIFEST = "manifest.json"
FORMAT = "xlvin-shipped/1"


def config_hash(key: dict[str, Any], reproducible: bool) -> str:
    """The 12 hex digits a cached file is named by: the SHA-256 of `key` (everything that
    determines the file but the kernel mode) with the kernel mode added when `reproducible`."""
    full = {**key, "kernels": "reproducible"} if reproducible else key
    return hashlib.sha256(json.dumps(full, sort_keys=True).encode()).hexdigest()[:12]


def tensors_sha256(path: Path) -> str:
    """The SHA-256 of a weights file's tensors (name, dtype, shape and bytes of each), whatever
    its metadata says (training seconds differ between two runs that make equal weights)."""
    return digest("", load_weights(path, what="pre-trained")[0])


@cache
def manifest(data: Path = DATA) -> tuple[dict[str, Any], ...]:
    """The entries of the manifest in `data` (none where there is no manifest)."""
    source = data / MANIFEST
    if not source.is_file():
        return ()
    try:
        content = json.loads(source.read_text())
    except (OSError, ValueError) as err:
        raise UserError(f"corrupt manifest {source}: {err}") from None
    if not isinstance(content, dict) or content.get("format") != FORMAT:
        raise UserError(f"corrupt manifest {source}: not an {FORMAT} file")
    return tuple(content["files"])


def find(key: dict[str, Any], data: Path = DATA) -> dict[str, Any] | None:
    """The manifest entry of the shipped file made from `key`, None if none is."""
    return next((e for e in manifest(data) if e["config"] == key), None)


def path(entry: dict[str, Any], data: Path = DATA) -> Path:
    """The shipped file of a manifest entry."""
    return data / entry["file"]


def entries(kind: str, names: list[str], data: Path = DATA) -> list[dict[str, Any]]:
    """The manifest entries of `kind` named by `names` (a name or a file name; none: all of
    them); an unknown name is a UserError naming the known ones."""
    known = [e for e in manifest(data) if e["kind"] == kind]
    if not names:
        return known
    chosen = []
    for name in names:
        entry = next((e for e in known if name in (e["name"], e["file"])), None)
        if entry is None:
            raise UserError(f"no shipped {kind} file named {name!r}; shipped: "
                            f"{', '.join(e['name'] for e in known) or 'none'}")
        chosen.append(entry)
    return chosen


def compare(entry: dict[str, Any], remade: Path, data: Path = DATA) -> str | None:
    """None when `remade` holds the tensors the manifest records for `entry` (and the shipped
    file still does); else what differs, in one line."""
    shipped = tensors_sha256(path(entry, data))
    if shipped != entry["tensors_sha256"]:
        return f"the shipped {entry['file']} no longer matches its manifest"
    ours = tensors_sha256(remade)
    if ours != shipped:
        return f"re-created tensors differ: SHA-256 {ours[:16]}..., shipped {shipped[:16]}..."
    return None


def verify(
    chosen: list[dict[str, Any]], remake: Callable[[dict[str, Any], Path], None],
    data: Path = DATA,
) -> list[tuple[dict[str, Any], float, str | None]]:
    """Re-create each shipped file of `chosen` with `remake(entry, path)` in a temporary folder
    and compare its tensors (`compare`): (entry, seconds it took, what differs or None) each.
    Files made in reproducible mode are re-made in it or not at all (a UserError)."""
    if not pinned() and any(e["kernels"] == "reproducible" for e in chosen):
        raise UserError("the shipped files were made in reproducible mode: verify them in it "
                        "(--reproducible)")
    rows = []
    with tempfile.TemporaryDirectory() as folder:
        for entry in chosen:
            out = Path(folder) / entry["file"]
            start = time.perf_counter()
            remake(entry, out)
            rows.append((entry, time.perf_counter() - start, compare(entry, out, data)))
    return rows
