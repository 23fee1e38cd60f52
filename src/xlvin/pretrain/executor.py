"""Pre-training the VI executor on synthetic MDPs and evaluating it on held-out ones (paper
appendix "Pre-training"; Deac et al. 2020).

Training is teacher-forced: at every VI step t the executor gets the true V_t and regresses the
true change V_{t+1} - V_t of the Bellman backup (eq. 1) with MSE, Adam. Evaluation runs it on its
own predictions from V_0 = 0 for as many steps as VI needed.

Graph seeds: training graph i is drawn from `np.random.default_rng([TRAIN_STREAM, seed, i])` and
held-out graph i from `np.random.default_rng([EVAL_STREAM, seed, i])`. The streams differ in
their first entry, so held-out graphs never share a generator seed with training graphs, for any
pair of seeds. Maze graphs (`--graphs maze`, `xlvin.mdp.maze_graphs`) are the MDPs of whole
mazes: training graphs from the training mazes, held-out graphs from the held-out mazes.
"""

import dataclasses
import math
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import torch
from threadpoolctl import threadpool_limits

from xlvin.accel import numpy_executor
from xlvin.accel.dense_executor import InEdges, dense_forward
from xlvin.accel.flat_adam import FlatAdam
from xlvin.config import option, to_dict
from xlvin.errors import UserError
from xlvin.io.executor_file import FORMAT, save_executor
from xlvin.mdp.executor_graph import MDPGraph
from xlvin.mdp.graphs import FAMILIES, family
from xlvin.mdp.maze_graphs import MAZE_FAMILY, maze_mdps
from xlvin.mdp.value_iteration import MDP, VIResult, q_values, value_iteration
from xlvin.nn.executor import AGGREGATIONS, MESSAGES, VIExecutor
from xlvin.process import seed_everything
from xlvin.progress import Progress

TRAIN_STREAM = 0
EVAL_STREAM = 1
SHUFFLE_STREAM = 2  # minibatch order during training
#: Two Q-values closer than this are a tie: either action counts as VI's greedy choice.
TIE_TOL = 1e-6
#: Held-out graphs are batched into disjoint graphs of at most this many edges.
EVAL_EDGE_BUDGET = 400_000
#: Every graph family the executor can be trained and evaluated on: the synthetic families and
#: the mazes of `xlvin/Maze-v0`.
GRAPH_FAMILIES = (*FAMILIES, MAZE_FAMILY)
LR_SCHEDULES = ("cosine", "constant")
#: The maze sides that have generated mazes.
MAZE_SIZES = (8, 16)


@dataclass
class ExecutorConfig:
    """Pre-training of the VI executor (defaults: the paper's XLVIN-R executor)."""

    family: str = option("random_deterministic", "graph family", GRAPH_FAMILIES)
    states: int = option(20, "states per training MDP (cartpole_tree and maze fix their own)")
    actions: int = option(8, "actions per training MDP (cartpole_tree and maze fix their own)")
    maze_size: int = option(8, "maze family: side of the training mazes", MAZE_SIZES)
    train_graphs: int = option(200, "number of training MDPs (the paper uses 100-500)")
    hidden: int = option(50, "executor width H; must match the agent's latent size")
    aggregation: str = option(
        "max", "message aggregation; max beat sum on held-out Erdos-Renyi graphs, where sum "
        "diverged on larger, denser graphs than it was trained on",
        AGGREGATIONS,
    )
    layer_norm: bool = option(
        False, "LayerNorm after every message-passing step (the authors' code: on)"
    )
    messages: str = option(
        "relu", "message function: Linear then ReLU, or linear (no activation: the authors' code)",
        MESSAGES,
    )
    epochs: int = option(10, "passes over all (MDP, VI step) pairs (0: the initial weights)")
    batch_graphs: int = option(4, "MDPs per minibatch")
    batch_steps: int = option(8, "VI steps per MDP per minibatch")
    lr: float = option(
        2e-3, "initial Adam learning rate, cosine-annealed to 0 (the authors use 5e-3, constant)"
    )
    lr_schedule: str = option(
        "cosine", "learning rate over training: cosine-annealed to 0, or constant (the authors')",
        LR_SCHEDULES,
    )
    gamma: float = option(0.9, "discount factor of the synthetic MDPs")
    tol: float = option(1e-4, "VI stops when max |V_{t+1} - V_t| < tol")
    seed: int = option(0, "seed of the training graphs and the initial weights")


