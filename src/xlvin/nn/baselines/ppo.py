"""The paper's model-free "PPO" baseline: XLVIN without tree and executor."""

import torch
from torch import nn

from xlvin.nn.auxiliary import TransE
from xlvin.nn.distributions import (
    ActionDistribution,
    Categorical,
    DiagGaussian,
    StateDependentGaussian,
)
from xlvin.nn.heads import ActorCriticHeads
from xlvin.nn.policy import ActorCritic, TransitionBatch
from xlvin.nn.transition import TransitionModel


class PPOAgent(ActorCritic):
    """The paper's "PPO" baseline: XLVIN without tree and executor.

    pi(a|s) = A(h_s), V(s) = V(h_s) with h_s = z(s). With a `transition` model, the TransE loss
    (eq. 2, weight `transe_weight`) is added to PPO's, shaping the encoder as it shapes XLVIN's,
    though the policy never uses the transition: the authors' public code trains its PPO baseline
    so.

    `distribution` (default: a categorical over `num_actions`) is what the actor head's output
    parameterises; for a `DiagGaussian` the heads add its state-independent log standard
    deviation, initialised to `log_std_init` (a matrix for gSDE's `StateDependentGaussian`).

    `critic_encoder` (ours, not the paper's: Stable-Baselines3's default for vector observations)
    gives the critic its own encoder of the same shape, V(s) = V(z_V(s)), where the paper's
    baseline shares z between actor and critic.
    """

    def __init__(
        self,
        encoder: nn.Module,
        embedding_dim: int,
        num_actions: int,
        transition: TransitionModel | None = None,
        transe_weight: float = 1e-3,
        transe_negatives: str = "states",
        distribution: ActionDistribution | None = None,
        log_std_init: float = 0.0,
        critic_encoder: nn.Module | None = None,
    ) -> None:
        super().__init__()
        self.num_actions = num_actions
        self.distribution = distribution or Categorical(num_actions)
        self.encoder = encoder
        self.critic_encoder = critic_encoder
        gaussian = isinstance(self.distribution, DiagGaussian)
        self.heads = ActorCriticHeads(embedding_dim, num_actions,
                                      log_std_init if gaussian else None,
                                      sde=isinstance(self.distribution, StateDependentGaussian))
        self.transition = transition
        self.auxiliary = TransE(transe_weight, transe_negatives)

    def forward(self, obs: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """obs [B, ...] -> logits [B, A] (the distribution's parameters), values [B]."""
        if self.critic_encoder is None:
            return self.heads(self.encoder(obs))
        return self.heads(self.encoder(obs), self.critic_encoder(obs))

    def auxiliary_losses(self, batch: TransitionBatch) -> dict[str, torch.Tensor]:
        """The TransE loss (eq. 2) times `transe_weight`, when there is a transition model."""
        if self.transition is None:
            return {}
        return self.auxiliary.terms(self, batch)
