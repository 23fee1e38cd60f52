"""SIGTERM, what schedulers (Slurm, Kubernetes, systemd) stop a job with, is handled as Ctrl-C:
`train` saves a checkpoint at the next update boundary, prints one line and exits 143, and the
resume ends exactly as the uninterrupted run; `reproduce` and `sweep` stop their workers and
print one line."""

import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest
from test_faults import DEFAULT_SIGINT, SRC, is_gone
from test_resume import assert_same_run

from xlvin.cli import main
from xlvin.io.checkpoint import CHECKPOINT, read_loop_state
from xlvin.io.run_dir import read_metrics

ENV = {**os.environ, "PYTHONPATH": SRC, "PYTHONHASHSEED": "0"}
#: About 3 s of training here, a checkpoint only every 50 updates: the one at the signal is new.
ARGS = ["--env", "CartPole-v1", "--agent", "ppo", "--num-envs", "2", "--num-steps", "32",
        "--total-steps", "8192", "--checkpoint-every", "50", "--quiet"]


def wait_for(predicate, seconds: float = 120) -> None:
    deadline = time.monotonic() + seconds
    while not predicate() and time.monotonic() < deadline:
        time.sleep(0.05)
    assert predicate()


def test_sigterm_stops_train_with_a_checkpoint_one_line_and_exit_143(tmp_path: Path) -> None:
    assert main(["train", *ARGS, "--out", str(tmp_path / "full")]) == 0
    run = tmp_path / "stopped"
    cmd = [sys.executable, "-m", "xlvin.cli", "train", *ARGS, "--out", str(run)]
    process = subprocess.Popen(cmd, env=ENV, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                               text=True)
    metrics = run / "metrics.jsonl"
    wait_for(lambda: metrics.exists() and metrics.read_text().count("\n") >= 3)
    process.send_signal(signal.SIGTERM)
    _, err = process.communicate(timeout=60)
    assert process.returncode == 143, err
    assert err.startswith("xlvin: terminated (stopped after update ") and err.count("\n") == 1, err
    assert "checkpoint saved there" in err
    assert not (run / "summary.json").exists()
    rows = read_metrics(run)
    assert read_loop_state(run / CHECKPOINT)["log_step"] == rows[-1]["step"]  # at the signal
    assert len(rows) % 50 != 0  # not a periodic checkpoint

    resumed = subprocess.run([*cmd, "--resume"], env=ENV, capture_output=True, text=True, check=False)
    assert resumed.returncode == 0, resumed.stderr
    assert_same_run(tmp_path / "full", run)


REPRODUCE = textwrap.dedent("""
    import os, sys, time
    from pathlib import Path
    from xlvin.cli import main
    from xlvin.experiments import table1

    def work(cell, root):
        Path(sys.argv[1], f"worker-{os.getpid()}").touch()
        time.sleep(120)

    if __name__ == "__main__":
        table1.run_cell = work
        sys.exit(main(["reproduce", "classic", "--protocol", "paper", "--envs", "CartPole-v0",
                       "--agents", "ppo", "--seeds", "2", "--jobs", "2",
                       "--runs", str(Path(sys.argv[1], "runs")),
                       "--results", str(Path(sys.argv[1], "results"))]))
""")

SWEEP = textwrap.dedent("""
    import dataclasses, os, sys, time
    from pathlib import Path
    from xlvin.cli import main
    from xlvin.experiments import registry

    def work(cell, root):  # on a Ray worker: sys.argv is not this script's
        Path(FOLDER, f"worker-{os.getpid()}").touch()
        time.sleep(120)

    if __name__ == "__main__":
        registry.EXPERIMENTS["classic"] = dataclasses.replace(registry.CLASSIC, run_cell=work)
        sys.exit(main(["sweep", "table1", "--seeds", "1", "--protocol", "paper", "--envs", "CartPole-v0",
                       "--agents", "ppo", "--workers", "1",
                       "--runs", str(Path(sys.argv[1], "runs")),
                       "--results", str(Path(sys.argv[1], "results"))]))
""")


