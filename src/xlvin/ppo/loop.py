"""The training loop every protocol shares: rounds of (collect data with the current policy, PPO
updates on it).

    for r in range(data.rounds):
        rollout = data.collect(policy, r)            # online: T steps of N envs; low data: episodes
        for _ in range(data.updates_per_round):
            ppo_update(policy, optimizer, rollout)   # + learning-rate schedule, evaluation, logging

A protocol is a `DataSource`: online PPO (`OnlineData`: one rollout per round, one update, the
envs carried over from round to round) and the paper's low-data regime
(`xlvin.ppo.low_data.LowData`: a few whole episodes per round, many updates on them) differ
only there. Checkpoints, resume, seeding, progress bars and logging live here, once.
"""

import dataclasses
import sys
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from typing import Any, Protocol

import gymnasium as gym
import numpy as np
import torch
from tqdm import tqdm

from xlvin.accel.flat_adam import FlatAdam
from xlvin.envs.failures import EnvFailed
from xlvin.errors import UserError, one_line
from xlvin.io.checkpoint import Checkpointer, section
from xlvin.nn.normalization import RunningNorm
from xlvin.nn.policy import ActorCritic, TransitionBatch
from xlvin.process import seed_everything, set_threads
from xlvin.signals import Terminated, termination_deferred, termination_requested
from xlvin.ppo.collect import (
    RolloutState,
    collect_rollout,
    make_vector_env,
    policy_device,
    reset_envs,
)
from xlvin.envs.env_state import env_state, inexact_resume_notice, restorable, restore_env_state
from xlvin.ppo.evaluation import Evaluator
from xlvin.ppo.update import PPOConfig, make_optimizer, ppo_update, set_learning_rate
from xlvin.ppo.storage import Rollout

LogFn = Callable[[int, dict[str, float]], None]
#: Seeds of the evaluations during training; disjoint from training (seed + env index) and from
#: the final evaluation of `xlvin evaluate` (1,000,000 onwards). Evaluation i plays episodes
#: PROGRESS_EVAL_SEED + i * episodes onwards: every evaluation sees fresh episodes.
PROGRESS_EVAL_SEED = 500_000


class DataSource(Protocol):
    """Where a protocol's data comes from."""

    env_id: str
    #: the env's keyword arguments (evaluations during training make their envs with them)
    env_kwargs: dict[str, Any]
    #: rounds of data; None: open-ended, the source says when it is done (`finished`)
    rounds: int | None
    updates_per_round: int
    #: the x-axis of the logged metrics: env steps (True) or updates (False)
    log_by_env_steps: bool

    def collect(
        self, policy: ActorCritic, round: int, generator: torch.Generator, accelerate: bool
    ) -> Rollout:
        """Round `round`'s data, acted by the current policy (actions sampled with `generator`)."""
        ...

    def state_dict(self) -> tuple[dict[str, Any], dict[str, torch.Tensor]]:
        """What a checkpoint taken between rounds needs to continue exactly: (JSON, tensors)."""
        ...

    def load_state_dict(self, state: dict[str, Any], tensors: dict[str, torch.Tensor]) -> None: ...

    def finished(self) -> bool:
        """Whether there is no more data to learn from (asked before each round)."""
        ...

    def metrics(self) -> dict[str, float]:
        """The source's own numbers, logged after every update (a curriculum's level)."""
        ...

    def close(self) -> None: ...


class Hooks(Protocol):
    """What `train(hooks=...)` calls (the API's callbacks sit behind it): after each round's data
    is collected, after each update (with its metrics), after each evaluation (with its result).
    Returning False stops training at the next update boundary, with a checkpoint."""

    def on_rollout(self, policy: ActorCritic, result: "TrainResult") -> bool: ...

    def on_update(self, policy: ActorCritic, result: "TrainResult",
                  metrics: dict[str, float]) -> bool: ...

    def on_evaluation(self, policy: ActorCritic, result: "TrainResult",
                      evaluation: dict[str, float]) -> bool: ...

    def recorded(self) -> dict[str, float]:
        """Values the callbacks recorded since the last update, logged with this one's metrics."""
        ...


