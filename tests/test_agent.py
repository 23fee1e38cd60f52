"""XLVIN agent (paper section 3.2): tree execution, frozen executor, gradients, K = 0."""

import numpy as np
import pytest
import torch

from xlvin.nn.agent import PPOAgent, XLVINAgent
from xlvin.nn.encoders import MLPEncoder
from xlvin.nn.executor import MessagePassing
from xlvin.nn.functional import acting, transposed
from xlvin.nn.policy import TransitionBatch
from xlvin.nn.transe import transe_loss
from xlvin.nn.transition import TransitionModel
from xlvin.nn.tree import execute_tree, executor_step, expand_tree


def make_agent(depth: int = 2, actions: int = 3, hidden: int = 8, emb: int = 8) -> XLVINAgent:
    torch.manual_seed(0)
    return XLVINAgent(
        MLPEncoder(4, 16, emb), emb, actions, TransitionModel(emb, actions, 16),
        MessagePassing(hidden, "max", layer_norm=True), depth=depth,
    )


@pytest.mark.parametrize("aggregation", ["max", "sum"])
def test_tree_step_equals_message_passing_on_the_explicit_graph(aggregation: str) -> None:
    """The reshape-based executor step equals the generic processor on the tree's edge list."""
    torch.manual_seed(1)
    batch, actions, depth, hidden = 2, 3, 2, 8
    processor = MessagePassing(hidden, aggregation, layer_norm=True)
    levels = expand_tree(torch.randn(batch, hidden), TransitionModel(hidden, actions, 16), depth)
    edges = torch.randn(actions, hidden)
    fast = torch.cat(executor_step(processor, levels, edges))

    offsets = [0]
    for level in levels:
        offsets.append(offsets[-1] + level.shape[0])
    senders, receivers, edge_actions = [], [], []
    for d in range(depth):
        for i in range(levels[d].shape[0]):
            for a in range(actions):
                senders.append(offsets[d + 1] + i * actions + a)  # child h'
                receivers.append(offsets[d] + i)  # parent h
                edge_actions.append(a)
    slow = processor(
        torch.cat(levels), torch.tensor(senders), torch.tensor(receivers), edges[edge_actions]
    )
    torch.testing.assert_close(fast, slow, rtol=1e-5, atol=1e-5)


def test_forward_shapes_and_probabilities() -> None:
    agent = make_agent()
    logits, values = agent(torch.randn(5, 4))
    assert logits.shape == (5, 3) and values.shape == (5,)
    torch.testing.assert_close(logits.softmax(-1).sum(-1), torch.ones(5))


def test_executor_is_frozen_but_passes_gradient_to_transition_and_encoder() -> None:
    agent = make_agent()
    before = {k: v.clone() for k, v in agent.processor.state_dict().items()}
    optimizer = torch.optim.Adam(agent.parameters(), lr=1e-2)
    obs = torch.randn(16, 4)
    batch = TransitionBatch(obs, torch.randint(0, 3, (16,)), torch.randn(16, 4))
    for _ in range(3):
        logits, values = agent(obs)
        loss = logits.logsumexp(-1).mean() + values.pow(2).mean()
        loss = loss + sum(agent.auxiliary_losses(batch).values())
        optimizer.zero_grad()
        loss.backward()
        assert all(p.grad is None for p in agent.processor.parameters())
        assert agent.transition.first.weight.grad.abs().sum() > 0
        assert agent.encoder.net[0].weight.grad.abs().sum() > 0
        optimizer.step()
    for k, v in agent.processor.state_dict().items():
        assert torch.equal(v, before[k]), k
    agent.train()
    assert not agent.processor.training


def test_plan_depends_on_the_transition_model() -> None:
    """chi_s changes when T changes: the executor really reads the tree."""
    agent = make_agent(depth=2)
    h = torch.randn(3, 8)
    chi = agent.plan(h)
    with torch.no_grad():
        agent.transition.rest[-1].bias.add_(1.0)
    assert not torch.allclose(chi, agent.plan(h))


def test_transe_term_has_the_paper_weight() -> None:
    agent = make_agent()
    obs = torch.randn(8, 4)
    batch = TransitionBatch(obs, torch.zeros(8, dtype=torch.long), torch.randn(8, 4))
    torch.manual_seed(5)
    weighted = agent.auxiliary_losses(batch)["transe"]
    agent.transe_weight = 1.0
    torch.manual_seed(5)
    assert torch.allclose(weighted, 1e-3 * agent.auxiliary_losses(batch)["transe"])


def test_depth_zero_degenerates_to_a_plain_encoder() -> None:
    """K = 0: no tree, chi_s = h_s, so the heads see [h_s, h_s] and T is never used."""
    agent = make_agent(depth=0)
    h = torch.randn(4, 8)
    torch.testing.assert_close(agent.plan(h), h)
    logits, _ = agent(torch.randn(4, 4))
    logits.sum().backward()
    assert agent.transition.first.weight.grad is None


