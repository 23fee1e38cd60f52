"""One place that builds an agent: the registry of agent and encoder builders.

An agent builder takes the run's derived `Architecture`, the env's `Spaces` and, for an agent
registered with `executor=True`, the pre-trained executor's processor, and returns an
`ActorCritic`. The CLI (`xlvin train --agent NAME`), the Python API (`xlvin.Model(env,
agent=NAME)`) and the experiments all build agents here; the built-in agents register
themselves below exactly as a user's would:

    from xlvin import register_agent, build_encoder
    register_agent("mine", lambda arch, spaces, processor: MyAgent(build_encoder(arch, spaces),
                                                                   arch.embedding_dim,
                                                                   spaces.num_actions))

An encoder builder maps (Architecture, Spaces) to a module from observations [B, ...] to
[B, k]; one is registered per observation kind (`xlvin.envs.spaces.OBSERVATION_KINDS`),
adapters (one-hot, channels first) included.

Every built-in agent has one canonical name, lowercase and hyphenated (`AGENT_NAMES`): ppo,
xlvin-r, xlvin-cp, atreec, vin, vin-mean, vin-max, gvin. A name stands for the config fields it
sets: xlvin-r is the builder `xlvin` with the executor pre-trained on random graphs (`--agent
xlvin --executor random`), xlvin-cp the same with the CartPole executor; `xlvin` alone is XLVIN
with the executor of `--executor` (default random: xlvin-r). Older spellings (`AGENT_ALIASES`:
xlvin_r, vin_mean, ...) and other cases (XLVIN-R) are accepted everywhere a name is, and
`resolve_agent` is the one function that reads a name the user typed.
"""

import warnings
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from torch import nn

from xlvin.config import choice, csv_choices
from xlvin.errors import FieldError, UserError
from xlvin.nn.agent import XLVINAgent
from xlvin.nn.baselines.atreec import ATreeCAgent
from xlvin.nn.baselines.gvin import GVINAgent
from xlvin.nn.baselines.ppo import PPOAgent
from xlvin.nn.baselines.vin import VINAgent
from xlvin.nn.encoders import (
    ChannelsFirst,
    DictEncoder,
    MazeCNN,
    MLPEncoder,
    NatureCNN,
    OneHot,
    SmallCNN,
)
from xlvin.nn.distributions import ActionDistribution, StateDependentGaussian, for_spaces
from xlvin.nn.executor import MessagePassing
from xlvin.nn.expansion import Expansion
from xlvin.nn.normalization import RunningNorm
from xlvin.nn.planners import Planner
from xlvin.nn.policy import ActorCritic
from xlvin.nn.transition import TransitionModel
from xlvin.nn.true_tree import TrueTree, TrueTreeXLVIN
from xlvin.nn.vae import VAEWorldModel
from xlvin.envs.spaces import MIN_IMAGE_SIZE, OBSERVATION_KINDS, Spaces, image_shape


@dataclass(frozen=True)
class Architecture:
    """A run's network, derived once from its config and its env (`xlvin.run.architecture.
    architecture`): every width and size a builder reads, presets resolved."""

    agent: str
    hidden: int  # F: width of encoder and transition MLPs
    embedding_dim: int  # k: the latent state h_s
    depth: int  # K: tree depth and executor steps
    prune: int  # actions expanded below depth 1 (0: the full tree)
    tree_nodes: int  # latent states per observation: 1 + A + ... (1 without a tree)
    gamma: float  # the discount: XLVIN's edge feature, ATreeC's backup
    transe_weight: float
    transe_negatives: str  # how the TransE loss draws negatives (xlvin.nn.transe.NEGATIVES)
    zero_chi: bool  # XLVIN ablation: zeros in place of chi_s
    executor_aggregation: str  # XLVIN runs its executor with it ("": as it was pre-trained)
    executor_projections: bool
    ppo_transe: bool
    init: str  # "orthogonal" or "pytorch"
    transition_loss: str = "transe"  # XLVIN: "transe", or "vae" (xlvin.nn.vae, images only)
    norm_obs: bool = False  # the encoder starts with running observation statistics
    clip_obs: float = 10.0  # bound of the normalised observations
    log_std_init: float = 0.0  # Box actions: the Gaussian's initial log std
    sde_sample_freq: int | None = None  # Box actions with gSDE: steps per noise matrix (None: no gSDE)
    separate_critic: bool = False  # PPO: the critic has its own encoder
    activation: str = "relu"  # the MLP encoder's hidden activations
    action_bins: int = 0  # Box actions binned per dimension (0: a Gaussian)
    expansion: str = "all"  # XLVIN: the actions a tree node expands (xlvin.nn.expansion)
    expand: int = 0  # the joint actions a sampled expansion draws per node
    small_image_divisor: float = 10.0  # images under 36x36 are divided by it (`SmallCNN`)


