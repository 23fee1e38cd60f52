"""Everything about a run's config that can be checked before anything is built: its values, the
environment, and lower bounds of its memory and time against this machine (`check_run`, which
also returns the env's spaces and the derived architecture). Each refusal is one line naming
what to change."""

import json
import math
from typing import Any

import torch

from xlvin.envs.atari import ale_vector_game
from xlvin.envs.maze import is_maze_env
from xlvin.envs.packages import require_gym_packages
from xlvin.envs.spaces import Spaces, env_spaces
from xlvin.envs.wrappers import check_wrapper_specs
from xlvin.errors import FieldError
from xlvin.progress import duration
from xlvin.run.agents import Architecture, agent_spec
from xlvin.run.architecture import (
    action_width,
    architecture,
    machine_memory,
    minibatch_size,
    number,
    tree_node_bytes,
)
from xlvin.run.config import MAX_SEED, RunConfig, TrainConfig
from xlvin.run.protocols import Budget, protocol_of
from xlvin.run.transe import pretrains_transe, transe_transitions


def validate(cfg: TrainConfig) -> None:
    """Reject bad settings with one clear line."""
    spec = agent_spec(cfg.agent)
    if not 0 <= cfg.seed <= MAX_SEED:
        raise FieldError("{seed} must be in [0, {}], got {}", MAX_SEED, cfg.seed)
    if cfg.depth < 0:
        raise FieldError("{depth} must be >= 0, got {}", cfg.depth)
    if cfg.prune < 0 or (cfg.prune and not spec.prune):
        raise FieldError("{prune} must be >= 0 and applies to {agent} xlvin only, got {}",
                         cfg.prune)
    if cfg.action_bins < 0 or cfg.action_bins == 1:
        raise FieldError("{action_bins} must be >= 2 (or 0: the preset), got {}", cfg.action_bins)
    if cfg.expand < 0 or ((cfg.expand or cfg.expansion) and not spec.expands):
        raise FieldError("{expand} must be >= 0 and {expand} and {expansion} apply to {agent} "
                         "xlvin only, got {expand=} with {agent=}", expand=cfg.expand,
                         agent=cfg.agent)
    if cfg.expand and cfg.expansion == "all":
        raise FieldError("{expand=} draws actions for a sampled {expansion} (uniform, "
                         "gaussian, policy), not all", expand=cfg.expand)
    if cfg.prune and cfg.expansion not in ("", "all"):
        raise FieldError("{prune} and {expansion=} both choose the actions a node expands: use "
                         "one", expansion=cfg.expansion)
    if spec.maze_only and not is_maze_env(cfg.env):
        raise FieldError("{agent=} plans on a maze's grid; it needs a maze env, not {}", cfg.env,
                         agent=cfg.agent)
    if cfg.depth < spec.min_depth:
        raise FieldError("{agent=} needs {depth} >= {} (it backs values up a tree)",
                         spec.min_depth, agent=cfg.agent)
    if cfg.embedding_dim < 0 or cfg.hidden < 0:
        raise FieldError("{embedding_dim} and {hidden} must be >= 0 (0: the preset)")
    if cfg.transe_weight < 0:
        raise FieldError("{transe_weight} must be >= 0, got {}", cfg.transe_weight)
    if cfg.transition_loss == "vae" and (not spec.transe or cfg.pretrain_transe is True):
        raise FieldError("{transition_loss} vae applies to {agent} xlvin trained without TransE "
                         "pre-training: leave out {pretrain_transe} true")
    if cfg.checkpoint_every < 0:
        raise FieldError("{checkpoint_every} must be >= 0, got {}", cfg.checkpoint_every)
    try:
        json.dumps(cfg.env_kwargs, allow_nan=False)
    except (TypeError, ValueError):
        raise FieldError("{env_kwargs} values must be JSON values (numbers, strings, "
                         "true/false, null, lists, objects)") from None
    check_wrapper_specs(cfg.env_wrappers)
    check_device(cfg.device)


def check_device(device: str) -> None:
    """Refuse a --device that is neither cpu nor an available CUDA GPU (cuda, cuda:N)."""
    kind, _, index = device.partition(":")
    if device == "cpu":
        return
    if kind != "cuda" or (index and not index.isdigit()):
        raise FieldError("{device} must be cpu, cuda or cuda:N, got {!r}", device)
    count = torch.cuda.device_count()
    if count == 0 or int(index or 0) >= count:
        raise FieldError("{device=}: this machine has {} CUDA GPU(s)", count, device=device)


