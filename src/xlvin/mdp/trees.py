"""The true depth-K tree of a deterministic MDP and value iteration on it: the tree XLVIN's
planner grows (paper section 3.2, step 3: every action of every node, to depth K), made from the
MDP's own transitions instead of a transition model, in the layout of
`xlvin.nn.tree.expand_tree` (level d [B A^d]; the child of row i via action a is row i A + a of
level d + 1).

Value iteration on the tree starts from V = 0 at its leaves and backs values up K times
(eq. 1), so the roots get the K-step values V_K and Q_K(s, a) = R(s, a) + gamma V_{K-1}(s_a).
A terminal state earns nothing and is absorbing, as `MDP` says, so its subtree backs up 0.
"""

import numpy as np

from xlvin.errors import UserError
from xlvin.mdp.value_iteration import MDP


def successor_table(mdp: MDP) -> np.ndarray:
    """The successor s' of every (s, a) of a deterministic MDP: [S, A] (long); a terminal state
    is its own successor."""
    if not np.all(mdp.P.max(axis=-1) == 1.0):
        raise UserError("a tree of true successors needs a deterministic MDP")
    successors = mdp.P.argmax(axis=-1)  # [S, A]
    successors[mdp.terminal] = np.flatnonzero(mdp.terminal)[:, None]
    return successors


def earned_rewards(mdp: MDP) -> np.ndarray:
    """R(s, a) [S, A], 0 at terminal states (they earn nothing)."""
    return np.where(mdp.terminal[:, None], 0.0, mdp.R)


def tree_levels(successors: np.ndarray, roots: np.ndarray, depth: int) -> list[np.ndarray]:
    """The states of the tree's levels 0 .. depth: [B A^d] each, from the successor table
    [S, A] and the roots [B] (the `expand_tree` layout: row-major over [parents, actions])."""
    levels = [np.asarray(roots)]
    for _ in range(depth):
        levels.append(successors[levels[-1]].reshape(-1))  # [n A]
    return levels


def tree_q_values(
    successors: np.ndarray, rewards: np.ndarray, roots: np.ndarray, depth: int, gamma: float
) -> np.ndarray:
    """Q_K(s, a) [B, A] at the roots of value iteration on their depth-K trees from V = 0 at the
    leaves (module docstring): successors and rewards [S, A] (`successor_table`,
    `earned_rewards`), depth K >= 1."""
    if depth < 1:
        raise UserError(f"a tree's Q-values need depth >= 1, got {depth}")
    levels = tree_levels(successors, roots, depth)
    num_actions = successors.shape[1]
    v = np.zeros(len(levels[-1]))  # V_0 at the leaves
    for level in reversed(levels[:-1]):  # one backup of eq. 1 per level, leaves first
        q = rewards[level] + gamma * v.reshape(-1, num_actions)  # [n, A]
        v = q.max(axis=1)
    return q
