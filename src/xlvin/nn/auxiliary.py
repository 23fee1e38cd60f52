"""The auxiliary losses an agent adds to PPO's (paper section 3.3, "XLVIN Training"): the terms
that keep the transition model T a model of the environment while PPO's gradient flows into it.

One interface, `AuxiliaryLoss`: `encode(encoder, batch)` gives a PPO minibatch's embeddings,
h_s [B, k] and, where the loss needs them, h_s' [B, k], in the one encoder pass the policy's
forward shares; `losses(parts, h, h_next, batch)` the weighted terms, {name: scalar} ({} at
weight 0); `terms(parts, batch)` both at once, for an agent that encodes for its policy apart.

- `TransE`: the paper's, eq. 2 on the minibatch's real transitions,
  d(z(s) + T(z(s), a), z(s')) + max(0, xi - d(z(s~), z(s'))), times `weight` (0.001 in the
  paper), its negatives s~ drawn as `negatives` says (`xlvin.nn.transe.NEGATIVES`);
- `WorldModel`: the appendix's "pixel-based world models" variant (figure 10): a VAE's
  reconstruction and KL (`xlvin.nn.vae.VAEWorldModel`, the embedding its posterior mean) in
  place of TransE's, and, ours, T trained to predict the next embedding,
  d(h_s + T(h_s, a), h_s') with h_s and h_s' detached (TransE's positive energy, no negatives),
  so that only the VAE and PPO shape the encoder; every term times `weight`.

`rollout_distillation` is the loss of the rollout policy a pruned or a learned sampled tree
reads (`xlvin.nn.planners`).
"""

from dataclasses import dataclass
from typing import Protocol

import torch
from torch import nn

from xlvin.nn.policy import TransitionBatch
from xlvin.nn.transe import energy, transe_objective
from xlvin.nn.transition import TransitionModel
from xlvin.nn.vae import VAEWorldModel

Losses = dict[str, torch.Tensor]
#: Weight of the rollout policy's distillation loss. Its input and target are detached, so it
#: trains the rollout policy alone; the weight only keeps its gradient small within PPO's global
#: gradient-norm clip.
DISTILLATION_WEIGHT = 0.01


class LossParts(Protocol):
    """The modules an auxiliary loss reads (an agent has them)."""

    encoder: nn.Module  # z: observations [B, ...] -> [B, k]
    transition: TransitionModel  # T
    world_model: VAEWorldModel | None


class AuxiliaryLoss(Protocol):
    weight: float

    def encode(self, encoder: nn.Module,
               batch: TransitionBatch) -> tuple[torch.Tensor, torch.Tensor | None]: ...

    def losses(self, parts: LossParts, h: torch.Tensor, h_next: torch.Tensor | None,
               batch: TransitionBatch) -> Losses: ...

    def terms(self, parts: LossParts, batch: TransitionBatch) -> Losses: ...


@dataclass
class TransE:
    """The TransE term (paper eq. 2) times `weight`."""

    weight: float
    negatives: str = "states"

    def encode(self, encoder: nn.Module,
               batch: TransitionBatch) -> tuple[torch.Tensor, torch.Tensor | None]:
        """(z(s), z(s')) [B, k] each, one encoder pass over [obs; next_obs]; (z(s), None) at
        weight 0."""
        if self.weight == 0:
            return encoder(batch.obs), None
        h, h_next = encoder(torch.cat([batch.obs, batch.next_obs])).chunk(2)
        return h, h_next

    def losses(self, parts: LossParts, h: torch.Tensor, h_next: torch.Tensor | None,
               batch: TransitionBatch) -> Losses:
        if self.weight == 0:
            return {}
        assert h_next is not None
        predicted = parts.transition.next_embedding(h, batch.actions)  # z(s) + T(z(s), a)
        loss = transe_objective(h, predicted, h_next, negatives=self.negatives)
        return {"transe": self.weight * loss}

    def terms(self, parts: LossParts, batch: TransitionBatch) -> Losses:
        if self.weight == 0:
            return {}
        return self.losses(parts, *self.encode(parts.encoder, batch), batch)


@dataclass
class WorldModel:
    """The VAE world model's terms (the paper's appendix, figure 10), each times `weight`."""

    weight: float

    def encode(self, encoder: nn.Module,
               batch: TransitionBatch) -> tuple[torch.Tensor, torch.Tensor | None]:
        """(h_s [B, k], None): the next states' embeddings are a target, made in `losses`."""
        return encoder(batch.obs), None

    def losses(self, parts: LossParts, h: torch.Tensor, h_next: torch.Tensor | None,
               batch: TransitionBatch) -> Losses:
        """Reconstruction and KL of the batch's frames from h = h_s [B, k], and the transition
        model's d(h_s + T(h_s, a), h_s') with h_s and h_s' detached."""
        if self.weight == 0:
            return {}
        assert parts.world_model is not None
        reconstruction, kl = parts.world_model(h, batch.obs)
        with torch.no_grad():
            target = parts.encoder(batch.next_obs)  # [B, k]
        predicted = parts.transition.next_embedding(h.detach(), batch.actions)  # [B, k]
        transition = energy(predicted, target).mean()
        w = self.weight
        return {"vae_reconstruction": w * reconstruction, "vae_kl": w * kl,
                "transition": w * transition}

    def terms(self, parts: LossParts, batch: TransitionBatch) -> Losses:
        return self.losses(parts, *self.encode(parts.encoder, batch), batch)


def rollout_distillation(rollout_policy: nn.Module | None, factors: tuple[int, ...],
                         h: torch.Tensor, logits: torch.Tensor) -> Losses:
    """{"distillation": weight * CE(pi(.|s), rollout policy(h_s))} with a rollout policy, both
    sides detached (the rollout policy learns, nothing else), summed over the factors of a joint
    action: h [B, k], logits [B, sum(factors)]; {} without one. The rollout policy is distilled
    from the agent's own as I2A distils its own (Racaniere et al. 2017)."""
    if rollout_policy is None:
        return {}
    parts = zip(logits.detach().split(factors, dim=-1),
                rollout_policy(h.detach()).split(factors, dim=-1))  # [B, n_j] each
    loss = sum(-(torch.softmax(target, -1) * torch.log_softmax(rollout, -1)).sum(-1)
               for target, rollout in parts)
    return {"distillation": DISTILLATION_WEIGHT * loss.mean()}
