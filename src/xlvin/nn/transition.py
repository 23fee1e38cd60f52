"""TransitionModel model T: R^k x A -> R^k (paper section 3.1, eq. 3): h' = h + T(h, a)."""

import torch
from torch import nn
from torch.nn import functional as F

from xlvin.nn.functional import Array, affine, layer_norm, linear, relu_, transposed


class TransitionModel(nn.Module):
    """Three-layer MLP on [h, one-hot(a)] with LayerNorm after the second layer (paper 4.1).

    Linear(k + A -> F) -> ReLU -> Linear(F -> F) -> LayerNorm -> ReLU -> Linear(F -> k).
    It predicts the *translation* of the embedding: z(s) + T(z(s), a) ~ E[z(s')] (paper eq. 3).
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
        """h [B, k], actions [B] (long) -> translation T(h, a) [B, k]."""
        one_hot = F.one_hot(actions, self.num_actions).to(h.dtype)
        return self.rest(self.first(torch.cat([h, one_hot], dim=-1)))

    def all_actions(self, h: Array) -> Array:
        """Translations for every action at once: h [N, k] -> T(h, a) for all a, [N, A, k].

        Exact rewrite of `forward` on the A copies of h: the first layer's state part is computed
        once and the one-hot part is a column of its weight, so no [N * A, k + A] input is built.
        """
        k = self.embedding_dim
        first_t = transposed(self.first.weight, like=h)  # [k + A, F]
        state_part = affine(h, first_t[:k], self.first.bias)  # [N, F]
        action_part = first_t[k:]  # [A, F]
        return self._rest(state_part[:, None] + action_part)  # [N, A, F] -> [N, A, k]

    def _rest(self, x: Array) -> Array:
        """`self.rest(x)` with the same ops called directly (no per-module Python dispatch, ReLUs
        in place on tensors nothing else reads): bit-identical, and it runs on every tree level of
        every forward."""
        out_layer = self.rest[-1]
        shape = x.shape
        x = linear(self.hidden(x), out_layer)
        return x.reshape(*shape[:-1], x.shape[-1])

    def hidden(self, x: Array) -> Array:
        """The translation's last hidden layer r from the first layer's pre-activation x [..., F]:
        relu(LayerNorm(W2 relu(x) + b2)), flattened to [N, F] (T = W3 r + b3).

        2-D: one addmm per layer and 2-D element-wise backward (3-4x faster than 3-D here)."""
        _, hidden_layer, norm, _, _ = self.rest
        x = x.reshape(-1, x.shape[-1])
        x = linear(relu_(x), hidden_layer)
        return relu_(layer_norm(x, norm))

    def successors(self, h: Array) -> Array:
        """Next embeddings for every action: h [N, k] -> h + T(h, a) for all a, [N, A, k]."""
        return h[:, None] + self.all_actions(h)

    def next_embedding(self, h: torch.Tensor, actions: torch.Tensor) -> torch.Tensor:
        """h' = h + T(h, a) (paper section 3.2, step 3(b)i)."""
        return h + self(h, actions)
