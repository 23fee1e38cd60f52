"""Seeded synthetic MDP families for pre-training and evaluating the executor (paper appendix
"Synthetic graphs"; Deac et al. 2020).

Every generator draws from the `np.random.Generator` it is given and nothing else. Each action
draws its own adjacency independently (a known bug of public generators seeded every action's
graph identically, so that all actions shared one adjacency). Terminal states are absorbing
(self-loop with probability 1) and have zero reward, as `MDP` documents.
"""

from collections.abc import Callable

import numpy as np

from xlvin.errors import UserError
from xlvin.mdp.value_iteration import MDP

#: The eight moves of the maze and grid worlds as (row, column) offsets, in action order.
MOVES: tuple[tuple[str, int, int], ...] = (
    ("N", -1, 0),
    ("S", 1, 0),
    ("E", 0, 1),
    ("W", 0, -1),
    ("NE", -1, 1),
    ("NW", -1, -1),
    ("SE", 1, 1),
    ("SW", 1, -1),
)


def _check_sizes(num_states: int, num_actions: int) -> None:
    if num_states < 2 or num_actions < 1:
        raise UserError(f"need at least 2 states and 1 action, got {num_states} and {num_actions}")


def _no_terminals(num_states: int) -> np.ndarray:
    return np.zeros(num_states, dtype=bool)


def _uniform_over_neighbours(adjacency: np.ndarray) -> np.ndarray:
    """adjacency [A, S, S] bool (a, s -> s') -> P [S, A, S] uniform over each row's out-neighbours.

    A state without out-neighbour in an action's graph gets a self-loop, so every row sums to 1.
    """
    adj = adjacency.copy()
    empty = ~adj.any(axis=2)
    a_idx, s_idx = np.nonzero(empty)
    adj[a_idx, s_idx, s_idx] = True
    p = adj / adj.sum(axis=2, keepdims=True)
    return p.transpose(1, 0, 2)


def random_deterministic(
    num_states: int, num_actions: int, rng: np.random.Generator, gamma: float = 0.9
) -> MDP:
    """The paper's random deterministic graphs: T(s, a) ~ Uniform(|S|),
    P(s'|s, a) = 1[s' = T(s, a)], R(s, a) ~ N(0, 1). The paper pre-trains XLVIN-R on
    |S| = 20, |A| = 8.
    """
    _check_sizes(num_states, num_actions)
    targets = rng.integers(num_states, size=(num_states, num_actions))
    r = rng.standard_normal((num_states, num_actions))
    return MDP(_deterministic_p(targets), r, gamma, _no_terminals(num_states))


def erdos_renyi(
    num_states: int, num_actions: int, rng: np.random.Generator, gamma: float = 0.9,
    edge_prob: float = 0.5,
) -> MDP:
    """Per action an independent directed Erdos-Renyi graph G(|S|, edge_prob) (self-loops allowed);
    P(s'|s, a) uniform over the out-neighbours of s in action a's graph (a self-loop if it has
    none); R(s, a) ~ N(0, 1). edge_prob 0.5 gives an expected out-degree of |S| / 2, the density
    of the public generator of Deac et al.
    """
    _check_sizes(num_states, num_actions)
    adjacency = rng.random((num_actions, num_states, num_states)) < edge_prob
    r = rng.standard_normal((num_states, num_actions))
    return MDP(_uniform_over_neighbours(adjacency), r, gamma, _no_terminals(num_states))


def erdos_renyi_weighted(
    num_states: int, num_actions: int, rng: np.random.Generator, gamma: float = 0.9,
    edge_prob: float = 0.5,
) -> MDP:
    """The authors' later "Erdos-Renyi" MDPs (dransyhe/CNAP, models/executor/data.py, the
    executor of their XLVIN-R runs): per action an independent *undirected* G(|S|, edge_prob)
    without self-loops; P(s'|s, a) proportional to U(0, 1) weights on the edges of s; R(s, a) ~
    U(0, 1). A draw in which some state has no neighbour in some action's graph is discarded
    and drawn again, as theirs is (its probabilities would be 0 / 0).
    """
    _check_sizes(num_states, num_actions)
    upper = np.triu(np.ones((num_states, num_states), dtype=bool), k=1)
    while True:
        coin = (rng.random((num_actions, num_states, num_states)) < edge_prob) & upper
        adjacency = coin | coin.transpose(0, 2, 1)  # [A, S, S], symmetric, no self-loops
        weights = rng.random((num_actions, num_states, num_states)) * adjacency
        if (weights.sum(axis=2) > 0).all():
            break
    p = weights / weights.sum(axis=2, keepdims=True)  # [A, S, S']
    r = rng.random((num_states, num_actions))
    return MDP(p.transpose(1, 0, 2), r, gamma, _no_terminals(num_states))


