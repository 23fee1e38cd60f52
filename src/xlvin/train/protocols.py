"""Training protocols: the paper's low-data regime on classic control (section 4.1).

CartPole-v0: sample only 10 trajectories with the initial policy, then 100 PPO updates on that
fixed dataset, no further interaction. Acrobot-v1 and MountainCar-v0: 5 trajectories at a time,
20 times (100 in total), one PPO update after each batch. Both are `rounds` x (collect `episodes`
complete episodes with the current policy, then `updates` PPO updates on them).

Repeated updates on one fixed batch keep the behaviour policy's log-probabilities and values
from collection time, as calling the reference PPO's update again on the same rollout storage
does (ikostrikov/pytorch-a2c-ppo-acktr-gail): the clipped ratio then keeps the policy in a trust
region around the policy that collected the data.
"""

import dataclasses
import time
from collections.abc import Callable
from dataclasses import dataclass, field

import torch
from tqdm import tqdm

from xlvin.config import option
from xlvin.errors import UserError
from xlvin.io.checkpoint import Checkpointer
from xlvin.nn.policy import ActorCritic, TransitionBatch
from xlvin.seeding import seed_everything
from xlvin.train.ppo import LogFn, PPOConfig, make_optimizer, ppo_update
from xlvin.train.rollout import Rollout, collect_episodes, evaluate_policy, relabel

#: Seeds of the periodic evaluation during training; disjoint from training (seed + env index)
#: and from the final evaluation of `xlvin evaluate` (1,000,000 onwards).
PROGRESS_EVAL_SEED = 500_000


@dataclass
class LowDataConfig:
    """The low-data protocol: `rounds` x (collect `episodes` episodes, `updates` PPO updates)."""

    rounds: int = option(1, "collection rounds")
    episodes: int = option(10, "complete episodes collected per round with the current policy")
    updates: int = option(100, "PPO updates (each: update_epochs x num_minibatches) per round")
    strict_transe: bool = option(
        False, "pre-train TransE only on the first round's episodes (no extra random-policy data)"
    )
    refresh_old_policy: bool = option(
        False, "before each update, recompute log pi_old and V_old under the current policy "
        "(default: keep the collecting policy's, as the reference PPO does)"
    )
    eval_points: int = option(5, "evaluations of the policy during training (progress curve)")
    eval_episodes: int = option(10, "episodes per progress evaluation")

    def __post_init__(self) -> None:
        if min(self.rounds, self.episodes, self.updates) < 1:
            raise UserError("low-data protocol: rounds, episodes and updates must be >= 1")


#: The paper's settings (section 4.1) per environment id.
PAPER_LOW_DATA = {
    "CartPole-v0": LowDataConfig(rounds=1, episodes=10, updates=100),
    "Acrobot-v1": LowDataConfig(rounds=20, episodes=5, updates=1),
    "MountainCar-v0": LowDataConfig(rounds=20, episodes=5, updates=1),
}


@dataclass
class LowDataResult:
    """Exact data counts of a low-data run and its training curve."""

    episodes: int  # complete episodes the agent learned from
    transitions: int  # real transitions in them
    updates: int
    wall_time_s: float
    round_returns: list[float] = field(default_factory=list)  # mean return of each round's data
    progress: list[dict[str, float]] = field(default_factory=list)  # periodic evaluations


