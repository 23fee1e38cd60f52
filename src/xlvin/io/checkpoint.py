"""Checkpoints: everything a training loop needs to continue exactly where it stopped.

One file, DIR/checkpoint.safetensors, rewritten atomically (temporary file, fsync, rename), so a
kill at any moment leaves the previous checkpoint or the new one, never half of one. It holds

    model/<name>            the policy's state dict
    optim/<i>/<key>         the optimizer's per-parameter state (Adam's step, exp_avg, exp_avg_sq)
    rng/torch, rng/sampler  torch's global generator state and the loop's own torch.Generator
    loop/<name>             tensors of the loop (e.g. the low-data protocol's fixed dataset)

and, in the JSON header, the format, the optimizer's param groups, NumPy's and Python's global
generator states, the loop's counters and env state (`loop`), and the run's `extra` record (what
the run directory's summary has collected so far, e.g. pre-training statistics; later experiments
put their curriculum state there) and the run's config (`run`), so a checkpoint of another run is
refused. Loading parses JSON and raw tensors only: no code runs.

No checkpoint is written holding a NaN or inf (the one already there stays the last good one),
and none is read back holding one, in its weights or Adam's state. A checkpoint that is a
symbolic link is refused, never followed.
"""

import os
import random
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

import numpy as np
import torch

from xlvin.errors import UserError, one_line
from xlvin.io.files import check_regular
from xlvin.io.weights import atomic_save_tensors, check_tensors, load_weights, read_metadata

FORMAT = "xlvin-checkpoint/3"
CHECKPOINT = "checkpoint.safetensors"
#: TransE pre-training's own checkpoint, written after every epoch (same format, its own loop).
TRANSE_CHECKPOINT = "transe-checkpoint.safetensors"


class Optimizer(Protocol):
    """What a checkpoint needs of an optimizer (torch.optim's and `FlatAdam`'s state API)."""

    def state_dict(self) -> dict[str, Any]: ...

    def load_state_dict(self, state_dict: dict[str, Any]) -> None: ...


@dataclass
class Resumed:
    """What a loop gets back from a checkpoint besides the restored model, optimizer and RNGs."""

    loop: dict[str, Any]  # the loop's JSON state, as saved
    tensors: dict[str, torch.Tensor]  # the loop's tensors (prefix `loop/` removed)


