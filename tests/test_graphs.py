"""Synthetic MDP families: valid distributions, independent per-action graphs, maze moves."""

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from xlvin.errors import UserError
from xlvin.mdp.graphs import FAMILIES, MOVES, cartpole_tree, family, maze_graph
from xlvin.mdp.value_iteration import value_iteration


@settings(max_examples=25, deadline=None)
@given(
    name=st.sampled_from(sorted(FAMILIES)),
    states=st.integers(2, 40),
    actions=st.integers(1, 8),
    seed=st.integers(0, 2**32 - 1),
)
def test_every_family_gives_probability_rows(
    name: str, states: int, actions: int, seed: int
) -> None:
    mdp = family(name)(states, actions, np.random.default_rng(seed), 0.9)
    assert np.all(mdp.P >= 0)
    np.testing.assert_allclose(mdp.P.sum(axis=-1), 1.0, atol=1e-12)
    # terminal states are absorbing with zero reward
    t = np.flatnonzero(mdp.terminal)
    assert np.all(mdp.P[t, :, t] == 1.0) and np.all(mdp.R[t] == 0.0)


@pytest.mark.parametrize("name", ["random_deterministic", "erdos_renyi", "barabasi_albert"])
def test_actions_draw_independent_adjacency(name: str) -> None:
    mdp = family(name)(30, 6, np.random.default_rng(0), 0.9)
    support = mdp.P > 0  # [S, A, S]
    for a in range(1, 6):
        assert not np.array_equal(support[:, 0], support[:, a])


def test_families_are_reproducible_from_the_generator() -> None:
    for name, gen in FAMILIES.items():
        a, b = gen(12, 3, np.random.default_rng(7), 0.9), gen(12, 3, np.random.default_rng(7), 0.9)
        np.testing.assert_array_equal(a.P, b.P, err_msg=name)
        np.testing.assert_array_equal(a.R, b.R, err_msg=name)


def test_unknown_family_lists_valid_names() -> None:
    with pytest.raises(UserError, match="erdos_renyi"):
        family("nope")


def test_random_deterministic_is_one_hot() -> None:
    mdp = family("random_deterministic")(20, 8, np.random.default_rng(0), 0.9)
    assert np.all((mdp.P == 0) | (mdp.P == 1))


def test_maze_moves_walls_and_goal() -> None:
    walls = np.zeros((3, 4), dtype=bool)
    walls[1, 1] = True
    mdp = maze_graph(walls, goal=(2, 3), gamma=0.9)
    names = [m[0] for m in MOVES]

    def nxt(r: int, c: int, move: str) -> tuple[int, int]:
        s2 = int(mdp.P[r * 4 + c, names.index(move)].argmax())
        return divmod(s2, 4)

    assert nxt(0, 0, "N") == (0, 0)  # border: stay
    assert nxt(0, 1, "S") == (0, 1)  # wall: stay
    assert nxt(0, 0, "SE") == (0, 0)  # diagonal into the wall
    assert nxt(0, 0, "E") == (0, 1)
    assert nxt(2, 2, "NE") == (1, 3)
    assert mdp.R[2 * 4 + 2, names.index("E")] == 1.0  # entering the goal
    assert mdp.R[0, names.index("E")] == pytest.approx(-0.01)
    assert mdp.terminal[2 * 4 + 3] and mdp.terminal[1 * 4 + 1]
    v = value_iteration(mdp, tol=1e-10).v
    # one step from the goal: 1; two steps: -0.01 + 0.9
    assert v[2 * 4 + 2] == pytest.approx(1.0) and v[0 * 4 + 2] == pytest.approx(0.89)


def test_maze_goal_on_wall_is_rejected() -> None:
    with pytest.raises(UserError):
        maze_graph(np.ones((2, 2), dtype=bool), goal=(0, 0))


def test_cartpole_tree_structure() -> None:
    mdp = cartpole_tree(np.random.default_rng(0), depth=10)
    assert mdp.num_actions == 2 and mdp.num_states <= 2**11 - 1
    # every non-terminal node has two distinct children, each with exactly one parent
    targets = mdp.P.argmax(axis=2)
    live = ~mdp.terminal
    assert np.all(targets[live, 0] != targets[live, 1])
    children = targets[live].ravel()
    assert len(np.unique(children)) == len(children) and 0 not in children
    # rewards: 1 for moving to a living (blue) child, 0 to a failed (red) one
    assert set(np.unique(mdp.R[live])) <= {0.0, 1.0}


def test_cartpole_children_fail_independently() -> None:
    # With the same offset, both children of a node at offset 0 fail with equal probability;
    # over many trees their outcomes must differ sometimes (a shared draw never would).
    differ = 0
    for seed in range(50):
        mdp = cartpole_tree(np.random.default_rng(seed), depth=3)
        children = mdp.P[0].argmax(axis=1)  # root's left and right child
        differ += mdp.R[0, 0] != mdp.R[0, 1]
        assert children[0] != children[1]
    assert differ > 0


def test_cartpole_far_from_root_fails_more() -> None:
    centred, far = [], []
    for seed in range(20):
        mdp = cartpole_tree(np.random.default_rng(seed), depth=6)
        targets = mdp.P.argmax(axis=2)
        s = 0
        for step in range(3):  # always left: offset 1, 2, 3
            if mdp.terminal[s]:
                break
            far.append(mdp.R[s, 0])
            s = targets[s, 0]
        s = 0
        for step in range(3):  # alternate: offset 1, 0, 1
            if mdp.terminal[s]:
                break
            centred.append(mdp.R[s, step % 2])
            s = targets[s, step % 2]
    assert np.mean(centred) > np.mean(far)


def test_weighted_erdos_renyi_is_the_authors_undirected_random_weights() -> None:
    """Per action an undirected G(S, 0.5) without self-loops, stochastic P on its edges (so
    P(s'|s, a) > 0 exactly when P(s|s', a) > 0), rewards in [0, 1)."""
    mdp = family("erdos_renyi_weighted")(20, 8, np.random.default_rng(0), 0.9)
    support = mdp.P > 0  # [S, A, S']
    assert np.array_equal(support, support.transpose(2, 1, 0))
    assert not support[np.arange(20), :, np.arange(20)].any()
    assert np.allclose(mdp.P.sum(axis=2), 1.0)
    assert 0.3 < support.mean() < 0.7  # edge probability 0.5
    assert len(np.unique(mdp.P[support])) > 100  # random weights, not uniform over neighbours
    assert (mdp.R >= 0).all() and (mdp.R < 1).all()
