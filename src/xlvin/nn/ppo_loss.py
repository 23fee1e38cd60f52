"""PPO's loss (Schulman et al. 2017, eqs. 7 and 9) on one minibatch.

    L = -mean_i min(r_i A_i, clip(r_i, 1 - eps, 1 + eps) A_i)        (clipped surrogate)
        - c_H mean_i H(pi(.|s_i))                                    (entropy bonus)
        + c_V mean_i 1/2 max((V_i - R_i)^2, (V_i^clip - R_i)^2)      (clipped value loss)

with r_i = exp(clamp(log pi(a_i|s_i) - log pi_old(a_i|s_i), -L, L)) and
V^clip = V_old + clamp(V - V_old, -eps, eps). The clamp of the log-ratio only matters for a
policy that moved by more than e^L: it keeps the loss finite there.

pi is the categorical of the logits, or the `distribution` they parameterise
(`xlvin.nn.distributions`: a factorised categorical, a diagonal Gaussian).
`xlvin.accel.fused_ppo_loss.fused_ppo_loss` computes the same value and gradient as one
autograd node for the categorical (tests/test_ppo_loss.py).
"""

from dataclasses import dataclass

import torch
from torch import Tensor

from xlvin.nn.distributions import ActionDistribution, Categorical


@dataclass(frozen=True)
class PPOLossTerms:
    """The terms of one minibatch's loss, detached, for logging."""

    policy_loss: Tensor
    value_loss: Tensor
    entropy: Tensor
    approx_kl: Tensor  # Schulman's k3 estimator, mean of (r - 1) - log r
    clipfrac: Tensor  # fraction of |r - 1| > eps


def ppo_loss(
    logits: Tensor,
    values: Tensor,
    actions: Tensor,
    old_logprobs: Tensor,
    advantages: Tensor,
    returns: Tensor,
    old_values: Tensor,
    clip: float,
    clip_value_loss: bool,
    ent_coef: float,
    vf_coef: float,
    logratio_limit: float,
    distribution: ActionDistribution | None = None,
) -> tuple[Tensor, PPOLossTerms]:
    """The PPO loss of one minibatch (module docstring) and its detached terms.

    logits [B, P] (the distribution's parameters) and values [B] carry the gradient; actions
    [B, ...] (as the distribution reads them), old_logprobs, advantages (normalised by the caller
    if wanted), returns and old_values [B] are data. `distribution` defaults to the categorical.
    """
    dist = distribution or Categorical(logits.shape[-1])
    entropy = dist.entropy(logits)  # [B]
    logratio = dist.log_prob(logits, actions) - old_logprobs
    logratio = logratio.clamp(-logratio_limit, logratio_limit)
    ratio = logratio.exp()
    surrogate = torch.min(advantages * ratio, advantages * ratio.clamp(1 - clip, 1 + clip))
    policy_loss = -surrogate.mean()

    squared_error = (values - returns).square()
    if clip_value_loss:
        clipped = old_values + (values - old_values).clamp(-clip, clip)
        squared_error = torch.max(squared_error, (clipped - returns).square())
    value_loss = 0.5 * squared_error.mean()

    loss = policy_loss - ent_coef * entropy.mean() + vf_coef * value_loss
    with torch.no_grad():
        terms = PPOLossTerms(
            policy_loss=policy_loss.detach(),
            value_loss=value_loss.detach(),
            entropy=entropy.mean(),
            approx_kl=((ratio - 1) - logratio).mean(),
            clipfrac=((ratio - 1).abs() > clip).float().mean(),
        )
    return loss, terms
