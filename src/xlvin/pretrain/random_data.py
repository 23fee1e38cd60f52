"""Transitions of a uniform random policy, the TransE pre-training data (paper appendix B)."""

import math
from typing import Any

import gymnasium as gym
import numpy as np
import torch

from xlvin.accel.numpy_sampling import env_actions
from xlvin.envs.failures import PASSED_ON, EnvFailed, env_failed, observation_problem
from xlvin.nn.distributions import BinnedCategorical
from xlvin.nn.policy import TransitionBatch
from xlvin.progress import Progress
from xlvin.envs.spaces import read_observations


def random_transitions(
    env_id: str, episodes: int, seed: int, max_transitions: int | None = None,
    env_kwargs: dict[str, Any] | None = None, progress: bool = False, position: int = 0,
    action_bins: int = 0,
) -> TransitionBatch:
    """Run up to `episodes` episodes with uniformly random actions in `gym.make(env_id,
    **env_kwargs)` (as the agent reads it: `read_observations`) and return every (s, a, s'),
    stopping early once `max_transitions` pairs are collected (every pair stays a real step).
    `progress` shows the episodes (`xlvin.progress`, on line `position`), their number
    re-estimated after each one when `max_transitions` will end the collection first.

    The environment is reset by hand between episodes, so a terminal step is paired with its
    true final observation and never with the next episode's reset observation (the autoreset
    bug of public TransE code). Episode i is reset with seed `seed + i`.

    `action_bins` B > 0 (Box actions binned per dimension): the actions are bins drawn uniformly
    per dimension, [d] each, and the env receives their centres (`BinnedCategorical`).
    An env that fails (`xlvin.envs.failures`) is one `EnvFailed`.
    """
    env = read_observations(gym.make(env_id, **(env_kwargs or {})))
    space = env.action_space
    if action_bins:
        space = gym.spaces.MultiDiscrete([action_bins] * env.action_space.shape[0])
        binned = BinnedCategorical(tuple(env.action_space.low), tuple(env.action_space.high),
                                   action_bins)
    space.seed(seed)
    obs_list, action_list, next_list = [], [], []
    limit = max_transitions if max_transitions is not None else float("inf")
    with Progress("collecting TransE data", episodes, "episode", progress, position) as bar:
        for episode in range(episodes):
            if len(obs_list) >= limit:
                break
            obs = _call(env, env_id, episode, seed, 0, None)
            done, steps = False, 0
            while not done and len(obs_list) < limit:
                action = space.sample()
                taken = env_actions(binned, action[None])[0] if action_bins else action
                steps += 1
                next_obs, terminated, truncated = _call(env, env_id, episode, seed, steps, taken)
                obs_list.append(obs)
                action_list.append(action)
                next_list.append(next_obs)
                obs, done = next_obs, terminated or truncated
            bar.update()
            if max_transitions is not None:
                per_episode = len(obs_list) / (episode + 1)
                bar.set_total(min(episodes, math.ceil(max_transitions / per_episode)))
    env.close()
    return TransitionBatch(
        obs=torch.as_tensor(np.asarray(obs_list), dtype=torch.float32),
        actions=torch.as_tensor(np.asarray(action_list), dtype=torch.long),
        next_obs=torch.as_tensor(np.asarray(next_list), dtype=torch.float32),
    )


def _call(env: gym.Env, env_id: str, episode: int, seed: int, step: int, action: Any) -> Any:
    """Episode `episode`'s reset (`step` 0: its observation) or step (observation, terminated,
    truncated), as one `EnvFailed` if the env raises or returns an observation its space cannot
    hold."""
    call = "step" if step else "reset"
    try:
        if step:
            obs, _, terminated, truncated, _ = env.step(action)
        else:
            obs, _ = env.reset(seed=seed + episode)
    except PASSED_ON:
        raise
    except Exception as err:
        raise env_failed(env_id, call, _where(episode, seed, step), err) from err
    problem = observation_problem(obs, env.observation_space)
    if problem is not None:
        raise EnvFailed.of(env_id, call, _where(episode, seed, step), problem)
    return (obs, terminated, truncated) if step else obs


def _where(episode: int, seed: int, step: int) -> str:
    return f"step {step} of TransE data episode {episode + 1} (seed {seed + episode})"
