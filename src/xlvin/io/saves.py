"""Saves: the folders `Model.save`, `Model.save_policy`, the callbacks and `xlvin quickstart`
write, which of them a later write may replace, and how a save takes an earlier one's place.

    a saved policy   DIR/config.json and DIR/model.safetensors (its `num_timesteps` in the
                     header): `save_policy`, the callbacks' saves, `save` before `learn`
    a saved run      a copy of a run directory (`save` after `learn` or `load`)

Every save ends with its manifest, DIR/.saved: {"files": {relative path: SHA-256}} of every file
it wrote. A later save replaces a folder only when it is empty or every entry in it is one its
manifest lists, unchanged (`is_save`), as Stable-Baselines3's save overwrites its own, so that a
script runs twice. Anything else (a run directory `xlvin train` wrote, a Hugging Face model
folder, a user's config.json, a save with a file added or edited) is refused in one line and
left as it is.

A save is atomic (`writing_save`): the new one is written whole into a folder beside DIR,
`.DIR.xlvin-save-RANDOM`, marked unfinished (`PARTIAL`, which `load` refuses) until it is
complete, then the two folders trade places in one `renameat2(RENAME_EXCHANGE)` and the old one
is removed. A kill at any instant leaves DIR holding the old save or the new one, whole; a full
disk leaves the old save and one error line. Leftovers of a killed save are removed by the next
save to the same path.
"""

import contextlib
import ctypes
import ctypes.util
import errno
import fcntl
import hashlib
import os
import secrets
import shutil
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from torch import nn

from xlvin.errors import UserError
from xlvin.io.digests import read_sealed
from xlvin.io.files import read_json, write_json
from xlvin.io.run_dir import (
    CONFIG,
    LOCK,
    MODEL,
    PARTIAL,
    SUMMARY,
    check_creatable,
    reading_results,
)
from xlvin.io.weights import read_metadata, save_weights

#: A save's manifest: JSON {"files": {relative path: SHA-256 of its bytes}}, written last.
SAVED = ".saved"
#: File suffixes that a save refuses: it writes a folder, not one file.
FILE_SUFFIXES = (".zip", ".pkl", ".pt", ".pth", ".safetensors", ".tar", ".gz")
#: The largest manifest read (a saved run lists its TensorBoard events and checkpoints).
_MAX_MANIFEST_BYTES = 16 << 20
_RENAME_EXCHANGE = 2


def file_digest(path: Path) -> str:
    """SHA-256 of the bytes of the regular file `path`."""
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def _manifest(folder: Path) -> dict[str, str] | None:
    """The files `folder`'s manifest lists, with their digests; None where it has none that is
    readable and well-formed."""
    try:
        data = read_json(folder / SAVED, _MAX_MANIFEST_BYTES)
    except (UserError, OSError, ValueError):
        return None
    files = data.get("files") if isinstance(data, dict) else None
    if not isinstance(files, dict) or not all(
            isinstance(k, str) and isinstance(v, str) for k, v in files.items()):
        return None
    return files


def _entries(folder: Path) -> Iterator[tuple[str, os.DirEntry]]:
    """Every entry under `folder` (recursively, links not followed) by its relative path, the
    folder's own lock and manifest aside."""
    stack = [("", folder)]
    while stack:
        prefix, here = stack.pop()
        with os.scandir(here) as it:
            for entry in it:
                rel = prefix + entry.name
                if not prefix and entry.name in (LOCK, SAVED):
                    continue
                yield rel, entry
                if entry.is_dir(follow_symlinks=False):
                    stack.append((rel + "/", Path(entry.path)))


def is_save(path: Path) -> bool:
    """Whether `path` is a folder a save may replace: empty (its lock aside), or holding only
    files its manifest lists, each with the bytes it was written with."""
    if not path.is_dir() or path.is_symlink():
        return False
    files = None
    for rel, entry in _entries(path):
        if files is None:
            files = _manifest(path)
            if files is None:
                return False
            folders = {f.rsplit("/", 1)[0] for f in files if "/" in f}
            folders |= {p for f in folders for p in _parents(f)}
        if entry.is_dir(follow_symlinks=False):
            if rel not in folders:
                return False
        elif not entry.is_file(follow_symlinks=False) or files.get(rel) != file_digest(
                Path(entry.path)):
            return False
    return True


def _parents(rel: str) -> list[str]:
    parts = rel.split("/")
    return ["/".join(parts[:i]) for i in range(1, len(parts))]


def refuse_file_name(path: Path, what: str) -> None:
    """Refuse a path `what` (a save) is given that names a file, such as model.zip."""
    if path.suffix.lower() in FILE_SUFFIXES and not path.is_dir():
        raise UserError(f"{what}: a model is saved as a run directory, not a {path.suffix} "
                        f"file; give a folder, e.g. {str(path.with_suffix(''))!r}")


def check_save_path(path: Path, what: str) -> None:
    """Refuse, in one line and changing nothing, a path `what` (a save) may not write: one
    holding anything but an earlier save; a new or empty folder, or an earlier save, it may."""
    if path.is_symlink():
        raise UserError(f"{what}: {path} is a symbolic link, kept as it is; give a folder")
    if path.is_dir() and is_save(path):
        return
    if path.exists() and not path.is_dir():
        raise UserError(f"{what}: {path} is a file, kept as it is; give a folder")
    if path.exists():
        held = "a run directory" if (path / CONFIG).exists() else "files"
        raise UserError(f"{what}: {path} holds {held} that no save wrote (or changed since), "
                        "kept as it is; give a new or empty folder, or one an earlier save "
                        "wrote (it is replaced)")
    check_creatable(path)


