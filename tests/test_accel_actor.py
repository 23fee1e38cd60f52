"""The NumPy actor (`xlvin.accel.numpy_actor`) against the policy's torch forward."""

from collections.abc import Callable

import numpy as np
import pytest
import torch

from xlvin.accel.numpy_actor import make_actor
from xlvin.nn.agent import XLVINAgent
from xlvin.nn.baselines.ppo import PPOAgent
from xlvin.nn.baselines.atreec import ATreeCAgent
from xlvin.nn.encoders import MLPEncoder, NatureCNN
from xlvin.nn.executor import MessagePassing
from xlvin.nn.policy import ActorCritic
from xlvin.nn.transition import TransitionModel


def xlvin(
    depth: int, actions: int, aggregation: str, layer_norm: bool, emb: int = 8, hidden: int = 8,
    messages: str = "relu", projections: bool = False,
) -> XLVINAgent:
    return XLVINAgent(
        MLPEncoder(4, 16, emb), emb, actions, TransitionModel(emb, actions, 16),
        MessagePassing(hidden, aggregation, layer_norm, messages), depth=depth,
        projections=projections,
    )


AGENTS: dict[str, Callable[[], ActorCritic]] = {
    "ppo": lambda: PPOAgent(MLPEncoder(4, 16, 8), 8, 3),
    "xlvin depth 0, A 3, max, LayerNorm": lambda: xlvin(0, 3, "max", True),
    "xlvin depth 1, A 2, sum": lambda: xlvin(1, 2, "sum", False),
    "xlvin depth 2, A 3, max, LayerNorm": lambda: xlvin(2, 3, "max", True),
    "xlvin depth 2, A 2, sum, LayerNorm": lambda: xlvin(2, 2, "sum", True),
    "xlvin depth 3, A 2, max": lambda: xlvin(3, 2, "max", False),
    "xlvin depth 2, A 3, projected (k 12, H 8)": lambda: xlvin(2, 3, "max", True, emb=12),
    "xlvin depth 0, projected (k 12, H 8)": lambda: xlvin(0, 2, "sum", False, emb=12),
    "xlvin depth 2, A 2, linear messages, LayerNorm, both projections (the authors')": lambda: xlvin(
        2, 2, "max", True, messages="linear", projections=True
    ),
    "ppo with a TransE-only transition": lambda: PPOAgent(
        MLPEncoder(4, 16, 8), 8, 3, TransitionModel(8, 3, 16)
    ),
}


def make(name: str) -> ActorCritic:
    """The agent with every weight perturbed: O(1) logits (the actor head starts at gain 0.01)
    and non-trivial LayerNorm affines."""
    torch.manual_seed(0)
    agent = AGENTS[name]()
    with torch.no_grad():
        for p in agent.parameters():
            p.add_(0.3 * torch.randn_like(p))
    return agent


def torch_forward(agent: ActorCritic, obs: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    with torch.no_grad():
        logits, values = agent(torch.from_numpy(obs))
    return logits.numpy(), values.numpy()


@pytest.mark.parametrize("name", list(AGENTS))
@pytest.mark.parametrize("batch", [1, 4, 32])
def test_actor_equals_the_torch_forward(name: str, batch: int) -> None:
    agent = make(name)
    obs = np.random.default_rng(batch).normal(size=(batch, 4)).astype(np.float32)
    actor = make_actor(agent)
    assert actor is not None
    got = actor(obs)
    expected = torch_forward(agent, obs)
    assert np.abs(expected[0]).max() > 0.1  # the comparison is not between near-zeros
    for a, b in zip(got, expected, strict=True):
        assert isinstance(a, np.ndarray) and a.dtype == np.float32 and a.shape == b.shape
        np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-5)


def test_actor_flattens_and_casts_observations_like_the_encoder() -> None:
    torch.manual_seed(0)
    agent = PPOAgent(MLPEncoder(6, 16, 8), 8, 3)
    obs = np.random.default_rng(0).integers(0, 5, size=(4, 2, 3)).astype(np.float64)
    for a, b in zip(make_actor(agent)(obs), torch_forward(agent, obs), strict=True):
        assert a.dtype == np.float32
        np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("name", ["ppo", "xlvin depth 2, A 3, max, LayerNorm"])
def test_actor_is_a_snapshot_of_the_weights(name: str) -> None:
    """Weights changed after `make_actor` do not reach that actor; a new actor sees them."""
    agent = make(name)
    obs = np.random.default_rng(0).normal(size=(4, 4)).astype(np.float32)
    actor = make_actor(agent)
    before = actor(obs)
    with torch.no_grad():
        for p in agent.parameters():
            p.add_(0.1)
    changed = torch_forward(agent, obs)
    assert not np.allclose(changed[0], before[0])
    for a, b in zip(actor(obs), before, strict=True):
        np.testing.assert_array_equal(a, b)
    for a, b in zip(make_actor(agent)(obs), changed, strict=True):
        np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-5)


def test_unsupported_policies_have_no_actor() -> None:
    torch.manual_seed(0)
    assert make_actor(ATreeCAgent(MLPEncoder(4, 16, 8), 8, 3, depth=2)) is None
    assert make_actor(PPOAgent(NatureCNN(embedding_dim=32), 32, 3)) is None
    cnn_xlvin = XLVINAgent(NatureCNN(embedding_dim=32), 32, 3, TransitionModel(32, 3, 16),
                           MessagePassing(8), depth=2)
    assert make_actor(cnn_xlvin) is None
    assert make_actor(PPOAgent(MLPEncoder(4, 16, 8), 8, 3).double()) is None
    assert make_actor(PPOAgent(MLPEncoder(4, 16, 8), 8, 3).to("meta")) is None  # not on CPU


@pytest.mark.parametrize("variant", [{"prune": 1}, {"zero_chi": True}])
def test_xlvin_without_the_full_executed_tree_has_no_actor(variant: dict) -> None:
    """The NumPy actor computes the full tree and its executed chi: a pruned tree or the
    zero-chi ablation acts through the policy itself, which gives other actions."""
    torch.manual_seed(0)
    full = XLVINAgent(MLPEncoder(4, 16, 8), 8, 3, TransitionModel(8, 3, 16), MessagePassing(8),
                      depth=2)
    other = XLVINAgent(MLPEncoder(4, 16, 8), 8, 3, TransitionModel(8, 3, 16), MessagePassing(8),
                       depth=2, **variant)
    other.load_state_dict(full.state_dict(), strict=False)
    assert make_actor(other) is None
    obs = torch.randn(16, 4)
    with torch.no_grad():
        assert not torch.allclose(other(obs)[0], full(obs)[0])
