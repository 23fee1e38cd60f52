"""One training run from a typed config: build the agent, pre-train what the paper pre-trains,
train with PPO, save everything to a run directory; and load a run back for evaluation.

The config and its checks are `xlvin.run.config`, the agents `xlvin.run.agents`, the
cached pre-trained files `xlvin.pretrain.files`."""

import dataclasses
import json
import os
import sys
import time
from collections.abc import Callable, Generator, Iterable
from pathlib import Path
from typing import Any

from torch import nn

from xlvin.envs.failures import EnvFailed
from xlvin.io.checkpoint import CHECKPOINT, TRANSE_CHECKPOINT, Checkpointer
from xlvin.io.digests import write_sealed
from xlvin.io.executor_file import executor_architecture, read_executor_meta
from xlvin.io.run_dir import (
    CONFIG,
    MODEL,
    SUMMARY,
    MetricsLogger,
    check_new_run_dir,
    claim_run_dir,
    create_run_dir,
    read_json_object,
    require_run_dir,
    write_json,
)
from xlvin.io.weights import load_state, load_weights, save_weights
from xlvin.kernels import in_effect
from xlvin.nn.executor import MessagePassing
from xlvin.nn.policy import ActorCritic, TransitionBatch
from xlvin.process import GeneratorStates, seed_everything, set_global_generators, set_threads
from xlvin.config import to_dict
from xlvin.pretrain.executor import ExecutorConfig
from xlvin.pretrain.files import (
    cached_executor,
    executor_config,
    executor_file,
    executors_dir,
    load_executor_processor,
)
from xlvin.pretrain.files import shared_transe_file as cached_transe_file
from xlvin.pretrain.random_data import random_transitions
from xlvin.pretrain.transe import pretrain_transe
from xlvin.run.agents import (
    Architecture,
    agent_spec,
    build_agent,
    check_encoder,
    encoder_name,
    pytorch_init,
    transe_pair,
)
from xlvin.ppo.evaluation import evaluate_policy
from xlvin.ppo.loop import Trainer
from xlvin.ppo.session import Hooks, Session, TrainResult
from xlvin.errors import TrainingDiverged, UserError
from xlvin.run.config import RunConfig, TrainConfig, on_cpu
from xlvin.run.protocols import DataContext, protocol_of
from xlvin.run.architecture import action_bins, made_env
from xlvin.run.transe import transe_env_kwargs, transe_key, with_transe_pretraining
from xlvin.run.checks import big_tree_notice, check_run
from xlvin.run.saved import checkpoint_config, open_to_resume, saved_config
from xlvin.envs.spaces import Spaces, spaces_from_json, spaces_to_json


def prepare_executors(configs: Iterable[TrainConfig]) -> list[Path]:
    """The files of the default executors that runs of `configs` need, each found or pre-trained
    once here with its progress shown: before the runs' parallel workers, which would otherwise
    race to pre-train it silently (an experiment's or a sweep's shared files)."""
    executors: dict[str, ExecutorConfig] = {}
    for t in configs:
        executor = executor_config(t.executor, t) if agent_spec(t.agent).executor else None
        if executor is not None:
            executors[json.dumps(to_dict(executor), sort_keys=True)] = executor
    return [cached_executor(e, executors_dir(), progress=True) for e in executors.values()]


def shared_transe_file(
    cfg: RunConfig, spaces: Spaces, arch: Architecture, progress: bool, position: int = 0,
    out: Path | None = None,
) -> Path:
    """The TransE pre-training every run of this environment and architecture starts from
    (`TransEConfig.shared`, `xlvin.pretrain.files.shared_transe_file`; with `out`, made there):
    an encoder and transition model of `arch` built from seed 0, trained on
    `cfg.transe.episodes` random-policy episodes (seeds 10,000 on)."""
    t = cfg.train

    def pair() -> nn.ModuleDict:
        modules = transe_pair(arch, spaces)
        if t.init == "pytorch":
            pytorch_init(modules)
        return modules

    def data() -> TransitionBatch:
        return random_transitions(made_env(t), cfg.transe.episodes, seed=10_000,
                                  max_transitions=cfg.transe.max_transitions,
                                  env_kwargs=transe_env_kwargs(cfg), progress=progress,
                                  position=position, action_bins=arch.action_bins)

    return cached_transe_file(transe_key(cfg, spaces, arch), t.env, pair, data, cfg.transe,
                              t.transe_negatives, cfg.ppo.accelerate, progress, position, out)