@pytest.mark.parametrize("command", ["reproduce", "sweep"])
def test_sigterm_stops_the_workers_with_one_line(command: str, tmp_path: Path) -> None:
    """SIGTERM to the command alone (as Kubernetes sends it): its workers are gone within
    seconds and it prints one line, exit status 143."""
    if command == "sweep":
        pytest.importorskip("ray")
    script = tmp_path / f"{command}.py"
    body = REPRODUCE if command == "reproduce" else SWEEP
    script.write_text(DEFAULT_SIGINT + f"FOLDER = {str(tmp_path)!r}\n" + body)
    parent = subprocess.Popen([sys.executable, str(script), str(tmp_path)], env=ENV,
                              stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
                              start_new_session=True)
    wanted = 2 if command == "reproduce" else 1
    wait_for(lambda: len(list(tmp_path.glob("worker-*"))) >= wanted, 400)  # Ray starts slowly
    workers = [int(p.name.split("-")[1]) for p in tmp_path.glob("worker-*")]
    parent.send_signal(signal.SIGTERM)
    _, err = parent.communicate(timeout=60)
    assert parent.returncode == 143, err
    lines = [line for line in err.splitlines() if line.strip() and "run/s]" not in line]
    assert lines == ["xlvin: terminated"], err  # after the progress bar, if any
    wait_for(lambda: all(map(is_gone, workers)), 20)


POOL_TRAINING = textwrap.dedent("""
    import os, sys
    from pathlib import Path
    from xlvin.experiments.jobs import map_jobs
    from xlvin.ppo.update import PPOConfig
    from xlvin.run.config import RunConfig, TrainConfig
    from xlvin.run.training import train_run
    from xlvin.signals import sigterm_raises

    def work(seed):  # a CartPole run far longer than the test, checkpointed every 50 updates
        cfg = RunConfig(train=TrainConfig(env="CartPole-v1", agent="ppo", seed=seed,
                                          checkpoint_every=50),
                        ppo=PPOConfig(num_envs=2, num_steps=32, total_steps=64_000_000))
        Path(sys.argv[1], f"worker-{os.getpid()}").touch()
        train_run(cfg, Path(sys.argv[1], f"run{seed}"), progress=False)

    if __name__ == "__main__":
        try:
            with sigterm_raises():
                map_jobs(work, [0, 1, 2], jobs=2)
        except KeyboardInterrupt:
            sys.exit(143)
""")


@pytest.mark.parametrize("to", ["the parent", "the whole job"])
def test_sigterm_stops_each_worker_at_an_update_boundary_with_a_checkpoint(
        to: str, tmp_path: Path) -> None:
    """SIGTERM to a command with workers training, alone (Kubernetes) or with its workers
    (Slurm, systemd, `kill -- -PGID`): each worker saves its checkpoint at its next update
    boundary, as `train` does, and ends without starting the item still queued."""
    script = tmp_path / "pool.py"
    script.write_text(DEFAULT_SIGINT + POOL_TRAINING)
    parent = subprocess.Popen([sys.executable, str(script), str(tmp_path)], env=ENV,
                              stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
                              start_new_session=True)
    runs = [tmp_path / "run0", tmp_path / "run1"]
    wait_for(lambda: all((r / "metrics.jsonl").exists()
                         and (r / "metrics.jsonl").read_text().count("\n") >= 60 for r in runs))
    workers = [int(p.name.split("-")[1]) for p in tmp_path.glob("worker-*")]
    if to == "the parent":
        parent.send_signal(signal.SIGTERM)
    else:
        os.killpg(parent.pid, signal.SIGTERM)
    _, err = parent.communicate(timeout=60)
    assert parent.returncode == 143, err
    for run in runs:  # killed at once, a worker's checkpoint would lag its metrics
        assert read_loop_state(run / CHECKPOINT)["log_step"] == read_metrics(run)[-1]["step"], run
    assert not (tmp_path / "run2").exists()
    wait_for(lambda: all(map(is_gone, workers)), 20)


KILLED_WORKER = textwrap.dedent("""
    import os, signal, sys, time
    from xlvin.errors import UserError
    from xlvin.experiments.jobs import map_jobs

    def work(item):
        if item == 1:
            os.kill(os.getpid(), signal.SIGKILL)  # as the kernel's out-of-memory killer does
        time.sleep(0.2)
        return item

    if __name__ == "__main__":
        try:
            map_jobs(work, [0, 1, 2, 3], jobs=2)
        except UserError as err:
            print(err)
            sys.exit(2)
""")


def test_a_worker_killed_alone_is_one_error_line(tmp_path: Path) -> None:
    """A worker killed while running its item (out of memory, `kill -9 PID`) is one UserError
    saying how to resume, not a BrokenProcessPool traceback; no worker outlives the command."""
    script = tmp_path / "killed.py"
    script.write_text(KILLED_WORKER)
    done = subprocess.run([sys.executable, str(script)], env=ENV, capture_output=True, text=True,
                          timeout=120)
    assert done.returncode == 2, done.stderr
    (line,) = done.stdout.splitlines()
    assert line.startswith("a worker process ended while its cell was running") and (
        "run the same command again to resume them" in line), line
    assert "Traceback" not in done.stderr, done.stderr
