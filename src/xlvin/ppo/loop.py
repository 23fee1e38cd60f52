"""The training loop every protocol shares: rounds of (collect data with the current policy, PPO
updates on it).

    for r in range(data.rounds):
        rollout = data.collect(policy, r)            # online: T steps of N envs; low data: episodes
        for _ in range(data.updates_per_round):
            ppo_update(policy, optimizer, rollout)   # + learning-rate schedule, evaluation, logging

A protocol is a `DataSource`: online PPO (`OnlineData`: one rollout per round, one update, the
envs carried over from round to round) and the paper's low-data regime
(`xlvin.ppo.low_data.LowData`: a few whole episodes per round, many updates on them) differ
only there, and each owns its own extras (evaluations during training, weight averaging, ...).
Seeding lives here, once; checkpoints, resume, the deadline, hooks, logging and the progress
bar are the run's `xlvin.ppo.session.Session`. Runs of one configuration (seeds) train in step
in the same loop (`train_together`: a population, whose collections and updates
`xlvin.ppo.population` takes for all of them at once); one run is `Trainer.run`.
"""

import dataclasses
import sys
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager, contextmanager
from functools import partial
from typing import Any

import gymnasium as gym
import numpy as np
import torch
from tqdm import tqdm

from xlvin.accel.flat_adam import FlatAdam
from xlvin.envs.failures import EnvFailed
from xlvin.errors import FieldError
from xlvin.io.checkpoint import Checkpointer
from xlvin.nn.normalization import RunningNorm
from xlvin.nn.policy import ActorCritic
from xlvin.process import global_generators, seed_everything, set_global_generators, set_threads
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
from xlvin.ppo.session import LogFn, Session, TrainResult, mean
from xlvin.ppo.config import Evaluation
from xlvin.ppo.population import Population
from xlvin.ppo.update import PPOConfig, make_optimizer, ppo_update, set_learning_rate
from xlvin.ppo.storage import Rollout

#: Seeds of the evaluations during training; disjoint from training (seed + env index) and from
#: the final evaluation of `xlvin evaluate` (1,000,000 onwards). Evaluation i plays episodes
#: PROGRESS_EVAL_SEED + i * episodes onwards: every evaluation sees fresh episodes.
PROGRESS_EVAL_SEED = 500_000


class DataSource:
    """Where a protocol's data comes from, and the protocol's own extras; a subclass defines
    `collect` and, when something carries over between rounds, `state_dict` and
    `load_state_dict`. The other methods default to the plain loop."""

    env_id: str
    #: the env's keyword arguments (evaluations during training make their envs with them)
    env_kwargs: dict[str, Any]
    #: rounds of data; None: open-ended, the source says when it is done (`finished`)
    rounds: int | None
    updates_per_round: int
    #: the x-axis of the logged metrics: env steps (True) or updates (False)
    log_by_env_steps: bool
    #: N > 0: the policy ends with the average of its weights after each of the last N updates
    #: (stochastic weight averaging) instead of its last weights (of those it made, when the
    #: session's hooks stopped it among them)
    average_last: int = 0

    def collect(
        self, policy: ActorCritic, round: int, generator: torch.Generator, accelerate: bool
    ) -> Rollout:
        """Round `round`'s data, acted by the current policy (actions sampled with `generator`)."""
        raise NotImplementedError

    def after_collect(self, round: int, rollout: Rollout) -> None:
        """Called with each round's data, before any update on it."""

    def update_batch(self, rollout: Rollout, policy: ActorCritic) -> Rollout:
        """What the next PPO update learns from: the round's data as collected, by default."""
        return rollout

    def evaluation(self) -> Evaluation:
        """The evaluations during training (none by default)."""
        return Evaluation()

    def state_dict(self) -> tuple[dict[str, Any], dict[str, torch.Tensor]]:
        """What a checkpoint taken between rounds needs to continue exactly: (JSON, tensors)."""
        return {}, {}

    def load_state_dict(self, state: dict[str, Any], tensors: dict[str, torch.Tensor]) -> None:
        pass

    def finished(self) -> bool:
        """Whether there is no more data to learn from (asked before each round)."""
        return False

    def metrics(self) -> dict[str, float]:
        """The source's own numbers, logged after every update (a curriculum's level)."""
        return {}

    def close(self) -> None:
        pass


