"""The NumPy samplers (xlvin.accel.numpy_sampling) have the law of the torch distributions
(xlvin.nn.distributions): on a grid of M evenly spaced uniforms, inverse-CDF sampling gives each
action a frequency within 1/M of its probability (tolerance 2/M per categorical, float32 logits
aside), and a pair of categoricals on the product grid each pair within 2/M (tolerance 4/M); a
Gaussian action is mu + sigma z, so its density is the noise's divided by prod sigma
(tolerance 1e-5); a gSDE action is linear in its noise matrix, with the covariance of the
Gaussian its log_prob reads (tolerance 1e-5)."""

import math

import numpy as np
import pytest
import torch

from xlvin.accel.numpy_sampling import mode_actions, sample_actions, sample_categorical
from xlvin.nn.distributions import (
    Categorical,
    DiagGaussian,
    MultiCategorical,
    StateDependentGaussian,
)

M = 20_000


def grid(m: int = M) -> np.ndarray:
    """m evenly spaced uniforms in (0, 1), float64 as `noise` draws them."""
    return (np.arange(m) + 0.5) / m


def probabilities(dist: Categorical, logits: np.ndarray) -> np.ndarray:
    """pi(a|s) [B, n] from the torch distribution's log_prob."""
    params = torch.from_numpy(logits)
    every = range(logits.shape[1])
    rows = [dist.log_prob(params, torch.full((len(logits),), a)).exp() for a in every]
    return torch.stack(rows, 1).numpy()


@pytest.mark.parametrize("scale", [1.0, 30.0], ids=["moderate", "peaked"])
def test_categorical_frequencies_are_the_softmax_probabilities(scale: float) -> None:
    logits = (scale * np.random.default_rng(0).standard_normal((4, 6))).astype(np.float32)
    expected = probabilities(Categorical(6), logits)
    for row, probs in zip(logits, expected):
        actions = sample_categorical(np.repeat(row[None], M, 0), grid())
        np.testing.assert_allclose(np.bincount(actions, minlength=6) / M, probs, atol=2 / M)


def test_multi_categorical_joint_frequencies_are_the_product_of_its_components() -> None:
    nvec, m = (2, 3), 400
    dist = MultiCategorical(nvec)
    logits = np.random.default_rng(1).standard_normal((1, sum(nvec))).astype(np.float32)
    u0, u1 = np.meshgrid(grid(m), grid(m), indexing="ij")
    noise = np.stack([u0.ravel(), u1.ravel()], 1)
    actions = sample_actions(dist, np.repeat(logits, m * m, 0), noise)
    assert actions.shape == (m * m, 2) and actions.dtype == np.int64
    counts = np.zeros(nvec)
    np.add.at(counts, (actions[:, 0], actions[:, 1]), 1)
    every = torch.tensor([[a, b] for a in range(nvec[0]) for b in range(nvec[1])])
    joint = dist.log_prob(torch.from_numpy(logits).expand(len(every), -1), every).exp()
    np.testing.assert_allclose(counts.ravel() / m**2, joint.numpy(), atol=4 / m)


def test_gaussian_actions_have_the_torch_density() -> None:
    """a = mu + sigma z: log pi(a) = log N(z; 0, 1) - sum_j log sigma_j, by change of variables."""
    dist = DiagGaussian((-1.0, -1.0), (1.0, 1.0))
    rng = np.random.default_rng(2)
    params = np.concatenate([rng.standard_normal((64, 2)), rng.uniform(-2, 1, (64, 2))], 1)
    params = params.astype(np.float32)
    noise = rng.standard_normal((64, 2)).astype(np.float32)
    actions = sample_actions(dist, params, noise)
    assert actions.shape == (64, 2) and actions.dtype == np.float32
    log_prob = dist.log_prob(torch.from_numpy(params), torch.from_numpy(actions)).numpy()
    noise_density = -0.5 * (noise**2).sum(1) - math.log(2 * math.pi)
    np.testing.assert_allclose(log_prob, noise_density - params[:, 2:].sum(1), atol=1e-5)


def test_sde_actions_have_the_covariance_of_the_torch_gaussian() -> None:
    """a = mu + J eps is linear in the noise matrix eps [L, d]: its law is N(mu, J J^T), J read
    off column by column from the basis matrices; log_prob's Gaussian is N(mu, diag(sigma(s)^2))
    with sigma(s)_j^2 = sum_l (z_l sigma_lj)^2, as the heads compute it."""
    latent, d = 5, 3
    dist = StateDependentGaussian((-1.0,) * d, (1.0,) * d, latent, sample_freq=4)
    rng = np.random.default_rng(4)
    mean, scaled = rng.standard_normal(d), rng.standard_normal((latent, d))
    log_std = 0.5 * np.log((scaled**2).sum(0))
    params = np.concatenate([mean, log_std, scaled.ravel()])[None].astype(np.float32)
    basis = np.eye(latent * d, dtype=np.float32).reshape(-1, latent, d)
    offset = sample_actions(dist, params, np.zeros((1, latent, d), np.float32))
    np.testing.assert_allclose(offset[0], mean, atol=1e-6)
    jacobian = (sample_actions(dist, params.repeat(len(basis), 0), basis) - offset).T  # [d, L d]
    params_t = torch.from_numpy(params)
    sigma = np.exp(2 * log_std)
    np.testing.assert_allclose(jacobian @ jacobian.T, np.diag(sigma), atol=1e-5)
    z = rng.standard_normal((16, d))
    actions = torch.from_numpy((mean + np.sqrt(sigma) * z).astype(np.float32))
    density = -0.5 * (z**2).sum(1) - 0.5 * d * math.log(2 * math.pi) - log_std.sum()
    np.testing.assert_allclose(dist.log_prob(params_t.expand(16, -1), actions).numpy(), density,
                               atol=1e-5)
    assert mode_actions(dist, params).tolist() == [mean.astype(np.float32).tolist()]


def test_modes_are_the_most_probable_actions() -> None:
    rng = np.random.default_rng(3)
    logits = rng.standard_normal((8, 5)).astype(np.float32)
    np.testing.assert_array_equal(mode_actions(Categorical(5), logits),
                                  probabilities(Categorical(5), logits).argmax(1))
    params = rng.standard_normal((8, 4)).astype(np.float32)
    gaussian = DiagGaussian((-1.0, -1.0), (1.0, 1.0))
    mean = mode_actions(gaussian, params)
    assert mean.dtype == np.float32
    np.testing.assert_array_equal(mean, params[:, :2])
    density = gaussian.log_prob(torch.from_numpy(params), torch.from_numpy(mean))
    shifted = gaussian.log_prob(torch.from_numpy(params), torch.from_numpy(mean + 0.1))
    assert (density > shifted).all()
