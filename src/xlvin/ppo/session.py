"""A training session: what surrounds the algorithm, the same for every protocol. Checkpoints
(and resume from them), the wall-clock deadline, SIGTERM, the API's hooks, the metrics log and
the progress bar are one `Session`, which `xlvin.ppo.loop.Trainer` asks at every update boundary
whether to go on, and tells of every round of data, evaluation and update.

    session.open(run)             # resume from the checkpoint, if there is one; start the clock
    while ...:
        if not session.go_on(run):  # deadline, hooks, SIGTERM; checkpoint when due
            break
        ... collect, update ...
        session.updated(run, metrics)   # hooks, log, progress bar
    session.end(run)              # a last checkpoint, to continue from
"""

import math
import time
from collections.abc import Callable
from dataclasses import dataclass, field, fields
from typing import Any, Protocol

import torch
from tqdm import tqdm

from xlvin.errors import FieldError, UserError, one_line
from xlvin.io.checkpoint import Checkpointer, section
from xlvin.nn.policy import ActorCritic
from xlvin.ppo.storage import Rollout
from xlvin.signals import Terminated, termination_requested

LogFn = Callable[[int, dict[str, float]], None]


@dataclass
class TrainResult:
    """Counts and curves of a training run."""

    updates: int = 0
    env_steps: int = 0  # steps taken in the training envs (all envs, autoreset steps included)
    transitions: int = 0  # real transitions PPO learned from
    episodes: int = 0  # training episodes finished (low data: the counted ones)
    wall_time_s: float = 0.0
    sps: float = 0.0  # env steps per second over the run
    episode_returns: list[float] = field(default_factory=list)  # every finished episode, in order
    round_returns: list[float] = field(default_factory=list)  # mean return of each round's episodes
    progress: list[dict[str, float]] = field(default_factory=list)  # evaluations during training
    stopped_rounds: list[int] = field(default_factory=list)  # rounds cut short by target_kl
    stopped_at_deadline: bool = False  # ended before its last update by the session's deadline
    stopped_by_hooks: bool = False  # ended before its last update by the session's hooks
    last_metrics: dict[str, float] = field(default_factory=dict)  # metrics of the last update

    def add_round(self, rollout: Rollout) -> None:
        self.env_steps += rollout.num_steps * rollout.num_envs
        self.transitions += int(rollout.valid.sum())
        self.episodes += len(rollout.episode_returns)
        self.episode_returns += rollout.episode_returns
        if rollout.episode_returns:
            self.round_returns.append(mean(rollout.episode_returns))


class Hooks(Protocol):
    """What a session's `hooks` are called with (the API's callbacks sit behind them): after
    each round's data is collected, after each update (with its metrics), after each evaluation
    (with its result). Returning False stops training at the next update boundary, with a
    checkpoint."""

    def on_rollout(self, policy: ActorCritic, result: TrainResult) -> bool: ...

    def on_update(self, policy: ActorCritic, result: TrainResult,
                  metrics: dict[str, float]) -> bool: ...

    def on_evaluation(self, policy: ActorCritic, result: TrainResult,
                      evaluation: dict[str, float]) -> bool: ...

    def recorded(self) -> dict[str, float]:
        """Values the callbacks recorded since the last update, logged with this one's metrics."""
        ...


class Run(Protocol):
    """What a session checkpoints and restores of a run in progress (`xlvin.ppo.loop.Trainer`)."""

    policy: ActorCritic
    optimizer: Any
    generator: torch.Generator
    data: Any  # the run's `xlvin.ppo.loop.DataSource`
    total: int | None  # updates in all; None: open-ended
    result: TrainResult
    rollout: Rollout | None  # the current round's data
    averaged: dict[str, torch.Tensor]  # sums of the weights after the last updates

    def log_step(self) -> int: ...


def deadline_after(minutes: float | None) -> float | None:
    """The `time.time()` deadline `minutes` from now (None: no deadline); a FieldError for a
    number that is not finite and positive."""
    if minutes is None:
        return None
    if not math.isfinite(minutes) or minutes <= 0:
        raise FieldError("{deadline_minutes} must be a finite number > 0, got {}", minutes,
                         deadline_minutes=minutes)
    return time.time() + 60 * minutes


def has_passed(deadline: float | None) -> bool:
    """Whether the `time.time()` deadline has passed (never, without one)."""
    return deadline is not None and time.time() >= deadline


