"""Run directories: everything needed to evaluate or plot a run, in one folder.

    DIR/config.json        the full configuration (JSON)
    DIR/model.safetensors  the final policy weights, with the config in the header
    DIR/metrics.jsonl      one JSON object per PPO update ({"step": ..., "losses/...": ...})
    DIR/summary.json       pre-training statistics, data counts and wall times
    DIR/tb/                TensorBoard events (same tags as metrics.jsonl)
    DIR/checkpoint.safetensors  the latest checkpoint while training (xlvin.io.checkpoint)
    DIR/transe-checkpoint.safetensors  TransE pre-training's checkpoint (after every epoch)
    DIR/.lock              held (flock) by the one process that trains or finishes the run

A process claims a run directory (`claim_run_dir`) before it writes anything there and holds the
claim until it is done, resume included: a second process asking for it gets one line.
"""

import errno
import fcntl
import json
import math
import os
import stat
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from tensorboard.compat.proto.summary_pb2 import Summary
from torch.utils.tensorboard import SummaryWriter

from xlvin.errors import FieldError, UserError, one_line
from xlvin.io.digests import DIGEST_FIELD, is_sealed, sealed
from xlvin.io.files import (
    atomic_write_bytes,
    file_kind,
    read_checked,
    read_json,
    remove_temporaries,
    write_json,
)
from xlvin.io.seals import unsealed

CONFIG = "config.json"
MODEL = "model.safetensors"
METRICS = "metrics.jsonl"
SUMMARY = "summary.json"
LOCK = ".lock"
#: The mark of a save still being written (`xlvin.io.saves`): such a folder is never loaded.
PARTIAL = ".partial"

#: Run directories this process holds: resolved path -> the open file descriptor of DIR/.lock.
_claimed: dict[Path, int] = {}


@contextmanager
def claim_run_dir(path: Path) -> Iterator[Path]:
    """Hold the run directory `path` (created if missing) for the block: an exclusive lock on
    DIR/.lock, so no other process trains or finishes the same run meanwhile; another process
    holding it is one UserError. Claiming again inside the block (the same process) is a no-op.
    Once claimed, temporary files that killed writers left behind are removed."""
    path = Path(path)
    key = path.resolve()
    if key in _claimed:
        yield path
        return
    path.mkdir(parents=True, exist_ok=True)
    if not os.access(path, os.W_OK | os.X_OK):
        raise UserError(f"{path}: cannot write in it (read-only file system or permissions)")
    fd = _open_lock(path / LOCK)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        os.close(fd)
        raise UserError(f"{path} is in use by another xlvin process; wait until it ends") from None
    _claimed[key] = fd
    try:
        remove_temporaries(path)
        yield path
    finally:
        del _claimed[key]
        os.close(fd)


def _open_lock(lock: Path) -> int:
    """DIR/.lock opened (created if missing) as the regular file it must be: a symbolic link is
    not followed (no file made, nor a user's file locked, outside the run directory), and a FIFO
    or a device is refused, not waited on (`O_NONBLOCK`); one UserError each."""
    refusal = f"{lock} is {{}}, not a regular file; refused (remove it to claim the run directory)"
    try:
        fd = os.open(lock, os.O_RDONLY | os.O_CREAT | os.O_NOFOLLOW | os.O_NONBLOCK, 0o666)
    except OSError as err:
        if err.errno not in (errno.ELOOP, errno.EISDIR):
            raise
        raise UserError(refusal.format(file_kind(os.lstat(lock).st_mode))) from None
    mode = os.fstat(fd).st_mode
    if not stat.S_ISREG(mode):
        os.close(fd)
        raise UserError(refusal.format(file_kind(mode)))
    return fd


def check_creatable(path: Path) -> None:
    """Refuse, before any work, a path that cannot be created: its nearest existing ancestor must
    be a writable directory."""
    ancestor = Path(path).absolute().parent
    while not ancestor.exists():
        ancestor = ancestor.parent
    if not ancestor.is_dir():
        raise FieldError("{out=}: {} is not a directory", ancestor, out=path)
    if not os.access(ancestor, os.W_OK | os.X_OK):
        raise FieldError("{out=}: cannot write in {}", ancestor, out=path)


def check_new_run_dir(path: Path) -> None:
    """Refuse `path` for a new run unless it is missing or an empty directory (its lock aside),
    and unless it can be created; changes nothing."""
    path = Path(path)
    if path.exists() and not path.is_dir():
        raise FieldError("{out=} exists and is not a directory", out=path)
    if path.is_dir() and any(p.name != LOCK for p in path.iterdir()):
        what = "a run" if (path / CONFIG).exists() else "files"
        raise FieldError("{out=} already holds {}; choose a new directory (or {resume} an "
                         "unfinished run)", what, out=path)
    if not path.exists():
        check_creatable(path)