def check_minibatch(cfg: RunConfig) -> None:
    """Refuse a minibatch larger than the rollout it is cut from (num_envs x num_steps): no
    minibatch would be full, so PPO would never take a step. (A protocol of whole episodes, as
    the low-data one, knows its number of steps only once they are collected.)"""
    ppo = cfg.ppo
    if not protocol_of(cfg).whole_episodes and ppo.minibatch_size > ppo.batch_size:
        raise FieldError(
            "{minibatch_size=} is larger than the rollout, {num_envs=} x {num_steps=} = {} "
            "transitions: no minibatch would be full and PPO would never step; use at most {}",
            ppo.batch_size, ppo.batch_size, minibatch_size=ppo.minibatch_size,
            num_envs=ppo.num_envs, num_steps=ppo.num_steps)


#: A tree whose minibatch is estimated to need more memory than this is said in one line before
#: training (`big_tree_notice`): it fits, but a user should know what it will cost.
BIG_TREE_BYTES = 2**30


#: A part of a message: a `FieldError` template, its values and its fields.
Said = tuple[str, tuple[Any, ...], dict[str, Any]]


def memory_parts(cfg: RunConfig, spaces: Spaces, arch: Architecture) -> list[tuple[Said, int]]:
    """A generous estimate of what a run keeps in memory, in bytes (float32), part by part,
    each named as a message says it: the weights (x4: gradients and Adam's two moments), the
    action layers and their activations over a minibatch (with a sampled expansion, one-hots for
    every tree node), an online rollout's observations and TransE's data."""
    k, f = arch.embedding_dim, arch.hidden
    floats = math.prod(spaces.obs_shape)
    width = action_width(spaces, arch.action_bins)
    layers = 4 if agent_spec(cfg.train.agent).tree else 2  # head, transition, edges, rollout policy
    one_hots = 3 * ((arch.tree_nodes or 1) - 1) if arch.expansion != "all" else 0
    weights = spaces.flat_size * max(f, k) + (spaces.num_actions + 4) * (f + k) ** 2
    binned: Said = (("{action_bins=} x {} dimensions = {:,} action outputs",
                     (spaces.num_actions, width), {"action_bins": arch.action_bins})
                    if arch.action_bins else ("{:,} action outputs", (width,), {}))
    parts: list[tuple[Said, int]] = [
        (("the network ({hidden=}, {embedding_dim=}) on {:,} input floats", (spaces.flat_size,),
          {"hidden": f, "embedding_dim": k}), 16 * weights),
        (binned, 4 * width * (4 * layers * (f + k) + minibatch_size(cfg) * (4 + one_hots))),
        (("{num_envs} x {num_steps=} observations of {:,} floats", (floats,),
          {"num_steps": cfg.ppo.batch_size}), 4 * 2 * cfg.ppo.batch_size * floats),
    ]
    if pretrains_transe(cfg, spaces):  # obs and next obs, and their split copies
        parts.append((("TransE's data of at least {:,} transitions", (transe_transitions(cfg),),
                       {}), 4 * 4 * transe_transitions(cfg) * floats))
    return parts


def check_model_fits(cfg: RunConfig, spaces: Spaces, arch: Architecture) -> None:
    """Refuse widths, action bins, observation sizes and env counts whose network, rollout or
    TransE data could not fit in this machine's memory (`memory_parts`), in one line naming the
    parts that need the most."""
    parts = memory_parts(cfg, spaces, arch)
    need, total = sum(size for _, size in parts), machine_memory()
    if need > total:
        big = [part for part in sorted(parts, key=lambda part: -part[1]) if part[1] >= need / 10]
        template = ", ".join(f"{said[0]} ({{:,.1f}} GiB)" for said, _ in big)
        values = [v for said, size in big for v in (*said[1], size / 2**30)]
        fields = {name: v for said, _ in big for name, v in said[2].items()}
        raise FieldError(f"{template} need about {{:,.0f}} GiB; this machine has {{:,.0f}} GiB",
                         *values, need / 2**30, total / 2**30, **fields)


#: The most action outputs binned Box actions may have, bins x dimensions: the policy's head and
#: the one-hot input of every transition (TransE pre-training's, each tree node's). Far above any
#: useful binning (the preset: 11 bins a dimension), and low enough that those layers stay
#: cheap: 1,000 bins on 6 dimensions (10^18 joint actions) or 10^6 bins on Pendulum ran for hours.
MAX_ACTION_OUTPUTS = 4096


