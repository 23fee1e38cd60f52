"""Value predictability of state embeddings: how much of V* a linear read-out of the embeddings
of a maze's states explains.

This is the measure of the authors' public code, dransyhe/CNAP (commit e303fc5), file
`cnap/environment/maze/value_predictability.py`, function `v_star_predictability`, written anew
here. For a maze, every free cell becomes a state (the maze's observation with the agent on that
cell); V* of each state is computed by value iteration with gamma = 0.9; a least-squares linear
model with an intercept is fitted from the embeddings to V*, and the measure is its coefficient
of determination R^2 on those same states (in-sample). Their script prints it for the encoder's
embeddings ("Before gnn") and for the executor layer's output ("After gnn": the embedding
concatenated with the executor's read-out at the root), once per curriculum level, with that
level's checkpoint.

The paper does not define this number. Its figure 5 (section 4.1, "Qualitative results") shows
3D PCA projections of the embeddings of one held-out maze, coloured by distance to the goal
(`xlvin.experiments.maze_embeddings` draws it). Where their script and the paper's maze differ,
this module follows the paper by default; `tests/test_authors_maze.py` checks each point against
numbers their code produced:

- Targets. `optimal_values(..., convention="paper")` (the default) is V* of the paper's maze MDP
  (`xlvin.mdp.maze_graphs.maze_mdp`, appendix B): the states are the free cells other than the
  goal, entering the goal (+1) or a wall (-1) ends the episode, terminal value 0.
  `convention="cnap"` is their MDP (`generate_mdp`): every free cell is a state, the goal's own
  cell included, which earns +1 per step forever (V = 1 / (1 - gamma) = 10); a wall leads to a
  "done" state that earns -1 per step forever (V = -10). On a cell d moves from the goal the two
  differ by 10 gamma^d, an affine function of the paper's V* (so the R^2 over such cells is the
  same); they differ otherwise on the goal's cell (theirs only) and on cells boxed in by walls
  (-10 there, -1 here).
- Pooling. `value_predictability` pools the states of every maze it is given. Their script
  empties its lists inside its loop over the held-out mazes, so each level's regression sees the
  states of the last maze only.
- Embeddings. Theirs come from the encoder one state at a time with its BatchNorm layers in
  training mode (each observation normalised by its own statistics); here the caller's `embed`
  decides (our agents evaluate in eval mode).
- Degenerate fits. With F features and N states in general position the in-sample R^2 is 1
  whenever N <= F + 1. Their "After gnn" embeddings have 20 features, and none of the 732
  held-out mazes of the 8x8 set has more than 21 free cells (12.2 on average), so that number is
  1.0 on every one of them whatever the embeddings; their "Before gnn" embeddings have 10, and
  40 % of those mazes have at most 11 free cells. `value_r2` computes it all the same (it is the
  measure); `value_predictability` reports N and F beside it.
"""

from collections.abc import Callable, Iterable, Sequence

import numpy as np

from xlvin.envs.maze import AGENT, GOAL, WALLS
from xlvin.envs.maze_data import MOVES
from xlvin.errors import UserError
from xlvin.mdp.maze_graphs import maze_mdp, maze_states
from xlvin.mdp.value_iteration import MDP, value_iteration

CONVENTIONS = ("paper", "cnap")
#: Their MDP's per-step rewards in its two absorbing states (`convention="cnap"`).
CNAP_GOAL_REWARD, CNAP_DONE_REWARD = 1.0, -1.0
#: Value-iteration tolerance: far below float32 resolution of values of magnitude 10.
VI_TOLERANCE = 1e-10


def value_r2(embeddings: np.ndarray, values: np.ndarray) -> float:
    """In-sample R^2 of the least-squares fit values ~ embeddings @ w + b.

    embeddings [N, F], values [N]. 1 - SS_res / SS_tot, where SS_tot is the sum of squares of
    the values about their mean; when the values are all equal: 1.0 if the fit is exact, else
    0.0 (scikit-learn's `r2_score` convention, which their script's `LinearRegression.score`
    uses). Any least-squares solution gives the same fitted values, so rank-deficient or wide
    embeddings (F >= N) are fine.
    """
    x = np.asarray(embeddings, dtype=np.float64)
    y = np.asarray(values, dtype=np.float64)
    if x.ndim != 2 or y.ndim != 1 or len(x) != len(y) or len(y) == 0:
        raise UserError(f"value_r2: embeddings [N, F] and values [N], got {x.shape} and {y.shape}")
    xc, yc = x - x.mean(axis=0), y - y.mean()
    coef = np.linalg.lstsq(xc, yc, rcond=None)[0]
    ss_res = float(np.sum((yc - xc @ coef) ** 2))
    ss_tot = float(np.sum(yc**2))
    if ss_tot == 0.0:
        return 1.0 if ss_res == 0.0 else 0.0
    return 1.0 - ss_res / ss_tot


