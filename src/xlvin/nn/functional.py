"""Linear layers for the small batches of acting: products against contiguous transposed weights.

`F.linear(x, W, b)` multiplies x by the transposed view W^T; for the batch of a few observations
that a rollout or an evaluation feeds the network at every step, BLAS takes that transposed
operand about twice as slowly as a contiguous one (~10 us instead of ~5 us per layer on this
CPU, where a PPO agent's whole forward is ~7 such products). Inside `acting()` -- a block in
which the weights do not change -- `transposed(W)` makes one contiguous copy of W^T per weight
and reuses it; everywhere else it is the plain view, so training computes exactly what
`F.linear` computes (`linear` is then the same addmm call).
"""

import threading
from collections.abc import Iterator
from contextlib import contextmanager

import torch
from torch import Tensor

_state = threading.local()


@contextmanager
def acting() -> Iterator[None]:
    """`torch.no_grad()` for a block in which no weight changes (collecting a rollout, an
    evaluation): `transposed` caches one contiguous W^T per weight for the block's duration."""
    outer = getattr(_state, "cache", None)
    _state.cache = {}
    try:
        with torch.no_grad():
            yield
    finally:
        _state.cache = outer


def transposed(weight: Tensor) -> Tensor:
    """W^T of a weight [out, in]: a cached contiguous copy inside `acting()`, else the view."""
    cache: dict[int, tuple[Tensor, Tensor]] | None = getattr(_state, "cache", None)
    if cache is None:
        return weight.t()
    entry = cache.get(id(weight))
    if entry is None or entry[0] is not weight:  # the entry holds the weight: its id stays unique
        entry = (weight, weight.detach().t().contiguous())
        cache[id(weight)] = entry
    return entry[1]


def linear(x: Tensor, weight: Tensor, bias: Tensor | None = None) -> Tensor:
    """x W^T + b for x [N, in] (`F.linear` on 2-D input, through `transposed`)."""
    wt = transposed(weight)
    return x @ wt if bias is None else torch.addmm(bias, x, wt)
