"""Acting in gymnasium 1.x vector envs: the vector env, a rollout of T steps, exact episodes.

How a policy acts (`make_actor`): its own forward under `torch.no_grad()`, or, where enabled
and supported, the NumPy weight snapshot of `xlvin.accel.numpy_actor` (the same function,
computed with less per-op overhead on the few observations of one step). Either way an actor
maps observations [B, ...] (NumPy) to (logits [B, A], values [B]) as NumPy arrays: the
parameters of the policy's `action_distribution()` (`xlvin.nn.distributions`), which samples
the actions and, for Box actions, clips them to the bounds where the env receives them.
"""

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Literal

import gymnasium as gym
import numpy as np
import torch
from gymnasium.vector import AutoresetMode, VectorEnv, VectorWrapper

import xlvin.envs  # noqa: F401  (registers the xlvin/<Game>-v5 Atari ids with gymnasium)
from xlvin.envs.atari import make_ale_vector_env
from xlvin.accel.numpy_actor import make_actor as make_numpy_actor
from xlvin.accel.proof import checked_actor
from xlvin.accel.numpy_sampling import env_actions, sample_actions
from xlvin.envs.failures import PASSED_ON, EnvFailed, env_failed
from xlvin.envs.given import given_env
from xlvin.errors import FieldError, UserError, one_line
from xlvin.nn.policy import ActorCritic
from xlvin.envs.spaces import read_observations
from xlvin.ppo.storage import Rollout, concat_rollouts

#: observations [B, ...] -> (logits [B, A], values [B]), NumPy in and out
Actor = Callable[[np.ndarray], tuple[np.ndarray, np.ndarray]]


def policy_device(policy: torch.nn.Module) -> torch.device:
    param = next(policy.parameters(), None)
    return param.device if param is not None else torch.device("cpu")


