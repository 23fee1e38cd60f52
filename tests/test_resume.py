"""Resume: a run interrupted at any point (exception or SIGKILL) and resumed with `--resume` ends
exactly as the uninterrupted run: same final weights, same metrics rows (wall-clock aside)."""

import json
import os
import random
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import torch
from safetensors.torch import load_file

from xlvin.cli import main
from xlvin.io import run_dir as run_dir_module
from xlvin.io.checkpoint import CHECKPOINT
from xlvin.io.run_dir import read_metrics

WALL_CLOCK = ("charts/sps",)


def online_args(executor: Path) -> list[str]:
    """XLVIN, online PPO on CartPole-v1: env state, RecordEpisodeStatistics and TransE negatives
    all cross the checkpoint."""
    return ["--env", "CartPole-v1", "--agent", "xlvin", "--executor", str(executor),
            "--num-envs", "2", "--num-steps", "64", "--total-steps", "1536", "--checkpoint-every", "3",
            "--transe-episodes", "10", "--transe-epochs", "1", "--quiet"]


def low_data_args(executor: Path) -> list[str]:
    """XLVIN, low-data protocol, strict TransE, weights averaged over the last 5 updates:
    checkpoints fall inside and between rounds, and inside the averaging."""
    return ["--env", "CartPole-v0", "--agent", "xlvin", "--executor", str(executor),
            "--protocol", "low_data", "--low-data-rounds", "3", "--low-data-episodes", "2",
            "--low-data-updates", "4", "--low-data-strict-transe", "true",
            "--low-data-refresh-old-policy", "true", "--low-data-eval-points", "3",
            "--low-data-eval-episodes", "2", "--low-data-average-last", "5",
            "--transe-epochs", "1", "--checkpoint-every", "3", "--quiet"]


def outcome(run: Path) -> tuple[dict[str, torch.Tensor], list[dict[str, float]], dict]:
    rows = [{k: v for k, v in r.items() if k not in WALL_CLOCK} for r in read_metrics(run)]
    summary = json.loads((run / "summary.json").read_text())["ppo"]
    summary = {k: v for k, v in summary.items() if k not in ("wall_time_s", "sps")}
    for name in WALL_CLOCK:
        summary.get("last_metrics", {}).pop(name, None)
    return load_file(str(run / "model.safetensors")), rows, summary


def assert_same_run(a: Path, b: Path) -> None:
    weights_a, rows_a, summary_a = outcome(a)
    weights_b, rows_b, summary_b = outcome(b)
    assert weights_a.keys() == weights_b.keys()
    for name in weights_a:
        assert torch.equal(weights_a[name], weights_b[name]), name
    assert rows_a == rows_b
    assert summary_a == summary_b


class Interrupt(Exception):
    pass


