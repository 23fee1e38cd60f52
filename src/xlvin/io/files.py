"""Files read and written whole: every reader of run files, results and configs checks a file's
type and size before it reads a byte (`read_checked`), and every result is written atomically
(`atomic_write_bytes`: a temporary file beside the target, then a rename).

A reader is never handed more than its limit: a 2 GB file (sparse or not), a FIFO, a device
(/dev/zero) or a folder is one UserError, refused from `fstat` alone. Inside a run directory or a
results folder a symbolic link is refused too (`links=False`), so no row is ever read from, or
written to, a file outside it.

A killed writer leaves its temporary file (`.NAME.RANDOM.tmp`) behind; the next writer in that
folder removes it (`remove_temporaries`). Each writer holds an exclusive `flock` on its temporary
file until the rename, so a temporary file whose lock can be taken belongs to a dead process and
a live writer's is never touched.
"""

import fcntl
import json
import os
import stat
import tempfile
from pathlib import Path
from typing import Any

from xlvin.errors import UserError

#: The largest result file (summary.json, eval.json, metrics.jsonl, a results table) a reader
#: takes: the largest written so far (a maze summary) holds 3 MB.
MAX_RESULT_BYTES = 64 << 20
#: The suffix of `atomic_write_bytes`'s temporary files (`.NAME.RANDOM.tmp` beside the target).
TEMPORARY_SUFFIX = ".tmp"

_KINDS = ((stat.S_ISDIR, "a folder"), (stat.S_ISCHR, "a character device"),
          (stat.S_ISBLK, "a block device"), (stat.S_ISFIFO, "a FIFO"),
          (stat.S_ISSOCK, "a socket"), (stat.S_ISLNK, "a symbolic link"))


def file_kind(mode: int) -> str:
    """What a file of `mode` is, in words (`a FIFO`, `a symbolic link`, ...)."""
    return next((name for test, name in _KINDS if test(mode)), "not a regular file")


def check_regular(path: Path, links: bool = False) -> None:
    """Refuse `path` unless it is a regular file (without `links`, not a symbolic link either)."""
    try:
        mode = (os.stat if links else os.lstat)(path).st_mode
    except FileNotFoundError:
        raise UserError(f"{path}: not found") from None
    if not stat.S_ISREG(mode):
        raise UserError(f"{path} is {file_kind(mode)}, not a regular file; refused")


def read_checked(path: Path, limit: int = MAX_RESULT_BYTES, links: bool = False) -> bytes:
    """The bytes of the regular file `path`, at most `limit` of them: anything else (missing, a
    folder, a device, a FIFO, a symbolic link unless `links`, or larger than `limit`) is one
    UserError, decided before anything is read."""
    flags = os.O_RDONLY | os.O_NONBLOCK | (0 if links else os.O_NOFOLLOW)
    try:
        fd = os.open(path, flags)
    except FileNotFoundError:
        raise UserError(f"{path}: not found") from None
    except OSError:  # ELOOP: the last component is a symbolic link
        check_regular(path, links)
        raise
    info = os.fstat(fd)
    if not stat.S_ISREG(info.st_mode):
        os.close(fd)
        raise UserError(f"{path} is {file_kind(info.st_mode)}, not a regular file; refused")
    with os.fdopen(fd, "rb") as f:
        data = f.read(min(info.st_size, limit) + 1)
    if len(data) > limit:
        raise UserError(f"{path} is larger than {limit} bytes ({max(info.st_size, len(data))} "
                        "bytes), more than such a file may hold; refused unread")
    return data


def read_json(path: Path, limit: int = MAX_RESULT_BYTES, links: bool = False) -> Any:
    """The JSON value in `path`, read by `read_checked`; text that is not JSON (bad UTF-8, deep
    nesting included) is a ValueError, for `xlvin.io.run_dir.reading_results` to name."""
    data = read_checked(path, limit, links)
    try:
        return json.loads(data.decode())
    except RecursionError:
        raise ValueError("nested too deeply") from None


def current_umask() -> int:
    """This process's umask (read by setting it and putting it back)."""
    mask = os.umask(0o022)
    os.umask(mask)
    return mask


def _locked_temporary(path: Path) -> tuple[int, str]:
    """A new temporary file beside `path`, locked (a cleaner that took it between its creation
    and the lock has unlinked it: then another one)."""
    while True:
        fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=TEMPORARY_SUFFIX)
        fcntl.flock(fd, fcntl.LOCK_EX)
        if os.fstat(fd).st_nlink:
            return fd, tmp
        os.close(fd)


def atomic_write_bytes(path: Path, data: bytes, overwrite: bool = True) -> None:
    """Write `data` to a temporary file beside `path`, then rename: a crash never leaves half a
    file. The file gets the permissions a plain `open` would give it (0666 less the umask), not the
    temporary file's 0600. An OSError names `path`. Without `overwrite`, the file is linked into
    place only if `path` does not exist by then (a UserError if another process made it first)."""
    path = Path(path)
    fd, tmp = _locked_temporary(path)
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


def atomic_write_text(path: Path, text: str) -> None:
    atomic_write_bytes(path, text.encode())


def atomic_savefig(fig: Any, path: Path, **kwargs: Any) -> None:
    """matplotlib's `fig.savefig(path, **kwargs)`, written atomically (PNG unless `path` says
    otherwise)."""
    import io

    buffer = io.BytesIO()
    fig.savefig(buffer, format=Path(path).suffix.lstrip(".") or "png", **kwargs)
    atomic_write_bytes(path, buffer.getvalue())


def remove_temporaries(folder: Path) -> None:
    """Delete the temporary files (`.NAME.RANDOM.tmp`) that killed writers left in `folder`: those
    whose lock can be taken (a live writer holds its own)."""
    for leftover in Path(folder).glob(f".*{TEMPORARY_SUFFIX}"):
        try:
            fd = os.open(leftover, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
        except OSError:  # gone meanwhile, or a link: left alone
            continue
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            if stat.S_ISREG(os.fstat(fd).st_mode):
                leftover.unlink(missing_ok=True)
        except BlockingIOError:
            pass
        finally:
            os.close(fd)


def prepare_results(folder: Path) -> Path:
    """A results folder, created if missing, without the temporary files of killed writers."""
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    remove_temporaries(folder)
    return folder


def write_json(path: Path, data: dict[str, Any]) -> None:
    """`data` as indented JSON with sorted keys, written atomically."""
    atomic_write_text(Path(path), json.dumps(data, indent=2, sort_keys=True) + "\n")