def weights_metadata(
    cfg: RunConfig, executor_meta: dict[str, Any] | None, spaces: Spaces, **more: Any
) -> dict[str, Any]:
    """The header of a policy's weights file: the run's config, its executor's description and
    the env's spaces, enough to rebuild the policy without the env (`read_run`); with an encoder
    added by `register_encoder`, its name (`encoder_name`), which loading asks to be registered."""
    encoder = encoder_name(spaces.kind)
    return {"config": cfg.to_json(), "executor": executor_meta, "spaces": spaces_to_json(spaces),
            **({} if encoder is None else {"encoder": encoder}), **more}


@dataclasses.dataclass
class StartingPolicy:
    """The policy a run trains in place (a model's own, `xlvin.api.Model.learn`). `generators`:
    the global generators' states just after it was built, seeded as a run seeds it (None: not
    built so, e.g. loaded), which the run continues from as if it had built it itself;
    `initialised`: its weights were set since, so TransE pre-training, which initialises the
    encoder and transition, is skipped; `executor_seconds`: what making or loading its
    executor took, counted in the run's pre-training seconds."""

    agent: ActorCritic
    generators: GeneratorStates | None = None
    initialised: bool = False
    executor_seconds: float = 0.0


def train_run(
    cfg: RunConfig, out: Path, progress: bool = True, resume: bool = False,
    deadline: float | None = None, pretrain_progress: bool = True, hooks: Hooks | None = None,
    starting: StartingPolicy | None = None,
) -> tuple[ActorCritic, dict[str, Any]]:
    """Train one agent and write the run directory `out`; return the agent and the summary.
    `starting`: the policy to train, in place (`Model.learn`'s own); None: built from `cfg`,
    seeded.
    `progress`: PPO's progress bar; `pretrain_progress`: the pre-trainings' progress
    (`xlvin.progress`), which can take minutes before the first update.

    Data counts in the summary: `transe_transitions` (random-policy steps for TransE
    pre-training, 0 in the strict setting) and, for the low-data protocol, the exact episodes and
    transitions PPO learned from. Seconds: `wall_seconds` = `pretrain_seconds` (=
    `pretrain_executor_seconds`, making or loading the executor, + `pretrain_transe_seconds`,
    TransE's data and pre-training or loading its shared file) + `train_seconds` (PPO); a
    resumed run keeps the pre-training seconds of the session that pre-trained and adds up
    PPO's.

    resume=True continues the unfinished run in `out` (started with the same `cfg`) from its
    checkpoint, or from the start when it was stopped before its first checkpoint; the finished
    run is then identical to an uninterrupted one (same weights and metrics, except wall-clock
    figures). With a larger online `total_steps` it continues the run, finished or not, to that
    total (`open_to_resume`): metrics, TensorBoard, checkpoints and step counts carry on.

    `hooks` (`xlvin.ppo.session.Hooks`): the API's callbacks; a run they stop finishes there
    (weights, summary with `ppo.stopped_by_hooks`, and a checkpoint to continue from).

    `deadline` (a `time.time()` value, see `xlvin.ppo.session.Session`): training stops at the first
    update boundary after it, with a checkpoint; the run stays unfinished (no model or summary
    file, `summary["stopped_at_deadline"]` True) and `resume=True` continues it exactly.

    Everything is checked before `out` is created or changed; `out` is then claimed
    (`claim_run_dir`) for the whole run, so two processes never train into one directory.
    """
    run = run_steps(cfg, out, progress, resume, deadline, pretrain_progress, hooks, starting)
    trainer = next(run)
    try:
        result = trainer.run()
    except BaseException as err:
        run.throw(err)  # the run closes its log and raises the error as it says it
        raise
    return finish_run(run, result)


#: A run of `train_run` in its steps: it yields its trainer, which the caller runs, and is sent
#: the result, or thrown the error the training raised; it returns (agent, summary).
RunSteps = Generator[Trainer, TrainResult, tuple[ActorCritic, dict[str, Any]]]