def check_action_bins(spaces: Spaces, arch: Architecture) -> None:
    """Refuse binned Box actions of more than MAX_ACTION_OUTPUTS outputs, in one line giving
    the bins, the dimensions and their joint actions (bins ^ dimensions)."""
    outputs = action_width(spaces, arch.action_bins)
    if arch.action_bins and outputs > MAX_ACTION_OUTPUTS:
        dims = spaces.num_actions
        raise FieldError(
            "{action_bins=} x {} dimensions = {:,} action outputs ({} bins ^ {} dimensions = {} "
            "joint actions): more than the {:,} a run may have; choose fewer bins", dims, outputs,
            arch.action_bins, dims, number(arch.action_bins**dims), MAX_ACTION_OUTPUTS,
            action_bins=arch.action_bins)


#: An optimistic rate of this code on one machine: floating-point operations a second, and the
#: seconds of one env step with nothing else. Estimates from them are lower bounds of a run's time.
OPTIMISTIC_FLOPS, OPTIMISTIC_STEP_SECONDS = 1e11, 1e-6


#: The longest a run may be estimated to take, at least (its lower bound): a year.
MAX_RUN_SECONDS = 365 * 24 * 3600


def forward_flops(spaces: Spaces, arch: Architecture) -> int:
    """A rough count of the floating-point operations of one observation's forward pass: the
    encoder, per latent tree node the transition MLP and the executor's messages (eq. 6-8), and
    the action layers."""
    k, f = arch.embedding_dim, arch.hidden
    encoder = 2 * (spaces.flat_size * f + f * k)
    width = action_width(spaces, arch.action_bins)  # the head; a sampled node's one-hots
    one_hots = 4 * f * width * ((arch.tree_nodes or 1) - 1) if arch.expansion != "all" else 0
    tree = (arch.tree_nodes or 1) * 2 * (3 * k * f + f * f)
    return encoder + tree + 2 * (f + k) * width + one_hots


def estimated_seconds(budget: Budget, spaces: Spaces, arch: Architecture) -> float:
    """A lower bound of a run's training time: every env step of its `budget` acts once (a
    forward pass) and is learnt from `budget.passes` times (forward and backward: 3 forward
    passes), at OPTIMISTIC_FLOPS, plus OPTIMISTIC_STEP_SECONDS per env step."""
    per_step = forward_flops(spaces, arch) * (1 + 3 * budget.passes)
    return budget.steps * (per_step / OPTIMISTIC_FLOPS + OPTIMISTIC_STEP_SECONDS)