@dataclass
class Checkpointer:
    """Saves and restores a training loop's state in `path` every `every` updates (0: never).

    `extra` is the run-level record saved alongside (the caller keeps updating the same dict);
    `restore` updates it in place with the saved record. `run` is the run's config: saved, and
    compared on restore (a checkpoint saved without one is not compared), after `normalize`
    (as `xlvin.io.run_dir.open_run_dir` compares configs).
    """

    path: Path
    every: int
    extra: dict[str, Any] = field(default_factory=dict)
    run: dict[str, Any] | None = None
    normalize: Callable[[dict[str, Any]], dict[str, Any]] | None = None

    def due(self, update: int) -> bool:
        """A checkpoint after `update` updates? At 0 (before any update) and every `every`."""
        return self.every > 0 and update % self.every == 0

    def exists(self) -> bool:
        """Whether there is a checkpoint; anything there but a regular file (a symbolic link to
        a file elsewhere, a folder) is one UserError, never followed."""
        if not os.path.lexists(self.path):
            return False
        check_regular(Path(self.path))
        return True

    def log_step(self) -> int:
        """The metrics step the checkpoint was taken at (0 without a checkpoint)."""
        if not self.exists():
            return 0
        meta = _read_meta(Path(self.path))
        step = meta.get("loop", {}).get("log_step") if isinstance(meta.get("loop"), dict) else None
        if not isinstance(step, int) or isinstance(step, bool) or step < 0:
            raise UserError(f"checkpoint {self.path} does not fit this run: no valid loop.log_step")
        return step

    def save(
        self,
        policy: torch.nn.Module,
        optimizer: Optimizer,
        sampler: torch.Generator,
        loop: dict[str, Any],
        tensors: dict[str, torch.Tensor] | None = None,
    ) -> None:
        optim_tensors, param_groups = _optimizer_state(optimizer)
        out = {f"model/{k}": v for k, v in policy.state_dict().items()}
        out.update(optim_tensors)
        out["rng/torch"] = torch.get_rng_state()
        out["rng/sampler"] = sampler.get_state()
        out.update({f"loop/{k}": v for k, v in (tensors or {}).items()})
        self._check_finite(out)
        meta = {
            "format": FORMAT,
            "param_groups": param_groups,
            "rng": {"numpy": _numpy_state(), "python": _python_state()},
            "loop": loop,
            "extra": self.extra,
            "run": self.run,
        }
        atomic_save_tensors(Path(self.path), out, meta)

    def load_policy(self, policy: torch.nn.Module) -> int:
        """Load into `policy` the weights of `path` (its `model/` section, checked as `restore`
        checks them) and return the env steps they trained; nothing else restored: what a run
        stopped early holds."""
        tensors, meta = self._read("refused")
        weights = section(tensors, "model/")
        check_tensors(policy, weights, Path(self.path))
        loop = meta.get("loop")
        steps = loop.get("result", {}).get("env_steps") if isinstance(loop, dict) else None
        if not isinstance(steps, int) or isinstance(steps, bool) or steps < 0:
            raise UserError(f"checkpoint {self.path} has no valid loop.result.env_steps")
        try:
            policy.load_state_dict(weights, strict=True)
        except RuntimeError as err:
            raise UserError(f"checkpoint {self.path} does not fit this run: {one_line(err)}"
                            ) from None
        return steps

    def _read(self, refusal: str) -> tuple[dict[str, torch.Tensor], dict[str, Any]]:
        """The tensors and header of `path`, a regular file of this format saved by this run
        (else one UserError ending in `refusal`)."""
        if os.path.lexists(self.path):  # as in `exists`
            check_regular(Path(self.path))
        tensors, meta = load_weights(Path(self.path), what="checkpoint")
        _check_format(Path(self.path), meta)
        saved = meta.get("run")
        if saved is not None and self.normalize is not None:
            saved = self.normalize(saved)
        if None not in (saved, self.run) and saved != self.run:
            raise UserError(f"checkpoint {self.path} was saved by another run; {refusal}")
        return tensors, meta

    def _check_finite(self, tensors: dict[str, torch.Tensor]) -> None:
        """Refuse to write a NaN or inf: the checkpoint already there stays the last good one."""
        for name, tensor in tensors.items():
            if tensor.is_floating_point() and not bool(torch.isfinite(tensor).all()):
                kept = "; the last good checkpoint is kept" if self.exists() else ""
                raise UserError(f"checkpoint {self.path} not written: {name} holds NaN or inf "
                                f"(training diverged){kept}")

    def restore(
        self, policy: torch.nn.Module, optimizer: Optimizer, sampler: torch.Generator
    ) -> Resumed:
        """Load weights, optimizer state and every RNG from `path`; return the loop's state."""
        tensors, meta = self._read("not resuming")
        check_tensors(policy, section(tensors, "model/"), Path(self.path))
        check_optimizer_tensors(policy, section(tensors, "optim/"), Path(self.path))
        try:
            policy.load_state_dict(section(tensors, "model/"), strict=True)
            _load_optimizer(optimizer, section(tensors, "optim/"), meta["param_groups"])
            torch.set_rng_state(tensors["rng/torch"])
            sampler.set_state(tensors["rng/sampler"])
            _set_numpy_state(meta["rng"]["numpy"])
            version, internal, gauss_next = meta["rng"]["python"]
            random.setstate((version, tuple(internal), gauss_next))
            loop, extra = dict(meta["loop"]), dict(meta["extra"])
        except (RuntimeError, ValueError, KeyError, TypeError, IndexError, OverflowError) as err:
            reason = one_line(err)
            raise UserError(f"checkpoint {self.path} does not fit this run: {reason}") from None
        self.extra.update(extra)
        return Resumed(loop=loop, tensors=section(tensors, "loop/"))