def finish_run(run: RunSteps, result: TrainResult) -> tuple[ActorCritic, dict[str, Any]]:
    """Send a run its trainer's result: the run saves and returns (agent, summary)."""
    try:
        run.send(result)
    except StopIteration as done:
        return done.value
    raise AssertionError("a run yields one trainer")


def run_steps(
    cfg: RunConfig, out: Path, progress: bool = True, resume: bool = False,
    deadline: float | None = None, pretrain_progress: bool = True, hooks: Hooks | None = None,
    starting: StartingPolicy | None = None,
) -> RunSteps:
    """`train_run` in steps (`RunSteps`): everything before the PPO training and after it, the
    training itself the caller's (one run: `Trainer.run`; a population: `train_together`)."""
    spaces, arch = check_run(cfg)
    if notice := big_tree_notice(cfg, spaces, arch):
        print(notice, file=sys.stderr)
    cfg = with_transe_pretraining(cfg, spaces)
    config = cfg.to_json()
    if resume:
        open_to_resume(out, cfg)
    else:
        check_new_run_dir(out)
    t = cfg.train
    spec = agent_spec(t.agent)
    processor, executor_meta = None, None
    start = time.perf_counter()
    agent, initialised = ((None, False) if starting is None
                          else (starting.agent, starting.initialised))
    if spec.executor and agent is None:
        processor, executor_meta = load_executor_processor(
            executor_file(t.executor, t, pretrain_progress))
    elif spec.executor:  # the given agent holds its executor: only its description is read
        executor_meta = read_executor_meta(executor_file(t.executor, t, pretrain_progress))
    executor_seconds, start = time.perf_counter() - start, time.perf_counter()
    if starting is not None:
        executor_seconds += starting.executor_seconds
    set_threads(cfg.ppo.torch_threads)
    strict = bool(protocol_of(cfg).transe_on_first_data(cfg))
    wants_transe = spec.transe and t.pretrain_transe and not initialised
    shared = shared_transe_file(cfg, spaces, arch, pretrain_progress) if (
        wants_transe and cfg.transe.shared and not strict) else None
    pretrained_seconds = {"pretrain_executor_seconds": executor_seconds,
                          "pretrain_transe_seconds": time.perf_counter() - start}
    with claim_run_dir(out) as run_dir:
        if not resume:
            create_run_dir(run_dir, config)
        continuing = resume and open_to_resume(run_dir, cfg)
        if starting is None or starting.generators is None:
            seed_everything(t.seed)  # the initial weights; the loop seeds training itself
        if starting is None:
            agent = build_agent(arch, spaces, processor).to(t.device)
        elif starting.generators is not None:  # as if the run had just built it
            set_global_generators(starting.generators)
        summary = yield from _train_claimed(cfg, run_dir, agent, executor_meta, shared, progress,
                                            pretrain_progress, resume, deadline,
                                            pretrained_seconds, spaces, hooks, continuing,
                                            initialised)
    return agent, summary