def create_run_dir(path: Path, config: dict[str, Any]) -> Path:
    """Write a new run's config to the claimed `path`; refuse a folder that holds files."""
    path = Path(path)
    check_new_run_dir(path)
    write_json(path / CONFIG, config)
    return path


def require_run_dir(path: Path) -> Path:
    """Check that `path` is a finished run directory (config and model present)."""
    path = Path(path)
    if (path / PARTIAL).exists():
        raise UserError(f"{path} is a save that was cut short before it was complete; not "
                        "loaded (the folder it was meant for holds the earlier save)")
    for name in (CONFIG, MODEL):
        if not (path / name).is_file():
            raise UserError(f"{path} is not a finished run directory: {name} is missing")
    return path


def require_resumable(path: Path | str) -> Path:
    """`path`, which must hold a run to resume (its config.json): checked before anything is
    built or cached for the run."""
    path = Path(path)
    if not (path / CONFIG).is_file():
        raise FieldError("{resume}: {} holds no run to resume ({} is missing)", path, CONFIG)
    return path


def open_run_dir(
    path: Path, config: dict[str, Any],
    normalize: Callable[[dict[str, Any]], dict[str, Any]] | None = None,
    finished_ok: bool = False,
) -> Path:
    """The unfinished run in `path` to resume (or, `finished_ok`, a finished one to continue):
    it must have been started with `config` (compared after `normalize`, which reads a saved
    config as the current code would, so a run saved before a field existed compares equal when
    it holds that field's default)."""
    path = require_resumable(path)
    saved = read_json_object(path / CONFIG)
    if normalize is not None:
        saved = normalize(saved)
    if saved != config:
        diff = sorted(
            f"{section}.{key}"
            for section in set(saved) | set(config)
            for key in set(_section(saved, section)) | set(_section(config, section))
            if _section(saved, section).get(key) != _section(config, section).get(key)
        ) or sorted(set(saved) ^ set(config))
        raise UserError(f"{path} holds a different run ({', '.join(diff)} differ); not resuming")
    if (path / SUMMARY).is_file() and not finished_ok:
        raise UserError(f"{path} holds a finished run; nothing to resume")
    return path


def read_json_object(path: Path) -> dict[str, Any]:
    """A JSON object from a run directory's file, or one UserError."""
    try:
        data = read_json(path)
    except ValueError as err:
        raise UserError(f"corrupt JSON in {path}: {one_line(err, limit=120)}") from None
    if not isinstance(data, dict):
        raise UserError(f"corrupt JSON in {path}: expected an object")
    return data


@contextmanager
def reading_results(where: Path) -> Iterator[None]:
    """Read a run's or a table's result files inside this: a file that is not the JSON the code
    wrote (empty, truncated, bytes flipped, another type, a field missing) becomes one UserError
    naming `where`, not a traceback."""
    try:
        yield
    except UserError:
        raise
    except (KeyError, TypeError, IndexError, ValueError) as err:
        raise UserError(f"corrupt results in {where} ({type(err).__name__}: {one_line(err)}); "
                        "move it away to produce it again") from None


def _section(config: dict[str, Any], name: str) -> dict[str, Any]:
    value = config.get(name)
    return value if isinstance(value, dict) else {}


