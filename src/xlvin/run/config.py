"""A run's typed config: the schema every caller shares (`xlvin train`'s flags, a --config file, a
run's config.json, the Python API's keywords) and its compatibility with the configs older runs
saved. Torch-free: the command line builds its parser from it without importing the model.

What a run derives from its config is `xlvin.run.architecture`; what is checked before anything
is built is `xlvin.run.checks`."""

import dataclasses
import typing
from dataclasses import dataclass, field
from typing import Any

from xlvin.config import described, from_dict, names, option, to_dict
from xlvin.errors import UserError
from xlvin.nn.names import ACTIVATION_NAMES, AGGREGATIONS, EXPANSIONS, MESSAGES, NEGATIVES
from xlvin.ppo.config import CurriculumConfig, LowDataConfig, PPOConfig
from xlvin.pretrain.config import TransEConfig

#: The executor of an XLVIN run that names none (XLVIN-R's).
DEFAULT_EXECUTOR = "random"
INITS = ("orthogonal", "pytorch")
#: Training seeds: [0, MAX_SEED] (NumPy's legacy global seeding takes 32 bits).
MAX_SEED = 2**32 - 1
#: The first seed of `evaluate` (and `xlvin evaluate`): far from every training seed.
EVAL_SEED = 1_000_000
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
        "or tanh (Stable-Baselines3's default)", choices=ACTIVATION_NAMES,
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
        "(low_data options), the continual maze (curriculum options; maze envs), or one added "
        "with xlvin.register_protocol"
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
        keywords, is checked by `expand_agent` before it gets here.) The registry is imported
        here, when a config is made: it builds torch modules, and a parser needs no config."""
        from xlvin.run.agents import AGENTS, agent_fields, is_agent_name

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
        from xlvin.run.agents import expand_agent

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


def on_cpu(cfg: RunConfig) -> RunConfig:
    """`cfg` with the CPU as its device: the config a policy is rebuilt with here, whatever device
    trained it."""
    return dataclasses.replace(cfg, train=dataclasses.replace(cfg.train, device="cpu"))