AgentBuilder = Callable[[Architecture, Spaces, MessagePassing | None], ActorCritic]
EncoderBuilder = Callable[[Architecture, Spaces], nn.Module]


@dataclass(frozen=True)
class AgentSpec:
    """A registered agent: its builder and what the run must provide or check for it."""

    builder: AgentBuilder
    executor: bool = False  # gets the pre-trained executor's processor (--executor)
    tree: bool = False  # builds a latent tree of depth K (its memory is checked)
    min_depth: int = 0
    prune: bool = False  # accepts --prune
    any_actions: bool = False  # MultiDiscrete and Box actions too (else Discrete only)
    expands: bool = False  # accepts --expansion and --expand (Box actions binned by default)
    transe: bool = False  # has `encoder` and `transition` pre-trained by TransE (--pretrain-transe)
    maze_only: bool = False  # plans on a maze's grid


AGENTS: dict[str, AgentSpec] = {}
ENCODERS: dict[str, EncoderBuilder] = {}
#: The agents this module registers (set at its end), and the encoders (after them).
BUILT_IN_AGENTS: frozenset[str] = frozenset()
BUILT_IN_ENCODERS: dict[str, EncoderBuilder] = {}

#: The built-in agents' canonical names -> the config fields each sets (`TrainConfig`): `agent`,
#: the registered builder, and for XLVIN-R and XLVIN-CP the executor they run.
AGENT_NAMES: dict[str, dict[str, str]] = {
    "ppo": {"agent": "ppo"},
    "xlvin-r": {"agent": "xlvin", "executor": "random"},
    "xlvin-cp": {"agent": "xlvin", "executor": "cartpole"},
    "atreec": {"agent": "atreec"},
    "vin": {"agent": "vin"},
    "vin-mean": {"agent": "vin-mean"},
    "vin-max": {"agent": "vin-max"},
    "gvin": {"agent": "gvin"},
}
#: Older spellings, still accepted: alias -> canonical name (`xlvin` is XLVIN-R where a list of
#: agents has no `xlvin` of its own: `resolve_agent`).
AGENT_ALIASES: dict[str, str] = {
    "xlvin_r": "xlvin-r",
    "xlvin_cp": "xlvin-cp",
    "vin_mean": "vin-mean",
    "vin_max": "vin-max",
}


def register_agent(name: str, builder: AgentBuilder, **spec: bool | int) -> None:
    """Make `name` an agent of `xlvin train --agent`, `xlvin.Model(agent=...)` and the
    experiments; `spec`: the flags of `AgentSpec`. Registering a name of yours again (a notebook
    cell run again) replaces it, with a warning when the builder or flags differ; a built-in
    agent's name or alias is not a new agent's."""
    entry = AgentSpec(builder, **spec)  # type: ignore[arg-type]
    if (name in BUILT_IN_AGENTS or name in AGENT_ALIASES
            or AGENT_NAMES.get(name, {"agent": name})["agent"] != name):
        raise UserError(f"{name!r} names the built-in agent "
                        f"{AGENT_ALIASES.get(name, name)}; register yours under another name")
    if name in AGENTS and AGENTS[name] != entry:
        warnings.warn(f"agent {name!r} was registered already; replaced", stacklevel=2)
    AGENTS[name] = entry


