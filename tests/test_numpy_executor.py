"""The hand-written NumPy pre-training step (`xlvin.accel.numpy_executor`) against torch autograd
on the readable executor and torch.optim.Adam: loss, every gradient and one Adam step equal up to
float rounding, ties in the max over actions included."""

import dataclasses

import numpy as np
import pytest
import torch

from xlvin.accel.dense_executor import InEdges
from xlvin.accel.numpy_executor import NumpyEdges, NumpyExecutorTrainer, applies
from xlvin.mdp.executor_graph import MDPGraph
from xlvin.nn.executor import VIExecutor
from xlvin.pretrain.executor_data import make_mdps

#: float32 rounding: the paths sum the same terms in other orders (gradients are sums over a few
#: thousand terms).
RTOL, ATOL = 1e-4, 1e-5


def _with_twin_actions(mdps: list) -> list:
    """Each MDP with action 1 a copy of action 0 (same reward, same successor): their messages
    and node features are equal, so the max over actions ties at every state and feature."""
    out = []
    for m in mdps:
        p, r = m.P.copy(), m.R.copy()
        p[:, 1], r[:, 1] = p[:, 0], r[:, 0]
        out.append(dataclasses.replace(m, P=p, R=r))
    return out


def _case(twins: bool) -> tuple[VIExecutor, MDPGraph, torch.Tensor, torch.Tensor]:
    torch.manual_seed(0)
    mdps = make_mdps("random_deterministic", 10, 4, 3, seed=0, stream=0, gamma=0.9)
    graph = MDPGraph.from_mdps(_with_twin_actions(mdps) if twins else mdps)
    values = torch.randn(5, graph.num_states)
    return VIExecutor(16), graph, values, torch.randn(5, graph.num_states)


@pytest.mark.parametrize("twins", [False, True])
def test_loss_and_gradients_match_torch_autograd_on_the_readable_executor(twins: bool) -> None:
    executor, graph, values, target = _case(twins)
    params = list(executor.parameters())
    loss = torch.nn.functional.mse_loss(executor(graph, values), target)
    expected = torch.autograd.grad(loss, params)

    edges = NumpyEdges.from_in_edges(InEdges.from_graph(graph))
    if twins:  # actions 0 and 1 get the same message inputs: their messages tie exactly
        np.testing.assert_array_equal(edges.inputs[0], edges.inputs[1])
        np.testing.assert_array_equal(edges.sender[0], edges.sender[1])
    trainer = NumpyExecutorTrainer(executor)
    got = trainer.loss_and_grad(edges, values.numpy(), target.numpy())

    assert got == pytest.approx(loss.item(), rel=RTOL)
    for grad, view in zip(expected, trainer.grad_views):
        assert view.shape == grad.shape
        torch.testing.assert_close(torch.from_numpy(view), grad, rtol=RTOL, atol=ATOL)


@pytest.mark.parametrize("cosine", [False, True])
def test_adam_steps_match_torch_adam(cosine: bool) -> None:
    """Two steps on the same block: torch.optim.Adam with CosineAnnealingLR (or a constant lr)
    on the readable executor's gradients, and the trainer at the same learning rates; the
    weights agree after them."""
    executor, graph, values, target = _case(twins=True)
    reference = VIExecutor(16)
    reference.load_state_dict(executor.state_dict())
    adam = torch.optim.Adam(reference.parameters(), lr=1e-2)
    schedule = torch.optim.lr_scheduler.CosineAnnealingLR(adam, 4) if cosine else None
    initial = [p.detach().clone() for p in executor.parameters()]
    trainer = NumpyExecutorTrainer(executor)
    edges = NumpyEdges.from_in_edges(InEdges.from_graph(graph))
    for _ in range(2):
        lr = adam.param_groups[0]["lr"]
        adam.zero_grad()
        torch.nn.functional.mse_loss(reference(graph, values), target).backward()
        adam.step()
        if schedule is not None:
            schedule.step()
        trainer.step(edges, values.numpy(), target.numpy(), lr)
    trainer.write_back()
    for p, ref, init in zip(executor.parameters(), reference.parameters(), initial):
        torch.testing.assert_close(p.detach(), ref.detach(), rtol=RTOL, atol=ATOL)
        assert not torch.equal(p.detach(), init)


def test_it_applies_to_one_in_edge_relu_executors_without_layer_norm_only() -> None:
    one_in_edge = InEdges.from_graph(MDPGraph.from_mdps(
        make_mdps("random_deterministic", 10, 4, 2, seed=0, stream=0, gamma=0.9)))
    padded = InEdges.from_graph(MDPGraph.from_mdps(
        make_mdps("erdos_renyi_weighted", 10, 4, 2, seed=0, stream=0, gamma=0.9)))
    assert applies(VIExecutor(8), [one_in_edge])
    assert applies(VIExecutor(8, aggregation="sum"), [one_in_edge])
    assert not applies(VIExecutor(8), [one_in_edge, padded])
    assert not applies(VIExecutor(8, layer_norm=True), [one_in_edge])
    assert not applies(VIExecutor(8, messages="linear"), [one_in_edge])


def test_trainer_learns_a_tiny_case() -> None:
    """Forty steps on one block lower its loss."""
    executor, graph, values, _ = _case(twins=False)
    target = 0.5 * values  # a learnable map of V_t
    trainer = NumpyExecutorTrainer(executor)
    edges = NumpyEdges.from_in_edges(InEdges.from_graph(graph))
    losses = [trainer.step(edges, values.numpy(), target.numpy(), 1e-2) for _ in range(40)]
    assert np.isfinite(losses).all()
    assert losses[-1] < 0.5 * losses[0]
