"""CartPole and Acrobot stepped on arrays (xlvin.accel.classic_control) equal gymnasium's own envs,
bit for bit."""

import gymnasium as gym
import numpy as np
import pytest
import torch

from xlvin.accel import classic_control
from xlvin.accel.classic_control import AcrobotSteps, CartPoleSteps
from xlvin.nn.baselines.ppo import PPOAgent
from xlvin.nn.encoders import MLPEncoder
from xlvin.ppo import evaluation
from xlvin.ppo.evaluation import EnvSteps, Evaluator, make_steps


def _envs(n: int, env_id: str = "Acrobot-v1") -> list[gym.Env]:
    return [gym.make(env_id) for _ in range(n)]


def compare_trajectories(fast, slow, n: int, steps: int, act, seed: int) -> tuple[int, int]:
    """Step `fast` and `slow` (n envs each) side by side for `steps` steps, each env taking part
    9 times in 10, with actions `act(obs [m, d], js, rng)`; episodes restart from fresh seeds
    when they end. Every observation, reward and flag must be equal, dtype included. Returns
    the number of (terminations, truncations)."""
    rng = np.random.default_rng(seed)
    obs = np.stack([fast.reset(j, j) for j in range(n)])
    np.testing.assert_array_equal(obs, np.stack([slow.reset(j, j) for j in range(n)]))
    terminations = truncations = 0
    for t in range(steps):
        js = np.flatnonzero(rng.random(n) < 0.9).tolist()
        actions = act(obs[js], np.array(js), rng)
        got, want = fast.step(js, actions), slow.step(js, actions)
        for g, w in zip(got, want, strict=True):
            assert g.dtype == w.dtype
            np.testing.assert_array_equal(g, w)
        obs[js] = got[0]
        terminations += int(got[2].sum())
        truncations += int(got[3].sum())
        for i, j in enumerate(js):
            if got[2][i] or got[3][i]:
                obs[j] = fast.reset(j, 1000 + t * n + j)
                np.testing.assert_array_equal(obs[j], slow.reset(j, 1000 + t * n + j))
    return terminations, truncations


def test_acrobot_trajectories_are_gymnasiums_bit_for_bit():
    """24 episodes: half the envs pump energy (torque along the second joint's velocity) so
    that episodes swing over the bar; the others act at random and run into the time limit
    (500 steps)."""
    def act(obs, js, rng):
        return np.where(js % 2 == 0, np.where(obs[:, 5] > 0, 2, 0), rng.integers(0, 3, len(js)))

    ends = compare_trajectories(AcrobotSteps(_envs(24)), EnvSteps(_envs(24)), 24, 650, act, 0)
    assert ends[0] >= 20 and ends[1] >= 5


@pytest.mark.parametrize("env_id", ["CartPole-v0", "CartPole-v1"])
def test_cartpole_trajectories_are_gymnasiums_bit_for_bit(env_id):
    """16 episodes: random actions for half the envs and a balancing rule (push toward the
    pole's lean) for the others, so that both falls and time limits happen."""
    def act(obs, js, rng):
        balance = (obs[:, 2] + 0.5 * obs[:, 3] > 0).astype(int)
        return np.where(js % 2 == 0, balance, rng.integers(0, 2, len(js)))

    fast, slow = CartPoleSteps(_envs(16, env_id)), EnvSteps(_envs(16, env_id))
    ends = compare_trajectories(fast, slow, 16, 700, act, 1)
    assert ends[0] >= 50 and ends[1] >= 5


def test_square_is_c_pow_not_x_times_x():
    """Where C's pow(x, 2) and x * x round differently, the array code follows gymnasium's pow."""
    x = np.random.default_rng(5).uniform(-30, 30, 200_000)
    scalar = np.array([v**2 for v in x])  # what gymnasium's scalar code computes
    assert (x * x != scalar).any()
    np.testing.assert_array_equal(classic_control._square(x), scalar)


