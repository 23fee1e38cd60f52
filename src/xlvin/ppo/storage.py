"""Rollout storage: what a PPO update learns from, and the minibatches it hands out.

Layout of a `Rollout` (T steps, N envs), with gymnasium's default NEXT_STEP autoreset
-------------------------------------------------------------------------------------
- `obs[t]`, t = 0..T: the observation action t was taken in; `obs[T]` is where the next rollout
  starts. `obs[t + 1]` is also the observation *returned* by step t, so when step t terminated or
  truncated, `obs[t + 1]` is that episode's true final observation: with NEXT_STEP the reset only
  happens on the following step.
- The step after a done (terminated or truncated) is an *autoreset step*: the vector env ignores
  its action and returns the reset observation with reward 0 and no done. It is not a transition
  of the MDP, so `valid[t]` is False there, and everything that learns from transitions (policy
  and value loss, advantage statistics, auxiliary losses such as TransE) skips it.
- `values[t] = V(obs[t])` under the acting policy, t = 0..T; `values[t + 1]` after a truncation is
  V(final observation), exactly the bootstrap a truncated episode needs.
"""

import dataclasses
from collections.abc import Iterator
from dataclasses import dataclass, field

import torch

from xlvin.nn.policy import TransitionBatch


@dataclass
class Rollout:
    """T steps of N envs; see the module docstring for the exact layout."""

    obs: torch.Tensor  # [T + 1, N, *obs_shape], the env's dtype
    actions: torch.Tensor  # [T, N] long; [T, N, K] long (MultiDiscrete), [T, N, d] float32 (Box, unclipped)
    logprobs: torch.Tensor  # [T, N] log pi_old(a_t | obs_t)
    values: torch.Tensor  # [T + 1, N] V_old(obs_t)
    rewards: torch.Tensor  # [T, N] float32
    terminated: torch.Tensor  # [T, N] bool
    truncated: torch.Tensor  # [T, N] bool
    valid: torch.Tensor  # [T, N] bool: False for autoreset steps (and, in collect_episodes, steps
    # of episodes that were not counted)
    episode_returns: list[float] = field(default_factory=list)  # episodes finished in it
    episode_lengths: list[int] = field(default_factory=list)
    #: per finished episode, in the same order, the env's `info["success"]` where it reports one
    #: (goal-reaching envs such as the mazes); empty otherwise
    episode_successes: list[bool] = field(default_factory=list)

    @property
    def num_steps(self) -> int:
        return self.actions.shape[0]

    @property
    def num_envs(self) -> int:
        return self.actions.shape[1]

    def transitions(self) -> TransitionBatch:
        """The real transitions (s, a, s', r) of the rollout, flattened: autoreset steps dropped."""
        valid = self.valid
        return TransitionBatch(
            obs=self.obs[:-1][valid],
            actions=self.actions[valid],
            next_obs=self.obs[1:][valid],
            rewards=self.rewards[valid],
        )

    def minibatches(
        self,
        advantages: torch.Tensor,
        returns: torch.Tensor,
        num_minibatches: int,
        generator: torch.Generator | None = None,
        device: torch.device | str = "cpu",
        size: int = 0,
    ) -> Iterator["Minibatch"]:
        """One epoch over the real transitions: permute them with `generator` and cut the
        permutation into `num_minibatches` consecutive minibatches (sizes differ by at most one;
        empty ones are skipped), or, with `size` > 0, into minibatches of exactly `size`, the
        last partial one dropped (as torch's BatchSampler with drop_last=True). `advantages`
        and `returns` are [T, N], as `xlvin.ppo.advantages` gives them.

        Observations are gathered straight from `obs`: row r of the flattened [(T + 1) N, ...]
        observations is step r // N of env r % N, and its next observation is row r + N.
        """
        valid = self.valid
        real_rows = valid.flatten().nonzero().squeeze(1)  # [n], in `transitions()` order
        n = real_rows.shape[0]
        if n == 0:
            return
        columns = {
            "actions": self.actions[valid], "rewards": self.rewards[valid],
            "logprobs": self.logprobs[valid], "values": self.values[:-1][valid],
            "advantages": advantages[valid], "returns": returns[valid],
        }
        columns = {name: column.to(device) for name, column in columns.items()}
        flat_obs = self.obs.flatten(0, 1).to(device)
        order = torch.randperm(n, generator=generator).to(device)
        rows = real_rows.to(device)[order]
        if size > 0:
            sizes = [size] * (n // size) + [n % size]  # the last (partial) one is dropped below
        else:
            sizes = [len(part) for part in torch.tensor_split(torch.arange(n), num_minibatches)]
        parts = [flat_obs[rows].split(sizes), flat_obs[rows + self.num_envs].split(sizes)]
        parts += [column[order].split(sizes) for column in columns.values()]
        for obs, next_obs, *rest in zip(*parts):
            if obs.shape[0] > 0 and (size == 0 or obs.shape[0] == size):
                yield Minibatch(obs, next_obs, *rest)

    def old_values(self) -> torch.Tensor:
        """V_old of the real transitions [n] (for the explained variance)."""
        return self.values[:-1][self.valid]

    def to_checkpoint(self) -> tuple[dict[str, torch.Tensor], dict[str, list]]:
        """The rollout as (its tensors, its JSON lists); `Rollout(**tensors, **lists)` rebuilds it."""
        tensors, lists = {}, {}
        for f in dataclasses.fields(self):
            value = getattr(self, f.name)
            (tensors if torch.is_tensor(value) else lists)[f.name] = value
        return tensors, lists


@dataclass
class Minibatch:
    """Real transitions and their PPO targets: each field [B] (observations [B, *obs_shape])."""

    obs: torch.Tensor
    next_obs: torch.Tensor
    actions: torch.Tensor
    rewards: torch.Tensor
    logprobs: torch.Tensor  # log pi_old(a|s)
    values: torch.Tensor  # V_old(s)
    advantages: torch.Tensor
    returns: torch.Tensor

    def transitions(self) -> TransitionBatch:
        return TransitionBatch(self.obs, self.actions, self.next_obs, self.rewards)


def concat_rollouts(parts: list[Rollout]) -> Rollout:
    """Join consecutive rollouts of the same envs along time (part k+1 starts where k ended)."""
    return Rollout(
        obs=torch.cat([p.obs[:-1] for p in parts] + [parts[-1].obs[-1:]]),
        actions=torch.cat([p.actions for p in parts]),
        logprobs=torch.cat([p.logprobs for p in parts]),
        values=torch.cat([p.values[:-1] for p in parts] + [parts[-1].values[-1:]]),
        rewards=torch.cat([p.rewards for p in parts]),
        terminated=torch.cat([p.terminated for p in parts]),
        truncated=torch.cat([p.truncated for p in parts]),
        valid=torch.cat([p.valid for p in parts]),
        episode_returns=[r for p in parts for r in p.episode_returns],
        episode_lengths=[n for p in parts for n in p.episode_lengths],
        episode_successes=[s for p in parts for s in p.episode_successes],
    )
