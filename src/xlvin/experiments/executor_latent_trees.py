"""The latent tree against the maze's true one (ours, not the paper's): in trained maze agents,
does the transition model grow the tree of the MDP?

XLVIN's tree holds h' = h + T(h, a) (eq. 5) from the root's h_s = z(s) down to depth K; the
maze's true tree holds z(s'), the encoder's embeddings of the true successor observations (the
environment's rules, `xlvin.nn.true_tree.true_successors`: a move onto a free cell moves the
agent there, onto the goal too and the episode ends; into a wall or off the grid the agent stays
and the episode ends). For every root state of held-out 8x8 mazes the latent tree is grown along
every path of moves the episode survives (a node whose true episode has ended is absorbing and
not expanded: everything below it is the same observation), and at every depth d <= K each
expanded node's A predicted children are scored against the true children of its true state:

- hits@1: the share of (node, action) pairs whose predicted child for a is nearer (Euclidean)
  to z of a's true successor than to z of any other action's true successor (two actions that
  lead to the same state count as one candidate); also over the pairs whose action moves the
  agent (most moves of a maze crash into a wall, where the agent stays);
- distance: ||h + T(h, a) - z(s_a)|| relative to the spread of the encodings, the mean distance
  between the encodings of two different free cells of the same maze (each node scored against
  its own maze's spread).

A reference is scored beside the transition model: the child predicted as its true parent's
embedding z(s) ("no move"): a transition model that has learnt nothing of the moves. And the
results give the chance level of hits@1 on the same trees, the same for every agent: a guess
drawn uniformly among each node's distinct true successors (`uniform_guess`).

The agents are the maze ablation's (`xlvin.experiments.maze_ablation`, the arms with a
transition model), each cell (arm, seed) the run directory RUNS/maze/AGENT/seedS that a
curriculum of `xlvin reproduce maze-ablation` leaves: its final policy (model.safetensors) if
the run has finished, else the policy of the last level it passed (levels/level-DD.safetensors).
Cells without either are left out. The encoder and transition model run in evaluation mode, as
the agent acts.

Fixed before the first run:
- mazes: the held-out 8x8 split of the generated set (`maze_split(8, "test")`, dataset seed 0,
  833 mazes, as `xlvin reproduce executor-true-trees`; `--mazes N`: the first N), every free cell
  but the goal a root;
- K = 4, the depth of the committed maze agent xlvin-32-b2 (which expands only 2 actions below
  depth 1: measured here on every action of every surviving node);
- per run and depth, the pooled hits@1 and mean relative distance; per arm, over its seeds, the
  IQM with its 95 % bootstrap interval (`xlvin.stats.summarize`).
"""

import argparse
from collections.abc import Callable, Iterator
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import numpy as np
import torch
from torch import nn

from xlvin.config import csv_choices
from xlvin.envs.maze_data import MOVES, MazeSet, maze_split
from xlvin.errors import UserError
from xlvin.experiments import maze
from xlvin.experiments.executor_true_trees import DEPTH, MAZE_SIZE, VI_TOLERANCE
from xlvin.experiments.maze_ablation import ARMS
from xlvin.experiments.maze_embeddings import passed_levels
from xlvin.experiments.value_predictability import maze_observations
from xlvin.io.run_dir import MODEL
from xlvin.io.saves import file_digest
from xlvin.mdp.maze_graphs import maze_mdp, maze_states
from xlvin.mdp.value_iteration import value_iteration
from xlvin.nn.policy import ActorCritic
from xlvin.nn.true_tree import MazeCells, maze_cells, true_successors
from xlvin.process import torch_threads
from xlvin.run.training import level_weights_file, load_run

#: The arms with a transition model (agent names of `maze_ablation.ARMS`): all but PPO-32.
TRANSITION_ARMS = tuple(agent for agent in ARMS.values() if agent != "ppo-32")
#: The discount of V*: the maze executors' pre-training one and the paper's maze MDP's.
GAMMA = 0.9
#: The maze ablation's seeds: its first five and the fifteen more, 105-119 (`--seeds` from
#: `maze_ablation.FIRST_SEED`).
SEEDS = 20
#: Mazes per batch of roots (about 25 roots a maze).
CHUNK = 32


@dataclass(frozen=True)
class MazeStates:
    """Every non-terminal state (free cell but the goal) of some mazes, maze after maze (S in
    all), with the maze MDP's Q* (`maze_mdp`, gamma `GAMMA`)."""

    obs: np.ndarray  # [S, 3, H, W] float32: the maze's observation with the agent on the cell
    maze: np.ndarray  # [S] (long): the state's maze, 0 .. mazes - 1
    q_star: np.ndarray  # [S, A]


