"""Agents: the XLVIN policy network (paper section 3.2) and the model-free PPO baseline."""

import torch
from torch import nn

from xlvin.nn.distributions import (
    ActionDistribution,
    Categorical,
    DiagGaussian,
    StateDependentGaussian,
)
from xlvin.nn.executor import MessagePassing
from xlvin.nn.expansion import LEARNED, Expansion
from xlvin.nn.heads import ActorCriticHeads
from xlvin.nn.policy import ActorCritic, TransitionBatch
from xlvin.nn.transe import energy, transe_objective, weighted_transe_loss
from xlvin.nn.transition import TransitionModel, joint_actions, one_hots
from xlvin.nn.planners import planner
from xlvin.nn.vae import VAEWorldModel

#: Weight of the rollout policy's distillation loss (a pruned tree only). Its input and target
#: are detached, so it trains the rollout policy alone; the weight only keeps its gradient small
#: within PPO's global gradient-norm clip.
DISTILLATION_WEIGHT = 0.01


class PPOAgent(ActorCritic):
    """The paper's "PPO" baseline: XLVIN without tree and executor.

    pi(a|s) = A(h_s), V(s) = V(h_s) with h_s = z(s). With a `transition` model, the TransE loss
    (eq. 2, weight `transe_weight`) is added to PPO's, shaping the encoder as it shapes XLVIN's,
    though the policy never uses the transition: the authors' public code trains its PPO baseline
    so.

    `distribution` (default: a categorical over `num_actions`) is what the actor head's output
    parameterises; for a `DiagGaussian` the heads add its state-independent log standard
    deviation, initialised to `log_std_init` (a matrix for gSDE's `StateDependentGaussian`).

    `critic_encoder` (ours, not the paper's: Stable-Baselines3's default for vector observations)
    gives the critic its own encoder of the same shape, V(s) = V(z_V(s)), where the paper's
    baseline shares z between actor and critic.
    """

    def __init__(
        self,
        encoder: nn.Module,
        embedding_dim: int,
        num_actions: int,
        transition: TransitionModel | None = None,
        transe_weight: float = 1e-3,
        transe_negatives: str = "states",
        distribution: ActionDistribution | None = None,
        log_std_init: float = 0.0,
        critic_encoder: nn.Module | None = None,
    ) -> None:
        super().__init__()
        self.num_actions = num_actions
        self.distribution = distribution or Categorical(num_actions)
        self.encoder = encoder
        self.critic_encoder = critic_encoder
        gaussian = isinstance(self.distribution, DiagGaussian)
        self.heads = ActorCriticHeads(embedding_dim, num_actions,
                                      log_std_init if gaussian else None,
                                      sde=isinstance(self.distribution, StateDependentGaussian))
        self.transition = transition
        self.transe_weight = transe_weight
        self.transe_negatives = transe_negatives

    def forward(self, obs: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """obs [B, ...] -> logits [B, A] (the distribution's parameters), values [B]."""
        if self.critic_encoder is None:
            return self.heads(self.encoder(obs))
        return self.heads(self.encoder(obs), self.critic_encoder(obs))

    def auxiliary_losses(self, batch: TransitionBatch) -> dict[str, torch.Tensor]:
        """The TransE loss (eq. 2) times `transe_weight`, when there is a transition model."""
        if self.transition is None:
            return {}
        return weighted_transe_loss(self.encoder, self.transition, self.transe_weight, batch,
                                    self.transe_negatives)


class XLVINAgent(ActorCritic):
    """XLVIN policy network (paper section 3.2).

    h_s = z(s); a latent tree of depth K over all actions is grown with h' = h + T(h, a); the
    frozen pre-trained processor X runs K times over it (messages from child to parent, edge
    features = a trainable projection of [one-hot(a), gamma]); chi_s is the root's executed
    embedding and pi(a|s) = A(h_s, chi_s), V(s) = V(h_s, chi_s). The transition model gets the PPO
    gradient plus the TransE loss (paper eq. 2) with weight `transe_weight` (0.001 in the paper),
    its negatives drawn as `transe_negatives` says (`xlvin.nn.transe.NEGATIVES`).

    When the embedding width k differs from the executor's H (pixel encoders, k = 512), or with
    `projections`, a trainable `node_projection` Linear(k -> H) maps every node of the tree into
    the executor's width; the tree is then grown directly in that width
    (`expand_projected_tree`). `projections` also adds a trainable Linear(H -> H) on chi before
    the heads (`chi_projection`): the authors' code has both layers ("transe2gnn", "gnn_decoder").

    `zero_chi` (an ablation, not the paper's) gives the heads zeros in place of chi_s: the
    same network without any planning, the transition model trained by the TransE term alone.

    `prune` > 0 (ours, not the paper's) grows a pruned tree instead (`expand_pruned_tree`): below
    depth 1 each node expands only the `prune` actions that a rollout policy ranks highest. The
    rollout policy, a Linear(k -> A) on a node's embedding, is distilled from the agent's own
    policy as I2A distils its rollout policy (Racaniere et al. 2017; the paper's section 3.2
    suggests it): cross-entropy from pi(.|s) to it at the roots, both detached, added to PPO's
    loss with weight `DISTILLATION_WEIGHT`.

    Joint actions of several factors (a MultiDiscrete, or a Box binned per dimension: the
    `transition` takes factors `nvec`, `distribution` is their factorised categorical) read as
    the concatenation of their factors' one-hots, in the transition's input and in the edge
    features. `expansion` (ours, `xlvin.nn.expansion`) grows a tree in which every node, the
    roots included, expands N sampled joint actions instead of all of them; its learned methods
    read the rollout policy, distilled as above (per factor).

    `world_model` (the paper's appendix "world models" variant, figure 10) replaces the TransE
    term by a VAE's (`xlvin.nn.vae.VAEWorldModel`: reconstruction + KL, the embedding h_s its
    posterior mean) and trains the transition model, ours, to predict the next state's embedding:
    d(h_s + T(h_s, a), h_s') with h_s and h_s' detached (TransE's positive energy, no
    negatives), so only the VAE and PPO shape the encoder. All three terms get `transe_weight`.
    The accelerators need nothing of it: the fused PPO loss and flat Adam (`xlvin.accel`) take its
    terms as any auxiliary term, and the NumPy actor reads MLP encoders only, so a VAE agent (on
    pixels) acts with this readable code.
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
        self.transe_weight = transe_weight
        self.transe_negatives = transe_negatives
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
        self.planner = planner(depth, prune, expansion)  # holds no weights
        # [one-hot(a), gamma] of every action (not saved: a function of the constructor's
        # arguments); none with a sampled expansion, which embeds the actions it draws
        actions = (torch.zeros(0, transition.action_width) if expansion is not None
                   else one_hots(joint_actions(transition.nvec), transition.nvec)
                   if transition.nvec else torch.eye(transition.num_actions))
        self.register_buffer("edge_input", self.with_gamma(actions), persistent=False)

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
        3.2, steps 3 and 4; `xlvin.nn.planners`), then `chi_projection` if there is one; zeros
        [B, H] with `zero_chi`."""
        if self.zero_chi:
            return h.new_zeros(h.shape[0], self.edge_projection.out_features)
        chi = self.planner.plan(self, h)
        return chi if self.chi_projection is None else self.chi_projection(chi)

    def distillation_loss(self, h: torch.Tensor, logits: torch.Tensor) -> dict[str, torch.Tensor]:
        """{"distillation": weight * CE(pi(.|s), rollout policy(h_s))} with a rollout policy
        (a pruned tree, a learned expansion), both sides detached (the rollout policy learns,
        nothing else), summed over the factors of a joint action; {} without one."""
        if self.rollout_policy is None:
            return {}
        parts = zip(logits.detach().split(self.factors, dim=-1),
                    self.rollout_policy(h.detach()).split(self.factors, dim=-1))  # [B, n_j] each
        loss = sum(-(torch.softmax(target, -1) * torch.log_softmax(rollout, -1)).sum(-1)
                   for target, rollout in parts)
        return {"distillation": DISTILLATION_WEIGHT * loss.mean()}

    def forward(self, obs: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """obs [B, ...] -> logits [B, A], values [B] of A(h_s, chi_s), V(h_s, chi_s) (step 5)."""
        h = self.encoder(obs)
        return self.heads(torch.cat([h, self.plan(h)], dim=-1))

    def world_model_losses(self, h: torch.Tensor, batch: TransitionBatch) -> dict[str, torch.Tensor]:
        """The VAE variant's terms, each times `transe_weight` ({} at weight 0): reconstruction
        and KL of the batch's frames from h = h_s [B, k], and the transition model's
        d(h_s + T(h_s, a), h_s') with h_s and h_s' detached."""
        if self.transe_weight == 0:
            return {}
        assert self.world_model is not None
        reconstruction, kl = self.world_model(h, batch.obs)
        with torch.no_grad():
            target = self.encoder(batch.next_obs)  # [B, k]
        predicted = self.transition.next_embedding(h.detach(), batch.actions)  # [B, k]
        transition = energy(predicted, target).mean()
        w = self.transe_weight
        return {"vae_reconstruction": w * reconstruction, "vae_kl": w * kl,
                "transition": w * transition}

    def auxiliary_losses(self, batch: TransitionBatch) -> dict[str, torch.Tensor]:
        """The TransE loss (paper eq. 2) on the batch's transitions, times `transe_weight`, and
        the rollout policy's distillation loss (a pruned tree only); with a `world_model`, its
        terms in place of TransE's."""
        if self.world_model is not None:
            h = self.encoder(batch.obs)
            losses = self.world_model_losses(h, batch)
            if self.rollout_policy is not None:
                logits, _ = self.heads(torch.cat([h, self.plan(h)], dim=-1))
                losses.update(self.distillation_loss(h, logits))
            return losses
        losses = weighted_transe_loss(self.encoder, self.transition, self.transe_weight, batch,
                                      self.transe_negatives)
        if self.rollout_policy is not None:
            h = self.encoder(batch.obs)
            logits, _ = self.heads(torch.cat([h, self.plan(h)], dim=-1))
            losses.update(self.distillation_loss(h, logits))
        return losses

    def forward_with_aux(
        self, batch: TransitionBatch
    ) -> tuple[torch.Tensor, torch.Tensor, dict[str, torch.Tensor]]:
        """`forward(batch.obs)` and the TransE term with one encoder pass over [obs; next_obs]
        (the same values as the two calls, up to float rounding); with a `world_model`, one
        encoder pass over obs and its terms."""
        if self.world_model is not None:
            h = self.encoder(batch.obs)  # [B, k]
            logits, values = self.heads(torch.cat([h, self.plan(h)], dim=-1))
            return logits, values, {**self.world_model_losses(h, batch),
                                    **self.distillation_loss(h, logits)}
        if self.transe_weight == 0:
            z = self.encoder(batch.obs)
            logits, values = self.heads(torch.cat([z, self.plan(z)], dim=-1))
            return logits, values, self.distillation_loss(z, logits)
        z, z_next = self.encoder(torch.cat([batch.obs, batch.next_obs])).chunk(2)  # [B, k] x2
        logits, values = self.heads(torch.cat([z, self.plan(z)], dim=-1))
        predicted = self.transition.next_embedding(z, batch.actions)
        loss = transe_objective(z, predicted, z_next, negatives=self.transe_negatives)
        return logits, values, {"transe": self.transe_weight * loss,
                                **self.distillation_loss(z, logits)}

    def train(self, mode: bool = True) -> "XLVINAgent":
        """Like nn.Module.train, but the frozen processor always stays in evaluation mode."""
        super().train(mode)
        self.processor.eval()
        return self
