"""Sweeps: a preset expands into runs (cells), which Ray executes one CPU each, on any node of a
cluster whose nodes share no filesystem.

A preset is an `xlvin.experiments.protocol.Experiment` of `xlvin.experiments.registry` with a
`sweep_name`: a list of cells (from a number of seeds and the experiment's own options), a
function that runs one cell in a run directory and returns its record, and a writer of the
results files from all records. Adding an experiment's sweep is giving its entry a `sweep_name`
(docs/ray.md, "Presets, and adding one").

`run_sweep` runs on the driver, the only process that writes the run directories' root and the
results. Finished cells are skipped (their records are read from the driver's run directories).
Every other cell is a Ray task (`num_cpus=1`, one torch thread) that gets, through Ray's object
store, the files the cells share (pre-trained executors and TransE models, made once on the
driver) and whatever the driver holds of the cell's run directory (an interrupted run resumes
from its checkpoint); it runs the cell in a scratch directory of its node and returns the record
with the whole run directory as an archive (`xlvin.io.archive`), which the driver unpacks into
its own. While the cell runs, its run directory also comes back every `SYNC_SECONDS` that it
changed (a Ray streaming generator), so a long cell's checkpoints survive its node or the driver.
While a cell is out, the driver holds its run directory's claim, so no other xlvin
process on the driver runs it. A failed cell is retried once and both failures are reported.
"""

import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import ExitStack
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from xlvin.experiments.protocol import Experiment
from xlvin.experiments.ray_session import CONNECT_TIMEOUT, first_line, import_ray, init_ray
from xlvin.io.archive import dir_files, pack_dir, unpack_dir
from xlvin.io.run_dir import claim_run_dir
from xlvin.io.storage import RunStorage
from xlvin.io.files import atomic_write_bytes
from xlvin.pretrain import shipped
from xlvin.pretrain.files import cache_dir

ATTEMPTS = 2  # a failed cell is retried once
#: How often (seconds) a running cell's run directory is sent to the driver if it changed.
SYNC_SECONDS = 120.0


def error_line(err: BaseException) -> str:
    """One line for a failed task: the original exception of a RayTaskError, else Ray's own."""
    cause = getattr(err, "cause", None)
    if isinstance(cause, BaseException):
        err = cause
    return f"{type(err).__name__}: {first_line(err)}"


def _task(
    run_cell: Callable[[Any, Path], dict[str, Any]], run_dir: Callable[[Any, Path], Path],
    cell: Any, partial: bytes | None, shared: dict[str, bytes], sync_seconds: float,
) -> Iterator[tuple[str, bytes, dict[str, Any] | None]]:
    """One cell on a Ray worker, with one torch thread, as a Ray streaming generator: the shared
    files into this node's cache, the driver's `partial` run directory (or None) into a scratch
    root of this node, the cell run there (in a thread). While it runs, every `sync_seconds`
    that its run directory changed, yields ("snapshot", archive, None); at the end ("done",
    archive, record). The worker ends when its raylet does (local Ray dies with the driver that
    started it), instead of finishing the cell alone."""
    from xlvin.process import exit_with_parent, quiet_known_warnings, set_threads

    exit_with_parent()
    quiet_known_warnings()
    set_threads(1)
    install_shared_files(shared)
    with tempfile.TemporaryDirectory(prefix="xlvin-cell-") as scratch:
        root = Path(scratch)
        where = run_dir(cell, root)
        if partial is not None:
            unpack_dir(partial, where)
        outcome: dict[str, Any] = {}
        thread = threading.Thread(target=_run_into, args=(run_cell, cell, root, outcome))
        seen = _fingerprint(where)  # before the cell writes anything
        thread.start()
        while True:
            thread.join(sync_seconds)
            if not thread.is_alive():
                break
            if _fingerprint(where) != seen:
                seen = _fingerprint(where)
                yield "snapshot", pack_dir(where), None
        if "error" in outcome:
            raise outcome["error"]
        final = pack_dir(where)
    yield "done", final, outcome["record"]  # the scratch folder is gone


