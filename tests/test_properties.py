"""Property-based invariants over random sizes and seeds (hypothesis): the synthetic MDP families,
exact value iteration (paper eq. 1) and the latent tree expansion / execution (paper 3.2).

test_graphs.py, test_value_iteration.py and test_transition_tree.py check the same modules on
hand-made or fixed-size cases; here every size, seed, discount and batch is drawn at random.
"""

import numpy as np
import torch
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from xlvin.mdp.graphs import FAMILIES, MOVES, cartpole_tree, maze_graph
from xlvin.mdp.value_iteration import (
    MDP,
    bellman_backup,
    policy_evaluation,
    q_values,
    value_iteration,
)
from xlvin.nn.executor import MessagePassing
from xlvin.nn.transition import TransitionModel
from xlvin.nn.tree import execute_tree, expand_tree, node_count

FAST = settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow])
seeds = st.integers(0, 2**32 - 1)
# The CartPole tree has up to 2047 states whatever the requested sizes: drawn less often.
family_names = st.sampled_from(sorted(FAMILIES))
small_families = st.sampled_from(sorted(set(FAMILIES) - {"cartpole_tree"}))


def make_mdp(name: str, states: int, actions: int, seed: int, gamma: float) -> MDP:
    if name == "grid":
        actions = min(actions, len(MOVES))
    return FAMILIES[name](states, actions, np.random.default_rng(seed), gamma)


# --- synthetic MDP families -------------------------------------------------------------------


@FAST
@given(name=family_names, states=st.integers(2, 30), actions=st.integers(1, 8), seed=seeds,
       gamma=st.floats(0.0, 1.0))
def test_family_shapes_and_distributions(
    name: str, states: int, actions: int, seed: int, gamma: float
) -> None:
    mdp = make_mdp(name, states, actions, seed, gamma)
    if name == "cartpole_tree":  # fixed sizes: 2 actions, a binary tree of depth 10
        assert mdp.num_actions == 2 and 3 <= mdp.num_states <= 2**11 - 1
    else:
        assert (mdp.num_states, mdp.num_actions) == (states, min(actions, 8))
    s, a = mdp.num_states, mdp.num_actions
    assert mdp.P.shape == (s, a, s) and mdp.R.shape == (s, a) and mdp.terminal.shape == (s,)
    assert mdp.terminal.dtype == np.bool_ and mdp.gamma == gamma
    assert np.all(mdp.P >= 0) and np.all(np.isfinite(mdp.R))
    np.testing.assert_allclose(mdp.P.sum(axis=-1), 1.0, rtol=0, atol=1e-12)
    # every row is uniform over its support (deterministic families: one-hot), but for the
    # authors' weighted Erdos-Renyi graphs, whose probabilities are random weights
    support = mdp.P > 0
    if name != "erdos_renyi_weighted":
        expected = np.where(support, 1.0 / support.sum(axis=-1, keepdims=True), 0.0)
        np.testing.assert_allclose(mdp.P, expected, rtol=0, atol=1e-12)
    if name in ("random_deterministic", "grid", "cartpole_tree"):
        assert np.all(support.sum(axis=-1) == 1)


@FAST
@given(states=st.integers(2, 30), actions=st.integers(1, 6), seed=seeds)
def test_barabasi_albert_graphs_are_undirected_without_isolated_states(
    states: int, actions: int, seed: int
) -> None:
    mdp = make_mdp("barabasi_albert", states, actions, seed, 0.9)
    support = mdp.P > 0
    for a in range(actions):
        np.testing.assert_array_equal(support[:, a], support[:, a].T)
        assert not np.any(np.diag(support[:, a]))  # every state has a neighbour: no self-loop fill


@FAST
@given(states=st.integers(2, 36), actions=st.integers(1, 8), seed=seeds)
def test_grid_moves_by_one_cell_or_stays_at_the_border(states: int, actions: int, seed: int) -> None:
    mdp = make_mdp("grid", states, actions, seed, 0.9)
    h = max(d for d in range(1, int(np.sqrt(states)) + 1) if states % d == 0)
    w = states // h
    targets = mdp.P.argmax(axis=-1)
    for s in range(states):
        r, c = divmod(s, w)
        for a, (_, dr, dc) in enumerate(MOVES[:actions]):
            inside = 0 <= r + dr < h and 0 <= c + dc < w
            assert targets[s, a] == ((r + dr) * w + c + dc if inside else s)


