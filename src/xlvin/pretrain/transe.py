"""Pre-training the encoder and transition model with TransE on random-policy transitions
(paper section 3.3 and appendix B)."""

from typing import Any

import torch
from torch import nn

from xlvin.accel.flat_adam import FlatAdam
from xlvin.accel.proof import flat_adam_proven
from xlvin.errors import TrainingDiverged, UserError
from xlvin.io.checkpoint import Checkpointer
from xlvin.nn.policy import TransitionBatch
from xlvin.nn.transe import energy, hits_at_1, transe_loss
from xlvin.nn.transition import TransitionModel
from xlvin.pretrain.config import TransEConfig
from xlvin.progress import Progress


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
                 and flat_adam_proven(cfg.lr, 1e-8, None)
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