@dataclass
class Evaluation:
    """Greedy evaluations of the policy during training (the progress curve): `points` of them,
    evenly over the updates (as many as there are updates: after every update), `episodes`
    fresh episodes each (seeds from PROGRESS_EVAL_SEED). They are not training data and count in
    no budget."""

    points: int = 0
    episodes: int = 10

    def due(self, update: int, total: int) -> bool:
        """After update number `update` (1-based) of `total`?"""
        return any(round(total * (i + 1) / self.points) == update for i in range(self.points))


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
    stopped_at_deadline: bool = False  # ended before its last update by `train(deadline=...)`
    stopped_by_hooks: bool = False  # ended before its last update by `train(hooks=...)`
    last_metrics: dict[str, float] = field(default_factory=dict)  # metrics of the last update

    def add_round(self, rollout: Rollout) -> None:
        self.env_steps += rollout.num_steps * rollout.num_envs
        self.transitions += int(rollout.valid.sum())
        self.episodes += len(rollout.episode_returns)
        self.episode_returns += rollout.episode_returns
        if rollout.episode_returns:
            self.round_returns.append(_mean(rollout.episode_returns))


class OnlineData:
    """Online PPO: every round is one rollout of `cfg.num_steps` steps of `cfg.num_envs` envs,
    continuing where the previous one stopped, followed by one update.

    Env i is reset with seed `seed + i`. Checkpoints hold every env's state, exact for envs whose
    state `xlvin.envs.env_state` restores (classic control, Atari); other envs are reset with seed
    `seed + round` on resume instead.

    Normalisation (`cfg.normalises`, on by default for Box actions): a policy with observation
    statistics (a `RunningNorm` module) acts a whole rollout with them frozen; they are then
    updated with the rollout's observations and the rollout relabelled under them (`relabel`),
    so that the update and the next rollout see the observations alike. Rewards are scaled by
    the running std of each env's discounted return (`scale_rewards`); its statistics and the
    envs' running returns are part of the checkpoint.
    """

    log_by_env_steps = True
    updates_per_round = 1

    def __init__(
        self, env_id: str, cfg: PPOConfig, seed: int, env_kwargs: dict[str, Any] | None = None
    ) -> None:
        self.env_id, self.num_steps, self.seed = env_id, cfg.num_steps, seed
        self.env_kwargs = env_kwargs or {}
        self.rounds = cfg.num_updates
        self.vectorization = "ale" if cfg.atari_vector == "ale" else "sync"
        self.envs = make_vector_env(env_id, cfg.num_envs, env_kwargs=env_kwargs,
                                    vectorization=self.vectorization, lend=True)
        self.exact = restorable(self.envs)
        self.state = reset_envs(self.envs, seed)
        self.next_round = 0
        box = isinstance(self.envs.single_action_space, gym.spaces.Box)
        self.gamma = cfg.gamma
        self.reward_stats = RunningNorm((), clip=cfg.clip_reward) if cfg.normalises(box)[1] else None
        self.returns = np.zeros(cfg.num_envs)  # each env's discounted return, for reward scaling

    def collect(
        self, policy: ActorCritic, round: int, generator: torch.Generator, accelerate: bool
    ) -> Rollout:
        self.next_round = round + 1
        rollout = collect_rollout(self.envs, policy, self.num_steps, self.state, generator,
                                  accelerate)
        norms = [m for m in policy.modules() if isinstance(m, RunningNorm)]
        if norms:
            for norm in norms:
                norm.update(rollout.obs[:-1][rollout.valid])
            rollout = relabel(rollout, policy)
        if self.reward_stats is not None:
            scale_rewards(rollout, self.returns, self.reward_stats, self.gamma)
        return rollout

    def state_dict(self) -> tuple[dict[str, Any], dict[str, torch.Tensor]]:
        tensors = {
            "obs": torch.from_numpy(self.state.obs),
            "autoreset": torch.from_numpy(self.state.autoreset),
        }
        if self.reward_stats is not None:
            tensors["returns"] = torch.from_numpy(self.returns)
            tensors.update({f"reward_{k}": v for k, v in self.reward_stats.state_dict().items()})
        envs = env_state(self.envs) if self.exact else None
        return {"envs": envs, "next_round": self.next_round}, tensors

    def load_state_dict(self, state: dict[str, Any], tensors: dict[str, torch.Tensor]) -> None:
        self.next_round = state["next_round"]
        if self.reward_stats is not None:
            self.returns = tensors["returns"].numpy().copy()
            self.reward_stats.load_state_dict({k: tensors[f"reward_{k}"]
                                               for k in ("mean", "var", "count")})
        if state["envs"] is None:
            if self.vectorization == "ale":
                raise UserError("a run on ale-py's vector env (--atari-vector ale) cannot resume: "
                                "its emulators' states are not saved (train with --atari-vector "
                                "gym to resume)")
            self.state = reset_envs(self.envs, self.seed + self.next_round)
            print(inexact_resume_notice(self.env_id, self.seed + self.next_round), file=sys.stderr)
            return
        restore_env_state(self.envs, state["envs"])
        self.state = RolloutState(
            obs=tensors["obs"].numpy().copy(), autoreset=tensors["autoreset"].numpy().copy()
        )

    def finished(self) -> bool:
        return False

    def metrics(self) -> dict[str, float]:
        return {}

    def close(self) -> None:
        self.envs.close()


