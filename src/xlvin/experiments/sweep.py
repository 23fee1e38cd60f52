"""Sweeps: a preset expands into runs (cells), which Ray executes one CPU each.

A preset is one `Preset` entry in `PRESETS`: which cells a number of seeds (and the preset's own
options) gives, how one cell is run, how a finished cell is recognised, and how the records of
all cells become the results files. Adding an experiment's sweep is adding its entry.

`run_sweep` submits every unfinished cell as a Ray task (`num_cpus=1`, one torch thread), skips
finished cells (their records are read from their run directories), retries a failed cell once
and reports both failures. Ray is imported only here, and only when a sweep runs: it is the
optional `ray` extra.
"""

import argparse
import logging
import signal
import socket
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from xlvin.errors import UserError
from xlvin.experiments import atari, table1
from xlvin.experiments.ray_reaper import start_reaper

INSTALL_HINT = "`xlvin sweep` needs Ray: pip install 'xlvin[ray]'"
ATTEMPTS = 2  # a failed cell is retried once
CONNECT_TIMEOUT = 60.0  # seconds to start local Ray or reach a cluster


def _no_options(parser: argparse.ArgumentParser) -> None:
    pass


def _nothing(cells: list[Any]) -> None:
    pass


@dataclass(frozen=True)
class Preset:
    """An experiment `xlvin sweep NAME` can run. Functions that run on Ray workers (`run_cell`)
    must be importable module-level functions; cells must be picklable."""

    help: str  # one line for `xlvin sweep --help`
    #: (seeds, parsed options) -> cells; raise UserError for bad options
    cells: Callable[[int, argparse.Namespace], list[Any]]
    #: (cell, runs root) -> record; trains and evaluates the cell unless it is finished. On a worker.
    run_cell: Callable[[Any, Path], dict[str, Any]]
    #: (cell, runs root) -> the record of a finished cell, or None if it still has to run
    finished: Callable[[Any, Path], dict[str, Any] | None]
    #: (records, results folder, wall seconds) -> text to print; writes the results files
    write_results: Callable[[list[dict[str, Any]], Path, float], str]
    runs: Path  # default root of the run directories
    add_options: Callable[[argparse.ArgumentParser], None] = _no_options  # beyond --seeds
    prepare: Callable[[list[Any]], None] = _nothing  # once, on the driver, before any task
    label: Callable[[Any], str] = str  # a cell, for progress lines
    outcome: Callable[[dict[str, Any]], str] = lambda record: ""  # a record, for progress lines
    description: str = ""  # for `xlvin sweep NAME --help`


def _table1_finished(cell: table1.Cell, root: Path) -> dict[str, Any] | None:
    run_dir = cell.run_dir(root)
    return table1.cell_record(cell, run_dir) if table1.is_finished(run_dir) else None


def _table1_write(records: list[dict[str, Any]], results: Path, wall: float) -> str:
    md = table1.write_results(records, results, wall)
    stem = results / (table1.results_stem(records[0]["protocol"], records[0]["variant"])
                      if records else "table1")
    return md + f"\nwrote {stem}.md, .json, .png"


TABLE1 = Preset(
    help="Table 1: CartPole-v0 / Acrobot-v1 / MountainCar-v0, low data (as `xlvin reproduce classic`)",
    description=table1.__doc__ or "",
    cells=table1.cells_from_options,
    run_cell=table1.run_cell,
    finished=_table1_finished,
    write_results=_table1_write,
    runs=Path("runs/table1"),
    add_options=table1.add_cell_options,
    prepare=table1.prepare,
    label=lambda c: f"{c.protocol} {c.env} {c.agent}{' strict' if c.strict else ''} seed{c.seed}",
    outcome=lambda r: f"final return {r['final_return']:.1f}",
)

ATARI = Preset(
    help="Figures 4 and 6: Freeway / Alien / Enduro from pixels (as `xlvin reproduce atari`)",
    description=atari.__doc__ or "",
    cells=atari.cells_from_options,
    run_cell=atari.run_cell,
    finished=atari.finished_record,
    write_results=lambda records, results, wall: atari.write_results(records, results),
    runs=Path("runs/atari"),
    add_options=atari.add_cell_options,
    prepare=atari.prepare,
    label=lambda c: f"{c.game} {c.agent} seed{c.seed} ({c.transitions:,} transitions)",
    outcome=lambda r: f"AUC {r['auc']:.2f}, greedy {r['final_eval']['mean']:.1f}",
)

#: name -> preset, the PRESET argument of `xlvin sweep`.
PRESETS: dict[str, Preset] = {"table1": TABLE1, "atari": ATARI}


def import_ray() -> Any:
    """The `ray` module, or a UserError saying how to install it."""
    try:
        import ray
    except ImportError:
        raise UserError(INSTALL_HINT) from None
    return ray


