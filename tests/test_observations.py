"""Observations beyond one array: Dict observations (a CNN per image part, one MLP for vectors and
Discrete values, text dropped with a notice), images under 36x36 (the small CNN), and a user's
wrappers (`--env-wrapper module:Class`, `env_wrappers=[...]`)."""

import json
import sys
import warnings
from pathlib import Path

import gymnasium as gym
import numpy as np
import pytest
import torch

from xlvin import PPO, Model
from xlvin.cli import main
from xlvin.errors import UserError
from xlvin.nn.encoders import DictEncoder, NatureCNN, SmallCNN
from xlvin.run.agents import image_encoder
from xlvin.run.config import RunConfig, TrainConfig
from xlvin.run.architecture import agent_of
from xlvin.envs.spaces import (
    Part,
    classify,
    flatten_parts,
    spaces_from_json,
    spaces_to_json,
)


class DictEnv(gym.Env):
    """MiniGrid's shape in small: a uint8 image [4, 4, 2] (channels last) lit in one channel, a
    Discrete flag and a text mission. The reward is 1 when the action is the lit channel XOR
    the flag (it needs both parts); episodes of 8 steps."""

    observation_space = gym.spaces.Dict({
        "flag": gym.spaces.Discrete(2),
        "image": gym.spaces.Box(0, 255, (4, 4, 2), np.uint8),
        "mission": gym.spaces.Text(20),
    })
    action_space = gym.spaces.Discrete(2)

    def _obs(self) -> dict:
        self.lit, self.flag = (int(x) for x in self.np_random.integers(0, 2, size=2))
        image = np.zeros((4, 4, 2), np.uint8)
        image[..., self.lit] = 255
        return {"flag": self.flag, "image": image, "mission": "light"}

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        self.t = 0
        return self._obs(), {}

    def step(self, action):
        reward = float(action == self.lit ^ self.flag)
        self.t += 1
        return self._obs(), reward, False, self.t >= 8, {}


DICT_ID = "XlvinTest/Dict-v0"
if DICT_ID not in gym.registry:
    gym.register(DICT_ID, entry_point=DictEnv)


class Tail(gym.ObservationWrapper):
    """CartPole's observation cut to its last two numbers (pole angle and angular velocity)."""

    def __init__(self, env: gym.Env) -> None:
        super().__init__(env)
        self.observation_space = gym.spaces.Box(-np.inf, np.inf, (2,), np.float32)

    def observation(self, observation: np.ndarray) -> np.ndarray:
        return observation[2:].astype(np.float32)


def test_a_dict_is_read_part_by_part_and_its_text_dropped_with_one_notice() -> None:
    with pytest.warns(UserWarning, match=r"text part of its observations \(mission\) is dropped"):
        spaces = classify("dict-test", DictEnv.observation_space, gym.spaces.Discrete(2))
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # once a process
        assert classify("dict-test", DictEnv.observation_space, gym.spaces.Discrete(2)) == spaces
    assert spaces.kind == "dict" and spaces.obs_shape == (33,)
    assert spaces.parts == (Part("flag", "discrete", (), 2), Part("image", "image_hwc", (4, 4, 2)))
    assert spaces_from_json(json.loads(json.dumps(spaces_to_json(spaces))), "f") == spaces
    image = np.arange(32, dtype=np.uint8).reshape(4, 4, 2)
    flat = flatten_parts(spaces.parts, {"flag": 1, "image": image, "mission": "x"})
    np.testing.assert_array_equal(flat, np.concatenate([[1.0], image.ravel()]).astype(np.float32))
    batch = flatten_parts(spaces.parts, {"flag": np.array([0, 1]), "image": np.stack([image] * 2)})
    assert batch.shape == (2, 33) and batch[1, 0] == 1 and (batch[0, 1:] == image.ravel()).all()


@pytest.mark.parametrize("data", [
    {"obs_shape": [33], "kind": "dict", "num_actions": 2, "states": 0},  # no parts
    {"obs_shape": [5], "kind": "dict", "num_actions": 2, "states": 0,
     "parts": [{"key": "a", "kind": "image", "shape": [2, 2], "states": 0}]},
    {"obs_shape": [4], "kind": "flat", "num_actions": 2, "states": 0, "parts": []},
])
def test_stored_dict_spaces_are_checked(data: dict) -> None:
    with pytest.raises(UserError):
        spaces_from_json(data, "f")


def test_nested_and_unreadable_dicts_are_one_clear_error() -> None:
    nested = gym.spaces.Dict({"a": gym.spaces.Dict({"b": gym.spaces.Discrete(2)})})
    with pytest.raises(UserError, match="nested Dict"):
        classify("n", nested, gym.spaces.Discrete(2))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        with pytest.raises(UserError, match="no image, vector or discrete part"):
            classify("t", gym.spaces.Dict({"m": gym.spaces.Text(5)}), gym.spaces.Discrete(2))