def test_ppo_agent_has_no_planner() -> None:
    agent = PPOAgent(MLPEncoder(4, 16, 8), 8, 2)
    assert not any("transition" in n or "processor" in n for n, _ in agent.named_parameters())
    assert agent.auxiliary_losses(TransitionBatch(torch.zeros(1, 4), torch.zeros(1), torch.zeros(1, 4))) == {}


def test_acting_forward_matches_training_forward_and_sees_new_weights() -> None:
    """Inside `acting()` the linear layers multiply by cached contiguous W^T: the same outputs as
    the training forward (up to BLAS rounding), and a weight changed between two acting blocks
    is seen by the second (the cache lives for one block only)."""
    torch.manual_seed(0)
    agent = make_agent()
    obs = torch.randn(4, 4)
    with torch.no_grad():
        expected = agent(obs)
    with acting():
        got = agent(obs)
        assert transposed(agent.heads.actor.weight) is transposed(agent.heads.actor.weight)
    for a, b in zip(got, expected):
        torch.testing.assert_close(a, b, rtol=1e-5, atol=1e-6)
    with torch.no_grad():
        agent.heads.actor.weight.add_(1.0)
        changed = agent(obs)[0]
    with acting():
        torch.testing.assert_close(agent(obs)[0], changed, rtol=1e-5, atol=1e-6)
    assert not torch.allclose(changed, expected[0])
    # outside a block there is no cache: the plain transposed view
    assert transposed(agent.heads.actor.weight)._base is agent.heads.actor.weight


def test_projected_agent_plans_like_projecting_every_level_and_keeps_transe() -> None:
    """With k != H (pixel encoders) the agent grows its tree in the executor's width; chi and the
    TransE term equal the k-wide computation projected level by level."""
    agent = make_agent(emb=12, hidden=8)  # node projection Linear(12 -> 8)
    assert isinstance(agent.node_projection, torch.nn.Linear)
    obs, next_obs = torch.randn(5, 4), torch.randn(5, 4)
    actions = torch.randint(0, 3, (5,))
    h = agent.encoder(obs)
    levels = [agent.node_projection(level) for level in expand_tree(h, agent.transition, 2)]
    expected = execute_tree(agent.processor, levels, agent.edge_features(), 2)
    torch.testing.assert_close(agent.plan(h), expected, rtol=1e-5, atol=1e-6)
    torch.manual_seed(1)
    aux = agent.forward_with_aux(TransitionBatch(obs, actions, next_obs))[2]["transe"]
    torch.manual_seed(1)  # the same negatives
    direct = transe_loss(agent.encoder, agent.transition, obs, actions, next_obs)
    torch.testing.assert_close(aux, agent.transe_weight * direct)


def _array_agents() -> dict[str, torch.nn.Module]:
    torch.manual_seed(0)
    return {
        "ppo": PPOAgent(MLPEncoder(4, 16, 8), 8, 3),
        "xlvin": make_agent(),
        "xlvin, projected tree (k 12 != H 8)": make_agent(emb=12),
        "xlvin, depth 3, sum, no LayerNorm": XLVINAgent(
            MLPEncoder(4, 16, 8), 8, 2, TransitionModel(8, 2, 16), MessagePassing(8, "sum"), depth=3
        ),
        "xlvin, depth 0": make_agent(depth=0),
    }


@pytest.mark.parametrize("name", list(_array_agents()))
@pytest.mark.parametrize("batch", [1, 4, 32])
def test_array_forward_equals_the_torch_forward(name: str, batch: int) -> None:
    """Inside `acting()` an agent with `array_forward` takes NumPy observations and computes in
    NumPy: float32 arrays equal to the torch forward (up to BLAS rounding) at the batch sizes of
    collection and evaluation, and the weights of the block it runs in."""
    agent = _array_agents()[name]
    assert agent.array_forward
    obs = np.random.default_rng(batch).normal(size=(batch, 4)).astype(np.float32)
    with torch.no_grad():
        expected = agent(torch.from_numpy(obs))
    with acting():
        got = agent(obs)
    for a, b in zip(got, expected, strict=True):
        assert isinstance(a, np.ndarray) and a.dtype == np.float32 and a.shape == b.shape
        np.testing.assert_allclose(a, b.numpy(), rtol=1e-5, atol=1e-6)
    with torch.no_grad():
        for p in agent.parameters():
            p.add_(0.1)
        changed = agent(torch.from_numpy(obs))[0].numpy()
    with acting():
        np.testing.assert_allclose(agent(obs)[0], changed, rtol=1e-5, atol=1e-6)
    assert not np.allclose(changed, expected[0].numpy())
    with pytest.raises(RuntimeError, match="acting"):
        agent(obs)


def test_only_agents_with_array_encoders_act_in_numpy() -> None:
    from xlvin.nn.atreec import ATreeCAgent
    from xlvin.nn.encoders import NatureCNN

    assert not PPOAgent(NatureCNN(), 512, 3).array_forward
    assert not ATreeCAgent(MLPEncoder(4, 16, 8), 8, 3, depth=2).array_forward
