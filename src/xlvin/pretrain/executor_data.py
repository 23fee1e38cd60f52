"""The MDPs the VI executor is pre-trained and evaluated on, and their value-iteration solutions
(paper appendix "Pre-training").

Graph seeds: training graph i is drawn from `np.random.default_rng([TRAIN_STREAM, seed, i])` and
held-out graph i from `np.random.default_rng([EVAL_STREAM, seed, i])`. The streams differ in
their first entry, so held-out graphs never share a generator seed with training graphs, for any
pair of seeds. Maze graphs (`--graphs maze`, `xlvin.mdp.maze_graphs`) are the MDPs of whole
mazes: training graphs from the training mazes, held-out graphs from the held-out mazes.
"""

import numpy as np

from xlvin.errors import UserError
from xlvin.mdp.graphs import family
from xlvin.mdp.maze_graphs import MAZE_FAMILY, maze_mdps
from xlvin.mdp.value_iteration import MDP, VIResult, value_iteration

TRAIN_STREAM = 0
EVAL_STREAM = 1
SHUFFLE_STREAM = 2  # minibatch order during training


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


def solve_mdps(mdps: list[MDP], tol: float) -> list[VIResult]:
    """Value iteration on every MDP until max |V_{t+1} - V_t| < tol: the targets of training and
    of the held-out evaluation."""
    results = [value_iteration(m, tol) for m in mdps]
    if not all(r.converged for r in results):
        raise UserError("value iteration did not converge on a synthetic MDP (is gamma < 1?)")
    return results
