"""The PPO loss of `xlvin.nn.ppo_loss.ppo_loss` as one autograd node with its gradient in
closed form, computed in NumPy.

Written with autograd the loss is ~30 small nodes on [B, A] and [B] tensors, whose recording
and backward cost more than a small network's own forward and backward. This node computes the
same value and gradient (including autograd's conventions at the kinks: a tie in a min or max
splits the gradient in half, clamp passes it on its closed range) in NumPy, where each tiny op
has less fixed cost. Only logits and values cross over (to the CPU, if they are elsewhere: on a
GPU this forces a device sync per minibatch, so the trainer uses it on CPU only). Equal to the
readable loss up to float rounding (tests/test_ppo_loss.py); timings in benchmarks/notes.md.
"""

import numpy as np
import torch
from torch import Tensor

from xlvin.nn.ppo_loss import PPOLossTerms


def log_softmax(logits: np.ndarray) -> np.ndarray:
    """log pi(.|s) from logits [B, A] (max-shifted, as torch.log_softmax)."""
    shifted = logits - logits.max(axis=-1, keepdims=True)
    return shifted - np.log(np.exp(shifted).sum(axis=-1, keepdims=True))


def _clip(x: np.ndarray, low: float, high: float) -> np.ndarray:
    """np.clip as two ufuncs (np.clip's Python wrapper costs more than the work on [B])."""
    return np.minimum(np.maximum(x, low), high)


def _numpy(t: Tensor) -> np.ndarray:
    return t.detach().cpu().numpy()


class _PPOLoss(torch.autograd.Function):
    @staticmethod
    @np.errstate(over="ignore", invalid="ignore")  # a diverged loss: inf or NaN, checked after
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
        x, v, a = _numpy(logits), _numpy(values), _numpy(actions)
        adv, ret, v_old = _numpy(advantages), _numpy(returns), _numpy(old_values)
        n = x.shape[0]
        logp = log_softmax(x)
        probs = np.exp(logp)
        entropy = -(probs * logp).sum(axis=-1)  # [B]
        rows = np.arange(n)
        raw_logratio = logp[rows, a] - _numpy(old_logprobs)
        logratio = _clip(raw_logratio, -logratio_limit, logratio_limit)
        ratio = np.exp(logratio)
        # max(-A r, -A clip(r)) = -min(A r, A clip(r))
        gain = adv * ratio
        gain_clipped = adv * _clip(ratio, 1 - clip, 1 + clip)
        policy_loss = -np.minimum(gain, gain_clipped).sum() / n

        error = v - ret
        sq_error = np.square(error)
        if clip_value_loss:
            delta = v - v_old
            delta_clipped = _clip(delta, -clip, clip)
            clipped_error = v_old + delta_clipped - ret
            sq_clipped = np.square(clipped_error)
            value_loss = 0.5 * np.maximum(sq_error, sq_clipped).sum() / n
        else:
            value_loss = 0.5 * sq_error.sum() / n
        mean_entropy = entropy.sum() / n
        loss = policy_loss - ent_coef * mean_entropy + vf_coef * value_loss
        ratio_minus_1 = ratio - 1
        terms = np.array(
            [loss, policy_loss, value_loss, mean_entropy, (ratio_minus_1 - logratio).sum() / n,
             np.count_nonzero(np.abs(ratio_minus_1) > clip) / n], dtype=x.dtype,
        )

        # d loss / d log pi(a_i|s_i) = -A_i r_i / B where the min passes the gradient to r, and
        # where the log-ratio is not clamped (clip returns its input exactly there). Inside the
        # clip range both sides of the min are equal and both carry r (autograd gives each
        # half); outside it only the unclipped side does, and only when it is the smaller one (a
        # tie there means A_i = 0).
        through_ratio = (gain <= gain_clipped) & (logratio == raw_logratio)
        grad_logprob = np.where(through_ratio, gain, 0.0) * (-1.0 / n)
        # d loss / d V_i: 1/2 max(e^2, e_clip^2) -> e, or e_clip where the clamp of V - V_old
        # passes; half each on a tie.
        if clip_value_loss:
            from_clipped = np.where(delta_clipped == delta, clipped_error, 0.0)
            grad_values = np.where(
                sq_error > sq_clipped, error,
                np.where(sq_error < sq_clipped, from_clipped, 0.5 * (error + from_clipped)),
            )
        else:
            grad_values = error
        # d log pi(a|s) / d logits = onehot(a) - pi;  d(-c_H H) / d logits = c_H pi (log pi + H).
        grad_logits = probs * ((ent_coef / n) * (logp + entropy[:, None]) - grad_logprob[:, None])
        grad_logits[rows, a] += grad_logprob
        ctx.grads = (  # type: ignore[attr-defined]
            torch.from_numpy(grad_logits.astype(x.dtype, copy=False)).to(logits.device),
            torch.from_numpy((grad_values * (vf_coef / n)).astype(v.dtype, copy=False)).to(values.device),
        )
        loss_and_terms = torch.from_numpy(terms).to(logits.device)
        terms_t = loss_and_terms[1:]
        ctx.mark_non_differentiable(terms_t)
        return loss_and_terms[0], terms_t

    @staticmethod
    def backward(  # type: ignore[override]
        ctx: torch.autograd.function.FunctionCtx, grad_loss: Tensor, _grad_terms: Tensor
    ) -> tuple[Tensor | None, ...]:
        grad_logits, grad_values = ctx.grads  # type: ignore[attr-defined]
        return (grad_logits * grad_loss, grad_values * grad_loss) + (None,) * 10


def fused_ppo_loss(
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
    """`xlvin.nn.ppo_loss.ppo_loss`, same arguments and results, as one autograd node."""
    loss, terms = _PPOLoss.apply(
        logits, values, actions, old_logprobs, advantages, returns, old_values, clip,
        clip_value_loss, ent_coef, vf_coef, logratio_limit,
    )
    return loss, PPOLossTerms(*terms.unbind())
