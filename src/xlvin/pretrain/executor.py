"""Pre-training the VI executor on synthetic MDPs (paper appendix "Pre-training"; Deac et al.
2020).

Training is teacher-forced: at every VI step t the executor gets the true V_t and regresses the
true change V_{t+1} - V_t of the Bellman backup (eq. 1) with MSE, Adam. Its config and the default
executors are `executor_config`'s, its MDPs and their seeds `executor_data`'s, its held-out
evaluation (on its own predictions from V_0 = 0) `executor_eval`'s.
"""

import math
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import torch
from threadpoolctl import threadpool_limits

from xlvin.accel import numpy_executor
from xlvin.accel.dense_executor import InEdges, dense_forward
from xlvin.accel.proof import pretraining_proven
from xlvin.accel.flat_adam import FlatAdam
from xlvin.config import to_dict
from xlvin.io.executor_file import save_executor
from xlvin.mdp.executor_graph import MDPGraph
from xlvin.mdp.value_iteration import VIResult
from xlvin.nn.executor import VIExecutor
from xlvin.pretrain.executor_config import ExecutorConfig, check_executor_config
from xlvin.pretrain.executor_data import SHUFFLE_STREAM, TRAIN_STREAM, make_mdps, solve_mdps
from xlvin.pretrain.executor_eval import evaluate_executor
from xlvin.process import seed_everything
from xlvin.progress import Progress

# Public names of this module since before the split, imported from here by users, examples and
# scripts; they live in `executor_config`.
from xlvin.pretrain.executor_config import (  # noqa: F401
    DEFAULT_EXECUTORS,
    GRAPH_FAMILIES,
    executor_command,
    executor_key,
)


def _blocks(
    groups: list[tuple[Any, list[VIResult]]], rng: np.random.Generator, batch_steps: int
) -> list[tuple[Any, torch.Tensor, torch.Tensor]]:
    """One epoch of minibatches in random order: every (MDP, VI step t) pair once, as blocks of
    (graph, V_t [K, S_total], V_{t+1} - V_t [K, S_total]) with K = batch_steps rows per group of
    MDPs. Within a group each MDP's steps are shuffled; an MDP that needs fewer VI steps than the
    group's longest is padded with re-drawn steps of its own.
    """
    blocks = []
    for graph, results in groups:
        longest = max(r.steps for r in results)
        rows = [
            np.concatenate([rng.permutation(r.steps),
                            rng.integers(r.steps, size=longest - r.steps)])
            for r in results
        ]
        v = np.concatenate([r.values[t] for r, t in zip(results, rows)], axis=1)
        d = np.concatenate([r.values[t + 1] - r.values[t] for r, t in zip(results, rows)], axis=1)
        for i in range(0, longest, batch_steps):
            blocks.append((graph, torch.as_tensor(v[i : i + batch_steps], dtype=torch.float32),
                           torch.as_tensor(d[i : i + batch_steps], dtype=torch.float32)))
    return [blocks[i] for i in rng.permutation(len(blocks))]


def _learning_rate(lr: float, step: int, total: int, cosine: bool) -> float:
    """The learning rate of Adam step `step` of `total` on the accelerated paths: the closed form
    of the cosine annealing, lr (1 + cos(pi t / T)) / 2, or lr held constant."""
    return lr * (1 + math.cos(math.pi * step / total)) / 2 if cosine else lr


class _FlatAdamOnSchedule(FlatAdam):
    """`FlatAdam` with its learning rate set before every step by `_learning_rate`."""

    def __init__(self, executor: VIExecutor, lr: float, total: int, cosine: bool) -> None:
        super().__init__(executor.parameters(), lr)
        self.lr, self.total, self.cosine, self.steps = lr, total, cosine, 0

    def step(self) -> None:
        self.param_groups[0]["lr"] = _learning_rate(self.lr, self.steps, self.total, self.cosine)
        super().step()
        self.steps += 1


