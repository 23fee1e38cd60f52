"""The interface every agent (XLVIN, PPO baseline, later VIN, GVIN, ATreeC) gives the PPO trainer."""

from dataclasses import dataclass

import torch
from torch import nn

from xlvin.nn.distributions import ActionDistribution, Categorical


@dataclass
class TransitionBatch:
    """A batch of environment transitions (s, a, s') that are real: never an autoreset step.

    obs: [B, *obs_shape], actions: [B] (long; [B, K] or [B, d] for MultiDiscrete or Box actions),
    next_obs: [B, *obs_shape], rewards: [B] or None.
    """

    obs: torch.Tensor
    actions: torch.Tensor
    next_obs: torch.Tensor
    rewards: torch.Tensor | None = None


class ActorCritic(nn.Module):
    """A policy network for PPO: observations -> (action logits [B, A], state values [B]), or,
    for other action spaces, the parameters of its `action_distribution()`.

    Agents differ only in this network and in `auxiliary_losses`, which the trainer adds to the
    PPO loss (each term already multiplied by its weight).
    """

    num_actions: int
    #: The distribution the first output parameterises, where an agent sets one.
    distribution: ActionDistribution | None = None

    def action_distribution(self) -> ActionDistribution:
        """How the first output is read: the agent's `distribution`, or by default a categorical
        over `num_actions` logits."""
        return self.distribution or Categorical(self.num_actions)

    def forward(self, obs: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        raise NotImplementedError

    def auxiliary_losses(self, batch: TransitionBatch) -> dict[str, torch.Tensor]:
        """Weighted auxiliary loss terms on real transitions; none by default."""
        return {}

    def forward_with_aux(
        self, batch: TransitionBatch
    ) -> tuple[torch.Tensor, torch.Tensor, dict[str, torch.Tensor]]:
        """What a PPO minibatch needs: `forward(batch.obs)` and `auxiliary_losses(batch)`.
        An agent overrides it to share work between the two (the same values, up to float
        rounding)."""
        logits, values = self(batch.obs)
        return logits, values, self.auxiliary_losses(batch)