def _exchange(a: Path, b: Path) -> None:
    """Swap the folders `a` and `b` in one step (Linux renameat2's RENAME_EXCHANGE)."""
    libc = ctypes.CDLL(ctypes.util.find_library("c"), use_errno=True)
    renameat2 = getattr(libc, "renameat2", None)
    if renameat2 is None:
        raise OSError(errno.ENOSYS, "this system cannot swap two folders atomically", str(b))
    if renameat2(-100, os.fsencode(a), -100, os.fsencode(b), _RENAME_EXCHANGE) != 0:
        code = ctypes.get_errno()
        raise OSError(code, os.strerror(code), str(b))


def _lock(folder: Path) -> int:
    """An exclusive lock on `folder`'s lock file (a regular file, no link followed); -1 where
    another process holds it."""
    fd = os.open(folder / LOCK, os.O_RDONLY | os.O_CREAT | os.O_NOFOLLOW | os.O_NONBLOCK, 0o666)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        os.close(fd)
        return -1
    return fd


def _remove_leftovers(path: Path) -> None:
    """Remove what killed saves to `path` left beside it: `.NAME.xlvin-save-*` folders that
    hold a save or an unfinished one, and whose lock no live process holds."""
    for leftover in path.parent.glob(f".{path.name}.xlvin-save-*"):
        if leftover.is_symlink() or not leftover.is_dir():
            continue
        if not ((leftover / PARTIAL).is_file() or is_save(leftover)):
            continue
        with contextlib.suppress(OSError):
            fd = _lock(leftover)
            if fd >= 0:
                try:
                    shutil.rmtree(leftover)
                finally:
                    os.close(fd)


@contextlib.contextmanager
def writing_save(path: Path, what: str) -> Iterator[Path]:
    """Yield a new folder to write a save into; when the block ends, the folder (with its
    manifest) takes `path`'s place in one step and the earlier save there is removed. An error
    in the block (a full disk, say) leaves `path` as it was; an OSError becomes one line."""
    check_save_path(path, what)
    path.parent.mkdir(parents=True, exist_ok=True)
    _remove_leftovers(path)
    staging = path.parent / f".{path.name}.xlvin-save-{secrets.token_hex(4)}"
    fd = -1
    try:
        staging.mkdir()
        fd = _lock(staging)
        (staging / PARTIAL).touch()
        yield staging
        write_json(staging / SAVED, {"files": {
            rel: file_digest(Path(e.path)) for rel, e in _entries(staging)
            if e.is_file(follow_symlinks=False) and rel != PARTIAL}})
        (staging / PARTIAL).unlink()
        path.mkdir(exist_ok=True)
        held = _lock(path)
        if held < 0:
            raise UserError(f"{what}: {path} is in use by another xlvin process; wait until "
                            "it ends")
        try:
            if not is_save(path):  # changed since it was checked
                raise UserError(f"{what}: {path} changed while the save was written; kept as "
                                "it is")
            _exchange(staging, path)
        finally:
            os.close(held)
    except OSError as err:
        raise UserError(f"{what}: could not write the save ({err.strerror or err}); "
                        f"{path} is kept as it was") from None
    finally:
        if fd >= 0:
            os.close(fd)
        with contextlib.suppress(OSError):
            shutil.rmtree(staging)  # the old save after the exchange, or the unfinished new one


def write_policy(folder: Path, config: dict[str, Any], policy: nn.Module,
                 metadata: dict[str, Any]) -> None:
    """Write a saved policy into the new save `folder`: the run's config and the weights with
    their `metadata` (`num_timesteps` included)."""
    write_json(folder / CONFIG, config)
    save_weights(folder / MODEL, policy, metadata)


def write_run_copy(run_dir: Path, folder: Path) -> None:
    """Copy the run directory `run_dir` (its lock and manifest aside) into the new save
    `folder`, file by file (no link followed: a link is refused)."""
    for rel, entry in sorted(_entries(run_dir), key=lambda e: e[0]):
        target = folder / rel
        if entry.is_dir(follow_symlinks=False):
            target.mkdir()
        elif entry.is_file(follow_symlinks=False):
            shutil.copyfile(entry.path, target, follow_symlinks=False)
        else:
            raise UserError(f"{run_dir / rel} is not a regular file; a run directory holds "
                            "none such, not saved")


def forget_save(run_dir: Path) -> None:
    """A saved run about to train on in place (continued, resumed) becomes a run directory of
    its own: no later save replaces it. A folder it cannot write is left as it is: training
    refuses it in one line."""
    mark = run_dir / SAVED
    with contextlib.suppress(OSError):
        if mark.is_file() or mark.is_symlink():
            mark.unlink()


def read_progress(path: Path) -> tuple[dict[str, Any] | None, int, dict[str, Any] | None]:
    """(the executor's description, num_timesteps, the summary or None) of the finished run or
    save in `path`: the steps its summary counts, else those its weights' header records (a
    saved policy), else 0."""
    metadata = read_metadata(path / MODEL)
    steps = metadata.get("num_timesteps")
    steps = steps if type(steps) is int and steps >= 0 else 0
    summary = None
    if (path / SUMMARY).is_file():
        summary = read_sealed(path / SUMMARY, path)
        with reading_results(path / SUMMARY):
            steps = int(summary["ppo"]["env_steps"])
    return metadata.get("executor"), steps, summary


def owned_folder(path: Path, what: str, own: Callable[[Path], bool]) -> Path:
    """Refuse, before anything is written, a folder `what` would write into unless it is new,
    empty, or holds only what `own` says it wrote."""
    if path.is_symlink() or (path.exists() and (not path.is_dir() or not own(path))):
        raise UserError(f"{what}: {path} already holds files that it did not save (or that "
                        "changed since); give a new or empty folder")
    return path
