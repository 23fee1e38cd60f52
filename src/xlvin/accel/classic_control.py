"""CartPole and Acrobot stepped for many episodes at once: gymnasium's dynamics on NumPy arrays.

gymnasium's classic-control envs step one state at a time in Python (Acrobot: a Runge-Kutta of
four `_dsdt` calls on NumPy scalars, about 100 us a step here; CartPole about 10 us); evaluating
a policy on 100 episodes after every update spends most of its time there. `CartPoleSteps` and
`AcrobotSteps` play the same episodes with one array operation per term for all of them.

The arithmetic is gymnasium's, term by term and in the same order, so every state is the same
float64 number as gymnasium's own step computes (`tests/test_accel_classic_control.py` compares
whole trajectories bit for bit). One detail makes that hold for Acrobot: gymnasium squares NumPy
scalars with `x**2`, which is C's `pow(x, 2)`, and `pow` is not always the correctly rounded
`x * x` that NumPy's array `x**2` computes (one ulp apart for about 0.1 % of inputs). `_square`
therefore calls `math.pow` (the same C `pow`) on every element. (CartPole squares with
`np.square`, which is `x * x` for scalars and arrays alike.)

Episodes start from each env's own seeded `reset` (gymnasium's random initial state), and the
env's `TimeLimit` truncates them as it would have.
"""

import math

import gymnasium as gym
import numpy as np
from gymnasium.envs.classic_control.acrobot import AcrobotEnv
from gymnasium.envs.classic_control.cartpole import CartPoleEnv
from gymnasium.wrappers import OrderEnforcing, PassiveEnvChecker, TimeLimit
from numpy import pi

_pow2 = np.frompyfunc(lambda x: math.pow(x, 2), 1, 1)


def _square(x: np.ndarray) -> np.ndarray:
    """x**2 [n] as gymnasium's scalar code rounds it (C `pow`), element by element."""
    return _pow2(x).astype(np.float64)


#: the wrappers `gym.make` puts around these envs, none of which changes a step
_PLAIN_WRAPPERS = (TimeLimit, OrderEnforcing, PassiveEnvChecker)


def time_limit(env: gym.Env) -> int | None:
    """The env's `TimeLimit` in steps when it is wrapped only by `_PLAIN_WRAPPERS` (else None):
    the least of its limits where it has several (`TimeLimit(gym.make(id), 7)`)."""
    limit = None
    while isinstance(env, gym.Wrapper):
        if not isinstance(env, _PLAIN_WRAPPERS):
            return None
        if isinstance(env, TimeLimit):
            steps = env._max_episode_steps
            limit = steps if limit is None else min(limit, steps)
        env = env.env
    return limit


def make_array_steps(envs: list[gym.Env]) -> "CartPoleSteps | AcrobotSteps | None":
    """`CartPoleSteps` or `AcrobotSteps` over `envs` where every env is supported, else None.
    Both have the interface of `xlvin.ppo.evaluation.Steps` (reset one env, step several)."""
    if not envs or any(time_limit(env) is None for env in envs):
        return None
    if all(_plain_cartpole(env.unwrapped) for env in envs):
        return CartPoleSteps(envs)
    if all(_plain_acrobot(env.unwrapped) for env in envs):
        return AcrobotSteps(envs)
    return None


def _plain_cartpole(cartpole: gym.Env) -> bool:
    """gymnasium's CartPole with its default physics, Euler integration and reward."""
    return type(cartpole) is CartPoleEnv and (
        cartpole.gravity, cartpole.masscart, cartpole.masspole, cartpole.length,
        cartpole.force_mag, cartpole.tau, cartpole.kinematics_integrator,
        cartpole._sutton_barto_reward, cartpole.x_threshold,
    ) == (9.8, 1.0, 0.1, 0.5, 10.0, 0.02, "euler", False, 2.4) and (
        cartpole.theta_threshold_radians == 12 * 2 * math.pi / 360)


def _plain_acrobot(acrobot: gym.Env) -> bool:
    """gymnasium's Acrobot with the "book" dynamics, no torque noise, the class's masses,
    lengths and limits."""
    if type(acrobot) is not AcrobotEnv:
        return False
    return (acrobot.book_or_nips, acrobot.torque_noise_max, acrobot.dt) == ("book", 0.0, 0.2) and (
        acrobot.LINK_LENGTH_1, acrobot.LINK_MASS_1, acrobot.LINK_MASS_2, acrobot.LINK_COM_POS_1,
        acrobot.LINK_COM_POS_2, acrobot.LINK_MOI) == (1.0, 1.0, 1.0, 0.5, 0.5, 1.0) and (
        acrobot.MAX_VEL_1, acrobot.MAX_VEL_2, list(acrobot.AVAIL_TORQUE)) == (
        4 * pi, 9 * pi, [-1.0, 0.0, 1.0])


