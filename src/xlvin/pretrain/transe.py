"""Pre-training the encoder and transition model with TransE on random-policy transitions
(paper section 3.3 and appendix B)."""

import math
from dataclasses import dataclass
from typing import Any

import torch
from torch import nn

from xlvin.accel.flat_adam import FlatAdam
from xlvin.config import option
from xlvin.errors import TrainingDiverged, UserError
from xlvin.io.checkpoint import Checkpointer
from xlvin.nn.policy import TransitionBatch
from xlvin.nn.transe import energy, hits_at_1, transe_loss
from xlvin.nn.transition import TransitionModel
from xlvin.progress import Progress


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


def split(data: TransitionBatch, fraction: float, generator: torch.Generator) -> tuple[TransitionBatch, TransitionBatch]:
    """Shuffle and split transitions into (train, held-out)."""
    order = torch.randperm(len(data.obs), generator=generator)
    cut = len(order) - max(1, round(fraction * len(order)))
    pick = lambda idx: TransitionBatch(data.obs[idx], data.actions[idx], data.next_obs[idx])
    return pick(order[:cut]), pick(order[cut:])


@torch.no_grad()
def transe_metrics(
    encoder: nn.Module, transition: TransitionModel, data: TransitionBatch, batch_size: int, sigma: float
) -> dict[str, float]:
    """Held-out quality: hits@1 within batches of `batch_size`, mean positive energy
    d(z(s) + T(z(s), a), z(s')) and mean energy to a shuffled negative d(z(s~), z(s'))."""
    hits, positive, negative, batches = 0.0, 0.0, 0.0, 0
    generator = torch.Generator().manual_seed(0)
    for start in range(0, len(data.obs) - batch_size + 1, batch_size):
        obs = data.obs[start : start + batch_size]
        actions = data.actions[start : start + batch_size]
        next_obs = data.next_obs[start : start + batch_size]
        z, z_next = encoder(obs), encoder(next_obs)
        hits += hits_at_1(encoder, transition, obs, actions, next_obs)
        positive += energy(z + transition(z, actions), z_next, sigma).mean().item()
        shuffled = z[torch.randperm(len(z), generator=generator)]
        negative += energy(shuffled, z_next, sigma).mean().item()
        batches += 1
    batches = max(batches, 1)
    return {
        "hits_at_1": hits / batches,
        "positive_energy": positive / batches,
        "negative_energy": negative / batches,
    }


def _resume(
    checkpoint: Checkpointer, pair: nn.Module, optimizer: Any, generator: torch.Generator
) -> tuple[int, dict[str, float], torch.Tensor]:
    """Restore weights, optimizer and generators from a pre-training checkpoint; return the
    epochs done, the metrics before training and the last loss."""
    state = checkpoint.restore(pair, optimizer, generator).loop
    epoch, before, loss = state.get("epoch"), state.get("before"), state.get("loss")
    if type(epoch) is not int or not isinstance(before, dict) or not isinstance(loss, float):
        raise UserError(f"checkpoint {checkpoint.path} does not fit this run: not a TransE "
                        "pre-training checkpoint")
    return epoch, before, torch.tensor(loss)


def _diverged(epoch: int, checkpoint: Checkpointer | None) -> TrainingDiverged:
    """The error that stops a pre-training whose loss is NaN or infinite (NaN or inf in the
    random-policy data, or divergence), before its weights are touched."""
    kept = (f"; the last good checkpoint is kept in {checkpoint.path}"
            if checkpoint is not None and checkpoint.exists() else "")
    return TrainingDiverged(f"non-finite TransE loss in epoch {epoch + 1} (NaN or inf in the "
                            "random-policy data, or divergence); weights left at their last "
                            f"finite values{kept}")


def pretrain_transe(
    encoder: nn.Module,
    transition: TransitionModel,
    data: TransitionBatch,
    cfg: TransEConfig,
    seed: int,
    progress: bool = True,
    accelerate: bool = True,
    checkpoint: Checkpointer | None = None,
    negatives: str = "states",
    position: int = 0,
) -> dict[str, float]:
    """Minimise the TransE loss (paper eq. 2, its negatives drawn as `negatives` says:
    `xlvin.nn.transe.NEGATIVES`) on `data` with Adam (on CPU, with `accelerate`, the flat Adam
    of `xlvin.accel.flat_adam`); return held-out metrics before and after.

    `checkpoint`: saved after every epoch; when its file exists, pre-training continues after
    the epoch it holds and ends as an uninterrupted pre-training would (a run killed every few
    seconds still gets through it). `progress` shows its steps (`xlvin.progress`, on line
    `position`)."""
    device = next(encoder.parameters()).device  # the data is collected on the CPU
    data = TransitionBatch(data.obs.to(device), data.actions.to(device), data.next_obs.to(device))
    generator = torch.Generator().manual_seed(seed)
    train, held_out = split(data, cfg.holdout, generator)
    eval_batch = min(cfg.batch_size, len(held_out.obs))
    before = transe_metrics(encoder, transition, held_out, eval_batch, cfg.sigma)
    params = list(encoder.parameters()) + list(transition.parameters())
    on_cpu = all(p.device.type == "cpu" for p in params)
    # On CPU torch's fused Adam, as FlatAdam: the per-tensor one's sqrt is MKL's vector maths,
    # which rounds otherwise on AMD than on Intel (xlvin.pretrain.executor._AdamOnSchedule).
    optimizer = (FlatAdam(params, lr=cfg.lr) if accelerate and on_cpu
                 else torch.optim.Adam(params, lr=cfg.lr, fused=on_cpu))
    n = len(train.obs)
    steps = cfg.epochs * max(1, n // cfg.batch_size)
    pair = nn.ModuleDict({"encoder": encoder, "transition": transition})
    loss, first = torch.zeros(()), 0
    if checkpoint is not None and checkpoint.exists():
        first, before, loss = _resume(checkpoint, pair, optimizer, generator)
    with Progress("pre-training TransE", steps, "step", progress, position,
                  done=first * (steps // max(cfg.epochs, 1))) as bar:
        for epoch in range(first, cfg.epochs):
            order = torch.randperm(n, generator=generator)
            for start in range(0, max(n - cfg.batch_size, 0) + 1, cfg.batch_size):
                idx = order[start : start + cfg.batch_size]
                loss = transe_loss(
                    encoder, transition, train.obs[idx], train.actions[idx], train.next_obs[idx],
                    hinge=cfg.hinge, sigma=cfg.sigma, generator=generator, negatives=negatives,
                )
                if not torch.isfinite(loss):
                    raise _diverged(epoch, checkpoint)
                optimizer.zero_grad()
                loss.backward()
                optimizer.step()
                bar.update()
            bar.set_postfix(loss=f"{loss.item():.4f}")
            if checkpoint is not None:
                checkpoint.save(pair, optimizer, generator, {"epoch": epoch + 1, "before": before,
                                                             "loss": loss.item(), "log_step": 0})
    after = transe_metrics(encoder, transition, held_out, eval_batch, cfg.sigma)
    return {
        "transitions": float(len(data.obs)),
        "final_train_loss": loss.item(),
        "heldout_batch": float(eval_batch),
        **{f"before/{k}": v for k, v in before.items()},
        **{f"after/{k}": v for k, v in after.items()},
    }