class OnlineData(DataSource):
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
        return self.prepared(rollout, policy)

    def prepared(self, rollout: Rollout, policy: ActorCritic) -> Rollout:
        """The round's rollout (acted in `self.envs` from `self.state`) as the update learns
        from it: relabelled under updated observation statistics, its rewards scaled."""
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
                raise FieldError("a run on ale-py's vector env ({atari_vector=}) cannot resume: "
                                 "its emulators' states are not saved (train with {atari_vector} gym "
                                 "to resume)", atari_vector="ale")
            self.state = reset_envs(self.envs, self.seed + self.next_round)
            print(inexact_resume_notice(self.env_id, self.seed + self.next_round), file=sys.stderr)
            return
        restore_env_state(self.envs, state["envs"])
        self.state = RolloutState(
            obs=tensors["obs"].numpy().copy(), autoreset=tensors["autoreset"].numpy().copy()
        )

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


class Trainer:
    """PPO on the rounds of a `DataSource` (module docstring), in a `Session`; run once.

    Seeding: global RNGs via `seed_everything(seed)` (for auxiliary losses that draw from them)
    and a dedicated torch.Generator(seed) for action sampling and minibatch order. With
    `cfg.torch_threads` fixed, the same seed on the same machine gives identical metrics (except
    the wall-clock `charts/sps`). The policy's initial weights are the caller's.

    `cfg.target_kl` > 0: once an update's mean approx KL to the policy that collected the round
    exceeds it, the round's remaining updates are skipped (the policy stays; evaluations and
    logging go on).

    Metrics (`Session.log`) after every update: `losses/...` (see ppo_update),
    `charts/learning_rate`, `charts/sps`, `charts/transitions`, `charts/episodes`, the data
    source's own, and `charts/episodic_return` / `charts/episodic_length` (means) after a round
    in which episodes finished, `charts/eval_return` after an evaluation.
    """

    def __init__(
        self, policy: ActorCritic, data: DataSource, cfg: PPOConfig, seed: int,
        session: Session | None = None,
    ) -> None:
        self.policy, self.data, self.cfg = policy, data, cfg
        self.session = session or Session()
        self.total = None if data.rounds is None else data.rounds * data.updates_per_round
        self.evaluation = data.evaluation()
        if self.total is None and (cfg.anneal_lr or self.evaluation.points or data.average_last):
            data.close()
            raise FieldError("an open-ended data source (a curriculum) needs a constant learning "
                             "rate ({anneal_lr=}), no evaluation points and no weight averaging",
                             anneal_lr="false")
        set_threads(cfg.torch_threads)
        seed_everything(seed)
        self.own_generators = global_generators()  # this run's, where runs train together
        self.generator = torch.Generator().manual_seed(seed)
        self.optimizer = make_optimizer(policy, cfg)
        self.result = TrainResult()
        self.lr = cfg.lr  # of the current update
        self.rollout: Rollout | None = None  # the current round's data
        self.averaged: dict[str, torch.Tensor] = {}  # sums of the weights after the last updates
        self.evaluator = (Evaluator(data.env_id, self.evaluation.episodes, data.env_kwargs)
                          if self.evaluation.points > 0 else None)

    def run(self) -> TrainResult:
        """Train to the end of the data (or until the session stops it); closes the data."""
        return train_together([self])[0]

    def next_update(self, signalled: Callable[[], bool]) -> tuple[int, int] | None:
        """At an update boundary: (round, update within the round) of the next update, or None
        where training ends here (the data or the updates are done, or the session stops it;
        SIGTERM, which `signalled()` says came: `Terminated`, after the session's checkpoint)."""
        if self.total is not None and self.result.updates >= self.total:
            return None
        round, k = divmod(self.result.updates, self.data.updates_per_round)
        if k == 0 and self.data.finished():
            return None
        if not self.session.go_on(self, inside_round=k > 0, signalled=signalled()):
            return None
        return round, k

    def log_step(self) -> int:
        """The x-axis value of the metrics now: env steps or updates (`data.log_by_env_steps`)."""
        return self.result.env_steps if self.data.log_by_env_steps else self.result.updates

    def collect(self, round: int) -> None:
        """Round `round`'s data, counted in the result."""
        try:
            rollout = self.data.collect(self.policy, round, self.generator, self.cfg.accelerate)
        except EnvFailed as err:
            raise self.failed(err) from err.__cause__
        self.collected(round, rollout)

    def failed(self, err: EnvFailed) -> EnvFailed:
        """`err`, raised while collecting the data of the next update, saying so."""
        return err.during(f"the data for update {self.result.updates + 1}")

    def collected(self, round: int, rollout: Rollout) -> None:
        """Round `round`'s data, collected: counted in the result, told to session and data."""
        self.rollout = rollout
        self.result.add_round(rollout)
        self.session.collected(self)
        self.data.after_collect(round, rollout)

    def learning_batch(self, round: int) -> Rollout | None:
        """Set the learning rate of the next update; what it learns from (None: it is skipped,
        in a round `target_kl` stopped)."""
        cfg, result, total = self.cfg, self.result, self.total
        assert self.rollout is not None
        self.lr = cfg.lr * (1.0 - result.updates / total) if total and cfg.anneal_lr else cfg.lr
        set_learning_rate(self.optimizer, self.lr)
        if round in result.stopped_rounds:
            return None
        return self.data.update_batch(self.rollout, self.policy)

    def updated(self, round: int, first_of_round: bool, metrics: dict[str, float],
                learned: bool) -> dict[str, float]:
        """After the update of `learning_batch` (`learned`: it ran, with these metrics): the
        update counted, the weights summed for averaging, an evaluation when one is due; the
        update's metrics."""
        cfg, result, rollout, total = self.cfg, self.result, self.rollout, self.total
        assert rollout is not None
        if learned and 0 < cfg.target_kl < metrics.get("losses/approx_kl", 0.0):
            result.stopped_rounds.append(round)
        result.updates += 1
        last, averaged = self.data.average_last, self.averaged
        if total and last and result.updates > total - last:
            for name, value in self.policy.state_dict().items():
                averaged[name] = averaged[name] + value if name in averaged else value.clone()

        metrics["charts/learning_rate"] = self.lr
        metrics["charts/sps"] = result.env_steps / self.session.elapsed()
        metrics["charts/transitions"] = result.transitions
        metrics["charts/episodes"] = result.episodes
        metrics.update(self.data.metrics())
        if first_of_round and rollout.episode_returns:
            metrics["charts/episodic_return"] = mean(rollout.episode_returns)
            metrics["charts/episodic_length"] = mean(rollout.episode_lengths)
        if self.evaluator is not None and total and self.evaluation.due(result.updates, total):
            metrics["charts/eval_return"] = self.evaluate()
        return metrics

    def evaluate(self) -> float:
        """A progress evaluation: its mean return, recorded in `result.progress`."""
        result, episodes = self.result, self.evaluation.episodes
        assert self.evaluator is not None
        seed_i = PROGRESS_EVAL_SEED + len(result.progress) * episodes
        try:
            score = self.evaluator(self.policy, episodes, seed_i,
                                   accelerate=self.cfg.accelerate)["mean"]
        except EnvFailed as err:
            what = f"the evaluation after update {result.updates}"
            raise err.during(what) from err.__cause__
        result.progress.append({
            "updates": result.updates, "episodes": result.episodes,
            "transitions": result.transitions, "eval_return": score,
        })
        self.session.evaluated(self, result.progress[-1])
        return score

    def finish(self) -> TrainResult:
        """The policy as trained (averaged: `DataSource.average_last`); the result, timed."""
        result, last, total = self.result, self.data.average_last, self.total
        if isinstance(self.optimizer, FlatAdam):
            # the trained policy computes as the saved one will when loaded
            self.optimizer.release()
        if self.averaged and not result.stopped_at_deadline:
            assert total is not None
            count = min(last, total, result.updates - max(0, total - last))
            self.policy.load_state_dict({
                name: (value / count).to(value.dtype) if value.is_floating_point() else value
                for name, value in self.averaged.items()})
        result.wall_time_s = self.session.elapsed()
        result.sps = result.env_steps / result.wall_time_s if result.wall_time_s > 0 else 0.0
        return result


