"""PPO's loss (Schulman et al. 2017, eqs. 7 and 9) as one autograd node with its gradient in
closed form.

    L = -mean_i min(r_i A_i, clip(r_i, 1 - eps, 1 + eps) A_i)        (clipped surrogate)
        - c_H mean_i H(pi(.|s_i))                                    (entropy bonus)
        + c_V mean_i 1/2 max((V_i - R_i)^2, (V_i^clip - R_i)^2)      (clipped value loss)

with r_i = exp(clamp(log pi(a_i|s_i) - log pi_old(a_i|s_i), -L, L)) and
V^clip = V_old + clamp(V - V_old, -eps, eps). Written with autograd this is ~30 small nodes whose
recording and backward cost more than the CartPole network itself (~0.7 ms per minibatch of 128
here); `ppo_loss` computes the same value and the same gradient (including autograd's conventions
at the kinks: a tie in a max splits the gradient in half, clamp passes it on its closed range) in
a fixed handful of ops. Tests compare value and gradient with the plain autograd formula.
"""

from dataclasses import dataclass

import torch
from torch import Tensor


@dataclass(frozen=True)
class PPOLossTerms:
    """The terms of one minibatch's loss, detached, for logging."""

    policy_loss: Tensor
    value_loss: Tensor
    entropy: Tensor
    approx_kl: Tensor  # Schulman's k3 estimator, mean of (r - 1) - log r
    clipfrac: Tensor  # fraction of |r - 1| > eps


class _PPOLoss(torch.autograd.Function):
    @staticmethod
    def forward(  # type: ignore[override]
        ctx: torch.autograd.function.FunctionCtx,
        logits: Tensor,  # [B, A]
        values: Tensor,  # [B]
        actions: Tensor,  # [B] long
        old_logprobs: Tensor,  # [B]
        advantages: Tensor,  # [B] (normalised by the caller if wanted)
        returns: Tensor,  # [B]
        old_values: Tensor,  # [B]
        clip: float,
        clip_value_loss: bool,
        ent_coef: float,
        vf_coef: float,
        logratio_limit: float,
    ) -> tuple[Tensor, Tensor]:
        n = logits.shape[0]
        logp = torch.log_softmax(logits, dim=-1)
        probs = logp.exp()
        entropy = (probs * logp).sum(-1).neg_()  # [B]
        raw_logratio = logp.gather(-1, actions.unsqueeze(-1)).squeeze(-1) - old_logprobs
        logratio = raw_logratio.clamp(-logratio_limit, logratio_limit)
        ratio = logratio.exp()
        neg_adv = advantages.neg()
        surrogate = neg_adv * ratio
        clipped = neg_adv * ratio.clamp(1 - clip, 1 + clip)
        policy_loss = torch.maximum(surrogate, clipped)

        error = values - returns
        sq_error = error.square()
        if clip_value_loss:
            delta = values - old_values
            clipped_error = old_values + delta.clamp(-clip, clip) - returns
            sq_clipped = clipped_error.square()
            value_loss = 0.5 * torch.maximum(sq_error, sq_clipped)
        else:
            value_loss = 0.5 * sq_error

        terms = torch.stack(
            [policy_loss.mean(), value_loss.mean(), entropy.mean(),
             ((ratio - 1) - logratio).mean(), ((ratio - 1).abs() > clip).float().mean()]
        )
        loss = terms[0] - ent_coef * terms[2] + vf_coef * terms[1]

        # d loss / d log pi(a_i|s_i) = -A_i r_i / B where the max passes the gradient to r, times
        # the logratio clamp's pass-through. Inside the clip range both sides of the max are
        # equal and both carry r (autograd gives each half); outside it only the unclipped side
        # does, and only when it is the larger one (a tie there means A_i = 0).
        inside = (ratio >= 1 - clip) & (ratio <= 1 + clip)
        through_ratio = inside | (surrogate > clipped)
        passes = (raw_logratio >= -logratio_limit) & (raw_logratio <= logratio_limit)
        grad_logprob = neg_adv * ratio * (through_ratio & passes) / n
        # d loss / d V_i: 1/2 max(e^2, e_clip^2) -> e or e_clip (times the clamp's pass-through),
        # half each on a tie.
        if clip_value_loss:
            passes_v = ((delta >= -clip) & (delta <= clip)).float()
            from_clipped = clipped_error * passes_v
            grad_values = torch.where(
                sq_error > sq_clipped, error,
                torch.where(sq_error < sq_clipped, from_clipped, 0.5 * (error + from_clipped)),
            )
        else:
            grad_values = error
        grad_values = grad_values * (vf_coef / n)
        ctx.save_for_backward(probs, logp, entropy, grad_logprob, grad_values, actions)
        ctx.mark_non_differentiable(terms)
        ctx.ent_scale = ent_coef / n
        return loss, terms

    @staticmethod
    def backward(  # type: ignore[override]
        ctx: torch.autograd.function.FunctionCtx, grad_loss: Tensor, _grad_terms: Tensor
    ) -> tuple[Tensor | None, ...]:
        saved = ctx.saved_tensors  # type: ignore[attr-defined]
        probs, logp, entropy, grad_logprob, grad_values, actions = saved
        # d log pi(a|s) / d logits = onehot(a) - pi;  d(-c_H H) / d logits = c_H pi (log pi + H).
        ent_scale: float = ctx.ent_scale  # type: ignore[attr-defined]
        grad_logprob_ = grad_logprob.unsqueeze(-1)
        grad_logits = probs * (ent_scale * (logp + entropy.unsqueeze(-1)) - grad_logprob_)
        grad_logits.scatter_add_(-1, actions.unsqueeze(-1), grad_logprob_)
        return (grad_logits * grad_loss, grad_values * grad_loss) + (None,) * 10


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
) -> tuple[Tensor, PPOLossTerms]:
    """The PPO loss of one minibatch (module docstring) and its detached terms.

    logits [B, A] and values [B] carry the gradient; the other tensors are data. Gradients flow
    to logits and values only.
    """
    loss, terms = _PPOLoss.apply(
        logits, values, actions, old_logprobs, advantages, returns, old_values, clip,
        clip_value_loss, ent_coef, vf_coef, logratio_limit,
    )
    return loss, PPOLossTerms(*terms.unbind())
