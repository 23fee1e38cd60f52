"""Stable-Baselines3's `evaluate_policy`: a model's policy played on the env object the user
gives, as SB3 plays it (`Model.evaluate` is ours: fresh, seeded episodes of the run's env)."""

from collections.abc import Callable
from typing import Any

import gymnasium as gym
import numpy as np

from xlvin.envs.sb3_vec import SB3VecEnv, one_env
from xlvin.errors import UserError


def evaluate_policy(
    model: Any, env: gym.Env | SB3VecEnv, n_eval_episodes: int = 10, deterministic: bool = True,
    render: bool = False, callback: Callable[[dict[str, Any], dict[str, Any]], Any] | None = None,
    reward_threshold: float | None = None, return_episode_rewards: bool = False,
    warn: bool = True,
) -> tuple[float, float] | tuple[list[float], list[int]]:
    """Play `n_eval_episodes` episodes of `model` (anything with SB3's `predict`) on `env`
    itself: a gymnasium Env (stepped as a VecEnv of one) or SB3's VecEnv (`model.get_env()`),
    whose env i plays (n_eval_episodes + i) // num_envs of them (so that short episodes do not
    crowd out long ones). The env goes on from its state: `reset()`, not seeded (seed it before
    to repeat an evaluation). An episode is the VecEnv's `info["episode"]` (a whole game where
    the env records its own under an episodic-life wrapper). Returns (mean, std) of the returns,
    or, with `return_episode_rewards`, (returns, lengths) in the order the episodes ended.

    `callback(locals, globals)`: after each step of each env still playing (locals: `i`,
    `reward`, `done`, `info`, `episode_rewards`, ...); `render`: `env.render()` after each step;
    `reward_threshold`: one UserError if the mean return is not above it; `warn`: taken, unused
    (episodes are counted whole without SB3's Monitor)."""
    if isinstance(env, SB3VecEnv):
        vec_env = env
    elif isinstance(env, gym.Env):
        vec_env = one_env(env)
    else:
        raise UserError(f"evaluate_policy: env is a gymnasium Env (gym.make(...)) or "
                        f"model.get_env(), got {type(env).__name__}")
    if type(n_eval_episodes) is not int or n_eval_episodes <= 0:
        raise UserError(f"evaluate_policy: n_eval_episodes must be > 0, got {n_eval_episodes!r}")
    n = vec_env.num_envs
    targets = np.array([(n_eval_episodes + i) // n for i in range(n)])
    counts = np.zeros(n, dtype=int)
    episode_rewards: list[float] = []
    episode_lengths: list[int] = []
    observations = vec_env.reset()
    states = None
    episode_starts = np.ones(n, dtype=bool)
    while (counts < targets).any():
        actions, states = model.predict(observations, state=states, episode_start=episode_starts,
                                        deterministic=deterministic)
        observations, rewards, dones, infos = vec_env.step(actions)
        for i in range(n):
            if counts[i] >= targets[i]:
                continue
            reward, done, info = rewards[i], dones[i], infos[i]
            episode_starts[i] = done
            if callback is not None:
                callback(locals(), globals())
            if done and "episode" in info:
                episode_rewards.append(float(info["episode"]["r"]))
                episode_lengths.append(int(info["episode"]["l"]))
                counts[i] += 1
        if render:
            vec_env.render()
    mean, std = float(np.mean(episode_rewards)), float(np.std(episode_rewards))
    if reward_threshold is not None and not mean > reward_threshold:
        raise UserError(f"evaluate_policy: the mean return {mean:.2f} is not above "
                        f"reward_threshold={reward_threshold}")
    if return_episode_rewards:
        return episode_rewards, episode_lengths
    return mean, std
