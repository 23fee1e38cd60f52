"""Actor A and tail (critic) V (paper section 3.1): read the state embedding(s), give pi and V."""

import torch
from torch import nn

from xlvin.nn.encoders import orthogonal_init


class ActorCriticHeads(nn.Module):
    """Linear actor and linear critic on a feature vector.

    The actor gives logits over actions, or with `log_std_init` (Box actions) the mean of a
    diagonal Gaussian followed by its log standard deviation, a trainable vector independent of
    the state (`xlvin.nn.distributions.DiagGaussian`), initialised to `log_std_init`.
    Actor weights use orthogonal gain 0.01 and the critic gain 1, the PPO convention.
    """

    def __init__(self, in_dim: int, num_actions: int, log_std_init: float | None = None) -> None:
        super().__init__()
        self.actor = orthogonal_init(nn.Linear(in_dim, num_actions), gain=0.01)
        self.critic = orthogonal_init(nn.Linear(in_dim, 1), gain=1.0)
        self.log_std = (None if log_std_init is None
                        else nn.Parameter(torch.full((num_actions,), float(log_std_init))))

    def forward(self, features: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """features [B, in_dim] -> logits [B, A] (or [mean, log_std] [B, 2A]), values [B]."""
        params = self.actor(features)
        if self.log_std is not None:
            params = torch.cat([params, self.log_std.expand_as(params)], dim=-1)
        return params, self.critic(features).squeeze(-1)
