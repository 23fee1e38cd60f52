"""The transition model and latent tree expansion: the invariants of paper section 3.2."""

import pytest
import torch

from xlvin.nn.transition import TransitionModel
from xlvin.nn.tree import expand_tree, node_count


@pytest.fixture
def transition() -> TransitionModel:
    torch.manual_seed(0)
    return TransitionModel(embedding_dim=6, num_actions=3, hidden=16)


def test_successors_match_one_action_at_a_time(transition: TransitionModel) -> None:
    """successors(h)[:, a] = h + T(h, a): the split first layer equals the Linear on
    [h, one-hot(a)], in values and in the gradients of every weight."""
    transition = transition.double()
    h = torch.randn(5, 6, dtype=torch.float64, requires_grad=True)
    batched = transition.successors(h)  # [5, 3, 6]
    assert batched.shape == (5, 3, 6)
    singles = torch.stack(
        [transition.next_embedding(h, torch.full((5,), a)) for a in range(3)], dim=1
    )
    torch.testing.assert_close(batched, singles, rtol=1e-12, atol=1e-12)
    weights = torch.randn(5, 3, 6, dtype=torch.float64)
    params = [h, *transition.parameters()]
    fast = torch.autograd.grad((batched * weights).sum(), params)
    slow = torch.autograd.grad((singles * weights).sum(), params)
    for a, b in zip(fast, slow, strict=True):
        torch.testing.assert_close(a, b, rtol=1e-10, atol=1e-12)


@pytest.mark.parametrize("depth", [0, 1, 2, 3])
def test_tree_layout_and_counts(transition: TransitionModel, depth: int) -> None:
    batch, actions = 4, 3
    h = torch.randn(batch, 6)
    levels = expand_tree(h, transition, depth)
    assert len(levels) == depth + 1
    assert [lvl.shape[0] for lvl in levels] == [batch * actions**d for d in range(depth + 1)]
    assert sum(lvl.shape[0] for lvl in levels) == node_count(batch, actions, depth)
    for d in range(depth):
        parents, children = levels[d], levels[d + 1]
        for i in range(parents.shape[0]):
            for a in range(actions):
                expected = transition.next_embedding(parents[i : i + 1], torch.tensor([a]))
                torch.testing.assert_close(children[i * actions + a], expected[0])


def test_depth_zero_is_the_root_itself(transition: TransitionModel) -> None:
    h = torch.randn(3, 6)
    (root,) = expand_tree(h, transition, 0)
    assert root is h


def test_rows_of_a_batch_do_not_mix(transition: TransitionModel) -> None:
    """Tree b's nodes depend on root b only: row index = b * A^d + action digits."""
    h = torch.randn(2, 6)
    levels = expand_tree(h, transition, 2)
    h2 = h.clone()
    h2[1] += 1.0
    levels2 = expand_tree(h2, transition, 2)
    torch.testing.assert_close(levels[2][:9], levels2[2][:9])
    assert not torch.allclose(levels[2][9:], levels2[2][9:])
