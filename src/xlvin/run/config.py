"""A run's typed config and its checks (values, environment, memory), and the architecture
derived from them once: `check_run(cfg)` -> (`Spaces`, `Architecture`), what the agent
registry (`xlvin.run.agents`) builds from."""

import dataclasses
import json
import math
import os
import typing
from dataclasses import dataclass, field
from typing import Any

import torch

from xlvin.config import described, from_dict, names, option, to_dict
from xlvin.envs.atari import ale_vector_game
from xlvin.envs.maze import is_maze_env
from xlvin.envs.packages import require_gym_packages
from xlvin.envs.wrappers import check_wrapper_specs, wrapped_env_id
from xlvin.errors import UserError
from xlvin.nn.encoders import ACTIVATIONS
from xlvin.nn.executor import AGGREGATIONS, MESSAGES, MessagePassing
from xlvin.nn.expansion import EXPANSIONS
from xlvin.nn.policy import ActorCritic
from xlvin.nn.transe import NEGATIVES
from xlvin.pretrain.transe import TransEConfig
from xlvin.run.agents import (
    AGENTS,
    Architecture,
    agent_fields,
    agent_spec,
    build_agent,
    expand_agent,
    is_agent_name,
)
from xlvin.ppo.curriculum import CurriculumConfig
from xlvin.progress import duration
from xlvin.ppo.update import PPOConfig
from xlvin.ppo.low_data import LowDataConfig
from xlvin.envs.spaces import MIN_IMAGE_SIZE, Spaces, env_spaces, require_registered

PROTOCOLS = ("online", "low_data", "curriculum")
#: The executor of an XLVIN run that names none (XLVIN-R's).
DEFAULT_EXECUTOR = "random"
PAPER_HIDDEN = {"CartPole": 64, "Acrobot": 32, "MountainCar": 16}
#: The paper's maze encoder width (its convolutions' channels and MLP hidden layer; --hidden).
MAZE_CHANNELS = 128
INITS = ("orthogonal", "pytorch")
#: Training seeds: [0, MAX_SEED] (NumPy's legacy global seeding takes 32 bits).
MAX_SEED = 2**32 - 1
#: TrainConfig fields written to config.json (and the weights' header) only when set: a run
#: without them writes exactly the config it wrote before they existed.
WRITTEN_WHEN_SET = ("env_kwargs", "gym_packages", "env_wrappers")
#: Fields (section, name) written only when they differ from their default, for the same reason.
WRITTEN_WHEN_CHANGED = (("train", "transition_loss"), ("train", "separate_critic"),
                        ("train", "activation"), ("ppo", "use_sde"), ("ppo", "sde_sample_freq"),
                        ("train", "action_bins"), ("train", "expansion"), ("train", "expand"))
#: Fields (section, name) whose default changed: the value runs saved without the field had
#: (the small CNN divided images by 255 before `small_image_divisor` existed).
LEGACY_DEFAULTS: dict[tuple[str, str], Any] = {("train", "small_image_divisor"): 255.0}
#: What trains XLVIN's encoder and transition model besides PPO: the paper's TransE loss, or the
#: VAE world model of its appendix (figure 10; `xlvin.nn.vae`).
TRANSITION_LOSSES = ("transe", "vae")
#: Bins per dimension of an XLVIN run's Box actions when --action-bins is left at 0.
DEFAULT_BINS = 11
#: The preset expansion expands every joint action up to this many, else samples.
MAX_FULL_EXPANSION = 64
#: Joint actions a sampled expansion draws per node when --expand is left at 0.
DEFAULT_SAMPLES = 8


