"""Process set-up, in one place: warnings, torch threads, seeds, and the opt-in allocator setting.

Every `xlvin` command calls `prepare_process()` once; training loops call `set_threads` and
`seed_everything`; a library user calls what they need.
"""

import os
import random
import signal
import threading
import time
import warnings
from typing import Any
from collections.abc import Iterator
from contextlib import contextmanager

import numpy as np
import torch
from threadpoolctl import threadpool_limits

from xlvin.accel.allocator import retain_freed_memory


def quiet_known_warnings() -> None:
    """The paper's CartPole-v0 is deprecated in gymnasium 1.x; its warning says nothing new.
    gymnasium is imported first: its import puts its own warning filters ahead of ours."""
    import gymnasium  # noqa: F401

    warnings.filterwarnings("ignore", message=".*CartPole-v0 is out of date.*")


def set_threads(threads: int) -> None:
    """This process's CPU threads for torch and for NumPy's BLAS (the NumPy actor's matrix
    products); 0 keeps both libraries' defaults.

    The BLAS count matters as much as torch's: the actor multiplies small matrices, where a
    BLAS that starts a thread per core while other processes hold the cores is many times
    slower (benchmarks/notes.md). The number of threads does not change a product's value."""
    if threads > 0:
        torch.set_num_threads(threads)
        threadpool_limits(threads, user_api="blas")


@contextmanager
def torch_threads(n: int) -> Iterator[None]:
    """Run the block with `n` torch CPU threads, then restore the previous count."""
    before = torch.get_num_threads()
    torch.set_num_threads(n)
    try:
        yield
    finally:
        torch.set_num_threads(before)


def seed_everything(seed: int) -> None:
    """Seed Python's, NumPy's and torch's global generators."""
    random.seed(seed)
    np.random.seed(seed % 2**32)
    torch.manual_seed(seed)


#: The state of Python's, NumPy's and torch's global generators (`global_generators`).
GeneratorStates = tuple[object, dict[str, object], torch.Tensor]


def global_generators() -> GeneratorStates:
    """The state of the generators `seed_everything` seeds."""
    return random.getstate(), np.random.get_state(legacy=False), torch.get_rng_state()


def set_global_generators(state: GeneratorStates) -> None:
    """Put the generators back in a state `global_generators` returned."""
    python, numpy, torch_state = state
    random.setstate(python)
    np.random.set_state(numpy)
    torch.set_rng_state(torch_state)


#: How often a worker looks whether its parent is still alive (seconds).
PARENT_POLL_SECONDS = 0.5
WATCHER = "exit-with-parent"


def exit_with_parent(parent: int | None = None) -> None:
    """End this process as soon as its parent process is gone (killed, crashed, interrupted):
    a daemon thread watches the parent's id, since a killed parent can tell no one. `parent`:
    the id it must have (a worker started by that process), default the current parent. For
    worker processes, which must never outlive the command that started them. Once per process
    (a Ray worker runs many tasks)."""
    if any(t.name == WATCHER for t in threading.enumerate()):
        return
    parent = os.getppid() if parent is None else parent

    def watch() -> None:
        signal.pthread_sigmask(signal.SIG_BLOCK, signal.valid_signals())  # for the main thread:
        while os.getppid() == parent:  # a signal taken here would wait for its next bytecode
            time.sleep(PARENT_POLL_SECONDS)
        os._exit(1)

    threading.Thread(target=watch, name=WATCHER, daemon=True).start()


def prepare_process() -> None:
    """What every `xlvin` command sets first: quiet known warnings, and keep freed memory in the
    malloc heap (`xlvin.accel.allocator`: big latent trees are faster with it)."""
    quiet_known_warnings()
    retain_freed_memory()