def agent_names() -> tuple[str, ...]:
    """Every name an agent has: the canonical ones, `xlvin` (XLVIN with --executor's executor)
    and the agents registered by users."""
    return (*AGENT_NAMES, *(name for name in AGENTS if name not in AGENT_NAMES))


def resolve_agent(name: str, choices: Sequence[str] | None = None) -> str:
    """The canonical name of the agent `name` (itself, an older spelling, another case) among
    `choices` (an experiment's agents; default `agent_names()`); an unknown name is one
    UserError with the closest name (did you mean) and the choices. Where `choices` has no
    `xlvin` of its own, `xlvin` is XLVIN with its default executor: xlvin-r."""
    allowed = tuple(choices) if choices is not None else agent_names()
    more = "; or register_agent your own" if choices is None else ""
    return choice(name, allowed, "agent", _aliases(allowed), more=more)


def resolve_agents(text: str, choices: Sequence[str]) -> list[str]:
    """The canonical names of a comma-separated list of agents (an experiment's `--agents`),
    each resolved as `resolve_agent` resolves it among `choices`."""
    return csv_choices(text, tuple(choices), "agent", _aliases(choices))


def _aliases(choices: Sequence[str]) -> dict[str, str]:
    """The aliases of agents among `choices`: the older spellings, and `xlvin` for xlvin-r
    where `choices` has no `xlvin` of its own."""
    return {**AGENT_ALIASES, **({} if "xlvin" in choices else {"xlvin": "xlvin-r"})}


def is_agent_name(name: str) -> bool:
    """Whether `name` resolves to an agent now (`resolve_agent`)."""
    try:
        resolve_agent(name)
    except UserError:
        return False
    return True


def agent_fields(name: str, executor: str | None = None) -> dict[str, str]:
    """The config fields the agent `name` sets (`AGENT_NAMES`; a registered agent's: its
    `agent`); `executor`, one given beside the name (--executor), is refused where the name
    runs another."""
    canonical = resolve_agent(name)
    fields = dict(AGENT_NAMES.get(canonical, {"agent": canonical}))
    runs = fields.get("executor")
    if runs is not None and executor is not None and executor != runs:
        other = agent_name(fields["agent"], executor)
        use = "{agent} {}" if other != fields["agent"] else "{agent} xlvin {executor} {}"
        raise FieldError("{agent=} runs the {!r} executor, not {executor=}: use " + use, runs,
                         other if other != fields["agent"] else executor, agent=canonical,
                         executor=executor)
    return fields


def expand_agent(options: Mapping[str, Any]) -> dict[str, Any]:
    """`options` (config fields by name: the flags given, a config file's train section, the
    Python API's keywords) with an agent's name replaced by the fields it sets (`agent_fields`;
    xlvin-r: agent xlvin, executor random). A name that is no agent's is left for
    `agent_spec` to refuse (an agent registered later may take it)."""
    name, executor = options.get("agent"), options.get("executor")
    if not isinstance(name, str) or not is_agent_name(name):
        return dict(options)
    return {**options, **agent_fields(name, executor if isinstance(executor, str) else None)}


def agent_name(agent: str, executor: str) -> str:
    """The canonical name of a config's agent and executor: xlvin-r for (xlvin, random), the
    builder's name where no canonical name fixes that executor (xlvin with a file)."""
    for name, fields in AGENT_NAMES.items():
        if fields["agent"] == agent and fields.get("executor", executor) == executor:
            return name
    return agent


def register_encoder(kind: str, builder: EncoderBuilder) -> None:
    """The encoder (with its observation adapter) for observations of `kind` (one of
    `OBSERVATION_KINDS`), replacing the built-in one (and an earlier one of yours, with a
    warning: a notebook cell run again)."""
    if kind not in OBSERVATION_KINDS:
        raise UserError(f"unknown observation kind {kind!r}; choose one of "
                        f"{', '.join(OBSERVATION_KINDS)}")
    current = ENCODERS.get(kind)
    if current not in (None, BUILT_IN_ENCODERS.get(kind), builder):
        warnings.warn(f"an encoder for {kind} observations was registered already; replaced",
                      stacklevel=2)
    ENCODERS[kind] = builder


