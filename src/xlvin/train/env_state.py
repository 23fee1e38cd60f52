"""The state of a gymnasium vector env as plain JSON, so that a resumed run steps on exactly as
the interrupted one would have.

A vector env is a chain of objects: vector wrappers (RecordEpisodeStatistics), the SyncVectorEnv,
and for each sub-env its wrappers (TimeLimit, OrderEnforcing, ...) down to the unwrapped env. Their
state is in plain attributes: numbers, NumPy arrays (CartPole's `state`, the episode statistics),
and `np.random.Generator`s (each env's `_np_random`). `env_state` records every such attribute of
every object in the chain; `restore_env_state` writes them into a freshly made env of the same id.
Other attributes (spaces, specs, dicts of settings, queues of past statistics) are configuration
or history, identical in a fresh env or unused here.

This is exact for envs whose whole state lives in such attributes: gymnasium's classic-control and
toy-text envs and xlvin's own (`restorable` says which). ALE's Atari envs are too: their emulator
(the `ale` attribute) is saved with `cloneState(include_rng=True)` as serialized bytes and put back
with `restoreState`, and their wrappers' frame buffers are uint8 arrays and deques of them.
"""

import base64
from collections import deque
from collections.abc import Iterator
from typing import Any

import numpy as np
from gymnasium.vector import VectorEnv

#: Modules whose envs keep all their state in plain Python / NumPy attributes.
RESTORABLE_MODULES = ("gymnasium.envs.classic_control", "gymnasium.envs.toy_text", "xlvin.envs",
                      "ale_py")


class _Unsupported(Exception):
    """A value that is not plain state (skipped)."""


def _encode(value: Any) -> Any:
    if value is None or isinstance(value, (bool, int, float, str)):
        return value
    if isinstance(value, np.random.Generator):
        return {"__rng__": _encode(value.bit_generator.state)}
    if hasattr(value, "cloneState") and hasattr(value, "restoreState"):  # ALE's emulator
        return {"__ale__": _b64(value.cloneState(include_rng=True).serialize())}
    if isinstance(value, np.ndarray) and value.dtype == np.uint8:  # frames: bytes, not lists
        return {"__bytes__": _b64(value.tobytes()), "shape": list(value.shape)}
    if isinstance(value, deque):
        return {"__deque__": [_encode(v) for v in value], "maxlen": value.maxlen}
    if isinstance(value, np.ndarray) and value.dtype.kind in "biuf":
        return {"__array__": value.dtype.str, "shape": list(value.shape), "data": value.ravel().tolist()}
    if isinstance(value, np.generic) and value.dtype.kind in "biuf":
        return {"__scalar__": value.dtype.str, "value": value.item()}
    if isinstance(value, (list, tuple)):
        items = [_encode(v) for v in value]
        return items if isinstance(value, list) else {"__tuple__": items}
    if isinstance(value, dict) and all(isinstance(k, str) for k in value):  # a bit generator state
        return {"__dict__": {k: _encode(v) for k, v in value.items()}}
    raise _Unsupported


def _b64(raw: bytes) -> str:
    return base64.b64encode(raw).decode("ascii")


def _decode(data: Any, current: Any) -> Any:
    if not isinstance(data, (dict, list)):
        return data
    if isinstance(data, list):
        return [_decode(v, None) for v in data]
    if "__rng__" in data:
        rng = current if isinstance(current, np.random.Generator) else np.random.default_rng()
        rng.bit_generator.state = _decode(data["__rng__"], None)
        return rng
    if "__ale__" in data:
        current.restoreState(type(current.cloneState())(base64.b64decode(data["__ale__"])))
        return current
    if "__bytes__" in data:
        return np.frombuffer(base64.b64decode(data["__bytes__"]), np.uint8).reshape(data["shape"]).copy()
    if "__deque__" in data:
        return deque((_decode(v, None) for v in data["__deque__"]), maxlen=data["maxlen"])
    if "__array__" in data:
        return np.array(data["data"], dtype=np.dtype(data["__array__"])).reshape(data["shape"])
    if "__scalar__" in data:
        return np.dtype(data["__scalar__"]).type(data["value"])
    if "__tuple__" in data:
        return tuple(_decode(v, None) for v in data["__tuple__"])
    return {k: _decode(v, None) for k, v in data["__dict__"].items()}


def _chain(envs: VectorEnv) -> Iterator[Any]:
    """Every object holding state: vector wrappers, the vector env, each sub-env's wrappers."""
    obj: Any = envs
    while obj is not None:
        yield obj
        last, obj = obj, getattr(obj, "env", None)
    for sub in getattr(last, "envs", []):
        while sub is not None:
            yield sub
            sub = getattr(sub, "env", None)


def restorable(envs: VectorEnv) -> bool:
    """Whether every sub-env keeps its whole state in plain attributes (see the module doc)."""
    subs = getattr(envs.unwrapped, "envs", None)  # None for an async vector env
    return subs is not None and all(
        type(sub.unwrapped).__module__.startswith(RESTORABLE_MODULES) for sub in subs
    )


def env_state(envs: VectorEnv) -> list[dict[str, Any]]:
    """JSON-serialisable state of every object in the env chain, in chain order."""
    objects = []
    for obj in _chain(envs):
        attrs = {}
        for name, value in vars(obj).items():
            try:
                attrs[name] = _encode(value)
            except _Unsupported:
                continue
        objects.append({"type": type(obj).__qualname__, "attrs": attrs})
    return objects


def restore_env_state(envs: VectorEnv, state: list[dict[str, Any]]) -> None:
    """Write `env_state(...)` of an env of the same id and size into `envs` (already reset)."""
    chain = list(_chain(envs))
    types = [type(obj).__qualname__ for obj in chain]
    if types != [o["type"] for o in state]:
        raise ValueError(f"env state was saved for {[o['type'] for o in state]}, not {types}")
    for obj, saved in zip(chain, state):
        for name, data in saved["attrs"].items():
            setattr(obj, name, _decode(data, getattr(obj, name, None)))
