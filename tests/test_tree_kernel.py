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


def test_transe_reuses_the_forward_encoding_exactly() -> None:
    """auxiliary_losses after a forward on the same obs reuses z(s): same loss, same gradients."""
    from xlvin.nn.agent import XLVINAgent
    from xlvin.nn.encoders import MLPEncoder
    from xlvin.nn.policy import Transitions

    def grads(reuse: bool) -> tuple[torch.Tensor, list[torch.Tensor]]:
        torch.manual_seed(0)
        agent = XLVINAgent(MLPEncoder(4, 16, 8), 8, 3, Transition(8, 3, 16),
                           MessagePassing(8, "max"), depth=2)
        obs, next_obs = torch.randn(16, 4), torch.randn(16, 4)
        batch = Transitions(obs if reuse else obs.clone(), torch.randint(0, 3, (16,)), next_obs)
        logits, values = agent(obs)
        torch.manual_seed(1)  # the TransE negatives
        aux = agent.auxiliary_losses(batch)["transe"]
        (logits.sum() + values.sum() + aux).backward()
        return aux.detach(), [p.grad.clone() for p in agent.encoder.parameters()]

    aux_a, g_a = grads(reuse=True)
    aux_b, g_b = grads(reuse=False)
    assert torch.equal(aux_a, aux_b)
    for a, b in zip(g_a, g_b):
        torch.testing.assert_close(a, b, rtol=1e-5, atol=1e-7)