def agent_spec(name: str) -> AgentSpec:
    """The registered agent `name` builds with (any of its names, `resolve_agent`)."""
    if name in AGENTS:
        return AGENTS[name]
    return AGENTS[agent_fields(name)["agent"]]


def build_encoder(arch: Architecture, spaces: Spaces) -> nn.Module:
    """z: observations [B, ...] -> h_s [B, k], picked by the observation kind; with
    `arch.norm_obs`, after the running observation normalisation (`RunningNorm`)."""
    if spaces.kind not in ENCODERS:
        raise UserError(f"no encoder registered for {spaces.kind} observations")
    encoder = ENCODERS[spaces.kind](arch, spaces)
    if arch.norm_obs:
        return nn.Sequential(RunningNorm(spaces.obs_shape, clip=arch.clip_obs), encoder)
    return encoder


def pytorch_init(module: nn.Module, skip: str = "processor") -> None:
    """PyTorch's default initialisation for every Linear and Conv2d of `module` outside `skip`
    (the frozen, pre-trained executor)."""
    for name, layer in module.named_modules():
        if isinstance(layer, (nn.Linear, nn.Conv2d)) and not name.startswith(skip):
            layer.reset_parameters()


def build_agent(
    arch: Architecture, spaces: Spaces, processor: MessagePassing | None = None
) -> ActorCritic:
    """The policy network of `arch.agent` for `spaces`, with PyTorch's default initialisation
    when `arch.init` is "pytorch"; an executor agent needs the processor (frozen inside)."""
    spec = agent_spec(arch.agent)
    if spec.executor and processor is None:
        raise UserError(f"agent {arch.agent!r} needs the executor's processor")
    agent = spec.builder(arch, spaces, processor)
    if arch.init == "pytorch":
        pytorch_init(agent)
    return agent


# The built-in encoders: one per observation kind.
register_encoder("flat", lambda a, s: MLPEncoder(s.flat_size, a.hidden, a.embedding_dim,
                                                 a.activation))
register_encoder(
    "discrete",
    lambda a, s: nn.Sequential(OneHot(s.states), MLPEncoder(s.states, a.hidden, a.embedding_dim)),
)
def image_encoder(kind: str, shape: tuple[int, ...], embedding_dim: int,
                  small_divisor: float) -> nn.Module:
    """The CNN of images of `kind` (image, or image_hwc: channels first before it) and `shape`:
    the Nature CNN, or the small CNN for images under 36x36 (dividing them by `small_divisor`)."""
    channels, height, width = image_shape(kind, shape)
    cnn: nn.Module
    if min(height, width) >= MIN_IMAGE_SIZE:
        cnn = NatureCNN(channels, embedding_dim, size=(height, width))
    else:
        cnn = SmallCNN(channels, embedding_dim, size=(height, width), divisor=small_divisor)
    return nn.Sequential(ChannelsFirst(), cnn) if kind == "image_hwc" else cnn


def _dict_encoder(arch: Architecture, spaces: Spaces) -> nn.Module:
    """Dict observations: a CNN per image part, one MLP encoder for the others (`DictEncoder`)."""
    k = arch.embedding_dim
    images = {i: nn.Sequential(nn.Unflatten(1, p.shape), image_encoder(p.kind, p.shape, k,
                                                            arch.small_image_divisor))
              for i, p in enumerate(spaces.parts) if p.kind in ("image", "image_hwc")}
    states = {i: p.states for i, p in enumerate(spaces.parts) if p.kind == "discrete"}
    width = sum(p.states or p.size for i, p in enumerate(spaces.parts) if i not in images)
    vectors = MLPEncoder(width, arch.hidden, k) if width else None
    return DictEncoder([p.size for p in spaces.parts], images, states, vectors,
                       k * (len(images) + (vectors is not None)), k)


