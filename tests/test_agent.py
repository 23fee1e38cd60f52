"""XLVIN agent (paper section 3.2): tree execution, frozen executor, gradients, K = 0."""

import torch

from xlvin.nn.agent import XLVINAgent
from xlvin.nn.baselines.ppo import PPOAgent
from xlvin.nn.encoders import MLPEncoder
from xlvin.nn.executor import MessagePassing
from xlvin.nn.policy import TransitionBatch
from xlvin.nn.transe import transe_loss
from xlvin.nn.transition import TransitionModel
from xlvin.nn.tree import execute_tree, expand_tree


def make_agent(depth: int = 2, actions: int = 3, hidden: int = 8, emb: int = 8) -> XLVINAgent:
    torch.manual_seed(0)
    return XLVINAgent(
        MLPEncoder(4, 16, emb), emb, actions, TransitionModel(emb, actions, 16),
        MessagePassing(hidden, "max", layer_norm=True), depth=depth,
    )


def test_forward_shapes_and_probabilities() -> None:
    agent = make_agent()
    logits, values = agent(torch.randn(5, 4))
    assert logits.shape == (5, 3) and values.shape == (5,)
    torch.testing.assert_close(logits.softmax(-1).sum(-1), torch.ones(5))


def test_forward_reads_the_embedding_and_the_executed_tree() -> None:
    """pi, V = heads([h_s, chi_s]) with chi_s the roots of the executed depth-K tree, whose edge
    features embed [one-hot(a), gamma]; the PPO baseline's heads read h_s alone."""
    agent = make_agent(depth=2)
    obs = torch.randn(5, 4)
    h = agent.encoder(obs)
    one_hot_and_gamma = torch.tensor([[1.0, 0, 0, 0.99], [0, 1, 0, 0.99], [0, 0, 1, 0.99]])
    edges = agent.edge_projection(one_hot_and_gamma)
    torch.testing.assert_close(agent.edge_features(), edges)
    chi = execute_tree(agent.processor, expand_tree(h, agent.transition, 2), edges, 2)
    torch.testing.assert_close(agent.plan(h), chi)
    for got, expected in zip(agent(obs), agent.heads(torch.cat([h, chi], dim=-1)), strict=True):
        torch.testing.assert_close(got, expected)
    ppo = PPOAgent(MLPEncoder(4, 16, 8), 8, 3)
    for got, expected in zip(ppo(obs), ppo.heads(ppo.encoder(obs)), strict=True):
        torch.testing.assert_close(got, expected)


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


def test_projected_agent_plans_like_projecting_every_level_and_keeps_transe() -> None:
    """With k != H (pixel encoders) the agent grows its tree in the executor's width; chi and the
    TransE term equal the k-wide computation projected level by level."""
    agent = make_agent(emb=12, hidden=8)  # node projection Linear(12 -> 8)
    assert isinstance(agent.node_projection, torch.nn.Linear)
    assert make_agent(emb=8, hidden=8).node_projection is None
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


def test_zero_chi_heads_see_only_the_embedding() -> None:
    """The ablation: chi is zeros, so the logits equal the heads on [h, 0] and no gradient
    reaches the transition model through the policy."""
    torch.manual_seed(0)
    agent = XLVINAgent(MLPEncoder(4, 16, 8), 8, 2, TransitionModel(8, 2, 16), MessagePassing(8),
                       depth=2, zero_chi=True)
    obs = torch.randn(5, 4)
    logits, values = agent(obs)
    h = agent.encoder(obs)
    expected = agent.heads(torch.cat([h, torch.zeros(5, 8)], dim=-1))
    torch.testing.assert_close(logits, expected[0])
    (logits.sum() + values.sum()).backward()
    assert all(p.grad is None for p in agent.transition.parameters())
