"""Each accelerator proves itself against the readable code it replaces, the first time it meets
that code in this process: the NumPy actor against the policy's own forward (`xlvin.nn`), on the
first batch it acts on; the fused PPO loss against `xlvin.nn.ppo_loss.ppo_loss`, values and
gradients, on the first minibatch; the flat Adam against `torch.optim.Adam` with
`clip_grad_norm_` as their definitions write them, over three steps of a small synthetic
problem; the executor's accelerated pre-training (`xlvin.accel.numpy_executor`,
`xlvin.accel.dense_executor`) against the executor's forward, on its first block. Where they differ beyond the
stated tolerance, the readable code runs instead, from then on in this process, and one
`AcceleratorFallback` warning names the module. So an edit of `xlvin.nn` (an executor's message
function, the PPO loss, an encoder) is never bypassed in silence.

A verdict is kept per readable code: the classes of the policy's modules with every function
they define (a class re-defined in a notebook, or a method replaced, is proved again), and the
loss function's code. A proof draws no random number from the training's generators, so the
numbers of a run are those without it. Its cost, once per process: benchmarks/notes.md.
"""

import warnings
from collections.abc import Callable
from typing import Any

import numpy as np
import torch
from torch import nn

from xlvin.accel.dense_executor import dense_forward
from xlvin.accel.flat_adam import FlatAdam
from xlvin.accel.numpy_executor import NumpyEdges, NumpyExecutorTrainer

#: |fast - readable| <= atol + rtol |readable|, elementwise: the NumPy actor computes in another
#: order than torch's kernels (float32 rounding), the fused loss in NumPy.
ACTOR_TOLERANCE = {"rtol": 1e-5, "atol": 1e-5}
LOSS_TOLERANCE = {"rtol": 1e-5, "atol": 1e-6}
#: Adam's, in float32 against float64: atol in units of the learning rate where it exceeds 1 (a
#: step moves a weight by about lr, and float32 rounds a weight of 3 lr to lr / 2^22).
ADAM_TOLERANCE = {"rtol": 1e-6, "atol": 1e-6}

#: readable code's key -> whether its accelerator computes what it computes.
_verdicts: dict[tuple[Any, ...], bool] = {}

Actor = Callable[[np.ndarray], tuple[np.ndarray, np.ndarray]]


class AcceleratorFallback(UserWarning):
    """An accelerator differed from the readable code it replaces; the readable code runs."""


def code_key(*parts: Any) -> tuple[Any, ...]:
    """What the readable code of `parts` is: for a module, the class of each of its modules and
    the code of every function those classes (and their bases outside torch) define; for a
    function, its code; for a class, itself and its functions' code."""
    key: list[Any] = []
    seen: set[type] = set()

    def add_class(cls: type) -> None:
        for c in cls.__mro__:
            if c in seen or c.__module__.startswith(("torch", "builtins", "typing")):
                continue
            seen.add(c)
            key.append((c, tuple(sorted((name, f.__code__) for name, f in vars(c).items()
                                        if hasattr(f, "__code__")))))

    for part in parts:
        if isinstance(part, nn.Module):
            for module in part.modules():
                add_class(type(module))
        elif isinstance(part, type):
            add_class(part)
        else:
            key.append(getattr(part, "__code__", part))
    return tuple(key)


def _decide(key: tuple[Any, ...], check: Callable[[], str | None], fast: str,
            readable: str) -> bool:
    """The verdict for `key`, proved now by `check` (None: equal; else what differs) if new."""
    verdict = _verdicts.get(key)
    if verdict is None:
        problem = check()
        verdict = _verdicts[key] = problem is None
        if problem is not None:
            warnings.warn(f"{fast} differs from {readable} ({problem}); the readable code runs "
                          "instead in this process", AcceleratorFallback, stacklevel=4)
    return verdict


def _differs(name: str, fast: Any, readable: Any, tolerance: dict[str, float]) -> str | None:
    a = np.asarray(torch.as_tensor(fast).detach().cpu(), dtype=np.float64)
    b = np.asarray(torch.as_tensor(readable).detach().cpu(), dtype=np.float64)
    if a.shape != b.shape:
        return f"{name}: shape {list(a.shape)} against {list(b.shape)}"
    if not np.allclose(a, b, equal_nan=True, **tolerance):
        return f"{name}: differs by up to {float(np.nanmax(np.abs(a - b))):.3g}"
    return None


def actor_verdict(policy: nn.Module) -> bool | None:
    """Whether the NumPy actor computes what `policy`'s forward does, as this process proved it
    (`checked_actor`); None where it has not been proved yet."""
    return _verdicts.get(("numpy actor", code_key(policy)))