def _run_into(run_cell: Callable[[Any, Path], dict[str, Any]], cell: Any, root: Path,
              outcome: dict[str, Any]) -> None:
    """run_cell(cell, root) in a thread: its record, or its exception, into `outcome`."""
    try:
        outcome["record"] = run_cell(cell, root)
    except Exception as err:  # noqa: BLE001 (re-raised by the task, in its own thread)
        outcome["error"] = err


def _fingerprint(folder: Path) -> list[tuple[str, int, int]]:
    """What changes when a file under `folder` is written: names, sizes, modification times."""
    found = []
    for relative in dir_files(folder):
        try:
            stat = (folder / relative).stat()
        except FileNotFoundError:
            continue
        found.append((relative.as_posix(), stat.st_size, stat.st_mtime_ns))
    return found


def shared_files(paths: list[Path]) -> dict[str, bytes]:
    """Files under xlvin's cache as {path relative to the cache: contents}, for the tasks (the
    files shipped with xlvin are left out: the nodes have them)."""
    cache = cache_dir().resolve()
    files = {}
    for path in paths:
        path = Path(path).resolve()
        if path.is_relative_to(shipped.DATA.resolve()):  # every node has xlvin's own files
            continue
        if not path.is_relative_to(cache):
            raise ValueError(f"a shared file must be under xlvin's cache {cache}: {path}")
        files[path.relative_to(cache).as_posix()] = path.read_bytes()
    return files


def install_shared_files(files: dict[str, bytes]) -> None:
    """Write the shared files a node's cache lacks (atomically: tasks of one node may race)."""
    for relative, contents in files.items():
        target = cache_dir() / relative
        if not target.is_file():
            target.parent.mkdir(parents=True, exist_ok=True)
            atomic_write_bytes(target, contents)


@dataclass
class Failure:
    cell: Any
    attempt: int
    error: str


@dataclass
class SweepResult:
    records: list[dict[str, Any]]  # every cell that finished, in cell order
    trained: list[Any] = field(default_factory=list)
    skipped: list[Any] = field(default_factory=list)  # finished before this sweep
    failures: list[Failure] = field(default_factory=list)  # every failed attempt
    failed: list[Any] = field(default_factory=list)  # cells that failed every attempt


def count_runs(n: int) -> str:
    return f"{n} run" + ("" if n == 1 else "s")


def run_sweep(
    preset: Experiment, cells: list[Any], root: Path, report: Callable[[str], None] = print,
    address: str | None = None, workers: int = 1, timeout: float = CONNECT_TIMEOUT,
    storage: RunStorage | None = None, sync_seconds: float = SYNC_SECONDS,
) -> SweepResult:
    """Run the unfinished cells as Ray tasks, each retried once after a failure; their run
    directories come back under `root`, on this machine (and go to `storage` if given, whose
    finished run directories are downloaded first). While a cell runs, its run directory comes
    back every `sync_seconds` that it changed (its checkpoints: an interrupted sweep resumes it).

    Ray starts (`init_ray(address, workers, timeout)`) only when some cell has to run; then the
    cells' run directories are claimed, the preset's shared files produced, the tasks run; Ray is
    shut down at the end if this call started it.
    """
    ray = import_ray()
    if storage is not None:
        _download_finished(preset, cells, root, storage, report)
    records: dict[int, dict[str, Any]] = {}
    result = SweepResult(records=[])
    todo = []
    for i, cell in enumerate(cells):
        record = preset.finished(cell, root)
        if record is None:
            todo.append(i)
        else:
            records[i] = record
            result.skipped.append(cell)
    report(f"{count_runs(len(cells))}: {len(result.skipped)} finished earlier (skipped), {len(todo)} to run")
    if storage is not None:
        _upload_missing(preset, result.skipped, root, storage, report)
    if todo:
        if not ray.is_initialized():
            report(f"connecting to Ray at {address}" if address else f"starting local Ray, {workers} workers")
        started = init_ray(address, workers, timeout)
        try:
            with ExitStack() as claims:
                for i in todo:
                    claims.enter_context(claim_run_dir(preset.run_dir(cells[i], root)))
                shared = ray.put(shared_files(preset.prepare([cells[i] for i in todo], 1)))
                _run_on_ray(ray, preset, cells, todo, root, shared, report, records, result,
                            storage, sync_seconds)
        finally:
            if started:
                ray.shutdown()
    result.records = [records[i] for i in sorted(records)]
    return result


