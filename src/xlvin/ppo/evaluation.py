"""Evaluating a policy on fresh episodes (greedy by default), each seeded on its own."""

from typing import Any, Protocol

import gymnasium as gym
import numpy as np

from xlvin.accel.classic_control import make_array_steps
from xlvin.accel.numpy_sampling import env_actions, mode_actions, sample_actions
from xlvin.envs.failures import PASSED_ON, EnvFailed, env_failed, observation_problem
from xlvin.errors import UserError
from xlvin.nn.distributions import ActionDistribution, DiagGaussian
from xlvin.nn.policy import ActorCritic
from xlvin.ppo.collect import make_actor
from xlvin.envs.spaces import read_observations


def _make_env(env_id: str, env_kwargs: dict[str, Any] | None = None) -> gym.Env:
    """One env as `make_vector_env` builds each of its sub-envs, with the same one-line errors."""
    try:
        return read_observations(gym.make(env_id, **(env_kwargs or {})))
    except gym.error.Error as err:
        raise UserError(f"cannot make environment {env_id!r}: {err}") from None


class Steps(Protocol):
    """Episodes played side by side in a list of envs: `reset(j, seed)` starts a fresh episode in
    env j and returns its first observation; `step(js, actions)` steps envs js and returns
    (observations [m, ...], rewards [m], terminated [m], truncated [m])."""

    def reset(self, j: int, seed: int) -> np.ndarray: ...

    def step(self, js: list[int], actions: np.ndarray
             ) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]: ...


class EnvSteps:
    """`Steps` through each env's own `reset` and `step`; an env that fails (`xlvin.envs.failures`)
    is one `EnvFailed` naming the episode's seed and step."""

    def __init__(self, envs: list[gym.Env]) -> None:
        self.envs = envs
        self.seeds, self.steps = [0] * len(envs), [0] * len(envs)

    def reset(self, j: int, seed: int) -> np.ndarray:
        self.seeds[j], self.steps[j] = seed, 0
        try:
            obs, _ = self.envs[j].reset(seed=seed)
        except PASSED_ON:
            raise
        except Exception as err:
            raise env_failed(self._id(j), "reset", self._where(j), err) from err
        return self._checked(j, "reset", obs)

    def step(self, js: list[int], actions: np.ndarray
             ) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        results = []
        for j, action in zip(js, actions):
            self.steps[j] += 1
            try:
                results.append(self.envs[j].step(action))
            except PASSED_ON:
                raise
            except Exception as err:
                raise env_failed(self._id(j), "step", self._where(j), err) from err
            self._checked(j, "step", results[-1][0])
        obs, rewards, terminated, truncated, _ = zip(*results)
        return (np.stack([np.asarray(o) for o in obs]), np.array(rewards, dtype=np.float64),
                np.array(terminated), np.array(truncated))

    def _checked(self, j: int, call: str, obs: Any) -> np.ndarray:
        problem = observation_problem(obs, self.envs[j].observation_space)
        if problem is not None:
            raise EnvFailed.of(self._id(j), call, self._where(j), problem)
        return np.asarray(obs)

    def _id(self, j: int) -> str:
        env = self.envs[j]
        return env.spec.id if env.spec is not None else type(env.unwrapped).__name__

    def _where(self, j: int) -> str:
        return f"step {self.steps[j]} of the evaluation episode of seed {self.seeds[j]}"


def make_steps(envs: list[gym.Env], accelerate: bool) -> Steps:
    """`EnvSteps(envs)`, or with `accelerate` where the envs are supported (gymnasium's
    CartPole and Acrobot), the same episodes stepped on arrays by `xlvin.accel.classic_control`."""
    fast = make_array_steps(envs) if accelerate else None
    return fast if fast is not None else EnvSteps(envs)