class _ArraySteps:
    """Plays episodes in `envs` side by side: each starts with its env's seeded `reset` (its
    state [4] copied into column j of `state`), and then all are stepped together on arrays by
    the subclass's `step` (the envs' own states are not advanced); `elapsed` counts each
    episode's steps for the time limit. The interface of `xlvin.ppo.evaluation.EnvSteps`."""

    def __init__(self, envs: list[gym.Env]) -> None:
        self.envs = envs
        self.state = np.zeros((4, len(envs)))  # [4, n] float64, one column per env
        self.elapsed = np.zeros(len(envs), dtype=int)
        self.max_steps = np.array([time_limit(env) for env in envs])

    def reset(self, j: int, seed: int) -> np.ndarray:
        obs, _ = self.envs[j].reset(seed=seed)
        self.state[:, j] = self.envs[j].unwrapped.state  # type: ignore[attr-defined]
        self.elapsed[j] = 0
        return np.asarray(obs)

    def _advance(self, js: list[int], state: np.ndarray) -> np.ndarray:
        """Store envs js's new states [4, m]; returns their truncation flags [m]."""
        self.state[:, js] = state
        self.elapsed[js] += 1
        return self.elapsed[js] >= self.max_steps[js]


class CartPoleSteps(_ArraySteps):
    """gymnasium's `CartPoleEnv.step` (Euler integration) on arrays; state rows x, x_dot, theta,
    theta_dot."""

    def __init__(self, envs: list[gym.Env]) -> None:
        super().__init__(envs)
        self.physics: CartPoleEnv = envs[0].unwrapped  # type: ignore[assignment]

    def step(self, js: list[int], actions: np.ndarray
             ) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        """Step envs `js` with `actions` [m]: (observations [m, 4] float32, rewards [m],
        terminated [m], truncated [m])."""
        state = cartpole_step(self.physics, self.state[:, js], actions)
        truncated = self._advance(js, state)
        terminated = cartpole_terminated(self.physics, state)
        return state.T.astype(np.float32), np.ones(len(js)), terminated, truncated


def cartpole_step(p: CartPoleEnv, state: np.ndarray, actions: np.ndarray) -> np.ndarray:
    """`CartPoleEnv.step`'s Euler integration of states [4, n] (x, x_dot, theta, theta_dot)
    under `actions` [n], term by term as gymnasium computes one."""
    x, x_dot, theta, theta_dot = state
    force = np.where(np.asarray(actions) == 1, p.force_mag, -p.force_mag)
    costheta, sintheta = np.cos(theta), np.sin(theta)
    temp = (force + p.polemass_length * np.square(theta_dot) * sintheta) / p.total_mass
    thetaacc = (p.gravity * sintheta - costheta * temp) / (
        p.length * (4.0 / 3.0 - p.masspole * np.square(costheta) / p.total_mass))
    xacc = temp - p.polemass_length * thetaacc * costheta / p.total_mass
    x = x + p.tau * x_dot
    x_dot = x_dot + p.tau * xacc
    theta = theta + p.tau * theta_dot
    theta_dot = theta_dot + p.tau * thetaacc
    return np.stack([x, x_dot, theta, theta_dot])


def cartpole_terminated(p: CartPoleEnv, state: np.ndarray) -> np.ndarray:
    """Whether states [4, n] have left CartPole's bounds: [n]."""
    x, theta = state[0], state[2]
    return ((x < -p.x_threshold) | (x > p.x_threshold)
            | (theta < -p.theta_threshold_radians) | (theta > p.theta_threshold_radians))