def checked_actor(policy: nn.Module, fast: Actor, readable: Actor) -> Actor:
    """The NumPy actor `fast` of `policy`, proved against `readable` (the policy's forward) on
    the first batch it acts on; `readable` where it differs."""
    key = ("numpy actor", code_key(policy))
    verdict = _verdicts.get(key)
    if verdict is not None:
        return fast if verdict else readable
    chosen: list[Actor] = []

    def act(obs: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        if not chosen:
            def check() -> str | None:
                (logits, values), (ref_logits, ref_values) = fast(obs), readable(obs)
                return (_differs("logits", logits, ref_logits, ACTOR_TOLERANCE)
                        or _differs("values", values, ref_values, ACTOR_TOLERANCE))
            chosen.append(fast if _decide(key, check, "xlvin.accel.numpy_actor",
                                          "the policy's forward in xlvin.nn") else readable)
        return chosen[0](obs)

    return act


def loss_proven(fused: Callable[..., Any], readable: Callable[..., Any], distribution: Any,
                args: tuple[torch.Tensor, ...], kwargs: dict[str, Any]) -> bool:
    """Whether the fused loss computes what `readable` (the PPO loss, `distribution`'s) does on
    this minibatch (`args`: logits, values, then the minibatch's tensors): loss, logged terms
    and the gradients of both inputs."""
    key = ("fused ppo loss", code_key(fused, readable, type(distribution)))

    def check() -> str | None:
        results = []
        for loss_fn, extra in ((fused, {}), (readable, {"distribution": distribution})):
            logits, values = (t.detach().clone().requires_grad_() for t in args[:2])
            loss, terms = loss_fn(logits, values, *args[2:], **kwargs, **extra)
            grads = torch.autograd.grad(loss, (logits, values), allow_unused=True)
            results.append((loss, terms, [torch.zeros_like(t) if g is None else g
                                          for g, t in zip(grads, (logits, values))]))
        (loss, terms, grads), (ref_loss, ref_terms, ref_grads) = results
        checks = [("loss", loss, ref_loss), ("d loss / d logits", grads[0], ref_grads[0]),
                  ("d loss / d values", grads[1], ref_grads[1])]
        checks += [(name, getattr(terms, name), getattr(ref_terms, name))
                   for name in ("policy_loss", "value_loss", "entropy", "approx_kl", "clipfrac")]
        return next((p for name, a, b in checks
                     if (p := _differs(name, a, b, LOSS_TOLERANCE)) is not None), None)

    return _decide(key, check, "xlvin.accel.fused_ppo_loss", "xlvin.nn.ppo_loss")


def _adam_steps(start: list[torch.Tensor], grads: list[list[torch.Tensor]], lr: float,
                eps: float, max_norm: float | None) -> list[torch.Tensor]:
    """Adam as Kingma & Ba write it (torch.optim.Adam's defaults: betas 0.9, 0.999, no weight
    decay), each step's gradients first clipped to global L2 norm `max_norm` as
    `torch.nn.utils.clip_grad_norm_` clips them (scaled by max_norm / (norm + 1e-6) when below
    1): the readable code `FlatAdam` replaces."""
    b1, b2 = 0.9, 0.999
    params = [t.double() for t in start]
    m = [torch.zeros_like(p) for p in params]
    v = [torch.zeros_like(p) for p in params]
    for t, step in enumerate(grads, start=1):
        g = [x.double() for x in step]
        if max_norm is not None:
            norm = torch.sqrt(sum((x * x).sum() for x in g))
            g = [x * torch.clamp(max_norm / (norm + 1e-6), max=1.0) for x in g]
        for i, gi in enumerate(g):
            m[i] = b1 * m[i] + (1 - b1) * gi
            v[i] = b2 * v[i] + (1 - b2) * gi * gi
            m_hat, v_hat = m[i] / (1 - b1 ** t), v[i] / (1 - b2 ** t)
            params[i] = params[i] - lr * m_hat / (torch.sqrt(v_hat) + eps)
    return params


def flat_adam_proven(lr: float, eps: float, max_norm: float | None) -> bool:
    """Whether `FlatAdam` (with its gradient clipping to `max_norm`, None: none) steps as Adam
    does after `clip_grad_norm_` (`_adam_steps`): three steps on a small problem of its own (a
    generator of its own, so no training's random stream is touched)."""
    key = ("flat adam", code_key(FlatAdam), lr, eps, max_norm)

    def check() -> str | None:
        generator = torch.Generator().manual_seed(0)
        shapes = [(5, 3), (3,), (1,)]
        start = [torch.randn(s, generator=generator) for s in shapes]
        grads = [[torch.randn(s, generator=generator) * 10 for s in shapes] for _ in range(3)]
        params = [nn.Parameter(t.clone()) for t in start]
        flat = FlatAdam(params, lr=lr, eps=eps)
        for step in grads:
            flat.zero_grad()
            for p, g in zip(params, step):
                p.grad.copy_(g)
            if max_norm is not None:
                flat.clip_grad_norm_(max_norm)
            flat.step()
        expected = _adam_steps(start, grads, lr, eps, max_norm)
        tolerance = {**ADAM_TOLERANCE, "atol": ADAM_TOLERANCE["atol"] * max(1.0, lr)}
        return next((p for i, (a, b) in enumerate(zip(params, expected))
                     if (p := _differs(f"parameter {i}", a, b, tolerance)) is not None), None)

    return _decide(key, check, "xlvin.accel.flat_adam", "Adam with clip_grad_norm_")


def pretraining_proven(executor: nn.Module, graph: Any, edges: Any, values: torch.Tensor,
                       target: torch.Tensor, in_numpy: bool) -> bool:
    """Whether the executor's accelerated pre-training computes the loss its readable forward
    (`VIExecutor.forward` on the MDP graph) gives on one block: the hand-written NumPy step
    (`xlvin.accel.numpy_executor`, `in_numpy`) or the dense forward
    (`xlvin.accel.dense_executor`), both on the same graph's in-edges."""
    fast_name = "xlvin.accel.numpy_executor" if in_numpy else "xlvin.accel.dense_executor"
    key = ("executor pre-training", fast_name, code_key(executor))

    def check() -> str | None:
        with torch.no_grad():
            readable = torch.nn.functional.mse_loss(executor(graph, values), target)
            if in_numpy:
                trainer = NumpyExecutorTrainer(executor)  # a copy of the weights, not stepped
                fast = trainer.loss_and_grad(NumpyEdges.from_in_edges(edges), values.numpy(),
                                             target.numpy())
            else:
                fast = torch.nn.functional.mse_loss(dense_forward(executor, edges, values), target)
        return _differs("the loss", fast, readable, LOSS_TOLERANCE)

    return _decide(key, check, fast_name, "the executor's forward in xlvin.nn.executor")