def scale_rewards(
    rollout: Rollout, returns: np.ndarray, stats: RunningNorm, gamma: float
) -> None:
    """Scale `rollout.rewards` in place as Stable-Baselines3's VecNormalize does, step by step:
    R <- gamma R + r for each env's running return R [N] (`returns`, carried over rollouts),
    `stats` updated with R, r <- clip(r / sqrt(var(R) + eps)), R <- 0 where an episode ended.
    Autoreset steps (not transitions) change nothing."""
    rewards = rollout.rewards.numpy()  # a view: written in place
    valid = rollout.valid.numpy()
    done = (rollout.terminated | rollout.truncated).numpy()
    for t in range(rollout.num_steps):
        real = valid[t]
        returns[real] = returns[real] * gamma + rewards[t][real]
        stats.update(torch.from_numpy(returns[real]))
        rewards[t] = np.clip(rewards[t] * stats.scale().item(), -stats.clip, stats.clip)
        returns[done[t]] = 0.0


def train(
    policy: ActorCritic,
    data: DataSource,
    cfg: PPOConfig,
    seed: int,
    evaluation: Evaluation | None = None,
    refresh_old_policy: bool = False,
    on_first_data: Callable[[TransitionBatch], None] | None = None,
    log: LogFn | None = None,
    progress: bool = True,
    checkpoint: Checkpointer | None = None,
    average_last: int = 0,
    deadline: float | None = None,
    hooks: Hooks | None = None,
) -> TrainResult:
    """Train `policy` with PPO on the rounds of `data` (module docstring); closes `data`.

    Seeding: global RNGs via `seed_everything(seed)` (for auxiliary losses that draw from them)
    and a dedicated torch.Generator(seed) for action sampling and minibatch order. With
    `cfg.torch_threads` fixed, the same seed on the same machine gives identical metrics (except
    the wall-clock `charts/sps`). The policy's initial weights are the caller's.

    `refresh_old_policy`: before each update, recompute log pi_old and V_old under the current
    policy (by default the collecting policy's are kept, as the reference PPO does when it
    updates again on the same rollout storage). `on_first_data` sees round 0's real transitions
    before any update (e.g. TransE pre-training on the protocol's own data).

    `cfg.target_kl` > 0: once an update's mean approx KL to the policy that collected the round
    exceeds it, the round's remaining updates are skipped (the policy stays; evaluations and
    logging go on). `average_last` = N > 0: the policy ends with the average of its weights after
    each of the last N updates (stochastic weight averaging) instead of its last weights (of
    those it made, when `hooks` stopped it among them).

    `log(step, metrics)` after every update, step = env steps or updates (`data`): `losses/...`
    (see ppo_update), `charts/learning_rate`, `charts/sps`, `charts/transitions`,
    `charts/episodes`, and `charts/episodic_return` / `charts/episodic_length` (means) after a
    round in which episodes finished, `charts/eval_return` after an evaluation.

    `checkpoint`: saved before the first update and every `checkpoint.every` updates (with the
    round's data when it falls inside a round); when its file exists the loop continues from it
    and ends exactly as an uninterrupted run (for envs `xlvin.envs.env_state` can restore).

    `deadline` (a `time.time()` value): once it has passed, training stops before the next
    update, saves `checkpoint` there (so a resumed run ends exactly as an uninterrupted one) and
    returns with `stopped_at_deadline` set; the policy is left as it was after the last update.

    `hooks` (`Hooks`): called after each round's collection, update and evaluation; once one
    returns False, training stops at the next update boundary, saves `checkpoint` there and
    returns with `stopped_by_hooks` set. A run that ends (its last update, or stopped by `hooks`)
    saves a last checkpoint there too, so that it can be continued (`resume` with more rounds).
    """
    evaluation = evaluation or Evaluation()
    total = None if data.rounds is None else data.rounds * data.updates_per_round
    if total is None and (cfg.anneal_lr or evaluation.points or average_last):
        data.close()
        raise UserError("an open-ended data source (a curriculum) needs a constant learning rate "
                        "(--anneal-lr false), no evaluation points and no weight averaging")
    set_threads(cfg.torch_threads)
    seed_everything(seed)
    generator = torch.Generator().manual_seed(seed)
    optimizer = make_optimizer(policy, cfg)
    result, rollout, saved_at = TrainResult(), None, -1
    stop_asked = False
    averaged: dict[str, torch.Tensor] = {}  # sums of the weights after the last updates
    bar: tqdm | None = None
    evaluator = (Evaluator(data.env_id, evaluation.episodes, data.env_kwargs)
                 if evaluation.points > 0 else None)
    try:
        if checkpoint is not None and checkpoint.exists():
            result, rollout, averaged = _resume(checkpoint, policy, optimizer, generator, data)
            saved_at = result.updates
        start = time.perf_counter() - result.wall_time_s
        bar = tqdm(total=total, initial=result.updates, disable=not progress, unit="update",
                   desc=data.env_id)
        with termination_deferred():
            while total is None or result.updates < total:
                round, k = divmod(result.updates, data.updates_per_round)
                if k == 0 and data.finished():
                    break
                stop = deadline is not None and time.time() >= deadline
                signalled = termination_requested()
                if (checkpoint is not None and (stop or stop_asked or signalled
                                                or checkpoint.due(result.updates))
                        and result.updates != saved_at):
                    result.wall_time_s = time.perf_counter() - start
                    _save(checkpoint, policy, optimizer, generator, data, result,
                          rollout if k > 0 else None, averaged)
                    saved_at = result.updates
                if signalled:  # SIGTERM (`xlvin.signals`): stop here, resumable from here
                    raise Terminated(f"stopped after update {result.updates}" + (
                        ", checkpoint saved there" if checkpoint is not None else ""))
                if stop or stop_asked:
                    result.stopped_at_deadline, result.stopped_by_hooks = stop, stop_asked and not stop
                    break
                if k == 0:
                    try:
                        rollout = data.collect(policy, round, generator, cfg.accelerate)
                    except EnvFailed as err:
                        what = f"the data for update {result.updates + 1}"
                        raise err.during(what) from err.__cause__
                    result.add_round(rollout)
                    stop_asked = hooks is not None and hooks.on_rollout(policy, result) is False
                    if round == 0 and on_first_data is not None:
                        on_first_data(rollout.transitions())
                assert rollout is not None
                lr = cfg.lr * (1.0 - result.updates / total) if total and cfg.anneal_lr else cfg.lr
                set_learning_rate(optimizer, lr)
                if round in result.stopped_rounds:
                    metrics: dict[str, float] = {}
                else:
                    batch = relabel(rollout, policy) if refresh_old_policy else rollout
                    metrics = ppo_update(policy, optimizer, batch, cfg, generator)
                    if 0 < cfg.target_kl < metrics.get("losses/approx_kl", 0.0):
                        result.stopped_rounds.append(round)
                result.updates += 1
                if total and average_last and result.updates > total - average_last:
                    for name, value in policy.state_dict().items():
                        averaged[name] = averaged[name] + value if name in averaged else value.clone()

                metrics["charts/learning_rate"] = lr
                metrics["charts/sps"] = result.env_steps / (time.perf_counter() - start)
                metrics["charts/transitions"] = result.transitions
                metrics["charts/episodes"] = result.episodes
                metrics.update(data.metrics())
                if k == 0 and rollout.episode_returns:
                    metrics["charts/episodic_return"] = _mean(rollout.episode_returns)
                    metrics["charts/episodic_length"] = _mean(rollout.episode_lengths)
                if evaluator is not None and total and evaluation.due(result.updates, total):
                    seed_i = PROGRESS_EVAL_SEED + len(result.progress) * evaluation.episodes
                    try:
                        score = evaluator(policy, evaluation.episodes, seed_i,
                                          accelerate=cfg.accelerate)["mean"]
                    except EnvFailed as err:
                        what = f"the evaluation after update {result.updates}"
                        raise err.during(what) from err.__cause__
                    metrics["charts/eval_return"] = score
                    result.progress.append({
                        "updates": result.updates, "episodes": result.episodes,
                        "transitions": result.transitions, "eval_return": score,
                    })
                    evaluated = result.progress[-1]
                    if hooks is not None and hooks.on_evaluation(policy, result, evaluated) is False:
                        stop_asked = True
                if hooks is not None:
                    metrics.update(hooks.recorded())
                result.last_metrics = metrics
                if log is not None:
                    log(result.env_steps if data.log_by_env_steps else result.updates, metrics)
                if hooks is not None and hooks.on_update(policy, result, metrics) is False:
                    stop_asked = True
                bar.update()
                if result.episode_returns:
                    bar.set_postfix(ret=f"{_mean(result.episode_returns[-20:]):.1f}", refresh=False)
            if checkpoint is not None and checkpoint.every > 0 and result.updates != saved_at:
                result.wall_time_s = time.perf_counter() - start  # the end: continuable from here
                _save(checkpoint, policy, optimizer, generator, data, result, None, averaged)
    finally:
        if bar is not None:
            bar.close()
        if evaluator is not None:
            evaluator.close()
        data.close()
    if isinstance(optimizer, FlatAdam):
        optimizer.release()  # the trained policy computes as the saved one will when loaded
    if averaged and not result.stopped_at_deadline:
        count = min(average_last, total, result.updates - max(0, total - average_last))
        policy.load_state_dict({name: (value / count).to(value.dtype) if value.is_floating_point()
                                else value for name, value in averaged.items()})
    result.wall_time_s = time.perf_counter() - start
    result.sps = result.env_steps / result.wall_time_s if result.wall_time_s > 0 else 0.0
    return result


