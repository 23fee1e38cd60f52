"""Value Iteration Networks (Tamar et al. 2016) for the maze: VIN, and the paper's VIN-mean and
VIN-max (section 4.1), trained by the library's PPO as every other agent.

The maze observation [B, 3, H, W] has the channels of `xlvin.envs.maze` (walls, agent, goal). VIN
reads the walls and the goal as its image; the agent channel only says where to read the result
(the slice: VIN's privileged knowledge of the agent's position). VIN-mean and VIN-max pool over
the whole map instead, so they read all three channels: the paper's point is that they must infer
the agent's position from the data (section 4.1); without the agent channel their policy could
not depend on it at all.
"""

import math

import torch
from torch import nn

from xlvin.envs.maze import AGENT, GOAL, WALLS
from xlvin.nn.heads import ActorCriticHeads
from xlvin.nn.policy import ActorCritic

#: How the Q map [B, 10, H, W] becomes the features [B, 10] of the heads: VIN's attention
#: (slicing at the agent's cell), or the paper's global mean / max pooling instead.
READOUTS = ("slice", "mean", "max")


def paper_iterations(side: int) -> int:
    """VIN's iteration count K for a side: 10 for 8x8, 20 for 16x16 (the paper's k), 1.25 x side."""
    return math.ceil(1.25 * side)


class ValueIteration(nn.Module):
    """VIN's planning module (Tamar et al. 2016, section 3):

        h = Conv3x3(x)              x = [walls, goal] [B, 2, H, W] -> [B, hidden, H, W]
        R = Conv1x1(h), no bias     the reward map [B, 1, H, W]
        Q = Conv3x3_R(R)            Q^0 [B, q, H, W]
        K times:  V = max over the q channels of Q,  Q = Conv3x3_R(R) + Conv3x3_V(V)
                                    (the VI step: Q(s, a) = R + sum P V, V = max_a Q)

    The two convolutions of a step are VIN's one convolution over [R, V] with weights [w_R, w_V]
    (VIN's loop runs K - 1 steps and then computes the last Q the same way: K in all). K is an
    argument of forward: the weights are the same for every K and every maze size.
    """

    def __init__(self, in_channels: int = 2, hidden: int = 150, q_channels: int = 10) -> None:
        super().__init__()
        self.h = nn.Conv2d(in_channels, hidden, 3, padding=1)
        self.r = nn.Conv2d(hidden, 1, 1, bias=False)
        self.q_reward = nn.Conv2d(1, q_channels, 3, padding=1, bias=False)
        self.q_value = nn.Conv2d(1, q_channels, 3, padding=1, bias=False)

    def forward(self, image: torch.Tensor, iterations: int) -> torch.Tensor:
        """image [B, 2, H, W] -> Q [B, q, H, W] after `iterations` (K >= 1) VI steps."""
        reward = self.r(self.h(image))  # [B, 1, H, W]
        q_reward = self.q_reward(reward)  # [B, q, H, W], the same every step
        q = q_reward
        for _ in range(iterations):
            value = q.amax(dim=1, keepdim=True)  # [B, 1, H, W]
            q = q_reward + self.q_value(value)
        return q


def read_out(q: torch.Tensor, agent: torch.Tensor, readout: str) -> torch.Tensor:
    """Q [B, q, H, W] -> features [B, q]: at the agent's cell (agent [B, H, W], one-hot: the sum
    of Q under it is VIN's slice), or the global mean or max over the cells."""
    if readout == "slice":
        return torch.einsum("bqhw,bhw->bq", q, agent)
    if readout == "mean":
        return q.mean(dim=(2, 3))
    return q.amax(dim=(2, 3))


class VINAgent(ActorCritic):
    """VIN as a PPO policy: Q map of `ValueIteration`, read out at the agent ("slice": VIN) or
    pooled over the maze ("mean": VIN-mean, "max": VIN-max), then linear actor and critic heads
    (the actor is VIN's final Linear(q -> actions)). The image is [walls, goal] for the slice and
    the whole observation for the pooled readouts (module docstring). K = `paper_iterations` of
    the maze's side unless `iterations` is given, so one network runs 8x8 (K = 10) and 16x16
    (K = 20).
    """

    def __init__(
        self, num_actions: int, readout: str = "slice", hidden: int = 150, q_channels: int = 10,
        iterations: int = 0,
    ) -> None:
        super().__init__()
        if readout not in READOUTS:
            raise ValueError(f"VIN readout {readout!r}: choose one of {READOUTS}")
        self.num_actions = num_actions
        self.readout = readout
        self.iterations = iterations
        self.image_channels = [WALLS, GOAL] if readout == "slice" else [WALLS, AGENT, GOAL]
        self.planner = ValueIteration(len(self.image_channels), hidden, q_channels)
        self.heads = ActorCriticHeads(q_channels, num_actions)

    def forward(self, obs: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """obs [B, 3, H, W] -> logits [B, A], values [B]."""
        obs = obs.float()
        image = obs[:, self.image_channels]  # [B, 2 or 3, H, W]
        q = self.planner(image, self.iterations or paper_iterations(obs.shape[-1]))
        return self.heads(read_out(q, obs[:, AGENT], self.readout))
