"""TransE pre-training's settings (`xlvin.pretrain.transe`), torch-free: the command line's
parser lists them (--transe-*) without importing torch."""

import math
from dataclasses import dataclass

from xlvin.config import option
from xlvin.errors import UserError


@dataclass
class TransEConfig:
    """TransE pre-training settings (Kipf et al. 2020 and the authors' code: batch 128, Adam with its default lr)."""

    episodes: int = option(1000, "random-policy episodes collected for TransE pre-training")
    max_transitions: int = option(
        25_000, "stop collecting random-policy data at this many transitions (Acrobot's random "
        "episodes last 500 steps)"
    )
    epochs: int = option(10, "passes over the random-policy transitions")
    batch_size: int = option(128, "TransE minibatch size")
    lr: float = option(1e-3, "Adam learning rate for TransE pre-training")
    hinge: float = option(1.0, "hinge xi of the negative term (paper eq. 2)")
    sigma: float = option(0.5, "energy scale: d(x, y) = ||x - y||^2 / (2 sigma^2)")
    holdout: float = option(0.1, "fraction of transitions held out to measure hits@1")
    shared: bool = option(
        False, "pre-train once per environment and architecture (seed 0, cached like the "
        "executors) and start every run from those weights: the authors' code loads one TransE "
        "file per environment for all its runs"
    )

    def __post_init__(self) -> None:
        checks = [
            (self.episodes >= 1, "episodes must be >= 1"),
            (self.max_transitions >= 1, "max_transitions must be >= 1"),
            (self.epochs >= 0, "epochs must be >= 0"),
            (self.batch_size >= 1, "batch_size must be >= 1"),
            (math.isfinite(self.lr) and self.lr > 0, "lr must be a finite number > 0"),
            (math.isfinite(self.hinge) and self.hinge >= 0, "hinge must be a finite number >= 0"),
            (math.isfinite(self.sigma) and self.sigma > 0, "sigma must be a finite number > 0"),
            (0 < self.holdout < 1, "holdout must be in (0, 1)"),
        ]
        for ok, message in checks:
            if not ok:
                raise UserError(f"TransE config: {message}")