@FAST
@given(height=st.integers(2, 6), width=st.integers(2, 6), seed=seeds, gamma=st.floats(0.5, 0.95))
def test_random_maze_is_a_valid_mdp_with_an_absorbing_goal(
    height: int, width: int, seed: int, gamma: float
) -> None:
    rng = np.random.default_rng(seed)
    walls = rng.random((height, width)) < 0.3
    free = np.argwhere(~walls)
    if len(free) == 0:
        return
    goal = tuple(int(x) for x in free[rng.integers(len(free))])
    mdp = maze_graph(walls, goal, gamma)
    s = height * width
    assert mdp.P.shape == (s, len(MOVES), s) and np.all(mdp.P >= 0)
    np.testing.assert_allclose(mdp.P.sum(axis=-1), 1.0, rtol=0, atol=1e-12)
    g = goal[0] * width + goal[1]
    assert mdp.terminal[g] and np.all(mdp.P[g, :, g] == 1.0) and np.all(mdp.R[g] == 0.0)
    np.testing.assert_array_equal(mdp.terminal, walls.ravel() | (np.arange(s) == g))
    # no move ever enters a wall
    reached = mdp.P[~mdp.terminal].argmax(axis=-1)
    assert not np.any(walls.ravel()[reached])
    # values lie between always paying the step cost and reaching the goal at once
    v = value_iteration(mdp, tol=1e-10).v
    assert v[g] == 0.0 and np.all(v <= 1.0 + 1e-9) and np.all(v >= -0.01 / (1 - gamma) - 1e-9)


# --- value iteration ----------------------------------------------------------------------------


@FAST
@given(name=family_names, states=st.integers(2, 25), actions=st.integers(1, 6), seed=seeds,
       gamma=st.floats(0.0, 0.95), tol=st.sampled_from([1e-3, 1e-6, 1e-9]))
def test_value_iteration_reaches_the_bellman_fixed_point(
    name: str, states: int, actions: int, seed: int, gamma: float, tol: float
) -> None:
    mdp = make_mdp(name, states, actions, seed, gamma)
    result = value_iteration(mdp, tol=tol)
    assert result.converged
    s = mdp.num_states
    assert result.values.shape == (result.steps + 1, s) and result.q.shape == (s, mdp.num_actions)
    np.testing.assert_array_equal(result.values[0], np.zeros(s))
    # every iterate is one Bellman backup of the previous one, and B is a gamma-contraction
    for t in range(result.steps):
        np.testing.assert_allclose(result.values[t + 1], bellman_backup(mdp, result.values[t]),
                                   rtol=0, atol=1e-12)
    diffs = np.abs(np.diff(result.values, axis=0)).max(axis=1)
    assert np.all(diffs[1:] <= gamma * diffs[:-1] + 1e-12)
    # stopped at |V_T - V_{T-1}| < tol, so the Bellman residual is below gamma * tol (eq. 1)
    residual = np.abs(bellman_backup(mdp, result.v) - result.v).max()
    assert residual <= gamma * tol + 1e-12
    # values are bounded by the discounted reward range, and zero at terminal states
    bound = np.abs(mdp.R).max() / (1 - gamma)
    assert np.all(np.abs(result.v) <= bound + 1e-9)
    assert np.all(result.v[mdp.terminal] == 0.0)
    # q and the greedy policy belong to the final iterate
    np.testing.assert_allclose(result.q, q_values(mdp, result.v), rtol=0, atol=1e-12)
    np.testing.assert_array_equal(result.q[np.arange(s), result.policy], result.q.max(axis=1))


@FAST
@given(name=family_names, states=st.integers(2, 25), actions=st.integers(1, 6), seed=seeds,
       gamma=st.floats(0.0, 0.95))
def test_policy_evaluation_of_the_greedy_policy_gives_the_vi_values(
    name: str, states: int, actions: int, seed: int, gamma: float
) -> None:
    mdp = make_mdp(name, states, actions, seed, gamma)
    tol = 1e-9
    result = value_iteration(mdp, tol=tol)
    v_pi = policy_evaluation(mdp, result.policy)
    # ||V^pi - V_T|| <= ||B V_T - V_T|| / (1 - gamma) <= gamma tol / (1 - gamma) for greedy pi
    np.testing.assert_allclose(v_pi, result.v, rtol=0, atol=gamma * tol / (1 - gamma) + 1e-9)
    # and no other deterministic policy is better anywhere (V* >= V^pi)
    other = np.random.default_rng(seed).integers(mdp.num_actions, size=mdp.num_states)
    assert np.all(policy_evaluation(mdp, other) <= result.v + 1e-7)


@settings(max_examples=10, deadline=None)
@given(seed=seeds, depth=st.integers(1, 8), gamma=st.floats(0.1, 1.0))
def test_value_iteration_on_a_cartpole_tree_stops_within_its_horizon(
    seed: int, depth: int, gamma: float
) -> None:
    """The tree is acyclic with absorbing leaves: VI is exact after depth + 1 backups, even at
    gamma = 1, and V*(root) is the discounted count of living nodes on the best path."""
    mdp = cartpole_tree(np.random.default_rng(seed), depth=depth, gamma=gamma)
    result = value_iteration(mdp, tol=1e-12)
    assert result.converged and result.steps <= depth + 1
    assert 0.0 <= result.v[0] <= sum(gamma**t for t in range(depth)) + 1e-9


