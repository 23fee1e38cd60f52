"""The TransE loss for latent transition models (paper eq. 2, Bordes et al. 2013; Kipf et al. 2020)."""

import torch
from torch import nn

from xlvin.nn.names import NEGATIVES
from xlvin.nn.transition import TransitionModel


def energy(x: torch.Tensor, y: torch.Tensor, sigma: float = 0.5) -> torch.Tensor:
    """d(x, y) = ||x - y||^2 / (2 sigma^2), row-wise: [B, k], [B, k] -> [B]."""
    return (x - y).pow(2).sum(-1) / (2 * sigma**2)


def transe_loss(
    encoder: nn.Module,
    transition: TransitionModel,
    obs: torch.Tensor,
    actions: torch.Tensor,
    next_obs: torch.Tensor,
    hinge: float = 1.0,
    sigma: float = 0.5,
    generator: torch.Generator | None = None,
    negatives: str = "states",
) -> torch.Tensor:
    """Paper eq. 2, averaged over the batch:

    L = d(z(s) + T(z(s), a), z(s')) + max(0, xi - d(z(s~), z(s'))),

    with negatives s~ drawn from the batch as `negatives` says (`NEGATIVES`). The paper
    compares the negative with z(s'); one public version compares it with z(s). We follow the
    paper.
    """
    z, z_next = encoder(torch.cat([obs, next_obs])).chunk(2)  # [B, k] each, one encoder pass
    predicted = z + transition(z, actions)
    return transe_objective(z, predicted, z_next, hinge, sigma, generator, negatives)


def negative_indices(batch: int, negatives: str,
                     generator: torch.Generator | None = None) -> torch.Tensor:
    """The rows [B] of a minibatch of B transitions that TransE's negatives take: "states", one
    permutation (of z(s)); "next_states", B draws with replacement (of z(s'): the authors'
    `torch.randint(0, B, (B,))`), from `generator` (torch's global RNG when None)."""
    if negatives == "states":
        return torch.randperm(batch, generator=generator)
    if negatives == "next_states":
        return torch.randint(0, batch, (batch,), generator=generator)
    raise ValueError(f"negatives must be one of {NEGATIVES}, got {negatives!r}")


def transe_objective(
    z: torch.Tensor,
    predicted: torch.Tensor,
    z_next: torch.Tensor,
    hinge: float = 1.0,
    sigma: float = 0.5,
    generator: torch.Generator | None = None,
    negatives: str = "states",
) -> torch.Tensor:
    """`transe_loss` from its embeddings: z(s), the prediction z(s) + T(z(s), a) and z(s'), each
    [B, k] (for a caller that already has some of them, e.g. XLVIN's tree holds the prediction
    for every action). The negatives are drawn from `generator` (torch's global RNG when None):
    "states", one permutation of z(s); "next_states", B indices into z(s') with replacement
    (`torch.randint(0, B, (B,))`, the very draw of the authors' code)."""
    drawn = negative_indices(z.shape[0], negatives, generator)  # [B]
    sampled = (z if negatives == "states" else z_next)[drawn]  # [B, k]
    positive = energy(predicted, z_next, sigma)
    negative = torch.clamp(hinge - energy(sampled, z_next, sigma), min=0.0)
    return (positive + negative).mean()


@torch.no_grad()
def hits_at_1(
    encoder: nn.Module,
    transition: TransitionModel,
    obs: torch.Tensor,
    actions: torch.Tensor,
    next_obs: torch.Tensor,
) -> float:
    """Fraction of transitions whose true z(s') is the nearest, among the batch's z(s'), to the
    prediction z(s) + T(z(s), a) (the ranking metric of Kipf et al. 2020, over one batch)."""
    z = encoder(obs)
    predicted = z + transition(z, actions)
    distances = torch.cdist(predicted, encoder(next_obs))  # [B, B]
    right = torch.arange(len(obs), device=distances.device)
    return (distances.argmin(dim=1) == right).float().mean().item()
