"""The frozen maze executor on true trees (ours, not the paper's): before any learning, does the
executor compute value iteration on the tree XLVIN grows, when the tree is the maze's own and its
inputs are the ones the executor was pre-trained on?

For every root state of held-out 8x8 mazes, its depth-K tree is built from the maze MDP's true
transitions and rewards (`xlvin.mdp.maze_graphs.maze_mdp`, `xlvin.mdp.trees`: every action of
every node, paper section 3.2, step 3) and the frozen executor (`xlvin.nn.executor.VIExecutor`:
the processor X with its pre-training encoders and decoder) is run on it in two ways:

- "planner": as XLVIN's planner runs it (`xlvin.nn.tree.execute_tree`): K processor steps over
  the tree, chi = X(x) then chi = X(chi + x), nothing decoded in between, then the pre-trained
  decoder reads a node's chi as its value. Its inputs are the pre-training encoders' (exact
  value-iteration inputs): every edge edge_encoder([P = 1, gamma]), node n node_encoder([V_0(n) =
  0, r(n)]) with r(n) the reward of the move into n (0 at the root). In pre-training a node is a
  (state, action) copy holding [V_t(s), R(s, a)]; in the tree a node is a state whose parent
  receives one message M(x_child, x_parent, e) per child (eq. 3), so a move's reward reaches the
  parent only through the child or the edge, and the pre-trained edge encoder reads [P, gamma]
  alone: the reward rides on the child.
- "pre-training": as the executor was pre-trained and is evaluated
  (`xlvin.pretrain.executor_eval.run_executor`): K decoded backups V_{t+1} = V_t + X(V_t) from
  V_0 = 0 over the (state, action) copies. There a node's inputs depend on its state and step
  alone, so the tree's values at the roots (after K backups) and at their children (after K - 1)
  are those of the maze's graph, where they are computed.

Read-out: V^(s) is the root's decoded value; the greedy action is argmax_a R(s, a) + gamma
V^(s_a), V^(s_a) the child's value after K - 1 steps (what the root's last step reads), as
`xlvin.pretrain.executor_eval.policy_accuracy` reads a policy from values: the root's own chi
does not name the actions (the pre-training edges are the same for every action). Scored against
value iteration on the same tree (Q_K from V = 0 at the leaves) and against V* of the maze
(`value_iteration` to 1e-10): a greedy action is right when it is greedy for the reference
(Q-values within `TIE_TOL` tie; tied predictions count by the share of them that is right), also
over the states where the immediate reward does not decide (some action maximising R(s, a) is not
greedy for the reference); |V^(s) - V(s)| and the Pearson correlation of V^ and V over the
states. The report (`xlvin.experiments.executor_true_trees_report`) adds two references: VI on
the tree scored against V*, and greedy on the immediate reward.

Fixed before the first run (the committed results/why-executor/true-trees.json says so too):
- mazes: every maze of the held-out 8x8 split of the generated set (`maze_split(8, "test")`,
  dataset seed 0: 833 mazes; `--mazes N`: the first N), every free cell but the goal a root;
- K = 4, the depth of the committed maze agent xlvin-32-b2 (its tree is pruned to 2 actions
  below depth 1); measured here on the full tree, every action of every node;
- gamma 0.9, the executors' pre-training discount (read from their files);
- executors: maze, maze-untrained and maze-random (`xlvin.pretrain.executor_config`) of seed 0,
  the shipped files; `--seeds S` adds those of seeds 1 .. S - 1, pre-trained here;
- intervals: 95 % percentile bootstrap over the mazes, 2,000 resamples, default_rng(0).
"""

import argparse
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import torch