class Session:
    """Checkpoints, deadline, hooks, log and progress bar of one training run.

    `log(step, metrics)` after every update (step: `Run.log_step`, env steps or updates).

    `checkpoint`: saved before the first update and every `checkpoint.every` updates (with the
    round's data when it falls inside a round); when its file exists the run continues from it
    and ends exactly as an uninterrupted run (for envs `xlvin.envs.env_state` can restore).

    `deadline` (a `time.time()` value): once it has passed, training stops before the next
    update, saves `checkpoint` there (so a resumed run ends exactly as an uninterrupted one) and
    returns with `stopped_at_deadline` set; the policy is left as it was after the last update.

    `hooks` (`Hooks`): called after each round's collection, update and evaluation; once one
    returns False, training stops at the next update boundary, saves `checkpoint` there and
    returns with `stopped_by_hooks` set. A run that ends (its last update, or stopped by `hooks`)
    saves a last checkpoint there too, so that it can be continued (`resume` with more rounds).

    SIGTERM (`xlvin.signals`) stops training at the next update boundary with a checkpoint and
    raises `Terminated`.
    """

    def __init__(
        self,
        log: LogFn | None = None,
        progress: bool = True,
        checkpoint: Checkpointer | None = None,
        deadline: float | None = None,
        hooks: Hooks | None = None,
    ) -> None:
        self.log, self.progress, self.checkpoint = log, progress, checkpoint
        self.deadline, self.hooks = deadline, hooks
        self.saved_at = -1  # the updates at the last checkpoint
        self.stop_asked = False  # by the hooks
        self.bar: tqdm | None = None
        self.clock = time.perf_counter()  # when the run would have started, resumes included

    def open(self, run: Run) -> None:
        """Continue `run` from the checkpoint when there is one; start the clock and the bar."""
        if self.checkpoint is not None and self.checkpoint.exists():
            self._restore(run)
            self.saved_at = run.result.updates
        self.clock = time.perf_counter() - run.result.wall_time_s
        self.bar = tqdm(total=run.total, initial=run.result.updates, disable=not self.progress,
                        unit="update", desc=run.data.env_id)

    def elapsed(self) -> float:
        """Seconds the run has trained, resumes included."""
        return time.perf_counter() - self.clock

    def go_on(self, run: Run, inside_round: bool, signalled: bool | None = None) -> bool:
        """At an update boundary: checkpoint when due (or before stopping), raise `Terminated`
        on SIGTERM (`signalled`: whether one came, where the caller asked; runs trained together
        ask once for all); False once the deadline has passed or a hook asked to stop."""
        result = run.result
        stop = has_passed(self.deadline)
        signalled = termination_requested() if signalled is None else signalled
        if (self.checkpoint is not None and (stop or self.stop_asked or signalled
                                             or self.checkpoint.due(result.updates))
                and result.updates != self.saved_at):
            self._save(run, run.rollout if inside_round else None)
        if signalled:
            raise Terminated(f"stopped after update {result.updates}" + (
                ", checkpoint saved there" if self.checkpoint is not None else ""))
        if stop or self.stop_asked:
            result.stopped_at_deadline, result.stopped_by_hooks = stop, self.stop_asked and not stop
            return False
        return True

    def collected(self, run: Run) -> None:
        """After a round's data is collected (and counted in `run.result`)."""
        self.stop_asked = self.hooks is not None and self.hooks.on_rollout(
            run.policy, run.result) is False

    def evaluated(self, run: Run, evaluation: dict[str, float]) -> None:
        """After an evaluation during training."""
        if self.hooks is not None and self.hooks.on_evaluation(
                run.policy, run.result, evaluation) is False:
            self.stop_asked = True

    def updated(self, run: Run, metrics: dict[str, float]) -> None:
        """After an update: the hooks' recorded values join `metrics`, which are logged."""
        result = run.result
        if self.hooks is not None:
            metrics.update(self.hooks.recorded())
        result.last_metrics = metrics
        if self.log is not None:
            self.log(run.log_step(), metrics)
        if self.hooks is not None and self.hooks.on_update(run.policy, result, metrics) is False:
            self.stop_asked = True
        assert self.bar is not None
        self.bar.update()
        if result.episode_returns:
            self.bar.set_postfix(ret=f"{mean(result.episode_returns[-20:]):.1f}", refresh=False)

    def end(self, run: Run) -> None:
        """At the end of training: a last checkpoint, continuable from there."""
        if (self.checkpoint is not None and self.checkpoint.every > 0
                and run.result.updates != self.saved_at):
            self._save(run, None)

    def close(self) -> None:
        if self.bar is not None:
            self.bar.close()

    def _restore(self, run: Run) -> None:
        """Restore policy, optimizer, RNGs and data source from the checkpoint, and the run's
        result so far, the round's data (None between rounds) and the weight sums of the
        averaging. A checkpoint that does not fit is one UserError, raised before anything is
        written."""
        assert self.checkpoint is not None
        resumed = self.checkpoint.restore(run.policy, run.optimizer, run.generator)
        loop = resumed.loop
        try:
            result = TrainResult(**loop["result"])
            run.data.load_state_dict(loop["data"], section(resumed.tensors, "data/"))
            rollout = None
            if loop["rollout"] is not None:
                rollout = Rollout(**section(resumed.tensors, "rollout/"), **loop["rollout"])
        except (KeyError, TypeError, ValueError, RuntimeError, IndexError, AttributeError) as err:
            reason = one_line(err)
            raise UserError(
                f"checkpoint {self.checkpoint.path} does not fit this run: {reason}") from None
        run.result, run.rollout = result, rollout
        run.averaged = section(resumed.tensors, "average/")

    def _save(self, run: Run, rollout: Rollout | None) -> None:
        assert self.checkpoint is not None
        run.result.wall_time_s = self.elapsed()
        data_state, data_tensors = run.data.state_dict()
        tensors = {f"data/{k}": v for k, v in data_tensors.items()}
        tensors.update({f"average/{k}": v for k, v in run.averaged.items()})
        loop: dict[str, Any] = {
            "result": _as_json(run.result), "data": data_state, "rollout": None,
            "log_step": run.log_step(),
        }
        if rollout is not None:
            rollout_tensors, loop["rollout"] = rollout.to_checkpoint()
            tensors.update({f"rollout/{k}": v for k, v in rollout_tensors.items()})
        self.checkpoint.save(run.policy, run.optimizer, run.generator, loop, tensors)
        self.saved_at = run.result.updates


def _as_json(result: TrainResult) -> dict[str, Any]:
    """`dataclasses.asdict(result)` for the checkpoint's JSON, written at once: its fields as
    they are (asdict deep-copies every list of numbers, which cost more than the rest of a
    checkpoint of a long run)."""
    return {f.name: getattr(result, f.name) for f in fields(result)}


def mean(values: list[float] | list[int]) -> float:
    return float(sum(values)) / len(values)