def _train_claimed(
    cfg: RunConfig, run_dir: Path, agent: ActorCritic, executor_meta: dict[str, Any] | None,
    shared: Path | None, progress: bool, pretrain_progress: bool, resume: bool,
    deadline: float | None, pretrained_seconds: dict[str, float], spaces: Spaces,
    hooks: Hooks | None, continuing: bool, initialised: bool = False,
) -> Generator[Trainer, TrainResult, dict[str, Any]]:
    """`train_run` once its run directory is claimed: pre-train, train (the trainer it yields),
    save; the summary (`pretrained_seconds`: the pre-trainings' seconds before the claim).
    `continuing`: the run continues to a new total (`open_to_resume`); its config.json, weights
    and summary keep describing the run as it was until that total is reached, so a refused or
    interrupted continuation loses nothing. `initialised`: `StartingPolicy.initialised`."""
    t, protocol = cfg.train, protocol_of(cfg)
    strict = bool(protocol.transe_on_first_data(cfg))
    wants_transe = agent_spec(t.agent).transe and t.pretrain_transe and not initialised
    summary: dict[str, Any] = {"executor": executor_meta, "transe_transitions": 0,
                               **pretrained_seconds, **({"initialised": True} if initialised else {})}
    checkpoint = Checkpointer(run_dir / CHECKPOINT, t.checkpoint_every, extra=summary,
                              run=cfg.to_json(), normalize=checkpoint_config(cfg))
    resuming = resume and checkpoint.exists()
    rewind_to = checkpoint.log_step() if resume else None

    def pretrain(data: TransitionBatch, epochs: Checkpointer | None = None) -> None:
        # Strict pre-training runs inside the PPO loop, whose flat Adam already holds these
        # parameters: a second flat Adam would rebind them away from it, so torch's Adam here.
        begin = time.perf_counter()
        summary["transe"] = pretrain_transe(
            agent.encoder, agent.transition, data, cfg.transe, seed=t.seed,
            progress=pretrain_progress, accelerate=cfg.ppo.accelerate and not strict,
            checkpoint=epochs, negatives=t.transe_negatives,
        )
        summary["transe_transitions"] = 0 if strict else len(data.obs)
        summary["pretrain_transe_seconds"] += time.perf_counter() - begin

    if shared is not None and not resuming:
        tensors, meta = load_weights(shared, what="TransE weights")
        load_state(nn.ModuleDict({"encoder": agent.encoder, "transition": agent.transition}),
                   tensors, shared)
        summary["transe"], summary["transe_transitions"] = meta["transe"], meta["transitions"]
        summary["transe_shared_file"] = shared.name
    elif wants_transe and not strict and not resuming:
        start = time.perf_counter()
        try:
            data = random_transitions(made_env(t), cfg.transe.episodes, seed=t.seed + 10_000,
                                      max_transitions=cfg.transe.max_transitions,
                                      env_kwargs=transe_env_kwargs(cfg),
                                      progress=pretrain_progress,
                                      action_bins=action_bins(t, spaces))
        except EnvFailed as err:
            raise err.resumable(t.env, run_dir, checkpoint.exists()) from err.__cause__
        summary["pretrain_transe_seconds"] += time.perf_counter() - start
        pretrain(data, Checkpointer(run_dir / TRANSE_CHECKPOINT, 1, run=cfg.to_json(),
                                    normalize=saved_config))
    logger = MetricsLogger(run_dir, rewind_to=rewind_to)
    logger.check()
    session = Session(log=logger, progress=progress, checkpoint=checkpoint, deadline=deadline,
                      hooks=hooks)
    try:
        data = protocol.data(cfg, DataContext(
            pretrain_on_first_data=pretrain if wants_transe and strict else None,
            on_level_passed=level_weights_saver(run_dir, cfg, executor_meta, spaces)))
        result = yield Trainer(agent, data, cfg.ppo, t.seed, session)
        summary.update(protocol.record(data))
        summary["ppo_transitions"] = result.transitions
        summary["ppo_episodes"] = result.episodes
    except TrainingDiverged as err:
        logger.close(after_error=True)
        kept = f"; the last good checkpoint is kept in {checkpoint.path}" if checkpoint.exists() else ""
        raise TrainingDiverged(f"{err}{kept}") from None
    except EnvFailed as err:
        logger.close(after_error=True)
        raise err.resumable(t.env, run_dir, checkpoint.exists()) from err.__cause__
    except BaseException:
        logger.close(after_error=True)
        raise
    logger.close()
    summary["ppo"] = dataclasses.asdict(result)
    summary["resumed"] = resuming
    summary["kernels"] = in_effect()  # of the process that finished the run
    in_loop = summary["pretrain_transe_seconds"] if strict else 0.0  # on the first data
    summary["train_seconds"] = result.wall_time_s - in_loop
    summary["pretrain_seconds"] = (summary["pretrain_executor_seconds"]
                                   + summary["pretrain_transe_seconds"])
    summary["wall_seconds"] = summary["pretrain_seconds"] + summary["train_seconds"]
    summary["stopped_at_deadline"] = result.stopped_at_deadline
    if result.stopped_at_deadline:  # unfinished: resumable from the checkpoint just saved
        return summary
    save_weights(run_dir / MODEL, agent, weights_metadata(cfg, executor_meta, spaces))
    if continuing:
        write_json(run_dir / CONFIG, cfg.to_json())
    write_sealed(run_dir / SUMMARY, summary, run_dir)
    return summary


#: Where a curriculum keeps the policy of each passed level: DIR/levels/level-DD.safetensors.
LEVELS_DIR = "levels"


def level_weights_file(run_dir: Path, level: int) -> Path:
    return run_dir / LEVELS_DIR / f"level-{level:02d}.safetensors"


