"""ATreeC (Farquhar et al. 2018, "TreeQN and ATreeC"), trained with the PPO loss as in the
paper's ablation (section 5, "Comparison to scalar value modelling").

The same breadth-first latent tree as XLVIN (`xlvin.nn.tree.expand_tree`), but instead of a
learned executor, scalar rewards and values predicted at every node are combined by a TD(lambda)
backup, and the policy is the softmax of the root's backed-up Q-values.
"""

import torch
from torch import nn
from torch.nn import functional as F

from xlvin.nn.encoders import orthogonal_init
from xlvin.nn.policy import ActorCritic, TransitionBatch
from xlvin.nn.tree import expand_tree


class TreeQNTransition(nn.Module):
    """x' = normalise(x + tanh(W1 x + b) + tanh(x W2[:, :, a])) for every action (TreeQN eq. 3)."""

    def __init__(self, dim: int, num_actions: int) -> None:
        super().__init__()
        self.shared = nn.Linear(dim, dim)
        self.per_action = nn.Parameter(torch.empty(num_actions, dim, dim))
        nn.init.xavier_normal_(self.per_action)

    def successors(self, x: torch.Tensor) -> torch.Tensor:
        """x [N, D] -> successors for all actions [N, A, D], each L2-normalised."""
        shared = torch.tanh(self.shared(x)).unsqueeze(1)  # [N, 1, D]
        specific = torch.tanh(torch.einsum("nd,ade->nae", x, self.per_action))  # [N, A, D]
        return F.normalize(x.unsqueeze(1) + shared + specific, dim=-1)


class ATreeCAgent(ActorCritic):
    """ATreeC: encoder -> tree of depth K -> TD(lambda) backup -> pi = softmax(Q(root, .)).

    Backup (TreeQN eqs. 5-7): leaves are worth V(x); for an interior node x,
    Q(x, a) = r(x, a) + gamma * b(x'_a) and b(x) = (1 - lambda) V(x) + lambda * agg_a Q(x, a),
    agg = softmax-weighted mean (default) or max. The critic is a separate linear head on the
    root embedding. The reward head is grounded on observed rewards by an auxiliary MSE loss
    (TreeQN's reward grounding), weighted by `reward_weight`.
    """

    def __init__(
        self,
        encoder: nn.Module,
        embedding_dim: int,
        num_actions: int,
        depth: int,
        gamma: float = 0.99,
        td_lambda: float = 0.8,
        aggregation: str = "softmax",
        reward_weight: float = 1.0,
    ) -> None:
        super().__init__()
        if depth < 1:
            raise ValueError("ATreeC needs a tree: depth >= 1")
        self.num_actions = num_actions
        self.depth, self.gamma, self.td_lambda = depth, gamma, td_lambda
        self.aggregation, self.reward_weight = aggregation, reward_weight
        self.encoder = encoder
        self.transition = TreeQNTransition(embedding_dim, num_actions)
        self.reward = nn.Sequential(
            nn.Linear(embedding_dim, 64), nn.ReLU(), nn.Linear(64, num_actions)
        )
        self.value = nn.Linear(embedding_dim, 1)
        self.critic = orthogonal_init(nn.Linear(embedding_dim, 1), gain=1.0)

    def embed(self, obs: torch.Tensor) -> torch.Tensor:
        """Normalised root embedding x_0 [B, D] (TreeQN normalises every latent state)."""
        return F.normalize(self.encoder(obs), dim=-1)

    def _aggregate(self, q: torch.Tensor) -> torch.Tensor:
        if self.aggregation == "max":
            return q.amax(dim=-1)
        return (q.softmax(dim=-1) * q).sum(dim=-1)

    def q_values(self, x: torch.Tensor) -> torch.Tensor:
        """Backed-up Q(root, a): [B, D] -> [B, A]."""
        levels = expand_tree(x, self.transition, self.depth)
        backup = self.value(levels[-1]).squeeze(-1)  # leaves: V(x) [N_K]
        q = backup  # replaced below; depth >= 1
        for level in reversed(levels[:-1]):
            q = self.reward(level) + self.gamma * backup.view(level.shape[0], self.num_actions)
            v = self.value(level).squeeze(-1)
            backup = (1 - self.td_lambda) * v + self.td_lambda * self._aggregate(q)
        return q

    def forward(self, obs: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        x = self.embed(obs)
        return self.q_values(x), self.critic(x).squeeze(-1)

    def auxiliary_losses(self, batch: TransitionBatch) -> dict[str, torch.Tensor]:
        if self.reward_weight == 0 or batch.rewards is None:
            return {}
        predicted = self.reward(self.embed(batch.obs)).gather(1, batch.actions.view(-1, 1))
        loss = F.mse_loss(predicted.squeeze(1), batch.rewards.float())
        return {"reward_grounding": self.reward_weight * loss}
