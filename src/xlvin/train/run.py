"""One training run from a typed config: build the agent, pre-train what the paper pre-trains,
train with PPO, save everything to a run directory; and load a run back for evaluation."""

import dataclasses
import hashlib
import json
import math
import os
import time
import typing
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import gymnasium as gym
import numpy as np
import torch
from torch import nn

from xlvin.config import from_dict, names, option, to_dict
from xlvin.envs import ensure_registered
from xlvin.envs.maze import is_maze_env
from xlvin.errors import UserError, one_line
from xlvin.io.checkpoint import CHECKPOINT, TRANSE_CHECKPOINT, Checkpointer
from xlvin.io.executor_file import executor_architecture, load_executor, read_executor_meta
from xlvin.io.run_dir import (
    MODEL,
    SUMMARY,
    MetricsLogger,
    check_new_run_dir,
    claim_run_dir,
    create_run_dir,
    open_run_dir,
    require_run_dir,
    write_json,
)
from xlvin.io.weights import load_state, load_weights, save_weights
from xlvin.nn.agent import PPOAgent, XLVINAgent
from xlvin.nn.atreec import ATreeCAgent
from xlvin.nn.encoders import MazeCNN, MLPEncoder, NatureCNN
from xlvin.nn.executor import AGGREGATIONS, MESSAGES, MessagePassing
from xlvin.nn.gvin import GVINAgent
from xlvin.nn.policy import ActorCritic, TransitionBatch
from xlvin.nn.transe import NEGATIVES
from xlvin.nn.transition import TransitionModel
from xlvin.nn.vin import VINAgent
from xlvin.process import seed_everything, set_threads
from xlvin.train.curriculum import Curriculum, CurriculumConfig
from xlvin.train.evaluation import evaluate_policy
from xlvin.train.loop import OnlineData, train
from xlvin.train.ppo import PPOConfig, TrainingDiverged
from xlvin.train.pretrain_executor import DEFAULT_EXECUTORS, default_executor
from xlvin.train.pretrain_transe import TransEConfig, pretrain_transe
from xlvin.train.protocols import LowData, LowDataConfig
from xlvin.train.random_data import random_transitions

#: The maze baselines that plan on the maze's own grid (VIN and its readouts, GVIN): maze envs only.
MAZE_PLANNERS = {"vin": "slice", "vin_mean": "mean", "vin_max": "max", "gvin": None}
AGENTS = ("xlvin", "ppo", "atreec", *MAZE_PLANNERS)
PROTOCOLS = ("online", "low_data", "curriculum")
PAPER_HIDDEN = {"CartPole": 64, "Acrobot": 32, "MountainCar": 16}
#: The paper's maze encoder width (its convolutions' channels and MLP hidden layer; --hidden).
MAZE_CHANNELS = 128
INITS = ("orthogonal", "pytorch")
#: The smallest image side the Nature CNN's convolutions accept.
MIN_IMAGE_SIZE = 36
#: Training seeds: [0, MAX_SEED] (NumPy's legacy global seeding takes 32 bits).
MAX_SEED = 2**32 - 1


