"""Advantage estimation on a rollout: generalised advantage estimation (Schulman et al. 2016)."""

import numpy as np
import torch

from xlvin.train.storage import Rollout


def compute_gae(
    rollout: Rollout, gamma: float, gae_lambda: float
) -> tuple[torch.Tensor, torch.Tensor]:
    """Generalised advantage estimation on a NEXT_STEP rollout: (advantages, returns), [T, N].

    delta_t = r_t + gamma * V(obs[t+1]) * (1 - terminated_t) - V(obs[t])
    A_t = delta_t + gamma * lambda * (1 - done_t) * A_{t+1},  done_t = terminated_t or truncated_t

    A termination cuts the bootstrap; a truncation keeps it (obs[t+1] is the final observation)
    and both cut the trace, so nothing flows back from the autoreset step. Invalid steps get
    advantage 0 (their values are meaningless and excluded from the loss anyway).
    """
    rewards = rollout.rewards.numpy()  # NumPy views of the rollout, [T, N]
    values = rollout.values.numpy()  # [T + 1, N]
    not_terminated = ~rollout.terminated.numpy()
    not_done = ~(rollout.terminated | rollout.truncated).numpy()
    advantages = np.zeros_like(rewards)
    next_advantage = np.zeros_like(values[0])
    for t in reversed(range(rollout.num_steps)):
        delta = rewards[t] + gamma * values[t + 1] * not_terminated[t] - values[t]
        next_advantage = delta + gamma * gae_lambda * not_done[t] * next_advantage
        advantages[t] = next_advantage
    advantages *= rollout.valid.numpy()
    returns = (advantages + values[:-1]) * rollout.valid.numpy()
    return torch.from_numpy(advantages), torch.from_numpy(returns)