def maze_states_of(mazes: MazeSet, count: int) -> MazeStates:
    """The `MazeStates` of the first `count` mazes of `mazes`."""
    obs, maze_of, q = [], [], []
    for i in range(count):
        walls, goal = mazes.walls[i], (int(mazes.goals[i][0]), int(mazes.goals[i][1]))
        mdp = maze_mdp(walls, goal, GAMMA)
        cells = maze_states(walls, goal)  # the MDP's non-terminal states, in its order
        obs.append(maze_observations(walls, goal, cells))
        maze_of.append(np.full(len(cells), i))
        q.append(value_iteration(mdp, VI_TOLERANCE).q[~mdp.terminal])
    return MazeStates(np.concatenate(obs), np.concatenate(maze_of), np.concatenate(q))


def held_out_count(mazes: int) -> int:
    """The held-out 8x8 mazes measured: the first `mazes` (0: all); one UserError past them."""
    held_out = len(maze_split(MAZE_SIZE, "test").walls)
    if not 0 <= mazes <= held_out:
        raise UserError(f"--mazes must be in [0, {held_out}] (0: all)")
    return mazes or held_out


@dataclass(frozen=True)
class Cell:
    """One trained maze agent: the run of `arm` (a maze agent name) and `seed` under the runs
    root, measured on the first `mazes` held-out mazes (0: all) to depth `depth`; `policy`, the
    SHA-256 of the policy file it measures (`trained_cells`)."""

    arm: str
    seed: int
    depth: int = DEPTH
    mazes: int = 0
    policy: str = ""

    def run_dir(self, root: Path) -> Path:
        return maze.Cell("maze", self.arm, self.seed).run_dir(root)


#: `saved_policy` of a finished run: its final policy (levels are numbered from 1).
FINAL = 0


def saved_policy(run_dir: Path) -> int | None:
    """Which policy of a curriculum run is measured: `FINAL` when the run has finished, else
    the last level it passed; None when it has neither."""
    if maze.is_finished(run_dir):
        return FINAL
    passed = passed_levels(run_dir) if run_dir.is_dir() else []
    return passed[-1] if passed else None


def policy_file(run_dir: Path, level: int) -> Path:
    """The file of the policy `saved_policy` gave `level`: model.safetensors or a level's."""
    return run_dir / MODEL if level == FINAL else level_weights_file(run_dir, level)


def load_policy(cell: Any, root: Path) -> tuple[ActorCritic, dict[str, Any]]:
    """The cell's policy (`saved_policy`) in evaluation mode and what the records say of it:
    which policy, its run and its file's SHA-256 (`digest`, which --skip-recorded compares)."""
    run_dir = cell.run_dir(root)
    level = saved_policy(run_dir)
    assert level is not None  # `trained_cells` keeps only cells with a policy
    digest = file_digest(policy_file(run_dir, level))
    agent, _ = load_run(run_dir, level=None if level == FINAL else level)
    return agent.eval(), {"arm": cell.arm, "seed": cell.seed,
                          "policy": "final" if level == FINAL else f"after level {level}",
                          "run": str(run_dir.relative_to(root)), "digest": digest}


def trained_cells(cells: list[Any], root: Path, ended_only: bool = False) -> list[Any]:
    """The cells whose run under `root` has a policy to measure (`ended_only`: whose run has
    ended, its final policy), each with its policy file's SHA-256; one UserError when none
    has."""
    wanted = (FINAL,) if ended_only else None
    kept = [replace(c, policy=file_digest(policy_file(c.run_dir(root), level))) for c in cells
            if (level := saved_policy(c.run_dir(root))) is not None
            and (wanted is None or level in wanted)]
    if not kept:
        what = "a finished run" if ended_only else "a finished run or a passed level"
        raise UserError(f"none of the {len(cells)} cells has {what} under {root}")
    return kept


def measured(earlier: list[dict[str, Any]]) -> Callable[[Any], bool]:
    """--skip-recorded of a measurement: whether `earlier` (an earlier results file's records,
    measured with the options of now) has the cell's arm and seed measured from the same
    policy file (its SHA-256), so that measuring it again would give the same record."""
    held = {(r["arm"], r["seed"], r["digest"]) for r in earlier if "digest" in r}
    return lambda cell: (cell.arm, cell.seed, cell.policy) in held


#: (h [n, k], actions [n] (long)) -> the predicted successors [n, k]
Predict = Callable[[torch.Tensor, torch.Tensor], torch.Tensor]


