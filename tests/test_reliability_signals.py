"""Signals and resumption (issue: Reliability 5, F10-F13): SIGTERM stops `reproduce` with one
line and no warning of the workers' leftovers; SIGHUP (a closed terminal) stops a command as
SIGTERM does, with a checkpoint, one line and status 129; an interrupted quickstart resumes in
its --out; a low-data run that could never finish is refused before anything is built, and a
signal during a collection that reaches no update boundary still stops it."""

import dataclasses
import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest
from test_faults import DEFAULT_SIGINT, is_gone
from test_reliability_bounds import this_machine_has
from test_sigterm import ARGS, ENV, REPRODUCE, wait_for

from xlvin.cli import main
from xlvin.commands import quickstart
from xlvin.experiments import table1
from xlvin.io.checkpoint import CHECKPOINT, read_loop_state
from xlvin.io.run_dir import read_metrics

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


def test_sighup_stops_train_with_a_checkpoint_one_line_and_exit_129(tmp_path: Path) -> None:
    """F11: SIGHUP, what a closed terminal sends, ended `train` at once (129, no line, no
    checkpoint); it is handled as SIGTERM."""
    run = tmp_path / "run"
    process = subprocess.Popen([sys.executable, "-m", "xlvin.cli", "train", *ARGS, "--out", str(run)],
                               env=ENV, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    metrics = run / "metrics.jsonl"
    wait_for(lambda: metrics.exists() and metrics.read_text().count("\n") >= 3)
    process.send_signal(signal.SIGHUP)
    _, err = process.communicate(timeout=60)
    assert process.returncode == 129, err
    assert err.startswith("xlvin: terminated (stopped after update ") and err.count("\n") == 1, err
    assert "checkpoint saved there" in err
    assert read_loop_state(run / CHECKPOINT)["log_step"] == read_metrics(run)[-1]["step"]


def test_sighup_to_the_whole_job_stops_reproduce_and_its_workers_with_one_line(tmp_path: Path) -> None:
    """F11: SIGHUP to the process group of `reproduce`, as a closed terminal sends it (the
    workers and the resource tracker leave it to the parent, which terminates the workers): one
    line, status 129."""
    parent, workers = start_reproduce(tmp_path)
    os.killpg(parent.pid, signal.SIGHUP)
    _, err = parent.communicate(timeout=60)
    assert parent.returncode == 129, err
    assert lines(err) == ["xlvin: terminated"], err
    wait_for(lambda: all(map(is_gone, workers)), 20)


def quickstart_record(cell: table1.Cell, root: Path) -> dict:
    """A cell's record as `table1.run_cell` returns it (the numbers made up)."""
    return {"env": cell.env, "agent": cell.agent, "seed": cell.seed, "max_eval_return": 200.0,
            "final_return": 100.0, "episodes": 10, "transitions": 300}


def test_an_interrupted_quickstart_resumes_in_its_out(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                      capsys: pytest.CaptureFixture) -> None:
    """F12: the same `xlvin quickstart --out Q` after a SIGTERM said "--out Q already exists";
    it runs the cells in Q (each resumes, as `reproduce`'s do), and a folder that holds
    anything else is still refused in one line, untouched."""
    roots: list[Path] = []
    monkeypatch.setattr(quickstart, "CLASSIC", dataclasses.replace(
        quickstart.CLASSIC, prepare=lambda cells, jobs=1: [],
        run_cell=lambda cell, root: roots.append(root) or quickstart_record(cell, root)))
    out = tmp_path / "Q"  # a quickstart cut short: its mark, then its first run's folder
    (out / "paper" / "standard" / "CartPole-v0" / "ppo" / "seed0").mkdir(parents=True)
    (out / quickstart.MARK).write_text('{"results.md": []}')
    argv = ["quickstart", "--seeds", "1", "--jobs", "1", "--out", str(out)]
    assert main(argv) == 0
    assert roots == [out, out] and (out / "results.md").is_file()
    assert main(argv) == 0  # finished: the table again
    assert {p.name for p in out.iterdir()} == {quickstart.MARK, "paper", "results.md"}

    other = tmp_path / "other"
    other.mkdir()
    (other / "notes.txt").write_text("mine")
    capsys.readouterr()
    assert main([*argv[:-1], str(other)]) == 2
    err = capsys.readouterr().err
    assert err.startswith("xlvin: error: --out ") and "not a quickstart's folder" in err, err
    assert err.count("\n") == 1 and [p.name for p in other.iterdir()] == ["notes.txt"]


LOW_DATA = ["train", "--env", "CartPole-v1", "--agent", "ppo", "--protocol", "low_data", "--quiet"]


@pytest.mark.parametrize("episodes, memory, said", [
    (10**12, None, "would take at least 4,843 days"),  # 10^12 steps, each learnt from 400 times
    (10**9, 64 * 2**30, "need at least 123 GiB a round; this machine has 64 GiB"),
])
def test_a_low_data_round_that_cannot_finish_is_refused_before_anything_is_built(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture,
    episodes: int, memory: int | None, said: str,
) -> None:
    """F13: `--low-data-episodes 1000000000` was not refused: it collected for minutes, its
    memory growing. The time bound counts a low-data run's episodes (one step each at least,
    learnt from by every update of the round), and its round must fit in memory."""
    if memory is not None:
        this_machine_has(monkeypatch, memory)
    run = tmp_path / "run"
    assert main([*LOW_DATA, "--low-data-episodes", str(episodes), "--out", str(run)]) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"xlvin: error: --low-data-") and said in err and err.count("\n") == 1, err
    assert not run.exists()


