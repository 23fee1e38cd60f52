"""Running the cells of an experiment on worker processes."""

import multiprocessing
import os
import signal
import sys
import threading
import time
from collections.abc import Callable
from concurrent.futures import ProcessPoolExecutor, as_completed
from concurrent.futures.process import BrokenProcessPool
from multiprocessing import resource_tracker
from typing import Any

from tqdm import tqdm

from xlvin.errors import UserError
from xlvin.process import exit_with_parent
from xlvin.signals import (GRACE_SECONDS, SIGNALS, STOP_SIGNAL, Terminated, exit_status,
                           received_sigterm, sigterm_raises)

#: Seconds a stopped worker has, beyond the signal's grace, to save, close and exit.
STOP_MARGIN_SECONDS = 8.0


def _start_worker(parent: int) -> None:
    """A worker's set-up: it ends with `parent` (`exit_with_parent`); between items it leaves
    SIGHUP (a closed terminal, sent to every process of the job) to the parent, which stops it;
    and its progress bars share a thread lock, not tqdm's default multiprocessing one, a
    semaphore that a worker killed mid-item would leave to the resource tracker ("leaked
    semaphore objects")."""
    exit_with_parent(parent)
    signal.signal(signal.SIGHUP, signal.SIG_IGN)
    tqdm.set_lock(threading.RLock())


def _run_item(fn: Callable[[Any], Any], item: Any) -> Any:
    """fn(item) on a worker, where SIGTERM, SIGHUP and the parent's STOP_SIGNAL stop a training
    loop at its next update boundary, with a checkpoint (`xlvin.signals`; a repeat does not hurry
    it: the pool signals every worker when one ends). A worker so stopped, or interrupted, ends
    once the item has cleaned up, so that it starts no other item."""
    try:
        with sigterm_raises(repeat_raises=False):
            return fn(item)
    except KeyboardInterrupt as interrupt:
        while True:  # the next signal (a Ctrl-C's, the parent's) must not end this block, or
            try:     # the worker lives on, waiting for items
                signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGINT, *SIGNALS, STOP_SIGNAL})
                break
            except KeyboardInterrupt:
                pass
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(exit_status() if received_sigterm(interrupt) else 130)


def _stop_workers(workers: list[multiprocessing.Process], gently: bool) -> None:
    """Gently (the command got SIGTERM or SIGHUP): ask each worker to stop at its next update
    boundary (STOP_SIGNAL) and wait for them to save and end, GRACE_SECONDS +
    STOP_MARGIN_SECONDS at most; then, or at once (Ctrl-C, a failed item), kill any left."""
    for worker in workers if gently else []:
        try:
            os.kill(worker.pid, STOP_SIGNAL)
        except (ProcessLookupError, TypeError):  # gone, or never started
            pass
    end = time.monotonic() + (GRACE_SECONDS + STOP_MARGIN_SECONDS if gently else 0.0)
    for worker in workers:
        worker.join(max(0.0, end - time.monotonic()))
        if worker.is_alive():
            worker.kill()


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
    ends: killed (they watch it), stopped by Ctrl-C or a failed item (they are killed at once),
    or by SIGTERM or SIGHUP: a worker then ends its training at the next update boundary, with a
    checkpoint, and starts no other item (`_run_item`, `_stop_workers`). A worker that ends
    while running an item (killed alone) is one UserError, once the others have stopped."""
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
        for future in as_completed([pool.submit(_run_item, fn, item) for item in items]):
            done(future.result())
    except BaseException as err:
        pool.shutdown(wait=False, cancel_futures=True)
        broken = isinstance(err, BrokenProcessPool)  # a worker killed alone (signal, memory)
        gently = broken or isinstance(err, Terminated)
        _stop_workers(multiprocessing.active_children(), gently=gently)
        if broken:
            raise UserError(f"a worker process ended while its cell was running (killed by a "
                            f"signal, or out of memory?); {len(results)} of {len(items)} cells "
                            "had finished; the others keep their last checkpoints: run the same "
                            "command again to resume them") from None
        raise
    pool.shutdown()
    return results
