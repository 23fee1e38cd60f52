"""Transitions of a uniform random policy, the TransE pre-training data (paper appendix B)."""

from typing import Any

import gymnasium as gym
import numpy as np
import torch

from xlvin.nn.policy import TransitionBatch


def random_transitions(
    env_id: str, episodes: int, seed: int, max_transitions: int | None = None,
    env_kwargs: dict[str, Any] | None = None,
) -> TransitionBatch:
    """Run up to `episodes` episodes with uniformly random actions in `gym.make(env_id,
    **env_kwargs)` and return every (s, a, s'), stopping early once `max_transitions` pairs are
    collected (every pair stays a real step).

    The environment is reset by hand between episodes, so a terminal step is paired with its
    true final observation and never with the next episode's reset observation (the autoreset
    bug of public TransE code). Episode i is reset with seed `seed + i`.
    """
    env = gym.make(env_id, **(env_kwargs or {}))
    env.action_space.seed(seed)
    obs_list, action_list, next_list = [], [], []
    limit = max_transitions if max_transitions is not None else float("inf")
    for episode in range(episodes):
        if len(obs_list) >= limit:
            break
        obs, _ = env.reset(seed=seed + episode)
        done = False
        while not done and len(obs_list) < limit:
            action = env.action_space.sample()
            next_obs, _, terminated, truncated, _ = env.step(action)
            obs_list.append(obs)
            action_list.append(action)
            next_list.append(next_obs)
            obs, done = next_obs, terminated or truncated
    env.close()
    return TransitionBatch(
        obs=torch.as_tensor(np.asarray(obs_list), dtype=torch.float32),
        actions=torch.as_tensor(np.asarray(action_list), dtype=torch.long),
        next_obs=torch.as_tensor(np.asarray(next_list), dtype=torch.float32),
    )
