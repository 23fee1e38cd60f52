"""The training protocols, a registry like the agents': how a run gets the data PPO learns from
(`Protocol.data`) and what follows from that (whether its budget is env steps, what its
config must hold, where TransE's data comes from). `register_protocol` adds one; code asks
`protocol_of(cfg)` what a run's protocol does and never compares its name.

Built in: `online` (the paper's CartPole, Acrobot and Atari runs: PPO for ppo.total_steps env
steps), `low_data` (the paper's Table 1 protocol: rounds of whole episodes) and `curriculum`
(the continual 8x8 maze of the paper's Figure 3, level by level)."""

import dataclasses
import math
import warnings
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from xlvin.envs.maze import is_maze_env
from xlvin.envs.spaces import Spaces
from xlvin.errors import FieldError, UserError
from xlvin.nn.policy import ActorCritic, TransitionBatch
from xlvin.ppo.config import PPOConfig
from xlvin.ppo.curriculum import Curriculum
from xlvin.ppo.loop import DataSource, OnlineData
from xlvin.ppo.low_data import LowData
from xlvin.run.architecture import machine_memory, made_env
from xlvin.run.config import RunConfig

#: What one collected episode's records take at least, in Python objects: its first and last
#: step, its return and its length.
EPISODE_BYTES = 100


@dataclass(frozen=True)
class DataContext:
    """What a protocol's data source may take from the run it feeds."""

    #: strict TransE pre-training, to run on the first data (None: TransE is not pre-trained so)
    pretrain_on_first_data: Callable[[TransitionBatch], None] | None
    #: saves the policy of a passed level beside the run's model (`levels/level-DD.safetensors`)
    on_level_passed: Callable[[int, ActorCritic], None]


@dataclass(frozen=True)
class Budget:
    """A run's training, from below: `steps` env steps acted, each learnt from `passes` times;
    `asked` says which options set it (a `FieldError` template with `args`/`names`), `fewer`
    what to choose fewer of."""

    steps: int
    passes: int
    asked: str
    args: tuple[Any, ...]
    names: dict[str, Any]
    fewer: str


@dataclass(frozen=True)
class Protocol:
    """One way to train: `data(cfg, context)` is the `DataSource` PPO's loop learns from."""

    name: str
    help: str  # one line, for `--protocol`'s help and the refusal of an unknown name
    data: Callable[[RunConfig, DataContext], DataSource]
    #: trains for ppo.total_steps env steps: a run continues to a larger total, step-counted
    #: callbacks (eval_freq=, save_freq=) run, a population may train it
    in_env_steps: bool = False
    #: learns from whole episodes, whose steps are known only once collected (no minibatch
    #: bound by the rollout)
    whole_episodes: bool = False
    #: learns several updates from each round's data (`target_kl` skips those left once one's
    #: approx KL passes it)
    several_updates_a_round: bool = False
    #: its seeds may train together (`xlvin train --seeds`, `xlvin.run.population`), whose
    #: loop steps their data sources seed by seed
    population: bool = False
    #: saves each passed level's policy (`DataContext.on_level_passed`)
    saves_levels: bool = False
    #: (cfg) -> episodes TransE pre-trains on inside the loop, on the first data (0: before the
    #: loop, on random-policy data)
    transe_on_first_data: Callable[[RunConfig], int] = lambda cfg: 0
    #: (cfg) -> the env options of TransE's random-policy pre-training data
    transe_env_kwargs: Callable[[RunConfig], dict[str, Any]] = lambda cfg: cfg.train.env_kwargs
    #: (cfg) -> its budget (`check_budget` bounds its time); None: no known end
    budget: Callable[[RunConfig], Budget] | None = None
    check: Callable[[RunConfig], None] = lambda cfg: None  # before the env is made
    check_memory: Callable[[RunConfig, Spaces], None] = lambda cfg, spaces: None
    #: (its data source once trained) -> what the run's summary adds
    record: Callable[[DataSource], dict[str, Any]] = lambda data: {}


PROTOCOLS: dict[str, Protocol] = {}


def register_protocol(protocol: Protocol) -> None:
    """Make `protocol` one of `xlvin train --protocol` and `TrainConfig(protocol=...)`.
    Registering a name of yours again (a notebook cell run again) replaces it, with a warning
    when it differs; a built-in protocol's name is not a new protocol's."""
    if protocol.name in BUILT_IN_PROTOCOLS:
        raise UserError(f"{protocol.name!r} names a built-in protocol; register yours under "
                        "another name")
    if protocol.name in PROTOCOLS and PROTOCOLS[protocol.name] != protocol:
        warnings.warn(f"protocol {protocol.name!r} was registered already; replaced",
                      stacklevel=2)
    PROTOCOLS[protocol.name] = protocol


def protocol_of(cfg: RunConfig) -> Protocol:
    """The protocol `cfg` trains under; an unknown name is one UserError naming those known."""
    name = cfg.train.protocol
    if name not in PROTOCOLS:
        raise FieldError("{protocol} must be one of {}, got {!r} (add one with "
                         "xlvin.register_protocol)", ", ".join(PROTOCOLS), name)
    return PROTOCOLS[name]


