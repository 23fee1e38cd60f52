"""The executor over the latent tree (`execute_tree`) against the generic message passing on
the tree's explicit graph, and the tree grown in the executor's width (`expand_projected_tree`)."""

import pytest
import torch

from xlvin.nn.executor import MessagePassing
from xlvin.nn.transition import TransitionModel
from xlvin.nn.tree import (
    execute_tree,
    expand_projected_tree,
    expand_tree,
    level_offsets,
    node_count,
)


def explicit_graph_roots(
    processor: MessagePassing, levels: list[torch.Tensor], edges: torch.Tensor, steps: int
) -> torch.Tensor:
    """The paper's step 4 written on the tree's edge list: every child h' -> its parent h with
    the edge feature of the action, `MessagePassing.forward` on all nodes at every step,
    chi = X(nodes), then chi = X(chi + nodes); the roots' rows of the result."""
    num_actions = edges.shape[0]
    offsets = [0]
    for level in levels:
        offsets.append(offsets[-1] + level.shape[0])
    senders, receivers, edge_actions = [], [], []
    for d in range(len(levels) - 1):
        for i in range(levels[d].shape[0]):
            for a in range(num_actions):
                senders.append(offsets[d + 1] + i * num_actions + a)  # child h'
                receivers.append(offsets[d] + i)  # parent h
                edge_actions.append(a)
    graph = (
        torch.tensor(senders, dtype=torch.long),
        torch.tensor(receivers, dtype=torch.long),
        edges[edge_actions].reshape(-1, edges.shape[1]),
    )
    nodes = torch.cat(levels)
    chi = nodes
    for step in range(steps):
        chi = processor(nodes if step == 0 else chi + nodes, *graph)
    return chi[: levels[0].shape[0]]


@pytest.mark.parametrize("aggregation", ["max", "sum"])
@pytest.mark.parametrize("layer_norm", [False, True])
@pytest.mark.parametrize(
    "batch,actions,depth,steps",
    [(3, 2, 2, 2), (2, 3, 3, 3), (2, 4, 1, 1), (1, 5, 2, 2), (2, 2, 3, 1), (4, 3, 2, 4),
     (3, 2, 0, 2), (2, 3, 1, 3), (2, 2, 2, 0)],
)
def test_tree_execution_equals_message_passing_on_the_explicit_graph(
    aggregation, layer_norm, batch, actions, depth, steps
) -> None:
    """Values and gradients (roots, transition, edges) of the pruned flat-layout execution equal
    the generic processor's on the explicit graph, in float64; steps > depth and depth 0
    included."""
    torch.manual_seed(0)
    hidden = 8
    processor = MessagePassing(hidden, aggregation, layer_norm).double()
    if layer_norm:  # a non-trivial affine part of the LayerNorm
        torch.nn.init.normal_(processor.norm.weight)
        torch.nn.init.normal_(processor.norm.bias)
    transition = TransitionModel(hidden, actions, 16).double()
    h = torch.randn(batch, hidden, dtype=torch.float64, requires_grad=True)
    edges = torch.randn(actions, hidden, dtype=torch.float64, requires_grad=True)
    tree = execute_tree(processor, expand_tree(h, transition, depth), edges, steps)
    graph = explicit_graph_roots(processor, expand_tree(h, transition, depth), edges, steps)
    assert tree.shape == graph.shape == (batch, hidden)
    torch.testing.assert_close(tree, graph, rtol=1e-10, atol=1e-10)
    if steps == 0:
        assert tree is h
        return
    params = [h, edges, *transition.parameters()]
    weights = torch.randn(batch, hidden, dtype=torch.float64)
    g_tree = torch.autograd.grad((tree * weights).sum(), params, allow_unused=True)
    g_graph = torch.autograd.grad((graph * weights).sum(), params, allow_unused=True)
    for a, b in zip(g_tree, g_graph, strict=True):
        assert (a is None) == (b is None)  # depth 0: the transition is not used
        if a is not None:
            torch.testing.assert_close(a, b, rtol=1e-9, atol=1e-10)


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


@pytest.mark.parametrize("emb,depth", [(8, 2), (12, 2), (8, 0)])
def test_forward_with_aux_equals_forward_and_transe(emb, depth) -> None:
    """XLVIN's `forward_with_aux` (one encoder pass over [obs; next_obs]) gives the logits,
    values and TransE term of `forward` + `auxiliary_losses`, and the same gradients for every
    weight; with a node projection (emb 12 != 8) and without a tree."""
    from xlvin.nn.agent import XLVINAgent
    from xlvin.nn.encoders import MLPEncoder
    from xlvin.nn.policy import TransitionBatch

    def run(shared: bool) -> tuple[list[torch.Tensor], list[torch.Tensor]]:
        torch.manual_seed(0)
        agent = XLVINAgent(MLPEncoder(4, 16, emb), emb, 3, TransitionModel(emb, 3, 16),
                           MessagePassing(8, "max"), depth=depth)
        obs, next_obs = torch.randn(16, 4), torch.randn(16, 4)
        batch = TransitionBatch(obs, torch.randint(0, 3, (16,)), next_obs)
        torch.manual_seed(1)  # the TransE negatives
        if shared:
            logits, values, aux = agent.forward_with_aux(batch)
        else:
            logits, values = agent(obs)
            aux = agent.auxiliary_losses(batch)
        (logits.sin().sum() + values.sum() + aux["transe"] * 100).backward()
        grads = [p.grad for p in agent.parameters() if p.requires_grad]
        return [logits, values, aux["transe"]], grads

    out_a, g_a = run(shared=True)
    out_b, g_b = run(shared=False)
    for a, b in zip(out_a + g_a, out_b + g_b, strict=True):
        torch.testing.assert_close(a, b, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("batch,actions,depth", [(3, 2, 2), (2, 9, 2), (2, 4, 1), (1, 3, 3), (2, 2, 0)])
def test_projected_tree_equals_projecting_every_level(batch, actions, depth) -> None:
    """The tree grown in the executor's width equals expanding in the embedding space and
    projecting every level, in values and in the gradients of every trainable weight."""
    torch.manual_seed(0)
    k, width, hidden = 12, 16, 5
    transition = TransitionModel(k, actions, width).double()
    projection = torch.nn.Linear(k, hidden).double()
    h = torch.randn(batch, k, dtype=torch.float64, requires_grad=True)
    fast = expand_projected_tree(h, transition, projection, depth)
    slow = [projection(level) for level in expand_tree(h, transition, depth)]
    assert [t.shape for t in fast] == [t.shape for t in slow]
    for a, b in zip(fast, slow):
        torch.testing.assert_close(a, b, rtol=1e-10, atol=1e-10)
    params = [h, *transition.parameters(), *projection.parameters()]

    def grads(levels):
        loss = sum((level.sin() * (i + 1)).sum() for i, level in enumerate(levels))
        return torch.autograd.grad(loss, params, allow_unused=True)

    for a, b in zip(grads(fast), grads(slow)):
        assert (a is None) == (b is None)
        if a is not None:
            torch.testing.assert_close(a, b, rtol=1e-9, atol=1e-10)
