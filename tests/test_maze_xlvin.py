"""XLVIN on mazes: the maze executor's graphs, its pre-training and evaluation beside
the greedy-on-immediate-reward baseline, and the pruned tree (ours) against the full one."""

import copy
import json
from pathlib import Path

import numpy as np
import pytest
import torch

from xlvin.cli import main
from xlvin.envs.maze import MazeEnv
from xlvin.envs.maze_data import bfs_distances
from xlvin.errors import UserError
from xlvin.experiments.maze import Cell
from xlvin.mdp.maze_graphs import maze_mdp, maze_states
from xlvin.mdp.value_iteration import value_iteration
from xlvin.nn.agent import XLVINAgent
from xlvin.nn.encoders import MazeCNN
from xlvin.nn.executor import MessagePassing
from xlvin.nn.policy import TransitionBatch
from xlvin.nn.transition import TransitionModel
from xlvin.nn.tree import execute_levels, execute_tree, expand_pruned_tree, expand_tree
from xlvin.pretrain.executor_eval import immediate_reward_baseline
from xlvin.run.config import RunConfig, TrainConfig
from xlvin.run.checks import check_run
from xlvin.envs.spaces import Spaces

#   0 1 2 3 4
# 0 # # # # #
# 1 # . . G #
# 2 # . # . #
# 3 # # # # #
WALLS = np.ones((4, 5), dtype=bool)
WALLS[1, 1:4] = WALLS[2, 1] = WALLS[2, 3] = False
GOAL = (1, 3)


def test_maze_mdp_follows_the_environment() -> None:
    mdp = maze_mdp(WALLS, GOAL, gamma=0.9)
    cells = [tuple(c) for c in maze_states(WALLS, GOAL)]
    assert cells == [(1, 1), (1, 2), (2, 1), (2, 3)]
    end = mdp.num_states - 1  # the terminal node
    assert mdp.terminal.tolist() == [False] * 4 + [True]
    succ = mdp.P.argmax(-1)  # deterministic
    assert mdp.P.max(-1).min() == 1.0
    # every state has <= 8 distinct successors; every one of these cells touches a wall
    assert all(len(set(row)) <= 8 and end in row for row in succ[:end].tolist())
    # (1, 2) --E--> goal: +1, terminal; (1, 2) --S--> wall: -1, terminal; --W--> (1, 1): -0.01
    assert (succ[1, 2], mdp.R[1, 2]) == (end, 1.0)
    assert (succ[1, 1], mdp.R[1, 1]) == (end, -1.0)
    assert (succ[1, 3], mdp.R[1, 3]) == (0, -0.01)
    # V* = gamma^(d-1) - 0.01 (1 - gamma^(d-1)) / (1 - gamma) for d moves to the goal
    dist = bfs_distances(WALLS[None], np.array([GOAL]))[0]
    v = value_iteration(mdp, tol=1e-12).v
    for s, (r, c) in enumerate(cells):
        d = dist[r, c]
        assert v[s] == pytest.approx(0.9 ** (d - 1) - 0.01 * (1 - 0.9 ** (d - 1)) / 0.1)
    with pytest.raises(UserError):
        maze_mdp(WALLS, (0, 0))


def test_maze_mdp_rewards_are_the_environments() -> None:
    env = MazeEnv(size=8)
    for seed in range(5):
        env.reset(seed=seed)
        goal = tuple(env._goal)
        mdp = maze_mdp(env._walls, goal)
        cells = [tuple(c) for c in maze_states(env._walls, goal)]
        s = cells.index(tuple(env._cell))
        for a in range(8):
            _, reward, terminated, _, _ = copy.deepcopy(env).step(a)
            assert reward == mdp.R[s, a]
            assert terminated == mdp.terminal[mdp.P[s, a].argmax()]


def test_immediate_reward_baseline_breaks_ties_at_random() -> None:
    mdp = maze_mdp(WALLS, GOAL, gamma=0.9)
    vi = value_iteration(mdp, tol=1e-12)
    accuracy, mse = immediate_reward_baseline(mdp, vi)
    # (1, 2) and (2, 3) see the goal: right. (1, 1) ties E (optimal) with S, and (2, 1) ties
    # NE (optimal) with N: each is right half of the time.
    assert accuracy == (1 + 1 + 0.5 + 0.5) / 4
    assert mse == pytest.approx(np.mean((mdp.R.max(1) * ~mdp.terminal - vi.v) ** 2))
    open_maze = np.ones((5, 5), dtype=bool)
    open_maze[1:4, 1:4] = False
    mdp = maze_mdp(open_maze, (1, 1))
    accuracy, _ = immediate_reward_baseline(mdp, value_iteration(mdp))
    assert 0 < accuracy < 1  # far from the goal, the free moves tie and most are not optimal