from xlvin.config import csv_choices
from xlvin.envs.maze_data import maze_split
from xlvin.errors import UserError
from xlvin.io.executor_file import load_executor, read_executor_meta
from xlvin.mdp.maze_graphs import maze_mdp
from xlvin.mdp.trees import earned_rewards, successor_table, tree_levels, tree_q_values
from xlvin.mdp.value_iteration import MDP, value_iteration
from xlvin.nn.executor import VIExecutor
from xlvin.nn.tree import execute_tree
from xlvin.pretrain.executor_config import default_executor_config
from xlvin.pretrain.executor_eval import run_executor
from xlvin.pretrain.files import cached_executor, executors_dir
from xlvin.process import torch_threads

EXECUTORS = ("maze", "maze-untrained", "maze-random")
PROTOCOLS = ("planner", "pre-training")
#: The committed maze agent's K (xlvin-32-b2 in `xlvin.experiments.maze.AGENTS`).
DEPTH = 4
MAZE_SIZE = 8
#: V* to far below float32 resolution.
VI_TOLERANCE = 1e-10
#: Roots per batch of the planner's trees (1 + 8 + ... + 8^K nodes each: 4,681 at K = 4).
CHUNK = 256


@dataclass(frozen=True)
class TrueTrees:
    """The measured mazes' MDPs and roots. The states of all mazes are numbered maze after maze
    (N in all); per root (S in all): its state, its maze, and the reference Q-values."""

    mdps: list[MDP]
    successors: np.ndarray  # [N, A] (long): s' of every (s, a)
    rewards: np.ndarray  # [N, A]: R(s, a), 0 at the terminal states
    roots: np.ndarray  # [S] (long): every non-terminal state
    maze: np.ndarray  # [S] (long): the root's maze, an index into mdps
    q_tree: np.ndarray  # [S, A]: Q_K of value iteration on the root's depth-K tree
    q_star: np.ndarray  # [S, A]: Q* of the maze
    depth: int
    gamma: float


def check_options(depth: int, mazes: int) -> None:
    """One UserError unless depth >= 1 and 0 <= mazes <= the held-out mazes."""
    held_out = len(maze_split(MAZE_SIZE, "test").walls)
    if not 0 <= mazes <= held_out or depth < 1:
        raise UserError(f"--mazes must be in [0, {held_out}] and --depth >= 1")


def true_trees(depth: int, mazes: int, gamma: float) -> TrueTrees:
    """The first `mazes` held-out 8x8 mazes (0: all) as `TrueTrees` of depth `depth`."""
    check_options(depth, mazes)
    split = maze_split(MAZE_SIZE, "test")
    count = mazes or len(split.walls)
    mdps = [maze_mdp(split.walls[i], tuple(split.goals[i]), gamma) for i in range(count)]
    offsets = np.cumsum([0] + [m.num_states for m in mdps])
    successors = np.concatenate([successor_table(m) + o for m, o in zip(mdps, offsets)])
    roots = np.concatenate([np.flatnonzero(~m.terminal) + o for m, o in zip(mdps, offsets)])
    rewards = np.concatenate([earned_rewards(m) for m in mdps])
    q_star = np.concatenate([value_iteration(m, VI_TOLERANCE).q[~m.terminal] for m in mdps])
    return TrueTrees(
        mdps, successors, rewards, roots,
        maze=np.repeat(np.arange(count), [int((~m.terminal).sum()) for m in mdps]),
        q_tree=tree_q_values(successors, rewards, roots, depth, gamma), q_star=q_star,
        depth=depth, gamma=gamma,
    )


def _decoded(executor: VIExecutor, inputs: list[torch.Tensor], edges: torch.Tensor,
             steps: int) -> torch.Tensor:
    """The decoded values [n_0] of the top level's nodes after `steps` of the planner's run
    over the levels `inputs` [n_d, H] (`execute_tree`)."""
    return executor.decoder(execute_tree(executor.processor, inputs, edges, steps)).squeeze(-1)