class _AdamOnSchedule:
    """torch.optim.Adam and its learning-rate scheduler (CosineAnnealingLR or ConstantLR),
    stepped together.

    Adam runs torch's fused kernel (`fused=True`), as `FlatAdam` does: its square root is the
    vector unit's, exact on every CPU. The default per-tensor Adam takes `exp_avg_sq.sqrt()`
    from MKL's vector maths, whose reproducible-mode kernel starts from the approximate
    `rsqrtps` and so rounds otherwise on AMD than on Intel (docs/determinism.md)."""

    def __init__(self, executor: VIExecutor, lr: float, total: int, cosine: bool) -> None:
        self.adam = torch.optim.Adam(executor.parameters(), lr=lr, fused=True)
        self.schedule = (torch.optim.lr_scheduler.CosineAnnealingLR(self.adam, total) if cosine
                         else torch.optim.lr_scheduler.ConstantLR(self.adam, 1.0))

    def zero_grad(self) -> None:
        self.adam.zero_grad()

    def step(self) -> None:
        self.adam.step()
        self.schedule.step()


def _optimiser(
    executor: VIExecutor, cfg: ExecutorConfig, total: int, accelerate: bool
) -> _FlatAdamOnSchedule | _AdamOnSchedule:
    """Adam on `cfg.lr` with `cfg.lr_schedule` over `total` steps: over one flat parameter
    buffer (`xlvin.accel.flat_adam`) when `accelerate`, else torch.optim.Adam with its scheduler
    (the readable path, whose floats the shipped files made on it keep)."""
    kind = _FlatAdamOnSchedule if accelerate else _AdamOnSchedule
    return kind(executor, cfg.lr, total, cfg.lr_schedule == "cosine")