def init_ray(address: str | None, workers: int | None, timeout: float = CONNECT_TIMEOUT) -> bool:
    """Start local Ray with `workers` CPUs (address None) or connect to the cluster at `address`,
    giving up after `timeout` seconds (Ray itself retries for minutes). Local Ray ends with this
    process, however it ends (`xlvin.experiments.ray_reaper`).

    Returns False, doing nothing, when Ray is already initialised in this process (a test or a
    notebook that started it keeps its session), True when this call started it.
    """
    ray = import_ray()
    if ray.is_initialized():
        return False
    quiet = {
        "include_dashboard": False,
        "log_to_driver": False,  # workers' stdout/stderr stay in Ray's log files
        "logging_level": logging.ERROR,
    }
    where = address or "local Ray"
    try:
        with time_limit(timeout):
            if address:
                check_reachable(address, timeout)
                ray.init(address=address, **quiet)
            else:  # "local": a new Ray instance even if another one runs on this machine
                ray.init(address="local", num_cpus=workers, **quiet)
                start_reaper(ray._private.worker._global_node.get_session_dir_path())
    except (ConnectionError, TimeoutError, ValueError) as err:
        raise UserError(f"cannot start Ray ({where}): {_first_line(err)}") from None
    return True


def check_reachable(address: str, timeout: float) -> None:
    """Refuse, within `timeout` seconds, a cluster whose head does not answer on its port
    (`host:port` and `ray://host:port`; `auto` finds a cluster on this machine)."""
    if address == "auto":
        return
    host, _, port = address.removeprefix("ray://").rpartition(":")
    if not host or not port.isdigit():
        raise ValueError(f"--address {address!r}: expected host:port, ray://host:port or auto")
    try:
        socket.create_connection((host, int(port)), timeout=timeout).close()
    except OSError as err:
        raise ConnectionError(f"{host}:{port} does not answer: {err.strerror or err}") from None


@contextmanager
def time_limit(seconds: float) -> Iterator[None]:
    """A TimeoutError in the block after `seconds` (SIGALRM: in the main thread; elsewhere the
    block runs without a limit)."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def expire(signum: int, frame: Any) -> None:
        raise TimeoutError(f"no answer within {seconds:g} s (--timeout)")

    previous = signal.signal(signal.SIGALRM, expire)
    signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)


def _first_line(err: BaseException) -> str:
    lines = [x.strip() for x in str(err).splitlines() if x.strip()]
    return lines[0] if lines else type(err).__name__


def error_line(err: BaseException) -> str:
    """One line for a failed task: the original exception of a RayTaskError, else Ray's own."""
    cause = getattr(err, "cause", None)
    if isinstance(cause, BaseException):
        err = cause
    return f"{type(err).__name__}: {_first_line(err)}"


def _task(run_cell: Callable[[Any, Path], dict[str, Any]], cell: Any, root: Path) -> dict[str, Any]:
    """One cell on a Ray worker, with one torch thread. The worker ends when its raylet does
    (local Ray dies with the driver that started it), instead of finishing the cell alone."""
    from xlvin.process import exit_with_parent, quiet_known_warnings, set_threads

    exit_with_parent()
    quiet_known_warnings()
    set_threads(1)
    return run_cell(cell, root)


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
    preset: Preset, cells: list[Any], root: Path, report: Callable[[str], None] = print,
    address: str | None = None, workers: int = 1, timeout: float = CONNECT_TIMEOUT,
) -> SweepResult:
    """Run the unfinished cells as Ray tasks, each retried once after a failure.

    Ray starts (`init_ray(address, workers, timeout)`) only when some cell has to run, before
    the preset's preparation, and is shut down at the end if this call started it.
    """
    ray = import_ray()
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
    if todo:
        if not ray.is_initialized():
            report(f"connecting to Ray at {address}" if address else f"starting local Ray, {workers} workers")
        started = init_ray(address, workers, timeout)
        try:
            preset.prepare([cells[i] for i in todo])
            _run_on_ray(ray, preset, cells, todo, root, report, records, result)
        finally:
            if started:
                ray.shutdown()
    result.records = [records[i] for i in sorted(records)]
    return result


def _run_on_ray(
    ray: Any, preset: Preset, cells: list[Any], todo: list[int], root: Path,
    report: Callable[[str], None], records: dict[int, dict[str, Any]], result: SweepResult,
) -> None:
    task = ray.remote(num_cpus=1, max_retries=0)(_task)
    pending: dict[Any, tuple[int, int, float]] = {}

    def submit(i: int, attempt: int) -> None:
        ref = task.remote(preset.run_cell, cells[i], root)
        pending[ref] = (i, attempt, time.perf_counter())

    for i in todo:
        submit(i, 1)
    done_count = 0
    while pending:
        (ref,), _ = ray.wait(list(pending), num_returns=1)
        i, attempt, started = pending.pop(ref)
        cell, label = cells[i], preset.label(cells[i])
        try:
            record = ray.get(ref)
        except ray.exceptions.RayError as err:  # the cell's exception (RayTaskError), or Ray's
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
        done_count += 1
        records[i] = record
        result.trained.append(cell)
        outcome = preset.outcome(record)
        report(f"[{done_count}/{len(todo)}] done {label}" + (f": {outcome}" if outcome else "")
               + f" ({time.perf_counter() - started:.0f} s" + (f", attempt {attempt})" if attempt > 1 else ")"))
