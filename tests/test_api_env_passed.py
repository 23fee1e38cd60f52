"""The env a user passes to the API is the env that trains (issue 58): its time limit, its
wrappers, a vector env's own sub-envs (different ones, asynchronous ones, `make_vec`'s
wrappers), each lambda its own env, and the spaces the model records checked against it."""

import gymnasium as gym
import numpy as np
import pytest
import torch
from gymnasium.wrappers import ClipReward, TimeLimit
from safetensors.torch import load_file

import xlvin.ppo.loop as loop
from xlvin import PPO, UserError

TINY = {"num_envs": 1, "num_steps": 16, "update_epochs": 1}
ROLLOUT = 16


@pytest.fixture(autouse=True)
def _cache(monkeypatch: pytest.MonkeyPatch, tmp_path_factory: pytest.TempPathFactory) -> None:
    monkeypatch.setenv("XLVIN_CACHE", str(tmp_path_factory.mktemp("cache")))


@pytest.fixture
def trained(monkeypatch: pytest.MonkeyPatch) -> list[gym.vector.VectorEnv]:
    """The vector envs the training loop makes (the env that trains), as it makes them."""
    made: list[gym.vector.VectorEnv] = []
    make = loop.make_vector_env

    def spy(*args, **kwargs):
        envs = make(*args, **kwargs)
        made.append(envs)
        return envs

    monkeypatch.setattr(loop, "make_vector_env", spy)
    return made


def limits(envs: gym.vector.VectorEnv) -> list[int | None]:
    """The time limit each sub-env of `envs` stops at (the outermost TimeLimit's)."""
    out = []
    for sub in envs.unwrapped.envs:
        limit = None
        while sub is not None and limit is None:
            if isinstance(sub, TimeLimit):
                limit = sub._max_episode_steps
            sub = getattr(sub, "env", None)
        out.append(limit)
    return out


def wrapped_in(envs: gym.vector.VectorEnv, wrapper: type) -> list[bool]:
    found = []
    for sub in envs.unwrapped.envs:
        has = False
        while sub is not None:
            has = has or isinstance(sub, wrapper)
            sub = getattr(sub, "env", None)
        found.append(has)
    return found


def learn(env, tmp_path, **options) -> PPO:
    """One rollout of every env the model has (its own or the vector env's count)."""
    model = PPO(env, seed=0, **{**TINY, **options})
    ppo = model.config.ppo
    return model.learn(ppo.num_envs * ppo.num_steps, out=tmp_path / "run", progress=False)


@pytest.mark.parametrize("make", [
    lambda: gym.make("CartPole-v1", max_episode_steps=7),
    lambda: TimeLimit(gym.make("CartPole-v1"), 7),
], ids=["make-max_episode_steps", "TimeLimit"])
def test_a_time_limit_trains_with_the_env(make, trained, tmp_path) -> None:
    learn(make(), tmp_path, num_envs=2)
    assert limits(trained[0]) == [7, 7]


def test_the_instance_passed_is_the_first_sub_env_and_is_stepped(trained, tmp_path) -> None:
    class Counted(gym.Wrapper):
        steps = 0

        def step(self, action):
            self.steps += 1
            return super().step(action)

    env = Counted(ClipReward(gym.make("CartPole-v1"), 0.0, 0.5))
    learn(env, tmp_path)
    assert 0 < env.steps <= ROLLOUT  # the user's own instance trained (autoresets aside)
    assert wrapped_in(trained[0], ClipReward) == [True]


def test_a_plain_made_env_keeps_its_id_and_the_same_numbers(trained, tmp_path) -> None:
    by_instance = learn(gym.make("CartPole-v1"), tmp_path / "a")
    by_id = learn("CartPole-v1", tmp_path / "b")
    assert by_instance.config.train.env == "CartPole-v1"
    a, b = (load_file(tmp_path / d / "run/model.safetensors") for d in "ab")
    assert a.keys() == b.keys() and all(torch.equal(a[k], b[k]) for k in a)


def test_mixed_sub_envs_of_a_sync_vector_env_keep_their_own_limits(trained, tmp_path) -> None:
    vec = gym.vector.SyncVectorEnv([lambda: gym.make("CartPole-v1", max_episode_steps=5),
                                    lambda: gym.make("CartPole-v1")])
    model = learn(vec, tmp_path, num_envs=2)
    assert model.config.ppo.num_envs == 2
    assert limits(trained[0]) == [5, 500]