def cnap_maze_mdp(
    walls: np.ndarray, goal: tuple[int, int], gamma: float = 0.9
) -> tuple[MDP, np.ndarray]:
    """Their maze MDP (module docstring, `convention="cnap"`) as an `MDP` without terminal
    states, and its cells [S - 1, 2]: every free cell row-major (the goal's included), then one
    "done" state."""
    walls = np.asarray(walls, dtype=bool)
    h, w = walls.shape
    cells = np.argwhere(~walls)
    n = len(cells)
    index = {(int(r), int(c)): i for i, (r, c) in enumerate(cells)}
    goal = (int(goal[0]), int(goal[1]))
    if goal not in index:
        raise UserError(f"maze: the goal {goal} must be a free cell of the {h}x{w} maze")
    p = np.zeros((n + 1, len(MOVES), n + 1))
    r = np.zeros((n + 1, len(MOVES)))
    p[n, :, n], r[n] = 1.0, CNAP_DONE_REWARD
    for s, (row, col) in enumerate(cells):
        if (row, col) == goal:
            p[s, :, s], r[s] = 1.0, CNAP_GOAL_REWARD
            continue
        for a, (dr, dc) in enumerate(MOVES):
            nxt = index.get((int(row + dr), int(col + dc)), n)
            p[s, a, nxt] = 1.0
            r[s, a] = (-1.0 if nxt == n else 1.0 if (row + dr, col + dc) == goal else -0.01)
    return MDP(p, r, gamma, np.zeros(n + 1, dtype=bool)), cells


def optimal_values(
    walls: np.ndarray, goal: tuple[int, int], gamma: float = 0.9, convention: str = "paper"
) -> tuple[np.ndarray, np.ndarray]:
    """(cells [N, 2], V* [N]) of the states of one maze, walls [H, W] (True = wall).

    "paper": the states of `maze_mdp` (free cells but the goal, row-major), V* of that MDP.
    "cnap": every free cell row-major, V* of their MDP (`cnap_maze_mdp`).
    """
    if convention not in CONVENTIONS:
        raise UserError(
            f"value predictability convention {convention!r}: choose one of {CONVENTIONS}"
        )
    if convention == "paper":
        mdp, cells = maze_mdp(walls, goal, gamma), maze_states(walls, goal)
    else:
        mdp, cells = cnap_maze_mdp(walls, goal, gamma)
    values = value_iteration(mdp, tol=VI_TOLERANCE, max_iters=100_000).v
    return cells, values[: len(cells)]


def maze_observations(walls: np.ndarray, goal: tuple[int, int], cells: np.ndarray) -> np.ndarray:
    """Observations [N, 3, H, W] float32 of `xlvin/Maze-v0` with the agent on each of `cells`."""
    walls = np.asarray(walls, dtype=bool)
    obs = np.zeros((len(cells), 3, *walls.shape), dtype=np.float32)
    obs[:, WALLS] = walls
    obs[:, GOAL, goal[0], goal[1]] = 1.0
    obs[np.arange(len(cells)), AGENT, cells[:, 0], cells[:, 1]] = 1.0
    return obs


def value_predictability(
    embed: Callable[[np.ndarray], np.ndarray],
    mazes: Iterable[tuple[np.ndarray, Sequence[int]]],
    gamma: float = 0.9,
    convention: str = "paper",
) -> dict[str, float]:
    """R^2 of V* on the embeddings of the states of every maze in `mazes` ((walls, goal) pairs),
    pooled. `embed` maps observations [N, 3, H, W] to embeddings [N, F].

    Returns {"r2", "states": N, "features": F}: an R^2 of 1 with N <= F + 1 says nothing.
    """
    xs, ys = [], []
    for walls, goal in mazes:
        goal = (int(goal[0]), int(goal[1]))
        cells, values = optimal_values(walls, goal, gamma, convention)
        xs.append(np.asarray(embed(maze_observations(walls, goal, cells)), dtype=np.float64))
        ys.append(values)
    if not xs:
        raise UserError("value_predictability: no maze given")
    x, y = np.concatenate(xs), np.concatenate(ys)
    return {"r2": value_r2(x, y), "states": int(x.shape[0]), "features": int(x.shape[1])}
