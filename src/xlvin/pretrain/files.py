"""Where the pre-trained files a run starts from come from: the default executors (`--executor
random|cartpole|maze|...`) and the shared TransE pre-trainings (`TransEConfig.shared`).

A file is looked up by the hash of everything that determines it, in this order: the cache
($XLVIN_CACHE or ~/.cache/xlvin), then the files shipped with xlvin (`xlvin.pretrain.shipped`:
the run says in one line that it uses one), and only then pre-trained here, with its progress
shown, and cached."""

import json
import os
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any, Protocol

from torch import nn

from xlvin.errors import FieldError, UserError
from xlvin.io.checkpoint import Checkpointer
from xlvin.io.executor_file import load_executor, read_executor_meta
from xlvin.io.weights import read_metadata, save_weights
from xlvin.kernels import pinned
from xlvin.nn.executor import MessagePassing
from xlvin.nn.policy import TransitionBatch
from xlvin.pretrain import shipped
from xlvin.pretrain.executor import pretrain_and_save
from xlvin.pretrain.executor_config import (
    DEFAULT_EXECUTORS,
    ExecutorConfig,
    default_executor_config,
    executor_key,
)
from xlvin.pretrain.transe import TransEConfig, pretrain_transe
from xlvin.process import seed_everything, torch_threads


class ExecutorVariant(Protocol):
    """The options of a run that pick a default executor's variant (a `TrainConfig`)."""

    executor_layer_norm: bool
    executor_messages: str


def cache_dir() -> Path:
    """Where pre-trained files are cached: $XLVIN_CACHE or ~/.cache/xlvin (an empty
    XLVIN_CACHE counts as unset, as an empty XDG variable does: never the current folder)."""
    return Path(os.environ.get("XLVIN_CACHE") or Path.home() / ".cache" / "xlvin")


def executors_dir() -> Path:
    """Where the default executors are cached (`cached_executor_path`)."""
    return cache_dir() / "executors"


def executor_config(spec: str, variant: ExecutorVariant | None = None) -> ExecutorConfig | None:
    """The config of the default executor --executor `spec` names, in the variant a run asks
    for (`default_executor_config`); None for a file."""
    if spec not in DEFAULT_EXECUTORS:
        return None
    if variant is None:
        return default_executor_config(spec)
    return default_executor_config(spec, layer_norm=variant.executor_layer_norm,
                                   messages=variant.executor_messages)


def executor_file(
    spec: str, variant: ExecutorVariant | None = None, progress: bool = False, position: int = 0
) -> Path:
    """Resolve --executor to a file: a default executor (the variant a run asks for) is
    `cached_executor`'s file, whichever command asks for it."""
    executor = executor_config(spec, variant)
    if executor is not None:
        return cached_executor(executor, executors_dir(), progress=progress, position=position)
    path = Path(spec)
    if not path.is_file():
        raise FieldError("{executor}: {!r} is neither {} nor an existing file", spec,
                         ", ".join(map(repr, DEFAULT_EXECUTORS)))
    return path


def cached_executor_path(cfg: ExecutorConfig, cache_dir: Path) -> Path:
    """Where the executor of `cfg` is cached: a file named by the hash of `executor_key` (its
    config, the file format and the kernel mode, `xlvin.kernels`) and of nothing else, so that
    every command needing equal executors shares one file while changed defaults, variants or
    formats never reuse a stale one. A file of the same hash under an earlier name
    (`executor-<kind>-seed<S>-<hash>`) is that executor too."""
    digest = shipped.config_hash(executor_key(cfg), pinned())
    found = sorted(Path(cache_dir).glob(f"executor-*-{digest}.safetensors"))
    return found[0] if found else Path(cache_dir) / f"executor-{cfg.family}-{digest}.safetensors"


def cached_executor(
    cfg: ExecutorConfig, cache_dir: Path, progress: bool = False, threads: int = 1,
    position: int = 0,
) -> Path:
    """The file of the executor of `cfg`: cached (`cached_executor_path`), else shipped (said
    in one line when `progress`), else pre-trained here on first use with `threads` torch
    threads (one is the fastest for these small graphs on a busy 2-core machine) and cached.
    Made here on the readable path, never the accelerated one: the cache names a file by its
    config alone, and the files behind earlier results (and the shipped ones) were made on
    that path, which gives other bits than the accelerated one."""
    path = cached_executor_path(cfg, cache_dir)
    key = executor_key(cfg)
    if os.path.lexists(path):
        return _standing_for(path, key, read_metadata(path, "executor"), "executor", cached=True)
    found = shipped.find(key)
    if found is not None:
        shipped_file = _announce(found, progress)
        return _standing_for(shipped_file, key, read_metadata(shipped_file, "executor"),
                             "executor", cached=False)
    return make_executor(cfg, path, progress, threads, position, accelerate=False)