def train_together(
    trainers: list[Trainer], population: Population | None = None, progress: bool = False,
) -> list[TrainResult]:
    """Train runs in step, each exactly as it trains alone (one run: `Trainer.run`): at every
    update boundary each run's session says whether it goes on; the runs going on collect their
    round's data where a round starts, and take their update.

    Several runs need a `population` (of their policies and optimisers, in this order, and
    online data: `xlvin.ppo.population`), which takes the collections and the updates of all of
    them at once. Every run is checkpointed on SIGTERM before `Terminated` is raised.
    `progress`: one progress bar over every update of every run (the runs show no bar
    of their own). Closes every run's data."""
    assert population is not None or len(trainers) == 1, "runs train together as a population"
    own = _own_generators if len(trainers) > 1 else _shared_generators
    bar = None
    try:
        for trainer in trainers:
            with own(trainer):
                trainer.session.open(trainer)
        totals = [t.total for t in trainers]
        bar = tqdm(total=None if None in totals else sum(totals), disable=not progress,
                   initial=sum(t.result.updates for t in trainers), unit="update",
                   desc=f"{trainers[0].data.env_id} x {len(trainers)} seeds")
        with termination_deferred():
            going: list[Trainer] = list(trainers)
            last: dict[Trainer, tuple[tuple[int, int], dict[str, float], bool]] = {}
            while True:
                steps = _boundaries(going, last, own)
                bar.update(len(last))
                going = [t for t in going if t in steps]
                if not going:
                    break
                rollouts = _collect([(t, steps[t][0]) for t in going if steps[t][1] == 0],
                                    population, trainers, own)
                batches = []
                for t in going:
                    with own(t):
                        if t in rollouts:
                            t.collected(steps[t][0], rollouts[t])
                        batches.append(t.learning_batch(steps[t][0]))
                learning = [(t, b) for t, b in zip(going, batches) if b is not None]
                if population is None:
                    learned = [ppo_update(t.policy, t.optimizer, b, t.cfg, t.generator)
                               for t, b in learning]
                else:
                    learned = population.update(
                        [trainers.index(t) for t, _ in learning], [b for _, b in learning],
                        going[0].cfg, [t.generator for t, _ in learning],
                        [partial(own, t) for t, _ in learning])
                metrics = dict(zip([t for t, _ in learning], learned))
                last = {t: (steps[t], metrics.get(t, {}), b is not None)
                        for t, b in zip(going, batches)}
    finally:
        if bar is not None:
            bar.close()
        for trainer in trainers:
            trainer.session.close()
            if trainer.evaluator is not None:
                trainer.evaluator.close()
            trainer.data.close()
    return [trainer.finish() for trainer in trainers]


