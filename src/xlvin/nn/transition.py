"""The transition model T: R^k x A -> R^k (paper section 3.1, "Transition"; eq. 5):
z(s) + T(z(s), a) ~ E[z(s')]."""

import torch
from torch import nn
from torch.nn import functional as F


class TransitionModel(nn.Module):
    """Three-layer MLP on [h, one-hot(a)] with LayerNorm after the second layer (paper 4.1).

    Linear(k + A -> F) -> ReLU -> Linear(F -> F) -> LayerNorm -> ReLU -> Linear(F -> k).
    It predicts the *translation* of the embedding, not the next embedding itself (eq. 5).
    """

    def __init__(self, embedding_dim: int, num_actions: int, hidden: int) -> None:
        super().__init__()
        self.embedding_dim = embedding_dim
        self.num_actions = num_actions
        self.first = nn.Linear(embedding_dim + num_actions, hidden)
        self.rest = nn.Sequential(
            nn.ReLU(),
            nn.Linear(hidden, hidden),
            nn.LayerNorm(hidden),
            nn.ReLU(),
            nn.Linear(hidden, embedding_dim),
        )

    def forward(self, h: torch.Tensor, actions: torch.Tensor) -> torch.Tensor:
        """The translation T(h, a): h [B, k], actions [B] (long) -> [B, k]."""
        one_hot = F.one_hot(actions, self.num_actions).to(h.dtype)
        return self.rest(self.first(torch.cat([h, one_hot], dim=-1)))

    def next_embedding(self, h: torch.Tensor, actions: torch.Tensor) -> torch.Tensor:
        """h' = h + T(h, a) (paper section 3.2, step 3(b)i): [B, k], [B] -> [B, k]."""
        return h + self(h, actions)

    def successors(self, h: torch.Tensor) -> torch.Tensor:
        """h + T(h, a) for every action a: h [N, k] -> [N, A, k].

        `forward` on every (h, a) pair, with its first layer split: it is affine, so
        W [h; one-hot(a)] + b = (W_h h + b) + W_a[:, a], and no [N * A, k + A] input is built.
        """
        n, k = h.shape
        w_state, w_action = self.first.weight.split([k, self.num_actions], dim=1)  # [F, k], [F, A]
        first = F.linear(h, w_state, self.first.bias)[:, None] + w_action.T  # [N, A, F]
        translations = self.rest(first.reshape(n * self.num_actions, -1))  # [N * A, k]
        return h[:, None] + translations.view(n, self.num_actions, k)
