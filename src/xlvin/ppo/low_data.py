"""Training protocols: the paper's low-data regime on classic control (section 4.1).

CartPole-v0: sample only 10 trajectories with the initial policy, then 100 PPO updates on that
fixed dataset, no further interaction. Acrobot-v1 and MountainCar-v0: 5 trajectories at a time,
20 times (100 in total), one PPO update after each batch. Both are `rounds` x (collect `episodes`
complete episodes with the current policy, then `updates` PPO updates on them): `LowData`, a
data source of the one training loop (`xlvin.ppo.loop.Trainer`).

Repeated updates on one fixed batch keep the behaviour policy's log-probabilities and values
from collection time, as calling the reference PPO's update again on the same rollout storage
does (ikostrikov/pytorch-a2c-ppo-acktr-gail): the clipped ratio then keeps the policy in a trust
region around the policy that collected the data (`refresh_old_policy` recomputes them instead).
"""

from collections.abc import Callable
from typing import Any

import torch

from xlvin.nn.policy import ActorCritic, TransitionBatch
from xlvin.ppo.collect import collect_episodes, collect_until_episodes_end
from xlvin.ppo.config import Evaluation, LowDataConfig
from xlvin.ppo.loop import DataSource, relabel
from xlvin.ppo.storage import Rollout


#: The paper's settings (section 4.1) per environment id.
PAPER_LOW_DATA = {
    "CartPole-v0": LowDataConfig(rounds=1, episodes=10, updates=100),
    "Acrobot-v1": LowDataConfig(rounds=20, episodes=5, updates=1),
    "MountainCar-v0": LowDataConfig(rounds=20, episodes=5, updates=1),
}


class LowData(DataSource):
    """`low.rounds` rounds of `low.episodes` episodes sampled from the current policy
    (`collect_episodes`, or `collect_until_episodes_end` for `low.collect == "until_done"`), each
    followed by `low.updates` PPO updates.

    Round r's envs are reset with seeds from `seed + 1000 * r`, so rounds never replay the same
    initial states. A round's data is a fixed dataset: the loop checkpoints it when it stops
    inside a round; nothing else carries over between rounds.

    The protocol's extras: `low.eval_points` evaluations during training, weight averaging over
    the last `low.average_last` updates, `low.refresh_old_policy`; `on_first_data` sees round
    0's real transitions before any update (e.g. TransE pre-training on the protocol's own data).
    """

    log_by_env_steps = False

    def __init__(
        self, env_id: str, low: LowDataConfig, seed: int, env_kwargs: dict[str, Any] | None = None,
        on_first_data: Callable[[TransitionBatch], None] | None = None,
    ) -> None:
        self.env_id, self.low, self.seed = env_id, low, seed
        self.env_kwargs = env_kwargs or {}
        self.rounds, self.updates_per_round = low.rounds, low.updates
        self.average_last, self.on_first_data = low.average_last, on_first_data

    def collect(
        self, policy: ActorCritic, round: int, generator: torch.Generator, accelerate: bool
    ) -> Rollout:
        low, seed = self.low, self.seed + 1000 * round
        if low.collect == "until_done":
            return collect_until_episodes_end(
                self.env_id, policy, low.episodes, seed, low.num_envs, generator,
                accelerate=accelerate, env_kwargs=self.env_kwargs,
            )
        return collect_episodes(
            self.env_id, policy, low.episodes, seed, low.num_envs, generator, accelerate=accelerate,
            env_kwargs=self.env_kwargs,
        )

    def after_collect(self, round: int, rollout: Rollout) -> None:
        if round == 0 and self.on_first_data is not None:
            self.on_first_data(rollout.transitions())

    def update_batch(self, rollout: Rollout, policy: ActorCritic) -> Rollout:
        """With `low.refresh_old_policy`, the round's data relabelled under the current policy
        (log pi_old and V_old recomputed) before each update."""
        return relabel(rollout, policy) if self.low.refresh_old_policy else rollout

    def evaluation(self) -> Evaluation:
        return self.low.evaluation()