def _barabasi_albert_adjacency(n: int, m: int, rng: np.random.Generator) -> np.ndarray:
    """An undirected Barabasi-Albert graph: node t >= m links to m distinct earlier nodes drawn
    with probability proportional to their degree (uniformly among the m seed nodes for t = m).
    """
    adj = np.zeros((n, n), dtype=bool)
    endpoints: list[int] = []
    targets = np.arange(m)
    for t in range(m, n):
        adj[t, targets] = adj[targets, t] = True
        endpoints.extend(targets.tolist())
        endpoints.extend([t] * m)
        pool = np.asarray(endpoints)
        chosen: set[int] = set()
        while len(chosen) < m:
            chosen.add(int(pool[rng.integers(len(pool))]))
        targets = np.fromiter(chosen, dtype=np.int64)
    return adj


def barabasi_albert(
    num_states: int, num_actions: int, rng: np.random.Generator, gamma: float = 0.9,
    edges_per_node: int = 2,
) -> MDP:
    """Per action an independent Barabasi-Albert graph (preferential attachment, `edges_per_node`
    links per new node) with its node labels randomly permuted, so that the hubs of different
    actions are different states; P uniform over neighbours; R(s, a) ~ N(0, 1).
    """
    _check_sizes(num_states, num_actions)
    m = min(edges_per_node, num_states - 1)
    adjacency = np.empty((num_actions, num_states, num_states), dtype=bool)
    for a in range(num_actions):
        perm = rng.permutation(num_states)
        adjacency[a] = _barabasi_albert_adjacency(num_states, m, rng)[np.ix_(perm, perm)]
    r = rng.standard_normal((num_states, num_actions))
    return MDP(_uniform_over_neighbours(adjacency), r, gamma, _no_terminals(num_states))


def _move_targets(free: np.ndarray, num_moves: int) -> np.ndarray:
    """Row-major cell index reached by each of the first `num_moves` MOVES from every cell of an
    [H, W] grid: a move that leaves the grid or enters a non-free cell stays put. -> [H*W, moves].
    """
    h, w = free.shape
    rows, cols = np.indices((h, w))
    here = (rows * w + cols).ravel()
    targets = np.empty((h * w, num_moves), dtype=np.int64)
    for a, (_, dr, dc) in enumerate(MOVES[:num_moves]):
        r2, c2 = (rows + dr).ravel(), (cols + dc).ravel()
        inside = (r2 >= 0) & (r2 < h) & (c2 >= 0) & (c2 < w)
        ok = inside.copy()
        ok[inside] = free[r2[inside], c2[inside]]
        targets[:, a] = np.where(ok, r2 * w + c2, here)
    return targets


def _deterministic_p(targets: np.ndarray) -> np.ndarray:
    """targets [S, A] -> one-hot P [S, A, S]."""
    num_states, num_actions = targets.shape
    p = np.zeros((num_states, num_actions, num_states))
    s_idx, a_idx = np.indices(targets.shape)
    p[s_idx, a_idx, targets] = 1.0
    return p