Generators = Callable[[Trainer], AbstractContextManager[None]]


@contextmanager
def _own_generators(trainer: Trainer) -> Iterator[None]:
    """The block with `trainer`'s global generators in place (runs that train together each
    draw from their own, and checkpoint their own, as alone)."""
    set_global_generators(trainer.own_generators)
    try:
        yield
    finally:
        trainer.own_generators = global_generators()


@contextmanager
def _shared_generators(trainer: Trainer) -> Iterator[None]:
    """A run alone: the global generators are its own."""
    yield


def _boundaries(
    trainers: list[Trainer], last: dict[Trainer, tuple[tuple[int, int], dict[str, float], bool]],
    own: Generators,
) -> dict[Trainer, tuple[int, int]]:
    """At the update boundary: each run's last update (`last`: its (round, update within it),
    metrics and whether it learned) counted, evaluated and told to its session; then (round,
    update within it) of each run's next update (`Trainer.next_update`), for those that go on
    (a run that ends here ends its session). SIGTERM: `Terminated` once every run has saved its
    checkpoint."""
    steps, stopped = {}, None
    asked: list[bool] = []

    def signalled() -> bool:
        """Whether SIGTERM came: asked once, by the first run at its boundary (reading clears
        the request, and a run that has ended leaves it to `termination_deferred`)."""
        if not asked:
            asked.append(termination_requested())
        return asked[0]

    for trainer in trainers:
        with own(trainer):
            if trainer in last:
                (round, k), metrics, learned = last[trainer]
                trainer.session.updated(trainer, trainer.updated(round, k == 0, metrics, learned))
            try:
                step = trainer.next_update(signalled)
            except Terminated as err:
                stopped = stopped or err
                continue
            if step is None:
                trainer.session.end(trainer)
            else:
                steps[trainer] = step
    if stopped is not None:
        raise stopped
    return steps


def _collect(rounds: list[tuple[Trainer, int]], population: Population | None,
             trainers: list[Trainer], own: Generators) -> dict[Trainer, Rollout]:
    """Each run's data of its round: collected by itself (which counts it; a population's
    low-data episodes too, each run with its own generators), or with a `population` (of
    `trainers`), the online rollouts of all of them at once, which the caller hands them
    (`Trainer.collected`)."""
    data = [trainer.data for trainer, _ in rounds]
    if population is None or not all(isinstance(d, OnlineData) for d in data):
        for trainer, round in rounds:
            with own(trainer):
                trainer.collect(round)
        return {}
    if not rounds:
        return {}
    for d, (_, round) in zip(data, rounds):
        d.next_round = round + 1
    try:
        rollouts = population.collect(
            [trainers.index(trainer) for trainer, _ in rounds], [d.envs for d in data],
            [d.state for d in data], data[0].num_steps,
            [trainer.generator for trainer, _ in rounds],
            [partial(own, trainer) for trainer, _ in rounds])
    except EnvFailed as err:
        raise rounds[0][0].failed(err) from err.__cause__
    return {trainer: d.prepared(rollout, trainer.policy)
            for d, (trainer, _), rollout in zip(data, rounds, rollouts)}


def train(
    policy: ActorCritic, data: DataSource, cfg: PPOConfig, seed: int,
    session: Session | None = None,
) -> TrainResult:
    """Train `policy` with PPO on the rounds of `data` in `session` (default: a progress bar
    and nothing else); closes `data`. See `Trainer` and `xlvin.ppo.session.Session`."""
    return Trainer(policy, data, cfg, seed, session).run()


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
    session = Session(log=log, progress=progress, checkpoint=checkpoint)
    return train(policy, data, cfg, seed, session)


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
