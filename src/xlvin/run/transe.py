"""The TransE pre-training of a run: whether it has one (on for vector and maze observations
unless set), on how many transitions at least, of which env options, and the key its shared file
is named by (`xlvin.pretrain.files.shared_transe_path`)."""

import dataclasses
from typing import Any

from xlvin.config import to_dict
from xlvin.envs.spaces import Spaces
from xlvin.run.agents import Architecture, agent_spec
from xlvin.run.config import RunConfig
from xlvin.run.protocols import protocol_of


def with_transe_pretraining(cfg: RunConfig, spaces: Spaces) -> RunConfig:
    """`cfg` with `pretrain_transe` decided where it was left unset: on unless the observations
    are images or Dicts or the transition model learns from reconstructions (`transition_loss`
    vae); what a run's config.json then records."""
    if cfg.train.pretrain_transe is not None:
        return cfg
    off = spaces.kind in ("image", "image_hwc", "dict") or cfg.train.transition_loss == "vae"
    return dataclasses.replace(cfg, train=dataclasses.replace(cfg.train, pretrain_transe=not off))


def pretrains_transe(cfg: RunConfig, spaces: Spaces) -> bool:
    """Whether the run pre-trains TransE (the preset of `pretrain_transe` resolved)."""
    return agent_spec(cfg.train.agent).transe and bool(
        with_transe_pretraining(cfg, spaces).train.pretrain_transe)


def transe_transitions(cfg: RunConfig) -> int:
    """The fewest transitions TransE pre-trains on: an episode has at least one step (strict
    low-data pre-training: the first round's episodes)."""
    first = protocol_of(cfg).transe_on_first_data(cfg)
    if first:
        return first
    return min(cfg.transe.episodes, cfg.transe.max_transitions)


def transe_env_kwargs(cfg: RunConfig) -> dict[str, Any]:
    """The env options of the TransE pre-training data: a curriculum's training mazes (every
    level), the run's --env-kwargs for the other protocols."""
    return protocol_of(cfg).transe_env_kwargs(cfg)


def transe_key(cfg: RunConfig, spaces: Spaces, arch: Architecture) -> dict[str, Any]:
    """Everything that determines the shared TransE pre-training of `cfg` but the kernel mode
    (`xlvin.pretrain.files.shared_transe_path` names its file by their hash)."""
    t = cfg.train
    env_kwargs = transe_env_kwargs(cfg)
    return {
        "format": "xlvin-transe/1", "env": t.env, "obs_shape": list(spaces.obs_shape),
        "actions": spaces.num_actions, "hidden": arch.hidden, "k": arch.embedding_dim,
        "init": t.init, "transe": to_dict(cfg.transe),
        **({"env_kwargs": env_kwargs} if env_kwargs else {}),
        **({"env_wrappers": t.env_wrappers} if t.env_wrappers else {}),
        # the default is left out, so files made before the option existed keep their names
        **({"negatives": t.transe_negatives} if t.transe_negatives != "states" else {}),
        **({"action_bins": arch.action_bins} if arch.action_bins else {}),
    }