def grid(num_states: int, num_actions: int, rng: np.random.Generator, gamma: float = 0.9) -> MDP:
    """A deterministic grid world: the cells of the most nearly square H x W grid with
    H * W = num_states (row-major), actions the first `num_actions` (1..8) of MOVES
    (N, S, E, W, NE, NW, SE, SW); a move off the grid stays; R(s, a) ~ N(0, 1).
    """
    _check_sizes(num_states, num_actions)
    if num_actions > len(MOVES):
        raise UserError(f"grid: at most {len(MOVES)} actions (moves), got {num_actions}")
    h = max(d for d in range(1, int(np.sqrt(num_states)) + 1) if num_states % d == 0)
    free = np.ones((h, num_states // h), dtype=bool)
    p = _deterministic_p(_move_targets(free, num_actions))
    r = rng.standard_normal((num_states, num_actions))
    return MDP(p, r, gamma, _no_terminals(num_states))


def maze_graph(
    walls: np.ndarray, goal: tuple[int, int], gamma: float = 0.9, step_reward: float = -0.01,
    goal_reward: float = 1.0,
) -> MDP:
    """The MDP of a maze: state r * W + c is cell (r, c) of walls [H, W] (True = wall); 8 actions
    MOVES (N, S, E, W, NE, NW, SE, SW). A move into a wall or off the border stays put. Every
    move costs `step_reward`, except one that enters the goal, which earns `goal_reward`. The goal
    is an absorbing terminal state; wall cells are terminal too (unreachable, value 0).
    """
    walls = np.asarray(walls, dtype=bool)
    h, w = walls.shape
    gr, gc = goal
    if not (0 <= gr < h and 0 <= gc < w) or walls[gr, gc]:
        raise UserError(f"maze: the goal {goal} must be a free cell of the {h}x{w} maze")
    goal_state = gr * w + gc
    terminal = walls.ravel().copy()
    terminal[goal_state] = True
    targets = _move_targets(~walls, len(MOVES))
    targets[terminal] = np.flatnonzero(terminal)[:, None]
    r = np.where(targets == goal_state, goal_reward, step_reward)
    r[terminal] = 0.0
    return MDP(_deterministic_p(targets), r, gamma, terminal)


def cartpole_tree(
    rng: np.random.Generator, depth: int = 10, gamma: float = 0.9, fail_offset: float = 5.0,
) -> MDP:
    """A CartPole-like binary tree (paper appendix "Synthetic graphs").

    Action 0 pushes left and adds +1 to a node's offset (#left - #right steps from the root),
    action 1 pushes right and adds -1; the root has offset 0. Each child of a living node is
    drawn independently: it fails ("red" node) with probability min(1, (offset / fail_offset)^2),
    so repeated steps in one direction fail more often and |offset| >= fail_offset always fails.
    Moving to a living child ("blue" node) earns reward 1, moving to a failed one earns 0.
    Failed nodes and the living nodes at `depth` (the horizon) are absorbing terminal states.
    States are numbered breadth-first from the root (state 0); the tree has at most
    2^(depth+1) - 1 states.
    """
    offsets = [np.zeros(1, dtype=np.int64)]
    alive = [np.ones(1, dtype=bool)]
    parents: list[np.ndarray] = [np.zeros(0, dtype=np.int64)]
    actions: list[np.ndarray] = [np.zeros(0, dtype=np.int64)]
    first = [0]
    for _ in range(depth):
        living = np.flatnonzero(alive[-1])
        child_offsets = (offsets[-1][living][:, None] + np.array([1, -1])).ravel()
        p_fail = np.minimum(1.0, (child_offsets / fail_offset) ** 2)
        first.append(first[-1] + len(offsets[-1]))
        offsets.append(child_offsets)
        alive.append(rng.random(len(child_offsets)) >= p_fail)
        parents.append(first[-2] + np.repeat(living, 2))
        actions.append(np.tile([0, 1], len(living)))
    num_states = first[-1] + len(offsets[-1])
    is_alive = np.concatenate(alive)
    targets = np.repeat(np.arange(num_states)[:, None], 2, axis=1)
    targets[np.concatenate(parents), np.concatenate(actions)] = np.arange(1, num_states)
    terminal = targets[:, 0] == np.arange(num_states)
    r = np.where(terminal[:, None], 0.0, is_alive[targets].astype(float))
    return MDP(_deterministic_p(targets), r, gamma, terminal)


#: name -> generator(num_states, num_actions, rng, gamma) -> MDP, as `--graphs NAME` selects them.
#: The CartPole tree fixes its own sizes (2 actions, depth 10) and ignores the requested ones.
FAMILIES: dict[str, Callable[[int, int, np.random.Generator, float], MDP]] = {
    "random_deterministic": random_deterministic,
    "erdos_renyi": erdos_renyi,
    "erdos_renyi_weighted": erdos_renyi_weighted,
    "barabasi_albert": barabasi_albert,
    "grid": grid,
    "cartpole_tree": lambda states, actions, rng, gamma=0.9: cartpole_tree(rng, gamma=gamma),
}

def family(name: str) -> Callable[[int, int, np.random.Generator, float], MDP]:
    """The generator registered as `name`; an unknown name is a UserError listing the valid ones."""
    try:
        return FAMILIES[name]
    except KeyError:
        raise UserError(
            f"unknown graph family {name!r}; valid: {', '.join(sorted(FAMILIES))}"
        ) from None