@pytest.mark.parametrize(("shape", "cnn", "cells"), [
    ((7, 7, 3), SmallCNN, 16), ((2, 8, 8), SmallCNN, 25), ((3, 35, 35), SmallCNN, 64),
    ((3, 36, 36), NatureCNN, None),
])
def test_images_under_36x36_get_the_small_cnn(shape: tuple, cnn: type, cells: int | None) -> None:
    kind = "image_hwc" if shape[2] < shape[0] else "image"
    encoder = image_encoder(kind, shape, 32, 10.0)
    inner = encoder[1] if kind == "image_hwc" else encoder
    assert type(inner) is cnn
    if cells is not None:  # 3 convolutions 2x2 take 3 cells a side; at most 8x8 kept
        assert inner.linear.in_features == 64 * cells
    out = encoder(torch.randint(0, 256, (5, *shape), dtype=torch.uint8))
    assert out.shape == (5, 32) and torch.isfinite(out).all()


def test_the_dict_encoder_reads_images_by_cnn_and_discrete_parts_one_hot() -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        spaces = classify("d", DictEnv.observation_space, gym.spaces.Discrete(2))
    policy = agent_of(RunConfig(train=TrainConfig(agent="ppo")), spaces)
    encoder = policy.encoder
    assert isinstance(encoder, DictEncoder) and encoder.embedding_dim == 128
    obs = torch.cat([torch.tensor([[0.0], [1.0]]), torch.randint(0, 256, (2, 32)).float()], 1)
    cnn, mlp = encoder.images["1"], encoder.vectors
    expected = encoder.mix(torch.cat([cnn(obs[:, 1:]), mlp(torch.eye(2))], 1))
    torch.testing.assert_close(encoder(obs), expected)
    assert isinstance(cnn[1][1], SmallCNN) and mlp.net[0].in_features == 2


