"""Numbers tied to what produced them: summary.json and eval.json carry a SHA-256 over their own
content and the digest of the run's weights (model.safetensors' header digest,
`xlvin.io.weights`); each metrics row carries one over its content and the previous row's
digest, a chain the resumed log continues; an Atari cell's final_eval.json, which may evaluate
an unfinished run, one tied to the metrics row at the transitions it evaluated. A digit changed
after writing is refused on read in one line naming the file, before it can reach a table or a
resumed run.

What the digests catch: a file changed after it was written (a flipped byte, a digit edited,
a truncated copy), and a file or a run directory copied in from another run (its seal is tied to
other weights). What they cannot catch: someone who edits a file and seals it again, since the
digests are plain SHA-256 that anyone can recompute, with no key the user holds
(docs/determinism.md).

A file this version writes is always sealed, so one without a seal (no `sha256` field; weights
without their header digest, `xlvin.io.weights`) is refused in one line, unless the process
accepts unsealed files (`xlvin.io.seals`, `--accept-unsealed`): the files of runs written by
an xlvin from before digests, then read unchecked with one notice per process. A row without
a seal after a sealed one in a metrics log is refused either way: no xlvin wrote that.
"""

import hashlib
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

from xlvin.errors import UserError
from xlvin.io.files import read_json, write_json
from xlvin.io.seals import unsealed
from xlvin.io.weights import weights_digest

#: The field that holds a file's (or a metrics row's) digest.
DIGEST_FIELD = "sha256"


def digest_of(data: dict[str, Any], tie: str) -> str:
    """SHA-256 of `tie` and of `data` (less its digest field) as canonical JSON."""
    content = {k: v for k, v in data.items() if k != DIGEST_FIELD}
    text = json.dumps(content, sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(f"{tie}\0{text}".encode()).hexdigest()


def sealed(data: dict[str, Any], tie: str) -> dict[str, Any]:
    """`data` with its digest, tied to `tie`."""
    return {**data, DIGEST_FIELD: digest_of(data, tie)}


def is_sealed(data: dict[str, Any], tie: str) -> bool:
    """False for data without a digest (legacy); True if its digest fits; else a ValueError."""
    if DIGEST_FIELD not in data:
        return False
    if data[DIGEST_FIELD] != digest_of(data, tie):
        raise ValueError("digest mismatch")
    return True


def run_tie(run_dir: Path) -> str:
    """What a finished run's result files are tied to: the digest of its model.safetensors."""
    return weights_digest(Path(run_dir) / "model.safetensors")


def write_sealed(path: Path, data: dict[str, Any], run_dir: Path) -> None:
    """Write the result file `path` of the finished run in `run_dir`, tied to its weights."""
    write_json(path, sealed(data, run_tie(run_dir)))


def read_sealed(path: Path, run_dir: Path) -> dict[str, Any]:
    """The result file `path` of the run in `run_dir`, less its digest, checked against the
    run's weights (`check_sealed`)."""
    return check_sealed(path, read_json(path), lambda: run_tie(run_dir),
                        "the run's model.safetensors")


def check_sealed(path: Path, data: Any, tie: Callable[[], str], tied_to: str) -> Any:
    """`data`, read from `path`, less its digest, checked against `tie()` (what it is tied to,
    in words: `tied_to`): a mismatch is one UserError naming the file; data without a digest is
    refused, or where this process accepts unsealed files, returned as it is
    (`xlvin.io.seals.unsealed`)."""
    if not isinstance(data, dict):
        return data  # its reader names it corrupt
    if DIGEST_FIELD not in data:
        unsealed(path)
        return data
    try:
        is_sealed(data, tie())
    except ValueError:
        raise UserError(f"{path}: its numbers do not match its SHA-256 (tied to {tied_to}): "
                        "changed after it was written; move it away and run again to produce it "
                        "anew") from None
    return {k: v for k, v in data.items() if k != DIGEST_FIELD}
