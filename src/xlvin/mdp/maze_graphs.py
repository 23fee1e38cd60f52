"""The maze executor's graphs (paper section 4.1 and appendix "Synthetic graphs", figure 6 left):
the MDP of one maze of `xlvin/Maze-v0`, built from the maze itself.

"For mazes, we exploit the fact that the MDP is known: we train the executor exactly on the graph
structures generated from the training mazes." The graph "emphasises the terminal node as a node
to which all nodes are connected; all other nodes have a maximum of eight neighbours,
corresponding to the possible action types". Here, as in the environment (`xlvin.envs.maze`):

- one state per free cell other than the goal (row-major order), and one terminal node last: the
  episode's end, which both entering the goal and hitting a wall lead to;
- the 8 moves; a move onto the goal earns +1, into a wall or off the border -1 (both go to the
  terminal node), onto another free cell -0.01;
- the terminal node is absorbing with reward 0 (the `MDP` convention: its value is 0).

So every cell next to a wall or to the goal has an edge to the terminal node, and no state has
more than 8 distinct successors. The environment's time limit is not part of the MDP.
"""

import numpy as np

from xlvin.envs.maze import GOAL_REWARD, MOVE_REWARD, WALL_REWARD
from xlvin.envs.maze_data import MOVES, maze_split
from xlvin.errors import UserError
from xlvin.mdp.value_iteration import MDP

MAZE_FAMILY = "maze"


def maze_states(walls: np.ndarray, goal: tuple[int, int]) -> np.ndarray:
    """The cells [S - 1, 2] (row, col) of the non-terminal states of `maze_mdp`, in state order."""
    free = ~np.asarray(walls, dtype=bool)
    free[goal[0], goal[1]] = False
    return np.argwhere(free)


def maze_mdp(walls: np.ndarray, goal: tuple[int, int], gamma: float = 0.9) -> MDP:
    """The MDP of the maze walls [H, W] (True = wall) with goal cell `goal` (module docstring):
    S = free cells - 1 + 1 terminal node, A = 8, deterministic."""
    walls = np.asarray(walls, dtype=bool)
    h, w = walls.shape
    gr, gc = int(goal[0]), int(goal[1])
    if not (0 <= gr < h and 0 <= gc < w) or walls[gr, gc]:
        raise UserError(f"maze: the goal {goal} must be a free cell of the {h}x{w} maze")
    cells = maze_states(walls, (gr, gc))  # [n, 2]
    n = len(cells)
    index = np.full((h + 2, w + 2), n)  # state of every cell, with a margin: walls -> terminal
    index[cells[:, 0] + 1, cells[:, 1] + 1] = np.arange(n)
    target_rows, target_cols = (cells[:, None, :] + MOVES[None]).transpose(2, 0, 1)  # [n, 8] x2
    targets = index[target_rows + 1, target_cols + 1]  # [n, 8]; the margin is outside the grid
    inside = (target_rows >= 0) & (target_rows < h) & (target_cols >= 0) & (target_cols < w)
    onto_goal = (target_rows == gr) & (target_cols == gc)
    crash = ~inside | walls[target_rows.clip(0, h - 1), target_cols.clip(0, w - 1)]
    rewards = np.where(onto_goal, GOAL_REWARD, np.where(crash, WALL_REWARD, MOVE_REWARD))
    targets = np.concatenate([targets, np.full((1, len(MOVES)), n)])  # terminal: absorbing
    rewards = np.concatenate([rewards, np.zeros((1, len(MOVES)))])
    p = np.zeros((n + 1, len(MOVES), n + 1))
    s_idx, a_idx = np.indices(targets.shape)
    p[s_idx, a_idx, targets] = 1.0
    terminal = np.zeros(n + 1, dtype=bool)
    terminal[n] = True
    return MDP(p, rewards, gamma, terminal)


def maze_mdps(
    size: int, split: str, count: int, seed: int, stream: int, gamma: float = 0.9
) -> list[MDP]:
    """The MDPs of `count` distinct mazes of the `split` ("train" or "test") of the generated
    size x size mazes (the environment's default data set), drawn by
    default_rng([stream, seed]).permutation: training graphs come from the training mazes only,
    held-out graphs from the held-out mazes."""
    mazes = maze_split(size, split)
    if count > len(mazes.walls):
        raise UserError(
            f"asked for {count} {size}x{size} maze graphs; the {split} split has "
            f"{len(mazes.walls)} mazes"
        )
    chosen = np.random.default_rng([stream, seed]).permutation(len(mazes.walls))[:count]
    return [maze_mdp(mazes.walls[i], tuple(mazes.goals[i]), gamma) for i in chosen]
