"""Files without a seal: this version seals every result file and weights file it writes
(`xlvin.io.digests`, `xlvin.io.weights`), so one without a seal was written by an xlvin from
before seals, or had its seal removed. It is refused in one line naming the option that reads
it (`unsealed`), unless this process accepts unsealed files: `--accept-unsealed` on the command
line, ACCEPT_UNSEALED=1 in the environment (in Python; spawned workers inherit it), for the
run directories of older runs, then read unchecked with one notice per process."""

import os
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from xlvin.errors import UserError

#: Set to 1 in a process's environment (`--accept-unsealed`), files without a seal are read.
ACCEPT_UNSEALED = "XLVIN_ACCEPT_UNSEALED"
_noticed: set[str] = set()


def accepting_unsealed() -> bool:
    """Whether this process reads files without a seal (`ACCEPT_UNSEALED`)."""
    return os.environ.get(ACCEPT_UNSEALED) == "1"


@contextmanager
def accept_unsealed(accept: bool) -> Iterator[None]:
    """Within the block, files without a seal are read (`accept`: `--accept-unsealed`) or
    refused; the process's setting is restored after it."""
    before = os.environ.get(ACCEPT_UNSEALED)
    if accept:
        os.environ[ACCEPT_UNSEALED] = "1"
    try:
        yield
    finally:
        if before is None:
            os.environ.pop(ACCEPT_UNSEALED, None)
        else:
            os.environ[ACCEPT_UNSEALED] = before


def unsealed(path: Path, what: str = "SHA-256") -> None:
    """The file `path` holds no seal (`what` it lacks): one UserError naming the option that
    reads it, unless this process accepts unsealed files (then one `legacy_notice`)."""
    if not accepting_unsealed():
        raise UserError(f"{path} holds no {what}: xlvin seals every such file it writes, so an "
                        "older xlvin wrote it or its seal was removed; pass --accept-unsealed "
                        f"(in Python: {ACCEPT_UNSEALED}=1 in the environment) to read the files "
                        "of older runs unchecked")
    legacy_notice(path)


def legacy_notice(path: Path) -> None:
    """One line on stderr, once per process: files without digests are read unchecked."""
    if _noticed:
        return
    _noticed.add(str(path))
    print(f"xlvin: note: {path} (and maybe others) holds no SHA-256, written by an older xlvin; "
          "its numbers are read unchecked", file=sys.stderr)
