"""Agents: the XLVIN policy network (paper section 3.2) and the model-free PPO baseline."""

import torch
from torch import nn

from xlvin.nn.executor import MessagePassing
from xlvin.nn.functional import Array, cat, linear, parameter, per_block
from xlvin.nn.heads import ActorCriticHeads
from xlvin.nn.policy import ActorCritic, TransitionBatch
from xlvin.nn.transe import transe_loss, transe_objective
from xlvin.nn.transition import TransitionModel
from xlvin.nn.tree import execute_tree, expand_projected_tree, expand_tree


def _heads(heads: ActorCriticHeads, features: Array) -> tuple[Array, Array]:
    """`heads(features)` with the same ops called directly (bit-identical in training; no module
    dispatch on the per-step forward of collection)."""
    logits = linear(features, heads.actor)
    return logits, linear(features, heads.critic).squeeze(-1)


class PPOAgent(ActorCritic):
    """The paper's "PPO" baseline: XLVIN without transition model and executor.

    pi(a|s) = A(h_s), V(s) = V(h_s) with h_s = z(s).
    """

    def __init__(self, encoder: nn.Module, embedding_dim: int, num_actions: int) -> None:
        super().__init__()
        self.num_actions = num_actions
        self.encoder = encoder
        self.heads = ActorCriticHeads(embedding_dim, num_actions)
        self.array_forward = getattr(encoder, "array_forward", False)

    def forward(self, obs: Array) -> tuple[Array, Array]:
        return _heads(self.heads, self.encoder(obs))


class XLVINAgent(ActorCritic):
    """XLVIN policy network (paper section 3.2).

    h_s = z(s); a latent tree of depth K over all actions is grown with h' = h + T(h, a); the
    frozen pre-trained processor X runs K times over it (messages from child to parent, edge
    features = a trainable projection of [one-hot(a), gamma]); chi_s is the root's executed
    embedding and pi(a|s) = A(h_s, chi_s), V(s) = V(h_s, chi_s). The transition model gets the PPO
    gradient plus the TransE loss (paper eq. 2) with weight `transe_weight` (0.001 in the paper).
    """

    def __init__(
        self,
        encoder: nn.Module,
        embedding_dim: int,
        num_actions: int,
        transition: TransitionModel,
        processor: MessagePassing,
        depth: int,
        gamma: float = 0.99,
        transe_weight: float = 1e-3,
    ) -> None:
        super().__init__()
        self.num_actions = num_actions
        self.depth = depth
        self.gamma = gamma
        self.transe_weight = transe_weight
        self.encoder = encoder
        self.transition = transition
        self.processor = processor.requires_grad_(False)
        hidden = processor.hidden
        self.node_projection: nn.Module = (
            nn.Identity() if hidden == embedding_dim else nn.Linear(embedding_dim, hidden)
        )
        self.edge_projection = nn.Linear(num_actions + 1, hidden)
        self.heads = ActorCriticHeads(embedding_dim + hidden, num_actions)
        # [one-hot(a), gamma] of every action, built once (not saved: it is a function of the
        # constructor's arguments).
        edge_input = torch.cat([torch.eye(num_actions), torch.full((num_actions, 1), gamma)], 1)
        self.register_buffer("edge_input", edge_input, persistent=False)
        self.array_forward = getattr(encoder, "array_forward", False)

    def edge_features(self, like: Array | None = None) -> Array:
        """Embedded [one-hot(a), gamma] for every action: [A, H] (of `like`'s array type; once per
        `acting()` block)."""
        layer = self.edge_projection

        def embed() -> Array:
            edge_input = self.edge_input if like is None else parameter(self.edge_input, like)
            return linear(edge_input, layer)

        return per_block(layer, (id(layer), "edge features", type(like)), embed)

    def plan(self, h: Array) -> Array:
        """Expand the tree from h [B, k] and execute it: chi_s [B, H]."""
        return self._plan(h)[0]

    def _plan(self, h: Array) -> tuple[Array, Array | None]:
        """(chi_s [B, H], the tree's first level [B * A, k] when it was built in the embedding
        space, else None).

        With a node projection (k != H, pixel encoders) the tree is grown directly in the
        executor's width by `expand_projected_tree` (the projected levels without the k-wide
        ones); otherwise by `expand_tree`. Either way the frozen executor runs over it with
        `execute_tree`, the pruned, fused kernel of `xlvin.nn.tree`.
        """
        if isinstance(self.node_projection, nn.Linear):
            levels = expand_projected_tree(h, self.transition, self.node_projection, self.depth)
            first_level = None
        else:
            levels = expand_tree(h, self.transition, self.depth)
            first_level = levels[1] if self.depth >= 1 else None
        chi = execute_tree(self.processor, levels, self.edge_features(like=h), self.depth)
        return chi, first_level

    def forward(self, obs: Array) -> tuple[Array, Array]:
        h = self.encoder(obs)
        return _heads(self.heads, cat([h, self.plan(h)], dim=-1))

    def auxiliary_losses(self, batch: TransitionBatch) -> dict[str, torch.Tensor]:
        if self.transe_weight == 0:
            return {}
        loss = transe_loss(self.encoder, self.transition, batch.obs, batch.actions, batch.next_obs)
        return {"transe": self.transe_weight * loss}

    def forward_with_aux(
        self, batch: TransitionBatch
    ) -> tuple[torch.Tensor, torch.Tensor, dict[str, torch.Tensor]]:
        """`forward(batch.obs)` and the TransE term, sharing their work: one encoder pass over
        [obs; next_obs], and z(s) + T(z(s), a) read from the tree's first level when the tree was
        grown in the embedding space. The same values as the two calls up to float rounding (the
        tree computes T's first layer as state part + action column, `TransitionModel.all_actions`).
        """
        if self.transe_weight == 0:
            return super().forward_with_aux(batch)
        both = self.encoder(torch.cat([batch.obs, batch.next_obs]))
        z, z_next = both[: len(batch.obs)], both[len(batch.obs) :]
        chi, first_level = self._plan(z)
        logits, values = _heads(self.heads, torch.cat([z, chi], dim=-1))
        if first_level is None:
            predicted = self.transition.next_embedding(z, batch.actions)
        else:
            rows = torch.arange(z.shape[0], device=z.device) * self.num_actions
            predicted = first_level[rows + batch.actions]
        loss = transe_objective(z, predicted, z_next)
        return logits, values, {"transe": self.transe_weight * loss}

    def train(self, mode: bool = True) -> "XLVINAgent":
        """Like nn.Module.train, but the frozen processor always stays in evaluation mode."""
        super().train(mode)
        self.processor.eval()
        return self
