"""The fused, pruned tree executor (`execute_tree`) against the level-by-level reference."""

import pytest
import torch

from xlvin.nn.executor import MessagePassing
from xlvin.nn.transition import Transition
from xlvin.nn.tree import execute_tree, execute_tree_reference, expand_tree, level_offsets, node_count


@pytest.mark.parametrize("aggregation", ["max", "sum"])
@pytest.mark.parametrize("layer_norm", [False, True])
@pytest.mark.parametrize(
    "batch,actions,depth,steps",
    [(3, 2, 2, 2), (2, 3, 3, 3), (2, 4, 1, 1), (1, 5, 2, 2), (2, 2, 3, 1), (4, 3, 2, 4), (3, 2, 0, 2)],
)
def test_kernel_equals_reference(aggregation, layer_norm, batch, actions, depth, steps) -> None:
    torch.manual_seed(0)
    processor = MessagePassing(8, aggregation, layer_norm)
    transition = Transition(8, actions, 16)
    h = torch.randn(batch, 8, requires_grad=True)
    edges = torch.randn(actions, 8)
    fast = execute_tree(processor, expand_tree(h, transition, depth), edges, steps)
    slow = execute_tree_reference(processor, expand_tree(h, transition, depth), edges, steps)
    torch.testing.assert_close(fast, slow, rtol=1e-5, atol=1e-5)
    # gradients through the kernel (transition and roots) match the reference too
    params = [h, transition.first.weight]
    g_fast = torch.autograd.grad(fast.square().sum(), params, allow_unused=True)
    g_slow = torch.autograd.grad(slow.square().sum(), params, allow_unused=True)
    for a, b in zip(g_fast, g_slow):
        assert (a is None) == (b is None)  # depth 0: the transition is not used
        if a is not None:
            torch.testing.assert_close(a, b, rtol=1e-4, atol=1e-5)


def test_flat_layout_children_are_one_block() -> None:
    """Children of flat row p are rows B + p * A + a: the identity the kernel relies on."""
    batch, actions, depth = 3, 2, 3
    offsets = level_offsets(batch, actions, depth)
    assert offsets[-1] == node_count(batch, actions, depth)
    for d in range(depth):
        for i in range(batch * actions**d):
            p = offsets[d] + i
            for a in range(actions):
                assert offsets[d + 1] + i * actions + a == batch + p * actions + a