def make_actor(policy: ActorCritic, accelerate: bool = True) -> Actor:
    """The policy as an `Actor` for a block in which its weights do not change (a rollout, an
    evaluation): the NumPy snapshot of `xlvin.accel.numpy_actor` when `accelerate` and the
    policy supports it (proved against the forward on its first batch, `xlvin.accel.proof`),
    else its forward under `torch.no_grad()` on its device.

    A policy acts in evaluation mode (Stable-Baselines3's `set_training_mode(False)` during
    collection), its training mode restored after each call: for layers such as BatchNorm
    (`xlvin.nn.encoders.MazeCNN`) an action then depends on its own observation only, through the
    running statistics, and never updates them."""
    fast = make_numpy_actor(policy) if accelerate else None
    device = policy_device(policy)

    @torch.no_grad()
    def act(obs: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        training = policy.training
        policy.eval()
        try:
            logits, values = policy(torch.from_numpy(obs).to(device))
        finally:
            policy.train(training)
        return logits.cpu().numpy(), values.cpu().numpy()

    return act if fast is None else checked_actor(policy, fast, act)


@dataclass
class RolloutState:
    """What a rollout hands to the next one: where each env stands.

    obs: [N, *obs_shape], the observation the next step acts in.
    autoreset: [N] bool, True where the last step was a done, so the next step is an autoreset step.
    """

    obs: np.ndarray
    autoreset: np.ndarray


class EpisodeStatistics(VectorWrapper):
    """gymnasium's vector `RecordEpisodeStatistics` for NEXT_STEP autoreset, reduced to what the
    rollouts read: `info["episode"]["r" | "l"]` where `info["_episode"]` when an episode ends.

    The same float64 running returns and int lengths, updated with the same arithmetic (so the
    same numbers), kept in attributes of the same names (`episode_returns`, `episode_lengths`,
    `prev_dones`), in two NumPy ops per step (no timing or queues of past episodes).
    """

    def __init__(self, env: VectorEnv) -> None:
        super().__init__(env)
        self.episode_returns = np.zeros(self.num_envs)
        self.episode_lengths = np.zeros(self.num_envs, dtype=int)
        self.prev_dones = np.zeros(self.num_envs, dtype=bool)

    def reset(self, *, seed: Any = None, options: dict[str, Any] | None = None) -> Any:
        obs, info = self.env.reset(seed=seed, options=options)
        mask = None if options is None else options.get("reset_mask")
        if mask is None:
            self.episode_returns[:] = 0.0
            self.episode_lengths[:] = 0
            self.prev_dones[:] = False
        else:
            self.episode_returns[mask] = 0.0
            self.episode_lengths[mask] = 0
            self.prev_dones[mask] = False
        return obs, info

    def step(self, actions: Any) -> Any:
        obs, rewards, terminated, truncated, info = self.env.step(actions)
        # NEXT_STEP: the step after a done is the autoreset step and starts the count from 0.
        self.episode_returns = np.where(self.prev_dones, 0.0, self.episode_returns + rewards)
        self.episode_lengths = np.where(self.prev_dones, 0, self.episode_lengths + 1)
        self.prev_dones = dones = terminated | truncated
        if dones.any():
            info["episode"] = {
                "r": np.where(dones, self.episode_returns, 0.0),
                "l": np.where(dones, self.episode_lengths, 0),
            }
            info["_episode"] = dones
        return obs, rewards, terminated, truncated, info


def make_vector_env(
    env_id: str,
    num_envs: int,
    autoreset_mode: AutoresetMode = AutoresetMode.NEXT_STEP,
    record_stats: bool = True,
    vectorization: Literal["sync", "async", "ale"] = "sync",
    env_kwargs: dict[str, Any] | None = None,
    lend: bool = False,
) -> VectorEnv:
    """`gym.make_vec(env_id, num_envs, vectorization, **env_kwargs)` with episode statistics
    (`EpisodeStatistics` unless the sub-envs record their own: `records_own_episodes`), each
    sub-env as the agent reads it (`read_observations`: Dict observations flattened); one-line
    UserErrors.

    Observations are not copied by the vector env (`copy=False`): callers copy them at once.
    The sub-envs skip gymnasium's passive env checker (run `gymnasium.utils.env_checker.check_env`
    on a new environment instead; the library's own environments pass it in the tests).
    "async" steps the envs in worker processes (shared memory); the data is the same as "sync"
    (each env is seeded and stepped identically); "sync" is the default because it measured
    faster on a 2-core machine (benchmarks/notes.md). "ale" makes Atari envs with ale-py's own
    vector env (`xlvin.envs.atari.make_ale_vector_env`: other no-op draws, no resume), which
    records its own games' statistics.

    An env the user passed to the API as an object (`xlvin.envs.given.GivenEnv`: an instance, a
    vector env of different or asynchronous sub-envs) is built from its own makers instead, in
    its own vectorisation; with `lend` (the training env), its first sub-env is the user's
    instance itself.
    """
    if record_stats and autoreset_mode != AutoresetMode.NEXT_STEP:
        raise UserError("episode statistics are kept for NEXT_STEP autoreset only")
    if vectorization == "ale":
        if env_kwargs or autoreset_mode != AutoresetMode.NEXT_STEP:
            raise FieldError("{atari_vector} ale takes no env options and autoresets at the next "
                             "step")
        return make_ale_vector_env(env_id, num_envs)
    given = given_env(env_id)
    try:
        if given is not None and given.own_vector and vectorization != "ale":
            vector = gym.vector.AsyncVectorEnv if given.mode == "async" else gym.vector.SyncVectorEnv
            envs = vector(given.env_fns(num_envs, dict(env_kwargs or {}), read_observations, lend),
                          autoreset_mode=autoreset_mode, copy=False)
            return EpisodeStatistics(envs) if record_stats and not records_own_episodes(envs) else envs
        envs = gym.make_vec(
            env_id,
            num_envs,
            vectorization_mode=vectorization,
            vector_kwargs={"autoreset_mode": autoreset_mode, "copy": False},
            disable_env_checker=True,  # one wrapper layer less per env and step
            wrappers=[read_observations],
            **(env_kwargs or {}),
        )
    except (gym.error.Error, RuntimeError, AssertionError) as err:  # sub-envs of other spaces
        raise UserError(f"cannot make environment {env_id!r}: {one_line(err)}") from None
    return EpisodeStatistics(envs) if record_stats and not records_own_episodes(envs) else envs


def records_own_episodes(envs: VectorEnv) -> bool:
    """Whether the sub-envs report their episodes themselves (a `RecordEpisodeStatistics` in
    their wrapper chain): the Atari training envs do, below their episodic-life wrapper, so that
    an episode of the statistics is a whole game with its unclipped score."""
    for sub in getattr(envs, "envs", []):
        while sub is not None:
            if isinstance(sub, gym.wrappers.RecordEpisodeStatistics):
                return True
            sub = getattr(sub, "env", None)
    return False


def env_name(envs: VectorEnv) -> str:
    """The id the vector env was made from, for error messages: its first sub-env's, or the
    class of that env (one the user passed to the API as an object)."""
    if envs.spec is not None:
        return envs.spec.id
    sub = next(iter(getattr(envs.unwrapped, "envs", [])), envs.unwrapped)
    return sub.spec.id if getattr(sub, "spec", None) else type(sub.unwrapped).__name__


def reset_envs(envs: VectorEnv, seed: int) -> RolloutState:
    """Reset env i with seed `seed + i` (gymnasium's convention) and seed the action space; an
    env that fails is one `EnvFailed`."""
    try:
        obs, _ = envs.reset(seed=seed)
    except PASSED_ON:
        raise
    except Exception as err:
        raise env_failed(env_name(envs), "reset", f"step 0 (seed {seed})", err) from err
    envs.action_space.seed(seed)
    return RolloutState(obs=np.array(obs), autoreset=np.zeros(envs.num_envs, dtype=bool))


def collect_rollout(
    envs: VectorEnv,
    policy: ActorCritic,
    num_steps: int,
    state: RolloutState,
    generator: torch.Generator | None = None,
    accelerate: bool = True,
) -> Rollout:
    """Act `num_steps` steps in every env with actions sampled from `policy`; advance `state`.

    The policy acts through `make_actor(policy, accelerate)`.

    Actions are sampled by the policy's `action_distribution()` with noise drawn from `generator`
    (one draw per rollout: uniforms [T, N] for Discrete actions); the rollout stores them as
    sampled, the env receives `env_actions` of them (Box actions clipped to the bounds).
    Episode returns come from the episode statistics wrapper (`EpisodeStatistics`, or gymnasium's
    RecordEpisodeStatistics): `info["episode"]["r"]` where `info["_episode"]`, in the order the
    episodes finished; so do their successes, from `info["success"]` where the env reports one
    at the end of every episode (the mazes). An env that fails is one `EnvFailed`.
    """
    T, N = num_steps, envs.num_envs
    actor = make_actor(policy, accelerate)
    dist = policy.action_distribution()
    # Preallocated NumPy buffers, filled step by step and handed over as torch tensors that
    # share their memory (torch.from_numpy: no copies).
    obs = np.empty((T + 1, N, *state.obs.shape[1:]), dtype=state.obs.dtype)
    actions = np.zeros((T, N, *dist.action_shape), dtype=dist.action_dtype)
    logits = np.zeros((T, N, dist.num_params), dtype=np.float32)
    values = np.zeros((T + 1, N), dtype=np.float32)
    rewards = np.zeros((T, N), dtype=np.float32)
    terminated = np.zeros((T, N), dtype=bool)
    truncated = np.zeros((T, N), dtype=bool)
    valid = np.zeros((T, N), dtype=bool)
    obs_t = torch.from_numpy(obs)
    noise = dist.noise((T, N), generator).numpy()
    episode_returns: list[float] = []
    episode_lengths: list[int] = []
    episode_successes: list[bool] = []

    obs[0] = state.obs
    autoreset = state.autoreset
    for t in range(T):
        valid[t] = ~autoreset
        logits[t], values[t] = actor(obs[t])
        actions[t] = sample_actions(dist, logits[t], noise[t])
        taken = env_actions(dist, actions[t])
        try:
            next_obs, reward, term, trunc, info = envs.step(taken)
        except PASSED_ON:
            raise
        except Exception as err:
            raise env_failed(env_name(envs), "step", f"step {t + 1} of {T}", err) from err
        obs[t + 1], rewards[t], terminated[t], truncated[t] = next_obs, reward, term, trunc
        autoreset = term | trunc
        if "episode" in info:
            finished = info["_episode"]
            episode_returns += info["episode"]["r"][finished].tolist()
            episode_lengths += info["episode"]["l"][finished].tolist()
            if "success" in info:
                episode_successes += info["success"][finished].tolist()
    values[T] = actor(obs[T])[1]
    if not np.isfinite(rewards).all():  # else the first sign is a NaN loss updates later
        raise non_finite_reward(env_name(envs), rewards)

    state.obs, state.autoreset = obs[T].copy(), autoreset.copy()
    flat = (T * N, *dist.action_shape)
    logprobs = dist.log_prob(torch.from_numpy(logits).flatten(0, 1),
                             torch.from_numpy(actions).reshape(flat)).view(T, N)
    return Rollout(
        obs=obs_t,
        actions=torch.from_numpy(actions),
        logprobs=logprobs,
        values=torch.from_numpy(values),
        rewards=torch.from_numpy(rewards),
        terminated=torch.from_numpy(terminated),
        truncated=torch.from_numpy(truncated),
        valid=torch.from_numpy(valid),
        episode_returns=episode_returns,
        episode_lengths=episode_lengths,
        episode_successes=episode_successes,
    )


def non_finite_reward(env_id: str, rewards: np.ndarray) -> EnvFailed:
    """The EnvFailed of the first reward of a rollout's [T, N] `rewards` that is NaN or
    infinite (as the float32 stored), naming its step and env."""
    t, j = (int(i) for i in np.argwhere(~np.isfinite(rewards))[0])
    return EnvFailed.of(env_id, "step", f"step {t + 1} of {len(rewards)}",
                        f"returned the reward {rewards[t, j]} (env {j}), which PPO cannot learn "
                        "from: rewards must be finite float32 numbers")


def _episode_segments(done: np.ndarray) -> list[tuple[int, int, int | None]]:
    """Episodes of a rollout that started on freshly reset envs: (first step, env, last step).

    An episode of env j starts at step 0 or two steps after the previous done (the step in
    between is the autoreset step); the last step is None while the episode is unfinished.
    Sorted by (first step, env): the order the episodes started in.
    """
    T, N = done.shape
    segments: list[tuple[int, int, int | None]] = []
    for j in range(N):
        start = 0
        for t in np.flatnonzero(done[:, j]):
            segments.append((start, j, int(t)))
            start = int(t) + 2
        if start < T:
            segments.append((start, j, None))
    return sorted(segments, key=lambda s: (s[0], s[1]))


def collect_episodes(
    env_id: str,
    policy: ActorCritic,
    num_episodes: int,
    seed: int,
    num_envs: int = 4,
    generator: torch.Generator | None = None,
    chunk_steps: int = 128,
    accelerate: bool = True,
    env_kwargs: dict[str, Any] | None = None,
) -> Rollout:
    """Exactly `num_episodes` complete episodes sampled from `policy`, as one masked Rollout.

    The episodes counted are the first `num_episodes` to *start* (ties broken by env index),
    never the first to finish, which would favour short episodes. Steps of any other episode
    (extra parallel envs, episodes begun after enough were started) and autoreset steps have
    `valid` False, so `rollout.valid.sum()` is the number of real transitions of the counted
    episodes and `rollout.episode_returns` / `episode_lengths` list them in start order.

    Env j is reset with seed `seed + j` and later episodes continue each env's own generator, so
    the data is a deterministic function of (seed, num_envs, generator state). The default
    generator is `torch.Generator().manual_seed(seed)`.
    """
    if num_episodes < 1:
        raise UserError(f"num_episodes must be >= 1, got {num_episodes}")
    num_envs = max(1, min(num_envs, num_episodes))
    generator = generator if generator is not None else torch.Generator().manual_seed(seed)
    envs = make_vector_env(env_id, num_envs, record_stats=False, env_kwargs=env_kwargs)
    try:
        state = reset_envs(envs, seed)
        parts: list[Rollout] = []
        while True:  # chunk after chunk until the first num_episodes to start have all ended
            parts.append(collect_rollout(envs, policy, chunk_steps, state, generator, accelerate))
            done = np.concatenate([(p.terminated | p.truncated).numpy() for p in parts])
            counted = _episode_segments(done)[:num_episodes]
            if len(counted) == num_episodes and all(end is not None for _, _, end in counted):
                break
    finally:
        envs.close()
    rollout = concat_rollouts(parts)

    end_step = max(end for _, _, end in counted if end is not None) + 1
    valid = torch.zeros_like(rollout.valid)
    for start, j, end in counted:
        valid[start : end + 1, j] = True
    return _first_steps(rollout, end_step, valid, counted)


def collect_until_episodes_end(
    env_id: str,
    policy: ActorCritic,
    num_episodes: int,
    seed: int,
    num_envs: int,
    generator: torch.Generator | None = None,
    chunk_steps: int = 32,
    accelerate: bool = True,
    env_kwargs: dict[str, Any] | None = None,
) -> Rollout:
    """Every step of `num_envs` envs, from their reset until `num_episodes` episodes have ended in
    total (counting every env's): the authors' `gather_fixed_episodes_rollout`.

    Unlike `collect_episodes`, the episodes still running at that step are kept (as unfinished
    data, bootstrapped by the returns), and so are any extra episodes; only autoreset steps are
    invalid. `episode_returns` / `episode_lengths` list the finished episodes in the order they
    ended (ties by env index). Env j is reset with seed `seed + j`.
    """
    if num_episodes < 1 or num_envs < 1:
        raise UserError(f"need num_episodes >= 1 and num_envs >= 1, got {num_episodes}, {num_envs}")
    generator = generator if generator is not None else torch.Generator().manual_seed(seed)
    envs = make_vector_env(env_id, num_envs, record_stats=False, env_kwargs=env_kwargs)
    try:
        state = reset_envs(envs, seed)
        parts: list[Rollout] = []
        ended = 0
        while ended < num_episodes:
            parts.append(collect_rollout(envs, policy, chunk_steps, state, generator, accelerate))
            ended += int((parts[-1].terminated | parts[-1].truncated).sum())
    finally:
        envs.close()
    rollout = concat_rollouts(parts)
    done = (rollout.terminated | rollout.truncated).numpy()
    end_step = int(np.searchsorted(np.cumsum(done.sum(1)), num_episodes)) + 1
    segments = _episode_segments(done[:end_step])
    finished = sorted((s for s in segments if s[2] is not None), key=lambda s: (s[2], s[1]))
    return _first_steps(rollout, end_step, rollout.valid, finished)


def _first_steps(
    rollout: Rollout, steps: int, valid: torch.Tensor, episodes: list[tuple[int, int, int | None]]
) -> Rollout:
    """The first `steps` steps of `rollout` (copies) with the given valid mask, listing the
    finished `episodes` (first step, env, last step) as its episodes."""
    returns = [float(rollout.rewards[a : b + 1, j].sum()) for a, j, b in episodes if b is not None]
    lengths = [b + 1 - a for a, _, b in episodes if b is not None]
    return Rollout(
        obs=rollout.obs[: steps + 1].clone(),
        actions=rollout.actions[:steps].clone(),
        logprobs=rollout.logprobs[:steps].clone(),
        values=rollout.values[: steps + 1].clone(),
        rewards=rollout.rewards[:steps].clone(),
        terminated=rollout.terminated[:steps].clone(),
        truncated=rollout.truncated[:steps].clone(),
        valid=valid[:steps].clone(),
        episode_returns=returns,
        episode_lengths=lengths,
    )