@torch.no_grad()
def planner_values(executor: VIExecutor, trees: TrueTrees) -> tuple[np.ndarray, np.ndarray]:
    """("planner", module docstring) V^ of the roots [S] after K steps and of their children
    [S, A] after K - 1."""
    num_actions = trees.successors.shape[1]
    edges = executor.edge_encoder(torch.tensor([[1.0, trees.gamma]])).expand(num_actions, -1)
    roots, children = [], []
    for start in range(0, len(trees.roots), CHUNK):
        levels = tree_levels(trees.successors, trees.roots[start : start + CHUNK], trees.depth)
        moved_in = [np.zeros(len(levels[0]))] + [trees.rewards[level].reshape(-1)
                                                 for level in levels[:-1]]  # r(n) [n_d]
        inputs = [executor.node_encoder(torch.stack(
            [torch.zeros(len(r)), torch.as_tensor(r, dtype=torch.float32)], dim=-1))
            for r in moved_in]  # [n_d, H]
        roots.append(_decoded(executor, inputs, edges, trees.depth))  # [B]
        children.append(_decoded(executor, inputs[1:], edges, trees.depth - 1))  # [B A]
    return (torch.cat(roots).double().numpy(),
            torch.cat(children).double().numpy().reshape(-1, num_actions))


def pretraining_values(executor: VIExecutor, trees: TrueTrees) -> tuple[np.ndarray, np.ndarray]:
    """("pre-training", module docstring) V^ of the roots [S] after K decoded backups and of
    their children [S, A] after K - 1, computed on the mazes' graphs."""
    runs = [np.concatenate(run_executor(executor, trees.mdps, [steps] * len(trees.mdps)))
            for steps in (trees.depth, trees.depth - 1)]  # [N] each
    return runs[0][trees.roots], runs[1][trees.successors[trees.roots]]


@dataclass(frozen=True)
class Cell:
    """One executor (its default config's `seed`) measured on the trees of `mazes` (0: all)."""

    executor: str
    seed: int
    depth: int = DEPTH
    mazes: int = 0

    def file(self, progress: bool = False) -> Path:
        """The executor's file: shipped for seed 0, else cached or pre-trained here (`progress`:
        saying which, and showing a pre-training's progress)."""
        return cached_executor(default_executor_config(self.executor, self.seed), executors_dir(),
                               progress=progress)


def run_cell(cell: Cell, root: Path) -> dict[str, Any]:
    """V^ of the roots and their children in each protocol for `cell` (root: unused, nothing is
    written: the report scores the values)."""
    path = cell.file()
    executor = load_executor(path).eval()
    with torch_threads(1):
        trees = true_trees(cell.depth, cell.mazes, read_executor_meta(path)["gamma"])
        values = {"planner": planner_values(executor, trees),
                  "pre-training": pretraining_values(executor, trees)}
    return {"executor": cell.executor, "seed": cell.seed, "file": path.name,
            "gamma": trees.gamma, "depth": cell.depth, "mazes": cell.mazes,
            "values": {name: {"roots": v.tolist(), "children": c.tolist()}
                       for name, (v, c) in values.items()}}


def add_options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--executors", default=",".join(EXECUTORS),
                        help=f"comma-separated executors of {', '.join(EXECUTORS)} (default all)")
    parser.add_argument("--depth", type=int, default=DEPTH,
                        help=f"the trees' depth K (default {DEPTH}: xlvin-32-b2's)")
    parser.add_argument("--mazes", type=int, default=0,
                        help="the first N held-out 8x8 mazes (default 0: all 833)")


def cells(seeds: int, args: argparse.Namespace) -> list[Cell]:
    """The cells of the options: every executor of --executors, seeds --first-seed onwards."""
    check_options(args.depth, args.mazes)
    return [Cell(kind, seed, args.depth, args.mazes)
            for kind in csv_choices(args.executors, EXECUTORS, "executor")
            for seed in range(args.first_seed, args.first_seed + seeds)]


def prepare(cells: list[Cell], jobs: int) -> list[Path]:
    """The cells' executor files, found or pre-trained once before the workers start."""
    return [cell.file(progress=True) for cell in cells]
