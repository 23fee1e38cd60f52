"""SIGTERM, handled as Ctrl-C is: what schedulers (Slurm, Kubernetes, systemd) send to stop a job.

Inside `sigterm_raises` (every `xlvin` command runs in it) SIGTERM raises `Terminated`, a
KeyboardInterrupt, so everything that stops cleanly on Ctrl-C (worker pools terminated, run
directories released, Ray shut down) stops the same way, and the command ends with one line and
exit status 143. A training loop that can stop at an update boundary asks for the signal to wait
for it (`termination_deferred`): the first SIGTERM then only sets a flag
(`termination_requested`), the loop saves its checkpoint at the next boundary and raises
`Terminated` there, so `--resume` continues the run exactly; a second SIGTERM raises at once.
"""

import signal
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

#: The exit status of a command stopped by SIGTERM (128 + 15, as a shell reports it).
EXIT_TERMINATED = 128 + signal.SIGTERM


class Terminated(KeyboardInterrupt):
    """The process received SIGTERM (its message: what was saved, if anything)."""


_state = {"active": False, "deferred": 0, "requested": False, "received": False}


def _on_sigterm(signum: int, frame: Any) -> None:
    _state["received"] = True
    if _state["deferred"] and not _state["requested"]:
        _state["requested"] = True
        return
    raise Terminated


@contextmanager
def sigterm_raises() -> Iterator[None]:
    """SIGTERM raises `Terminated` in the block (in the main thread; elsewhere, nothing changes);
    the previous handler is put back after it."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    previous = signal.signal(signal.SIGTERM, _on_sigterm)
    _state.update(active=True, requested=False, received=False)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)
        _state["active"] = False


def reinstall() -> None:
    """Take SIGTERM back from a library that set its own handler (Ray's driver exits on it at
    once), inside `sigterm_raises`."""
    if _state["active"] and threading.current_thread() is threading.main_thread():
        signal.signal(signal.SIGTERM, _on_sigterm)


@contextmanager
def termination_deferred() -> Iterator[None]:
    """In the block, the first SIGTERM waits for `termination_requested` to be acted on (by
    raising `Terminated`); one that arrives too late for that is raised when the block ends."""
    _state["deferred"] += 1
    try:
        yield
    finally:
        _state["deferred"] -= 1
    if _state["requested"] and not _state["deferred"]:
        _state["requested"] = False
        raise Terminated("stopped at the end of training")


def received_sigterm(interrupt: KeyboardInterrupt) -> bool:
    """Whether `interrupt` stands for a SIGTERM: a `Terminated`, or the KeyboardInterrupt a
    library (Ray's `ray.get`) raised in its place while this process handled one."""
    return isinstance(interrupt, Terminated) or bool(_state["received"])


def termination_requested() -> bool:
    """Whether a SIGTERM arrived that waits to be acted on (`termination_deferred`): the caller
    acts on it now (the flag is cleared)."""
    requested = bool(_state["requested"])
    _state["requested"] = False
    return requested
