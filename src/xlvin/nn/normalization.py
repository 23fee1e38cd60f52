"""Running normalisation of observations and rewards (the continuous-control presets of
Stable-Baselines3's VecNormalize and CleanRL's MuJoCo PPO).

`RunningNorm` keeps the running mean and variance of what it is shown, merged batch by batch
with the parallel algorithm of Chan, Golub and LeVeque (1979):

    n = n_a + n_b,  delta = mean_b - mean_a,  mean = mean_a + delta n_b / n,
    var = (var_a n_a + var_b n_b + delta^2 n_a n_b / n) / n

from mean 0, variance 1 and a count of 1e-4. Its statistics are buffers: they are saved with the
weights (the checkpoint and the model file) and change only through `update`, which training calls;
acting, `predict` and evaluation apply them frozen.
"""

import torch
from torch import nn

#: The count the statistics start from (as SB3's and gymnasium's RunningMeanStd).
INITIAL_COUNT = 1e-4


class RunningNorm(nn.Module):
    """x -> clip((x - mean) / sqrt(var + eps), -clip, clip) with running statistics over the
    trailing `shape` of what `update` sees (float64 buffers `mean`, `var`, `count`)."""

    def __init__(self, shape: tuple[int, ...], clip: float = 10.0, eps: float = 1e-8) -> None:
        super().__init__()
        self.clip, self.eps = clip, eps
        self.register_buffer("mean", torch.zeros(shape, dtype=torch.float64))
        self.register_buffer("var", torch.ones(shape, dtype=torch.float64))
        self.register_buffer("count", torch.tensor(INITIAL_COUNT, dtype=torch.float64))

    @torch.no_grad()
    def update(self, batch: torch.Tensor) -> None:
        """Merge the statistics of `batch` [n, *shape] (population variance, on any device) into
        the running ones."""
        x = batch.to(self.mean.device, torch.float64).reshape(-1, *self.mean.shape)
        n = x.shape[0]
        if n == 0:
            return
        batch_mean, batch_var = x.mean(0), x.var(0, unbiased=False)
        total = self.count + n
        delta = batch_mean - self.mean
        m2 = self.var * self.count + batch_var * n + delta.square() * self.count * n / total
        self.mean += delta * n / total
        self.var.copy_(m2 / total)
        self.count.copy_(total)

    def scale(self) -> torch.Tensor:
        """1 / sqrt(var + eps), float64."""
        return torch.rsqrt(self.var + self.eps)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """x [B, *shape] normalised and clipped, float32."""
        z = (x.to(torch.float64) - self.mean) * self.scale()
        return z.clamp(-self.clip, self.clip).float()