def pretrain_executor(
    cfg: ExecutorConfig, progress: bool = True, position: int = 0, accelerate: bool = True
) -> tuple[VIExecutor, dict[str, Any]]:
    """Train a `VIExecutor` on `cfg.train_graphs` MDPs, teacher-forced on every VI step (MSE on
    V_{t+1} - V_t), Adam with its learning rate annealed from `cfg.lr` to 0 along a cosine (or
    constant: `cfg.lr_schedule`); `progress` shows its optimiser steps (`xlvin.progress`,
    on line `position`). `accelerate` computes each step by hand in NumPy
    (`xlvin.accel.numpy_executor`) where that applies (ReLU messages, no LayerNorm, one in-edge
    per node: XLVIN-R's random deterministic MDPs), else the forward and backward with
    `xlvin.accel.dense_executor` and Adam over one flat parameter buffer
    (`xlvin.accel.flat_adam`): the same training up to float rounding, several times faster,
    other weights bit-wise (the shipped files record which path made them).

    Returns the executor (eval mode) and training statistics (loss per epoch, wall time, path).
    """
    check_executor_config(cfg)
    start = time.perf_counter()
    seed_everything(cfg.seed)
    mdps = make_mdps(cfg.family, cfg.states, cfg.actions, cfg.train_graphs, cfg.seed,
                     TRAIN_STREAM, cfg.gamma, cfg.maze_size)
    results = solve_mdps(mdps, cfg.tol)
    groups = [
        (MDPGraph.from_mdps(mdps[i : i + cfg.batch_graphs]), results[i : i + cfg.batch_graphs])
        for i in range(0, len(mdps), cfg.batch_graphs)
    ]
    executor = VIExecutor(cfg.hidden, cfg.aggregation, cfg.layer_norm, cfg.messages)
    readable = groups
    if accelerate:
        groups = [(InEdges.from_graph(graph), rs) for graph, rs in groups]
    rng = np.random.default_rng([SHUFFLE_STREAM, cfg.seed])
    per_epoch = sum(-(-max(r.steps for r in rs) // cfg.batch_steps) for _, rs in groups)
    total_steps = cfg.epochs * per_epoch
    in_numpy = accelerate and numpy_executor.applies(executor, [edges for edges, _ in groups])
    if accelerate:  # proved on one block of the first group (a generator of its own)
        graph, v, target = _blocks(readable[:1], np.random.default_rng(0), cfg.batch_steps)[0]
        if not pretraining_proven(executor, graph, groups[0][0], v, target, in_numpy):
            groups, accelerate, in_numpy = readable, False, False
    with Progress("pre-training executor", total_steps, "step", progress, position) as bar:
        if in_numpy:
            losses = _train_in_numpy(executor, cfg, groups, rng, total_steps, bar)
        else:
            losses = _train_in_torch(executor, cfg, groups, rng, total_steps, accelerate, bar)
    stats = {
        "train_mse_per_epoch": losses,
        "train_seconds": time.perf_counter() - start,
        "optimiser_steps": total_steps,
        "vi_steps_mean": float(np.mean([r.steps for r in results])),
        "accelerated": accelerate,
    }
    return executor.eval(), stats


def _epochs(
    cfg: ExecutorConfig, groups: list[tuple[Any, list[VIResult]]], rng: np.random.Generator,
    step: Callable[[Any, torch.Tensor, torch.Tensor], float], bar: Progress,
) -> list[float]:
    """`cfg.epochs` passes over `groups` in blocks (`_blocks`), `step(graph, v, target)` on each
    returning its loss; the mean training loss per epoch."""
    losses: list[float] = []
    for _ in range(cfg.epochs):
        total, count = 0.0, 0
        for graph, v, target in _blocks(groups, rng, cfg.batch_steps):
            total, count = total + step(graph, v, target) * len(v), count + len(v)
            bar.update()
        losses.append(total / count)
        bar.set_postfix(mse=f"{losses[-1]:.2e}")
    return losses


def _train_in_torch(
    executor: VIExecutor, cfg: ExecutorConfig, groups: list[tuple[Any, list[VIResult]]],
    rng: np.random.Generator, total_steps: int, accelerate: bool, bar: Progress,
) -> list[float]:
    """The epochs with torch autograd (on the readable forward or `dense_forward`) and Adam;
    returns the mean training loss per epoch."""
    optimiser = _optimiser(executor, cfg, total_steps, accelerate)

    def step(graph: Any, v: torch.Tensor, target: torch.Tensor) -> float:
        predicted = dense_forward(executor, graph, v) if accelerate else executor(graph, v)
        loss = torch.nn.functional.mse_loss(predicted, target)
        optimiser.zero_grad()
        loss.backward()
        optimiser.step()
        return loss.item()

    losses = _epochs(cfg, groups, rng, step, bar)
    if isinstance(optimiser, _FlatAdamOnSchedule):
        optimiser.release()
    return losses


def _train_in_numpy(
    executor: VIExecutor, cfg: ExecutorConfig, groups: list[tuple[Any, list[VIResult]]],
    rng: np.random.Generator, total_steps: int, bar: Progress,
) -> list[float]:
    """The same epochs as `_train_in_torch`'s accelerated path, each step written by hand in
    NumPy (`xlvin.accel.numpy_executor`), its matrix products on one BLAS thread (they are
    [A K S, 10] x [10, H]: a second thread's start-up costs more than it saves, many times more
    when other processes hold the cores); the trained weights are written into `executor`."""
    trainer = numpy_executor.NumpyExecutorTrainer(executor)
    cosine, steps = cfg.lr_schedule == "cosine", iter(range(total_steps))
    arrays = [(numpy_executor.NumpyEdges.from_in_edges(edges), rs) for edges, rs in groups]

    def step(edges: Any, v: torch.Tensor, target: torch.Tensor) -> float:
        lr = _learning_rate(cfg.lr, next(steps), total_steps, cosine)
        return trainer.step(edges, v.numpy(), target.numpy(), lr)

    with threadpool_limits(1, user_api="blas"):
        losses = _epochs(cfg, arrays, rng, step, bar)
    trainer.write_back()
    return losses


def pretrain_and_save(
    cfg: ExecutorConfig, out: Path, eval_count: int = 40, progress: bool = True,
    overwrite: bool = True, position: int = 0, accelerate: bool = True,
) -> dict[str, Any]:
    """Pre-train, evaluate on `eval_count` held-out graphs of the training family and size, and
    write the executor with its description (config, training stats, held-out metrics) to `out`
    (atomically, see `save_weights`; without `overwrite`, only if no file is there by then).
    Returns that description. `accelerate`: see `pretrain_executor`.
    """
    executor, stats = pretrain_executor(cfg, progress, position, accelerate)
    held_out = evaluate_executor(executor, cfg.family, cfg.states, cfg.actions, eval_count,
                                 cfg.seed, cfg.gamma, cfg.tol, cfg.maze_size)
    meta = {**to_dict(cfg), "training": stats, "held_out": held_out}
    save_executor(out, executor, meta, overwrite)
    return meta
