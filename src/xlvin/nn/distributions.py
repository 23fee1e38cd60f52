"""The action distributions a policy's output parameterises, one per action space.

A policy (`xlvin.nn.policy.ActorCritic`) maps observations to distribution parameters
[B, P] and values [B]; its `action_distribution()` says how to read the parameters:

- `Categorical(n)`, Discrete(n): P = n logits.
- `MultiCategorical(nvec)`, MultiDiscrete(nvec): P = sum(nvec) logits, one independent
  categorical per component (a factorised categorical); log pi(a) = sum_k log pi_k(a_k).
- `BinnedCategorical(low, high, bins)`, a Box of d dims binned into B bins per dimension
  (Tang and Agrawal, 2020; the paper's section 3.2 "Discussion"): a `MultiCategorical` over d
  components of B, the env receiving each bin's centre.
- `DiagGaussian(low, high)`, Box of d dims: P = 2d, the mean mu and the log standard deviation
  log sigma (state-independent: a trainable vector, `xlvin.nn.heads.ActorCriticHeads`);
  log pi(a) = -sum_j ((a_j - mu_j)^2 / (2 sigma_j^2) + log sigma_j + log(2 pi) / 2). The
  sampled action is stored as drawn (for its log-probability) and clipped to [low, high] only
  where the env receives it, as Stable-Baselines3 and CleanRL do.
- `StateDependentGaussian(low, high, latent_dim, sample_freq)`, Box of d dims with generalized
  state-dependent exploration (gSDE, Raffin et al. 2022): P = 2d + L d, the mean, the log of the
  state-dependent standard deviation and the L x d matrix z_l sigma_lj of the actor's latent
  features z (L of them, detached) times the trainable sigma (`xlvin.nn.heads.ActorCriticHeads`).
  The action is mu + sum_l z_l sigma_lj eps_lj with the noise matrix eps held fixed for
  `sample_freq` steps, so exploration is smooth in time; its law at one step is
  N(mu, sum_l z_l^2 sigma_lj^2), which `log_prob` and `entropy` read.

Training reads log-probabilities and entropies in torch (`log_prob`, `entropy`); acting samples in
NumPy (`xlvin.accel.numpy_sampling`, with the law of `log_prob`, and the actions the env receives
there too) from noise drawn once per rollout from a torch.Generator (`noise`), so the actions are
a deterministic function of the seed whichever actor computed the parameters. `action_dtype`
names the actions' dtype (for the NumPy arrays acting fills).
"""

import math
from typing import Any

import torch
from torch import Tensor


def categorical_entropy(logits: Tensor) -> Tensor:
    """H(softmax(logits)) over the last axis."""
    logp = torch.log_softmax(logits, dim=-1)
    return -(logp.exp() * logp).sum(-1)


class Categorical:
    """Discrete(n): actions [B] int64 from n logits."""

    action_shape: tuple[int, ...] = ()
    action_dtype = "int64"

    def __init__(self, n: int) -> None:
        self.num_params = n

    def log_prob(self, params: Tensor, actions: Tensor) -> Tensor:
        """log pi(a_i|s_i) [B] from logits [B, n] and actions [B] (long)."""
        logp = torch.log_softmax(params, dim=-1)
        return logp.gather(-1, actions.unsqueeze(-1)).squeeze(-1)

    def entropy(self, params: Tensor) -> Tensor:
        return categorical_entropy(params)

    def noise(self, shape: tuple[int, ...], generator: torch.Generator | None) -> Tensor:
        """One uniform per action, float64."""
        return torch.rand(shape, generator=generator, dtype=torch.float64)


class MultiCategorical:
    """MultiDiscrete(nvec): actions [B, K] int64, component k from its own nvec[k] logits."""

    action_dtype = "int64"

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

    def noise(self, shape: tuple[int, ...], generator: torch.Generator | None) -> Tensor:
        return torch.rand((*shape, len(self.nvec)), generator=generator, dtype=torch.float64)


class BinnedCategorical(MultiCategorical):
    """Box(low, high) of d dims, each binned into `bins` B: actions [B, d] int64, bin k_j of
    dimension j, from d x B logits; the env receives low + (high - low) k / (B - 1)."""

    def __init__(self, low: tuple[float, ...], high: tuple[float, ...], bins: int) -> None:
        super().__init__((bins,) * len(low))
        self.low, self.high = tuple(low), tuple(high)
        self.bins = bins


class DiagGaussian:
    """Box(low, high) of d dims: actions [B, d] float32 ~ N(mu, diag(sigma^2)) from [mu, log sigma]."""

    action_dtype = "float32"

    def __init__(self, low: tuple[float, ...], high: tuple[float, ...]) -> None:
        self.low, self.high = tuple(low), tuple(high)
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

    @property
    def noise_shape(self) -> tuple[int, ...]:
        """The shape of one action's noise: [d]."""
        return self.action_shape

    def noise(self, shape: tuple[int, ...], generator: torch.Generator | None) -> Tensor:
        """Standard normal noise [*shape, d], float32."""
        return torch.randn((*shape, *self.action_shape), generator=generator)


class StateDependentGaussian(DiagGaussian):
    """Box(low, high) of d dims explored by gSDE: parameters [mu, log sigma(s), z sigma] [B, 2d + L d]
    (see the module docstring), actions [B, d] float32."""

    def __init__(self, low: tuple[float, ...], high: tuple[float, ...], latent_dim: int,
                 sample_freq: int) -> None:
        super().__init__(low, high)
        self.latent_dim = latent_dim
        self.sample_freq = sample_freq
        self.num_params = (2 + latent_dim) * len(low)

    def log_prob(self, params: Tensor, actions: Tensor) -> Tensor:
        """log N(a | mu, diag(sigma(s)^2)) [B] (the law of one step's action)."""
        return super().log_prob(params[..., : 2 * self.action_shape[0]], actions)

    def entropy(self, params: Tensor) -> Tensor:
        return super().entropy(params[..., : 2 * self.action_shape[0]])

    @property
    def noise_shape(self) -> tuple[int, ...]:
        """The shape of one noise matrix eps: [L, d]."""
        return (self.latent_dim, self.action_shape[0])

    def noise(self, shape: tuple[int, ...], generator: torch.Generator | None) -> Tensor:
        """Standard normal noise matrices [*shape, L, d], float32; for a rollout's shape [T, N],
        each env's matrix drawn anew at steps 0, f, 2f, ... (f = `sample_freq`; f <= 0: once)."""
        if len(shape) != 2:
            return torch.randn((*shape, *self.noise_shape), generator=generator)
        steps, envs = shape
        every = self.sample_freq if self.sample_freq > 0 else steps
        draws = torch.randn((-(-steps // every), envs, *self.noise_shape), generator=generator)
        return draws.repeat_interleave(every, dim=0)[:steps]


ActionDistribution = Categorical | MultiCategorical | BinnedCategorical | DiagGaussian


def for_spaces(spaces: Any, bins: int = 0) -> ActionDistribution:
    """The distribution a policy's action head parameterises for an env's actions
    (`xlvin.envs.spaces.Spaces`); Box actions binned into `bins` per dimension (0: a Gaussian)
    are a factorised categorical."""
    if spaces.action_kind == "box":
        if bins:
            return BinnedCategorical(spaces.action_low, spaces.action_high, bins)
        return DiagGaussian(spaces.action_low, spaces.action_high)
    if spaces.action_kind == "multi_discrete":
        return MultiCategorical(spaces.action_nvec)
    return Categorical(spaces.num_actions)
