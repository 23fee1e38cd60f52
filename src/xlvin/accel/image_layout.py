"""Frames in channels-last memory order for the convolutions of a minibatch.

The readable trainer hands the encoder frames as [B, C, H, W] in PyTorch's default (contiguous,
channels-first) order. The same tensor stored channels-last (the C values of one pixel next to
each other) lets the CPU's convolution kernels (oneDNN) take their NHWC path, which is faster
for the Nature CNN's forward and backward (timings in benchmarks/notes.md). Only the memory order changes, never the values or the shape, so the
network computes the same function, up to float rounding (the convolutions add in another
order).
"""

import dataclasses

import torch

from xlvin.nn.policy import TransitionBatch


def _channels_last(frames: torch.Tensor) -> torch.Tensor:
    """Pixel frames [B, C, H, W] (uint8) stored channels-last (a copy); other tensors as they
    are (the mazes' float grids: no gain was measured on their small convolutions)."""
    if frames.dim() != 4 or frames.dtype != torch.uint8:
        return frames
    return frames.contiguous(memory_format=torch.channels_last)


def channels_last(batch: TransitionBatch) -> TransitionBatch:
    """The batch with its observations and next observations stored channels-last when they
    are pixel frames [B, C, H, W] (other observations are returned unchanged)."""
    return dataclasses.replace(batch, obs=_channels_last(batch.obs),
                               next_obs=_channels_last(batch.next_obs))