register_encoder("image", lambda a, s: image_encoder(s.kind, s.obs_shape, a.embedding_dim,
                                                    a.small_image_divisor))
register_encoder("image_hwc", lambda a, s: image_encoder(s.kind, s.obs_shape, a.embedding_dim,
                                                        a.small_image_divisor))
register_encoder("dict", _dict_encoder)
register_encoder("maze", lambda a, s: MazeCNN(s.obs_shape[0], a.hidden, a.embedding_dim))
BUILT_IN_ENCODERS = dict(ENCODERS)


def encoder_name(kind: str) -> str | None:
    """The registered encoder of `kind` as a run records it: None for the built-in one, else its
    builder's qualified name (`module.name`), which loading compares and never imports."""
    builder = ENCODERS[kind]
    if builder is BUILT_IN_ENCODERS.get(kind):
        return None
    return f"{getattr(builder, '__module__', '?')}.{getattr(builder, '__qualname__', repr(builder))}"


def check_encoder(kind: str, recorded: Any, source: str) -> None:
    """Refuse, in one line saying what to register, to rebuild a policy whose run recorded
    (`encoder_name`) another encoder for its `kind` of observations than this process has."""
    here = encoder_name(kind)
    if recorded == here:
        return
    trained = ("the built-in one" if recorded is None
               else f"{recorded!s:.200} (added with register_encoder)")
    now = "the built-in one" if here is None else here
    raise UserError(f"{source}: its {kind} observations were encoded by {trained}, and this "
                    f"process has {now}: register_encoder({kind!r}, ...) that encoder before "
                    "loading (the file names it; nothing it names is imported)")


def transition_actions(arch: Architecture, spaces: Spaces) -> int | tuple[int, ...]:
    """What a transition model of `arch` takes (`TransitionModel`): Discrete(A)'s A, or the
    factors of a joint action (MultiDiscrete, or Box actions binned per dimension)."""
    if spaces.action_kind == "discrete":
        return spaces.num_actions
    return spaces.action_factors(arch.action_bins)


def head_width(arch: Architecture, spaces: Spaces) -> int:
    """The actor head's logits (or a Gaussian's means) for `spaces` as `arch` reads them."""
    return sum(spaces.action_factors(arch.action_bins)) if arch.action_bins else spaces.num_actions


# The built-in agents, registered as a user's would be.
def action_distribution(arch: Architecture, spaces: Spaces) -> ActionDistribution:
    """The distribution an agent's actor parameterises: the spaces' (`for_spaces`,
    Box actions binned with `arch.action_bins`), or for Box actions with `arch.sde_sample_freq`
    gSDE's, over the k features PPO's actor reads (XLVIN takes Box actions in bins)."""
    if arch.sde_sample_freq is not None:
        return StateDependentGaussian(spaces.action_low, spaces.action_high, arch.embedding_dim,
                                      arch.sde_sample_freq)
    return for_spaces(spaces, arch.action_bins)


def _ppo(arch: Architecture, spaces: Spaces, _: MessagePassing | None) -> ActorCritic:
    """The paper's PPO baseline; with `ppo_transe`, a transition model trained only by TransE.
    Any action space (`action_distribution`); with `arch.separate_critic`, the critic gets an
    encoder of its own."""
    encoder = build_encoder(arch, spaces)
    k, actions = arch.embedding_dim, transition_actions(arch, spaces)
    transition = TransitionModel(k, actions, arch.hidden) if arch.ppo_transe else None
    critic = build_encoder(arch, spaces) if arch.separate_critic else None
    return PPOAgent(encoder, k, head_width(arch, spaces), transition, arch.transe_weight,
                    arch.transe_negatives, action_distribution(arch, spaces), arch.log_std_init,
                    critic)


