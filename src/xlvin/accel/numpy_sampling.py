"""Actions drawn in NumPy: the acting route of the action distributions of `xlvin.nn.distributions`.

Acting (collection, evaluation, `predict`) reads a policy's parameters [B, P] as NumPy arrays
(from the policy or from `numpy_actor`) and turns them into actions with noise drawn beforehand
(a distribution's `noise`, once per rollout from a torch.Generator), so that the actions are a
deterministic function of the seed whichever actor computed the parameters. Each sampler has the
law of its torch distribution (its `log_prob`): tests/test_accel_sampling.py compares the action
frequencies on a grid of uniforms with the categorical probabilities, and the Gaussian actions
with their density.

- Categorical: inverse-CDF sampling of softmax(logits) with one uniform per action.
- MultiCategorical: one such categorical per component, each with its own uniform.
- DiagGaussian: a = mu + sigma * z from standard normal noise z, stored unclipped.
- StateDependentGaussian (gSDE): a_j = mu_j + sum_l (z_l sigma_lj) eps_lj from a standard normal
  noise matrix eps [L, d], whose law at one step is N(mu, sum_l (z_l sigma_lj)^2).

`env_actions` gives what the env receives: Box actions clipped to the bounds, bins their centres.
"""

import numpy as np

from xlvin.nn.distributions import (
    ActionDistribution,
    BinnedCategorical,
    DiagGaussian,
    MultiCategorical,
    StateDependentGaussian,
)


def sample_categorical(logits: np.ndarray, uniform: np.ndarray) -> np.ndarray:
    """Inverse-CDF sampling a ~ softmax(logits) with given uniforms: logits [B, A], uniform [B].

    a = #{k : F(k) < u * F(A - 1)} with F the cumulative sum of exp(logits - max).
    """
    weights = np.exp(logits - np.maximum.reduce(logits, axis=-1, keepdims=True))
    cdf = np.add.accumulate(weights, axis=-1)
    actions = np.count_nonzero(cdf < uniform[:, None] * cdf[:, -1:], axis=-1)
    return np.minimum(actions, logits.shape[-1] - 1)


def _components(dist: MultiCategorical, params: np.ndarray) -> list[np.ndarray]:
    """The logits [B, nvec[k]] of each component k."""
    return np.split(params, np.cumsum(dist.nvec)[:-1], axis=-1)


def sample_actions(dist: ActionDistribution, params: np.ndarray, noise: np.ndarray) -> np.ndarray:
    """Actions [B, *dist.action_shape] of dtype dist.action_dtype drawn from the parameters
    [B, P] with noise [B, ...] as `dist.noise` draws it (a tensor or an array)."""
    noise = np.asarray(noise)
    if isinstance(dist, StateDependentGaussian):
        d = dist.action_shape[0]
        scaled = params[:, 2 * d:].reshape(len(params), dist.latent_dim, d)
        return (params[:, :d] + (scaled * noise).sum(1)).astype(np.float32)
    if isinstance(dist, DiagGaussian):
        mean, log_std = np.split(params, 2, axis=-1)
        return (mean + np.exp(log_std) * noise).astype(np.float32)
    if isinstance(dist, MultiCategorical):
        parts = _components(dist, params)
        return np.stack([sample_categorical(p, noise[:, k]) for k, p in enumerate(parts)], -1)
    return sample_categorical(params, noise)


def mode_actions(dist: ActionDistribution, params: np.ndarray) -> np.ndarray:
    """The most probable actions [B, *dist.action_shape]: each categorical's argmax, the
    Gaussian's mean."""
    if isinstance(dist, DiagGaussian):
        return params[:, : dist.action_shape[0]].astype(np.float32)
    if isinstance(dist, MultiCategorical):
        return np.stack([p.argmax(-1) for p in _components(dist, params)], -1)
    return params.argmax(-1)


def env_actions(dist: ActionDistribution, actions: np.ndarray) -> np.ndarray:
    """The actions the env receives: Box actions clipped to [low, high] (stored unclipped for
    their log-probability), bins their centres low + (high - low) k / (B - 1) as float32, the
    others as they are."""
    if isinstance(dist, BinnedCategorical):
        low, high = np.asarray(dist.low, np.float32), np.asarray(dist.high, np.float32)
        return (low + (high - low) * (actions / (dist.bins - 1))).astype(np.float32)
    if isinstance(dist, DiagGaussian):
        return np.clip(actions, np.asarray(dist.low, np.float32), np.asarray(dist.high, np.float32))
    return actions