# --- latent tree expansion and execution --------------------------------------------------------


def closed_form_count(batch: int, actions: int, depth: int) -> int:
    return batch * (depth + 1 if actions == 1 else (actions ** (depth + 1) - 1) // (actions - 1))


@FAST
@given(batch=st.integers(1, 4), actions=st.integers(1, 4), depth=st.integers(0, 3),
       k=st.integers(1, 6), seed=seeds)
def test_tree_levels_counts_and_child_rows(
    batch: int, actions: int, depth: int, k: int, seed: int
) -> None:
    torch.manual_seed(seed % 2**31)
    model = TransitionModel(k, actions, hidden=8)
    h = torch.randn(batch, k)
    with torch.no_grad():
        levels = expand_tree(h, model, depth)
    assert len(levels) == depth + 1
    assert [tuple(x.shape) for x in levels] == [(batch * actions**d, k) for d in range(depth + 1)]
    total = sum(x.shape[0] for x in levels)
    assert total == node_count(batch, actions, depth) == closed_form_count(batch, actions, depth)
    if depth == 0:
        assert levels[0] is h  # depth 0: the roots only
    with torch.no_grad():
        for d in range(depth):
            parents = levels[d]
            for a in range(actions):  # child of row i via a is row i * A + a of the next level
                expected = parents + model(parents, torch.full((parents.shape[0],), a))
                torch.testing.assert_close(levels[d + 1][a::actions], expected, rtol=1e-5, atol=1e-5)


@FAST
@given(batch=st.integers(1, 4), actions=st.integers(1, 4), depth=st.integers(1, 3), seed=seeds,
       data=st.data())
def test_tree_row_of_an_action_path(
    batch: int, actions: int, depth: int, seed: int, data: st.DataObject
) -> None:
    """Row index of the node reached from root b by a_1 .. a_d is b * A^d + (a_1 .. a_d in base A)."""
    torch.manual_seed(seed % 2**31)
    model = TransitionModel(5, actions, hidden=8)
    h = torch.randn(batch, 5)
    b = data.draw(st.integers(0, batch - 1), label="root")
    path = data.draw(st.lists(st.integers(0, actions - 1), min_size=depth, max_size=depth),
                     label="actions")
    with torch.no_grad():
        levels = expand_tree(h, model, depth)
        node = h[b : b + 1]
        for d, a in enumerate(path, start=1):
            node = model.next_embedding(node, torch.tensor([a]))
            row = b * actions**d + sum(x * actions ** (d - 1 - j) for j, x in enumerate(path[:d]))
            torch.testing.assert_close(levels[d][row], node[0], rtol=1e-5, atol=1e-5)


@FAST
@given(batch=st.integers(1, 4), actions=st.integers(1, 4), depth=st.integers(0, 3),
       steps=st.integers(0, 3), aggregation=st.sampled_from(["max", "sum"]),
       layer_norm=st.booleans(), seed=seeds)
def test_execute_tree_reads_out_each_root_independently(
    batch: int, actions: int, depth: int, steps: int, aggregation: str, layer_norm: bool, seed: int
) -> None:
    hidden = 6
    torch.manual_seed(seed % 2**31)
    model = TransitionModel(hidden, actions, hidden=8)
    processor = MessagePassing(hidden, aggregation, layer_norm)
    edges = torch.randn(actions, hidden)
    h = torch.randn(batch, hidden)
    with torch.no_grad():
        chi = execute_tree(processor, expand_tree(h, model, depth), edges, steps)
        assert chi.shape == (batch, hidden) and torch.all(torch.isfinite(chi))
        if steps == 0:
            assert chi is h  # no planning: the root embedding itself
        # tree b's readout depends on root b only: permuting the roots permutes the readouts,
        # and one tree executed alone gives its row of the batch
        perm = torch.from_numpy(np.random.default_rng(seed).permutation(batch))
        chi_perm = execute_tree(processor, expand_tree(h[perm], model, depth), edges, steps)
        torch.testing.assert_close(chi_perm, chi[perm], rtol=1e-5, atol=1e-5)
        alone = execute_tree(processor, expand_tree(h[-1:], model, depth), edges, steps)
        torch.testing.assert_close(alone[0], chi[-1], rtol=1e-5, atol=1e-5)
        if depth == 0 and steps > 0:
            # a lone root has no children: every step adds a zero aggregate, i.e. only the
            # update (h + 0, then LayerNorm) acts: X(h) then X(X(h) + h) ...
            expected = processor.update(h, torch.zeros_like(h))
            for _ in range(steps - 1):
                expected = processor.update(expected + h, torch.zeros_like(h))
            torch.testing.assert_close(chi, expected, rtol=1e-5, atol=1e-5)
