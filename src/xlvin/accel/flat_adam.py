"""Adam over a module's trainable parameters kept in one flat buffer: an accelerator of
`torch.optim.Adam` plus `torch.nn.utils.clip_grad_norm_`.

PPO takes many optimizer steps on networks of a few thousand weights, where the cost is per
tensor, not per weight. `FlatAdam` makes every parameter (and its gradient) a view into one flat
tensor, so zeroing and clipping are one op each and Adam's fused kernel runs once, on one tensor.
It follows torch.optim.Adam step for step (tests/test_ppo_loss.py); timings in
benchmarks/notes.md.
"""

from collections.abc import Iterable
from typing import Any

import torch
from torch import nn
from torch.optim.adam import adam


class FlatAdam:
    """Adam (Kingma & Ba 2015; torch.optim.Adam's fused kernel, no weight decay) on one flat
    parameter whose slices are the given parameters.

    After construction `p.data` and `p.grad` of every given parameter are views into
    `self.flat` and `self.flat.grad` (so a later FlatAdam over some of the same parameters takes
    them away from this one: use one per parameter at a time): the module computes with them unchanged, autograd
    accumulates into the flat gradient in place, and `load_state_dict` on the module copies into
    the flat buffer. `zero_grad` (call it before every backward) zeroes the flat gradient in
    place and re-binds the views (a gradient set to None would be cut off from the flat one), so a
    parameter left without gradient in a step gets a zero-gradient Adam step instead of none.

    It is not a torch.optim.Optimizer (whose per-step bookkeeping outweighs the update itself for
    small nets) but offers what the training loops and checkpoints use of one: `param_groups`
    (its "lr" is read at every step, for schedules), `zero_grad`, `step`, `state_dict` and
    `load_state_dict` in torch.optim.Adam's layout (step, exp_avg, exp_avg_sq of parameter 0).
    """

    def __init__(
        self,
        params: Iterable[nn.Parameter],
        lr: float,
        eps: float = 1e-8,
        betas: tuple[float, float] = (0.9, 0.999),
    ) -> None:
        params = [p for p in params if p.requires_grad]
        if not params:
            raise ValueError("FlatAdam got no trainable parameter")
        flat = torch.cat([p.detach().reshape(-1) for p in params])
        grad = torch.zeros_like(flat)
        self.params, self.grad_views = params, []
        offset = 0
        for p in params:
            n = p.numel()
            p.data = flat[offset : offset + n].view_as(p)
            self.grad_views.append(grad[offset : offset + n].view_as(p))
            offset += n
        self.flat = nn.Parameter(flat)
        self.flat.grad = grad
        self.param_groups = [{"params": [self.flat], "lr": lr, "betas": betas, "eps": eps}]
        self.step_t = torch.zeros((), dtype=torch.float32, device=flat.device)
        self.exp_avg, self.exp_avg_sq = torch.zeros_like(flat), torch.zeros_like(flat)
        self.zero_grad()

    def release(self) -> None:
        """Give every parameter its own storage again (a copy of its slice of the flat buffer)
        and no gradient: after training, the module then computes exactly as the same weights
        loaded from a file do. A view at an offset into the flat buffer can take another kernel
        path than a tensor of its own (seen: logits 3.7e-9 apart on an AMD EPYC)."""
        for p in self.params:
            p.data = p.data.clone()
            p.grad = None

    def zero_grad(self) -> None:
        """Zero the flat gradient in place and make every parameter's `.grad` its view again
        (another optimizer, e.g. a pre-training phase on some of the same parameters, may have
        set it to None)."""
        assert self.flat.grad is not None
        self.flat.grad.zero_()
        for p, view in zip(self.params, self.grad_views):
            p.grad = view

    def clip_grad_norm_(self, max_norm: float) -> torch.Tensor:
        """Scale the gradient to global L2 norm at most `max_norm` (as
        `torch.nn.utils.clip_grad_norm_`: coefficient max_norm / (norm + 1e-6), capped at 1);
        returns the norm before clipping. The norm is summed over the flat vector, so it differs
        from clip_grad_norm_'s norm of per-tensor norms by float rounding only."""
        grad = self.flat.grad
        assert grad is not None
        total = torch.linalg.vector_norm(grad)
        grad.mul_((max_norm / (total + 1e-6)).clamp_(max=1.0))
        return total

    @torch.no_grad()
    def step(self) -> None:
        """One Adam step by torch's fused kernel (`torch.optim.adam.adam`, the functional form
        torch.optim.Adam calls): one pass over the flat tensors, which matters for pixel encoders
        (1.7 M weights)."""
        group = self.param_groups[0]
        beta1, beta2 = group["betas"]
        adam(
            [self.flat], [self.flat.grad], [self.exp_avg], [self.exp_avg_sq], [], [self.step_t],
            fused=True, amsgrad=False, beta1=beta1, beta2=beta2, lr=group["lr"],
            weight_decay=0.0, eps=group["eps"], maximize=False,
        )

    def state_dict(self) -> dict[str, Any]:
        state = {"step": self.step_t, "exp_avg": self.exp_avg, "exp_avg_sq": self.exp_avg_sq}
        groups = [{k: v for k, v in g.items() if k != "params"} | {"params": [0]}
                  for g in self.param_groups]
        return {"state": {0: state} if self.step_t > 0 else {}, "param_groups": groups}

    def load_state_dict(self, state_dict: dict[str, Any]) -> None:
        """Restore what `state_dict` gave (raises ValueError if it does not fit)."""
        (group,) = state_dict["param_groups"]
        state = state_dict["state"].get(0)
        if state is not None:
            if state["exp_avg"].shape != self.flat.shape:
                raise ValueError(
                    f"optimizer state for {tuple(state['exp_avg'].shape)} weights, this model "
                    f"has {tuple(self.flat.shape)}"
                )
            self.exp_avg.copy_(state["exp_avg"])
            self.exp_avg_sq.copy_(state["exp_avg_sq"])
            self.step_t.copy_(state["step"])
        self.param_groups[0].update({k: v for k, v in group.items() if k != "params"})