@dataclass
class TrainConfig:
    """What to train: environment, agent and the XLVIN architecture (paper section 4.1)."""

    env: str = option(
        "CartPole-v1", "gymnasium environment id (discrete actions; flat observations get the MLP "
        "encoder, image observations [C, H, W] the Nature CNN)"
    )
    agent: str = option("xlvin", "agent to train", choices=AGENTS)
    seed: int = option(0, "training seed: torch, numpy and environment seeds derive from it")
    hidden: int = option(
        0, "hidden width F of encoder and transition; 0 = paper preset (CartPole 64, Acrobot 32, "
        "MountainCar 16, other 64)"
    )
    embedding_dim: int = option(
        0, "latent embedding size k; 0 = preset: 50 for flat observations (paper), 512 for "
        "images (the Nature CNN's features)"
    )
    depth: int = option(2, "tree depth and executor steps K (paper: 2 on classic control)")
    prune: int = option(
        0, "ours, not the paper's: below depth 1 expand only the N actions a rollout policy "
        "(distilled from the agent's) ranks highest; 0: the full tree"
    )
    executor: str = option(
        "random", "executor: 'random' (XLVIN-R), 'cartpole' (XLVIN-CP), 'maze' (the paper's maze "
        "executor: H = 10, LayerNorm always on), 'untrained' (XLVIN-R's before pre-training: an "
        "ablation), 'authors-random' (the XLVIN-R executor of the authors' later code) or a "
        ".safetensors file"
    )
    transe_weight: float = option(1e-3, "weight of the TransE loss added to PPO (paper: 0.001)")
    zero_chi: bool = option(
        False, "XLVIN ablation: the heads read zeros in place of the executor's chi_s (no "
        "planning; the transition is trained by the TransE term alone)"
    )
    transe_negatives: str = option(
        "states", "negatives of the TransE loss, in pre-training and in the term added to PPO: "
        "a permutation of the batch's states (ours) or its next states drawn with replacement "
        "(next_states: the authors' code)", choices=NEGATIVES,
    )
    executor_layer_norm: bool = option(
        False, "default executors ('random', 'cartpole'): LayerNorm after every message-passing "
        "step (the authors' code: on)"
    )
    executor_messages: str = option(
        "relu", "default executors: messages Linear then ReLU, or linear (the authors' code)",
        choices=MESSAGES,
    )
    executor_aggregation: str = option(
        "", "XLVIN: the aggregation the agent runs its executor with; empty: the one it was "
        "pre-trained with (the authors' code pre-trains with sum and runs with max)",
        choices=("", *AGGREGATIONS),
    )
    executor_projections: bool = option(
        False, "XLVIN: trainable Linear layers before (k -> H) and after (H -> H) the executor "
        "(the authors' code)"
    )
    ppo_transe: bool = option(
        False, "PPO baseline: add a transition model trained only by the TransE term during PPO "
        "(the authors' code); it is never used by the policy"
    )
    init: str = option(
        "orthogonal", "initialisation of encoder and heads: orthogonal (the PPO convention) or "
        "pytorch (PyTorch's defaults: the authors' code)", choices=INITS,
    )
    pretrain_transe: bool = option(True, "pre-train encoder and transition with TransE first")
    checkpoint_every: int = option(
        10, "save DIR/checkpoint.safetensors every N PPO updates (0: never); `--resume` continues from it"
    )
    protocol: str = option(
        "online", "online PPO for ppo.total_steps steps, the paper's low-data protocol "
        "(low_data options) or the continual maze (curriculum options; maze envs)",
        choices=PROTOCOLS,
    )
    device: str = option(
        "cpu", "torch device that acts and learns: cpu, or cuda / cuda:N (a GPU; the NumPy "
        "accelerators of --accelerate apply on cpu only)"
    )


@dataclass
class RunConfig:
    """Everything a run needs; written to DIR/config.json."""

    train: TrainConfig = field(default_factory=TrainConfig)
    ppo: PPOConfig = field(default_factory=PPOConfig)
    transe: TransEConfig = field(default_factory=TransEConfig)
    low_data: LowDataConfig = field(default_factory=LowDataConfig)
    curriculum: CurriculumConfig = field(default_factory=CurriculumConfig)

    def to_json(self) -> dict[str, Any]:
        return {f.name: to_dict(getattr(self, f.name)) for f in dataclasses.fields(self)}

    @classmethod
    def from_json(cls, data: Any, source: str) -> "RunConfig":
        """The config of a JSON object (a config file, a run's config.json or a weights header);
        anything else, and any field that does not check, is one UserError."""
        if not isinstance(data, dict):
            raise UserError(
                f"{source}: the config must be a JSON object, got {type(data).__name__}"
            )
        sections = typing.get_type_hints(cls)  # section name -> its config dataclass
        unknown = sorted(set(data) - set(sections))
        if unknown:
            raise UserError(f"{source}: unknown section(s) {names(unknown)}")
        return cls(**{name: from_dict(tp, data.get(name, {}), source) for name, tp in sections.items()})