def level_weights_saver(
    run_dir: Path, cfg: RunConfig, executor_meta: dict[str, Any] | None, spaces: Spaces
) -> Callable[[int, ActorCritic], None]:
    """Save the policy of each passed level beside the run's model (`load_run(dir, level=d)`
    loads it back)."""

    def save(level: int, policy: ActorCritic) -> None:
        path = level_weights_file(run_dir, level)
        path.parent.mkdir(exist_ok=True)
        save_weights(path, policy, weights_metadata(cfg, executor_meta, spaces, level=level))

    return save


def load_run(run_dir: Path, level: int | None = None) -> tuple[ActorCritic, RunConfig]:
    """(policy, config) of `read_run`."""
    agent, cfg, _ = read_run(run_dir, level)
    return agent, cfg


def read_run(
    run_dir: Path, level: int | None = None
) -> tuple[ActorCritic, RunConfig, Spaces]:
    """Rebuild a finished run's policy from DIR/model.safetensors, or a curriculum's policy
    of a passed `level` from its level file (an unfinished run keeps those too: one stopped by a
    time limit); return it with the run's config and the env's spaces. Nothing in the file is
    trusted: its config is checked as training checks it (values, memory), its executor
    description and spaces field by field, and no code it names is imported or run. The env is
    not needed: the file holds its spaces (a file written before it did is read by making the
    env). The policy is built on the CPU (the caller moves it), so a run trained on a GPU loads
    on a machine without one."""
    run_dir = require_run_dir(run_dir) if level is None else Path(run_dir)
    source = run_dir / MODEL if level is None else level_weights_file(run_dir, level)
    tensors, meta = load_weights(source)
    cfg = RunConfig.from_saved(meta.get("config"), str(source))
    stored = spaces_from_json(meta["spaces"], str(source)) if "spaces" in meta else None
    spaces, arch = check_run(on_cpu(cfg), stored)
    check_encoder(spaces.kind, meta.get("encoder"), str(source))
    processor = None
    if agent_spec(cfg.train.agent).executor:
        processor = MessagePassing(**executor_architecture(meta.get("executor"), source))
    check_same_run(run_dir / CONFIG, cfg, source)
    agent = build_agent(arch, spaces, processor)
    load_state(agent, tensors, source)
    return agent.eval(), cfg, spaces


def check_same_run(config_file: Path, cfg: RunConfig, source: Path) -> None:
    """Refuse, in one UserError, a run directory whose `config_file` (config.json) and weights
    (`source`, whose header says `cfg`) describe different runs: another run's config copied in
    beside them, say, which would evaluate the weights on its env. A run without a config.json
    (a curriculum's level files alone) is its weights' header."""
    if not os.path.lexists(config_file):
        return
    recorded = RunConfig.from_saved(read_json_object(config_file), str(config_file)).to_json()
    weights = cfg.to_json()
    differ = [f"{section}.{name}" for section in weights for name in weights[section]
              if recorded[section][name] != weights[section][name]]
    if differ:
        section, name = differ[0].split(".")
        raise UserError(
            f"{config_file} and {source} describe different runs ({', '.join(differ[:3])}"
            f"{' ...' if len(differ) > 3 else ''} differ: {differ[0]} is "
            f"{json.dumps(recorded[section][name])[:40]} in one, "
            f"{json.dumps(weights[section][name])[:40]} in the other); refused")


def evaluate_run(run_dir: Path, episodes: int, seed: int) -> dict[str, Any]:
    """Mean and std return of a saved policy over `episodes` fresh evaluation episodes."""
    return evaluate_agent(*load_run(run_dir), episodes=episodes, seed=seed)


def evaluate_agent(
    agent: ActorCritic, cfg: RunConfig, episodes: int, seed: int, deterministic: bool = True
) -> dict[str, Any]:
    """Mean and std return (and every return) of `agent`, trained under `cfg`, over `episodes`
    fresh episodes of the run's environment seeded seed, seed + 1, ...: what `xlvin evaluate`
    reports."""
    set_threads(cfg.ppo.torch_threads)
    return evaluate_policy(
        agent, made_env(cfg.train), episodes=episodes, seed=seed, deterministic=deterministic,
        accelerate=cfg.ppo.accelerate, env_kwargs=cfg.train.env_kwargs,
    )
