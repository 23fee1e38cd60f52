"""Every bound is checked before anything is built (issue: Reliability 5). F14: TransE epochs
that could never finish; F15: more torch threads than torch can start (a segfault); F16: spaces,
action bins and TransE data whose memory no machine has; F17: more evaluation episodes than an
array can hold; F18: `reproduce --results FILE` refused before any cell trains; F19: a minibatch
larger than the rollout (PPO would never step). Each is one `xlvin: error:` line (a UserError in
Python terms from the API) and leaves nothing in --out: no .lock, no config.json."""

import subprocess
import sys
from pathlib import Path

import gymnasium as gym
import numpy as np
import pytest
from test_faults import TINY, one_error_line, snapshot

from xlvin import Model
from xlvin.cli import main
from xlvin.errors import UserError
from xlvin.pretrain.transe import TransEConfig
from xlvin.run import architecture, checks, protocols
from xlvin.run.config import RunConfig, TrainConfig

def this_machine_has(monkeypatch: pytest.MonkeyPatch, memory: int) -> None:
    """The memory every bound measures against (the tree's, the model's, a round's)."""
    for module in (architecture, checks, protocols):
        monkeypatch.setattr(module, "machine_memory", lambda: memory)


#: A registered env of the observation and action spaces its kwargs give (obs_shape, box_dims).
BIG = "test-bounds/Spaces-v0"


class SpacesEnv(gym.Env):
    """Observations of `obs_shape` floats; Box actions of `box_dims` dimensions (0: Discrete(2))."""

    def __init__(self, obs_shape: tuple[int, ...] = (3,), box_dims: int = 0) -> None:
        self.observation_space = gym.spaces.Box(0, 1, tuple(obs_shape), np.float32)
        self.action_space = (gym.spaces.Box(-1, 1, (box_dims,), np.float32) if box_dims
                             else gym.spaces.Discrete(2))

    def reset(self, seed=None, options=None):
        super().reset(seed=seed)
        return np.zeros(self.observation_space.shape, np.float32), {}

    def step(self, action):
        return np.zeros(self.observation_space.shape, np.float32), 0.0, False, False, {}


if BIG not in gym.registry:
    gym.register(BIG, entry_point=SpacesEnv, max_episode_steps=10)


def refused(args: list[str], out: Path, capsys) -> str:
    """The one error line of `xlvin ARGS --out OUT`, which must leave OUT absent."""
    assert main([*args, "--out", str(out)]) == 2
    line = one_error_line(capsys)
    assert not out.exists(), sorted(p.name for p in out.iterdir())
    return line


def test_transe_epochs_that_could_never_finish_are_refused(tmp_path: Path, capsys) -> None:
    line = refused(["train", *TINY, "--agent", "xlvin-r", "--transe-epochs", "1000000000000"],
                   tmp_path / "out", capsys)
    assert "--transe-epochs 1000000000000 of TransE pre-training would take at least" in line
    assert "days" in line
    with pytest.raises(UserError, match="transe_epochs=1000000000000 of TransE"):
        Model(env="CartPole-v1", agent="xlvin-r", transe_epochs=10**12)
    # far above any real pre-training: 1,000 epochs pass
    checks.check_run(RunConfig(train=TrainConfig(agent="xlvin-r"),
                               transe=TransEConfig(epochs=1000)))


def test_too_many_torch_threads_are_refused_not_a_segfault(tmp_path: Path) -> None:
    out = tmp_path / "out"
    done = subprocess.run(
        [sys.executable, "-m", "xlvin.cli", "train", *TINY, "--torch-threads", "100000",
         "--out", str(out)], capture_output=True, text=True, timeout=300)
    assert (done.returncode, done.stderr) == (
        2, "xlvin: error: PPO config: torch_threads must be in [0, 1024]\n"), done.stderr[-2000:]
    assert not out.exists()


@pytest.mark.parametrize("case", ["10^7 observation floats", "10^9 bins on Pendulum",
                                  "10^6 bins on 1000 dimensions", "10^9 bins on Pendulum, ppo"])
def test_spaces_and_bins_that_cannot_fit_in_memory_are_refused_with_the_numbers(
    case: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys
) -> None:
    this_machine_has(monkeypatch, 64 * 2**30)
    args, words = {
        # TransE's random-policy data: at least 1,000 transitions of 10^7 floats, twice
        "10^7 observation floats": (["--env", BIG, "--env-kwargs", "obs_shape=[1,10000000]"],
                                    "TransE's data of at least 1,000 transitions"),
        "10^9 bins on Pendulum": (["--env", "Pendulum-v1", "--action-bins", "1000000000"],
                                  "--action-bins 1000000000 x 1 dimensions = 1,000,000,000 "
                                  "action outputs"),
        "10^6 bins on 1000 dimensions": (
            ["--env", BIG, "--env-kwargs", "box_dims=1000", "--action-bins", "1000000"],
            "--action-bins 1000000 x 1000 dimensions = 1,000,000,000 action outputs"),
        "10^9 bins on Pendulum, ppo": (
            ["--env", "Pendulum-v1", "--agent", "ppo", "--action-bins", "1000000000"],
            "--action-bins 1000000000 x 1 dimensions = 1,000,000,000 action outputs"),
    }[case]
    line = refused(["train", "--quiet", *args], tmp_path / "out", capsys)
    assert words in line and "need about" in line and "this machine has 64 GiB" in line, line


