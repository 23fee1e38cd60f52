"""Ends a local Ray session when the `xlvin sweep` that started it dies.

Ray ends its GCS server and raylet with the driver, and `xlvin.experiments.sweep` ends task
workers with their raylet, but Ray's agents (dashboard and runtime-env agents) outlive a killed
driver for minutes. `start_reaper` starts this module as a small process of its own session (so
Ctrl-C does not stop it first); it waits for its parent, the driver, to be gone, then kills every
process that still holds a file open in the Ray session's directory (its logs). Only processes
of that one session are touched.

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


def start_reaper(session_dir: str) -> None:
    """Start the reaper of the Ray session in `session_dir` for this process (the driver)."""
    subprocess.Popen(
        [sys.executable, "-m", __name__, str(os.getpid()), session_dir],
        stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
        start_new_session=True,
    )


def session_processes(session_dir: str) -> list[int]:
    """Processes other than this one with a file open under `session_dir`."""
    found = []
    for proc in Path("/proc").iterdir():
        if not proc.name.isdigit() or int(proc.name) == os.getpid():
            continue
        try:
            links = [os.readlink(fd) for fd in (proc / "fd").iterdir()]
        except OSError:  # gone meanwhile, or not ours to look at
            continue
        if any(link.startswith(session_dir) for link in links):
            found.append(int(proc.name))
    return found


def main(argv: list[str]) -> None:
    """Wait for the driver `argv[0]` to end, then kill the processes of session `argv[1]`."""
    driver, session_dir = int(argv[0]), argv[1]
    while os.getppid() == driver:
        time.sleep(POLL_SECONDS)
    for pid in session_processes(session_dir):
        try:
            os.kill(pid, signal.SIGKILL)
        except OSError:
            continue


if __name__ == "__main__":
    main(sys.argv[1:])