def _online(cfg: RunConfig, context: DataContext) -> DataSource:
    t = cfg.train
    return OnlineData(made_env(t), cfg.ppo, t.seed, t.env_kwargs)


def _online_budget(cfg: RunConfig) -> Budget:
    return Budget(cfg.ppo.total_steps, cfg.ppo.update_epochs, "{total_steps=:,}", (),
                  {"total_steps": cfg.ppo.total_steps}, "steps")


def _low_data(cfg: RunConfig, context: DataContext) -> DataSource:
    t = cfg.train
    return LowData(made_env(t), cfg.low_data, t.seed, t.env_kwargs,
                   on_first_data=context.pretrain_on_first_data)


def _low_data_budget(cfg: RunConfig) -> Budget:
    """One step per episode at least (rounds x episodes), learnt from by each of its round's
    `updates` x `update_epochs` passes."""
    low, epochs = cfg.low_data, cfg.ppo.update_epochs
    return Budget(low.rounds * low.episodes, low.updates * epochs,
                  "{low_data_rounds=:,} x {low_data_episodes=:,} (one step each at least, "
                  "learnt from {:,} x {:,} times)", (low.updates, epochs),
                  {"low_data_rounds": low.rounds, "low_data_episodes": low.episodes}, "episodes")


def _round_fits(cfg: RunConfig, spaces: Spaces) -> None:
    """Refuse a low-data round whose episodes could not fit in this machine's memory, estimated
    from below: their records, and every step, one per episode at least, its observation held
    twice (as the rollout is put together) in float32."""
    episodes = cfg.low_data.episodes
    need = episodes * (math.prod(spaces.obs_shape) * 2 * 4 + EPISODE_BYTES)
    total = machine_memory()
    if need > total:
        raise FieldError("{low_data_episodes=:,} need at least {:,.0f} GiB a round; this "
                         "machine has {:,.0f} GiB", need / 2**30, total / 2**30,
                         low_data_episodes=episodes)


def _curriculum(cfg: RunConfig, context: DataContext) -> DataSource:
    t = cfg.train
    return Curriculum(t.env, cfg.ppo, cfg.curriculum, t.seed,
                      on_level_passed=context.on_level_passed)


def _check_curriculum(cfg: RunConfig) -> None:
    """The continual maze needs a maze env and a constant learning rate (it has no known end),
    and mazes with levels in its range; the curriculum sets the maze's options itself."""
    if not is_maze_env(cfg.train.env):
        raise FieldError("{protocol} curriculum runs on the maze envs, not {}", cfg.train.env)
    if cfg.ppo.anneal_lr:
        raise FieldError("{protocol} curriculum has no known end to anneal to: use {anneal_lr} "
                         "false")
    if cfg.train.env_kwargs or cfg.train.env_wrappers:
        raise FieldError("{protocol} curriculum sets the maze's options itself: no {env_kwargs} "
                         "or {env_wrappers}")
    cfg.curriculum.levels()


def _curriculum_record(data: DataSource) -> dict[str, Any]:
    assert isinstance(data, Curriculum)
    return {"curriculum": data.history}


BUILT_IN_PROTOCOLS: tuple[str, ...] = ()
for _protocol in (
    Protocol("online", "online PPO for ppo.total_steps steps", _online, in_env_steps=True,
             population=True, budget=_online_budget),
    Protocol("low_data", "the paper's low-data protocol (low_data options)", _low_data,
             whole_episodes=True, several_updates_a_round=True, population=True,
             budget=_low_data_budget, check_memory=_round_fits,
             transe_on_first_data=lambda cfg: (cfg.low_data.episodes
                                               if cfg.low_data.strict_transe else 0)),
    Protocol("curriculum", "the continual maze (curriculum options; maze envs)", _curriculum,
             saves_levels=True, check=_check_curriculum, record=_curriculum_record,
             population=True,
             transe_env_kwargs=lambda cfg: cfg.curriculum.train_env_kwargs()),
):
    register_protocol(_protocol)
#: The built-in protocols' names, in the order `--protocol`'s help gives them.
BUILT_IN_PROTOCOLS = tuple(PROTOCOLS)


def whole_rollouts(cfg: RunConfig) -> tuple[RunConfig, str | None]:
    """`cfg` with a run in env steps rounded up to whole rollouts (num_envs x num_steps, what one
    PPO update collects), and a sentence saying so when a total other than the default was
    rounded (the default 500,000 trains 500,224 with 4 envs x 128 steps)."""
    ppo = cfg.ppo
    if not protocol_of(cfg).in_env_steps or ppo.total_steps % ppo.batch_size == 0:
        return cfg, None
    steps = -(-ppo.total_steps // ppo.batch_size) * ppo.batch_size
    said = (f"{ppo.total_steps} is not a multiple of the rollout ({ppo.num_envs} envs x "
            f"{ppo.num_steps} steps = {ppo.batch_size}); training {steps}")
    rounded = dataclasses.replace(cfg, ppo=dataclasses.replace(ppo, total_steps=steps))
    return rounded, None if ppo.total_steps == PPOConfig().total_steps else said