def validate(cfg: TrainConfig) -> None:
    """Reject bad settings with one clear line."""
    if cfg.agent not in AGENTS:
        raise UserError(f"unknown agent {cfg.agent!r}; choose one of {', '.join(AGENTS)}")
    if not 0 <= cfg.seed <= MAX_SEED:
        raise UserError(f"--seed must be in [0, {MAX_SEED}], got {cfg.seed}")
    if cfg.depth < 0:
        raise UserError(f"--depth must be >= 0, got {cfg.depth}")
    if cfg.prune < 0 or (cfg.prune and cfg.agent != "xlvin"):
        raise UserError(f"--prune must be >= 0 and applies to --agent xlvin only, got {cfg.prune}")
    if cfg.agent in MAZE_PLANNERS and not is_maze_env(cfg.env):
        raise UserError(f"--agent {cfg.agent} plans on a maze's grid; it needs a maze env, not {cfg.env}")
    if cfg.agent == "atreec" and cfg.depth < 1:
        raise UserError("--agent atreec needs --depth >= 1 (it backs values up a tree)")
    if cfg.embedding_dim < 0 or cfg.hidden < 0:
        raise UserError("--embedding-dim and --hidden must be >= 0 (0: the preset)")
    if cfg.transe_weight < 0:
        raise UserError(f"--transe-weight must be >= 0, got {cfg.transe_weight}")
    if cfg.checkpoint_every < 0:
        raise UserError(f"--checkpoint-every must be >= 0, got {cfg.checkpoint_every}")
    check_device(cfg.device)


def check_device(device: str) -> None:
    """Refuse a --device that is neither cpu nor an available CUDA GPU (cuda, cuda:N)."""
    kind, _, index = device.partition(":")
    if device == "cpu":
        return
    if kind != "cuda" or (index and not index.isdigit()):
        raise UserError(f"--device must be cpu, cuda or cuda:N, got {device!r}")
    count = torch.cuda.device_count()
    if count == 0 or int(index or 0) >= count:
        raise UserError(f"--device {device}: this machine has {count} CUDA GPU(s)")


#: Floats kept per latent tree node for the backward pass, per unit of embedding size k and of
#: hidden width F (the node, the transition MLP's activations, K executor steps' messages):
#: a generous round estimate used only to refuse trees that cannot fit in memory.
FLOATS_PER_NODE = (8, 4)


def machine_memory() -> int:
    """Bytes of physical memory of this machine."""
    return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")


def tree_nodes(num_actions: int, depth: int, limit: int) -> int | None:
    """Latent states of a tree of depth `depth` over `num_actions` actions (1 + A + ... + A^K),
    or None when there are more than `limit` (counted without building huge numbers)."""
    if num_actions == 1:
        return depth + 1 if depth < limit else None
    nodes, level = 0, 1
    for _ in range(depth + 1):
        nodes += level
        if nodes > limit:
            return None
        level *= num_actions
    return nodes


