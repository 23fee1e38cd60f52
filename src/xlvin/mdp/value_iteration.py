"""Exact value iteration on a finite MDP (NumPy), the algorithm the executor learns to imitate.

Value iteration (paper section 2) is successive approximation of the fixed point of the Bellman
optimality operator, paper eq. (1):

    V*(s) = max_a ( R(s, a) + gamma * sum_s' P(s'|s, a) V*(s') ).

Terminal states have value 0 and earn no reward: their Q-values are fixed to 0.
"""

from dataclasses import dataclass

import numpy as np

from xlvin.errors import UserError


@dataclass(frozen=True)
class MDP:
    """A finite discounted MDP (S, A, R, P, gamma) plus a terminal-state mask.

    P: [S, A, S] with P[s, a, s'] = P(s'|s, a), every row P[s, a] sums to 1.
    R: [S, A] expected reward R(s, a).
    terminal: bool [S]; a terminal state has value 0. The generators in `xlvin.mdp.graphs`
    also make every terminal state absorbing (P[s, a, s] = 1) with R[s, a] = 0, so that the
    graph alone (what the executor sees) already implies V(s) = 0 there.
    """

    P: np.ndarray
    R: np.ndarray
    gamma: float
    terminal: np.ndarray

    def __post_init__(self) -> None:
        s, a = self.R.shape
        if self.P.shape != (s, a, s):
            raise UserError(f"MDP: P has shape {self.P.shape}, expected {(s, a, s)} from R")
        if self.terminal.shape != (s,) or self.terminal.dtype != np.bool_:
            raise UserError(f"MDP: terminal must be a bool array of shape {(s,)}")
        if not 0.0 <= self.gamma <= 1.0:
            raise UserError(f"MDP: gamma must lie in [0, 1], got {self.gamma}")
        if np.any(self.P < 0) or not np.allclose(self.P.sum(-1), 1.0, atol=1e-9):
            raise UserError("MDP: every row P[s, a, :] must be a probability distribution")

    @property
    def num_states(self) -> int:
        return self.R.shape[0]

    @property
    def num_actions(self) -> int:
        return self.R.shape[1]


@dataclass(frozen=True)
class VIResult:
    """Every iterate of value iteration and the greedy policy of the last one.

    values: [T+1, S], values[0] = 0 and values[t+1] = B(values[t]) (B: Bellman operator, eq. 1).
    q: [S, A] Q-values R + gamma P V_T; policy: [S] greedy action argmax_a q (first on ties).
    converged: whether max |V_T - V_{T-1}| < tol was reached within max_iters.
    """

    values: np.ndarray
    q: np.ndarray
    policy: np.ndarray
    converged: bool

    @property
    def v(self) -> np.ndarray:
        """The final iterate V_T, an approximation of V* (error <= gamma tol / (1 - gamma))."""
        return self.values[-1]

    @property
    def steps(self) -> int:
        """T: the number of Bellman backups performed."""
        return self.values.shape[0] - 1


def q_values(mdp: MDP, v: np.ndarray) -> np.ndarray:
    """Q(s, a) = R(s, a) + gamma sum_s' P(s'|s, a) v(s'), 0 at terminal states. v: [S] -> [S, A]."""
    q = mdp.R + mdp.gamma * (mdp.P @ v)
    q[mdp.terminal] = 0.0
    return q


def bellman_backup(mdp: MDP, v: np.ndarray) -> np.ndarray:
    """One application of the Bellman optimality operator of eq. (1): max_a Q(s, a). [S] -> [S]."""
    return q_values(mdp, v).max(axis=1)


def value_iteration(mdp: MDP, tol: float = 1e-4, max_iters: int = 10_000) -> VIResult:
    """Run V_{t+1} = B(V_t) from V_0 = 0 until max_s |V_{t+1}(s) - V_t(s)| < tol (eq. 1)."""
    values = [np.zeros(mdp.num_states)]
    converged = False
    for _ in range(max_iters):
        values.append(bellman_backup(mdp, values[-1]))
        if np.max(np.abs(values[-1] - values[-2])) < tol:
            converged = True
            break
    q = q_values(mdp, values[-1])
    return VIResult(np.stack(values), q, q.argmax(axis=1), converged)


def policy_evaluation(mdp: MDP, policy: np.ndarray) -> np.ndarray:
    """V^pi of a deterministic policy [S] by solving (I - gamma P_pi) V = R_pi (V = 0 at terminals).

    At the optimal policy this equals V*: V^{pi*} satisfies eq. (1).
    """
    states = np.arange(mdp.num_states)
    p_pi = mdp.P[states, policy]
    r_pi = mdp.R[states, policy].copy()
    p_pi[mdp.terminal] = 0.0
    r_pi[mdp.terminal] = 0.0
    return np.linalg.solve(np.eye(mdp.num_states) - mdp.gamma * p_pi, r_pi)