def _check(cfg: ExecutorConfig) -> None:
    positive = ("states", "actions", "train_graphs", "hidden", "batch_graphs", "batch_steps",
                "lr", "tol")
    bad = [name for name in positive if getattr(cfg, name) <= 0]
    if bad:
        raise UserError(f"executor config: {', '.join(bad)} must be positive")
    if cfg.epochs < 0:
        raise UserError(f"executor config: epochs must be >= 0 (0: untrained), got {cfg.epochs}")
    if not 0.0 <= cfg.gamma < 1.0:
        raise UserError(f"executor config: gamma must lie in [0, 1), got {cfg.gamma}")
    if cfg.seed < 0:
        raise UserError(f"executor config: seed must be >= 0, got {cfg.seed}")
    if cfg.family not in GRAPH_FAMILIES:
        raise UserError(f"executor config: unknown graph family {cfg.family!r}; valid: "
                        f"{', '.join(GRAPH_FAMILIES)}")
    if cfg.lr_schedule not in LR_SCHEDULES:
        raise UserError(f"executor config: lr_schedule must be one of {', '.join(LR_SCHEDULES)}")
    if cfg.maze_size not in MAZE_SIZES:
        raise UserError(f"executor config: maze_size must be one of {MAZE_SIZES}, got {cfg.maze_size}")


def make_mdps(
    name: str, states: int, actions: int, count: int, seed: int, stream: int, gamma: float,
    maze_size: int = 8,
) -> list[MDP]:
    """`count` MDPs of family `name`, MDP i drawn from default_rng([stream, seed, i]); for the
    maze family, the graphs of `count` distinct maze_size x maze_size mazes of the training split
    (TRAIN_STREAM) or of the held-out one (any other stream), `maze_mdps`."""
    if name == MAZE_FAMILY:
        split = "train" if stream == TRAIN_STREAM else "test"
        return maze_mdps(maze_size, split, count, seed, stream, gamma)
    generator = family(name)
    return [
        generator(states, actions, np.random.default_rng([stream, seed, i]), gamma)
        for i in range(count)
    ]


