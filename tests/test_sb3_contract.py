"""Stable-Baselines3's contract, tested the way its own documented examples use it (issue 73):
the README quickstart loop over `get_env()`, the save/load round trip, `BaseCallback`
subclasses, `EvalCallback`, `CheckpointCallback`, `StopTrainingOnRewardThreshold`,
`evaluate_policy` and PPO's hyperparameter names. Each call works as in SB3 with only the import
changed (`from xlvin import ...`), or is refused when it is made, in one line saying what to write
instead. Names are read from `xlvin` inside the tests, so that each fails on its own where the
name is missing."""


import gymnasium as gym
import numpy as np
import pytest

import xlvin
from xlvin import PPO, UserError

TINY = {"num_envs": 2, "num_steps": 16, "hidden": 16, "update_epochs": 1}
ROLLOUT = 32  # env steps per update under TINY


@pytest.fixture(autouse=True)
def _cache(monkeypatch: pytest.MonkeyPatch, tmp_path_factory: pytest.TempPathFactory) -> None:
    monkeypatch.setenv("XLVIN_CACHE", str(tmp_path_factory.mktemp("cache")))


def one_line(err: pytest.ExceptionInfo) -> str:
    message = str(err.value)
    assert "\n" not in message and isinstance(err.value, UserError)
    return message


# --- the README quickstart and the VecEnv API ----------------------------------------------

def test_the_readme_quickstart_loop_over_get_env() -> None:
    """`vec_env = model.get_env(); obs = vec_env.reset(); model.predict(obs); obs, rewards,
    dones, info = vec_env.step(action); vec_env.render()`: SB3's VecEnv, with autoreset in the
    step that ends an episode and the last observation in `info[i]["terminal_observation"]`."""
    env = gym.make("CartPole-v1", render_mode="rgb_array")
    model = PPO("MlpPolicy", env, verbose=0, seed=0, **TINY)
    model.learn(total_timesteps=ROLLOUT)

    vec_env = model.get_env()
    obs = vec_env.reset()
    assert isinstance(obs, np.ndarray) and obs.shape == (2, 4)
    assert vec_env.num_envs == 2 and vec_env.observation_space.shape == (4,)
    assert vec_env.action_space.n == 2
    ended = 0
    for i in range(200):
        action, _states = model.predict(obs, deterministic=True)
        obs, rewards, dones, info = vec_env.step(action)
        if i < 2:
            frame = vec_env.render()
            assert frame.shape == (800, 600, 3)  # the two envs' frames, one above the other
        assert rewards.dtype == np.float32 and rewards.shape == (2,) and dones.dtype == bool
        assert isinstance(info, list) and len(info) == 2 and _states is None
        for k in np.flatnonzero(dones):
            ended += 1
            last = info[k]["terminal_observation"]
            assert abs(last[0]) > 2.4 or abs(last[2]) > 12 * 2 * np.pi / 360  # CartPole's end
            assert np.all(np.abs(obs[k]) <= 0.05)  # the next episode's first observation
            assert info[k]["TimeLimit.truncated"] is False and info[k]["episode"]["l"] > 0
    assert ended > 0
    vec_env.close()
    env.close()


def test_vec_env_seed_options_and_reset_infos_are_sb3s() -> None:
    model = PPO("CartPole-v1", **TINY)
    vec_env = model.get_env()
    assert model.env is vec_env
    assert vec_env.seed(7) == [7, 8]
    obs = vec_env.reset()
    for k, seed in enumerate((7, 8)):
        np.testing.assert_array_equal(obs[k], gym.make("CartPole-v1").reset(seed=seed)[0])
    assert vec_env.reset_infos == [{}, {}]
    assert not np.array_equal(vec_env.reset(), obs)  # seeds are used once, as SB3's
    assert vec_env.get_attr("spec")[0].id == "CartPole-v1"
    assert vec_env.env_is_wrapped(gym.wrappers.TimeLimit) == [True, True]
    assert vec_env.unwrapped is vec_env and len(vec_env.envs) == 2  # as SB3's DummyVecEnv
    with pytest.warns(UserWarning, match="no render_mode"):
        assert vec_env.render() is None  # as SB3's: a warning, nothing drawn


def test_step_before_reset_is_one_line() -> None:
    vec_env = PPO("CartPole-v1", **TINY).get_env()
    with pytest.raises(UserError) as err:
        vec_env.step(np.zeros(2, dtype=np.int64))
    assert "obs = vec_env.reset()" in one_line(err)


# --- PPO's hyperparameter names ------------------------------------------------------------

