"""The dense executor forward (`xlvin.accel.dense_executor`) against the readable one: values and
gradients equal up to float rounding, and pre-training on it learns as the readable path does."""

import dataclasses

import numpy as np
import pytest
import torch

from xlvin.accel.dense_executor import InEdges, dense_forward
from xlvin.mdp.executor_graph import MDPGraph
from xlvin.nn.executor import VIExecutor
from xlvin.pretrain.executor import pretrain_executor
from xlvin.pretrain.executor_config import ExecutorConfig
from xlvin.pretrain.executor_data import make_mdps

#: float32 rounding: the two paths sum the same terms in another order (gradients are sums over
#: thousands of terms, of magnitude up to ~10 here).
RTOL, ATOL = 1e-5, 1e-5
GRAD_RTOL, GRAD_ATOL = 1e-4, 1e-4


def _without_in_edges_of_node_0(graph: MDPGraph) -> MDPGraph:
    """The graph with node 0's in-edges removed (its aggregate is then 0 on both paths)."""
    keep = graph.receivers != 0
    return dataclasses.replace(graph, senders=graph.senders[keep], receivers=graph.receivers[keep],
                               edge_features=graph.edge_features[keep])


@pytest.mark.parametrize(
    ("family", "aggregation", "layer_norm", "messages"),
    [("random_deterministic", "max", False, "relu"),  # in-degree 1: no padding
     ("erdos_renyi_weighted", "max", False, "relu"),  # padded in-edges
     ("erdos_renyi_weighted", "max", True, "linear"),
     ("erdos_renyi_weighted", "sum", True, "linear"),
     ("erdos_renyi_weighted", "sum", False, "relu")],
)
@pytest.mark.parametrize("edgeless", [False, True])
def test_dense_forward_and_gradients_match_the_readable_executor(
    family: str, aggregation: str, layer_norm: bool, messages: str, edgeless: bool
) -> None:
    torch.manual_seed(0)
    mdps = make_mdps(family, 12, 4, 3, seed=0, stream=0, gamma=0.9)
    graph = MDPGraph.from_mdps(mdps)
    if edgeless:
        graph = _without_in_edges_of_node_0(graph)
    executor = VIExecutor(16, aggregation, layer_norm, messages)
    values = torch.randn(5, graph.num_states)
    target = torch.randn(5, graph.num_states)
    params = list(executor.parameters())

    expected = executor(graph, values)
    grads_expected = torch.autograd.grad((expected - target).square().sum(), params)
    got = dense_forward(executor, InEdges.from_graph(graph), values)
    grads_got = torch.autograd.grad((got - target).square().sum(), params)

    assert got.shape == expected.shape == (5, graph.num_states)
    torch.testing.assert_close(got, expected, rtol=RTOL, atol=ATOL)
    for g_got, g_expected in zip(grads_got, grads_expected):
        torch.testing.assert_close(g_got, g_expected, rtol=GRAD_RTOL, atol=GRAD_ATOL)


def test_in_edge_layout_holds_every_edge_once() -> None:
    mdps = make_mdps("erdos_renyi_weighted", 10, 3, 2, seed=1, stream=0, gamma=0.9)
    graph = MDPGraph.from_mdps(mdps)
    edges = InEdges.from_graph(graph)
    degree = np.bincount(graph.receivers.numpy(), minlength=graph.rewards.numel())
    assert edges.inputs.shape[:3] == (3, graph.num_states, degree.max())
    mask = edges.mask if edges.mask is not None else torch.ones(edges.sender_states.shape, dtype=torch.bool)
    assert int(mask.sum()) == len(graph.senders)
    # the P column over real in-edges is the edge list's P, as a multiset
    torch.testing.assert_close(edges.inputs[..., 4][mask].sort().values,
                               graph.edge_features[:, 0].sort().values)


def test_accelerated_pretraining_matches_the_readable_one() -> None:
    """Same seed, both paths: the training losses agree to float rounding's drift."""
    cfg = ExecutorConfig(train_graphs=8, epochs=2, hidden=16)
    _, fast = pretrain_executor(cfg, progress=False, accelerate=True)
    _, readable = pretrain_executor(cfg, progress=False, accelerate=False)
    assert fast["accelerated"] and not readable["accelerated"]
    np.testing.assert_allclose(fast["train_mse_per_epoch"], readable["train_mse_per_epoch"],
                               rtol=1e-3)
    assert fast["train_mse_per_epoch"][-1] < fast["train_mse_per_epoch"][0]


def test_the_cache_makes_default_executors_on_the_readable_path(tmp_path, monkeypatch) -> None:
    """A cached file is named by its config alone, so a run's first use of a default executor
    pre-trains it as the files behind earlier results were made: not accelerated."""
    from xlvin.pretrain import files
    from xlvin.pretrain.executor_config import default_executor_config

    seen = []
    monkeypatch.setattr(files, "pretrain_and_save",
                        lambda cfg, path, **kw: seen.append(kw["accelerate"]))
    monkeypatch.setattr(files.shipped, "find", lambda key: None)
    files.cached_executor(default_executor_config("random"), tmp_path)
    assert seen == [False]


def test_max_with_a_floor_splits_the_gradient_between_ties_as_amax_does() -> None:
    """The max over actions with a floor is amax over the actions and the floor stacked: the
    same values, and at ties the same even split (the floor counting as one entry)."""
    from xlvin.accel.dense_executor import _MaxSplittingTies

    x = torch.tensor([[[1.0, 2.0, 0.5]], [[1.0, -1.0, 0.5]], [[0.0, 2.0, -3.0]]])  # [3, 1, 3]
    floor = torch.tensor([[0.0, 2.0, 0.5]])  # [1, 3]: tied with x in columns 1 and 2
    grad = torch.tensor([3.0, 6.0, 9.0]).expand(2, 3)  # [K, H] = [2, 3]
    x_k = x.expand(3, 2, 3).clone().requires_grad_(True)
    floor_got = floor.clone().requires_grad_(True)
    got = _MaxSplittingTies.apply(x_k, floor_got)
    got.backward(grad)
    x_ref = x.expand(3, 2, 3).clone().requires_grad_(True)
    floor_ref = floor.clone().requires_grad_(True)
    expected = torch.cat([x_ref, floor_ref.expand(1, 2, 3)]).amax(dim=0)
    expected.backward(grad)
    torch.testing.assert_close(got, expected)
    torch.testing.assert_close(x_k.grad, x_ref.grad)
    torch.testing.assert_close(floor_got.grad, floor_ref.grad)
    assert floor_got.grad[0, 1] == 2 * 6.0 / 3  # column 1: two actions and the floor, K = 2
