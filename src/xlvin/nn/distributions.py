"""The action distributions a policy's output parameterises, one per action space.

A policy (`xlvin.nn.policy.ActorCritic`) maps observations to distribution parameters
[B, P] and values [B]; its `action_distribution()` says how to read the parameters:

- `Categorical(n)`, Discrete(n): P = n logits.
- `MultiCategorical(nvec)`, MultiDiscrete(nvec): P = sum(nvec) logits, one independent
  categorical per component (a factorised categorical); log pi(a) = sum_k log pi_k(a_k).
- `DiagGaussian(low, high)`, Box of d dims: P = 2d, the mean mu and the log standard deviation
  log sigma (state-independent: a trainable vector, `xlvin.nn.heads.ActorCriticHeads`);
  log pi(a) = -sum_j ((a_j - mu_j)^2 / (2 sigma_j^2) + log sigma_j + log(2 pi) / 2). The
  sampled action is stored as drawn (for its log-probability) and clipped to [low, high] only
  where the env receives it (`env_actions`), as Stable-Baselines3 and CleanRL do.

Training reads log-probabilities and entropies in torch (`log_prob`, `entropy`); acting samples in
NumPy from noise drawn once per rollout from a torch.Generator (`noise`, `sample`), so the actions
are a deterministic function of the seed whichever actor computed the parameters.
"""

import math

import numpy as np
import torch
from torch import Tensor


def sample_categorical(logits: np.ndarray, uniform: np.ndarray) -> np.ndarray:
    """Inverse-CDF sampling a ~ softmax(logits) with given uniforms: logits [B, A], uniform [B].

    a = #{k : F(k) < u * F(A - 1)} with F the cumulative sum of exp(logits - max).
    """
    weights = np.exp(logits - np.maximum.reduce(logits, axis=-1, keepdims=True))
    cdf = np.add.accumulate(weights, axis=-1)
    actions = np.count_nonzero(cdf < uniform[:, None] * cdf[:, -1:], axis=-1)
    return np.minimum(actions, logits.shape[-1] - 1)


def categorical_entropy(logits: Tensor) -> Tensor:
    """H(softmax(logits)) over the last axis."""
    logp = torch.log_softmax(logits, dim=-1)
    return -(logp.exp() * logp).sum(-1)


class Categorical:
    """Discrete(n): actions [B] int64 from n logits."""

    action_shape: tuple[int, ...] = ()
    action_dtype = np.int64

    def __init__(self, n: int) -> None:
        self.num_params = n

    def log_prob(self, params: Tensor, actions: Tensor) -> Tensor:
        """log pi(a_i|s_i) [B] from logits [B, n] and actions [B] (long)."""
        logp = torch.log_softmax(params, dim=-1)
        return logp.gather(-1, actions.unsqueeze(-1)).squeeze(-1)

    def entropy(self, params: Tensor) -> Tensor:
        return categorical_entropy(params)

    def noise(self, shape: tuple[int, ...], generator: torch.Generator | None) -> np.ndarray:
        """One uniform per action, float64."""
        return torch.rand(shape, generator=generator, dtype=torch.float64).numpy()

    def sample(self, params: np.ndarray, noise: np.ndarray) -> np.ndarray:
        return sample_categorical(params, noise)

    def mode(self, params: np.ndarray) -> np.ndarray:
        return params.argmax(-1)

    def env_actions(self, actions: np.ndarray) -> np.ndarray:
        return actions


class MultiCategorical:
    """MultiDiscrete(nvec): actions [B, K] int64, component k from its own nvec[k] logits."""

    action_dtype = np.int64

    def __init__(self, nvec: tuple[int, ...]) -> None:
        self.nvec = tuple(nvec)
        self.num_params = sum(self.nvec)
        self.action_shape = (len(self.nvec),)

    def log_prob(self, params: Tensor, actions: Tensor) -> Tensor:
        """sum_k log pi_k(a_k|s) [B] from logits [B, sum(nvec)] and actions [B, K]."""
        parts = params.split(self.nvec, dim=-1)
        return sum(Categorical(n).log_prob(p, actions[:, k])
                   for k, (n, p) in enumerate(zip(self.nvec, parts)))  # type: ignore[return-value]

    def entropy(self, params: Tensor) -> Tensor:
        """The sum of the components' entropies (they are independent)."""
        return sum(categorical_entropy(p) for p in params.split(self.nvec, dim=-1))  # type: ignore[return-value]

    def noise(self, shape: tuple[int, ...], generator: torch.Generator | None) -> np.ndarray:
        return torch.rand((*shape, len(self.nvec)), generator=generator,
                          dtype=torch.float64).numpy()

    def sample(self, params: np.ndarray, noise: np.ndarray) -> np.ndarray:
        parts = np.split(params, np.cumsum(self.nvec)[:-1], axis=-1)
        return np.stack([sample_categorical(p, noise[:, k]) for k, p in enumerate(parts)], -1)

    def mode(self, params: np.ndarray) -> np.ndarray:
        parts = np.split(params, np.cumsum(self.nvec)[:-1], axis=-1)
        return np.stack([p.argmax(-1) for p in parts], -1)

    def env_actions(self, actions: np.ndarray) -> np.ndarray:
        return actions


class DiagGaussian:
    """Box(low, high) of d dims: actions [B, d] float32 ~ N(mu, diag(sigma^2)) from [mu, log sigma]."""

    action_dtype = np.float32

    def __init__(self, low: tuple[float, ...], high: tuple[float, ...]) -> None:
        self.low = np.asarray(low, dtype=np.float32)
        self.high = np.asarray(high, dtype=np.float32)
        self.action_shape = (len(low),)
        self.num_params = 2 * len(low)

    def log_prob(self, params: Tensor, actions: Tensor) -> Tensor:
        """log N(a | mu, diag(sigma^2)) [B], summed over the d dims; actions [B, d] unclipped."""
        mean, log_std = params.chunk(2, dim=-1)
        z = (actions - mean) * torch.exp(-log_std)
        return -(0.5 * z.square() + log_std).sum(-1) - 0.5 * math.log(2 * math.pi) * mean.shape[-1]

    def entropy(self, params: Tensor) -> Tensor:
        """sum_j (1/2 + log(2 pi)/2 + log sigma_j) [B]."""
        log_std = params.chunk(2, dim=-1)[1]
        return (0.5 + 0.5 * math.log(2 * math.pi) + log_std).sum(-1)

    def noise(self, shape: tuple[int, ...], generator: torch.Generator | None) -> np.ndarray:
        """Standard normal noise [*shape, d], float32."""
        return torch.randn((*shape, *self.action_shape), generator=generator).numpy()

    def sample(self, params: np.ndarray, noise: np.ndarray) -> np.ndarray:
        mean, log_std = np.split(params, 2, axis=-1)
        return (mean + np.exp(log_std) * noise).astype(np.float32)

    def mode(self, params: np.ndarray) -> np.ndarray:
        return np.split(params, 2, axis=-1)[0].astype(np.float32)

    def env_actions(self, actions: np.ndarray) -> np.ndarray:
        """The actions the env receives: clipped to its bounds."""
        return np.clip(actions, self.low, self.high)


ActionDistribution = Categorical | MultiCategorical | DiagGaussian