def test_sb3_hyperparameters_are_taken_as_sb3_means_them() -> None:
    model = PPO("MlpPolicy", "CartPole-v1", n_steps=16, batch_size=8, n_epochs=3,
                gae_lambda=0.9, clip_range=0.1, clip_range_vf=None, normalize_advantage=False,
                ent_coef=0.02, max_grad_norm=0.7, target_kl=None, num_envs=2)
    ppo = model.config.ppo
    assert (ppo.num_steps, ppo.num_minibatches, ppo.minibatch_size) == (16, 4, 0)
    assert (ppo.update_epochs, ppo.gae_lambda, ppo.clip_coef) == (3, 0.9, 0.1)
    assert ppo.clip_reward == 10.0 and ppo.clip_value_loss is False and ppo.norm_adv is False
    assert (ppo.ent_coef, ppo.max_grad_norm, ppo.target_kl) == (0.02, 0.7, 0.0)
    # a vector env gives num_envs: batch_size divides n_steps x its size
    vec = PPO(gym.make_vec("CartPole-v1", 4), n_steps=8, batch_size=16).config.ppo
    assert (vec.num_envs, vec.num_steps, vec.num_minibatches) == (4, 8, 2)


@pytest.mark.parametrize("options, message", [
    ({"batch_size": 5, "n_steps": 16, "num_envs": 2}, "num_minibatches="),
    ({"batch_size": 8, "num_minibatches": 2}, "give one"),
    ({"clip_range_vf": 0.5}, "clip_value_loss="),
    ({"clip_range": lambda progress: 0.1}, "a schedule is not taken"),
    ({"target_kl": 0.01}, "protocol"),
    ({"n_steps": 16, "num_steps": 8}, "give one"),
])
def test_sb3_hyperparameters_refused_naming_ours(options, message) -> None:
    with pytest.raises(UserError) as err:
        PPO("CartPole-v1", **options)
    assert message in one_line(err) and "did you mean" not in str(err.value)


#: Every argument of SB3's PPO, but for the policy and the env.
SB3_PPO = {"learning_rate": 1e-3, "n_steps": 16, "batch_size": 8, "n_epochs": 2, "gamma": 0.98,
           "gae_lambda": 0.9, "clip_range": 0.1, "clip_range_vf": None,
           "normalize_advantage": True, "ent_coef": 0.0, "vf_coef": 0.5, "max_grad_norm": 0.5,
           "use_sde": False, "sde_sample_freq": -1, "rollout_buffer_class": None,
           "rollout_buffer_kwargs": None, "target_kl": None, "stats_window_size": 100,
           "tensorboard_log": "tb", "policy_kwargs": {}, "verbose": 0, "seed": 0,
           "device": "auto", "_init_setup_model": True}


@pytest.mark.parametrize("name", sorted(SB3_PPO))
def test_no_sb3_ppo_argument_gets_a_hint_to_another_option(name: str) -> None:
    try:
        PPO("CartPole-v1", **{name: SB3_PPO[name]})
    except UserError as err:
        assert "did you mean" not in str(err) and "\n" not in str(err)


@pytest.mark.parametrize("typo, right", [("clip_rang", "clip_range"), ("n_epoch", "n_epochs"),
                                         ("normalize_advantages", "normalize_advantage")])
def test_a_typo_of_an_sb3_name_is_told_its_sb3_name(typo: str, right: str) -> None:
    with pytest.raises(UserError, match=rf"did you mean {right}\?"):
        PPO("CartPole-v1", **{typo: 1})


# --- predict: bad input is one clear error --------------------------------------------------

class Rooms(gym.Env):
    """A Dict observation with a Discrete part."""

    observation_space = gym.spaces.Dict({"pos": gym.spaces.Box(-1, 1, (2,), np.float32),
                                         "room": gym.spaces.Discrete(3)})
    action_space = gym.spaces.Discrete(2)

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        return {"pos": np.zeros(2, np.float32), "room": 0}, {}

    def step(self, action):
        return {"pos": np.zeros(2, np.float32), "room": 1}, 1.0, True, False, {}


@pytest.mark.parametrize("kind, message", [
    ("reset tuple", "pass the observation alone"),
    ("string", "numbers"),
    ("strings", "numbers"),
])
def test_predict_refuses_what_is_not_an_observation(kind: str, message: str) -> None:
    model = PPO("CartPole-v1", **TINY)
    obs, info = gym.make("CartPole-v1").reset(seed=0)
    given = {"reset tuple": (obs, info), "string": "abc", "strings": ["a", "b", "c", "d"]}
    with pytest.raises(UserError) as err:
        model.predict(given[kind])
    assert message in one_line(err) and "[4]" in str(err.value)


def test_predict_refuses_a_discrete_value_out_of_its_range() -> None:
    rooms = PPO(Rooms, **TINY)
    ok = rooms.predict({"pos": np.zeros(2, np.float32), "room": 2})[0]
    assert int(ok) in (0, 1)
    with pytest.raises(UserError) as err:
        rooms.predict({"pos": np.zeros(2, np.float32), "room": 3})
    assert "room" in one_line(err) and "Discrete(3)" in str(err.value)
    lake = PPO("FrozenLake-v1", **TINY)
    with pytest.raises(UserError) as err:
        lake.predict(np.array([3, 16]))
    assert "Discrete(16)" in one_line(err)
    with pytest.raises(UserError) as err:
        lake.predict(1.5)
    assert "Discrete(16)" in one_line(err)
