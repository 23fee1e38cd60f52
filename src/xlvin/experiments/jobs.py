"""Running the cells of an experiment on worker processes."""

import math
import multiprocessing
import os
import signal
import threading
import time
from collections.abc import Callable
from concurrent.futures import ProcessPoolExecutor, as_completed
from multiprocessing import resource_tracker
from typing import Any

from tqdm import tqdm

from xlvin.errors import UserError
from xlvin.process import exit_with_parent


def _start_worker(parent: int) -> None:
    """A worker's set-up: it ends with `parent` (`exit_with_parent`); it leaves SIGHUP (a closed
    terminal, sent to every process of the job) to the parent, which terminates it; and its
    progress bars share a thread lock, not tqdm's default multiprocessing one, a semaphore that a
    worker terminated mid-item would leave to the resource tracker ("leaked semaphore objects")."""
    exit_with_parent(parent)
    signal.signal(signal.SIGHUP, signal.SIG_IGN)
    tqdm.set_lock(threading.RLock())


def _start_resource_tracker() -> None:
    """multiprocessing's resource tracker, started with SIGHUP blocked, as it blocks SIGINT and
    SIGTERM itself: a closed terminal hangs up every process of the job, and a tracker gone
    before the pool's semaphores are released prints tracebacks after `xlvin: terminated`."""
    blocked = signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGHUP})
    try:
        resource_tracker.ensure_running()
    finally:
        signal.pthread_sigmask(signal.SIG_SETMASK, blocked)


def map_jobs(fn: Callable[[Any], Any], items: list[Any], jobs: int, on_done=None) -> list[Any]:
    """[fn(item) for item in items] on `jobs` spawned worker processes, in completion order,
    less the items whose fn returned None (a cell left for after a deadline has no result);
    `on_done` sees each result as it comes. The workers end with this process, however it
    ends: killed (they watch it), or stopped by Ctrl-C or a failed item (they are terminated at
    once, not after their current item)."""
    results = []

    def done(result: Any) -> None:
        if result is not None:
            results.append(result)
            if on_done:
                on_done(result)

    if jobs <= 1 or len(items) <= 1:
        for item in items:
            done(fn(item))
        return results
    context = multiprocessing.get_context("spawn")
    _start_resource_tracker()
    pool = ProcessPoolExecutor(max_workers=jobs, mp_context=context,
                               initializer=_start_worker, initargs=(os.getpid(),))
    try:
        for future in as_completed([pool.submit(fn, item) for item in items]):
            done(future.result())
    except BaseException:
        pool.shutdown(wait=False, cancel_futures=True)
        for worker in multiprocessing.active_children():
            worker.terminate()
        raise
    pool.shutdown()
    return results


def deadline_after(minutes: float | None) -> float | None:
    """The `time.time()` deadline `minutes` from now (None: no deadline)."""
    if minutes is None:
        return None
    if not math.isfinite(minutes) or minutes <= 0:
        raise UserError(f"--deadline-minutes must be a finite number > 0, got {minutes}")
    return time.time() + 60 * minutes


def has_passed(deadline: float | None) -> bool:
    """Whether the `time.time()` deadline has passed (never, without one)."""
    return deadline is not None and time.time() >= deadline