def train_low_data(
    policy: ActorCritic,
    env_id: str,
    cfg: PPOConfig,
    low: LowDataConfig,
    seed: int,
    pretrain: Callable[[TransitionBatch], None] | None = None,
    log: LogFn | None = None,
    progress: bool = True,
    checkpoint: Checkpointer | None = None,
) -> LowDataResult:
    """Run the low-data protocol; `pretrain` (if given) sees the first round's transitions
    before any PPO update (the strict TransE setting).

    Round r collects its episodes with env seeds derived from `seed + 1000 * r`, so rounds never
    replay the same initial states. Progress evaluations (greedy, `low.eval_episodes` episodes
    from PROGRESS_EVAL_SEED) happen `low.eval_points` times, evenly over the updates; they are
    not training data and are not counted in the budget.

    `checkpoint`: saved before the first update and every `checkpoint.every` updates, with the
    round's dataset when it falls inside a round; when its file exists the loop continues from
    it and ends exactly as an uninterrupted run.
    """
    if cfg.torch_threads > 0:
        torch.set_num_threads(cfg.torch_threads)
    seed_everything(seed)
    generator = torch.Generator().manual_seed(seed)
    optimizer = make_optimizer(policy, cfg)
    total_updates = low.rounds * low.updates
    eval_at = {round(total_updates * (i + 1) / low.eval_points) for i in range(low.eval_points)}
    result = LowDataResult(episodes=0, transitions=0, updates=0, wall_time_s=0.0)
    rollout: Rollout | None = None
    resumed_at = -1
    if checkpoint is not None and checkpoint.exists():
        resumed = checkpoint.restore(policy, optimizer, generator)
        result = LowDataResult(**resumed.loop["result"])
        if resumed.loop["rollout"] is not None:
            rollout = Rollout(**resumed.tensors, **resumed.loop["rollout"])
        resumed_at = result.updates
    start = time.perf_counter() - result.wall_time_s
    bar = tqdm(total=total_updates, initial=result.updates, disable=not progress, unit="update", desc=env_id)
    while result.updates < total_updates:
        r, k = divmod(result.updates, low.updates)  # round, updates done in it
        if checkpoint is not None and checkpoint.due(result.updates) and result.updates != resumed_at:
            result.wall_time_s = time.perf_counter() - start
            loop, tensors = {"result": dataclasses.asdict(result), "log_step": result.updates, "rollout": None}, {}
            if k > 0 and rollout is not None:
                tensors, loop["rollout"] = _split_rollout(rollout)
            checkpoint.save(policy, optimizer, generator, loop, tensors)
        if k == 0:
            rollout = collect_episodes(
                env_id, policy, low.episodes, seed=seed + 1000 * r, generator=generator
            )
            result.episodes += len(rollout.episode_returns)
            result.transitions += int(rollout.valid.sum())
            result.round_returns.append(sum(rollout.episode_returns) / len(rollout.episode_returns))
            if r == 0 and pretrain is not None:
                pretrain(rollout.transitions())
        assert rollout is not None
        if cfg.anneal_lr:
            for group in optimizer.param_groups:
                group["lr"] = cfg.lr * (1.0 - result.updates / total_updates)
        batch = relabel(rollout, policy) if low.refresh_old_policy else rollout
        metrics = ppo_update(policy, optimizer, batch, cfg, generator)
        result.updates += 1
        metrics["charts/round_return"] = result.round_returns[-1]
        metrics["charts/episodes"] = result.episodes
        metrics["charts/transitions"] = result.transitions
        if result.updates in eval_at:
            evaluation = evaluate_policy(
                policy, env_id, episodes=low.eval_episodes, seed=PROGRESS_EVAL_SEED
            )
            metrics["charts/eval_return"] = evaluation["mean"]
            result.progress.append(
                {"updates": result.updates, "episodes": result.episodes,
                 "transitions": result.transitions, "eval_return": evaluation["mean"]}
            )
        if log is not None:
            log(result.updates, metrics)
        bar.update()
    bar.close()
    result.wall_time_s = time.perf_counter() - start
    return result


def _split_rollout(rollout: Rollout) -> tuple[dict[str, torch.Tensor], dict[str, list]]:
    """A Rollout as (its tensors, its JSON lists) for a checkpoint; `Rollout(**t, **j)` rebuilds it."""
    tensors, lists = {}, {}
    for f in dataclasses.fields(rollout):
        value = getattr(rollout, f.name)
        (tensors if torch.is_tensor(value) else lists)[f.name] = value
    return tensors, lists