def test_pretrain_and_evaluate_the_maze_executor(tmp_path: Path, capsys) -> None:
    out = tmp_path / "maze.safetensors"
    assert main(["pretrain-executor", "--graphs", "maze", "--out", str(out), "--train-graphs", "8",
                 "--epochs", "2", "--hidden", "8", "--layer-norm", "true", "--eval-count", "4",
                 "--quiet"]) == 0
    printed = capsys.readouterr().out
    assert "maze" in printed and "greedy on R (baseline)" in printed
    assert main(["eval-executor", str(out), "--count", "3", "--seed", "2", "--json"]) == 0
    result = json.loads(capsys.readouterr().out)
    assert result["family"] == "maze" and result["graphs"] == 3
    assert 0 <= result["baseline_policy_accuracy"] < 1 and result["baseline_value_mse"] > 0
    assert main(["eval-executor", str(out), "--maze-size", "12"]) != 0
    assert capsys.readouterr().err == "xlvin: error: --maze-size must be one of 8, 16\n"


def small_xlvin(depth: int, prune: int = 0, hidden: int = 10) -> XLVINAgent:
    torch.manual_seed(0)
    processor = MessagePassing(hidden, layer_norm=True)
    return XLVINAgent(MazeCNN(3, 8, 10), 10, 8, TransitionModel(10, 8, 16), processor,
                      depth=depth, prune=prune)


def test_level_by_level_executor_equals_the_flat_kernel() -> None:
    torch.manual_seed(0)
    processor = MessagePassing(6, layer_norm=True)
    h = torch.randn(3, 6, requires_grad=True)
    edges = torch.randn(4, 6)
    for depth in range(4):
        levels = expand_tree(h, TransitionModel(6, 4, 8), depth)
        flat = execute_tree(processor, levels, edges, depth)
        per_level = execute_levels(
            processor, levels, [edges.repeat(len(level), 1) for level in levels[:-1]], depth
        )
        torch.testing.assert_close(per_level, flat)
        if depth:
            (g_flat,) = torch.autograd.grad(flat.square().sum(), h, retain_graph=True)
            (g_level,) = torch.autograd.grad(per_level.square().sum(), h)
            torch.testing.assert_close(g_level, g_flat)


def test_pruned_tree_keeps_the_rollout_policys_top_actions() -> None:
    agent = small_xlvin(depth=3, prune=2)
    h = torch.randn(4, 10)
    levels, actions = expand_pruned_tree(h, agent.transition, agent.rollout_policy, 3, 2)
    assert [len(level) for level in levels] == [4, 32, 64, 128]
    scores = agent.rollout_policy(levels[1])
    top = scores.topk(2, dim=-1).indices.flatten()
    assert torch.equal(actions[1], top)
    expected = agent.transition.next_embedding(levels[1][3:4].expand(2, -1), top[6:8])
    torch.testing.assert_close(levels[2][6:8], expected)


def test_pruning_to_every_action_is_the_full_tree() -> None:
    obs = torch.rand(5, 3, 8, 8)
    full, pruned = small_xlvin(depth=3), small_xlvin(depth=3, prune=8)
    pruned.load_state_dict(full.state_dict(), strict=False)
    for agent in (full, pruned):
        agent.eval()
    torch.testing.assert_close(pruned(obs), full(obs))


def test_distillation_trains_the_rollout_policy_only() -> None:
    agent = small_xlvin(depth=2, prune=2)
    obs = torch.rand(6, 3, 8, 8)
    batch = TransitionBatch(obs, torch.randint(8, (6,)), torch.rand(6, 3, 8, 8))
    _, _, aux = agent.forward_with_aux(batch)
    assert set(aux) == {"transe", "distillation"}
    aux["distillation"].backward()
    trained = {n for n, p in agent.named_parameters() if p.grad is not None and p.grad.any()}
    assert trained == {"rollout_policy.weight", "rollout_policy.bias"}
    assert set(small_xlvin(depth=2).auxiliary_losses(batch)) == {"transe"}


@pytest.mark.parametrize(
    "train, message",
    [({"agent": "ppo", "prune": 2}, "applies to --agent xlvin only"),
     ({"prune": 9}, "has only 8 actions")],
)
def test_bad_prune_is_one_clear_error(train: dict, message: str) -> None:
    cfg = RunConfig(train=TrainConfig(env="xlvin/Maze-v0", **{"agent": "xlvin", **train}))
    with pytest.raises(UserError, match=message):
        check_run(cfg)


@pytest.mark.parametrize(
    "name, depth, prune, hidden",
    [("xlvin", 4, 0, 0), ("xlvin-k1", 1, 0, 0), ("xlvin-k2", 2, 0, 0), ("xlvin-b2", 4, 2, 0),
     ("xlvin-32", 4, 0, 32), ("xlvin-32-k1", 1, 0, 32), ("xlvin-32-k2", 2, 0, 32),
     ("xlvin-32-b2", 4, 2, 32)],
)
def test_maze_experiment_xlvin_cells_are_valid_runs(
    name: str, depth: int, prune: int, hidden: int
) -> None:
    cfg = Cell("maze", name, seed=0).config()
    assert (cfg.train.agent, cfg.train.executor) == ("xlvin", "maze")
    assert (cfg.train.depth, cfg.train.prune, cfg.train.hidden) == (depth, prune, hidden)
    assert check_run(cfg)[0] == Spaces((3, 8, 8), "maze", 8)
