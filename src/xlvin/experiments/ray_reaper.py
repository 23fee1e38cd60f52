"""Ends a local Ray session when the `xlvin sweep` that started it dies.

Ray ends its GCS server and raylet with the driver, and `xlvin.experiments.sweep` ends task
workers with their raylet, but Ray's agents (dashboard and runtime-env agents) outlive a killed
driver for minutes. `start_reaper` starts this module as a small process of its own session (so
Ctrl-C does not stop it first); it waits for its parent, the driver, to be gone, then kills every
process that still holds a file open in the Ray session's directory (its logs), and looks again
until none is left: processes close files while Ray shuts down, and one seen mid-close must not
be missed. Only processes of that one session are touched.

    python -m xlvin.experiments.ray_reaper DRIVER_PID SESSION_DIR
"""

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

#: How often the reaper looks whether the driver is still alive (seconds).
POLL_SECONDS = 0.5
#: How long the reaper goes on killing the session's processes after the driver ended (seconds).
REAP_SECONDS = 30.0


def start_reaper(session_dir: str) -> None:
    """Start the reaper of the Ray session in `session_dir` for this process (the driver)."""
    subprocess.Popen(
        [sys.executable, "-m", __name__, str(os.getpid()), session_dir],
        stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
        start_new_session=True,
    )


def session_processes(session_dir: str) -> list[int]:
    """Processes other than this one with a file open under `session_dir`."""
    return [
        int(proc.name) for proc in Path("/proc").iterdir()
        if proc.name.isdigit() and int(proc.name) != os.getpid()
        and any(link.startswith(session_dir) for link in open_files(proc))
    ]


def open_files(proc: Path) -> list[str]:
    """The files the process `/proc/<pid>` has open: a descriptor that closes while they are read
    is left out, not the process; none when the process is gone or not ours to look at."""
    try:
        fds = list((proc / "fd").iterdir())
    except OSError:
        return []
    links = []
    for fd in fds:
        try:
            links.append(os.readlink(fd))
        except OSError:  # closed since the listing
            continue
    return links


def main(argv: list[str]) -> None:
    """Wait for the driver `argv[0]` to end, then kill the processes of session `argv[1]` until
    none is left (for at most REAP_SECONDS)."""
    driver, session_dir = int(argv[0]), argv[1]
    while os.getppid() == driver:
        time.sleep(POLL_SECONDS)
    kill_session(session_dir)


def kill_session(session_dir: str, seconds: float = REAP_SECONDS) -> None:
    """SIGKILL the processes with a file open under `session_dir`, looking again until none is
    left or `seconds` have passed."""
    until = time.monotonic() + seconds
    while (left := session_processes(session_dir)) and time.monotonic() < until:
        for pid in left:
            try:
                os.kill(pid, signal.SIGKILL)
            except OSError:
                continue
        time.sleep(POLL_SECONDS / 5)


if __name__ == "__main__":
    main(sys.argv[1:])
