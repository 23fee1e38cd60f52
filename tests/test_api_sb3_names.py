"""Stable-Baselines3's names and defaults in the API (issue 58): each accepted as SB3 means it,
or refused in one line with what to use."""

import json
from pathlib import Path

import gymnasium as gym
import numpy as np
import pytest
import torch

from xlvin import PPO, Callback, UserError

TINY = {"num_envs": 2, "num_steps": 16, "update_epochs": 1}
ROLLOUT = 32


@pytest.fixture(autouse=True)
def _cache(monkeypatch: pytest.MonkeyPatch, tmp_path_factory: pytest.TempPathFactory) -> None:
    monkeypatch.setenv("XLVIN_CACHE", str(tmp_path_factory.mktemp("cache")))


def test_sb3_constructor_names() -> None:
    model = PPO("MlpPolicy", "CartPole-v1", learning_rate=1e-3, verbose=0, device="auto")
    assert model.config.train.env == "CartPole-v1" and model.config.ppo.lr == 1e-3
    assert model.config.train.device == ("cuda" if torch.cuda.is_available() else "cpu")
    assert PPO("MlpPolicy", gym.make("CartPole-v1")).config.train.env == "CartPole-v1"


@pytest.mark.parametrize("options, message", [
    ({"tensorboard_log": "tb"}, "tensorboard_log= is not taken: TensorBoard is written into"),
    ({"policy_kwargs": {"net_arch": [64]}}, "policy_kwargs= is not taken: the network's settings"),
    ({"learning_rate": lambda f: f}, "a schedule is not taken"),
    ({"learnin_rate": 1e-3}, "did you mean"),
])
def test_sb3_constructor_names_refused_in_one_line(options, message) -> None:
    with pytest.raises(UserError, match=message) as err:
        PPO("CartPole-v1", **options)
    assert "\n" not in str(err.value)


def test_learn_total_timesteps_and_a_function_callback(tmp_path) -> None:
    seen = []

    def callback(locals_, globals_):
        seen.append(locals_["num_timesteps"])
        return len(seen) < 2

    model = PPO("CartPole-v1", seed=0, verbose=0, **TINY)
    model.learn(total_timesteps=4 * ROLLOUT, callback=callback)
    assert seen == [ROLLOUT, 2 * ROLLOUT] and model.summary["ppo"]["stopped_by_hooks"]
    model.learn(total_timesteps=ROLLOUT, reset_num_timesteps=False, progress_bar=False)
    with pytest.raises(UserError, match="reset_num_timesteps=True.*a new model trains"):
        model.learn(ROLLOUT, reset_num_timesteps=True)
    with pytest.raises(UserError, match=r"unknown argument 'total_timestep' \(did you mean"):
        model.learn(total_timestep=ROLLOUT)
    with pytest.raises(UserError, match="tb_log_name= is not taken"):
        model.learn(ROLLOUT, tb_log_name="x")


def test_parameters_env_and_spaces(tmp_path) -> None:
    model = PPO("CartPole-v1", seed=0, **TINY)
    params = model.get_parameters()
    other = PPO("CartPole-v1", seed=1, **TINY)
    other.set_parameters(params)
    obs = np.zeros((3, 4), np.float32)
    np.testing.assert_array_equal(other.predict_values(obs), model.predict_values(obs))
    partial = {"policy": dict(list(params["policy"].items())[:1])}
    with pytest.raises(UserError, match="exact_match=True"):
        other.set_parameters(partial)
    other.set_parameters(partial, exact_match=False)
    assert model.observation_space.shape == (4,) and model.action_space.n == 2
    model.set_env(gym.make_vec("CartPole-v1", 3))
    assert model.config.ppo.num_envs == 3 and model.get_env().num_envs == 3
    with pytest.raises(UserError, match="the model reads"):
        model.set_env(gym.make("Acrobot-v1"))
    model.learn(ROLLOUT * 3 // 2, out=tmp_path / "run", progress=False)
    loaded = PPO.load(tmp_path / "run", device="auto")
    loaded_env = PPO.load(tmp_path / "run", gym.make("CartPole-v1"), "cpu")
    assert loaded_env.num_timesteps == model.num_timesteps
    np.testing.assert_array_equal(loaded.predict(obs, deterministic=True)[0],
                                  model.predict(obs, deterministic=True)[0])
    with pytest.raises(UserError, match="unknown argument 'devise' \\(did you mean device"):
        PPO.load(tmp_path / "run", devise="cpu")


def test_model_logger_record_logs_a_callbacks_values_with_the_updates_metrics(
    tmp_path: Path,
) -> None:
    """SB3's `self.logger.record(key, value)` inside a callback: the value is in that update's
    row of metrics.jsonl (a value recorded in on_update goes with the next update's row), and a
    value that is not a finite number is one UserError."""

    class Records(Callback):
        def __init__(self) -> None:
            self.rollouts = 0

        def on_rollout(self, model) -> bool:
            self.rollouts += 1
            model.logger.record("custom/rollouts", self.rollouts)
            return True

    model = PPO("CartPole-v1", seed=0, num_envs=2, num_steps=16)
    model.learn(3 * 32, out=tmp_path / "run", progress=False, callback=Records())
    rows = [json.loads(line) for line in (tmp_path / "run" / "metrics.jsonl").read_text().splitlines()]
    assert [r["custom/rollouts"] for r in rows if "custom/rollouts" in r] == [1.0, 2.0, 3.0]
    with pytest.raises(UserError, match="a finite number"):
        model.logger.record("custom/x", float("nan"))
    with pytest.raises(UserError, match="a finite number"):
        model.logger.record("custom/x", "text")
    model.logger.record("custom/x", np.float32(2.5))
    assert model.logger.dump() == {"custom/x": 2.5}

