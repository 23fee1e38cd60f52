"""The executor on true trees: the true trees of the mazes (`xlvin.mdp.trees`), the executor run on them in
both protocols (`xlvin.experiments.executor_true_trees`), the scores and `xlvin reproduce
executor-true-trees` on tiny settings."""

import json
from pathlib import Path

import numpy as np
import pytest
import torch

from xlvin.cli import main
from xlvin.envs.maze_data import maze_split
from xlvin.experiments.executor_true_trees import (
    pretraining_values,
    planner_values,
    true_trees,
)
from xlvin.experiments.executor_true_trees_report import greedy_right, markdown
from xlvin.io.executor_file import load_executor
from xlvin.mdp.maze_graphs import maze_mdp
from xlvin.mdp.trees import earned_rewards, successor_table, tree_levels, tree_q_values
from xlvin.mdp.value_iteration import MDP, q_values, value_iteration
from xlvin.pretrain.executor_eval import run_executor
from xlvin.pretrain.files import executor_file


def first_maze(gamma: float = 0.9) -> MDP:
    split = maze_split(8, "test")
    return maze_mdp(split.walls[0], tuple(split.goals[0]), gamma)


def test_tree_levels_are_expand_trees_layout() -> None:
    mdp = first_maze()
    successors = successor_table(mdp)
    roots = np.flatnonzero(~mdp.terminal)[:3]
    levels = tree_levels(successors, roots, 2)
    assert [len(level) for level in levels] == [3, 24, 192]
    for i in range(24):  # the child of row i via a is row i A + a
        for a in range(8):
            assert levels[2][i * 8 + a] == successors[levels[1][i], a]


@pytest.mark.parametrize("depth", [1, 2, 3])
def test_value_iteration_on_the_tree_is_k_backups_on_the_graph(depth: int) -> None:
    """From V = 0 at the leaves, the roots' Q_K are those of the graph's K-th iterate."""
    mdp = first_maze()
    roots = np.flatnonzero(~mdp.terminal)
    iterates = value_iteration(mdp, tol=1e-12).values
    q = tree_q_values(successor_table(mdp), earned_rewards(mdp), roots, depth, mdp.gamma)
    np.testing.assert_allclose(q, q_values(mdp, iterates[depth - 1])[roots], atol=1e-12)


def tree_mdp(mdp: MDP, root: int, depth: int) -> tuple[MDP, list[np.ndarray]]:
    """The explicit tree of `root` as an MDP of its own (one state per node, the leaves
    absorbing) and the node numbers of its levels."""
    successors, rewards = successor_table(mdp), earned_rewards(mdp)
    states = tree_levels(successors, np.array([root]), depth)
    sizes = np.cumsum([0] + [len(level) for level in states])
    n, actions = sizes[-1], successors.shape[1]
    p, r = np.zeros((n, actions, n)), np.zeros((n, actions))
    for d, level in enumerate(states):
        nodes = sizes[d] + np.arange(len(level))
        r[nodes] = rewards[level]
        children = (sizes[d + 1] + np.arange(len(level) * actions).reshape(-1, actions)
                    if d < depth else np.repeat(nodes[:, None], actions, 1))
        p[nodes[:, None], np.arange(actions), children] = 1.0
    return MDP(p, r, mdp.gamma, np.zeros(n, dtype=bool)), [sizes[d] + np.arange(len(s))
                                                             for d, s in enumerate(states)]


def test_the_pretraining_protocol_on_the_graph_is_the_one_on_the_tree() -> None:
    """The module's shortcut: the executor's K decoded backups over the explicit tree give the
    roots (and, after K - 1, their children) the values they get on the maze's graph."""
    executor = load_executor(executor_file("maze")).eval()
    trees = true_trees(depth=2, mazes=1, gamma=0.9)
    roots, children = pretraining_values(executor, trees)
    for i in (0, 3):
        tree, levels = tree_mdp(trees.mdps[0], int(trees.roots[i]), 2)
        for steps, nodes, expected in ((2, levels[0], roots[i : i + 1]),
                                       (1, levels[1], children[i])):
            (v,) = run_executor(executor, [tree], [steps])
            np.testing.assert_allclose(v[nodes], expected, atol=1e-5)


def test_the_planner_protocol_feeds_rewards_on_the_children_and_decodes_once() -> None:
    """At K = 1 by hand: the root's chi = U(x_s, max_a M(x_{s_a}, x_s, e)) with x_n =
    enc([0, reward into n]) and e = enc([1, gamma]); the children are decoded unprocessed."""
    executor = load_executor(executor_file("maze")).eval()
    trees = true_trees(depth=1, mazes=2, gamma=0.9)
    roots, children = planner_values(executor, trees)
    with torch.no_grad():
        rewards = torch.as_tensor(trees.rewards[trees.roots], dtype=torch.float32)  # [S, 8]
        x_root = executor.node_encoder(torch.zeros(len(rewards), 2))  # [S, H]
        x_child = executor.node_encoder(torch.stack([torch.zeros_like(rewards), rewards], -1))
        edge = executor.edge_encoder(torch.tensor([1.0, 0.9]))
        p = executor.processor
        chi = p.update(x_root, p.aggregate(p.message(x_child, x_root[:, None], edge)))
        np.testing.assert_allclose(roots, executor.decoder(chi).squeeze(-1).numpy(), atol=1e-6)
        np.testing.assert_allclose(children, executor.decoder(x_child).squeeze(-1).numpy(),
                                   atol=1e-6)


def test_greedy_right_counts_ties_by_their_share() -> None:
    q_ref = np.array([[1.0, 1.0, 0.0], [0.0, 1.0, 0.0]])
    assert greedy_right(np.array([[0.0, 2.0, 1.0], [0.0, 0.0, 0.0]]), q_ref).tolist() == [
        1.0, 1 / 3]
    assert greedy_right(np.array([[0.0, 0.0, 1.0], [0.0, 2.0, 2.0]]), q_ref).tolist() == [
        0.0, 0.5]


def test_reproduce_writes_the_page_from_its_json(tmp_path: Path,
                                                 capsys: pytest.CaptureFixture) -> None:
    results = tmp_path / "results"
    assert main(["reproduce", "executor-true-trees", "--executors", "maze,maze-untrained",
                 "--mazes", "4", "--depth", "2", "--jobs", "1", "--results", str(results)]) == 0
    out = capsys.readouterr().out
    assert out.endswith(f"wrote {results}/true-trees.md, .json, .png\n")
    data = json.loads((results / "true-trees.json").read_text())
    assert (results / "true-trees.md").read_text() == markdown(data)
    assert (results / "true-trees.png").read_bytes().startswith(b"\x89PNG")
    assert data["setup"]["mazes"] == 4 and data["setup"]["depth"] == 2
    rows = {(r["executor"], r["protocol"]): r for r in data["rows"]}
    assert set(rows) == {(e, p) for e in ("maze", "maze-untrained")
                         for p in ("planner", "pre-training")}
    vi, reward = data["references"]
    assert vi["tree"]["greedy"]["mean"] == 1.0 and vi["tree"]["value_error"]["mean"] == 0.0
    # the shipped executor, as pre-trained, picks value iteration's action on these trees
    assert rows[("maze", "pre-training")]["tree"]["greedy"]["mean"] == 1.0
    assert [(c["x"], c["y"]) for c in data["comparisons"]] == [("maze", "maze-untrained")] * 4