@dataclass(frozen=True)
class TrueLevel:
    """The n expanded nodes at one depth of the roots' true trees (module docstring): those of
    the level above's children (the roots at depth 1) whose true episode has not ended."""

    live: torch.Tensor  # [n_above A] (depth 1: [B]) bool: which of those nodes are expanded
    root: torch.Tensor  # [n] (long): each node's root
    cell: torch.Tensor  # [n] (long): the agent's cell
    target: torch.Tensor  # [n, A] (long): the true successor's cell of each action


def true_levels(cells: MazeCells, depth: int) -> list[TrueLevel]:
    """Depths 1 .. `depth` of the true trees of the roots of `cells`, every action of every
    node expanded until its episode ends."""
    actions = torch.arange(len(MOVES))
    root = torch.arange(len(cells.agent))
    cell, done = cells.agent, torch.zeros(len(root), dtype=torch.bool)
    levels = []
    for _ in range(depth):
        live = ~done  # an ended episode's node is absorbing: not expanded
        root, cell = root[live], cell[live]
        n = len(root)
        target, ended = true_successors(cells, root, cell, torch.zeros(n, dtype=torch.bool),
                                        actions.expand(n, -1))  # [n, A] each
        levels.append(TrueLevel(live, root, cell, target))
        root, cell, done = root.repeat_interleave(len(actions)), target.flatten(), ended.flatten()
    return levels


@torch.no_grad()
def score_tree(encoder: nn.Module, predict: Predict, obs: np.ndarray,
               depth: int) -> list[dict[str, np.ndarray]]:
    """Per depth d = 1 .. `depth`, over the (node, action) pairs of the roots obs [B, 3, H, W]
    (one maze or several; module docstring): "hit" and "stay_hit" [n_d A] (bool), "distance"
    and "stay_distance" [n_d A] (||prediction - z(s_a)||, the no-move reference's), "moved"
    [n_d A] (bool: the action moves the agent), "spread" [n_d A] (the node's maze's mean
    distance between encodings of different free cells)."""
    roots = torch.from_numpy(obs)
    height, width = roots.shape[2:]
    cells = maze_cells(roots, max(height, width))  # every free cell of every maze
    table = encoder(cells.observations)  # [M, k]
    spread = torch.stack([torch.pdist(table[row[row >= 0]]).mean()
                          for row in cells.rows])  # [B]
    h = table[cells.rows[torch.arange(len(roots)), cells.agent]]  # [B, k]: the roots' h_s
    actions = torch.arange(len(MOVES))
    out = []
    for level in true_levels(cells, depth):
        root, cell, target, h = level.root, level.cell, level.target, h[level.live]
        n, a = len(root), len(actions)
        true = table[cells.rows[root[:, None], target]]  # [n, A, k]: z(s_a)
        predicted = predict(h.repeat_interleave(a, 0), actions.repeat(n)).view(n, a, -1)
        parent = table[cells.rows[root, cell]][:, None]  # [n, 1, k]: z(s), "no move"
        scored = {}
        for name, guess in (("", predicted), ("stay_", parent.expand(-1, a, -1))):
            apart = torch.cdist(guess, true)  # [n, A, A]: guess for a against z(s_a')
            nearest = target.gather(1, apart.argmin(-1))  # [n, A]: the nearest's state
            scored[name + "hit"] = (nearest == target).flatten().numpy()
            scored[name + "distance"] = apart.diagonal(dim1=1, dim2=2).flatten().double().numpy()
        scored["moved"] = (target != cell[:, None]).flatten().numpy()
        scored["spread"] = spread[root].repeat_interleave(a).double().numpy()
        out.append(scored)
        h = predicted.flatten(0, 1)
    return out


def maze_chunks(states: MazeStates) -> Iterator[np.ndarray]:
    """The root observations of `states`, `CHUNK` mazes at a time."""
    for start in range(0, int(states.maze.max()) + 1, CHUNK):
        yield states.obs[(states.maze >= start) & (states.maze < start + CHUNK)]