def _relative(preset: Experiment, cell: Any, root: Path) -> str:
    return preset.run_dir(cell, root).relative_to(root).as_posix()


def _download_finished(
    preset: Experiment, cells: list[Any], root: Path, storage: RunStorage,
    report: Callable[[str], None],
) -> None:
    """Bring the run directories `storage` holds (finished ones: only those are uploaded) of
    the cells not finished under `root` to `root`."""
    count = 0
    for cell in cells:
        if preset.finished(cell, root) is None and storage.files(_relative(preset, cell, root)):
            with claim_run_dir(preset.run_dir(cell, root)) as run_dir:
                storage.download(_relative(preset, cell, root), run_dir)
            count += 1
    report(f"storage {storage.uri}: {count_runs(count)} downloaded")


def _upload_missing(
    preset: Experiment, cells: list[Any], root: Path, storage: RunStorage,
    report: Callable[[str], None],
) -> None:
    """Upload the finished run directories of `cells` that `storage` does not hold whole: a
    stored copy that lacks any of the local run's files (it lost summary.json, say) is
    uploaded again."""
    missing = [c for c in cells if not {p.as_posix() for p in dir_files(preset.run_dir(c, root))}
               <= set(storage.files(_relative(preset, c, root)))]
    for cell in missing:
        with claim_run_dir(preset.run_dir(cell, root)) as run_dir:
            storage.upload(run_dir, _relative(preset, cell, root))
    if missing:
        report(f"storage {storage.uri}: {count_runs(len(missing))} finished earlier uploaded")


def _run_on_ray(
    ray: Any, preset: Experiment, cells: list[Any], todo: list[int], root: Path, shared: Any,
    report: Callable[[str], None], records: dict[int, dict[str, Any]], result: SweepResult,
    storage: RunStorage | None, sync_seconds: float,
) -> None:
    """Submit the cells `todo`, unpack under `root` every snapshot and finished run directory
    that comes back (uploading finished ones to `storage`) and resubmit a cell's first
    failure."""
    task = ray.remote(num_cpus=1, max_retries=0, num_returns="streaming")(_task)
    pending: dict[Any, tuple[int, int, float]] = {}

    def submit(i: int, attempt: int) -> None:
        run_dir = preset.run_dir(cells[i], root)
        partial = pack_dir(run_dir) if dir_files(run_dir) else None
        stream = task.remote(preset.run_cell, preset.run_dir, cells[i], partial, shared,
                             sync_seconds)
        pending[stream] = (i, attempt, time.perf_counter())

    for i in todo:
        submit(i, 1)
    done_count = 0
    while pending:
        (stream,), _ = ray.wait(list(pending), num_returns=1)
        i, attempt, started = pending[stream]
        cell, label = cells[i], preset.label(cells[i])
        try:
            kind, archive, record = ray.get(next(stream))
        except ray.exceptions.RayError as err:  # the cell's exception (RayTaskError), or Ray's
            del pending[stream]
            failure = Failure(cell, attempt, error_line(err))
            result.failures.append(failure)
            if attempt < ATTEMPTS:
                report(f"FAILED {label} (attempt {attempt}/{ATTEMPTS}): {failure.error}; retrying")
                submit(i, attempt + 1)
            else:
                done_count += 1
                report(f"[{done_count}/{len(todo)}] FAILED {label} (attempt {attempt}/{ATTEMPTS}): "
                       f"{failure.error}; giving up")
                result.failed.append(cell)
            continue
        unpack_dir(archive, preset.run_dir(cell, root))
        if kind == "snapshot":
            continue
        del pending[stream]
        if storage is not None:
            storage.upload(preset.run_dir(cell, root), _relative(preset, cell, root))
        done_count += 1
        records[i] = record
        result.trained.append(cell)
        outcome = preset.outcome(record)
        report(f"[{done_count}/{len(todo)}] done {label}" + (f": {outcome}" if outcome else "")
               + f" ({time.perf_counter() - started:.0f} s" + (f", attempt {attempt})" if attempt > 1 else ")"))
