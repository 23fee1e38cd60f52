"""Collection and PPO updates of S seeds at once, each seed's numbers those of its own run.

`xlvin.ppo.loop.train_together` runs S seeds' trainers in step and hands each round's
collection and update of all of them to a `Population` (of policies its kernels compute:
`Population.refusal` says why not), which computes with the stacked kernels of
`xlvin.accel.population`:

- `collect`: `collect_rollout` of every seed in one loop over the T steps: the S policies act
  as one stacked NumPy actor on [S, N] observations (`StackedActor`, `StackedXLVINActor`;
  where the policy's kind does not stack, `stacks_actor`, each seed acts as alone, with its
  own global generators),
  actions are sampled from each seed's own noise (drawn from its generator as the seed's own
  rollout draws it), and every seed's vector env steps as it would alone: all on arrays at
  once where they are CartPole's (`xlvin.accel.classic_control.CartPoleVectors`), else one
  after another;
- `update`: `ppo_update` of every seed: advantages over all seeds' envs as columns of one
  array (GAE is column by column), each seed's minibatches cut from its own permutation (its
  generator); minibatch k of the seeds whose k-th minibatches have the same size as one stacked
  forward, loss and backward (`StackedPPO.gradients`, XLVIN's `StackedXLVIN.gradients`: the
  kernels are exact for equal sizes only), then one Adam step of every seed. TransE's
  negatives are drawn per seed from its own global generators, as its own step draws them. A
  seed whose minibatch has fewer than `MIN_STACKED_ROWS` rows takes that step alone, in
  `xlvin.ppo.update.minibatch_step` (with the seed's own global generators), and so does
  every minibatch of a policy whose update is not stacked (`stacks_updates`).

The low-data protocol's episodes and the continual maze's rollouts (each seed's curriculum) are
collected seed by seed (`xlvin.ppo.loop`), their updates here.

tests/test_population.py checks that a seed trained in a population writes the run directory
of the same seed trained alone, bit for bit.
"""

from collections.abc import Callable
from contextlib import AbstractContextManager
from typing import NamedTuple

import numpy as np
import torch
from gymnasium.vector import VectorEnv

from xlvin.accel.classic_control import CartPoleVectors
from xlvin.accel.flat_adam import FlatAdam
from xlvin.accel.numpy_sampling import env_actions, sample_actions
from xlvin.accel.proof import actor_verdict
from xlvin.accel.population import (
    MAX_STACK,
    MIN_STACKED_ROWS,
    StackedActor,
    StackedPPO,
    StackedWeights,
    StackedXLVINActor,
    stacks_actor,
    stacks_updates,
    unsupported,
)
from xlvin.accel.stacked_xlvin import StackedXLVIN, shared_executor
from xlvin.envs.failures import PASSED_ON, EnvFailed, env_failed
from xlvin.errors import TrainingDiverged
from xlvin.nn.agent import XLVINAgent
from xlvin.nn.transe import negative_indices
from xlvin.nn.policy import ActorCritic
from xlvin.ppo.collect import (
    EpisodeStatistics,
    RolloutState,
    env_name,
    make_actor,
    non_finite_reward,
)
from xlvin.ppo.config import PPOConfig
from xlvin.ppo.storage import Minibatch, Rollout
from xlvin.ppo.update import (
    LOGRATIO_LIMIT,
    diverged,
    estimate_advantages,
    explained_variance,
    minibatch_step,
    normalise_over_batch,
)

#: The loss terms every PPO update logs, in `ppo_update`'s order.
TERMS = ("policy_loss", "value_loss", "entropy", "approx_kl", "clipfrac")