def test_only_unchanged_envs_are_accelerated():
    assert isinstance(make_steps(_envs(2), accelerate=True), AcrobotSteps)
    assert isinstance(make_steps(_envs(2, "CartPole-v0"), accelerate=True), CartPoleSteps)
    assert isinstance(make_steps(_envs(2), accelerate=False), EnvSteps)
    assert isinstance(make_steps([gym.make("MountainCar-v0")], accelerate=True), EnvSteps)
    assert isinstance(make_steps([*_envs(1), *_envs(1, "CartPole-v1")], accelerate=True), EnvSteps)
    assert isinstance(make_steps([gym.make("CartPole-v1", sutton_barto_reward=True)],
                                 accelerate=True), EnvSteps)
    assert isinstance(make_steps([gym.make("Acrobot-v1").unwrapped], accelerate=True), EnvSteps)
    rescaled = gym.wrappers.TransformReward(gym.make("Acrobot-v1"), lambda r: 2 * r)
    assert isinstance(make_steps([rescaled], accelerate=True), EnvSteps)
    nips = gym.make("Acrobot-v1")
    nips.unwrapped.book_or_nips = "nips"
    assert isinstance(make_steps([nips], accelerate=True), EnvSteps)


@pytest.mark.parametrize("deterministic", [True, False])
@pytest.mark.parametrize(("env_id", "obs_dim", "actions"), [("Acrobot-v1", 6, 3),
                                                            ("CartPole-v0", 4, 2)])
def test_evaluation_returns_do_not_depend_on_the_route(monkeypatch, deterministic, env_id,
                                                       obs_dim, actions):
    """A policy evaluated: the same returns and lengths through either route (the actor fixed
    to the readable one, so only the env stepping differs)."""
    torch.manual_seed(0)
    policy = PPOAgent(MLPEncoder(obs_dim, 16, 16), 16, actions)
    readable_actor = evaluation.make_actor
    monkeypatch.setattr(evaluation, "make_actor", lambda p, accelerate: readable_actor(p, False))
    evaluator = Evaluator(env_id, 4)
    fast = evaluator(policy, 6, seed=3, deterministic=deterministic, accelerate=True)
    slow = evaluator(policy, 6, seed=3, deterministic=deterministic, accelerate=False)
    evaluator.close()
    assert fast == slow


def test_cartpole_vector_envs_stepped_on_arrays_are_gymnasiums_bit_for_bit():
    """Three training vector envs of 4 CartPoles (a time limit of 30 steps, so that episodes
    also truncate) stepped by `CartPoleVectors` and by gymnasium side by side: the same steps,
    the same episode statistics, and afterwards the same env objects (`env_state`), which then
    step on in gymnasium as the others do. A balancing rule and random actions."""
    from xlvin.accel.classic_control import CartPoleVectors
    from xlvin.envs.env_state import env_state
    from xlvin.ppo.collect import make_vector_env, reset_envs

    def vectors() -> list:
        made = [make_vector_env("CartPole-v1", 4, env_kwargs={"max_episode_steps": 30})
                for _ in range(3)]
        for s, vector in enumerate(made):
            reset_envs(vector, 10 * s)
        return made

    fast, slow = vectors(), vectors()
    assert CartPoleVectors.supports(fast)
    stepper = CartPoleVectors(fast)
    rng = np.random.default_rng(0)
    obs = np.concatenate([v.env._observations for v in slow])
    ends = np.zeros(2, int)
    for t in range(300):
        actions = np.where(rng.random(12) < 0.5, (obs[:, 2] > 0).astype(int),
                           rng.integers(0, 2, 12))
        got = stepper.step(actions)
        want = [v.step(actions[4 * s : 4 * s + 4]) for s, v in enumerate(slow)]
        for k in range(4):
            value = np.concatenate([w[k] for w in want])
            assert got[k].dtype == value.dtype
            np.testing.assert_array_equal(got[k], value)
        for s, v in enumerate(slow):
            np.testing.assert_array_equal(stepper.returns[4 * s : 4 * s + 4], v.episode_returns)
        obs = got[0].copy()
        ends += got[2].sum(), got[3].sum()
        if t == 150:
            stepper.store()
            assert [env_state(v) for v in fast] == [env_state(v) for v in slow]
            for f in fast:  # the objects step on in gymnasium: then loaded again
                f.step(np.zeros(4, int))
            for v in slow:
                v.step(np.zeros(4, int))
            obs = np.concatenate([v.env._observations for v in slow])
            stepper.load()
    stepper.store()
    assert [env_state(v) for v in fast] == [env_state(v) for v in slow]
    assert ends[0] > 20 and ends[1] > 5