def check_tree_fits(cfg: RunConfig, obs_shape: tuple[int, ...], num_actions: int) -> None:
    """Refuse a depth K whose tree could not fit in this machine's memory, saying what it needs."""
    t = cfg.train
    if t.prune > num_actions:
        raise UserError(f"--prune {t.prune}: the environment has only {num_actions} actions")
    if t.agent not in ("xlvin", "atreec") or t.depth == 0:
        return
    batch = max(1, cfg.ppo.batch_size // cfg.ppo.num_minibatches)
    k = embedding_width(t, obs_shape)
    node_bytes = (FLOATS_PER_NODE[0] * k + FLOATS_PER_NODE[1] * hidden_width(t)) * 4 * batch
    total = machine_memory()
    nodes = tree_nodes(num_actions, t.depth, total // node_bytes)
    if nodes is None:
        raise UserError(
            f"--depth {t.depth} with {num_actions} actions builds more than "
            f"{total // node_bytes:,} latent states per observation, too many for a minibatch of "
            f"{batch} in this machine's {total / 2**30:,.0f} GiB"
        )


def check_model_fits(cfg: RunConfig, obs_shape: tuple[int, ...], num_actions: int) -> None:
    """Refuse widths and env counts whose network or rollout could not fit in this machine's
    memory: a generous estimate of the weights (x4: gradients and Adam's two moments) and of an
    online rollout's observations."""
    k, f = embedding_width(cfg.train, obs_shape), hidden_width(cfg.train)
    flat = math.prod(obs_shape)
    weights = flat * max(f, k) + (num_actions + 4) * (f + k) ** 2
    rollout = cfg.ppo.batch_size * flat * 2
    need = (4 * weights + rollout) * 4
    total = machine_memory()
    if need > total:
        raise UserError(
            f"--hidden {f}, --embedding-dim {k} and --num-envs x --num-steps "
            f"{cfg.ppo.batch_size} need about {need / 2**30:,.0f} GiB; this machine has "
            f"{total / 2**30:,.0f} GiB"
        )


def check_run(cfg: RunConfig) -> tuple[tuple[int, ...], int]:
    """Everything about a run's config that can be checked without training it (values, the
    environment, memory); return the env's (observation shape, number of actions)."""
    validate(cfg.train)
    if cfg.train.protocol == "curriculum":
        check_curriculum(cfg)
    obs_shape, num_actions = env_spaces(cfg.train.env)
    check_model_fits(cfg, obs_shape, num_actions)
    check_tree_fits(cfg, obs_shape, num_actions)
    return obs_shape, num_actions


def check_curriculum(cfg: RunConfig) -> None:
    """The continual maze needs a maze env and a constant learning rate (it has no known end),
    and mazes with levels in its range."""
    if not is_maze_env(cfg.train.env):
        raise UserError(f"--protocol curriculum runs on the maze envs, not {cfg.train.env}")
    if cfg.ppo.anneal_lr:
        raise UserError("--protocol curriculum has no known end to anneal to: use --anneal-lr false")
    cfg.curriculum.levels()


def env_spaces(env_id: str) -> tuple[tuple[int, ...], int]:
    """(observation shape, number of actions) of a gymnasium env, checked for support: discrete
    actions; Box observations, flat (any shape of up to 2 axes, flattened) or images [C, H, W]
    large enough for the Nature CNN. Only ids in gymnasium's registry are made: an id naming a
    module to import (`module:Env`) is refused, so a config file never runs code."""
    ensure_registered(env_id)
    if env_id not in gym.registry:
        raise UserError(
            f"unknown environment {env_id!r}: not in gymnasium's registry (ids that name a module "
            "to import, module:Env, are refused; register the environment first)"
        )
    try:
        env = gym.make(env_id)
    except gym.error.Error as err:
        raise UserError(f"unknown environment {env_id!r}: {one_line(err)}") from None
    obs_space, action_space = env.observation_space, env.action_space
    env.close()
    if not isinstance(action_space, gym.spaces.Discrete):
        raise UserError(f"{env_id} has {type(action_space).__name__} actions; XLVIN needs Discrete")
    if not isinstance(obs_space, gym.spaces.Box):
        raise UserError(f"{env_id} has {type(obs_space).__name__} observations; need a Box")
    shape = tuple(int(n) for n in obs_space.shape)
    if len(shape) > 3:
        raise UserError(f"{env_id} has observations of shape {shape}; need flat or [C, H, W]")
    if obs_space.dtype == np.uint8 and len(shape) >= 2 and (
        len(shape) == 2 or shape[2] < shape[0]
    ):
        ale = env_id.startswith("ALE/")
        hint = "; xlvin/<Game>-v5 is ALE preprocessed to [4, 84, 84]" if ale else ""
        raise UserError(
            f"{env_id} has images of shape {shape}; the Nature CNN needs them channels first, "
            f"[C, H, W] (the MLP encoder is for flat observations){hint}"
        )
    if is_image(shape) and min(shape[1:]) < MIN_IMAGE_SIZE and not is_maze_env(env_id):
        raise UserError(
            f"{env_id} has images of {shape[1]}x{shape[2]}; the Nature CNN needs at least "
            f"{MIN_IMAGE_SIZE}x{MIN_IMAGE_SIZE}"
        )
    return shape, int(action_space.n)


def is_image(obs_shape: tuple[int, ...]) -> bool:
    """Image observations [C, H, W] (the CNN encoder), as opposed to flat ones (the MLP)."""
    return len(obs_shape) == 3


def embedding_width(cfg: TrainConfig, obs_shape: tuple[int, ...]) -> int:
    """k: the configured size, or the preset (50 for flat observations, 512 for images, 10 for
    mazes: the paper's maze encoder)."""
    if cfg.embedding_dim:
        return cfg.embedding_dim
    if is_maze_env(cfg.env):
        return 10
    return 512 if is_image(obs_shape) else 50


def hidden_width(cfg: TrainConfig) -> int:
    """F: the configured width, or the paper's per-environment preset."""
    if cfg.hidden:
        return cfg.hidden
    if is_maze_env(cfg.env):
        return MAZE_CHANNELS
    return next((f for name, f in PAPER_HIDDEN.items() if cfg.env.startswith(name)), 64)


def cache_dir() -> Path:
    """Where default executors are cached: $XLVIN_CACHE or ~/.cache/xlvin."""
    return Path(os.environ.get("XLVIN_CACHE", Path.home() / ".cache" / "xlvin"))


def executor_file(spec: str, cfg: TrainConfig | None = None, progress: bool = False) -> Path:
    """Resolve --executor to a file, producing a default executor (the variant `cfg` asks for)
    on first use."""
    cfg = cfg or TrainConfig()
    if spec in DEFAULT_EXECUTORS:
        return default_executor(
            spec, cache_dir() / "executors", progress=progress,
            layer_norm=cfg.executor_layer_norm or None, messages=cfg.executor_messages,
        )
    path = Path(spec)
    if not path.is_file():
        raise UserError(
            f"--executor: {spec!r} is neither {', '.join(map(repr, DEFAULT_EXECUTORS))} nor an "
            "existing file"
        )
    return path


def build_encoder(cfg: TrainConfig, obs_shape: tuple[int, ...]) -> nn.Module:
    """z: the maze CNN for mazes, the Nature CNN for other image observations [C, H, W], else
    the three-layer MLP."""
    k = embedding_width(cfg, obs_shape)
    if is_maze_env(cfg.env):
        return MazeCNN(obs_shape[0], hidden_width(cfg), k)
    if is_image(obs_shape):
        return NatureCNN(obs_shape[0], k, size=obs_shape[1])
    return MLPEncoder(math.prod(obs_shape), hidden_width(cfg), k)


def transe_pair(t: TrainConfig, obs_shape: tuple[int, ...], num_actions: int) -> nn.ModuleDict:
    """A fresh encoder and transition model of `t`'s architecture, as TransE files hold them."""
    return nn.ModuleDict({
        "encoder": build_encoder(t, obs_shape),
        "transition": TransitionModel(embedding_width(t, obs_shape), num_actions, hidden_width(t)),
    })


def transe_env_kwargs(cfg: RunConfig) -> dict[str, Any]:
    """The env options of the TransE pre-training data: a curriculum's training mazes (every
    level), nothing for the other protocols."""
    return cfg.curriculum.train_env_kwargs() if cfg.train.protocol == "curriculum" else {}


def shared_transe_file(
    cfg: RunConfig, obs_shape: tuple[int, ...], num_actions: int, progress: bool
) -> Path:
    """The TransE pre-training every run of this environment and architecture starts from
    (`TransEConfig.shared`): an encoder and transition model built from seed 0, trained on
    `cfg.transe.episodes` random-policy episodes (seeds 10,000 on), cached under
    $XLVIN_CACHE/transe by a hash of everything that determines it. The training (not the data
    collection) is checkpointed after every epoch beside the file until the file is written."""
    t = cfg.train
    env_kwargs = transe_env_kwargs(cfg)
    key = {
        "format": "xlvin-transe/1", "env": t.env, "obs_shape": list(obs_shape),
        "actions": num_actions, "hidden": hidden_width(t), "k": embedding_width(t, obs_shape),
        "init": t.init, "transe": to_dict(cfg.transe),
        **({"env_kwargs": env_kwargs} if env_kwargs else {}),
        # the default is left out, so files made before the option existed keep their names
        **({"negatives": t.transe_negatives} if t.transe_negatives != "states" else {}),
    }
    digest = hashlib.sha256(json.dumps(key, sort_keys=True).encode()).hexdigest()[:12]
    path = cache_dir() / "transe" / f"transe-{t.env.replace('/', '_')}-{digest}.safetensors"
    if path.exists():
        return path
    seed_everything(0)
    pair = transe_pair(t, obs_shape, num_actions)
    if t.init == "pytorch":
        pytorch_init(pair)
    data = random_transitions(t.env, cfg.transe.episodes, seed=10_000,
                              max_transitions=cfg.transe.max_transitions, env_kwargs=env_kwargs)
    path.parent.mkdir(parents=True, exist_ok=True)
    # Deterministic: processes producing the same file at once may share its checkpoint.
    epochs = Checkpointer(path.with_name(path.stem + ".checkpoint.safetensors"), 1)
    stats = pretrain_transe(pair["encoder"], pair["transition"], data, cfg.transe, seed=0,
                            progress=progress, accelerate=cfg.ppo.accelerate, checkpoint=epochs,
                            negatives=t.transe_negatives)
    save_weights(path, pair, {"key": key, "transe": stats, "transitions": len(data.obs)})
    Path(epochs.path).unlink(missing_ok=True)
    return path


def pytorch_init(module: nn.Module, skip: str = "processor") -> None:
    """PyTorch's default initialisation for every Linear and Conv2d of `module` outside `skip`
    (the frozen, pre-trained executor)."""
    for name, layer in module.named_modules():
        if isinstance(layer, (nn.Linear, nn.Conv2d)) and not name.startswith(skip):
            layer.reset_parameters()


def build_agent(
    cfg: TrainConfig, obs_shape: tuple[int, ...], num_actions: int,
    processor: MessagePassing | None,
) -> ActorCritic:
    """The policy network for `cfg` and the env's observation shape; XLVIN needs the executor's
    processor (frozen inside)."""
    if cfg.agent in MAZE_PLANNERS:  # no encoder: they plan on the maze itself
        readout = MAZE_PLANNERS[cfg.agent]
        planner = GVINAgent(num_actions) if readout is None else VINAgent(num_actions, readout)
        if cfg.init == "pytorch":
            pytorch_init(planner)
        return planner
    encoder = build_encoder(cfg, obs_shape)
    k = embedding_width(cfg, obs_shape)
    agent: ActorCritic
    if cfg.agent == "ppo":
        transition = TransitionModel(k, num_actions, hidden_width(cfg)) if cfg.ppo_transe else None
        agent = PPOAgent(encoder, k, num_actions, transition, cfg.transe_weight,
                         cfg.transe_negatives)
    elif cfg.agent == "atreec":
        agent = ATreeCAgent(encoder, k, num_actions, depth=cfg.depth)
    else:
        assert processor is not None
        if cfg.executor_aggregation:  # run it otherwise than it was pre-trained
            processor.aggregation = cfg.executor_aggregation
        agent = XLVINAgent(
            encoder,
            k,
            num_actions,
            TransitionModel(k, num_actions, hidden_width(cfg)),
            processor,
            depth=cfg.depth,
            transe_weight=cfg.transe_weight,
            projections=cfg.executor_projections,
            prune=cfg.prune,
            transe_negatives=cfg.transe_negatives,
            zero_chi=cfg.zero_chi,
        )
    if cfg.init == "pytorch":
        pytorch_init(agent)
    return agent


def train_run(
    cfg: RunConfig, out: Path, progress: bool = True, resume: bool = False,
    deadline: float | None = None,
) -> tuple[ActorCritic, dict[str, Any]]:
    """Train one agent and write the run directory `out`; return the agent and the summary.

    Data counts in the summary: `transe_transitions` (random-policy steps for TransE
    pre-training, 0 in the strict setting) and, for the low-data protocol, the exact episodes and
    transitions PPO learned from.

    resume=True continues the unfinished run in `out` (started with the same `cfg`) from its
    checkpoint, or from the start when it was stopped before its first checkpoint; the finished
    run is then identical to an uninterrupted one (same weights and metrics, except wall-clock
    figures).

    `deadline` (a `time.time()` value, see `xlvin.train.loop.train`): training stops at the first
    update boundary after it, with a checkpoint; the run stays unfinished (no model or summary
    file, `summary["stopped_at_deadline"]` True) and `resume=True` continues it exactly.

    Everything is checked before `out` is created or changed; `out` is then claimed
    (`claim_run_dir`) for the whole run, so two processes never train into one directory.
    """
    config = cfg.to_json()
    obs_shape, num_actions = check_run(cfg)
    if resume:
        open_run_dir(out, config)
    else:
        check_new_run_dir(out)
    t = cfg.train
    processor, executor_meta = None, None
    if t.agent == "xlvin":
        processor, executor_meta = load_executor_processor(executor_file(t.executor, t, progress))
    set_threads(cfg.ppo.torch_threads)
    strict = t.protocol == "low_data" and cfg.low_data.strict_transe
    wants_transe = t.agent == "xlvin" and t.pretrain_transe
    shared = shared_transe_file(cfg, obs_shape, num_actions, progress) if (
        wants_transe and cfg.transe.shared and not strict) else None
    with claim_run_dir(out) as run_dir:
        if resume:
            open_run_dir(run_dir, config)
        else:
            create_run_dir(run_dir, config)
        seed_everything(t.seed)  # the initial weights; the loop seeds training itself
        agent = build_agent(t, obs_shape, num_actions, processor).to(t.device)
        summary = _train_claimed(cfg, run_dir, agent, executor_meta, shared, progress, resume,
                                 deadline)
    return agent, summary


def _train_claimed(
    cfg: RunConfig, run_dir: Path, agent: ActorCritic, executor_meta: dict[str, Any] | None,
    shared: Path | None, progress: bool, resume: bool, deadline: float | None,
) -> dict[str, Any]:
    """`train_run` once its run directory is claimed: pre-train, train, save; the summary."""
    t = cfg.train
    strict = t.protocol == "low_data" and cfg.low_data.strict_transe
    wants_transe = t.agent == "xlvin" and t.pretrain_transe
    start = time.perf_counter()
    summary: dict[str, Any] = {"executor": executor_meta, "transe_transitions": 0}
    checkpoint = Checkpointer(run_dir / CHECKPOINT, t.checkpoint_every, extra=summary,
                              run=cfg.to_json())
    resuming = resume and checkpoint.exists()
    rewind_to = checkpoint.log_step() if resume else None

    def pretrain(data: TransitionBatch, epochs: Checkpointer | None = None) -> None:
        assert isinstance(agent, XLVINAgent)
        # Strict pre-training runs inside the PPO loop, whose flat Adam already holds these
        # parameters: a second flat Adam would rebind them away from it, so torch's Adam here.
        summary["transe"] = pretrain_transe(
            agent.encoder, agent.transition, data, cfg.transe, seed=t.seed, progress=progress,
            accelerate=cfg.ppo.accelerate and not strict, checkpoint=epochs,
            negatives=t.transe_negatives,
        )
        summary["transe_transitions"] = 0 if strict else len(data.obs)

    if shared is not None and not resuming:
        tensors, meta = load_weights(shared, what="TransE weights")
        load_state(nn.ModuleDict({"encoder": agent.encoder, "transition": agent.transition}),
                   tensors, shared)
        summary["transe"], summary["transe_transitions"] = meta["transe"], meta["transitions"]
        summary["transe_shared_file"] = shared.name
    elif wants_transe and not strict and not resuming:
        data = random_transitions(t.env, cfg.transe.episodes, seed=t.seed + 10_000,
                                  max_transitions=cfg.transe.max_transitions,
                                  env_kwargs=transe_env_kwargs(cfg))
        pretrain(data, Checkpointer(run_dir / TRANSE_CHECKPOINT, 1, run=cfg.to_json()))
    summary["pretrain_seconds"] = time.perf_counter() - start
    logger = MetricsLogger(run_dir, rewind_to=rewind_to)
    try:
        if t.protocol == "online":
            result = train(
                agent, OnlineData(t.env, cfg.ppo, t.seed), cfg.ppo, t.seed,
                log=logger, progress=progress, checkpoint=checkpoint, deadline=deadline,
            )
        elif t.protocol == "curriculum":
            curriculum = Curriculum(t.env, cfg.ppo, cfg.curriculum, t.seed,
                                    on_level_passed=level_weights_saver(run_dir, cfg, executor_meta))
            result = train(agent, curriculum, cfg.ppo, t.seed, log=logger, progress=progress,
                           checkpoint=checkpoint, deadline=deadline)
            summary["curriculum"] = curriculum.history
        else:
            low = cfg.low_data
            result = train(
                agent, LowData(t.env, low, t.seed), cfg.ppo, t.seed,
                evaluation=low.evaluation(), refresh_old_policy=low.refresh_old_policy,
                average_last=low.average_last,
                on_first_data=pretrain if wants_transe and strict else None,
                log=logger, progress=progress, checkpoint=checkpoint, deadline=deadline,
            )
        summary["ppo_transitions"] = result.transitions
        summary["ppo_episodes"] = result.episodes
    except TrainingDiverged as err:
        logger.close(after_error=True)
        kept = f"; the last good checkpoint is kept in {checkpoint.path}" if checkpoint.exists() else ""
        raise TrainingDiverged(f"{err}{kept}") from None
    except BaseException:
        logger.close(after_error=True)
        raise
    logger.close()
    summary["ppo"] = dataclasses.asdict(result)
    summary["resumed"] = resuming
    summary["wall_seconds"] = summary["pretrain_seconds"] + result.wall_time_s
    summary["stopped_at_deadline"] = result.stopped_at_deadline
    if result.stopped_at_deadline:  # unfinished: resumable from the checkpoint just saved
        return summary
    save_weights(run_dir / MODEL, agent, {"config": cfg.to_json(), "executor": executor_meta})
    write_json(run_dir / SUMMARY, summary)
    return summary


#: Where a curriculum keeps the policy of each passed level: DIR/levels/level-DD.safetensors.
LEVELS_DIR = "levels"


def level_weights_file(run_dir: Path, level: int) -> Path:
    return run_dir / LEVELS_DIR / f"level-{level:02d}.safetensors"


def level_weights_saver(
    run_dir: Path, cfg: RunConfig, executor_meta: dict[str, Any] | None
) -> Callable[[int, ActorCritic], None]:
    """Save the policy of each passed level beside the run's model (`load_run(dir, level=d)`
    loads it back)."""

    def save(level: int, policy: ActorCritic) -> None:
        path = level_weights_file(run_dir, level)
        path.parent.mkdir(exist_ok=True)
        save_weights(path, policy, {"config": cfg.to_json(), "executor": executor_meta,
                                    "level": level})

    return save


def load_executor_processor(path: Path) -> tuple[MessagePassing, dict[str, Any]]:
    """The pre-trained processor of an executor file and that file's metadata."""
    return load_executor(path).processor, read_executor_meta(path)


def on_cpu(cfg: RunConfig) -> RunConfig:
    """`cfg` with the CPU as its device: the config a policy is rebuilt with here, whatever device
    trained it."""
    return dataclasses.replace(cfg, train=dataclasses.replace(cfg.train, device="cpu"))


def load_run(run_dir: Path, level: int | None = None) -> tuple[ActorCritic, RunConfig]:
    """Rebuild a finished run's policy from DIR/model.safetensors, or a curriculum's policy
    of a passed `level` from its level file (an unfinished run keeps those too: one stopped by a
    time limit). Nothing in the file is trusted: its config is checked as training checks it
    (values, environment, memory), its executor description field by field, and no code it names
    is imported or run. The policy is built on the CPU (the caller moves it), so a run trained on
    a GPU loads on a machine without one."""
    run_dir = require_run_dir(run_dir) if level is None else Path(run_dir)
    source = run_dir / MODEL if level is None else level_weights_file(run_dir, level)
    tensors, meta = load_weights(source)
    cfg = RunConfig.from_json(meta.get("config"), str(source))
    obs_shape, num_actions = check_run(on_cpu(cfg))
    processor = None
    if cfg.train.agent == "xlvin":
        processor = MessagePassing(**executor_architecture(meta.get("executor"), source))
    agent = build_agent(cfg.train, obs_shape, num_actions, processor)
    load_state(agent, tensors, source)
    return agent.eval(), cfg


def evaluate_run(run_dir: Path, episodes: int, seed: int) -> dict[str, Any]:
    """Mean and std return of a saved policy over `episodes` fresh evaluation episodes."""
    agent, cfg = load_run(run_dir)
    set_threads(cfg.ppo.torch_threads)
    return evaluate_policy(
        agent, cfg.train.env, episodes=episodes, seed=seed, accelerate=cfg.ppo.accelerate
    )