class Population:
    """The stacked kernels of S policies of one architecture, each with its own `FlatAdam`
    (whose buffers move into the stacked ones: `StackedWeights`); seed s is row s, and the
    errors that are its own alone (its loss diverged, its env failed) begin with `names[s]`
    (default "row s")."""

    def __init__(self, policies: list[ActorCritic], optimizers: list[FlatAdam],
                 names: list[str] | None = None) -> None:
        reason = self.refusal(policies, optimizers)
        if reason is not None:  # the caller checks first (`xlvin.run.population`): a guard
            raise ValueError(f"these policies cannot train as a population: {reason}")
        self.policies = policies
        self.names = names or [f"row {s}" for s in range(len(policies))]
        self.weights = StackedWeights(optimizers)
        self.kernels: StackedPPO | StackedXLVIN | None = None  # None: seed by seed
        if stacks_updates(policies[0]) and not isinstance(policies[0], XLVINAgent):
            self.kernels = StackedPPO(self.weights)
        elif stacks_updates(policies[0]) and shared_executor(policies):  # type: ignore[arg-type]
            self.kernels = StackedXLVIN(self.weights, policies[0])

    @staticmethod
    def refusal(policies: list[ActorCritic], optimizers: list[object]) -> str | None:
        """Why these policies cannot train as a population, or None."""
        reasons = {unsupported(p) for p in policies} - {None}
        if reasons:
            return reasons.pop()
        if not all(isinstance(o, FlatAdam) for o in optimizers):
            return "the readable update (accelerate off, or a GPU)"
        return None

    def collect(
        self, seeds: list[int], envs: list[VectorEnv], states: list[RolloutState],
        num_steps: int, generators: list[torch.Generator],
        own: list[Callable[[], AbstractContextManager[None]]],
    ) -> list[Rollout]:
        """`xlvin.ppo.collect.collect_rollout` of seeds `seeds` (rows of the stack; envs,
        state and generator: each seed's, the same number of envs each), T = `num_steps` steps,
        advancing each state. `own[i]()`: a block in which the global generators are seed i's
        (a seed acting alone draws from them: a planner's sampled expansions)."""
        T, S, N = num_steps, len(envs), envs[0].num_envs
        actor = self._actor(seeds, np.stack([state.obs for state in states]), own)
        dist = self.policies[0].action_distribution()
        first = states[0].obs
        obs = np.empty((T + 1, S, N, *first.shape[1:]), dtype=first.dtype)
        actions = np.zeros((T, S, N, *dist.action_shape), dtype=dist.action_dtype)
        logits = np.zeros((T, S, N, dist.num_params), dtype=np.float32)
        values = np.zeros((T + 1, S, N), dtype=np.float32)
        rewards = np.zeros((T, S, N), dtype=np.float32)
        terminated = np.zeros((T, S, N), dtype=bool)
        truncated = np.zeros((T, S, N), dtype=bool)
        valid = np.zeros((T, S, N), dtype=bool)
        noise = np.stack([dist.noise((T, N), g).numpy() for g in generators], 1)  # [T, S, N, ...]
        episodes: list[tuple[list[float], list[int], list[bool]]] = [([], [], []) for _ in envs]

        obs[0] = np.stack([state.obs for state in states])
        autoreset = np.stack([state.autoreset for state in states])
        arrays = CartPoleVectors(envs) if _cartpoles(envs) else None
        for t in range(T):
            valid[t] = ~autoreset
            logits[t], values[t] = actor(obs[t])
            actions[t] = sample_actions(dist, logits[t].reshape(S * N, -1),
                                        noise[t].reshape(S * N, *noise.shape[3:])
                                        ).reshape(actions[t].shape)
            taken = env_actions(dist, actions[t])
            if arrays is not None:
                stepped = arrays.step(taken.reshape(S * N))
                obs[t + 1] = stepped[0].reshape(obs[t + 1].shape)
                rewards[t], terminated[t], truncated[t] = (x.reshape(S, N) for x in stepped[1:])
                done = terminated[t] | truncated[t]
                for s in np.flatnonzero(done.any(1)):
                    returns, lengths, _ = episodes[s]
                    returns += arrays.returns[s * N : (s + 1) * N][done[s]].tolist()
                    lengths += arrays.lengths[s * N : (s + 1) * N][done[s]].tolist()
            else:
                self._step_each(envs, taken, t, T, obs, rewards, terminated, truncated, episodes,
                                [self.names[s] for s in seeds])
            autoreset = terminated[t] | truncated[t]
        if arrays is not None:
            arrays.store()
        values[T] = actor(obs[T])[1]
        for s, env in enumerate(envs):
            if not np.isfinite(rewards[:, s]).all():  # as `collect_rollout` refuses them
                failed = non_finite_reward(env_name(env), rewards[:, s])
                raise EnvFailed.of(failed.env_id, failed.call,
                                   f"{failed.step} of {self.names[seeds[s]]}", failed.reason)

        rollouts = []
        for s, state in enumerate(states):
            state.obs, state.autoreset = obs[T, s].copy(), autoreset[s].copy()
            seed_logits = torch.from_numpy(np.ascontiguousarray(logits[:, s]))
            seed_actions = torch.from_numpy(np.ascontiguousarray(actions[:, s]))
            logprobs = dist.log_prob(seed_logits.flatten(0, 1),
                                     seed_actions.reshape(T * N, *dist.action_shape)).view(T, N)
            returns, lengths, successes = episodes[s]
            rollouts.append(Rollout(
                obs=torch.from_numpy(np.ascontiguousarray(obs[:, s])),
                actions=seed_actions,
                logprobs=logprobs,
                values=torch.from_numpy(np.ascontiguousarray(values[:, s])),
                rewards=torch.from_numpy(np.ascontiguousarray(rewards[:, s])),
                terminated=torch.from_numpy(np.ascontiguousarray(terminated[:, s])),
                truncated=torch.from_numpy(np.ascontiguousarray(truncated[:, s])),
                valid=torch.from_numpy(np.ascontiguousarray(valid[:, s])),
                episode_returns=returns, episode_lengths=lengths, episode_successes=successes,
            ))
        return rollouts

    def _actor(self, seeds: list[int], obs: np.ndarray,
               own: list[Callable[[], AbstractContextManager[None]]]
               ) -> Callable[[np.ndarray], tuple[np.ndarray, np.ndarray]]:
        """The seeds' policies acting on observations [S, N, ...] -> (logits [S, N, A], values
        [S, N]): one stacked NumPy actor where the policy's kind stacks (`stacks_actor`) and the
        NumPy actor proved itself against the policy's forward (`xlvin.accel.proof.
        checked_actor`; on the first seed's observations `obs[0]`, where this process has not
        proved it yet), else, as each seed's own rollout then acts (`make_actor`), each seed
        one after another with its own global generators."""
        policies = [self.policies[s] for s in seeds]
        if stacks_actor(policies[0]) and actor_verdict(policies[0]) is None:
            make_actor(policies[0])(obs[0])  # the proof, on its first batch
        if stacks_actor(policies[0]) and actor_verdict(policies[0]):
            if isinstance(policies[0], XLVINAgent):
                return StackedXLVINActor(policies)
            return StackedActor(self.weights, seeds, policies[0])  # type: ignore[arg-type]
        actors = [make_actor(policy) for policy in policies]

        def one_by_one(x: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
            acted = []
            for act, seed_obs, mine in zip(actors, x, own):
                with mine():
                    acted.append(act(seed_obs))
            logits, values = zip(*acted)
            return np.stack(logits), np.stack(values)

        return one_by_one

    @staticmethod
    def _step_each(envs: list[VectorEnv], taken: np.ndarray, t: int, T: int, obs: np.ndarray,
                   rewards: np.ndarray, terminated: np.ndarray, truncated: np.ndarray,
                   episodes: list[tuple[list[float], list[int], list[bool]]],
                   names: list[str]) -> None:
        """Step t of every seed's vector env, one after another, into the rollout's arrays."""
        for s, env in enumerate(envs):
            try:
                next_obs, reward, term, trunc, info = env.step(taken[s])
            except PASSED_ON:
                raise
            except Exception as err:
                raise env_failed(env_name(env), "step", f"step {t + 1} of {T} of {names[s]}",
                                 err) from err
            obs[t + 1, s], rewards[t, s] = next_obs, reward
            terminated[t, s], truncated[t, s] = term, trunc
            if "episode" in info:
                finished = info["_episode"]
                returns, lengths, successes = episodes[s]
                returns += info["episode"]["r"][finished].tolist()
                lengths += info["episode"]["l"][finished].tolist()
                if "success" in info:
                    successes += info["success"][finished].tolist()

    def update(
        self, seeds: list[int], rollouts: list[Rollout], cfg: PPOConfig,
        generators: list[torch.Generator], own: list[Callable[[], AbstractContextManager[None]]],
    ) -> list[dict[str, float]]:
        """`xlvin.ppo.update.ppo_update` of seeds `seeds` (rows of the stack) on their rollouts
        (of the same number of envs) with their generators: each seed's metrics. `own[i]()`: a
        block in which the global generators are seed i's (a step a seed takes alone draws from
        them: TransE's negatives)."""
        advantages, returns = _advantages(rollouts, cfg)
        plan = _Minibatches(rollouts, advantages, returns, generators)
        logged: list[list[np.ndarray]] = [[] for _ in seeds]
        aux: list[str] = []  # the auxiliary terms' names (`minibatch_step`'s), after TERMS
        for _ in range(cfg.update_epochs):
            cuts = plan.epoch(cfg)
            for k in range(max((len(c) for c in cuts), default=0)):
                parts = [c[k] if k < len(c) else None for c in cuts]
                for i, terms in self._step(seeds, plan, parts, cfg, aux, own).items():
                    logged[i].append(terms)
        metrics = []
        for i, rollout in enumerate(rollouts):
            if not logged[i]:
                metrics.append({})
                continue
            means = torch.from_numpy(np.stack(logged[i])).double().mean(0).tolist()
            seed_metrics = {f"losses/{name}": value
                            for name, value in zip((*TERMS, *aux), means)}
            seed_metrics["losses/explained_variance"] = explained_variance(
                returns[i][rollout.valid], rollout.old_values())
            metrics.append(seed_metrics)
        return metrics

    def _step(self, seeds: list[int], plan: "_Minibatches", parts: list["_Part | None"],
              cfg: PPOConfig, aux: list[str],
              own: list[Callable[[], AbstractContextManager[None]]]) -> dict[int, np.ndarray]:
        """One optimiser step of every seed i with a minibatch (`parts[i]`): its loss terms
        [5 + len(aux)], by i (`aux` set to the auxiliary terms' names). Seeds whose minibatches
        have the same number of rows, at least `MIN_STACKED_ROWS`, take it as one stacked step,
        up to `MAX_STACK` of them at a time; the others, and every seed of a policy whose update
        is not stacked (`stacks_updates`), alone (`minibatch_step`)."""
        groups: dict[int | tuple[int, int], list[int]] = {}
        terms: dict[int, np.ndarray] = {}
        for i, part in enumerate(parts):
            if part is None:
                continue
            if self.kernels is not None and part.rows >= MIN_STACKED_ROWS:
                size = part.rows
                if len(groups.get(size, ())) == MAX_STACK:  # full: a new group of this size
                    groups[(size, i)] = groups.pop(size)
                groups.setdefault(size, []).append(i)
            else:
                policy, optimizer = self.policies[seeds[i]], self.weights.optimizers[seeds[i]]
                mb = plan.minibatch(part)
                with own[i]():
                    try:
                        seed_terms, aux[:] = minibatch_step(policy, optimizer, mb, cfg)
                    except TrainingDiverged as err:
                        raise TrainingDiverged(f"{self.names[seeds[i]]}: {err}") from None
                terms[i] = seed_terms.numpy()
        stepped = []
        for group in groups.values():
            obs, actions, (logprobs, adv, returns, values, _) = plan.gather(
                [parts[i] for i in group])
            if cfg.norm_adv and not cfg.norm_adv_batch and adv.shape[1] > 1:
                adv = (adv - adv.mean(1, keepdim=True)) / (adv.std(1, keepdim=True) + 1e-8)
            rows = [seeds[i] for i in group]
            loss = dict(clip=cfg.clip_coef, clip_value_loss=cfg.clip_value_loss,
                        ent_coef=cfg.ent_coef, vf_coef=cfg.vf_coef,
                        logratio_limit=LOGRATIO_LIMIT, max_norm=cfg.max_grad_norm)
            columns = (logprobs.numpy(), adv.numpy(), returns.numpy(), values.numpy())
            if isinstance(self.kernels, StackedXLVIN):
                policy = self.policies[seeds[group[0]]]
                negatives = None
                if policy.transe_weight != 0:  # each seed's draw from its own generators
                    negatives = torch.stack([_negatives(policy, obs.shape[1], own[i])
                                             for i in group])
                aux[:] = [] if negatives is None else ["transe"]
                next_obs = None if negatives is None else plan.next_obs([parts[i] for i in group])
                loss_terms = self.kernels.gradients(rows, obs, next_obs, actions, negatives,
                                                    *columns, **loss)
            else:
                assert self.kernels is not None
                loss_terms = self.kernels.gradients(rows, obs, actions.numpy(), *columns, **loss)
            for k, i in enumerate(group):
                if not np.isfinite(loss_terms[k, 0]):
                    err = diverged(float(loss_terms[k, 1]), float(loss_terms[k, 2]),
                                   [float(t) for t in loss_terms[k, 6:]])
                    raise TrainingDiverged(f"{self.names[rows[k]]}: {err}")
                terms[i] = loss_terms[k, 1:]
            stepped += rows
        self.weights.step(stepped)
        return terms


def _negatives(policy: XLVINAgent, rows: int,
               own: Callable[[], AbstractContextManager[None]]) -> torch.Tensor:
    """TransE's negatives of a seed's minibatch of `rows` transitions [rows], drawn from the
    seed's global generators (`negative_indices`, as its own step draws them)."""
    with own():
        return negative_indices(rows, policy.transe_negatives)


def _cartpoles(envs: list[VectorEnv]) -> bool:
    """Whether the seeds' envs are training envs of plain CartPole that `CartPoleVectors`
    steps on arrays (gymnasium's own step for each, else)."""
    return all(type(env) is EpisodeStatistics for env in envs) and CartPoleVectors.supports(envs)


def _advantages(rollouts: list[Rollout], cfg: PPOConfig
                ) -> tuple[list[torch.Tensor], list[torch.Tensor]]:
    """`estimate_advantages` (and `normalise_over_batch`) of each rollout: computed once over
    all of them side by side, env columns [T, S N] (the estimators treat columns alone), or
    rollout by rollout where their lengths differ (low-data episodes)."""
    advantages: tuple[torch.Tensor, ...]
    returns: tuple[torch.Tensor, ...]
    if len({r.actions.shape[0] for r in rollouts}) == 1:
        joined = Rollout(**{name: torch.cat([getattr(r, name) for r in rollouts], dim=1)
                            for name in ("obs", "actions", "logprobs", "values", "rewards",
                                         "terminated", "truncated", "valid")})
        together = estimate_advantages(joined, cfg)
        sizes = [r.num_envs for r in rollouts]
        advantages, returns = together[0].split(sizes, dim=1), together[1].split(sizes, dim=1)
    else:
        advantages, returns = zip(*(estimate_advantages(r, cfg) for r in rollouts))
    if cfg.norm_adv and cfg.norm_adv_batch:
        advantages = tuple(normalise_over_batch(a, r.valid) for a, r in zip(advantages, rollouts))
    return ([a.contiguous() for a in advantages], [r.contiguous() for r in returns])


class _Part(NamedTuple):
    """A seed's minibatch: its rows in the seeds' joined observations and real transitions."""

    obs: torch.Tensor  # [B] rows of `_Minibatches.obs`
    columns: torch.Tensor  # [B] rows of `_Minibatches.actions` and `.floats`
    rows: int  # B


class _Minibatches:
    """The seeds' update epochs as `Rollout.minibatches` cuts them: each epoch, each seed's real
    transitions permuted with its generator and cut into minibatches; the minibatches of a
    group of seeds gathered at once, from the seeds' rollouts joined."""

    def __init__(self, rollouts: list[Rollout], advantages: list[torch.Tensor],
                 returns: list[torch.Tensor], generators: list[torch.Generator]) -> None:
        self.generators, self.num_envs = generators, rollouts[0].num_envs
        valid = [r.valid for r in rollouts]
        self.real_rows = [v.flatten().nonzero().squeeze(1) for v in valid]
        self.obs = torch.cat([r.obs.flatten(0, 1) for r in rollouts])  # [S (T + 1) N, ...]
        self.obs_start = np.cumsum([0] + [r.obs.shape[0] * r.num_envs for r in rollouts])
        self.column_start = np.cumsum([0] + [len(rows) for rows in self.real_rows])
        self.actions = torch.cat([r.actions[v] for r, v in zip(rollouts, valid)])
        # logprobs, advantages, returns, values and rewards of the real transitions: [5, n]
        self.floats = torch.stack([torch.cat(column) for column in zip(*(
            (r.logprobs[v], a[v], g[v], r.values[:-1][v], r.rewards[v])
            for r, v, a, g in zip(rollouts, valid, advantages, returns)))])

    def epoch(self, cfg: PPOConfig) -> list[list[_Part]]:
        """Each seed's minibatches of the next epoch (`Rollout.minibatches`'s cut)."""
        cuts = []
        for s, (rows, generator) in enumerate(zip(self.real_rows, self.generators)):
            n = rows.shape[0]
            if n == 0:
                cuts.append([])
                continue
            order = torch.randperm(n, generator=generator)
            obs, columns = self.obs_start[s] + rows[order], self.column_start[s] + order
            if cfg.minibatch_size > 0:
                size = cfg.minibatch_size
                cuts.append([_Part(obs[a : a + size], columns[a : a + size], size)
                             for a in range(0, n - size + 1, size)])
            else:
                parts, extra = divmod(n, cfg.num_minibatches)  # torch.tensor_split's sizes
                sizes = [parts + 1] * extra + [parts] * (cfg.num_minibatches - extra)
                bounds = np.cumsum([0] + sizes)
                cuts.append([_Part(obs[a:b], columns[a:b], int(b - a))
                             for a, b in zip(bounds[:-1], bounds[1:]) if b > a])
        return cuts

    def gather(self, parts: list[_Part]) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """Minibatches of the same size, stacked: observations [G, B, ...], actions [G, B] and
        the floats [5, G, B] (logprobs, advantages, returns, values, rewards)."""
        columns = torch.stack([part.columns for part in parts])
        obs = self.obs[torch.stack([part.obs for part in parts])]
        return obs, self.actions[columns], self.floats[:, columns]

    def next_obs(self, parts: list[_Part]) -> torch.Tensor:
        """The next observations of minibatches of the same size, stacked [G, B, ...]."""
        return self.obs[torch.stack([part.obs for part in parts]) + self.num_envs]

    def minibatch(self, part: _Part) -> Minibatch:
        """A seed's minibatch as `Rollout.minibatches` gives it."""
        logprobs, advantages, returns, values, rewards = self.floats[:, part.columns]
        return Minibatch(self.obs[part.obs], self.obs[part.obs + self.num_envs],
                         self.actions[part.columns], rewards, logprobs, values, advantages,
                         returns)
