"""Actor A and tail (critic) V (paper section 3.1): read the state embedding(s), give pi and V."""

import torch
from torch import nn

from xlvin.nn.encoders import orthogonal_init

#: Added to gSDE's variance before its square root (as Stable-Baselines3 does).
SDE_EPS = 1e-6


class ActorCriticHeads(nn.Module):
    """Linear actor and linear critic on a feature vector.

    The actor gives logits over actions, or with `log_std_init` (Box actions) the mean of a
    diagonal Gaussian followed by its log standard deviation, a trainable vector independent of
    the state (`xlvin.nn.distributions.DiagGaussian`), initialised to `log_std_init`. With `sde`
    as well (gSDE, `xlvin.nn.distributions.StateDependentGaussian`), log sigma is a trainable
    [in_dim, A] matrix and the standard deviation of action j is
    sqrt(sum_l z_l^2 sigma_lj^2 + SDE_EPS) for the actor's features z (detached: the noise does not
    train them), followed by the matrix z_l sigma_lj that sampling reads.
    Actor weights use orthogonal gain 0.01 and the critic gain 1, the PPO convention.
    """

    def __init__(self, in_dim: int, num_actions: int, log_std_init: float | None = None,
                 sde: bool = False) -> None:
        super().__init__()
        self.actor = orthogonal_init(nn.Linear(in_dim, num_actions), gain=0.01)
        self.critic = orthogonal_init(nn.Linear(in_dim, 1), gain=1.0)
        shape = (in_dim, num_actions) if sde else (num_actions,)
        self.sde = sde
        self.log_std = (None if log_std_init is None
                        else nn.Parameter(torch.full(shape, float(log_std_init))))

    def forward(
        self, features: torch.Tensor, critic_features: torch.Tensor | None = None
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """features [B, in_dim] -> logits [B, A] (or the Gaussian's parameters: [mean, log_std]
        [B, 2A], with gSDE [mean, log_std, z sigma] [B, (2 + in_dim) A]), values [B]; the critic
        reads `critic_features` [B, in_dim] where given (a separate critic network)."""
        params = self.actor(features)
        if self.log_std is not None and self.sde:
            z = features.detach()
            std = self.log_std.exp()  # [in_dim, A]
            log_std = 0.5 * torch.log(z.square() @ std.square() + SDE_EPS)  # [B, A]
            scaled = (z.unsqueeze(-1) * std).flatten(1)  # [B, in_dim * A]
            params = torch.cat([params, log_std, scaled], dim=-1)
        elif self.log_std is not None:
            params = torch.cat([params, self.log_std.expand_as(params)], dim=-1)
        values = self.critic(features if critic_features is None else critic_features)
        return params, values.squeeze(-1)
