"""TransE (paper eq. 2): loss form, data without autoreset pairs, and learning on CartPole data."""

import gymnasium as gym
import numpy as np
import pytest
import torch

from xlvin.nn.encoders import MLPEncoder
from xlvin.nn.transe import energy, transe_loss, transe_objective
from xlvin.nn.transition import TransitionModel
from xlvin.pretrain.transe import TransEConfig, pretrain_transe
from xlvin.pretrain.random_data import random_transitions


def test_energy_is_scaled_squared_distance() -> None:
    x, y = torch.tensor([[0.0, 0.0]]), torch.tensor([[1.0, 2.0]])
    assert energy(x, y, sigma=0.5).item() == 5.0 / (2 * 0.25)


def test_loss_is_zero_for_a_perfect_model_with_far_negatives() -> None:
    """d(z + T, z') = 0 and negatives beyond the hinge give L = 0."""

    class Shift(TransitionModel):
        def forward(self, h: torch.Tensor, actions: torch.Tensor) -> torch.Tensor:
            return torch.ones_like(h) * 10.0

    obs = torch.arange(4, dtype=torch.float32).unsqueeze(1) * 10.0  # z(s) = s
    loss = transe_loss(torch.nn.Identity(), Shift(1, 2, 4), obs, torch.zeros(4, dtype=torch.long),
                       obs + 10.0, generator=torch.Generator().manual_seed(3))
    # The permutation may map a row to itself (negative = z(s) at distance 10 from z(s')): still
    # far beyond the hinge, so only exact positives count and the loss is 0.
    assert loss.item() == 0.0


def test_random_transitions_never_pair_terminal_with_reset() -> None:
    data = random_transitions("CartPole-v1", episodes=20, seed=0)
    env = gym.make("CartPole-v1")
    # Every pair is a real CartPole step: replaying s with a lands within float error of s'.
    for i in range(0, len(data.obs), 7):
        env.reset()
        env.unwrapped.state = data.obs[i].double().numpy()
        next_obs, *_ = env.step(int(data.actions[i]))
        np.testing.assert_allclose(next_obs, data.next_obs[i].numpy(), atol=1e-5)


def test_transe_separates_positives_from_negatives_on_cartpole() -> None:
    torch.manual_seed(0)
    data = random_transitions("CartPole-v1", episodes=300, seed=1)
    encoder, transition = MLPEncoder(4, 64, 50), TransitionModel(50, 2, 64)
    cfg = TransEConfig(epochs=5, holdout=0.2)
    stats = pretrain_transe(encoder, transition, data, cfg, seed=0, progress=False)
    assert stats["after/positive_energy"] < 0.1 * stats["after/negative_energy"]
    assert stats["after/hits_at_1"] > 0.5
    assert stats["after/hits_at_1"] > stats["before/hits_at_1"] + 0.2


@pytest.mark.parametrize("negatives", ["states", "next_states"])
def test_negatives_are_drawn_where_the_option_says(negatives: str) -> None:
    """'states': a permutation of z(s) (ours); 'next_states': B draws with replacement from
    z(s') (the authors' code), both compared with z(s') in the hinge term."""
    g = torch.Generator().manual_seed(0)
    z, predicted, z_next = (torch.randn(6, 3, generator=g) for _ in range(3))
    hinge, sigma = 50.0, 0.5  # a hinge so large that every negative term is active
    loss = transe_objective(z, predicted, z_next, hinge, sigma,
                            torch.Generator().manual_seed(1), negatives)
    draw = torch.Generator().manual_seed(1)
    if negatives == "states":
        sampled = z[torch.randperm(6, generator=draw)]
    else:
        sampled = z_next[torch.randint(0, 6, (6,), generator=draw)]
    expected = (energy(predicted, z_next, sigma) + hinge - energy(sampled, z_next, sigma)).mean()
    torch.testing.assert_close(loss, expected)
    with pytest.raises(ValueError, match="negatives must be one of"):
        transe_objective(z, predicted, z_next, negatives="actions")