def build_xlvin(arch: Architecture, spaces: Spaces, processor: MessagePassing | None,
                planner: Planner | None = None) -> ActorCritic:
    """XLVIN (paper section 3.2) around the frozen, pre-trained processor; `planner`: one of
    your own in place of the one `arch` names (a builder of a registered agent passes it)."""
    assert processor is not None
    if arch.executor_aggregation:  # run it otherwise than it was pre-trained
        processor.aggregation = arch.executor_aggregation
    encoder = build_encoder(arch, spaces)
    k = arch.embedding_dim
    transition = TransitionModel(k, transition_actions(arch, spaces), arch.hidden)
    expansion = None if arch.expansion == "all" else Expansion(
        arch.expansion, arch.expand, spaces.action_factors(arch.action_bins))
    world_model = None
    if arch.transition_loss == "vae":  # built last: TransE agents draw their weights as before
        world_model = VAEWorldModel(k, spaces.image_shape[0], spaces.image_shape[1:])
    return XLVINAgent(
        encoder, k, head_width(arch, spaces), transition, processor,
        depth=arch.depth, gamma=arch.gamma, transe_weight=arch.transe_weight,
        projections=arch.executor_projections, prune=arch.prune,
        transe_negatives=arch.transe_negatives, zero_chi=arch.zero_chi, world_model=world_model,
        distribution=action_distribution(arch, spaces), expansion=expansion, planner=planner,
    )


def _true_tree_xlvin(arch: Architecture, spaces: Spaces,
                     processor: MessagePassing | None) -> ActorCritic:
    """XLVIN on the maze's true tree (`xlvin.nn.true_tree`: the oracle arm), otherwise built as
    `build_xlvin` builds XLVIN for a maze."""
    assert processor is not None
    if arch.executor_aggregation:
        processor.aggregation = arch.executor_aggregation
    k = arch.embedding_dim
    return TrueTreeXLVIN(
        build_encoder(arch, spaces), k, spaces.num_actions,
        TransitionModel(k, spaces.num_actions, arch.hidden), processor, depth=arch.depth,
        gamma=arch.gamma, transe_weight=arch.transe_weight,
        projections=arch.executor_projections, prune=arch.prune,
        transe_negatives=arch.transe_negatives, zero_chi=arch.zero_chi,
        planner=TrueTree(arch.depth, arch.prune),
    )


def _atreec(arch: Architecture, spaces: Spaces, _: MessagePassing | None) -> ActorCritic:
    """ATreeC: the TD(lambda) backup discounts with the run's gamma."""
    encoder = build_encoder(arch, spaces)
    return ATreeCAgent(encoder, arch.embedding_dim, spaces.num_actions, depth=arch.depth,
                       gamma=arch.gamma)


def _maze_planner(readout: str | None) -> AgentBuilder:
    """VIN with `readout` (GVIN when None): no encoder, they plan on the maze itself."""

    def build(arch: Architecture, spaces: Spaces, _: MessagePassing | None) -> ActorCritic:
        if readout is None:
            return GVINAgent(spaces.num_actions)
        return VINAgent(spaces.num_actions, readout)

    return build


register_agent("xlvin", build_xlvin, executor=True, tree=True, prune=True, transe=True,
               any_actions=True, expands=True)
register_agent("ppo", _ppo, any_actions=True)
register_agent("atreec", _atreec, tree=True, min_depth=1)
register_agent("vin", _maze_planner("slice"), maze_only=True)
register_agent("vin-mean", _maze_planner("mean"), maze_only=True)
register_agent("vin-max", _maze_planner("max"), maze_only=True)
register_agent("gvin", _maze_planner(None), maze_only=True)
register_agent("xlvin-oracle", _true_tree_xlvin, executor=True, tree=True, prune=True,
               transe=True, maze_only=True)


def transe_pair(arch: Architecture, spaces: Spaces) -> nn.ModuleDict:
    """A fresh encoder and transition model of `arch`, as TransE files hold them."""
    return nn.ModuleDict({
        "encoder": build_encoder(arch, spaces),
        "transition": TransitionModel(arch.embedding_dim, transition_actions(arch, spaces),
                                      arch.hidden),
    })
BUILT_IN_AGENTS = frozenset(AGENTS)