def _solve(mdps: list[MDP], tol: float) -> list[VIResult]:
    results = [value_iteration(m, tol) for m in mdps]
    if not all(r.converged for r in results):
        raise UserError("value iteration did not converge on a synthetic MDP (is gamma < 1?)")
    return results


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
    _check(cfg)
    start = time.perf_counter()
    seed_everything(cfg.seed)
    mdps = make_mdps(cfg.family, cfg.states, cfg.actions, cfg.train_graphs, cfg.seed,
                     TRAIN_STREAM, cfg.gamma, cfg.maze_size)
    results = _solve(mdps, cfg.tol)
    groups = [
        (MDPGraph.from_mdps(mdps[i : i + cfg.batch_graphs]), results[i : i + cfg.batch_graphs])
        for i in range(0, len(mdps), cfg.batch_graphs)
    ]
    executor = VIExecutor(cfg.hidden, cfg.aggregation, cfg.layer_norm, cfg.messages)
    if accelerate:
        groups = [(InEdges.from_graph(graph), rs) for graph, rs in groups]
    rng = np.random.default_rng([SHUFFLE_STREAM, cfg.seed])
    per_epoch = sum(-(-max(r.steps for r in rs) // cfg.batch_steps) for _, rs in groups)
    total_steps = cfg.epochs * per_epoch
    in_numpy = accelerate and numpy_executor.applies(executor, [edges for edges, _ in groups])
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


@torch.no_grad()
def run_executor(executor: VIExecutor, mdps: list[MDP], steps: list[int]) -> list[np.ndarray]:
    """Run the executor on its own predictions from V_0 = 0: V_{t+1} = V_t + X(V_t), for
    steps[b] iterations on MDP b (all MDPs batched as one graph). Returns the final values.
    """
    graph = MDPGraph.from_mdps(mdps)
    sizes = np.diff(graph.state_offsets)
    budget = torch.as_tensor(np.repeat(steps, sizes))
    v = torch.zeros(1, graph.num_states)
    for t in range(max(steps)):
        v = v + torch.where(budget > t, executor(graph, v), 0.0)
    return np.split(v[0].double().numpy(), graph.state_offsets[1:-1])


def _edge_batches(mdps: list[MDP]) -> list[list[int]]:
    """Indices of `mdps` in groups of at most EVAL_EDGE_BUDGET edges (or of a single MDP)."""
    groups: list[list[int]] = [[]]
    edges = 0
    for i, m in enumerate(mdps):
        e = int(np.count_nonzero(m.P))
        if groups[-1] and edges + e > EVAL_EDGE_BUDGET:
            groups.append([])
            edges = 0
        groups[-1].append(i)
        edges += e
    return groups


def policy_accuracy(mdp: MDP, vi: VIResult, v_pred: np.ndarray) -> float:
    """Fraction of non-terminal states where the greedy policy of the predicted values,
    argmax_a R(s, a) + gamma sum_s' P(s'|s, a) V_pred(s') (true P and R), picks an action that
    is greedy for VI's Q (ties within TIE_TOL count as agreement; without ties this is exactly
    "the greedy policy agrees with VI's").
    """
    chosen = q_values(mdp, v_pred).argmax(axis=1)
    q = vi.q
    ok = q[np.arange(mdp.num_states), chosen] >= q.max(axis=1) - TIE_TOL
    return float(ok[~mdp.terminal].mean())


def immediate_reward_baseline(mdp: MDP, vi: VIResult) -> tuple[float, float]:
    """The greedy-on-immediate-reward baseline: (policy accuracy, value MSE).

    Its policy is argmax_a R(s, a) with ties broken uniformly at random, scored by its expected
    accuracy: per non-terminal state, the fraction of its reward-greedy actions that are greedy
    for VI's Q (within TIE_TOL). Its values are max_a R(s, a) (one Bellman backup from 0, V_1),
    scored like the executor's by the mean over states of (V_1 - V*)^2.
    """
    r = np.where(mdp.terminal[:, None], 0.0, mdp.R)
    greedy = r >= r.max(axis=1, keepdims=True) - TIE_TOL  # [S, A]
    optimal = vi.q >= vi.q.max(axis=1, keepdims=True) - TIE_TOL
    accuracy = (greedy & optimal).sum(axis=1) / greedy.sum(axis=1)
    return float(accuracy[~mdp.terminal].mean()), float(np.mean((r.max(axis=1) - vi.v) ** 2))


def evaluate_executor(
    executor: VIExecutor, family_name: str, states: int, actions: int, count: int, seed: int,
    gamma: float = 0.9, tol: float = 1e-4, maze_size: int = 8,
) -> dict[str, Any]:
    """Held-out evaluation without teacher forcing on `count` fresh MDPs of a family (for the
    maze family: `count` held-out maze_size x maze_size mazes).

    policy_accuracy: `policy_accuracy` per graph (mean, std); value_mse: mean over states of
    (V_pred - V*)^2 per graph, V* taken as VI's last iterate (mean, std). A graph whose predicted
    values are not all finite counts as `diverged`: policy accuracy 0 and no value MSE (None when
    every graph diverged). baseline_*: the same metrics of `immediate_reward_baseline`.
    """
    if count < 1:
        raise UserError(f"need at least one held-out graph, got {count}")
    mdps = make_mdps(family_name, states, actions, count, seed, EVAL_STREAM, gamma, maze_size)
    results = _solve(mdps, tol)
    baseline = np.array([immediate_reward_baseline(m, r) for m, r in zip(mdps, results)])
    accuracy, mse = [], []
    for idx in _edge_batches(mdps):
        preds = run_executor(executor, [mdps[i] for i in idx], [results[i].steps for i in idx])
        for i, v in zip(idx, preds):
            if not np.all(np.isfinite(v)):
                accuracy.append(0.0)
                continue
            accuracy.append(policy_accuracy(mdps[i], results[i], v))
            mse.append(float(np.mean((v - results[i].v) ** 2)))
    return {
        "family": family_name,
        "graphs": count,
        "states": float(np.mean([m.num_states for m in mdps])),
        "actions": mdps[0].num_actions,
        "gamma": gamma,
        "seed": seed,
        "policy_accuracy": float(np.mean(accuracy)),
        "policy_accuracy_std": float(np.std(accuracy)),
        "value_mse": float(np.mean(mse)) if mse else None,
        "value_mse_std": float(np.std(mse)) if mse else None,
        "diverged": count - len(mse),
        "vi_steps_mean": float(np.mean([r.steps for r in results])),
        "baseline_policy_accuracy": float(baseline[:, 0].mean()),
        "baseline_policy_accuracy_std": float(baseline[:, 0].std()),
        "baseline_value_mse": float(baseline[:, 1].mean()),
        "baseline_value_mse_std": float(baseline[:, 1].std()),
    }


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


#: The agents' default executors: XLVIN-R (random deterministic graphs, |S| = 20, |A| = 8) and
#: XLVIN-CP (CartPole trees; their training loss has converged after about 3 epochs), H = 50
#: like the classic-control latents; and the maze executor (paper section 4.1): the graphs of
#: 1,000 training 8x8 mazes, H = 10 like the maze latent (the authors' later code: executor
#: width 10), LayerNorm after every step. "untrained" is XLVIN-R's executor before any
#: pre-training (its initial weights, frozen like the others): an ablation of what the
#: pre-training on value iteration adds. "maze-untrained" and "maze-random" are the maze
#: executor's architecture (H = 10, LayerNorm) left at its initial weights, or pre-trained on
#: XLVIN-R's random graphs instead of mazes: ablations of the maze executor. "authors-random" is the executor of the authors' later
#: XLVIN-R code (dransyhe/CNAP, models/executor/train.py with its defaults): their Erdos-Renyi
#: MDPs, 500 of them, one Adam step at a constant 5e-3 per VI step, one pass, sum aggregation
#: (their policy then runs it with max: `--executor-aggregation`), LayerNorm, linear messages.
DEFAULT_EXECUTORS = {
    "random": ExecutorConfig(family="random_deterministic", states=20, actions=8),
    "untrained": ExecutorConfig(family="random_deterministic", states=20, actions=8, epochs=0),
    "authors-random": ExecutorConfig(
        family="erdos_renyi_weighted", states=20, actions=8, train_graphs=500, epochs=1,
        batch_graphs=1, batch_steps=1, lr=5e-3, lr_schedule="constant", aggregation="sum",
        layer_norm=True, messages="linear"),
    "cartpole": ExecutorConfig(family="cartpole_tree", epochs=5),
    "maze": ExecutorConfig(family=MAZE_FAMILY, train_graphs=1000, hidden=10, layer_norm=True),
    "maze-untrained": ExecutorConfig(family=MAZE_FAMILY, train_graphs=1000, hidden=10,
                                     layer_norm=True, epochs=0),
    "maze-random": ExecutorConfig(family="random_deterministic", states=20, actions=8, hidden=10,
                                  layer_norm=True),
}


def executor_command(cfg: ExecutorConfig, out: str, accelerate: bool = True) -> str:
    """The `xlvin pretrain-executor` command that trains the executor of `cfg` into `out` in
    reproducible mode on the accelerated path or not, every option spelled out."""
    flags = [f"--{name.replace('_', '-')} {str(value).lower() if isinstance(value, bool) else value}"
             for name, value in to_dict(cfg).items() if name != "family"]
    return (f"xlvin pretrain-executor --reproducible --graphs {cfg.family} {' '.join(flags)} "
            f"--accelerate {str(accelerate).lower()} --out {out}")


def default_executor_config(
    kind: str, seed: int = 0, layer_norm: bool = False, messages: str = "relu"
) -> ExecutorConfig:
    """The config of the default executor `kind` trained from `seed`. `layer_norm` True and
    `messages` "linear" (the authors' variants) override the kind's own; False and "relu", the
    options' defaults, keep it: the maze's and the authors' executors keep their LayerNorm, the
    authors' its linear messages."""
    if kind not in DEFAULT_EXECUTORS:
        raise UserError(f"unknown default executor {kind!r}; valid: {', '.join(DEFAULT_EXECUTORS)}")
    cfg = dataclasses.replace(DEFAULT_EXECUTORS[kind], seed=seed)
    if layer_norm:
        cfg = dataclasses.replace(cfg, layer_norm=True)
    if messages != "relu":
        cfg = dataclasses.replace(cfg, messages=messages)
    return cfg


def executor_key(cfg: ExecutorConfig) -> dict[str, Any]:
    """Everything that determines the executor of `cfg` but the kernel mode: its config and the
    file format (`xlvin.pretrain.files.cached_executor_path` names its file by their hash)."""
    key = {"format": FORMAT, **to_dict(cfg)}
    if cfg.family != MAZE_FAMILY:  # the field only matters to maze executors: others keep
        del key["maze_size"]  # the hashes they had before it existed
    if cfg.lr_schedule == "cosine":  # likewise for the default schedule
        del key["lr_schedule"]
    return key
