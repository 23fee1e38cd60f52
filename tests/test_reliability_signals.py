"""Signals and resumption (issue: Reliability 5, F10): SIGTERM stops `reproduce` with one line
and no warning of the workers' leftovers."""

import signal
import subprocess
import sys
from pathlib import Path

from test_faults import DEFAULT_SIGINT, is_gone
from test_sigterm import ENV, REPRODUCE, wait_for


#: REPRODUCE's cells, each making a progress bar first (disabled, as a cell's training does).
WITH_BAR = REPRODUCE.replace("def work(cell, root):\n",
                             "def work(cell, root):\n    __import__('tqdm').tqdm(disable=True)\n")
assert WITH_BAR != REPRODUCE


def start_reproduce(tmp_path: Path, body: str = REPRODUCE) -> tuple[subprocess.Popen, list[int]]:
    """`reproduce` of two cells on two workers that only sleep, in a session of its own, once
    both workers have started; and their ids."""
    script = tmp_path / "reproduce.py"
    script.write_text(DEFAULT_SIGINT + body)
    parent = subprocess.Popen([sys.executable, str(script), str(tmp_path)], env=ENV,
                              stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
                              start_new_session=True)
    wait_for(lambda: len(list(tmp_path.glob("worker-*"))) >= 2, 400)
    return parent, [int(p.name.split("-")[1]) for p in tmp_path.glob("worker-*")]


def lines(err: str) -> list[str]:
    return [line for line in err.splitlines() if line.strip() and "run/s]" not in line]


def test_sigterm_to_reproduce_leaves_no_semaphore_to_the_resource_tracker(tmp_path: Path) -> None:
    """F10: a worker's progress bar made tqdm's multiprocessing lock, a semaphore; the worker,
    terminated mid-cell, never released it, and the resource tracker warned of it after
    `xlvin: terminated`."""
    parent, workers = start_reproduce(tmp_path, WITH_BAR)
    parent.send_signal(signal.SIGTERM)
    _, err = parent.communicate(timeout=60)  # also waits for the resource tracker's stderr
    assert parent.returncode == 143, err
    assert lines(err) == ["xlvin: terminated"], err
    wait_for(lambda: all(map(is_gone, workers)), 20)
