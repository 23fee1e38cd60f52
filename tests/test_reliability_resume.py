"""What a resume continues from is what was saved (issue: Reliability 5). F2: NaN observations stop
XLVIN-R's TransE pre-training, as they stop PPO, before a weight is touched, and no checkpoint
ever holds a NaN or inf. F7: a checkpoint (or TransE's) that is a symbolic link is refused, not
followed. F8: a checkpoint after the first update with its metrics.jsonl missing is refused.
F4: a resumed env whose state cannot be restored says so in one line. Adam's state read back
from a checkpoint is checked as its weights are. Each refusal changes no byte."""

import shutil
from pathlib import Path

import gymnasium as gym
import numpy as np
import pytest
import torch
from gymnasium.envs.classic_control.cartpole import CartPoleEnv
from test_faults import one_error_line, snapshot
from test_reliability_integrity import DAMAGE, resave

from tests.tiny_runs import tiny, unfinished_run
from xlvin.cli import main
from xlvin.errors import UserError
from xlvin.io.checkpoint import CHECKPOINT, TRANSE_CHECKPOINT, Checkpointer, read_loop_state
from xlvin.io.run_dir import METRICS, MODEL, SUMMARY
from xlvin.io.weights import load_weights


class NaNObservations(gym.Env):
    """Random observations in [-1, 1], NaN from the env's `at`-th step on; 10-step episodes."""

    observation_space = gym.spaces.Box(-1, 1, (4,), np.float32)
    action_space = gym.spaces.Discrete(2)

    def __init__(self, at: int) -> None:
        self.at, self.steps = at, 0

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        self.t = 0
        return self.np_random.uniform(-1, 1, 4).astype(np.float32), {}

    def step(self, action):
        self.steps, self.t = self.steps + 1, self.t + 1
        obs = self.np_random.uniform(-1, 1, 4).astype(np.float32)
        if self.steps >= self.at:
            obs[:] = np.nan
        return obs, 1.0, False, self.t >= 10, {}


class UserCartPole(CartPoleEnv):
    """CartPole from a module of the user's own: not one whose state a checkpoint holds."""


#: NaN in TransE's random-policy data (20 steps), or only in PPO's third rollout (16 steps each).
NAN_IN = {"transe": "xlvin-test/NaNAt5-v0", "ppo": "xlvin-test/NaNAt40-v0"}
USER_ENV = "xlvin-test/UserCartPole-v0"
gym.register(NAN_IN["transe"], entry_point=NaNObservations, kwargs={"at": 5})
gym.register(NAN_IN["ppo"], entry_point=NaNObservations, kwargs={"at": 40})
gym.register(USER_ENV, entry_point=UserCartPole, max_episode_steps=200)

#: XLVIN-R, tiny: 2 random episodes and 1 epoch of TransE, then 4 PPO updates.
XLVIN_R = ["--agent", "xlvin-r", "--hidden", "8", "--embedding-dim", "8", "--transe-episodes",
           "2", "--transe-epochs", "1"]


def xlvin_r(env: str, out: Path) -> list[str]:
    """`xlvin train` of XLVIN-R (the tiny flags of `tiny`, then XLVIN_R's) into `out`."""
    return ["train", *tiny(env), *XLVIN_R, "--out", str(out)]


def error_line(capsys: pytest.CaptureFixture) -> str:
    """The one error line after the pre-trainings' progress lines (no traceback)."""
    lines = capsys.readouterr().err.strip().splitlines()
    assert [line for line in lines if "error" in line or "Traceback" in line] == lines[-1:], lines
    assert lines[-1].startswith("xlvin: error: "), lines
    return lines[-1]


def non_finite(path: Path) -> list[str]:
    """The floating-point tensors of a weights or checkpoint file holding NaN or inf."""
    tensors, _ = load_weights(path, "checkpoint")
    return [n for n, t in tensors.items() if t.is_floating_point() and not t.isfinite().all()]


# ---------------------------------- F2: NaN stops TransE as it stops PPO; no NaN in a checkpoint

