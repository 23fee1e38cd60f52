"""Exact value iteration against hand-computed values and policy evaluation (paper eq. 1)."""

import numpy as np
import pytest

from xlvin.errors import UserError
from xlvin.mdp.graphs import erdos_renyi, random_deterministic
from xlvin.mdp.value_iteration import (
    MDP,
    bellman_backup,
    policy_evaluation,
    value_iteration,
)


def two_state_mdp(gamma: float = 0.5) -> MDP:
    """State 0: action 0 stays (+1), action 1 goes to state 1 (0). State 1 is terminal."""
    p = np.zeros((2, 2, 2))
    p[0, 0, 0] = p[0, 1, 1] = 1.0
    p[1, :, 1] = 1.0
    r = np.array([[1.0, 0.0], [0.0, 0.0]])
    return MDP(p, r, gamma, np.array([False, True]))


def test_hand_made_mdp_values() -> None:
    result = value_iteration(two_state_mdp(0.5), tol=1e-10)
    assert result.converged
    np.testing.assert_allclose(result.v, [2.0, 0.0], atol=1e-9)  # 1 / (1 - 0.5)
    np.testing.assert_array_equal(result.values[0], [0.0, 0.0])
    np.testing.assert_allclose(result.values[1], [1.0, 0.0])
    np.testing.assert_allclose(result.values[2], [1.5, 0.0])
    assert result.policy[0] == 0


def test_three_state_chain_with_stochastic_action() -> None:
    # 0 --a0 (p=.5 to 1, .5 to 2)--> ; 1 and 2 loop with rewards 1 and 3; a1 in 0 loops with 0.
    p = np.zeros((3, 2, 3))
    p[0, 0, [1, 2]] = 0.5
    p[0, 1, 0] = 1.0
    p[1, :, 1] = p[2, :, 2] = 1.0
    r = np.array([[0.0, 0.0], [1.0, 1.0], [3.0, 3.0]])
    mdp = MDP(p, r, 0.9, np.zeros(3, dtype=bool))
    result = value_iteration(mdp, tol=1e-10)
    v1, v2 = 1 / 0.1, 3 / 0.1
    np.testing.assert_allclose(result.v, [0.9 * (v1 + v2) / 2, v1, v2], atol=1e-7)
    assert result.policy[0] == 0


@pytest.mark.parametrize("generator", [random_deterministic, erdos_renyi])
def test_optimal_values_equal_policy_evaluation(generator) -> None:
    for seed in range(5):
        mdp = generator(15, 4, np.random.default_rng(seed))
        result = value_iteration(mdp, tol=1e-10)
        np.testing.assert_allclose(policy_evaluation(mdp, result.policy), result.v, atol=1e-7)
        # no deterministic policy does better anywhere (V* >= V^pi)
        other = np.random.default_rng(seed).integers(4, size=15)
        assert np.all(policy_evaluation(mdp, other) <= result.v + 1e-7)


def test_bellman_residual_vanishes_at_fixed_point() -> None:
    mdp = random_deterministic(20, 8, np.random.default_rng(0))
    result = value_iteration(mdp, tol=1e-4)
    residual = np.max(np.abs(bellman_backup(mdp, result.v) - result.v))
    assert residual < 1e-4 * mdp.gamma
    diffs = np.abs(np.diff(result.values, axis=0)).max(axis=1)
    assert diffs[-1] < 1e-4 <= diffs[-2]


def test_max_iters_reports_non_convergence() -> None:
    result = value_iteration(random_deterministic(10, 2, np.random.default_rng(0)), max_iters=3)
    assert not result.converged and result.values.shape == (4, 10)


def test_invalid_mdp_is_a_user_error() -> None:
    with pytest.raises(UserError):
        MDP(np.full((2, 1, 2), 0.7), np.zeros((2, 1)), 0.9, np.zeros(2, dtype=bool))
