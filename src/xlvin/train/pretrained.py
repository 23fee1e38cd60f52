"""What a run starts from that is made once and cached under $XLVIN_CACHE (or ~/.cache/xlvin):
the default executors (`--executor random|cartpole|maze`) and the shared TransE pre-training
(`TransEConfig.shared`)."""

import hashlib
import json
import os
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from torch import nn

from xlvin.config import to_dict
from xlvin.errors import UserError
from xlvin.io.checkpoint import Checkpointer
from xlvin.io.executor_file import load_executor, read_executor_meta
from xlvin.io.weights import save_weights
from xlvin.kernels import pinned
from xlvin.nn.executor import MessagePassing
from xlvin.nn.transition import TransitionModel
from xlvin.process import seed_everything
from xlvin.train.agents import Architecture, agent_spec, build_encoder, pytorch_init
from xlvin.train.pretrain_executor import (
    DEFAULT_EXECUTORS,
    ExecutorConfig,
    cached_executor,
    default_executor_config,
)
from xlvin.train.pretrain_transe import pretrain_transe
from xlvin.train.random_data import random_transitions
from xlvin.train.run_config import RunConfig, TrainConfig
from xlvin.train.spaces import Spaces


def cache_dir() -> Path:
    """Where pre-trained files are cached: $XLVIN_CACHE or ~/.cache/xlvin (an empty
    XLVIN_CACHE counts as unset, as an empty XDG variable does: never the current folder)."""
    return Path(os.environ.get("XLVIN_CACHE") or Path.home() / ".cache" / "xlvin")


def executors_dir() -> Path:
    """Where the default executors are cached (`cached_executor_path`)."""
    return cache_dir() / "executors"


def executor_config(spec: str, cfg: TrainConfig) -> ExecutorConfig | None:
    """The config of the default executor --executor `spec` names, in the variant `cfg` asks for
    (`default_executor_config`); None for a file."""
    if spec in DEFAULT_EXECUTORS:
        return default_executor_config(spec, layer_norm=cfg.executor_layer_norm,
                                       messages=cfg.executor_messages)
    return None


def executor_file(
    spec: str, cfg: TrainConfig | None = None, progress: bool = False, position: int = 0
) -> Path:
    """Resolve --executor to a file: a default executor (the variant `cfg` asks for) is the
    cached file of its config, pre-trained on first use, whichever command asks for it."""
    executor = executor_config(spec, cfg or TrainConfig())
    if executor is not None:
        return cached_executor(executor, executors_dir(), progress=progress, position=position)
    path = Path(spec)
    if not path.is_file():
        raise UserError(
            f"--executor: {spec!r} is neither {', '.join(map(repr, DEFAULT_EXECUTORS))} nor an "
            "existing file"
        )
    return path


def prepare_executors(configs: Iterable[TrainConfig]) -> list[Path]:
    """The files of the default executors that runs of `configs` need, each pre-trained once
    here with its progress shown: before the runs' parallel workers, which would otherwise race
    to pre-train it silently (an experiment's or a sweep's shared files)."""
    executors: dict[str, ExecutorConfig] = {}
    for t in configs:
        executor = executor_config(t.executor, t) if agent_spec(t.agent).executor else None
        if executor is not None:
            executors[json.dumps(to_dict(executor), sort_keys=True)] = executor
    return [cached_executor(e, executors_dir(), progress=True) for e in executors.values()]


def transe_pair(arch: Architecture, spaces: Spaces) -> nn.ModuleDict:
    """A fresh encoder and transition model of `arch`, as TransE files hold them."""
    return nn.ModuleDict({
        "encoder": build_encoder(arch, spaces),
        "transition": TransitionModel(arch.embedding_dim, spaces.num_actions, arch.hidden),
    })


def transe_env_kwargs(cfg: RunConfig) -> dict[str, Any]:
    """The env options of the TransE pre-training data: a curriculum's training mazes (every
    level), the run's --env-kwargs for the other protocols."""
    if cfg.train.protocol == "curriculum":
        return cfg.curriculum.train_env_kwargs()
    return cfg.train.env_kwargs


def _transe_key(cfg: RunConfig, spaces: Spaces, arch: Architecture) -> dict[str, Any]:
    """Everything that determines a shared TransE pre-training."""
    t = cfg.train
    env_kwargs = transe_env_kwargs(cfg)
    return {
        "format": "xlvin-transe/1", "env": t.env, "obs_shape": list(spaces.obs_shape),
        "actions": spaces.num_actions, "hidden": arch.hidden, "k": arch.embedding_dim,
        "init": t.init, "transe": to_dict(cfg.transe),
        **({"env_kwargs": env_kwargs} if env_kwargs else {}),
        # the default is left out, so files made before the option existed keep their names
        **({"negatives": t.transe_negatives} if t.transe_negatives != "states" else {}),
        **({"kernels": "reproducible"} if pinned() else {}),  # other kernels, other weights
    }


def shared_transe_path(cfg: RunConfig, spaces: Spaces, arch: Architecture) -> Path:
    """Where the shared TransE pre-training of `cfg` is cached: $XLVIN_CACHE/transe, named by a
    hash of everything that determines it."""
    key = _transe_key(cfg, spaces, arch)
    digest = hashlib.sha256(json.dumps(key, sort_keys=True).encode()).hexdigest()[:12]
    return cache_dir() / "transe" / f"transe-{cfg.train.env.replace('/', '_')}-{digest}.safetensors"


def shared_transe_file(
    cfg: RunConfig, spaces: Spaces, arch: Architecture, progress: bool, position: int = 0
) -> Path:
    """The TransE pre-training every run of this environment and architecture starts from
    (`TransEConfig.shared`): an encoder and transition model built from seed 0, trained on
    `cfg.transe.episodes` random-policy episodes (seeds 10,000 on), cached at
    `shared_transe_path`. The training (not the data collection) is checkpointed after every
    epoch beside the file until the file is written. `progress` shows both (on line
    `position`)."""
    t = cfg.train
    env_kwargs = transe_env_kwargs(cfg)
    path = shared_transe_path(cfg, spaces, arch)
    if path.exists():
        return path
    seed_everything(0)
    pair = transe_pair(arch, spaces)
    if t.init == "pytorch":
        pytorch_init(pair)
    data = random_transitions(t.env, cfg.transe.episodes, seed=10_000,
                              max_transitions=cfg.transe.max_transitions, env_kwargs=env_kwargs,
                              progress=progress, position=position)
    path.parent.mkdir(parents=True, exist_ok=True)
    # Deterministic: processes producing the same file at once may share its checkpoint.
    epochs = Checkpointer(path.with_name(path.stem + ".checkpoint.safetensors"), 1)
    stats = pretrain_transe(pair["encoder"], pair["transition"], data, cfg.transe, seed=0,
                            progress=progress, accelerate=cfg.ppo.accelerate, checkpoint=epochs,
                            negatives=t.transe_negatives, position=position)
    save_weights(path, pair, {"key": _transe_key(cfg, spaces, arch), "transe": stats,
                              "transitions": len(data.obs)})
    Path(epochs.path).unlink(missing_ok=True)
    return path


def load_executor_processor(path: Path) -> tuple[MessagePassing, dict[str, Any]]:
    """The pre-trained processor of an executor file and that file's metadata."""
    return load_executor(path).processor, read_executor_meta(path)
