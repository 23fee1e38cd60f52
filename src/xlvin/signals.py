"""SIGTERM, handled as Ctrl-C is: what schedulers (Slurm, Kubernetes, systemd) send to stop a job;
and SIGHUP, what a closed terminal sends, handled as SIGTERM.

Inside `sigterm_raises` (every `xlvin` command runs in it) either signal raises `Terminated`, a
KeyboardInterrupt, so everything that stops cleanly on Ctrl-C (worker pools terminated, run
directories released, Ray shut down) stops the same way, and the command ends with one line and
exit status 128 + the signal's number (`exit_status`: 143 for SIGTERM, 129 for SIGHUP). A training
loop that can stop at an update boundary asks for the signal to wait for it
(`termination_deferred`): the first signal then only sets a flag (`termination_requested`), the
loop saves its checkpoint at the next boundary and raises `Terminated` there, so `--resume`
continues the run exactly. A second signal raises at once, and so does the first when no boundary
came within GRACE_SECONDS (a collection of a billion episodes, a long evaluation): the run then
resumes from its last checkpoint. STOP_SIGNAL is what a command sends its worker processes to
stop them the same way (`xlvin.experiments.jobs`): it asks once and never makes a waiting stop
immediate, so a worker that got the job's SIGTERM too still stops at its boundary.
"""

import _thread
import signal
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

#: The signals that stop a command as SIGTERM does.
SIGNALS = (signal.SIGTERM, signal.SIGHUP)
#: A parent's request to its workers to stop as on SIGTERM; once a process is stopping (its own
#: SIGTERM, SIGHUP or an earlier request), it changes nothing.
STOP_SIGNAL = signal.SIGUSR1
#: How long a deferred signal waits for the next update boundary before it raises anyway: longer
#: than an Atari update on a 2-core CPU (8 envs x 128 steps and its PPO epochs: 7-17 s), and,
#: with a command's wait for its workers (`xlvin.experiments.jobs.STOP_MARGIN_SECONDS`), within
#: the 30 s that Slurm (KillWait) and Kubernetes (terminationGracePeriodSeconds) give by default
#: before SIGKILL.
GRACE_SECONDS = 20.0


class Terminated(KeyboardInterrupt):
    """The process received SIGTERM or SIGHUP (its message: what was saved, if anything)."""


_state: dict[str, Any] = {"active": False, "deferred": 0, "requested": False, "received": 0,
                          "overdue": False, "timer": None, "handler": None}


def _on_sigterm(signum: int, frame: Any) -> None:
    if _state["overdue"]:  # delivered by the grace timer (`_grace_over`)
        _state["overdue"] = False
        if not _state["requested"]:
            return  # the loop reached its boundary meanwhile and acts on the signal itself
        _state["requested"] = False
        raise Terminated(f"no update boundary within {GRACE_SECONDS:g} s of the signal; "
                         "a resume starts from the last checkpoint")
    _state["received"] = _state["received"] or signum
    if _state["deferred"] and not _state["requested"]:
        _state["requested"] = True
        _state["timer"] = threading.Timer(GRACE_SECONDS, _grace_over, (signum,))
        _state["timer"].daemon = True
        _state["timer"].start()
        return
    _cancel_grace()
    raise Terminated


def _on_stop(signum: int, frame: Any) -> None:
    """A signal that never hurries a stop under way: STOP_SIGNAL, and a worker's SIGTERM and
    SIGHUP (`sigterm_raises(repeat_raises=False)`); the grace timer's delivery still raises."""
    if _state["overdue"] or not _state["received"]:
        _on_sigterm(signal.SIGTERM if signum == STOP_SIGNAL else signum, frame)


def _grace_over(signum: int) -> None:
    """On the timer's thread: deliver the waiting signal to the main thread again, now to raise."""
    _state["overdue"] = True
    _thread.interrupt_main(signum)


def _cancel_grace() -> None:
    timer, _state["timer"] = _state["timer"], None
    if timer is not None:
        timer.cancel()


@contextmanager
def sigterm_raises(repeat_raises: bool = True) -> Iterator[None]:
    """SIGTERM and SIGHUP (and STOP_SIGNAL, as a SIGTERM) raise `Terminated` in the block (in
    the main thread; elsewhere, nothing changes); the previous handlers are put back after it.
    `repeat_raises=False` (a worker process): a second signal does not hurry the stop, since a
    worker's pool signals it again when another worker ends, and its parent is the one to stop
    twice (the workers end with it)."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    handler = _on_sigterm if repeat_raises else _on_stop
    previous = {signum: signal.signal(signum, handler) for signum in SIGNALS}
    previous[STOP_SIGNAL] = signal.signal(STOP_SIGNAL, _on_stop)
    _state["handler"] = handler
    _state.update(active=True, requested=False, received=0, overdue=False)
    try:
        yield
    finally:
        _cancel_grace()
        for signum, handler in previous.items():
            signal.signal(signum, handler)
        _state["active"] = False


def reinstall() -> None:
    """Take SIGTERM and SIGHUP back from a library that set its own handlers (Ray's driver exits
    on SIGTERM at once), inside `sigterm_raises`."""
    if _state["active"] and threading.current_thread() is threading.main_thread():
        for signum in SIGNALS:
            signal.signal(signum, _state["handler"])
        signal.signal(STOP_SIGNAL, _on_stop)


@contextmanager
def termination_deferred() -> Iterator[None]:
    """In the block, the first signal waits for `termination_requested` to be acted on (by
    raising `Terminated`), for GRACE_SECONDS at most; one that arrives too late for that is
    raised when the block ends."""
    _state["deferred"] += 1
    try:
        yield
    finally:
        _state["deferred"] -= 1
    if _state["requested"] and not _state["deferred"]:
        _state["requested"] = False
        _cancel_grace()
        raise Terminated("stopped at the end of training")


def received_sigterm(interrupt: KeyboardInterrupt) -> bool:
    """Whether `interrupt` stands for a SIGTERM or SIGHUP: a `Terminated`, or the
    KeyboardInterrupt a library (Ray's `ray.get`) raised in its place while this process handled
    one."""
    return isinstance(interrupt, Terminated) or bool(_state["received"])


def exit_status() -> int:
    """128 + the number of the signal that stopped the command (SIGTERM's when none was seen)."""
    return 128 + (_state["received"] or signal.SIGTERM)


def termination_requested() -> bool:
    """Whether a signal arrived that waits to be acted on (`termination_deferred`): the caller
    acts on it now (the flag is cleared)."""
    requested = bool(_state["requested"])
    _state["requested"] = False
    if requested:
        _cancel_grace()
    return requested


@contextmanager
def interrupt_deferred() -> Iterator[None]:
    """For training in Python outside a command (`Model.learn`): Ctrl-C (SIGINT), SIGTERM and
    SIGHUP stop training at the next update boundary, with a checkpoint there, and raise
    `Terminated` (a KeyboardInterrupt); a second one, or one outside the training loop
    (pre-training), raises at once. Inside a command, or off the main thread, nothing changes."""
    if _state["active"] or threading.current_thread() is not threading.main_thread():
        yield
        return
    with sigterm_raises():
        previous = signal.signal(signal.SIGINT, _on_sigterm)
        try:
            yield
        finally:
            signal.signal(signal.SIGINT, previous)