def check_budget(cfg: RunConfig, spaces: Spaces, arch: Architecture) -> None:
    """Refuse a run whose time, estimated from below (its protocol's `budget`), exceeds
    MAX_RUN_SECONDS, in one line giving the estimate (`--total-steps 1e29` or
    `--low-data-episodes 1e9` can never finish). A protocol with no known end is not bounded."""
    protocol = protocol_of(cfg)
    if protocol.budget is None:
        return
    budget = protocol.budget(cfg)
    seconds = estimated_seconds(budget, spaces, arch)
    if seconds > MAX_RUN_SECONDS:
        tree = f", {arch.tree_nodes:,} latent states per observation" if arch.tree_nodes > 1 else ""
        raise FieldError(
            budget.asked + " would take at least {:,.0f} days ({:,} FLOPs per forward pass{}, at "
            "{:.0e} FLOP/s), more than the {} days a run may take: choose fewer {} or a smaller "
            "network", *budget.args, seconds / 86400, forward_flops(spaces, arch), tree,
            OPTIMISTIC_FLOPS, MAX_RUN_SECONDS // 86400, budget.fewer, **budget.names)


def transe_flops(spaces: Spaces, arch: Architecture) -> int:
    """A rough count of the floating-point operations TransE pre-training spends on one
    transition: the encoder on s and s' and the transition MLP, forward and backward (x3)."""
    k, f = arch.embedding_dim, arch.hidden
    width = action_width(spaces, arch.action_bins)
    return 3 * (4 * (spaces.flat_size * f + f * k) + 2 * ((k + width) * f + f * f + f * k))


def transe_seconds(cfg: RunConfig, spaces: Spaces, arch: Architecture) -> float:
    """A lower bound of TransE pre-training's time: its steps on the fewest transitions it can
    have (`transe_transitions`, less those held out), at OPTIMISTIC_FLOPS, plus
    OPTIMISTIC_STEP_SECONDS a step."""
    t = cfg.transe
    n = transe_transitions(cfg)
    train = max(1, n - max(1, round(t.holdout * n)))
    steps = t.epochs * max(1, train // t.batch_size)
    per_step = min(train, t.batch_size) * transe_flops(spaces, arch)
    return steps * (per_step / OPTIMISTIC_FLOPS + OPTIMISTIC_STEP_SECONDS)


def check_transe_budget(cfg: RunConfig, spaces: Spaces, arch: Architecture) -> None:
    """Refuse a TransE pre-training whose time, estimated from below, exceeds MAX_RUN_SECONDS,
    in one line giving the estimate (`--transe-epochs 1e12` can never finish)."""
    if not pretrains_transe(cfg, spaces):
        return
    seconds = transe_seconds(cfg, spaces, arch)
    if seconds > MAX_RUN_SECONDS:
        raise FieldError(
            "{transe_epochs=} of TransE pre-training would take at least {:,.0f} days ({:,} "
            "transitions or more, {:,} FLOPs each, at {:.0e} FLOP/s), more than the {} days a run "
            "may take: choose fewer epochs", seconds / 86400, transe_transitions(cfg),
            transe_flops(spaces, arch), OPTIMISTIC_FLOPS, MAX_RUN_SECONDS // 86400,
            transe_epochs=cfg.transe.epochs)


def big_tree_notice(cfg: RunConfig, spaces: Spaces, arch: Architecture) -> str | None:
    """One line for a latent tree that fits in memory but is large (its minibatch estimated at
    BIG_TREE_BYTES or more): its size, that memory, and the run's training time estimated from
    below (`estimated_seconds`); None for any other run. Said before anything is built, so that
    `XLVIN(depth=12).learn(512)` on CartPole does not spend minutes and gigabytes in silence."""
    batch = minibatch_size(cfg)
    need = arch.tree_nodes * tree_node_bytes(arch.embedding_dim, arch.hidden) * batch
    if arch.tree_nodes <= 1 or need < BIG_TREE_BYTES:
        return None
    budget = protocol_of(cfg).budget
    time = ("" if budget is None else ", and at least "
            f"{duration(estimated_seconds(budget(cfg), spaces, arch))} of training (estimated "
            "from below")
    return (f"xlvin: --depth {arch.depth} builds {arch.tree_nodes:,} latent states per "
            f"observation: about {need / 2**30:,.1f} GiB for a minibatch of {batch}{time}; a "
            "smaller --depth or --expand builds fewer" + (")" if budget else ""))


def check_run(cfg: RunConfig, spaces: Spaces | None = None) -> tuple[Spaces, Architecture]:
    """Everything about a run's config that can be checked without training it (values, the
    environment, memory); return the env's spaces and the architecture derived from both.
    `spaces` (a saved run's): the env is then neither made nor needed."""
    validate(cfg.train)
    protocol = protocol_of(cfg)
    check_minibatch(cfg)
    protocol.check(cfg)
    if cfg.ppo.atari_vector == "ale":
        ale_vector_game(cfg.train.env)
        if not protocol.in_env_steps or cfg.train.env_kwargs or cfg.train.env_wrappers:
            raise FieldError("{atari_vector} ale trains online, with no {env_kwargs} or {env_wrappers}")
    if spaces is None:
        require_gym_packages(cfg.train.gym_packages, cfg.train.env)
        spaces = env_spaces(cfg.train.env, cfg.train.env_kwargs, cfg.train.env_wrappers)
    arch = architecture(cfg, spaces)
    check_model_fits(cfg, spaces, arch)
    check_action_bins(spaces, arch)
    check_budget(cfg, spaces, arch)
    protocol.check_memory(cfg, spaces)
    check_transe_budget(cfg, spaces, arch)
    return spaces, arch


def check_target_kl(cfg: RunConfig) -> None:
    """Refuse a target_kl where it would do nothing (a protocol of one update a round: online,
    curriculum): ours skips the remaining updates of a low-data round; SB3's stops an update's
    epochs early, which ours does not. Asked where the option is given (a saved config keeps
    its value)."""
    if cfg.ppo.target_kl > 0 and not protocol_of(cfg).several_updates_a_round:
        raise FieldError("{target_kl=} skips the updates left in a round once one's KL passes "
                         "it ({protocol} low_data); a run of protocol {} makes one update a "
                         "round, and no update stops early as SB3's target_kl does: leave it "
                         "out",
                         cfg.train.protocol, target_kl=cfg.ppo.target_kl, protocol="low_data")
