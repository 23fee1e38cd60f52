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
import math
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


def inexact_resume_notice(env_id: str, seed: int) -> str:
    """The line a resume prints when the envs' state was not saved (not `restorable`): they are
    reset with `seed` instead, so the run goes on, but not as an uninterrupted one would."""
    return (f"xlvin: warning: the state of {env_id} cannot be restored (only envs of "
            f"{', '.join(RESTORABLE_MODULES)} keep all their state in attributes xlvin saves); "
            f"the run continues from envs reset with seed {seed}, so it will not match an "
            "uninterrupted run")


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


def _plain(value: Any) -> bool:
    return value is None or isinstance(value, (bool, int, float, str))


def _numeric(dtype: Any) -> bool:
    """A dtype string naming a number of at most 8 bytes (never text, objects or records)."""
    try:
        dt = np.dtype(dtype)
    except (TypeError, ValueError):
        return False
    return dt.kind in "biuf" and dt.itemsize <= 8


def _well_formed(saved: Any) -> bool:
    """An encoded value made only of what `_encode` writes: plain values, numeric arrays and
    scalars, frames, deques, tuples, lists, bit generator states and ALE states. An env's own
    attributes change kind as it runs (MountainCar's `state`: an array after reset, a tuple
    after a step), so the kind is not compared with the env's; the dtype is, with `_numeric`,
    so no checkpoint makes NumPy allocate text or objects."""
    if _plain(saved):
        return True
    if isinstance(saved, list):
        return all(map(_well_formed, saved))
    if not isinstance(saved, dict) or not saved:
        return False
    tag = next(iter(saved))
    if tag == "__array__":
        shape = saved.get("shape")
        return (_numeric(saved["__array__"]) and isinstance(shape, list)
                and all(type(n) is int and n >= 0 for n in shape)
                and isinstance(saved.get("data"), list) and all(map(_plain, saved["data"])))
    if tag == "__scalar__":
        return _numeric(saved["__scalar__"]) and _plain(saved.get("value"))
    if tag in ("__bytes__", "__ale__"):
        return isinstance(saved[tag], str)
    if tag == "__deque__":
        maxlen = saved.get("maxlen")
        return ((maxlen is None or type(maxlen) is int) and isinstance(saved[tag], list)
                and all(map(_well_formed, saved[tag])))
    if tag in ("__tuple__",):
        return isinstance(saved[tag], list) and all(map(_well_formed, saved[tag]))
    if tag in ("__rng__", "__dict__"):
        inner = saved[tag] if tag == "__dict__" else saved[tag].get("__dict__")
        return isinstance(inner, dict) and all(map(_well_formed, inner.values()))
    return False


def _fits(saved: Any, own: Any) -> bool:
    """Whether a well-formed saved value can stand where the env holds `own`: a plain value of
    the same type (or either None: `steps_beyond_terminated` is None until an episode ends),
    an array or frame of the same shape, with as many numbers as its shape holds. Other kinds
    may differ (see `_well_formed`)."""
    if _plain(saved) and _plain(own):
        return saved is None or own is None or type(saved) is type(own)
    if isinstance(saved, dict) and isinstance(own, dict) and next(iter(own)) in (
        "__array__", "__bytes__"
    ) and next(iter(saved)) == next(iter(own)):
        if saved["shape"] != own["shape"]:
            return False
        return "data" not in saved or len(saved["data"]) == math.prod(saved["shape"])
    return True


def restore_env_state(envs: VectorEnv, state: list[dict[str, Any]]) -> None:
    """Write `env_state(...)` of an env of the same id and size into `envs` (already reset).

    Only attributes the env's own state declares are written, and only well-formed values
    (`_well_formed`) that fit the env's own (`_fits`): a checkpoint cannot set another attribute or make NumPy allocate text or
    objects. Anything else is a ValueError, before any attribute is written."""
    chain = list(_chain(envs))
    types = [type(obj).__qualname__ for obj in chain]
    try:
        saved_types = [o["type"] for o in state]
    except (TypeError, KeyError):
        raise ValueError("env state is not a list of objects") from None
    if types != saved_types:
        raise ValueError(f"env state was saved for {saved_types}, not {types}")
    for own, saved in zip(env_state(envs), state):
        attrs = saved.get("attrs")
        if not isinstance(attrs, dict):
            raise ValueError(f"env state of {own['type']} has no attributes")  # noqa: TRY004
        for name, data in attrs.items():
            if name not in own["attrs"]:
                raise ValueError(f"env state sets {own['type']}.{name}, which the env does not hold")
            if not _well_formed(data):
                raise ValueError(f"env state of {own['type']}.{name} is not a state value")
            if not _fits(data, own["attrs"][name]):
                raise ValueError(f"env state of {own['type']}.{name} does not fit the env's "
                                 "(another type or shape)")
    for obj, saved in zip(chain, state):
        for name, data in saved["attrs"].items():
            setattr(obj, name, _decode(data, getattr(obj, name, None)))
