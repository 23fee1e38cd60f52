"""Actor A and tail (critic) V (paper section 3.1): read the state embedding(s), give pi and V."""

import torch
from torch import nn

from xlvin.nn.encoders import orthogonal_init


class ActorCriticHeads(nn.Module):
    """Linear actor (logits over actions) and linear critic on a feature vector.

    Actor weights use orthogonal gain 0.01 and the critic gain 1, the PPO convention.
    """

    def __init__(self, in_dim: int, num_actions: int) -> None:
        super().__init__()
        self.actor = orthogonal_init(nn.Linear(in_dim, num_actions), gain=0.01)
        self.critic = orthogonal_init(nn.Linear(in_dim, 1), gain=1.0)

    def forward(self, features: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """features [B, in_dim] -> logits [B, A], values [B]."""
        return self.actor(features), self.critic(features).squeeze(-1)