@dataclass
class TrainConfig:
    """What to train: environment, agent and the XLVIN architecture (paper section 4.1)."""

    env: str = option(
        "CartPole-v1", "gymnasium environment id (discrete actions; PPO and XLVIN also Box (XLVIN "
        "in bins: --action-bins) and MultiDiscrete ones; flat observations get the MLP encoder, "
        "Discrete ones one-hot, images [C, H, W] or [H, W, C] the Nature CNN (a small CNN under "
        "36x36), a Dict both (text parts dropped))"
    )
    env_kwargs: dict[str, Any] = field(default_factory=dict, metadata=described(
        "keyword arguments of the environment, key=value, the value as JSON or else text "
        "(--env-kwargs is_slippery=false map_name=8x8)"
    ))
    gym_packages: list[str] = field(default_factory=list, metadata=described(
        "modules to import that register the environment with gymnasium (your own envs); "
        "recorded in the run, and `xlvin evaluate` asks for them rather than importing them"
    ))
    env_wrappers: list[str] = field(default_factory=list, metadata=described(
        "a wrapper to put around the environment, module:Class (a gymnasium.Wrapper "
        "subclass); repeat the flag for more, applied in order; the module is imported by its "
        "name, as --gym-packages; recorded in the run, and `xlvin evaluate` and --resume ask "
        "for them (a wrapper a file names is never applied)", repeated="env-wrapper",
    ))
    agent: str = option(
        "xlvin", "agent to train: ppo, xlvin-r, xlvin-cp, atreec, the maze planners vin, "
        "vin-mean, vin-max, gvin, or xlvin: XLVIN with the executor of --executor (xlvin-r is "
        "xlvin with --executor random); older spellings (xlvin_r, vin_mean) are accepted; or one "
        "added with xlvin.register_agent. config.json records xlvin-r as agent xlvin, executor random"
    )
    seed: int = option(0, "training seed: torch, numpy and environment seeds derive from it")
    hidden: int = option(
        0, "hidden width F of encoder and transition; 0 = paper preset (CartPole 64, Acrobot 32, "
        "MountainCar 16, other 64)"
    )
    embedding_dim: int = option(
        0, "latent embedding size k; 0 = preset: 50 for flat observations (paper), 512 for "
        "images (the Nature CNN's features), 128 for images under 36x36 and Dicts with one"
    )
    depth: int = option(2, "tree depth and executor steps K (paper: 2 on classic control)")
    prune: int = option(
        0, "ours, not the paper's: below depth 1 expand only the N actions a rollout policy "
        "(distilled from the agent's) ranks highest; 0: the full tree"
    )
    action_bins: int = option(
        0, "Box actions: bins B per dimension; the policy is a factorised categorical over them "
        "and the env receives the bin centres low + (high - low) k / (B - 1); 0: preset "
        f"({DEFAULT_BINS} for xlvin, none for ppo: a Gaussian)"
    )
    expansion: str = option(
        "", "xlvin: the joint actions every tree node expands: all, or --expand N drawn by "
        "uniform (each dimension uniformly), gaussian (around the node's greedy bins; Box "
        "actions) or policy (from the rollout policy, distilled from the agent's); empty: "
        f"all, or uniform with --expand or for more than {MAX_FULL_EXPANSION} joint actions of "
        "Box or MultiDiscrete actions",
        choices=("", *EXPANSIONS),
    )
    expand: int = option(
        0, f"xlvin: joint actions N a sampled --expansion draws per node; 0: {DEFAULT_SAMPLES} "
        "(or all joint actions, if fewer)"
    )
    executor: str = option(
        DEFAULT_EXECUTOR, "executor: 'random' (XLVIN-R), 'cartpole' (XLVIN-CP), 'maze' (the "
        "paper's maze executor: H = 10, LayerNorm always on), 'untrained' (XLVIN-R's before pre-training: an "
        "ablation), 'maze-untrained' and 'maze-random' (the maze executor's architecture untrained, "
        "or pre-trained on random graphs: ablations), 'authors-random' (the XLVIN-R executor of the authors' later code) or a "
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
    transition_loss: str = option(
        "transe", "XLVIN: the loss added to PPO that shapes encoder and transition: transe (the "
        "paper's), or vae (its appendix's world-model variant, figure 10: reconstruction + KL "
        "of the frames, the transition fitted to the next embedding; images, no pre-training)",
        choices=TRANSITION_LOSSES,
    )
    executor_layer_norm: bool = option(
        False, "default executors ('random', 'cartpole'): LayerNorm after every message-passing "
        "step (the authors' code: on)"
    )
    executor_messages: str = option(
        "relu", "default executors: messages Linear then ReLU, or linear (the authors' code); "
        "relu keeps a default executor's own ('authors-random' stays linear)", choices=MESSAGES,
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
    activation: str = option(
        "relu", "hidden activations of the MLP encoder of flat observations: relu (the paper's) "
        "or tanh (Stable-Baselines3's default)", choices=tuple(ACTIVATIONS),
    )
    small_image_divisor: float = option(
        10.0, "images under 36x36 (the small CNN's) are divided by this: 10 for symbolic grids "
        "such as MiniGrid's (indices up to 10), 255 for small pixel images"
    )
    separate_critic: bool = option(
        False, "PPO: the critic gets an encoder of its own (Stable-Baselines3's separate policy "
        "and value networks); off: one encoder shared by actor and critic (the paper's)"
    )
    pretrain_transe: bool | None = option(
        None, "pre-train encoder and transition with TransE first, in every run; unset: on for "
        "vector and maze observations (seconds), off for images as in the paper's Atari runs, "
        "which learn TransE during PPO only (on Atari frames it costs about 10 minutes on 2 "
        "cores and 6 GB of memory)"
    )
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

    def __post_init__(self) -> None:
        """An agent named by a canonical name or an older spelling holds the fields that name
        sets (`xlvin.run.agents.agent_fields`: xlvin-r is agent xlvin with executor random),
        so a config always names the registered builder; an executor other than the default
        and the name's own is refused. (A name given beside an explicit executor, as flags or
        keywords, is checked by `expand_agent` before it gets here.)"""
        if not isinstance(self.agent, str) or self.agent in AGENTS or not is_agent_name(self.agent):
            return  # a builder, or no agent yet: `validate` refuses it if it stays unknown
        given = None if self.executor == DEFAULT_EXECUTOR else self.executor
        fields = agent_fields(self.agent, given)
        self.agent, self.executor = fields["agent"], fields.get("executor", self.executor)


@dataclass
class RunConfig:
    """Everything a run needs; written to DIR/config.json."""

    train: TrainConfig = field(default_factory=TrainConfig)
    ppo: PPOConfig = field(default_factory=PPOConfig)
    transe: TransEConfig = field(default_factory=TransEConfig)
    low_data: LowDataConfig = field(default_factory=LowDataConfig)
    curriculum: CurriculumConfig = field(default_factory=CurriculumConfig)

    def to_json(self) -> dict[str, Any]:
        data = {f.name: to_dict(getattr(self, f.name)) for f in dataclasses.fields(self)}
        for key in WRITTEN_WHEN_SET:
            if not data["train"][key]:
                del data["train"][key]
        for section, key in WRITTEN_WHEN_CHANGED:
            if data[section][key] == type(getattr(self, section)).__dataclass_fields__[key].default:
                del data[section][key]
        return data

    @classmethod
    def from_saved(cls, data: Any, source: str) -> "RunConfig":
        """`from_json` of a config a run saved (config.json, a weights or checkpoint header):
        a field whose default has changed since (`LEGACY_DEFAULTS`) holds, where it is missing,
        the value runs had before."""
        if isinstance(data, dict):
            for (section, key), value in LEGACY_DEFAULTS.items():
                if isinstance(data.get(section), dict) and key not in data[section]:
                    data = {**data, section: {**data[section], key: value}}
        return cls.from_json(data, source)

    @classmethod
    def from_json(cls, data: Any, source: str) -> "RunConfig":
        """The config of a JSON object (a config file, a run's config.json or a weights header);
        anything else, and any field that does not check, is one UserError. An agent's
        canonical name or older spelling becomes the fields it sets (`expand_agent`: a run saved
        with vin_mean reads as vin-mean)."""
        if not isinstance(data, dict):
            raise UserError(
                f"{source}: the config must be a JSON object, got {type(data).__name__}"
            )
        if isinstance(data.get("train"), dict):
            data = {**data, "train": expand_agent(data["train"])}
        sections = typing.get_type_hints(cls)  # section name -> its config dataclass
        unknown = sorted(set(data) - set(sections))
        if unknown:
            raise UserError(f"{source}: unknown section(s) {names(unknown)}")
        return cls(**{name: from_dict(tp, data.get(name, {}), source) for name, tp in sections.items()})


#: The sections of RunConfig and the prefix of their options: `--flag` on the command line,
#: `flag=` in Python (`xlvin.Model`), the same names (train and PPO options bare).
SECTIONS: tuple[tuple[str, type, str], ...] = (
    ("train", TrainConfig, ""),
    ("ppo", PPOConfig, ""),
    ("transe", TransEConfig, "transe-"),
    ("low_data", LowDataConfig, "low-data-"),
    ("curriculum", CurriculumConfig, "curriculum-"),
)


def option_names() -> dict[str, tuple[str, str]]:
    """Every option's Python name (the flag without dashes, `-` as `_`) -> (section, field)."""
    return {
        (prefix + f.name).replace("-", "_"): (section, f.name)
        for section, cls, prefix in SECTIONS
        for f in dataclasses.fields(cls)
    }


def validate(cfg: TrainConfig) -> None:
    """Reject bad settings with one clear line."""
    spec = agent_spec(cfg.agent)
    if not 0 <= cfg.seed <= MAX_SEED:
        raise UserError(f"--seed must be in [0, {MAX_SEED}], got {cfg.seed}")
    if cfg.depth < 0:
        raise UserError(f"--depth must be >= 0, got {cfg.depth}")
    if cfg.prune < 0 or (cfg.prune and not spec.prune):
        raise UserError(f"--prune must be >= 0 and applies to --agent xlvin only, got {cfg.prune}")
    if cfg.action_bins < 0 or cfg.action_bins == 1:
        raise UserError(f"--action-bins must be >= 2 (or 0: the preset), got {cfg.action_bins}")
    if cfg.expand < 0 or ((cfg.expand or cfg.expansion) and not spec.expands):
        raise UserError(f"--expand must be >= 0 and --expand and --expansion apply to --agent "
                        f"xlvin only, got --expand {cfg.expand} with --agent {cfg.agent}")
    if cfg.expand and cfg.expansion == "all":
        raise UserError(f"--expand {cfg.expand} draws actions for a sampled --expansion "
                        "(uniform, gaussian, policy), not all")
    if cfg.prune and cfg.expansion not in ("", "all"):
        raise UserError(f"--prune and --expansion {cfg.expansion} both choose the actions a node "
                        "expands: use one")
    if spec.maze_only and not is_maze_env(cfg.env):
        raise UserError(f"--agent {cfg.agent} plans on a maze's grid; it needs a maze env, not {cfg.env}")
    if cfg.depth < spec.min_depth:
        raise UserError(f"--agent {cfg.agent} needs --depth >= {spec.min_depth} (it backs values "
                        "up a tree)")
    if cfg.embedding_dim < 0 or cfg.hidden < 0:
        raise UserError("--embedding-dim and --hidden must be >= 0 (0: the preset)")
    if cfg.transe_weight < 0:
        raise UserError(f"--transe-weight must be >= 0, got {cfg.transe_weight}")
    if cfg.transition_loss == "vae" and (not spec.transe or cfg.pretrain_transe is True):
        raise UserError("--transition-loss vae applies to --agent xlvin trained without TransE "
                        "pre-training: leave out --pretrain-transe true")
    if cfg.checkpoint_every < 0:
        raise UserError(f"--checkpoint-every must be >= 0, got {cfg.checkpoint_every}")
    try:
        json.dumps(cfg.env_kwargs, allow_nan=False)
    except (TypeError, ValueError):
        raise UserError("--env-kwargs values must be JSON values (numbers, strings, true/false, "
                        "null, lists, objects)") from None
    check_wrapper_specs(cfg.env_wrappers)
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


#: A tree whose minibatch is estimated to need more memory than this is said in one line before
#: training (`big_tree_notice`): it fits, but a user should know what it will cost.
BIG_TREE_BYTES = 2**30


def tree_node_bytes(embedding_dim: int, hidden: int) -> int:
    """Bytes one latent tree node of one observation keeps for the backward pass (FLOATS_PER_NODE,
    float32)."""
    return (FLOATS_PER_NODE[0] * embedding_dim + FLOATS_PER_NODE[1] * hidden) * 4


def minibatch_size(cfg: RunConfig) -> int:
    """Observations in one PPO minibatch, the batch a tree is built for in a backward pass."""
    return max(1, cfg.ppo.batch_size // cfg.ppo.num_minibatches)


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


#: k for images under 36x36 (the small CNN) and Dict observations with an image part.
SMALL_IMAGE_EMBEDDING = 128


def embedding_width(cfg: TrainConfig, spaces: Spaces) -> int:
    """k: the configured size, or the preset (50 for flat observations, 512 for images, 128 for
    images under 36x36 and Dicts with an image, 10 for mazes: the paper's maze encoder)."""
    if cfg.embedding_dim:
        return cfg.embedding_dim
    if spaces.kind in ("image", "image_hwc"):
        return 512 if min(spaces.image_shape[1:]) >= MIN_IMAGE_SIZE else SMALL_IMAGE_EMBEDDING
    if spaces.kind == "dict" and any(p.kind.startswith("image") for p in spaces.parts):
        return SMALL_IMAGE_EMBEDDING
    return {"maze": 10}.get(spaces.kind, 50)


def hidden_width(cfg: TrainConfig) -> int:
    """F: the configured width, or the paper's per-environment preset."""
    if cfg.hidden:
        return cfg.hidden
    if is_maze_env(cfg.env):
        return MAZE_CHANNELS
    return next((f for name, f in PAPER_HIDDEN.items() if cfg.env.startswith(name)), 64)


def action_bins(t: TrainConfig, spaces: Spaces) -> int:
    """The bins per dimension of the run's Box actions (0: a Gaussian policy, or no Box), the
    preset resolved; one UserError for bins of actions that are no Box."""
    if spaces.action_kind != "box":
        if t.action_bins:
            raise UserError(f"--action-bins {t.action_bins} bins Box actions; {t.env} has "
                            f"{spaces.action_kind} actions")
        return 0
    return t.action_bins or (DEFAULT_BINS if agent_spec(t.agent).expands else 0)


def number(n: int) -> str:
    """`n` in a message: its digits, or `about 10^N` for one too long to print (the joint
    actions of 10^6 bins on 1,000 dimensions)."""
    return str(n) if n < 10**18 else f"about 10^{int(n.bit_length() * math.log10(2))}"


def expansion(t: TrainConfig, spaces: Spaces, bins: int) -> tuple[str, int]:
    """(method, N) of an XLVIN run's tree expansion, presets resolved (`TrainConfig.expansion`,
    `expand`): N joint actions per node, 0 for all; one UserError for a bad combination."""
    factors = spaces.action_factors(bins)
    joint = math.prod(factors)
    method = t.expansion or ("uniform" if t.expand or (
        spaces.action_kind != "discrete" and joint > MAX_FULL_EXPANSION) else "all")
    if method == "all":
        return method, 0
    counted = (f"{bins} bins ^ {len(factors)} dimensions = {number(joint)}" if bins
               else number(joint))
    if t.expand > joint:
        raise UserError(f"--expand {t.expand} is more than the {counted} joint actions of {t.env}")
    if method == "gaussian" and not bins:
        raise UserError(f"--expansion gaussian draws around ordered bins of Box actions; {t.env} "
                        f"has {spaces.action_kind} actions: use uniform or policy")
    return method, t.expand or min(DEFAULT_SAMPLES, joint)


def architecture(cfg: RunConfig, spaces: Spaces) -> Architecture:
    """The run's network with every preset resolved, its tree checked against this machine's
    memory (a depth K whose tree could not fit is refused, saying what it needs)."""
    t = cfg.train
    spec = agent_spec(t.agent)
    bins = action_bins(t, spaces)
    if spaces.action_kind != "discrete" and not spec.any_actions:
        raise UserError(f"{t.env} has {spaces.action_kind} actions; --agent {t.agent} needs "
                        "Discrete actions (use --agent ppo or xlvin)")
    if spaces.action_kind == "box" and not bins and t.ppo_transe:
        raise UserError(f"{t.env} has Box actions; --ppo-transe needs them binned: add "
                        f"--action-bins B (e.g. {DEFAULT_BINS})")
    method, samples = expansion(t, spaces, bins) if spec.expands else ("all", 0)
    children = samples or math.prod(spaces.action_factors(bins))
    norm_obs = cfg.ppo.normalises(spaces.action_kind == "box" and spaces.kind == "flat")[0]
    if norm_obs and spaces.kind != "flat":
        raise UserError(f"--norm-obs normalises flat observations; {t.env} has {spaces.kind} "
                        "observations")
    if cfg.ppo.use_sde and spaces.action_kind != "box":
        raise UserError(f"--use-sde explores Box actions; {t.env} has {spaces.action_kind} actions")
    if cfg.ppo.use_sde and bins:
        raise UserError(f"--use-sde explores with a Gaussian; --action-bins {bins} makes the "
                        "policy a categorical over bins: use one")
    if t.separate_critic and t.agent != "ppo":
        raise UserError(f"--separate-critic is an option of --agent ppo, not {t.agent}")
    if t.activation != "relu" and spaces.kind != "flat":
        raise UserError(f"--activation {t.activation} is the flat-observation encoder's; {t.env} "
                        f"has {spaces.kind} observations")
    if t.prune > children:
        raise UserError(f"--prune {t.prune}: the environment has only {children} actions")
    if t.prune and spaces.action_kind != "discrete":
        raise UserError(f"--prune ranks Discrete actions; {t.env} has {spaces.action_kind} "
                        "actions: use --expansion")
    if t.transition_loss == "vae" and spaces.kind != "image":
        raise UserError("--transition-loss vae reconstructs images [C, H, W]; "
                        f"{t.env} has {spaces.kind} observations")
    k, f = embedding_width(t, spaces), hidden_width(t)
    joint = (f" ({bins} bins ^ {spaces.num_actions} dimensions, all expanded: sample some with "
             "--expand N)" if bins and not samples else "")
    nodes: int | None = 1
    if agent_spec(t.agent).tree:
        batch = minibatch_size(cfg)
        node_bytes = tree_node_bytes(k, f) * batch
        total = machine_memory()
        nodes = tree_nodes(children, t.depth, total // node_bytes)
        if nodes is None:
            raise UserError(
                f"--depth {t.depth} with {number(children)}{joint} actions builds more than "
                f"{total // node_bytes:,} latent states per observation, too many for a minibatch "
                f"of {batch} in this machine's {total / 2**30:,.0f} GiB"
            )
    return Architecture(
        agent=t.agent, hidden=f, embedding_dim=k, depth=t.depth, prune=t.prune, tree_nodes=nodes,
        gamma=cfg.ppo.gamma, transe_weight=t.transe_weight, transe_negatives=t.transe_negatives,
        zero_chi=t.zero_chi, executor_aggregation=t.executor_aggregation,
        executor_projections=t.executor_projections,
        ppo_transe=t.ppo_transe, init=t.init, transition_loss=t.transition_loss,
        norm_obs=norm_obs, clip_obs=cfg.ppo.clip_obs, log_std_init=cfg.ppo.log_std_init,
        sde_sample_freq=cfg.ppo.sde_sample_freq if cfg.ppo.use_sde else None,
        separate_critic=t.separate_critic, activation=t.activation,
        action_bins=bins, expansion=method, expand=samples,
        small_image_divisor=t.small_image_divisor,
    )


def action_width(spaces: Spaces, bins: int) -> int:
    """The inputs of an action's one-hots (the transition's, the edges') and the outputs of the
    policy's head: the sum of the joint action's factors, or the dimensions of a Gaussian."""
    return max(sum(spaces.action_factors(bins)), spaces.num_actions)


def pretrains_transe(cfg: RunConfig, spaces: Spaces) -> bool:
    """Whether the run pre-trains TransE (the preset of `pretrain_transe` resolved)."""
    return agent_spec(cfg.train.agent).transe and bool(
        with_transe_pretraining(cfg, spaces).train.pretrain_transe)


def transe_transitions(cfg: RunConfig) -> int:
    """The fewest transitions TransE pre-trains on: an episode has at least one step (strict
    low-data pre-training: the first round's episodes)."""
    if cfg.train.protocol == "low_data" and cfg.low_data.strict_transe:
        return cfg.low_data.episodes
    return min(cfg.transe.episodes, cfg.transe.max_transitions)


def memory_parts(cfg: RunConfig, spaces: Spaces, arch: Architecture) -> dict[str, int]:
    """A generous estimate of what a run keeps in memory, in bytes (float32), part by part
    (named as a message says them): the weights (x4: gradients and Adam's two moments), the
    action layers and their activations over a minibatch (with a sampled expansion, one-hots for
    every tree node), an online rollout's observations and TransE's data."""
    k, f = arch.embedding_dim, arch.hidden
    floats = math.prod(spaces.obs_shape)
    width = action_width(spaces, arch.action_bins)
    layers = 4 if agent_spec(cfg.train.agent).tree else 2  # head, transition, edges, rollout policy
    one_hots = 3 * ((arch.tree_nodes or 1) - 1) if arch.expansion != "all" else 0
    weights = spaces.flat_size * max(f, k) + (spaces.num_actions + 4) * (f + k) ** 2
    binned = (f"--action-bins {arch.action_bins} x {spaces.num_actions} dimensions = "
              if arch.action_bins else "")
    parts = {
        f"the network (--hidden {f}, --embedding-dim {k}) on {spaces.flat_size:,} input floats":
            16 * weights,
        f"{binned}{width:,} action outputs":
            4 * width * (4 * layers * (f + k) + minibatch_size(cfg) * (4 + one_hots)),
        f"--num-envs x --num-steps {cfg.ppo.batch_size} observations of {floats:,} floats":
            4 * 2 * cfg.ppo.batch_size * floats,
    }
    if pretrains_transe(cfg, spaces):  # obs and next obs, and their split copies
        parts[f"TransE's data of at least {transe_transitions(cfg):,} transitions"] = (
            4 * 4 * transe_transitions(cfg) * floats)
    return parts


def check_model_fits(cfg: RunConfig, spaces: Spaces, arch: Architecture) -> None:
    """Refuse widths, action bins, observation sizes and env counts whose network, rollout or
    TransE data could not fit in this machine's memory (`memory_parts`), in one line naming the
    parts that need the most."""
    parts = memory_parts(cfg, spaces, arch)
    need, total = sum(parts.values()), machine_memory()
    if need > total:
        big = [f"{name} ({size / 2**30:,.1f} GiB)" for name, size in
               sorted(parts.items(), key=lambda part: -part[1]) if size >= need / 10]
        raise UserError(f"{', '.join(big)} need about {need / 2**30:,.0f} GiB; this machine has "
                        f"{total / 2**30:,.0f} GiB")


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


def learning_passes(cfg: RunConfig) -> tuple[int, int]:
    """The env steps a run acts in, and how often PPO learns from each, from below: online, its
    total steps, `update_epochs` times each; low-data, one step per episode at least (rounds x
    episodes), learnt from by each of its round's `updates` x `update_epochs` passes."""
    if cfg.train.protocol == "low_data":
        low = cfg.low_data
        return low.rounds * low.episodes, low.updates * cfg.ppo.update_epochs
    return cfg.ppo.total_steps, cfg.ppo.update_epochs


def estimated_seconds(cfg: RunConfig, spaces: Spaces, arch: Architecture) -> float:
    """A lower bound of the run's training time: every env step acts once (a forward pass) and
    is learnt from `learning_passes` times (forward and backward: 3 forward passes), at
    OPTIMISTIC_FLOPS, plus OPTIMISTIC_STEP_SECONDS per env step."""
    steps, passes = learning_passes(cfg)
    per_step = forward_flops(spaces, arch) * (1 + 3 * passes)
    return steps * (per_step / OPTIMISTIC_FLOPS + OPTIMISTIC_STEP_SECONDS)


def check_budget(cfg: RunConfig, spaces: Spaces, arch: Architecture) -> None:
    """Refuse an online or low-data run whose time, estimated from below, exceeds
    MAX_RUN_SECONDS, in one line giving the estimate (`--total-steps 1e29` or
    `--low-data-episodes 1e9` can never finish)."""
    if cfg.train.protocol not in ("online", "low_data"):
        return
    seconds = estimated_seconds(cfg, spaces, arch)
    if seconds > MAX_RUN_SECONDS:
        tree = f", {arch.tree_nodes:,} latent states per observation" if arch.tree_nodes > 1 else ""
        low = cfg.low_data
        asked = (f"--total-steps {cfg.ppo.total_steps:,}" if cfg.train.protocol == "online" else
                 f"--low-data-rounds {low.rounds:,} x --low-data-episodes {low.episodes:,} (one "
                 f"step each at least, learnt from {low.updates:,} x {cfg.ppo.update_epochs:,} "
                 "times)")
        fewer = "steps" if cfg.train.protocol == "online" else "episodes"
        raise UserError(
            f"{asked} would take at least {seconds / 86400:,.0f} "
            f"days ({forward_flops(spaces, arch):,} FLOPs per forward pass{tree}, at "
            f"{OPTIMISTIC_FLOPS:.0e} FLOP/s), more than the {MAX_RUN_SECONDS // 86400} days a run "
            f"may take: choose fewer {fewer} or a smaller network")


#: What one collected episode's records take at least, in Python objects: its first and last
#: step, its return and its length.
EPISODE_BYTES = 100


def check_round_fits(cfg: RunConfig, spaces: Spaces) -> None:
    """Refuse a low-data round whose episodes could not fit in this machine's memory, estimated
    from below: their records, and every step, one per episode at least, its observation held
    twice (as the rollout is put together) in float32."""
    if cfg.train.protocol != "low_data":
        return
    episodes = cfg.low_data.episodes
    need = episodes * (math.prod(spaces.obs_shape) * 2 * 4 + EPISODE_BYTES)
    total = machine_memory()
    if need > total:
        raise UserError(
            f"--low-data-episodes {episodes:,} need at least {need / 2**30:,.0f} GiB a round; "
            f"this machine has {total / 2**30:,.0f} GiB")


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
        raise UserError(
            f"--transe-epochs {cfg.transe.epochs} of TransE pre-training would take at least "
            f"{seconds / 86400:,.0f} days ({transe_transitions(cfg):,} transitions or more, "
            f"{transe_flops(spaces, arch):,} FLOPs each, at {OPTIMISTIC_FLOPS:.0e} FLOP/s), more "
            f"than the {MAX_RUN_SECONDS // 86400} days a run may take: choose fewer epochs")


def big_tree_notice(cfg: RunConfig, spaces: Spaces, arch: Architecture) -> str | None:
    """One line for a latent tree that fits in memory but is large (its minibatch estimated at
    BIG_TREE_BYTES or more): its size, that memory, and the run's training time estimated from
    below (`estimated_seconds`); None for any other run. Said before anything is built, so that
    `XLVIN(depth=12).learn(512)` on CartPole does not spend minutes and gigabytes in silence."""
    batch = minibatch_size(cfg)
    need = arch.tree_nodes * tree_node_bytes(arch.embedding_dim, arch.hidden) * batch
    if arch.tree_nodes <= 1 or need < BIG_TREE_BYTES:
        return None
    return (f"xlvin: --depth {arch.depth} builds {arch.tree_nodes:,} latent states per "
            f"observation: about {need / 2**30:,.1f} GiB for a minibatch of {batch}, and at least "
            f"{duration(estimated_seconds(cfg, spaces, arch))} of training (estimated "
            "from below; a smaller --depth or --expand builds fewer)")


def check_run(cfg: RunConfig, spaces: Spaces | None = None) -> tuple[Spaces, Architecture]:
    """Everything about a run's config that can be checked without training it (values, the
    environment, memory); return the env's spaces and the architecture derived from both.
    `spaces` (a saved run's): the env is then neither made nor needed."""
    validate(cfg.train)
    check_minibatch(cfg)
    if cfg.train.protocol == "curriculum":
        check_curriculum(cfg)
    if cfg.ppo.atari_vector == "ale":
        ale_vector_game(cfg.train.env)
        if cfg.train.protocol != "online" or cfg.train.env_kwargs or cfg.train.env_wrappers:
            raise UserError("--atari-vector ale trains online, with no --env-kwargs or --env-wrapper")
    if spaces is None:
        require_gym_packages(cfg.train.gym_packages, cfg.train.env)
        spaces = env_spaces(cfg.train.env, cfg.train.env_kwargs, cfg.train.env_wrappers)
    arch = architecture(cfg, spaces)
    check_model_fits(cfg, spaces, arch)
    check_budget(cfg, spaces, arch)
    check_round_fits(cfg, spaces)
    check_transe_budget(cfg, spaces, arch)
    return spaces, arch


def with_transe_pretraining(cfg: RunConfig, spaces: Spaces) -> RunConfig:
    """`cfg` with `pretrain_transe` decided where it was left unset: on unless the observations
    are images or Dicts or the transition model learns from reconstructions (`transition_loss`
    vae); what a run's config.json then records."""
    if cfg.train.pretrain_transe is not None:
        return cfg
    off = spaces.kind in ("image", "image_hwc", "dict") or cfg.train.transition_loss == "vae"
    return dataclasses.replace(cfg, train=dataclasses.replace(cfg.train, pretrain_transe=not off))


def check_curriculum(cfg: RunConfig) -> None:
    """The continual maze needs a maze env and a constant learning rate (it has no known end),
    and mazes with levels in its range; the curriculum sets the maze's options itself."""
    if not is_maze_env(cfg.train.env):
        raise UserError(f"--protocol curriculum runs on the maze envs, not {cfg.train.env}")
    if cfg.ppo.anneal_lr:
        raise UserError("--protocol curriculum has no known end to anneal to: use --anneal-lr false")
    if cfg.train.env_kwargs or cfg.train.env_wrappers:
        raise UserError("--protocol curriculum sets the maze's options itself: no --env-kwargs "
                        "or --env-wrapper")
    cfg.curriculum.levels()


def check_minibatch(cfg: RunConfig) -> None:
    """Refuse a minibatch larger than the rollout it is cut from (online and curriculum: num_envs
    x num_steps): no minibatch would be full, so PPO would never take a step. (The low-data
    protocol learns from whole episodes, whose number of steps is known only once collected.)"""
    ppo = cfg.ppo
    if cfg.train.protocol != "low_data" and ppo.minibatch_size > ppo.batch_size:
        raise UserError(
            f"--minibatch-size {ppo.minibatch_size} is larger than the rollout, --num-envs "
            f"{ppo.num_envs} x --num-steps {ppo.num_steps} = {ppo.batch_size} transitions: no "
            f"minibatch would be full and PPO would never step; use at most {ppo.batch_size}")


def whole_rollouts(cfg: RunConfig) -> tuple[RunConfig, str | None]:
    """`cfg` with online training's total steps rounded up to whole rollouts (num_envs x
    num_steps, what one PPO update collects), and a sentence saying so when a total other than
    the default was rounded (the default 500,000 trains 500,224 with 4 envs x 128 steps)."""
    ppo = cfg.ppo
    if cfg.train.protocol != "online" or ppo.total_steps % ppo.batch_size == 0:
        return cfg, None
    steps = -(-ppo.total_steps // ppo.batch_size) * ppo.batch_size
    said = (f"{ppo.total_steps} is not a multiple of the rollout ({ppo.num_envs} envs x "
            f"{ppo.num_steps} steps = {ppo.batch_size}); training {steps}")
    rounded = dataclasses.replace(cfg, ppo=dataclasses.replace(ppo, total_steps=steps))
    return rounded, None if ppo.total_steps == PPOConfig().total_steps else said


def made_env(cfg: TrainConfig) -> str:
    """The id every path that makes the run's env makes: its env, registered already
    (`require_registered`: a weights header's id is never handed to gym.make to import), in its
    wrappers, each named by the user (`xlvin.envs.wrappers.wrapped_env_id`)."""
    return wrapped_env_id(require_registered(cfg.env), cfg.env_wrappers)


def on_cpu(cfg: RunConfig) -> RunConfig:
    """`cfg` with the CPU as its device: the config a policy is rebuilt with here, whatever device
    trained it."""
    return dataclasses.replace(cfg, train=dataclasses.replace(cfg.train, device="cpu"))


def agent_of(cfg: RunConfig, spaces: Spaces, processor: MessagePassing | None = None) -> ActorCritic:
    """The network `cfg` builds for an env of `spaces` (not seeded here): `build_agent` of the
    derived architecture, for code that holds a config but no env (tests, benchmarks)."""
    return build_agent(architecture(cfg, spaces), spaces, processor)


def transe_env_kwargs(cfg: RunConfig) -> dict[str, Any]:
    """The env options of the TransE pre-training data: a curriculum's training mazes (every
    level), the run's --env-kwargs for the other protocols."""
    if cfg.train.protocol == "curriculum":
        return cfg.curriculum.train_env_kwargs()
    return cfg.train.env_kwargs


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