def make_executor(
    cfg: ExecutorConfig, path: Path, progress: bool = False, threads: int = 1, position: int = 0,
    accelerate: bool = True,
) -> Path:
    """Pre-train the executor of `cfg` into `path` as the cache holds it (`pretrain_and_save`
    with its default held-out evaluation, on `threads` torch threads, on the accelerated path
    unless not `accelerate`); returns `path`."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with torch_threads(threads):
        pretrain_and_save(cfg, path, progress=progress, position=position, accelerate=accelerate)
    return path


#: The shipped files this process has said it uses (each is said once).
_announced: set[str] = set()


def _announce(entry: dict[str, Any], progress: bool) -> Path:
    """The shipped file of a manifest entry, said in one line when `progress` (once a process)."""
    if progress and entry["file"] not in _announced:
        _announced.add(entry["file"])
        print(f"using the shipped {entry['kind']} {entry['name']!r} ({entry['file']}, "
              f"pre-trained in {entry['kernels']} mode)", file=sys.stderr, flush=True)
    return shipped.path(entry)


def shared_transe_path(key: dict[str, Any], env: str) -> Path:
    """Where the shared TransE pre-training of `key` (everything that determines it) is cached:
    $XLVIN_CACHE/transe, named by the hash of `key` and of the kernel mode."""
    digest = shipped.config_hash(key, pinned())
    return cache_dir() / "transe" / f"transe-{env.replace('/', '_')}-{digest}.safetensors"


def shared_transe_file(
    key: dict[str, Any], env: str, pair: Callable[[], nn.ModuleDict],
    data: Callable[[], TransitionBatch], cfg: TransEConfig, negatives: str, accelerate: bool,
    progress: bool, position: int = 0, out: Path | None = None,
) -> Path:
    """The shared TransE pre-training of `key`: cached (`shared_transe_path`), else shipped
    (said in one line when `progress`), else made here: `pair()` (an encoder and transition
    model) built from seed 0 and trained by `pretrain_transe` (seed 0) on `data()`, then cached.
    The training (not the data collection) is checkpointed after every epoch beside the file
    until the file is written. `progress` shows both (on line `position`). With `out`, it is
    made there, whatever the cache or the shipped files hold."""
    path = out or shared_transe_path(key, env)
    if out is None and os.path.lexists(path):
        return _standing_for(path, key, _transe_key_of(path), "TransE pre-training", cached=True)
    found = None if out else shipped.find(key)
    if found is not None:
        shipped_file = _announce(found, progress)
        return _standing_for(shipped_file, key, _transe_key_of(shipped_file),
                             "TransE pre-training", cached=False)
    seed_everything(0)
    modules = pair()
    transitions = data()
    path.parent.mkdir(parents=True, exist_ok=True)
    # Deterministic: processes producing the same file at once may share its checkpoint.
    epochs = Checkpointer(path.with_name(path.stem + ".checkpoint.safetensors"), 1)
    stats = pretrain_transe(modules["encoder"], modules["transition"], transitions, cfg, seed=0,
                            progress=progress, accelerate=accelerate, checkpoint=epochs,
                            negatives=negatives, position=position)
    stored = {**key, **({"kernels": "reproducible"} if pinned() else {})}
    save_weights(path, modules, {"key": stored, "transe": stats,
                                 "transitions": len(transitions.obs)})
    Path(epochs.path).unlink(missing_ok=True)
    return path


def _transe_key_of(path: Path) -> Any:
    """The key a TransE pre-training's file records it was made from (its kernel mode aside:
    the file's name holds it, and the shipped files serve both modes)."""
    key = read_metadata(path, "TransE pre-training").get("key")
    return {k: v for k, v in key.items() if k != "kernels"} if isinstance(key, dict) else key


def _standing_for(
    path: Path, key: dict[str, Any], recorded: Any, what: str, cached: bool
) -> Path:
    """`path`, once the config its header records holds every field of `key` (what the file was
    asked for: family, seed, epochs, every training setting) with `key`'s value; otherwise one
    UserError naming the first field that differs. A file of another config copied or swapped
    in under this name (the untrained executor over the trained one) is never used."""
    differs = _first_difference(json.loads(json.dumps(key)), recorded)
    if differs is None:
        return path
    remedy = ("remove it: it is made again (or taken from the shipped files) on first use"
              if cached else "reinstall xlvin")
    raise UserError(f"{path} does not hold the {what} it is {'cached' if cached else 'shipped'} "
                    f"as: its header records {differs}; {remedy}")


def _first_difference(expected: Any, recorded: Any, where: str = "config") -> str | None:
    """What `recorded` holds, in words, at the first field of `expected` (in its order, nested
    fields by dotted names) whose value it does not hold; None if it holds every one."""
    if isinstance(expected, dict):
        if not isinstance(recorded, dict):
            return f"{where} as {_short(recorded)}, not an object"
        for name, value in expected.items():
            inner = name if where == "config" else f"{where}.{name}"
            if name not in recorded:
                return f"no {inner} (the config asks {_short(value)})"
            differs = _first_difference(value, recorded[name], inner)
            if differs is not None:
                return differs
        return None
    if recorded != expected or isinstance(recorded, bool) != isinstance(expected, bool):
        return f"{where} {_short(recorded)}, the config asks {_short(expected)}"
    return None


def _short(value: Any) -> str:
    """`value` as JSON, cut to 60 characters."""
    text = json.dumps(value)
    return text if len(text) <= 60 else text[:57] + "..."


def load_executor_processor(path: Path) -> tuple[MessagePassing, dict[str, Any]]:
    """The pre-trained processor of an executor file and that file's metadata."""
    return load_executor(path).processor, read_executor_meta(path)