class Evaluator:
    """Plays episodes of `env_id` with up to `num_envs` envs at once, kept between calls (a
    training loop that evaluates after every update makes its envs once)."""

    def __init__(
        self, env_id: str, num_envs: int = 32, env_kwargs: dict[str, Any] | None = None
    ) -> None:
        if num_envs < 1:
            raise UserError(f"num_envs must be >= 1, got {num_envs}")
        self.env_id = env_id
        self.envs = [_make_env(env_id, env_kwargs) for _ in range(num_envs)]

    def close(self) -> None:
        for env in self.envs:
            env.close()

    def __call__(
        self,
        policy: ActorCritic,
        episodes: int,
        seed: int,
        deterministic: bool = True,
        accelerate: bool = True,
    ) -> dict[str, Any]:
        """Play `episodes` fresh episodes; returns mean, std (population) and the list of returns.

        Episode i (0-based) is reset with seed `seed + i` and, when sampling, draws its actions
        from its own NumPy stream seeded by (seed + i, 1), so each episode's outcome does not
        depend on the number of envs (up to floating-point differences between batch sizes in
        the network). The envs play episodes side by side with one batched forward per step over
        the envs still playing: an env whose episode ended starts the next unplayed episode or,
        when none is left, leaves the batch (no env is stepped for nothing). With `accelerate`,
        the policy acts through `xlvin.accel.numpy_actor` and CartPole and Acrobot episodes are
        stepped on arrays (`make_steps`); both give the same returns as the readable route.

        deterministic=True (default) plays the greedy action, the mode of pi(.|s) (argmax, or the
        Gaussian's mean clipped to the bounds), the usual choice for reporting a final policy;
        False samples from pi. Observations are normalised with the policy's frozen statistics
        where it has them (`xlvin.nn.normalization`). The policy is put in eval mode
        (BatchNorm uses running statistics) and its previous mode restored afterwards. It acts
        through `xlvin.ppo.collect.make_actor(policy, accelerate)`.
        """
        if episodes < 1:
            raise UserError(f"episodes must be >= 1, got {episodes}")
        envs = self.envs[: min(len(self.envs), episodes)]
        n = len(envs)
        was_training = policy.training
        policy.eval()
        returns = np.zeros(episodes)
        lengths = np.zeros(episodes, dtype=int)
        episode_of = [-1] * n  # the episode env j plays; -1 once no episode is left for it
        rngs: list[np.random.Generator | None] = [None] * n
        dist = policy.action_distribution()
        observations: list[np.ndarray] = [np.empty(0)] * n
        running_return = [0.0] * n
        running_length = [0] * n
        next_episode = 0

        def start(j: int) -> None:
            """Env j starts the next unplayed episode, or leaves the batch when none is left."""
            nonlocal next_episode
            if next_episode == episodes:
                episode_of[j] = -1
                return
            observations[j] = steps.reset(j, seed + next_episode)
            episode_of[j] = next_episode
            rngs[j] = None if deterministic else np.random.default_rng((seed + next_episode, 1))
            running_return[j], running_length[j] = 0.0, 0
            next_episode += 1

        try:
            steps = make_steps(envs, accelerate)
            for j in range(n):
                start(j)
            actor = make_actor(policy, accelerate)
            while True:
                active = [j for j in range(n) if episode_of[j] >= 0]
                if not active:
                    break
                logits = actor(np.stack([observations[j] for j in active]))[0]
                if deterministic:
                    actions = mode_actions(dist, logits)
                else:
                    actions = sample_actions(dist, logits, np.stack([episode_noise(dist, rngs[j])
                                                                     for j in active]))
                obs, rewards, terminated, truncated = steps.step(active, env_actions(dist, actions))
                for i, j in enumerate(active):
                    observations[j] = obs[i]
                    running_return[j] += float(rewards[i])
                    running_length[j] += 1
                    if terminated[i] or truncated[i]:
                        returns[episode_of[j]] = running_return[j]
                        lengths[episode_of[j]] = running_length[j]
                        start(j)
        finally:
            policy.train(was_training)
        return {
            "mean": float(returns.mean()),
            "std": float(returns.std()),
            "returns": returns.tolist(),
            "lengths": lengths.tolist(),
            "episodes": episodes,
            "seed": seed,
            "deterministic": deterministic,
        }


def episode_noise(dist: ActionDistribution, rng: np.random.Generator | None) -> np.ndarray:
    """One step's sampling noise of an episode from its own stream: a uniform (Discrete), one
    per component (MultiDiscrete), or standard normals (Box: one per action, or gSDE's matrix)."""
    assert rng is not None
    if isinstance(dist, DiagGaussian):
        return rng.standard_normal(dist.noise_shape).astype(np.float32)
    return rng.random(dist.action_shape)


def evaluate_policy(
    policy: ActorCritic,
    env_id: str,
    episodes: int,
    seed: int,
    deterministic: bool = True,
    num_envs: int = 32,
    accelerate: bool = True,
    env_kwargs: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """`Evaluator(env_id, num_envs, env_kwargs)(policy, episodes, seed, deterministic,
    accelerate)` with envs made for this call only (see `Evaluator.__call__`)."""
    if episodes < 1:
        raise UserError(f"episodes must be >= 1, got {episodes}")
    evaluator = Evaluator(env_id, max(1, min(num_envs, episodes)), env_kwargs)
    try:
        return evaluator(policy, episodes, seed, deterministic, accelerate)
    finally:
        evaluator.close()