def test_a_million_bins_on_pendulum_is_refused_before_transe_pretraining(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys
) -> None:
    # the tree's sampled nodes each read one-hots of 10^6 inputs: about 112 GiB
    this_machine_has(monkeypatch, 64 * 2**30)
    line = refused(["train", "--env", "Pendulum-v1", "--action-bins", "1000000", "--quiet"],
                   tmp_path / "out", capsys)
    assert "--action-bins 1000000 x 1 dimensions = 1,000,000 action outputs" in line
    with pytest.raises(UserError, match="action_bins=1000000 x 1 dimensions"):
        Model(env="Pendulum-v1", agent="xlvin", action_bins=10**6)


@pytest.mark.parametrize("env, bins, said", [
    ("6-D Box", "1000", "--action-bins 1000 x 6 dimensions = 6,000 action outputs (1000 bins ^ 6 "
                        "dimensions = about 10^18 joint actions): more than the 4,096"),
    ("Pendulum-v1", "1000000", "--action-bins 1000000 x 1 dimensions = 1,000,000 action outputs "
                               "(1000000 bins ^ 1 dimensions = 1000000 joint actions)"),
])
def test_bins_of_too_many_actions_are_refused_before_anything_is_built(
    env: str, bins: str, said: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys
) -> None:
    """Issue 58: 1,000 bins on a 6-D Box (10^18 joint actions) and 10^6 bins on Pendulum fit in
    a big machine's memory, and were accepted, to run TransE pre-training for hours; they are
    refused in one line with the numbers, on the command line and in Python."""
    this_machine_has(monkeypatch, 2**50)  # memory is not what refuses them
    where = ["--env", BIG, "--env-kwargs", "box_dims=6"] if env == "6-D Box" else ["--env", env]
    line = refused(["train", "--quiet", *where, "--action-bins", bins], tmp_path / "out", capsys)
    assert said in line and line.endswith("a run may have; choose fewer bins"), line
    kwargs = {"env_kwargs": {"box_dims": 6}} if env == "6-D Box" else {}
    with pytest.raises(UserError, match=f"action_bins={bins} x "):
        Model(env=BIG if env == "6-D Box" else env, agent="xlvin", action_bins=int(bins), **kwargs)
    assert Model(env=BIG, agent="xlvin", action_bins=100, env_kwargs={"box_dims": 6})  # 600


@pytest.fixture(scope="module")
def finished(tmp_path_factory: pytest.TempPathFactory) -> Path:
    run = tmp_path_factory.mktemp("bounds") / "run"
    assert main(["train", *TINY, "--out", str(run)]) == 0
    return run


@pytest.mark.parametrize("episodes", ["99999999999999999999", "1000000000000", "1000001"])
def test_more_evaluation_episodes_than_the_bound_is_one_line(
    episodes: str, finished: Path, capsys
) -> None:
    before = snapshot(finished)
    capsys.readouterr()
    assert main(["evaluate", str(finished), "--episodes", episodes]) == 2
    assert f"--episodes must be at most 1,000,000, got {int(episodes):,}" in one_error_line(capsys)
    assert snapshot(finished) == before


@pytest.mark.parametrize("flag", ["--results", "--runs"])
def test_reproduce_refuses_a_file_as_its_folders_before_any_cell_trains(
    flag: str, tmp_path: Path, capsys
) -> None:
    afile = tmp_path / "afile"
    afile.write_text("mine")
    folders = {"--runs": str(tmp_path / "runs"), "--results": str(tmp_path / "results"),
               flag: str(afile)}
    for where in (afile, afile / "sub"):
        folders[flag] = str(where)
        assert main(["reproduce", "classic", "--protocol", "paper", "--envs", "CartPole-v0",
                     "--agents", "ppo", "--seeds", "1", "--runs", folders["--runs"],
                     "--results", folders["--results"]]) == 2
        assert f"{flag} {where}: {afile} is a file, not a folder" in one_error_line(capsys)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["afile"]
    assert afile.read_text() == "mine"


def test_a_minibatch_larger_than_the_rollout_is_refused(tmp_path: Path, capsys) -> None:
    line = refused(["train", *TINY, "--minibatch-size", "1000000000"], tmp_path / "out", capsys)
    assert ("--minibatch-size 1000000000 is larger than the rollout, --num-envs 1 x --num-steps "
            "16 = 16 transitions") in line
    with pytest.raises(UserError, match="minibatch_size=1000000000 is larger than the rollout, "
                                        "num_envs=4 x num_steps=128 = 512"):
        Model(env="CartPole-v1", agent="ppo", minibatch_size=10**9)
    Model(env="CartPole-v1", agent="ppo", minibatch_size=512)  # a whole rollout is one minibatch


def test_an_existing_empty_out_is_left_empty_after_a_refusal(tmp_path: Path, capsys) -> None:
    out = tmp_path / "out"
    out.mkdir()
    for bad in (["--minibatch-size", "17"], ["--agent", "xlvin-r", "--transe-epochs", "10**12"],
                ["--torch-threads", "1025"]):
        bad = [b.replace("10**12", str(10**12)) for b in bad]
        assert main(["train", *TINY, *bad, "--out", str(out)]) == 2
        one_error_line(capsys)
        assert list(out.iterdir()) == []
