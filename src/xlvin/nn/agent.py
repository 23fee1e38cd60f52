"""The XLVIN policy network (paper section 3.2): encoder -> planner -> heads. The baselines
are in `xlvin.nn.baselines`."""

import torch
from torch import nn

from xlvin.nn.auxiliary import AuxiliaryLoss, TransE, WorldModel, rollout_distillation
from xlvin.nn.distributions import ActionDistribution, Categorical
from xlvin.nn.executor import MessagePassing
from xlvin.nn.expansion import LEARNED, Expansion
from xlvin.nn.heads import ActorCriticHeads
from xlvin.nn.planners import Planner
from xlvin.nn.planners import planner as make_planner
from xlvin.nn.policy import ActorCritic, TransitionBatch
from xlvin.nn.transition import TransitionModel, joint_actions, one_hots
from xlvin.nn.vae import VAEWorldModel


class XLVINAgent(ActorCritic):
    """The XLVIN policy network (paper section 3.2): encoder -> planner -> heads.

        h_s = z(s)                                      [B, k]   step 1, `encoder`
        chi_s = planner(h_s)                            [B, H]   steps 2-4, `planner`
        pi(.|s), V(s) = A(h_s, chi_s), V(h_s, chi_s)    [B, A], [B]   step 5, `heads`

    The planner (`xlvin.nn.planners`) grows a latent tree of depth K with h' = h + T(h, a)
    (eq. 5; `transition`) and runs the frozen pre-trained processor X (`processor`) K times
    over it, messages from child to parent (eq. 3) with edge features e_a = a trainable
    projection of [one-hot(a), gamma] (`edge_projection`) and updates (eq. 4); chi_s is the
    roots' executed embedding. The paper's planner expands every action (`FullTree`); ours
    expand the `prune` actions a rollout policy ranks highest below depth 1 (`PrunedTree`) or N
    sampled joint actions at every node (`expansion`: `SampledTree`, `xlvin.nn.expansion`);
    `planner` is one of your own, used in their place.
    Joint actions of several factors (a MultiDiscrete, or a Box binned per dimension: the
    `transition` takes factors `nvec`, `distribution` is their factorised categorical) read as
    the concatenation of their factors' one-hots, in the transition's input and in the edges.

    The auxiliary loss (`xlvin.nn.auxiliary`) keeps T a model of the environment: the TransE
    loss (eq. 2) with weight `transe_weight` (0.001 in the paper), its negatives drawn as
    `transe_negatives` says; with a `world_model`, the VAE variant of the paper's appendix
    (figure 10) in its place, every term with weight `transe_weight`. A rollout policy (a
    Linear(k -> sum(nvec)) on a node's embedding, made for a pruned tree and for the learned
    expansions) is distilled from the agent's own policy (`rollout_distillation`).

    Widths: where k differs from the executor's H (pixel encoders, k = 512), or with
    `projections`, a trainable `node_projection` Linear(k -> H) maps the tree's nodes into the
    executor's width; `projections` also adds a trainable Linear(H -> H) on chi_s before the
    heads (`chi_projection`): the authors' code has both ("transe2gnn", "gnn_decoder").
    `zero_chi` (an ablation) gives the heads zeros in place of chi_s.

    The accelerators need nothing of the variants: the fused PPO loss and flat Adam
    (`xlvin.accel`) take the auxiliary terms as they come, and the NumPy actor acts for a full
    tree over MLP encoders only (the rest act with this readable code).
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
        projections: bool = False,
        prune: int = 0,
        transe_negatives: str = "states",
        zero_chi: bool = False,
        world_model: VAEWorldModel | None = None,
        distribution: ActionDistribution | None = None,
        expansion: Expansion | None = None,
        planner: Planner | None = None,
    ) -> None:
        super().__init__()
        self.num_actions = num_actions
        self.distribution = distribution or Categorical(num_actions)
        self.factors = transition.nvec or (transition.num_actions,)
        self.expansion = expansion
        self.depth = depth
        self.zero_chi = zero_chi
        self.prune = prune
        self.gamma = gamma
        # the weights, registered in this order (their names and order are the saved runs')
        self.encoder = encoder
        self.transition = transition
        self.processor = processor.requires_grad_(False)
        hidden = processor.hidden
        self.node_projection: nn.Linear | None = (
            None if hidden == embedding_dim and not projections
            else nn.Linear(embedding_dim, hidden)
        )
        self.chi_projection = nn.Linear(hidden, hidden) if projections else None
        self.edge_projection = nn.Linear(transition.action_width + 1, hidden)
        self.heads = ActorCriticHeads(embedding_dim + hidden, num_actions)
        learned = expansion is not None and expansion.method in LEARNED
        self.rollout_policy = nn.Linear(embedding_dim, num_actions) if prune or learned else None
        self.world_model = world_model  # None: a plain attribute, no weights (TransE's keys kept)
        # the parts that hold no weights
        self.planner = planner if planner is not None else make_planner(depth, prune, expansion)
        self.auxiliary: AuxiliaryLoss = (TransE(transe_weight, transe_negatives)
                                         if world_model is None else WorldModel(transe_weight))
        # [one-hot(a), gamma] of every action (not saved: a function of the constructor's
        # arguments); none with a sampled expansion, which embeds the actions it draws
        actions = (torch.zeros(0, transition.action_width) if expansion is not None
                   else one_hots(joint_actions(transition.nvec), transition.nvec)
                   if transition.nvec else torch.eye(transition.num_actions))
        self.register_buffer("edge_input", self.with_gamma(actions), persistent=False)

    @property
    def transe_weight(self) -> float:
        """The auxiliary loss's weight (TransE's, or every world-model term's)."""
        return self.auxiliary.weight

    @transe_weight.setter
    def transe_weight(self, weight: float) -> None:
        self.auxiliary.weight = weight

    @property
    def transe_negatives(self) -> str | None:
        """How the TransE loss draws its negatives (None with a world model)."""
        return getattr(self.auxiliary, "negatives", None)

    @transe_negatives.setter
    def transe_negatives(self, negatives: str) -> None:
        if not isinstance(self.auxiliary, TransE):
            raise ValueError("an agent with a world model has no TransE negatives")
        self.auxiliary.negatives = negatives

    def with_gamma(self, one_hot: torch.Tensor) -> torch.Tensor:
        """[one-hot(a), gamma] [N, width + 1] of actions' one-hots [N, width]."""
        return torch.cat([one_hot, one_hot.new_full((len(one_hot), 1), self.gamma)], 1)

    def edge_features(self) -> torch.Tensor:
        """The embedded edge feature of every action, e_a = Linear([one-hot(a), gamma]): [A, H]."""
        return self.edge_projection(self.edge_input)

    def embed_actions(self, actions: torch.Tensor, dtype: torch.dtype) -> torch.Tensor:
        """The embedded edge feature of joint actions [N, d] (long): Linear([one-hots, gamma])
        [N, H] (the edges of a sampled tree)."""
        return self.edge_projection(self.with_gamma(one_hots(actions, self.factors).to(dtype)))

    def plan(self, h: torch.Tensor) -> torch.Tensor:
        """chi_s [B, H] from h_s [B, k]: the planner's tree and the executor run over it (paper
        3.2, steps 2-4), then `chi_projection` if there is one; zeros [B, H] with `zero_chi`."""
        if self.zero_chi:
            return h.new_zeros(h.shape[0], self.edge_projection.out_features)
        chi = self.planner.plan(self, h)
        return chi if self.chi_projection is None else self.chi_projection(chi)

    def forward(self, obs: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """obs [B, ...] -> logits [B, A], values [B] of A(h_s, chi_s), V(h_s, chi_s) (step 5)."""
        h = self.encoder(obs)  # [B, k]
        return self.heads(torch.cat([h, self.plan(h)], dim=-1))

    def forward_with_aux(
        self, batch: TransitionBatch
    ) -> tuple[torch.Tensor, torch.Tensor, dict[str, torch.Tensor]]:
        """What a PPO minibatch needs: `forward(batch.obs)`, the auxiliary loss's terms and the
        rollout policy's distillation, with one encoder pass (over [obs; next_obs] where the
        auxiliary loss reads the next states' embeddings too)."""
        h, h_next = self.auxiliary.encode(self.encoder, batch)  # [B, k], [B, k] or None
        logits, values = self.heads(torch.cat([h, self.plan(h)], dim=-1))  # [B, A], [B]
        return logits, values, {**self.auxiliary.losses(self, h, h_next, batch),
                                **rollout_distillation(self.rollout_policy, self.factors, h,
                                                       logits)}

    def auxiliary_losses(self, batch: TransitionBatch) -> dict[str, torch.Tensor]:
        """The auxiliary terms of `forward_with_aux` alone."""
        return self.forward_with_aux(batch)[2]

    def train(self, mode: bool = True) -> "XLVINAgent":
        """Like nn.Module.train, but the frozen processor always stays in evaluation mode."""
        super().train(mode)
        self.processor.eval()
        return self
