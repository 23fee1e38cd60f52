"""Agents: the XLVIN policy network (paper section 3.2) and the model-free PPO baseline."""

import torch
from torch import nn

from xlvin.nn.heads import ActorCriticHeads
from xlvin.nn.policy import ActorCritic


class PPOAgent(ActorCritic):
    """The paper's "PPO" baseline: XLVIN without transition model and executor.

    pi(a|s) = A(h_s), V(s) = V(h_s) with h_s = z(s).
    """

    def __init__(self, encoder: nn.Module, embedding_dim: int, num_actions: int) -> None:
        super().__init__()
        self.num_actions = num_actions
        self.encoder = encoder
        self.heads = ActorCriticHeads(embedding_dim, num_actions)

    def forward(self, obs: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        return self.heads(self.encoder(obs))