def test_a_dict_env_learns_and_predict_takes_its_dicts(tmp_path: Path) -> None:
    """PPO learns the toy Dict env, which needs the image and the Discrete part together (a
    random policy's return is 4 of 8), from its id with no wrapper; `predict` takes the env's
    dicts, and the saved model reads them back the same way."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        model = PPO(DICT_ID, seed=0, num_envs=4, num_steps=32, lr=2e-3, anneal_lr=False)
        model.learn(3072, progress=False)
    result = model.evaluate(episodes=10)
    assert result["mean"] >= 7.5, result["returns"]  # greedy and right: 8
    env = DictEnv()
    obs, _ = env.reset(seed=3)
    action, _ = model.predict(obs, deterministic=True)
    assert action == env.lit ^ env.flag
    batch = {"flag": np.array([0, 1]), "image": np.stack([obs["image"]] * 2)}
    model.save(tmp_path / "m")
    loaded = Model.load(tmp_path / "m")
    np.testing.assert_array_equal(loaded.predict(batch, deterministic=True)[0],
                                  model.predict(batch, deterministic=True)[0])
    assert loaded.predict(batch, deterministic=True)[0].tolist() == [env.lit, 1 - env.lit]
    with pytest.raises(UserError, match="reads Dict observations with parts flag, image"):
        loaded.predict(obs["image"])


def test_env_wrappers_are_recorded_applied_and_asked_for(tmp_path: Path,
                                                         monkeypatch: pytest.MonkeyPatch,
                                                         capsys: pytest.CaptureFixture) -> None:
    """`--env-wrapper module:Class` wraps the env of training and evaluation (the agent reads
    the wrapper's observations), is recorded in the run, and `xlvin evaluate` asks for it
    rather than importing what the run names."""
    (tmp_path / "xlvin_test_tail.py").write_text(
        "from test_observations import Tail\n", encoding="utf-8")
    monkeypatch.chdir(tmp_path)  # modules are imported from the current directory too
    monkeypatch.delitem(sys.modules, "xlvin_test_tail", raising=False)
    run = tmp_path / "run"
    code = main(["train", "--env", "CartPole-v1", "--agent", "ppo", "--env-wrapper",
                 "xlvin_test_tail:Tail", "--num-envs", "2", "--num-steps", "16",
                 "--total-steps", "64", "--quiet", "--out", str(run)])
    assert code == 0, capsys.readouterr().err
    assert json.loads((run / "config.json").read_text())["train"]["env_wrappers"] == [
        "xlvin_test_tail:Tail"]
    model = Model.load(run)
    assert model.spaces.obs_shape == (2,) and model.env.observation_space.shape == (2,)
    monkeypatch.delitem(sys.modules, "xlvin_test_tail")  # as in a new process
    capsys.readouterr()
    assert main(["evaluate", str(run), "--episodes", "2"]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "pass --env-wrapper xlvin_test_tail:Tail" in err
    assert main(["evaluate", str(run), "--episodes", "2", "--env-wrapper",
                 "xlvin_test_tail:Tail", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["episodes"] == 2


def test_env_wrappers_in_python_are_recorded_by_module_and_name() -> None:
    model = PPO("CartPole-v1", env_wrappers=[Tail], num_envs=2)
    assert model.config.train.env_wrappers == [f"{Tail.__module__}:Tail"]
    assert model.spaces.obs_shape == (2,)
    assert model.get_env().reset().shape == (2, 2)

    class Local(gym.Wrapper):
        pass

    with pytest.raises(UserError, match="not a class or function defined at the top level"):
        PPO("CartPole-v1", env_wrappers=[Local])
    with pytest.raises(UserError, match=r"^--env-wrapper|^env_wrappers"):
        PPO("CartPole-v1", env_wrappers=["no-colon"])


@pytest.mark.parametrize(("spec", "message"), [
    ("tail", "expected module:Class"),
    ("xlvin_no_such_module:Tail", "cannot import xlvin_no_such_module"),
    ("json:NoSuchWrapper", "module json has no class or function NoSuchWrapper"),
])
def test_a_bad_env_wrapper_is_one_line_before_anything_is_made(
    spec: str, message: str, tmp_path: Path, capsys: pytest.CaptureFixture
) -> None:
    code = main(["train", "--env", "CartPole-v1", "--env-wrapper", spec, "--out",
                 str(tmp_path / "r")])
    err = capsys.readouterr().err.strip()
    assert code == 2 and len(err.splitlines()) == 1 and message in err, err
    assert not (tmp_path / "r").exists()


def test_a_wrapper_that_fails_is_named_in_one_line() -> None:
    with pytest.raises(UserError, match="ResizeObservation failed on CartPole-v1: .* 'shape'"):
        PPO("CartPole-v1", env_wrappers=["gymnasium.wrappers:ResizeObservation"])



def test_small_images_are_divided_by_ten_and_older_runs_read_as_they_trained(
        tmp_path: Path) -> None:
    """The small CNN divides by `small_image_divisor` (10: MiniGrid's indices run to 10); a run
    saved before the option existed divided by 255, and loads so."""
    cnn = image_encoder("image", (2, 8, 8), 32, 10.0)
    twice = image_encoder("image", (2, 8, 8), 32, 20.0)
    twice.load_state_dict(cnn.state_dict())
    obs = torch.randint(0, 11, (4, 2, 8, 8), dtype=torch.uint8)
    torch.testing.assert_close(twice(2 * obs), cnn(obs))
    assert TrainConfig().small_image_divisor == 10.0
    saved = RunConfig().to_json()
    assert saved["train"]["small_image_divisor"] == 10.0  # always written
    del saved["train"]["small_image_divisor"]
    assert RunConfig.from_saved(saved, "old run").train.small_image_divisor == 255.0
    assert RunConfig.from_json(saved, "a config file").train.small_image_divisor == 10.0


@pytest.mark.slow
def test_minigrid_doorkey_beats_a_random_policy() -> None:
    """DoorKey-5x5 from its id, no wrapper: 81,920 steps of PPO (16 envs, lr 1e-3) take the
    greedy success from a random policy's 3 % (the same 50 episodes) to over 50 %."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        model = PPO("MiniGrid-DoorKey-5x5-v0", seed=1, num_envs=16, lr=1e-3)
        model.learn(81_920, progress=False)
        trained = model.evaluate(episodes=50, seed=10_000)["mean"]
    env = gym.make("MiniGrid-DoorKey-5x5-v0")
    rng = np.random.default_rng(0)
    returns = []
    for i in range(50):
        env.reset(seed=10_000 + i)
        total, done = 0.0, False
        while not done:
            _, reward, terminated, truncated, _ = env.step(int(rng.integers(7)))
            total, done = total + reward, terminated or truncated
        returns.append(total)
    assert np.mean(returns) < 0.1 and trained > 0.5, (np.mean(returns), trained)


def test_minigrid_trains_from_its_id_with_no_wrapper() -> None:
    """MiniGrid's own env, its Dict of image, direction and mission as the env gives it: the
    7x7 view through the small CNN, the direction one-hot, the mission dropped; trained,
    evaluated and asked for actions on its own observations, with no wrapper."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        model = PPO("MiniGrid-DoorKey-5x5-v0", seed=0, num_envs=2, num_steps=16)
    assert [(p.key, p.kind, p.shape) for p in model.spaces.parts] == [
        ("direction", "discrete", ()), ("image", "image_hwc", (7, 7, 3))]
    model.learn(64, progress=False)
    assert model.num_timesteps == 64
    result = model.evaluate(episodes=2)
    assert len(result["lengths"]) == 2 and all(0 < n <= 250 for n in result["lengths"])
    env = gym.make("MiniGrid-DoorKey-5x5-v0")
    obs, _ = env.reset(seed=0)
    action, _ = model.predict(obs, deterministic=True)
    assert 0 <= int(action) < 7