def read_loop_state(path: Path) -> dict[str, Any]:
    """The training loop's JSON state in a checkpoint (counts, the data source's state), read
    without loading its tensors: what a run in progress has done so far."""
    loop = _read_meta(Path(path)).get("loop")
    if not isinstance(loop, dict):
        raise UserError(f"checkpoint {path} has no loop state")
    return loop


def _optimizer_state(optimizer: Optimizer) -> tuple[dict[str, torch.Tensor], list]:
    state = optimizer.state_dict()
    tensors = {
        f"optim/{index}/{key}": value if torch.is_tensor(value) else torch.tensor(value)
        for index, entries in state["state"].items()
        for key, value in entries.items()
    }
    groups = [{k: list(v) if isinstance(v, tuple) else v for k, v in g.items()} for g in state["param_groups"]]
    return tensors, groups


def check_optimizer_tensors(
    policy: torch.nn.Module, tensors: dict[str, torch.Tensor], source: Path
) -> None:
    """Refuse, in one UserError naming the tensor, optimizer state (the `optim/` section) that
    would make the next step's weights NaN or inf or that `load_state_dict` would cast in
    silence: a non-finite value, Adam's moments of another dtype than the policy's weights, or a
    step count below 1 (bias correction divides by 1 - beta^step)."""
    dtypes = {p.dtype for p in policy.parameters()}
    for name, tensor in tensors.items():
        key, where = name.rsplit("/", 1)[-1], f"optim/{name}"
        if tensor.is_floating_point() and not bool(torch.isfinite(tensor).all()):
            raise UserError(f"optimizer state in {source} is damaged: {where} holds NaN or inf")
        if key.startswith("exp_avg") and len(dtypes) == 1 and tensor.dtype not in dtypes:
            raise UserError(f"optimizer state in {source} does not fit this model: {where} is "
                            f"{tensor.dtype}, the model's weights are {next(iter(dtypes))}")
        if key == "step" and not bool((tensor >= 1).all()):
            raise UserError(f"optimizer state in {source} is damaged: {where} is below 1")


def _load_optimizer(
    optimizer: Optimizer, tensors: dict[str, torch.Tensor], groups: list
) -> None:
    """`tensors`: the `optim/` section, keyed `<i>/<key>`."""
    state: dict[int, dict[str, torch.Tensor]] = {}
    for name, value in tensors.items():
        index, key = name.split("/", 1)
        state.setdefault(int(index), {})[key] = value
    groups = [{k: tuple(v) if k == "betas" else v for k, v in g.items()} for g in groups]
    optimizer.load_state_dict({"state": state, "param_groups": groups})


def _python_state() -> list[Any]:
    version, internal, gauss_next = random.getstate()
    return [version, list(internal), gauss_next]


def _numpy_state() -> dict[str, Any]:
    name, key, pos, has_gauss, cached = np.random.get_state()
    return {"name": name, "key": key.tolist(), "pos": int(pos), "has_gauss": int(has_gauss),
            "cached": float(cached)}


def _set_numpy_state(s: dict[str, Any]) -> None:
    key = np.array(s["key"], dtype=np.uint32)
    np.random.set_state((s["name"], key, s["pos"], s["has_gauss"], s["cached"]))


def section(tensors: dict[str, torch.Tensor], prefix: str) -> dict[str, torch.Tensor]:
    """The tensors named `prefix...`, with the prefix removed."""
    return {k[len(prefix):]: v for k, v in tensors.items() if k.startswith(prefix)}


def _check_format(path: Path, meta: dict[str, Any]) -> None:
    if meta.get("format") != FORMAT:
        raise UserError(f"{path}: not an {FORMAT} file (format {meta.get('format')!r})")


def _read_meta(path: Path) -> dict[str, Any]:
    if os.path.lexists(path):  # a symbolic link to a file elsewhere is refused, not followed
        check_regular(path)
    meta = read_metadata(path, what="checkpoint")
    _check_format(path, meta)
    return meta