def interrupt_after(updates: int, args: list[str], out: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """`xlvin train ARGS --out OUT`, interrupted by an exception after its first `updates`
    updates were logged."""
    calls = {"n": 0}
    original = run_dir_module.MetricsLogger.__call__

    def crash_after_some_updates(self, step: int, metrics: dict[str, float]) -> None:
        original(self, step, metrics)
        calls["n"] += 1
        if calls["n"] == updates:
            raise Interrupt

    with monkeypatch.context() as patch:
        patch.setattr(run_dir_module.MetricsLogger, "__call__", crash_after_some_updates)
        with pytest.raises(Interrupt):
            main(["train", *args, "--out", str(out)])


@pytest.mark.parametrize("protocol", ["online", "low_data"])
@pytest.mark.parametrize("stop_after", [1, 4, 8])
def test_interrupted_run_resumes_to_the_same_result(
    protocol: str, stop_after: int, tmp_path: Path, executor_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    args = online_args(executor_path) if protocol == "online" else low_data_args(executor_path)
    assert main(["train", *args, "--out", str(tmp_path / "full")]) == 0

    interrupt_after(stop_after, args, tmp_path / "cut", monkeypatch)
    assert not (tmp_path / "cut" / "summary.json").exists()
    assert len(read_metrics(tmp_path / "cut")) == stop_after  # rows past the checkpoint included

    assert main(["train", *args, "--out", str(tmp_path / "cut"), "--resume"]) == 0
    assert_same_run(tmp_path / "full", tmp_path / "cut")


@pytest.mark.slow
@pytest.mark.parametrize("kill_seed", [0, 1])
def test_sigkill_at_a_random_moment_then_resume(tmp_path: Path, kill_seed: int) -> None:
    """A real `xlvin train` process killed with SIGKILL, at a random moment after its first
    checkpoint (drawn from `kill_seed`, so a failure names the delay that caused it), then
    resumed: the result equals the uninterrupted run's."""
    args = ["--env", "CartPole-v1", "--agent", "ppo", "--num-envs", "4", "--num-steps", "64",
            "--total-steps", "16384", "--checkpoint-every", "2", "--quiet"]
    assert main(["train", *args, "--out", str(tmp_path / "full")]) == 0

    run = tmp_path / "killed"
    cmd = [sys.executable, "-m", "xlvin.cli", "train", *args, "--out", str(run)]
    env = {**os.environ, "PYTHONHASHSEED": "0"}
    process = subprocess.Popen(cmd, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    deadline = time.monotonic() + 600  # a loaded machine may take minutes to start it
    while not (run / CHECKPOINT).exists() and process.poll() is None and time.monotonic() < deadline:
        time.sleep(0.02)
    assert (run / CHECKPOINT).exists(), "the run wrote no checkpoint to be killed after"
    delay = random.Random(kill_seed).uniform(0.0, 1.0)
    time.sleep(delay)
    process.send_signal(signal.SIGKILL)
    stderr = process.stderr.read().decode() if process.stderr else ""
    assert process.wait() == -signal.SIGKILL, f"finished before the kill at +{delay:.3f} s: {stderr}"
    assert not (run / "summary.json").exists()

    resumed = subprocess.run([*cmd, "--resume"], env=env, capture_output=True, text=True,
                             check=False)
    assert resumed.returncode == 0, f"killed at +{delay:.3f} s: {resumed.stderr}"
    assert_same_run(tmp_path / "full", run)


def test_resume_refuses_a_different_config_and_a_finished_run(
    tmp_path: Path, executor_path: Path, capsys: pytest.CaptureFixture
) -> None:
    args = online_args(executor_path)
    run = tmp_path / "run"
    assert main(["train", *args, "--out", str(run)]) == 0
    before = {p.name: p.read_bytes() for p in run.iterdir() if p.is_file()}
    capsys.readouterr()

    assert main(["train", *args, "--out", str(run), "--resume"]) == 2
    assert "finished run" in capsys.readouterr().err
    assert main(["train", *args, "--lr", "0.01", "--out", str(run), "--resume"]) == 2
    err = capsys.readouterr().err.strip()
    assert "holds a different run (ppo.lr differ)" in err and len(err.splitlines()) == 1
    assert main(["train", *args, "--out", str(tmp_path / "nothing"), "--resume"]) == 2
    assert "holds no run to resume" in capsys.readouterr().err
    assert {p.name: p.read_bytes() for p in run.iterdir() if p.is_file()} == before


def test_corrupt_checkpoint_is_one_clear_error(tmp_path: Path, executor_path: Path, capsys: pytest.CaptureFixture) -> None:
    run = tmp_path / "run"
    run.mkdir()
    args = online_args(executor_path)
    assert main(["train", *args, "--out", str(tmp_path / "ref")]) == 0
    (run / "config.json").write_bytes((tmp_path / "ref" / "config.json").read_bytes())
    (run / CHECKPOINT).write_bytes(b"\x00" * 100)
    capsys.readouterr()
    assert main(["train", *args, "--out", str(run), "--resume"]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("xlvin: error: corrupt checkpoint file") and len(err.splitlines()) == 1
    assert (run / CHECKPOINT).read_bytes() == b"\x00" * 100


def test_a_diverged_run_stops_with_one_line_and_keeps_its_last_good_checkpoint(
    tmp_path: Path, executor_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture
) -> None:
    from xlvin.ppo import loop, update as ppo

    args = online_args(executor_path)
    assert main(["train", *args, "--out", str(tmp_path / "full")]) == 0
    real_update, calls = loop.ppo_update, {"n": 0}

    def diverge_at_update_5(*a, **k):
        calls["n"] += 1
        if calls["n"] == 5:
            raise ppo.TrainingDiverged("non-finite PPO loss (policy nan)")
        return real_update(*a, **k)

    with monkeypatch.context() as patch:
        patch.setattr(loop, "ppo_update", diverge_at_update_5)
        capsys.readouterr()
        assert main(["train", *args, "--out", str(tmp_path / "cut")]) == 2
    errors = [line for line in capsys.readouterr().err.splitlines()
              if not line.startswith(("xlvin: collecting", "xlvin: pre-training"))]
    assert len(errors) == 1 and "non-finite PPO loss" in errors[0]
    assert "last good checkpoint is kept" in errors[0]
    assert not (tmp_path / "cut" / "summary.json").exists()
    # The checkpoint taken after update 3 is intact: the run continues from it to the same end.
    assert main(["train", *args, "--out", str(tmp_path / "cut"), "--resume"]) == 0
    assert_same_run(tmp_path / "full", tmp_path / "cut")


@pytest.mark.parametrize("env_id", ["CartPole-v1", "Acrobot-v1", "MountainCar-v0"])
def test_env_state_restored_into_a_fresh_env_steps_identically(env_id: str) -> None:
    import numpy as np

    from xlvin.ppo.collect import make_vector_env, reset_envs
    from xlvin.envs.env_state import env_state, restorable, restore_env_state

    rng = np.random.default_rng(0)
    original = make_vector_env(env_id, 3)
    reset_envs(original, 5)
    for _ in range(150):
        original.step(rng.integers(0, 2, 3))
    state = json.loads(json.dumps(env_state(original)))  # through JSON, as in a checkpoint
    copy = make_vector_env(env_id, 3)
    reset_envs(copy, 99)
    restore_env_state(copy, state)
    assert restorable(original)
    finished = 0
    for _ in range(400):  # long enough for several autoresets in each env
        actions = rng.integers(0, 2, 3)
        a, b = original.step(actions), copy.step(actions)
        for x, y in zip(a[:4], b[:4]):
            np.testing.assert_array_equal(x, y)
        if "episode" in a[4]:
            finished += int(a[4]["_episode"].sum())
            np.testing.assert_array_equal(a[4]["episode"]["r"], b[4]["episode"]["r"])
    assert finished > 0


def test_a_run_killed_during_transe_pretraining_resumes_from_its_last_epoch(
    tmp_path: Path, executor_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """TransE pre-training is checkpointed after every epoch: a run stopped after epoch 2 of 3
    continues with epoch 3 and ends as the uninterrupted run."""
    from xlvin.io.checkpoint import TRANSE_CHECKPOINT, Checkpointer

    args = [*online_args(executor_path), "--transe-epochs", "3"]
    assert main(["train", *args, "--out", str(tmp_path / "full")]) == 0
    original, epochs = Checkpointer.save, []

    def stop_after_two_epochs(self, *a, **k) -> None:
        original(self, *a, **k)
        if Path(self.path).name == TRANSE_CHECKPOINT:
            epochs.append(a[3]["epoch"])
            if a[3]["epoch"] == 2:
                raise Interrupt

    with monkeypatch.context() as patch:
        patch.setattr(Checkpointer, "save", stop_after_two_epochs)
        with pytest.raises(Interrupt):
            main(["train", *args, "--out", str(tmp_path / "cut")])
    assert epochs == [1, 2] and not (tmp_path / "cut" / CHECKPOINT).exists()

    with monkeypatch.context() as patch:
        patch.setattr(Checkpointer, "save", stop_after_two_epochs)
        assert main(["train", *args, "--out", str(tmp_path / "cut"), "--resume"]) == 0
    assert epochs == [1, 2, 3]  # only the last epoch ran again
    assert_same_run(tmp_path / "full", tmp_path / "cut")


@pytest.mark.parametrize("tamper, message", [
    (lambda attrs: attrs.update(step=1), "which the env does not hold"),
    (lambda attrs: attrs.update(state={"__array__": "<U250000000", "shape": [1], "data": [0]}),
     "not a state value"),
    (lambda attrs: attrs.update(state={"__array__": "|O", "shape": [1], "data": [0]}),
     "not a state value"),
    (lambda attrs: attrs.update(state={"__scalar__": "<U9", "value": "x"}), "not a state value"),
    (lambda attrs: attrs.update(state={"__evil__": "os.system"}), "not a state value"),
    (lambda attrs: attrs.update(x_threshold=-1), "another type or shape"),  # an int for a float
    (lambda attrs: attrs.update(state={"__array__": "<f8", "shape": [3], "data": [0.0] * 3}),
     "another type or shape"),
    (lambda attrs: attrs.update(state={"__array__": "<f8", "shape": [4], "data": [0.0] * 2}),
     "another type or shape"),
])
def test_env_state_restore_refuses_undeclared_attributes_and_non_numeric_dtypes(
    tamper, message: str
) -> None:
    """A checkpoint's env state may only set what the env's own state holds, with numbers:
    nothing is written when one attribute is refused."""
    from xlvin.ppo.collect import make_vector_env, reset_envs
    from xlvin.envs.env_state import env_state, restore_env_state

    envs = make_vector_env("CartPole-v1", 2)
    reset_envs(envs, 0)
    state = json.loads(json.dumps(env_state(envs)))
    cartpole = next(o for o in state if o["type"] == "CartPoleEnv")
    tamper(cartpole["attrs"])
    state[0]["attrs"]["episode_returns"]["data"] = [7.0, 7.0]  # would be written first
    before = json.dumps(env_state(envs))
    with pytest.raises(ValueError, match=message):
        restore_env_state(envs, state)
    assert json.dumps(env_state(envs)) == before


def test_box_actions_with_normalisation_resume_exactly(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """PPO on Pendulum-v1 (Box actions, observation and reward normalisation on by default): the
    statistics, the envs' running returns and the Gaussian's log std cross the checkpoint."""
    args = ["--env", "Pendulum-v1", "--agent", "ppo", "--num-envs", "2", "--num-steps", "64",
            "--total-steps", "768", "--checkpoint-every", "2", "--quiet"]
    assert main(["train", *args, "--out", str(tmp_path / "full")]) == 0
    interrupt_after(3, args, tmp_path / "cut", monkeypatch)
    assert main(["train", *args, "--out", str(tmp_path / "cut"), "--resume"]) == 0
    assert_same_run(tmp_path / "full", tmp_path / "cut")
    weights = outcome(tmp_path / "full")[0]
    assert weights["encoder.0.count"].item() > 700 and "heads.log_std" in weights
