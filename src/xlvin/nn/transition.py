"""The transition model T: R^k x A -> R^k (paper section 3.1, "Transition"; eq. 5):
z(s) + T(z(s), a) ~ E[z(s')]."""

import math

import torch
from torch import nn
from torch.nn import functional as F


def one_hots(actions: torch.Tensor, nvec: tuple[int, ...]) -> torch.Tensor:
    """A joint action as the concatenation of one one-hot per factor: actions [N, d] (long),
    factor j in [0, nvec[j]) -> [N, sum(nvec)] float."""
    return torch.cat([F.one_hot(a, n) for a, n in zip(actions.unbind(-1), nvec)], dim=-1).float()


def joint_actions(nvec: tuple[int, ...]) -> torch.Tensor:
    """Every joint action of factors `nvec`: [prod(nvec), d] long, row m = m written in the
    mixed base nvec (the first factor most significant)."""
    grids = torch.meshgrid(*(torch.arange(n) for n in nvec), indexing="ij")
    return torch.stack([g.flatten() for g in grids], dim=-1)


class TransitionModel(nn.Module):
    """Three-layer MLP on [h, one-hot(a)] with LayerNorm after the second layer (paper 4.1).

    Linear(k + A -> F) -> ReLU -> Linear(F -> F) -> LayerNorm -> ReLU -> Linear(F -> k).
    It predicts the *translation* of the embedding, not the next embedding itself (eq. 5).

    `num_actions` A (an int) takes actions [B] of Discrete(A). A tuple `nvec` takes joint actions
    [B, d] of d factors (a MultiDiscrete, or a Box binned per dimension) and reads each as the
    concatenation of its factors' one-hots (`one_hots`, sum(nvec) inputs in place of A); then
    `num_actions` is the number of joint actions, prod(nvec).
    """

    def __init__(self, embedding_dim: int, num_actions: int | tuple[int, ...], hidden: int) -> None:
        super().__init__()
        self.embedding_dim = embedding_dim
        self.nvec = tuple(num_actions) if isinstance(num_actions, tuple) else ()
        self.num_actions = math.prod(self.nvec) if self.nvec else int(num_actions)
        self.action_width = sum(self.nvec) if self.nvec else self.num_actions
        self.first = nn.Linear(embedding_dim + self.action_width, hidden)
        self.rest = nn.Sequential(
            nn.ReLU(),
            nn.Linear(hidden, hidden),
            nn.LayerNorm(hidden),
            nn.ReLU(),
            nn.Linear(hidden, embedding_dim),
        )

    def forward(self, h: torch.Tensor, actions: torch.Tensor) -> torch.Tensor:
        """The translation T(h, a): h [B, k], actions [B] (long; [B, d] with factors) -> [B, k]."""
        if self.nvec:
            one_hot = one_hots(actions, self.nvec).to(h.dtype)
        else:
            one_hot = F.one_hot(actions, self.num_actions).to(h.dtype)
        return self.rest(self.first(torch.cat([h, one_hot], dim=-1)))

    def next_embedding(self, h: torch.Tensor, actions: torch.Tensor) -> torch.Tensor:
        """h' = h + T(h, a) (paper section 3.2, step 3(b)i): [B, k], [B] -> [B, k]."""
        return h + self(h, actions)

    def action_weights(self) -> tuple[torch.Tensor, torch.Tensor]:
        """The first layer split into its state part W_h [F, k] and the contribution of every
        action to it [A, F] (W_a's columns; with factors, W_a times every joint action's
        one-hots, in the row order of `joint_actions`)."""
        w_state, w_action = self.first.weight.split([self.embedding_dim, self.action_width], dim=1)
        if not self.nvec:
            return w_state, w_action.T
        table = one_hots(joint_actions(self.nvec).to(w_action.device), self.nvec)
        return w_state, table.to(w_action.dtype) @ w_action.T

    def successors(self, h: torch.Tensor) -> torch.Tensor:
        """h + T(h, a) for every action a: h [N, k] -> [N, A, k].

        `forward` on every (h, a) pair, with its first layer split: it is affine, so
        W [h; one-hot(a)] + b = (W_h h + b) + W_a[:, a], and no [N * A, k + A] input is built.
        """
        n, k = h.shape
        w_state, w_action = self.action_weights()  # [F, k], [A, F]
        first = F.linear(h, w_state, self.first.bias)[:, None] + w_action  # [N, A, F]
        translations = self.rest(first.reshape(n * self.num_actions, -1))  # [N * A, k]
        return h[:, None] + translations.view(n, self.num_actions, k)