def uniform_guess(states: MazeStates, depth: int) -> list[dict[str, float]]:
    """Per depth, the hits@1 a guess drawn uniformly among each node's distinct true successors
    scores in expectation (1 / their number, per pair), over all pairs and where the agent
    moves: the chance level of hits@1, the same for every agent."""
    sums = [dict.fromkeys(("pairs", "moves", "hit", "moved_hit"), 0.0) for _ in range(depth)]
    for obs in maze_chunks(states):
        roots = torch.from_numpy(obs)
        cells = maze_cells(roots, max(roots.shape[2:]))
        for total, level in zip(sums, true_levels(cells, depth)):
            same = level.target[:, :, None] == level.target[:, None, :]  # [n, A, A]
            first = ~same.tril(-1).any(-1)  # [n, A]: the first action to each successor
            chance = (1.0 / first.double().sum(-1, keepdim=True)).expand_as(first)  # [n, A]
            moved = level.target != level.cell[:, None]
            total["pairs"] += chance.numel()
            total["moves"] += int(moved.sum())
            total["hit"] += float(chance.sum())
            total["moved_hit"] += float(chance[moved].sum())
    return [{"depth": d + 1, "hit": t["hit"] / t["pairs"],
             "moved_hit": t["moved_hit"] / t["moves"]} for d, t in enumerate(sums)]


def latent_tree_scores(encoder: nn.Module, predict: Predict, states: MazeStates,
                       depth: int) -> list[dict[str, float]]:
    """Per depth (`score_tree` over the states' mazes, `CHUNK` mazes at a time): the pairs
    scored, their hits@1 (and over the pairs whose action moves the agent), mean distance and
    mean distance relative to the spread, the no-move reference's hits@1 and relative
    distance, and the mean spread."""
    sums = [dict.fromkeys(("pairs", "moves", "hit", "moved_hit", "distance", "relative",
                           "stay_hit", "stay_relative", "spread"), 0.0) for _ in range(depth)]
    for obs in maze_chunks(states):
        for total, s in zip(sums, score_tree(encoder, predict, obs, depth)):
            total["pairs"] += len(s["hit"])
            total["moves"] += s["moved"].sum()
            total["hit"] += s["hit"].sum()
            total["moved_hit"] += (s["hit"] & s["moved"]).sum()
            total["distance"] += s["distance"].sum()
            total["relative"] += (s["distance"] / s["spread"]).sum()
            total["stay_hit"] += s["stay_hit"].sum()
            total["stay_relative"] += (s["stay_distance"] / s["spread"]).sum()
            total["spread"] += s["spread"].sum()
    return [{"depth": d + 1, "pairs": int(t["pairs"]), "moves": int(t["moves"]),
             "moved_hit": float(t["moved_hit"] / t["moves"]),
             **{key: float(t[key] / t["pairs"]) for key in t
                if key not in ("pairs", "moves", "moved_hit")}}
            for d, t in enumerate(sums)]


def run_cell(cell: Cell, root: Path) -> dict[str, Any]:
    """The cell's scores per depth (`latent_tree_scores`) with what was measured; nothing is
    written."""
    agent, record = load_policy(cell, root)
    with torch_threads(1):
        states = maze_states_of(maze_split(MAZE_SIZE, "test"), held_out_count(cell.mazes))
        depths = latent_tree_scores(agent.encoder, agent.transition.next_embedding, states,
                                    cell.depth)
    return {**record, "depth": cell.depth, "mazes": cell.mazes, "states": len(states.maze),
            "depths": depths}


def add_arms_option(parser: argparse.ArgumentParser, arms: tuple[str, ...]) -> None:
    """--arms, and --ended-only (which runs are measured)."""
    parser.add_argument("--arms", default=",".join(arms),
                        help=f"comma-separated maze agents of the arms, of {', '.join(arms)} "
                        "(default all)")
    parser.add_argument("--ended-only", action="store_true",
                        help="measure only the runs whose curriculum has ended (their final "
                        "policy), leaving those still training to a later call (default: "
                        "those too, at the last level they passed)")


def add_options(parser: argparse.ArgumentParser) -> None:
    add_arms_option(parser, TRANSITION_ARMS)
    parser.add_argument("--depth", type=int, default=DEPTH,
                        help=f"the trees' depth K (default {DEPTH}: xlvin-32-b2's)")
    parser.add_argument("--mazes", type=int, default=0,
                        help="the first N held-out 8x8 mazes (default 0: all 833)")


def cells(seeds: int, args: argparse.Namespace) -> list[Cell]:
    """The cells of the options with a policy under --runs (`trained_cells`): every arm of
    --arms, seeds --first-seed onwards."""
    held_out_count(args.mazes)
    if args.depth < 1:
        raise UserError("--depth must be >= 1")
    arms = csv_choices(args.arms, TRANSITION_ARMS, "arm")
    return trained_cells([Cell(arm, seed, args.depth, args.mazes)
                          for seed in range(args.first_seed, args.first_seed + seeds)
                          for arm in arms], args.runs, args.ended_only)
