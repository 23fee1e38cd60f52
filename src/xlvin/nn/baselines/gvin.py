"""Generalized Value Iteration Networks (Niu et al. 2018) on the maze's grid graph.

The graph's nodes are the free cells; a node's neighbour in direction j (one of the 8 `MOVES`) is
the free cell one move away. GVIN's directional graph convolution weighs the neighbour in
direction theta_j, for each of the q channels, by

    c_j = sum_l w_l ((1 + cos(theta_j - theta_l)) / 2)^t + w_0          (Niu et al., eq. 5)

over L = 8 reference directions theta_l (multiples of 45 degrees), t = 100; the kernel is
P = sum_j c_j A_j with A_j the adjacency of direction j. Value iteration on the graph:

    Q = P R + P_fb V,   V = max over the q channels      (P_fb: a second kernel of its own weights)

repeated K times (20 on 16x16 in the paper; `paper_iterations`), then Q is read at the agent's
node, as VIN reads its Q map.
"""

import math

import torch
from torch import nn

from xlvin.envs.maze import AGENT, GOAL, WALLS
from xlvin.envs.maze_data import MOVES
from xlvin.nn.heads import ActorCriticHeads
from xlvin.nn.policy import ActorCritic
from xlvin.nn.baselines.vin import paper_iterations, read_out


def neighbours(x: torch.Tensor) -> torch.Tensor:
    """x [B, H, W] -> [B, 8, H, W]: channel j at cell s holds x at s + MOVES[j] (0 off the grid)."""
    H, W = x.shape[-2:]
    padded = nn.functional.pad(x, (1, 1, 1, 1))  # [B, H + 2, W + 2]
    return torch.stack(
        [padded[:, 1 + dr : 1 + dr + H, 1 + dc : 1 + dc + W] for dr, dc in MOVES.tolist()], dim=1
    )


class DirectionalGraphConv(nn.Module):
    """One directional kernel P with `channels` outputs: (P x)_c[s] = sum_j c_{c,j} x[s + d_j]
    over the free neighbours of a free cell s (Niu et al., eq. 5; module docstring)."""

    def __init__(self, channels: int, sharpness: float = 100.0) -> None:
        super().__init__()
        self.w = nn.Parameter(torch.randn(channels, len(MOVES)) * 0.1)  # w_l per channel
        self.w0 = nn.Parameter(torch.zeros(channels, 1))  # w_0 per channel
        theta = torch.tensor([math.atan2(-dr, dc) for dr, dc in MOVES.tolist()])  # [8], north = pi/2
        reference = torch.arange(len(MOVES)) * (2 * math.pi / len(MOVES))  # [8]
        # kernel[l, j] = ((1 + cos(theta_j - theta_l)) / 2)^t
        kernel = ((1 + torch.cos(theta[None, :] - reference[:, None])) / 2) ** sharpness
        self.register_buffer("kernel", kernel, persistent=False)

    def direction_weights(self) -> torch.Tensor:
        """c [channels, 8]: the weight of each channel on the neighbour in each direction."""
        return self.w @ self.kernel + self.w0

    def forward(self, x: torch.Tensor, free: torch.Tensor) -> torch.Tensor:
        """x [B, H, W] (a signal on the cells), free [B, H, W] (1 at nodes) -> [B, channels, H, W]."""
        gathered = neighbours(x * free)  # [B, 8, H, W]: x at each free neighbour
        out = torch.einsum("bjhw,cj->bchw", gathered, self.direction_weights())
        return out * free[:, None]


class GVINAgent(ActorCritic):
    """GVIN as a PPO policy (module docstring): R = a * goal + b on the free cells, K steps of
    Q = P R + P_fb V, Q read at the agent's cell, linear actor and critic heads."""

    def __init__(self, num_actions: int, q_channels: int = 10, iterations: int = 0) -> None:
        super().__init__()
        self.num_actions = num_actions
        self.iterations = iterations
        self.reward = nn.Linear(1, 1)  # R(s) = a * goal(s) + b
        self.kernel = DirectionalGraphConv(q_channels)  # P
        self.feedback = DirectionalGraphConv(q_channels)  # P_fb
        self.heads = ActorCriticHeads(q_channels, num_actions)

    def plan(self, obs: torch.Tensor) -> torch.Tensor:
        """obs [B, 3, H, W] -> Q [B, q, H, W] (0 at walls)."""
        free = (obs[:, WALLS] == 0).float()  # [B, H, W]: the nodes (contextual borders are > 0)
        reward = self.reward(obs[:, GOAL, :, :, None]).squeeze(-1) * free  # [B, H, W]
        q_reward = self.kernel(reward, free)  # P R [B, q, H, W]
        q = q_reward
        for _ in range(self.iterations or paper_iterations(obs.shape[-1])):
            q = q_reward + self.feedback(q.amax(dim=1), free)  # + P_fb V
        return q

    def forward(self, obs: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """obs [B, 3, H, W] -> logits [B, A], values [B]."""
        obs = obs.float()
        return self.heads(read_out(self.plan(obs), obs[:, AGENT], "slice"))