BUSY = textwrap.dedent("""
    import sys
    from xlvin import signals
    from xlvin.cli import main

    signals.GRACE_SECONDS = 1.0
    sys.exit(main(sys.argv[1:]))
""")


def test_sigterm_stops_a_collection_that_reaches_no_update_boundary(tmp_path: Path) -> None:
    """F13: SIGTERM waits for the next update boundary to save a checkpoint there; a round of a
    million episodes reaches none for hours, and the signal was ignored. It raises once
    GRACE_SECONDS (1 s here) have passed; the checkpoint before the round is kept."""
    run = tmp_path / "run"
    cmd = [sys.executable, "-c", DEFAULT_SIGINT + BUSY, *LOW_DATA, "--low-data-episodes",
           "1000000", "--out", str(run)]
    process = subprocess.Popen(cmd, env=ENV, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                               text=True)
    try:
        wait_for(lambda: (run / CHECKPOINT).exists())
        before = (run / CHECKPOINT).read_bytes()
        process.send_signal(signal.SIGTERM)
        _, err = process.communicate(timeout=30)
    finally:
        process.kill()
    assert process.returncode == 143, err
    assert err == ("xlvin: terminated (no update boundary within 1 s of the signal; a resume "
                   "starts from the last checkpoint)\n"), err
    assert (run / CHECKPOINT).read_bytes() == before


def test_a_deferred_signal_raises_after_the_grace_unless_acted_on(monkeypatch: pytest.MonkeyPatch) -> None:
    """F13, in every loop: a loop that never looks at the signal is stopped after the grace; one
    that acts on it in time is not interrupted later."""
    from xlvin import signals

    monkeypatch.setattr(signals, "GRACE_SECONDS", 0.2)
    with signals.sigterm_raises():
        with pytest.raises(signals.Terminated, match="no update boundary within 0.2 s"):
            with signals.termination_deferred():
                os.kill(os.getpid(), signal.SIGTERM)
                while True:  # a collection that never ends
                    pass
    with signals.sigterm_raises():
        with signals.termination_deferred():
            os.kill(os.getpid(), signal.SIGHUP)
            time.sleep(0.05)
            assert signals.termination_requested()  # the boundary, in time
            time.sleep(0.5)  # past the grace: nothing is raised
        assert signals.exit_status() == 129


def test_the_grace_fits_inside_the_schedulers_wait_before_sigkill() -> None:
    """Slurm (KillWait) and Kubernetes (terminationGracePeriodSeconds) send SIGKILL 30 s after
    SIGTERM by default: a command's wait for its workers' boundary and save ends before it, and
    the grace outlasts an Atari update on 2 CPU cores (up to 17 s measured: 1,024 transitions
    at 61 steps/s)."""
    from xlvin import signals
    from xlvin.experiments.jobs import STOP_MARGIN_SECONDS
    assert 17 < signals.GRACE_SECONDS and signals.GRACE_SECONDS + STOP_MARGIN_SECONDS < 30