@pytest.mark.usefixtures("tiny_default_executors")
@pytest.mark.parametrize("where", NAN_IN)
def test_nan_observations_stop_xlvin_r_with_only_finite_checkpoints(
    where: str, tmp_path: Path, capsys
) -> None:
    """NaN in TransE's data: stopped there, its checkpoint (if any) finite, and the resume stops
    there again. NaN in PPO's third rollout: stopped there, the checkpoint the line names finite,
    and the resume continues from it (the env is made afresh: its NaN comes after the run)."""
    run = tmp_path / "run"
    capsys.readouterr()
    assert main(xlvin_r(NAN_IN[where], run)) == 2
    err = error_line(capsys)
    assert err.startswith(f"xlvin: error: non-finite {'TransE' if where == 'transe' else 'PPO'} "
                          "loss"), err
    files = [run / name for name in (CHECKPOINT, TRANSE_CHECKPOINT) if (run / name).exists()]
    assert all(non_finite(path) == [] for path in files)
    if where == "ppo":
        assert f"the last good checkpoint is kept in {run / CHECKPOINT}" in err
        assert main([*xlvin_r(NAN_IN[where], run), "--resume"]) == 0
        assert non_finite(run / MODEL) == []
        return
    before = snapshot(run)
    assert main([*xlvin_r(NAN_IN[where], run), "--resume"]) == 2
    assert error_line(capsys) == err
    assert snapshot(run) == before


def test_a_checkpoint_holding_nan_is_never_written(tmp_path: Path) -> None:
    policy = torch.nn.Linear(2, 2)
    optimizer = torch.optim.Adam(policy.parameters())
    checkpoint = Checkpointer(tmp_path / CHECKPOINT, 1)
    with pytest.raises(UserError, match="weight holds NaN or inf") as refused:
        with torch.no_grad():
            policy.weight[0, 0] = float("nan")
        checkpoint.save(policy, optimizer, torch.Generator(), {"log_step": 0})
    assert "kept" not in str(refused.value) and not checkpoint.exists()
    with torch.no_grad():
        policy.weight[0, 0] = 0.0
    checkpoint.save(policy, optimizer, torch.Generator(), {"log_step": 0})
    good = checkpoint.path.read_bytes()
    with pytest.raises(UserError, match="loop/obs holds NaN or inf.*last good checkpoint is kept"):
        checkpoint.save(policy, optimizer, torch.Generator(), {"log_step": 1},
                        {"obs": torch.tensor([float("inf")])})
    assert checkpoint.path.read_bytes() == good


# --------------------------------------------- Adam's state is checked as the weights are (F6)

#: The optimizer tensor damaged (the flat Adam's first moments, or its second), and how.
OPTIM_DAMAGE = [("optim/0/exp_avg", "nan"), ("optim/0/exp_avg_sq", "inf"),
                ("optim/0/exp_avg", "int32")]


@pytest.mark.parametrize("name, damage", OPTIM_DAMAGE)
def test_resume_refuses_a_checkpoint_whose_adam_state_is_damaged(
    name: str, damage: str, tmp_path: Path, capsys
) -> None:
    run = unfinished_run(tmp_path)
    resave(run / CHECKPOINT, name, damage, "checkpoint")
    before = snapshot(tmp_path)
    capsys.readouterr()
    assert main(["train", *tiny(), "--out", str(run), "--resume"]) == 2
    err = one_error_line(capsys)
    assert f"optimizer state in {run / CHECKPOINT}" in err and name in err, err
    assert DAMAGE[damage][1] in err, err
    assert snapshot(tmp_path) == before


def test_resume_refuses_an_adam_step_count_below_one(tmp_path: Path, capsys) -> None:
    from xlvin.io.weights import atomic_save_tensors

    run = unfinished_run(tmp_path)
    tensors, meta = load_weights(run / CHECKPOINT, "checkpoint")
    atomic_save_tensors(run / CHECKPOINT, {**tensors, "optim/0/step": torch.tensor(0.0)}, meta)
    before = snapshot(tmp_path)
    capsys.readouterr()
    assert main(["train", *tiny(), "--out", str(run), "--resume"]) == 2
    assert "optim/0/step is below 1" in one_error_line(capsys)
    assert snapshot(tmp_path) == before


