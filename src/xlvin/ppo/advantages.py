"""Advantage estimation on a rollout: generalised advantage estimation (Schulman et al. 2016)
and plain Monte Carlo returns (the authors' classic-control code)."""

import numpy as np
import torch

from xlvin.ppo.storage import Rollout


def compute_gae(
    rollout: Rollout, gamma: float, gae_lambda: float, time_limit_terminal: bool = False
) -> tuple[torch.Tensor, torch.Tensor]:
    """Generalised advantage estimation on a NEXT_STEP rollout: (advantages, returns), [T, N].

    delta_t = r_t + gamma * V(obs[t+1]) * (1 - terminated_t) - V(obs[t])
    A_t = delta_t + gamma * lambda * (1 - done_t) * A_{t+1},  done_t = terminated_t or truncated_t

    A termination cuts the bootstrap; a truncation keeps it (obs[t+1] is the final observation),
    unless `time_limit_terminal`, and both cut the trace, so nothing flows back from the
    autoreset step. Invalid steps get advantage 0 (their values are meaningless and excluded from
    the loss anyway).
    """
    rewards = rollout.rewards.numpy()  # NumPy views of the rollout, [T, N]
    values = rollout.values.numpy()  # [T + 1, N]
    done = (rollout.terminated | rollout.truncated).numpy()
    not_terminated = ~(done if time_limit_terminal else rollout.terminated.numpy())
    not_done = ~done
    advantages = np.zeros_like(rewards)
    next_advantage = np.zeros_like(values[0])
    for t in reversed(range(rollout.num_steps)):
        delta = rewards[t] + gamma * values[t + 1] * not_terminated[t] - values[t]
        next_advantage = delta + gamma * gae_lambda * not_done[t] * next_advantage
        advantages[t] = next_advantage
    advantages *= rollout.valid.numpy()
    returns = (advantages + values[:-1]) * rollout.valid.numpy()
    return torch.from_numpy(advantages), torch.from_numpy(returns)


def monte_carlo_returns(
    rollout: Rollout, gamma: float, time_limit_terminal: bool = False
) -> tuple[torch.Tensor, torch.Tensor]:
    """Discounted returns and advantages A = G - V_old on a NEXT_STEP rollout, [T, N].

    G_t = r_t + gamma * G_{t+1}, from G_T = V(obs[T]) at the end of the data (an unfinished
    episode is bootstrapped there); a termination ends the sum (G_t = r_t), and so does a
    truncation when `time_limit_terminal`, else it is bootstrapped from V(final observation).
    This is ikostrikov's `compute_returns` with use_gae=False, which the authors' code uses.
    Invalid steps get 0.
    """
    rewards = rollout.rewards.numpy()  # [T, N]
    values = rollout.values.numpy()  # [T + 1, N]
    terminated = rollout.terminated.numpy()
    truncated = rollout.truncated.numpy()
    ends = terminated | truncated if time_limit_terminal else terminated
    returns = np.zeros_like(rewards)
    next_return = values[-1].copy()
    for t in reversed(range(rollout.num_steps)):
        following = np.where(truncated[t] & ~ends[t], values[t + 1], next_return)
        next_return = rewards[t] + gamma * np.where(ends[t], 0.0, following)
        returns[t] = next_return
    valid = rollout.valid.numpy()
    returns *= valid
    advantages = (returns - values[:-1]) * valid
    return torch.from_numpy(advantages.astype(np.float32)), torch.from_numpy(returns.astype(np.float32))