class MetricsLogger:
    """Appends metrics to DIR/metrics.jsonl and to TensorBoard (DIR/tb) at once.

    `rewind_to` (when resuming from a checkpoint taken at that step): rows logged after it by the
    interrupted process are dropped from metrics.jsonl and purged from TensorBoard, so the
    resumed run's log reads as if it had never stopped. Nothing is opened, rewound or created
    before the first row is logged: a run refused before its first update changes no file.
    """

    def __init__(self, run_dir: Path, rewind_to: int | None = None) -> None:
        self.run_dir, self.rewind_to = Path(run_dir), rewind_to
        self.file: Any = None
        self.writer: SummaryWriter | None = None
        self.last_digest = ""  # of the last row written: the next row's digest chains it

    def check(self) -> None:
        """Refuse, in one UserError and changing nothing, a log that a resumed run could not
        continue (damaged, or missing rows before `rewind_to`): before training, so that a run
        resumed at its last checkpoint, which logs no row, is refused too."""
        self._kept_rows()

    def _kept_rows(self) -> list[dict[str, float]] | None:
        """The rows a resumed log keeps (None: nothing to rewind); one UserError if it cannot."""
        metrics = self.run_dir / METRICS
        if not os.path.lexists(metrics):
            if self.rewind_to:  # every update logs a row before its checkpoint is taken
                raise UserError(f"{metrics} is missing but the checkpoint was taken at step "
                                f"{self.rewind_to}: the resumed log would lack its first rows")
            return None
        rows = _complete_rows(metrics)  # refuses a link, a device or an oversized file
        if self.rewind_to is None:
            return None
        kept = [row for row in rows if row["step"] <= self.rewind_to]
        last = kept[-1]["step"] if kept else 0
        if last != self.rewind_to:  # every update logs a row before its checkpoint is taken
            raise UserError(
                f"{metrics} ends at step {last} but the checkpoint was taken at step "
                f"{self.rewind_to}: rows are missing, so the resumed log would have a hole")
        return kept

    def _open(self) -> None:
        metrics = self.run_dir / METRICS
        kept = self._kept_rows()
        if kept:
            self.last_digest = kept[-1].get(DIGEST_FIELD, "")
        if kept is not None:
            atomic_write_bytes(metrics, "".join(json.dumps(r, sort_keys=True) + "\n" for r in kept).encode())
        fd = os.open(metrics, os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_NOFOLLOW, 0o666)
        self.file = os.fdopen(fd, "a")
        purge = None if self.rewind_to is None else self.rewind_to + 1
        self.writer = SummaryWriter(log_dir=str(self.run_dir / "tb"), purge_step=purge)

    def __call__(self, step: int, metrics: dict[str, float]) -> None:
        if self.writer is None:
            self._open()
        assert self.writer is not None
        clean = {k: float(v) for k, v in metrics.items() if math.isfinite(float(v))}
        row = sealed({"step": step, **clean}, self.last_digest)
        self.last_digest = row[DIGEST_FIELD]
        self.file.write(json.dumps(row, sort_keys=True) + "\n")
        self.file.flush()
        # every scalar of the step in one event, where add_scalar writes one each: with a
        # population's writers, 6 % less CPU a run (TensorBoard reads both alike)
        self.writer.file_writer.add_summary(Summary(value=[
            Summary.Value(tag=key, simple_value=value) for key, value in clean.items()]), step)

    def close(self, after_error: bool = False) -> None:
        """Flush and close. `after_error` (the run is stopping on an error): a failure to flush,
        from the same full disk say, is ignored, so the error that stopped the run is reported."""
        if self.writer is None:
            return
        try:
            self.file.close()
            self.writer.close()
        except OSError:
            if not after_error:
                raise


def read_metrics(run_dir: Path) -> list[dict[str, float]]:
    """All rows of DIR/metrics.jsonl (less their digests), each checked against its digest."""
    return [{k: v for k, v in row.items() if k != DIGEST_FIELD}
            for row in _complete_rows(Path(run_dir) / METRICS)]


def row_digest(run_dir: Path, field: str, value: float) -> str:
    """The digest of the last row of DIR/metrics.jsonl whose `field` is `value`: it seals that
    row and, chained, every row before it. "" when no row has it (or no log exists) or the row
    was written before digests."""
    if not os.path.lexists(Path(run_dir) / METRICS):
        return ""
    rows = [r for r in _complete_rows(Path(run_dir) / METRICS) if r.get(field) == value]
    return str(rows[-1].get(DIGEST_FIELD, "")) if rows else ""


def _complete_rows(path: Path) -> list[dict[str, float]]:
    """Rows of a metrics file whose writer may have been killed mid-line: that last line is
    dropped; any other line that is not a row (flipped bytes, say) is one UserError, and so is a
    row without its seal (unless unsealed files are accepted: an older run's log, unsealed up to
    where this version resumed it; never after a sealed row)."""
    try:
        lines = read_checked(path).decode().splitlines()
    except UnicodeDecodeError:
        raise UserError(f"corrupt metrics file {path}: not UTF-8 text") from None
    rows, previous, sealed_before = [], "", False
    for i, line in enumerate(lines):
        try:
            row = json.loads(line)
        except json.JSONDecodeError:
            row = None
        if isinstance(row, dict) and isinstance(row.get("step"), int):
            try:
                previous = row[DIGEST_FIELD] if is_sealed(row, previous) else ""
            except ValueError:
                raise UserError(f"corrupt metrics file {path}: line {i + 1} changed after it was "
                                "written (SHA-256 mismatch)") from None
            if previous:
                sealed_before = True
            elif sealed_before:  # a resumed older log is unsealed up to its first sealed row
                raise UserError(f"corrupt metrics file {path}: line {i + 1} holds no SHA-256 "
                                "after sealed lines (its seal was removed)")
            else:
                unsealed(path)
            rows.append(row)
        elif i < len(lines) - 1 and line.strip():
            raise UserError(f"corrupt metrics file {path}: line {i + 1} is not a metrics row")
    return rows
