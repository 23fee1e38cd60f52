"""Encoders z: S -> R^k (paper section 3.1, "Encoder"): observation -> flat embedding h_s."""

import math

import torch
from torch import nn


def orthogonal_init(module: nn.Module, gain: float = math.sqrt(2)) -> nn.Module:
    """Orthogonal weights and zero biases, the PPO convention (ikostrikov, CleanRL)."""
    for layer in module.modules():
        if isinstance(layer, (nn.Linear, nn.Conv2d)):
            nn.init.orthogonal_(layer.weight, gain)
            if layer.bias is not None:
                nn.init.zeros_(layer.bias)
    return module


class MLPEncoder(nn.Module):
    """Three-layer MLP with ReLU for flat observations: in -> 2F -> F -> k (REFERENCE.md).

    The paper's classic-control encoders use F = 64 / 32 / 16 (CartPole / Acrobot / MountainCar)
    and k = 50 outputs.
    """

    def __init__(self, obs_dim: int, hidden: int, embedding_dim: int) -> None:
        super().__init__()
        self.embedding_dim = embedding_dim
        self.net = orthogonal_init(
            nn.Sequential(
                nn.Linear(obs_dim, 2 * hidden),
                nn.ReLU(),
                nn.Linear(2 * hidden, hidden),
                nn.ReLU(),
                nn.Linear(hidden, embedding_dim),
            )
        )

    def forward(self, obs: torch.Tensor) -> torch.Tensor:
        """obs [B, obs_dim] -> h_s [B, k]."""
        return self.net(obs.flatten(1).float())