# ------------------------------------------ F7: a checkpoint that is a link is refused, unread

def test_resume_refuses_a_checkpoint_that_links_outside_the_run(tmp_path: Path, capsys) -> None:
    run = unfinished_run(tmp_path)
    outside = tmp_path / "elsewhere.safetensors"
    shutil.move(run / CHECKPOINT, outside)
    (run / CHECKPOINT).symlink_to(outside)
    before = snapshot(tmp_path)
    capsys.readouterr()
    assert main(["train", *tiny(), "--out", str(run), "--resume"]) == 2
    assert f"{run / CHECKPOINT} is a symbolic link" in one_error_line(capsys)
    assert snapshot(tmp_path) == before and (run / CHECKPOINT).is_symlink()
    for read in (lambda p: Checkpointer(p, 1).exists(), read_loop_state):
        with pytest.raises(UserError, match="is a symbolic link"):
            read(run / CHECKPOINT)


@pytest.mark.usefixtures("tiny_default_executors")
def test_resume_refuses_a_transe_checkpoint_that_links_outside_the_run(
    tmp_path: Path, capsys
) -> None:
    """A run stopped after its TransE pre-training, before PPO's first checkpoint."""
    run = tmp_path / "run"
    assert main(xlvin_r("CartPole-v1", run)) == 0
    for name in (CHECKPOINT, MODEL, SUMMARY, METRICS):
        (run / name).unlink()
    outside = tmp_path / "elsewhere.safetensors"
    shutil.move(run / TRANSE_CHECKPOINT, outside)
    (run / TRANSE_CHECKPOINT).symlink_to(outside)
    before = snapshot(tmp_path)
    capsys.readouterr()
    assert main([*xlvin_r("CartPole-v1", run), "--resume"]) == 2
    assert f"{run / TRANSE_CHECKPOINT} is a symbolic link" in error_line(capsys)
    assert snapshot(tmp_path) == before


# -------------------------------------------- F8: the metrics a checkpoint continues must be there

def test_resume_refuses_a_checkpoint_whose_metrics_file_is_missing(tmp_path: Path,
                                                                   capsys) -> None:
    run = unfinished_run(tmp_path)
    (run / METRICS).unlink()
    before = snapshot(tmp_path)
    capsys.readouterr()
    assert main(["train", *tiny(), "--out", str(run), "--resume"]) == 2
    assert (f"{run / METRICS} is missing but the checkpoint was taken at step 64"
            in one_error_line(capsys))
    assert snapshot(tmp_path) == before


# ------------------------------- F4: an env whose state is not saved is said so, in one line

@pytest.mark.parametrize("env", [USER_ENV, "CartPole-v1"])
def test_a_resume_says_when_the_envs_state_cannot_be_restored(env: str, tmp_path: Path,
                                                              capsys) -> None:
    run = tmp_path / "run"
    assert main(["train", *tiny(env), "--total-steps", "32", "--out", str(run)]) == 0
    capsys.readouterr()
    assert main(["train", *tiny(env), "--out", str(run), "--resume"]) == 0  # on to 64 steps
    err = capsys.readouterr().err.strip()
    if env == "CartPole-v1":
        assert err == ""  # restored exactly
    else:
        assert len(err.splitlines()) == 1 and err.startswith(
            f"xlvin: warning: the state of {env} cannot be restored"), err
        assert "will not match an uninterrupted run" in err


def test_the_vae_analysis_refuses_a_checkpoint_linking_out_of_the_run(tmp_path: Path) -> None:
    """atari-vae reads a deadline-stopped cell's policy from its checkpoint: a link there is
    refused as on resume, never followed."""
    import json
    import os

    from xlvin.errors import UserError
    from xlvin.experiments import atari_vae

    (tmp_path / "outside").write_bytes(b"not a checkpoint")
    run = tmp_path / "run"
    run.mkdir()
    (run / "config.json").write_text(json.dumps(atari_vae.VAECell("Freeway", "ppo", 0).config().to_json()))
    os.symlink(tmp_path / "outside", run / "checkpoint.safetensors")
    with pytest.raises(UserError, match="is a symbolic link, not a regular file"):
        atari_vae.load_policy(run)
