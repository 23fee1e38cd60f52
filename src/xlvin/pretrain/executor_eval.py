"""Held-out evaluation of the VI executor (paper appendix "Pre-training"): run on its own
predictions from V_0 = 0 for as many steps as VI needed, scored by the greedy policy's agreement
with VI and the values' MSE, beside the greedy-on-immediate-reward baseline."""

from typing import Any

import numpy as np
import torch

from xlvin.errors import UserError
from xlvin.mdp.executor_graph import MDPGraph
from xlvin.mdp.value_iteration import MDP, VIResult, q_values
from xlvin.nn.executor import VIExecutor
from xlvin.pretrain.executor_data import EVAL_STREAM, make_mdps, solve_mdps

#: Two Q-values closer than this are a tie: either action counts as VI's greedy choice.
TIE_TOL = 1e-6
#: Held-out graphs are batched into disjoint graphs of at most this many edges.
EVAL_EDGE_BUDGET = 400_000


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
    results = solve_mdps(mdps, tol)
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
