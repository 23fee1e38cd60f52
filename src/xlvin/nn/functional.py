"""The ops of the agents' forwards, for torch tensors and, while acting, for NumPy arrays.

Training calls these on torch tensors and they are exactly the torch ops they name (`linear` is
`F.linear`'s addmm). Acting -- a rollout or an evaluation, a block in which no weight changes --
feeds the network a few observations at a time, where every op's fixed cost dominates:

- `acting()` caches, per weight, one contiguous copy of W^T: BLAS takes the transposed view about
  twice as slowly for a few rows (~10 us instead of ~5 us per layer here);
- inside `acting()` the same forwards also take NumPy arrays (`ActorCritic.array_forward`): every
  op then runs in NumPy on NumPy views of the cached parameters, ~1-2 us per op where torch's
  dispatch costs 3-5 us, and the XLVIN CartPole forward at batch 4 takes ~3x less time.

An array `x` below is a torch.Tensor or a np.ndarray (float32); every helper returns the type
of its array argument. NumPy arrays are accepted inside `acting()` only, on CPU parameters.
"""

import threading
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from typing import Any

import numpy as np
import torch
from torch import Tensor, nn
from torch.nn import functional as F

Array = Tensor | np.ndarray


class _State(threading.local):
    #: while acting: what the helpers derived from each weight, by id of the weight or module
    #: (each entry keeps its object alive, so an id stays unique for the block's duration)
    cache: dict[Any, tuple[object, Any]] | None = None


_state = _State()


@contextmanager
def acting() -> Iterator[None]:
    """`torch.no_grad()` for a block in which no weight changes (collecting a rollout, an
    evaluation): the helpers cache what they derive from a weight for the block's duration, and
    the forwards may take NumPy arrays."""
    outer = _state.cache
    _state.cache = {}
    try:
        with torch.no_grad():
            yield
    finally:
        _state.cache = outer


def _derived(obj: object, key: Any, make: Callable[[], Any]) -> Any:
    """`make()`, computed once per `acting()` block for `obj` (its cache key `key`)."""
    cache = _state.cache
    if cache is None:
        raise RuntimeError("NumPy forwards run inside xlvin.nn.functional.acting() only")
    entry = cache.get(key)
    if entry is None or entry[0] is not obj:
        entry = cache[key] = (obj, make())
    return entry[1]


def per_block(obj: object, key: Any, make: Callable[[], Any]) -> Any:
    """`make()` for a value derived from weights only (not from the observations): computed once
    per `acting()` block (cached for `obj` under `key`), and at every call outside one, where the
    weights change between calls and gradients flow through it."""
    return make() if _state.cache is None else _derived(obj, key, make)


def transposed(weight: Tensor, like: Array | None = None) -> Array:
    """W^T of a weight [out, in]: inside `acting()` a cached contiguous copy (a NumPy array when
    `like` is one), else the view."""
    if isinstance(like, np.ndarray):  # a NumPy view of the cached contiguous copy
        return _derived(weight, (id(weight), "T"), lambda: transposed(weight).numpy())
    if _state.cache is None:
        return weight.t()
    return _derived(weight, (id(weight), "t"), lambda: weight.detach().t().contiguous())


def parameter(tensor: Tensor, like: Array) -> Array:
    """A parameter or buffer as the type of `like`: itself, or its (cached) NumPy view."""
    if isinstance(like, np.ndarray):
        return _derived(tensor, (id(tensor), "n"), lambda: tensor.detach().numpy())
    return tensor


def affine(x: Array, weight_t: Array, bias: Array | None) -> Array:
    """x W^T + b from W^T [in, out] (x [N, in]; b a parameter or an array of x's type):
    torch.addmm, or NumPy's matmul and add."""
    if isinstance(x, np.ndarray):
        out = x @ weight_t
        if bias is not None:
            out += bias if isinstance(bias, np.ndarray) else parameter(bias, x)
        return out
    return x @ weight_t if bias is None else torch.addmm(bias, x, weight_t)


def linear(x: Array, layer: nn.Linear) -> Array:
    """layer(x) for x [N, in]: `F.linear`'s addmm (through `transposed` while acting), or in
    NumPy against the layer's cached W^T and bias."""
    if isinstance(x, np.ndarray):  # one cache lookup per layer: the NumPy forward's hot path
        weight_t, bias = _derived(layer, id(layer), lambda: (
            transposed(layer.weight, like=x),
            None if layer.bias is None else parameter(layer.bias, x),
        ))
        return affine(x, weight_t, bias)
    return affine(x, transposed(layer.weight), layer.bias)


def relu_(x: Array) -> Array:
    """ReLU in place (on a fresh tensor nothing else reads)."""
    if isinstance(x, np.ndarray):
        return np.maximum(x, 0, out=x)
    return x.relu_()


def cat(arrays: Sequence[Array], dim: int = 0) -> Array:
    """Concatenation along `dim` (the array itself when there is only one)."""
    if len(arrays) == 1:
        return arrays[0]
    if isinstance(arrays[0], np.ndarray):
        return np.concatenate(arrays, axis=dim)
    return torch.cat(list(arrays), dim=dim)  # type: ignore[arg-type]


def amax(x: Array, dim: int) -> Array:
    """Maximum over `dim` (no gradient routing: the no-grad aggregate of the tree)."""
    if isinstance(x, np.ndarray):
        return np.maximum.reduce(x, axis=dim)
    return x.amax(dim=dim)


def float_rows(obs: Array) -> Array:
    """Observations [B, ...] as float32 rows [B, features]."""
    if isinstance(obs, np.ndarray):
        return obs.reshape(obs.shape[0], -1).astype(np.float32, copy=False)
    return obs.flatten(1).float()


def zeros_like(x: Array) -> Array:
    return np.zeros_like(x) if isinstance(x, np.ndarray) else torch.zeros_like(x)


def layer_norm(x: Array, norm: nn.LayerNorm) -> Array:
    """`norm(x)` over the last dimension; in NumPy (x - mean) / sqrt(var + eps) * w + b, with
    the biased variance, as torch computes it."""
    if not isinstance(x, np.ndarray):
        return F.layer_norm(x, norm.normalized_shape, norm.weight, norm.bias, norm.eps)
    weight, bias = _derived(norm, id(norm), lambda: (
        None if norm.weight is None else parameter(norm.weight, x),
        None if norm.bias is None else parameter(norm.bias, x),
    ))
    scale = 1.0 / x.shape[-1]
    x = x - np.add.reduce(x, axis=-1, keepdims=True) * scale
    x *= 1.0 / np.sqrt(np.add.reduce(x * x, axis=-1, keepdims=True) * scale + norm.eps)
    if weight is not None:
        x *= weight
    if bias is not None:
        x += bias
    return x
