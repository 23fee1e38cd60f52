"""Starting local Ray or reaching a Ray cluster for `xlvin sweep`, with one line when it fails.

Ray itself retries an address for minutes and answers a cluster that wants an authentication
token (`ray start` enables token authentication when a token exists, as in Ray 2.60) with tens of
seconds of `InvalidAuthToken` warnings before a connection error that does not name the cause.
`init_ray` refuses an address whose port does not answer, and a cluster that refuses this
process's token, at once, each with one line that says what to do; everything else is bounded by
a time limit. Ray is imported only here and in `xlvin.experiments.sweep`, when a sweep runs: it
is the optional `ray` extra.
"""

import logging
import os
import signal
import socket
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from xlvin.errors import UserError
from xlvin.experiments.ray_reaper import start_reaper
from xlvin.kernels import pinned, pins
from xlvin.io.seals import ACCEPT_UNSEALED, accepting_unsealed
from xlvin.signals import reinstall

INSTALL_HINT = "`xlvin sweep` needs Ray: pip install 'xlvin[ray]'"
CONNECT_TIMEOUT = 60.0  # seconds to start local Ray or reach a cluster
REACH_TIMEOUT = 10.0  # seconds for a cluster's head to accept a connection on its port
AUTH_MODE = "RAY_AUTH_MODE"
TOKEN_HINT = "RAY_AUTH_TOKEN=<the output of `ray get-auth-token` on the head node>"


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
    workers_env = {**(pins() if pinned() else {}),
                   **({ACCEPT_UNSEALED: "1"} if accepting_unsealed() else {})}
    quiet = {
        "include_dashboard": False,
        "log_to_driver": False,  # workers' stdout/stderr stay in Ray's log files
        "logging_level": logging.ERROR,
        # workers start under this process's kernel mode and reading of unsealed files (Ray
        # starts them, not this process)
        "runtime_env": {"env_vars": workers_env} if workers_env else None,
    }
    where = address or "local Ray"
    refused = getattr(ray.exceptions, "AuthenticationError", ConnectionError)  # Ray with tokens
    try:
        with time_limit(timeout):
            if address:
                check_reachable(address, min(timeout, REACH_TIMEOUT))
                check_token(address)
                ray.init(address=address, **quiet)
            else:  # "local": a new Ray instance even if another one runs on this machine
                ray.init(address="local", num_cpus=workers, **quiet)
                start_reaper(ray._private.worker._global_node.get_session_dir_path())
            reinstall()  # Ray's driver takes SIGTERM and aborts on it
    except (ConnectionError, TimeoutError, ValueError, refused) as err:
        raise UserError(f"cannot start Ray ({where}): {first_line(err)}") from None
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


def check_token(address: str) -> None:
    """Refuse at once a cluster (`host:port`, its head's GCS) that rejects this process's
    authentication token, or that wants one while this process has none, with a UserError that
    says what to set; a port where something else than Ray answers is a ConnectionError (Ray's
    client gives up on a silent one after about 40 s). Ray's client (`ray://`) and `auto` are
    left to `ray.init`."""
    if address == "auto" or address.startswith("ray://"):
        return
    ray = import_ray()
    try:  # Ray's own modules (private: a Ray that moved or lacks them is left to `ray.init`)
        from ray._private.authentication.authentication_token_setup import (
            ensure_token_if_auth_enabled,
        )
        from ray._raylet import GcsClient
    except ImportError:
        return

    token_mode = os.environ.get(AUTH_MODE, "").lower() == "token"
    try:  # token mode without a token: say so, before Ray's client would abort this process
        ensure_token_if_auth_enabled(None, create_token_if_missing=False)
    except ray.exceptions.AuthenticationError:
        raise UserError(f"{AUTH_MODE}=token, but this machine has no token: set {TOKEN_HINT}") from None
    try:
        with stderr_silenced():  # Ray's C++ client logs the refusal as a warning too
            GcsClient(address=address)  # raises at once when the GCS refuses the token
    except ray.exceptions.AuthenticationError:
        raise UserError(auth_hint(address, token_mode)) from None
    except ray.exceptions.RayError as err:  # something else answers on that port
        raise ConnectionError(f"{address} does not answer as a Ray cluster: {first_line(err)}") from None


def auth_hint(address: str, token_mode: bool) -> str:
    """One line: what to set when the cluster at `address` refused this process."""
    if not token_mode:
        return (f"the Ray cluster at {address} requires token authentication: set "
                f"{AUTH_MODE}=token and {TOKEN_HINT}, then run again")
    return (f"the Ray cluster at {address} refused this machine's authentication token "
            f"(RAY_AUTH_TOKEN, RAY_AUTH_TOKEN_PATH or ~/.ray/auth_token): set {TOKEN_HINT}")


@contextmanager
def stderr_silenced() -> Iterator[None]:
    """Discard what is written to file descriptor 2 (C++ libraries' logs) in the block."""
    saved = os.dup(2)
    devnull = os.open(os.devnull, os.O_WRONLY)
    try:
        os.dup2(devnull, 2)
        yield
    finally:
        os.dup2(saved, 2)
        os.close(saved)
        os.close(devnull)


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


def first_line(err: BaseException) -> str:
    """The first non-empty line of an exception's message, or its type name."""
    lines = [x.strip() for x in str(err).splitlines() if x.strip()]
    return lines[0] if lines else type(err).__name__