def train_ppo(
    policy: ActorCritic,
    env_id: str,
    cfg: PPOConfig,
    seed: int,
    log: LogFn | None = None,
    progress: bool = True,
    checkpoint: Checkpointer | None = None,
) -> TrainResult:
    """Online PPO on `env_id`: `cfg.num_updates` rounds of one rollout and one update."""
    data = OnlineData(env_id, cfg, seed)
    return train(policy, data, cfg, seed, log=log, progress=progress, checkpoint=checkpoint)


@torch.no_grad()
def relabel(rollout: Rollout, policy: ActorCritic) -> Rollout:
    """The same transitions with log pi_old and V_old recomputed under `policy` (one batched
    forward on the policy's device; the rollout stays on the CPU), as if the current policy had
    collected them."""
    T, N = rollout.actions.shape[:2]
    device = policy_device(policy)
    logits, values = policy(rollout.obs.flatten(0, 1).to(device))
    logprobs = policy.action_distribution().log_prob(
        logits[: T * N], rollout.actions.flatten(0, 1).to(device)).view(T, N)
    return dataclasses.replace(rollout, logprobs=logprobs.cpu(), values=values.view(T + 1, N).cpu())


def _resume(
    checkpoint: Checkpointer, policy: ActorCritic, optimizer: Any, generator: torch.Generator,
    data: DataSource,
) -> tuple[TrainResult, Rollout | None, dict[str, torch.Tensor]]:
    """Restore policy, optimizer, RNGs and `data` from `checkpoint`; return the loop's result so
    far, the round's data (None between rounds) and the weight sums of the averaging. A
    checkpoint that does not fit is one UserError, raised before anything is written."""
    resumed = checkpoint.restore(policy, optimizer, generator)
    loop = resumed.loop
    try:
        result = TrainResult(**loop["result"])
        data.load_state_dict(loop["data"], section(resumed.tensors, "data/"))
        rollout = None
        if loop["rollout"] is not None:
            rollout = Rollout(**section(resumed.tensors, "rollout/"), **loop["rollout"])
    except (KeyError, TypeError, ValueError, RuntimeError, IndexError, AttributeError) as err:
        reason = one_line(err)
        raise UserError(f"checkpoint {checkpoint.path} does not fit this run: {reason}") from None
    return result, rollout, section(resumed.tensors, "average/")


def _save(
    checkpoint: Checkpointer,
    policy: ActorCritic,
    optimizer: Any,
    generator: torch.Generator,
    data: DataSource,
    result: TrainResult,
    rollout: Rollout | None,
    averaged: dict[str, torch.Tensor],
) -> None:
    data_state, data_tensors = data.state_dict()
    tensors = {f"data/{k}": v for k, v in data_tensors.items()}
    tensors.update({f"average/{k}": v for k, v in averaged.items()})
    loop: dict[str, Any] = {
        "result": asdict(result), "data": data_state, "rollout": None,
        "log_step": result.env_steps if data.log_by_env_steps else result.updates,
    }
    if rollout is not None:
        rollout_tensors, loop["rollout"] = rollout.to_checkpoint()
        tensors.update({f"rollout/{k}": v for k, v in rollout_tensors.items()})
    checkpoint.save(policy, optimizer, generator, loop, tensors)


def _mean(values: list[float] | list[int]) -> float:
    return float(sum(values)) / len(values)