def test_an_async_vector_env_trains_in_workers(trained, tmp_path) -> None:
    vec = gym.vector.AsyncVectorEnv([lambda: gym.make("CartPole-v1", max_episode_steps=9)] * 2)
    vec.close()
    learn(vec, tmp_path, num_envs=2)
    assert isinstance(trained[0].unwrapped, gym.vector.AsyncVectorEnv)


def test_make_vec_wrappers_are_kept(trained, tmp_path) -> None:
    vec = gym.make_vec("CartPole-v1", 2, vectorization_mode="sync",
                       wrappers=[lambda e: ClipReward(e, 0.0, 0.5)])
    learn(vec, tmp_path, num_envs=2)
    assert wrapped_in(trained[0], ClipReward) == [True, True]


def test_a_plain_make_vec_keeps_its_id() -> None:
    cfg = PPO(gym.make_vec("CartPole-v1", 3)).config
    assert (cfg.train.env, cfg.ppo.num_envs) == ("CartPole-v1", 3)


def test_a_vector_wrapper_is_refused_in_one_line() -> None:
    vec = gym.wrappers.vector.RecordEpisodeStatistics(gym.make_vec("CartPole-v1", 2, "sync"))
    with pytest.raises(UserError, match="cannot re-make a vector wrapper") as err:
        PPO(vec)
    assert "\n" not in str(err.value)


def test_a_vector_entry_point_env_with_a_new_limit_is_refused_in_one_line() -> None:
    vec = gym.make_vec("CartPole-v1", 2, max_episode_steps=5)
    with pytest.raises(UserError, match="without env_fns"):
        PPO(vec)


def test_an_instance_that_cannot_be_copied_is_refused_in_one_line() -> None:
    class Uncopyable(gym.Wrapper):
        def __deepcopy__(self, memo):
            raise TypeError("holds a socket")

    with pytest.raises(UserError, match="cannot be copied .*holds a socket.*pass a function"):
        PPO(Uncopyable(gym.make("CartPole-v1")))


def test_two_lambdas_in_one_script_are_two_envs(trained, tmp_path) -> None:
    cart = PPO(lambda: gym.make("CartPole-v1"), seed=0, **TINY)
    acro = PPO(lambda: gym.make("Acrobot-v1"), seed=0, **TINY)
    assert cart.config.train.env != acro.config.train.env
    cart.learn(ROLLOUT, out=tmp_path / "run", progress=False)
    assert trained[0].single_observation_space.shape == (4,) == cart.spaces.obs_shape
    assert cart.policy is not None and acro.spaces.obs_shape == (6,)


def test_two_instances_of_one_class_are_two_envs() -> None:
    five = PPO(TimeLimit(gym.make("CartPole-v1"), 5))
    six = PPO(TimeLimit(gym.make("CartPole-v1"), 6))
    assert five.config.train.env != six.config.train.env
    assert limits(five.get_env()) == [5] * five.config.ppo.num_envs


def test_an_env_whose_spaces_changed_is_refused_before_training(tmp_path) -> None:
    model = PPO(lambda: gym.make("CartPole-v1"), seed=0, **TINY)
    gym.registry[model.config.train.env].entry_point = lambda: gym.make("Acrobot-v1")
    with pytest.raises(UserError, match=r"has observations \[6\].*the model reads \[4\]"):
        model.learn(ROLLOUT, out=tmp_path / "run", progress=False)
    assert not (tmp_path / "run").exists()


def test_env_wrappers_over_a_vector_env_of_own_sub_envs_is_refused() -> None:
    vec = gym.vector.SyncVectorEnv([lambda: gym.make("CartPole-v1", max_episode_steps=5),
                                    lambda: gym.make("CartPole-v1")])
    with pytest.raises(UserError, match="wrap them in its env_fns"):
        PPO(vec, env_wrappers=[ClipReward])


def test_observations_from_the_passed_env_are_what_trains(tmp_path) -> None:
    env = TimeLimit(gym.make("CartPole-v1"), 3)
    model = learn(env, tmp_path)
    assert np.isfinite(model.evaluate(episodes=2)["mean"])
    assert max(model.evaluate(episodes=2)["returns"]) <= 3
