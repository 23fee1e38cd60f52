"""What a run derives from its config and its env, once: the env it makes and its network's
`Architecture` with every preset resolved (widths, action bins, tree expansion, the tree's size
against this machine's memory), what the agent registry (`xlvin.run.agents`) builds from."""

import math
import os

from xlvin.envs.maze import is_maze_env
from xlvin.envs.spaces import MIN_IMAGE_SIZE, Spaces, require_registered
from xlvin.envs.wrappers import wrapped_env_id
from xlvin.errors import FieldError
from xlvin.nn.executor import MessagePassing
from xlvin.nn.policy import ActorCritic
from xlvin.run.agents import Architecture, agent_spec, build_agent
from xlvin.run.config import (
    DEFAULT_BINS,
    DEFAULT_SAMPLES,
    MAX_FULL_EXPANSION,
    RunConfig,
    TrainConfig,
)

#: F of the paper's classic-control runs, per env; 64 for the others.
PAPER_HIDDEN = {"CartPole": 64, "Acrobot": 32, "MountainCar": 16}
#: The paper's maze encoder width (its convolutions' channels and MLP hidden layer; --hidden).
MAZE_CHANNELS = 128


#: Floats kept per latent tree node for the backward pass, per unit of embedding size k and of
#: hidden width F (the node, the transition MLP's activations, K executor steps' messages):
#: a generous round estimate used only to refuse trees that cannot fit in memory.
FLOATS_PER_NODE = (8, 4)


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
            raise FieldError("{action_bins=} bins Box actions; {} has {} actions", t.env,
                             spaces.action_kind, action_bins=t.action_bins)
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
        raise FieldError("{expand=} is more than the {} joint actions of {}", counted, t.env,
                         expand=t.expand)
    if method == "gaussian" and not bins:
        raise FieldError("{expansion} gaussian draws around ordered bins of Box actions; {} has "
                         "{} actions: use uniform or policy", t.env, spaces.action_kind)
    return method, t.expand or min(DEFAULT_SAMPLES, joint)


def architecture(cfg: RunConfig, spaces: Spaces) -> Architecture:
    """The run's network with every preset resolved, its tree checked against this machine's
    memory (a depth K whose tree could not fit is refused, saying what it needs)."""
    t = cfg.train
    spec = agent_spec(t.agent)
    bins = action_bins(t, spaces)
    if spaces.action_kind != "discrete" and not spec.any_actions:
        raise FieldError("{} has {} actions; {agent=} needs Discrete actions (use {agent} ppo "
                         "or xlvin)", t.env, spaces.action_kind, agent=t.agent)
    if spaces.action_kind == "box" and not bins and t.ppo_transe:
        raise FieldError("{} has Box actions; {ppo_transe} needs them binned: add {action_bins} "
                         "B (e.g. {})", t.env, DEFAULT_BINS)
    method, samples = expansion(t, spaces, bins) if spec.expands else ("all", 0)
    children = samples or math.prod(spaces.action_factors(bins))
    norm_obs = cfg.ppo.normalises(spaces.action_kind == "box" and spaces.kind == "flat")[0]
    if norm_obs and spaces.kind != "flat":
        raise FieldError("{norm_obs} normalises flat observations; {} has {} observations",
                         t.env, spaces.kind)
    if cfg.ppo.use_sde and spaces.action_kind != "box":
        raise FieldError("{use_sde} explores Box actions; {} has {} actions", t.env,
                         spaces.action_kind)
    if cfg.ppo.use_sde and bins:
        raise FieldError("{use_sde} explores with a Gaussian; {action_bins=} makes the policy a "
                         "categorical over bins: use one", action_bins=bins)
    if t.separate_critic and t.agent != "ppo":
        raise FieldError("{separate_critic} is an option of {agent} ppo, not {}", t.agent)
    if t.activation != "relu" and spaces.kind != "flat":
        raise FieldError("{activation=} is the flat-observation encoder's; {} has {} "
                         "observations", t.env, spaces.kind, activation=t.activation)
    if t.prune > children:
        raise FieldError("{prune=}: the environment has only {} actions", children,
                         prune=t.prune)
    if t.prune and spaces.action_kind != "discrete":
        raise FieldError("{prune} ranks Discrete actions; {} has {} actions: use {expansion}",
                         t.env, spaces.action_kind)
    if t.transition_loss == "vae" and spaces.kind != "image":
        raise FieldError("{transition_loss} vae reconstructs images [C, H, W]; {} has {} "
                         "observations", t.env, spaces.kind)
    k, f = embedding_width(t, spaces), hidden_width(t)
    nodes: int | None = 1
    if agent_spec(t.agent).tree:
        batch = minibatch_size(cfg)
        node_bytes = tree_node_bytes(k, f) * batch
        total = machine_memory()
        nodes = tree_nodes(children, t.depth, total // node_bytes)
        if nodes is None:
            joint = (" ({} bins ^ {} dimensions, all expanded: sample some with {expand} N)"
                     if bins and not samples else "")
            raise FieldError(
                "{depth=} with {}" + joint + " actions builds more than {:,} latent states per "
                "observation, too many for a minibatch of {} in this machine's {:,.0f} GiB",
                number(children), *((bins, spaces.num_actions) if joint else ()),
                total // node_bytes, batch, total / 2**30, depth=t.depth)
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


def made_env(cfg: TrainConfig) -> str:
    """The id every path that makes the run's env makes: its env, registered already
    (`require_registered`: a weights header's id is never handed to gym.make to import), in its
    wrappers, each named by the user (`xlvin.envs.wrappers.wrapped_env_id`)."""
    return wrapped_env_id(require_registered(cfg.env), cfg.env_wrappers)


def agent_of(cfg: RunConfig, spaces: Spaces, processor: MessagePassing | None = None) -> ActorCritic:
    """The network `cfg` builds for an env of `spaces` (not seeded here): `build_agent` of the
    derived architecture, for code that holds a config but no env (tests, benchmarks)."""
    return build_agent(architecture(cfg, spaces), spaces, processor)