class CartPoleVectors:
    """Training envs: gymnasium vector envs of CartPole (`SyncVectorEnv`, NEXT_STEP autoreset,
    under an episode-statistics wrapper with `episode_returns`, `episode_lengths` and
    `prev_dones`: `xlvin.ppo.collect.EpisodeStatistics`), several of them stepped as one, on
    arrays.

    `load` reads every env's state from its objects, `step` steps all of them as each vector
    env steps (a physics step, or at an autoreset step the env's own `reset`, which draws from
    its own generator), `store` writes the state back into the objects, attribute by attribute
    as gymnasium's step leaves it, so that the envs can be checkpointed, stepped or restored as
    usual (`xlvin.envs.env_state`). Every state is the float64 number gymnasium computes
    (`cartpole_step`); tests/test_accel_classic_control.py compares the objects after many steps.
    """

    def __init__(self, vectors: list[gym.vector.VectorEnv]) -> None:
        self.vectors = vectors
        self.syncs = [vector.env for vector in vectors]
        self.subs = [sub for sync in self.syncs for sub in sync.envs]  # [M], seed-major
        self.physics: CartPoleEnv = self.subs[0].unwrapped  # type: ignore[assignment]
        self.limits = [_time_limit_wrapper(sub) for sub in self.subs]
        self.max_steps = np.array([limit._max_episode_steps for limit in self.limits])
        self.load()

    @staticmethod
    def supports(vectors: list[gym.vector.VectorEnv]) -> bool:
        """Whether every vector env is a NEXT_STEP `SyncVectorEnv` of plain CartPole envs (only
        `_PLAIN_WRAPPERS` around them, one time limit) of the same number of envs, under the
        episode statistics (checked by the caller)."""
        syncs = [getattr(vector, "env", None) for vector in vectors]
        return bool(vectors) and all(
            type(sync) is gym.vector.SyncVectorEnv
            and sync.autoreset_mode == gym.vector.AutoresetMode.NEXT_STEP
            and sync.num_envs == syncs[0].num_envs
            and all(_plain_cartpole(sub.unwrapped) and time_limit(sub) is not None
                    and _time_limit_wrapper(sub) is not None for sub in sync.envs)
            for sync in syncs)

    def load(self) -> None:
        """Read every env's state from its objects."""
        carts = [sub.unwrapped for sub in self.subs]
        self.state = np.stack([cart.state for cart in carts], 1).astype(np.float64)  # [4, M]
        self.beyond = np.array([-1 if c.steps_beyond_terminated is None
                                else c.steps_beyond_terminated for c in carts])
        self.elapsed = np.array([limit._elapsed_steps for limit in self.limits])
        self.autoreset = np.concatenate([sync._autoreset_envs for sync in self.syncs])
        self.returns = np.concatenate([v.episode_returns for v in self.vectors])
        self.lengths = np.concatenate([v.episode_lengths for v in self.vectors])
        self.prev_dones = np.concatenate([v.prev_dones for v in self.vectors])
        self.obs = np.stack([obs for sync in self.syncs for obs in sync._env_obs])
        self.rewards = np.concatenate([sync._rewards for sync in self.syncs])
        self.terminated = np.concatenate([sync._terminations for sync in self.syncs])
        self.truncated = np.concatenate([sync._truncations for sync in self.syncs])

    def step(self, actions: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        """Step every env with `actions` [M] (vector env by vector env, each's envs in order):
        (observations [M, 4] float32, rewards [M] float64, terminated [M], truncated [M]), as
        the vector envs return them; the episode statistics advance as their wrapper's do."""
        live = ~self.autoreset
        state = np.where(live, cartpole_step(self.physics, self.state, actions), self.state)
        self.elapsed = np.where(live, self.elapsed + 1, 0)
        terminated = live & cartpole_terminated(self.physics, state)
        truncated = live & (self.elapsed >= self.max_steps)
        after = terminated & (self.beyond >= 0)  # stepped on after its termination
        self.rewards = np.where(live & ~after, 1.0, 0.0)
        self.beyond = np.where(terminated, self.beyond + 1, np.where(live, self.beyond, -1))
        for m in np.flatnonzero(self.autoreset):  # the env's own reset: its generator draws
            self.subs[m].reset()
            state[:, m] = self.subs[m].unwrapped.state
        self.state, self.terminated, self.truncated = state, terminated, truncated
        self.obs = state.T.astype(np.float32)
        self.returns = np.where(self.prev_dones, 0.0, self.returns + self.rewards)
        self.lengths = np.where(self.prev_dones, 0, self.lengths + 1)
        self.prev_dones = self.autoreset = terminated | truncated
        return self.obs, self.rewards, terminated, truncated

    def store(self) -> None:
        """Write every env's state into its objects, as their own steps would have left it."""
        count = self.syncs[0].num_envs
        for m, (sub, limit) in enumerate(zip(self.subs, self.limits)):
            cart = sub.unwrapped
            cart.state = self.state[:, m].copy()
            cart.steps_beyond_terminated = None if self.beyond[m] < 0 else int(self.beyond[m])
            limit._elapsed_steps = int(self.elapsed[m])
        for s, (vector, sync) in enumerate(zip(self.vectors, self.syncs)):
            part = slice(s * count, (s + 1) * count)
            sync._env_obs = [obs.copy() for obs in self.obs[part]]
            sync._observations[:] = self.obs[part]
            sync._rewards[:] = self.rewards[part]
            sync._terminations[:] = self.terminated[part]
            sync._truncations[:] = self.truncated[part]
            sync._autoreset_envs = self.autoreset[part].copy()
            vector.episode_returns = self.returns[part].copy()
            vector.episode_lengths = self.lengths[part].copy()
            vector.prev_dones = self.prev_dones[part].copy()


def _time_limit_wrapper(env: gym.Env) -> TimeLimit | None:
    """The one `TimeLimit` around `env` (None where it has none or several)."""
    limits = []
    while isinstance(env, gym.Wrapper):
        if isinstance(env, TimeLimit):
            limits.append(env)
        env = env.env
    return limits[0] if len(limits) == 1 else None


def _dsdt(theta1: np.ndarray, theta2: np.ndarray, dtheta1: np.ndarray, dtheta2: np.ndarray,
          a: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """`AcrobotEnv._dsdt` ("book" dynamics) for [n] states at once."""
    m1 = m2 = l1 = 1.0
    lc1 = lc2 = 0.5
    moment_1 = moment_2 = 1.0
    g = 9.8
    cos_theta2, sin_theta2 = np.cos(theta2), np.sin(theta2)
    d1 = m1 * lc1**2 + m2 * (l1**2 + lc2**2 + 2 * l1 * lc2 * cos_theta2) + moment_1 + moment_2
    d2 = m2 * (lc2**2 + l1 * lc2 * cos_theta2) + moment_2
    phi2 = m2 * lc2 * g * np.cos(theta1 + theta2 - pi / 2.0)
    phi1 = (
        -m2 * l1 * lc2 * _square(dtheta2) * sin_theta2
        - 2 * m2 * l1 * lc2 * dtheta2 * dtheta1 * sin_theta2
        + (m1 * lc1 + m2 * l1) * g * np.cos(theta1 - pi / 2)
        + phi2
    )
    ddtheta2 = (
        a + d2 / d1 * phi1 - m2 * l1 * lc2 * _square(dtheta1) * sin_theta2 - phi2
    ) / (m2 * lc2**2 + moment_2 - _square(d2) / d1)
    ddtheta1 = -(d2 * ddtheta2 + phi1) / d1
    return dtheta1, dtheta2, ddtheta1, ddtheta2


def _rk4(state: np.ndarray, torque: np.ndarray) -> np.ndarray:
    """gymnasium's `rk4` over one step of dt = 0.2: state [4, n] float64 -> [4, n]."""
    dt = 0.2 - 0
    dt2 = dt / 2.0
    k1 = np.stack(_dsdt(*state, torque))
    k2 = np.stack(_dsdt(*(state + dt2 * k1), torque))
    k3 = np.stack(_dsdt(*(state + dt2 * k2), torque))
    k4 = np.stack(_dsdt(*(state + dt * k3), torque))
    return state + dt / 6.0 * (k1 + 2 * k2 + 2 * k3 + k4)


def _wrap(x: np.ndarray) -> np.ndarray:
    """gymnasium's `wrap(x, -pi, pi)` for [n] angles."""
    diff = pi - (-pi)
    while (x > pi).any():
        x = np.where(x > pi, x - diff, x)
    while (x < -pi).any():
        x = np.where(x < -pi, x + diff, x)
    return x


class AcrobotSteps(_ArraySteps):
    """gymnasium's `AcrobotEnv.step` on arrays; state rows theta1, theta2, dtheta1, dtheta2."""

    torques = np.array(AcrobotEnv.AVAIL_TORQUE, dtype=np.float64)

    def step(self, js: list[int], actions: np.ndarray
             ) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        """Step envs `js` with `actions` [m]: (observations [m, 6] float32, rewards [m],
        terminated [m], truncated [m])."""
        state = _rk4(self.state[:, js], self.torques[np.asarray(actions)])
        state[0], state[1] = _wrap(state[0]), _wrap(state[1])
        state[2] = np.minimum(np.maximum(state[2], -AcrobotEnv.MAX_VEL_1), AcrobotEnv.MAX_VEL_1)
        state[3] = np.minimum(np.maximum(state[3], -AcrobotEnv.MAX_VEL_2), AcrobotEnv.MAX_VEL_2)
        truncated = self._advance(js, state)
        theta1, theta2 = state[0], state[1]
        terminated = -np.cos(theta1) - np.cos(theta2 + theta1) > 1.0
        obs = np.stack([np.cos(theta1), np.sin(theta1), np.cos(theta2), np.sin(theta2),
                        state[2], state[3]], axis=1).astype(np.float32)
        return obs, np.where(terminated, 0.0, -1.0), terminated, truncated
