"""Stable-Baselines3's `VecEnv` over a gymnasium vector env: what `Model.get_env()` returns, so
that SB3's loop runs as written (`obs = vec_env.reset(); obs, rewards, dones, infos =
vec_env.step(actions)`).

SB3's API, not gymnasium's: `reset()` returns the observations alone (seeds and options set
before it with `seed(s)` / `set_options(...)`, used once; the reset infos in `reset_infos`);
`step` returns 4 values, `dones` = terminated or truncated, and an env whose episode ends is
reset in the same step, its last observation in `infos[i]["terminal_observation"]`,
`infos[i]["TimeLimit.truncated"]` saying whether a time limit ended it, and
`infos[i]["episode"]` its return `r`, length `l` and seconds since the VecEnv was made `t` (as
SB3's Monitor; an env that records its own episodes, a `RecordEpisodeStatistics` in its
wrappers, keeps its own). Observations are as the model reads them (Dict ones flattened).
"""

import time
import warnings
from collections.abc import Iterable, Sequence
from typing import Any

import gymnasium as gym
import numpy as np
from gymnasium.vector import AutoresetMode, VectorEnv

from xlvin.errors import UserError

#: The keys of gymnasium's same-step autoreset in a vector env's info (the ended episode's).
FINAL_KEYS = ("final_obs", "_final_obs", "final_info", "_final_info")


def one_env(env: gym.Env) -> "SB3VecEnv":
    """The user's `env` itself as a VecEnv of one env (as SB3 wraps one in its DummyVecEnv)."""
    return SB3VecEnv(gym.vector.SyncVectorEnv([lambda: env],
                                              autoreset_mode=AutoresetMode.SAME_STEP))


def env_infos(info: dict[str, Any], num_envs: int) -> list[dict[str, Any]]:
    """A gymnasium vector env's info (arrays, each masked by `_key`) as one dict per env."""
    out: list[dict[str, Any]] = [{} for _ in range(num_envs)]
    for key, value in info.items():
        if key.startswith("_") and key[1:] in info:
            continue  # a mask
        mask = info.get(f"_{key}")
        if isinstance(value, dict):
            for i, sub in enumerate(env_infos(value, num_envs)):
                if mask is None or mask[i]:
                    out[i][key] = sub
            continue
        for i in range(num_envs):
            if mask is None or mask[i]:
                out[i][key] = value[i]
    return out


def tiled(frames: Sequence[np.ndarray]) -> np.ndarray:
    """Frames [H, W, C] of the envs in one image: a grid of ceil(sqrt(n)) rows, filled row by
    row, the cells left over black."""
    n = len(frames)
    rows = int(np.ceil(np.sqrt(n)))
    cols = int(np.ceil(n / rows))
    height, width, channels = frames[0].shape
    grid = np.zeros((rows * cols, height, width, channels), dtype=frames[0].dtype)
    grid[:n] = np.stack(frames)
    grid = grid.reshape(rows, cols, height, width, channels).transpose(0, 2, 1, 3, 4)
    return grid.reshape(rows * height, cols * width, channels)


class SB3VecEnv:
    """Stable-Baselines3's VecEnv API (module docstring) over `vector_env`, a gymnasium vector
    env that autoresets in the same step (`AutoresetMode.SAME_STEP`). `observation_space` and
    `action_space` are one env's, as SB3's; `vector_env` is the gymnasium one."""

    def __init__(self, vector_env: VectorEnv) -> None:
        if vector_env.metadata.get("autoreset_mode") != AutoresetMode.SAME_STEP:
            raise ValueError("SB3VecEnv needs a vector env with same-step autoreset")
        self.vector_env = vector_env
        self.num_envs = vector_env.num_envs
        self.observation_space = vector_env.single_observation_space
        self.action_space = vector_env.single_action_space
        self.render_mode = vector_env.render_mode
        self.metadata = {"render_modes": [] if self.render_mode is None else [self.render_mode]}
        self.reset_infos: list[dict[str, Any]] = [{} for _ in range(self.num_envs)]
        self._seeds: list[int] | None = None
        self._options: dict[str, Any] | None = None
        self._actions: np.ndarray | None = None
        self._started = False
        self._own_episodes = not self._records_episodes()
        self._returns = np.zeros(self.num_envs)
        self._lengths = np.zeros(self.num_envs, dtype=int)
        self._clock = time.time()

    def _records_episodes(self) -> bool:
        """Whether the envs report their own episodes (a `RecordEpisodeStatistics` among their
        wrappers: the Atari envs', below their episodic-life wrapper), where they run here."""
        if getattr(self.vector_env.unwrapped, "envs", None) is None:
            return False
        return any(self.env_is_wrapped(gym.wrappers.RecordEpisodeStatistics))

    @property
    def unwrapped(self) -> "SB3VecEnv":
        return self

    @property
    def envs(self) -> list[gym.Env]:
        """The envs, as SB3's DummyVecEnv lists them (where they run in this process)."""
        return self._sub_envs(None, "envs")

    def seed(self, seed: int | None = None) -> list[int]:
        """Seeds seed, seed + 1, ... for env 0, 1, ... at the next `reset` (a random seed when
        None); returns them."""
        if seed is None:
            seed = int(np.random.randint(0, np.iinfo(np.uint32).max, dtype=np.uint32))
        self._seeds = [seed + i for i in range(self.num_envs)]
        return self._seeds

    def set_options(self, options: dict[str, Any] | Sequence[dict[str, Any]] | None = None) -> None:
        """Options of every env's next `reset` (a list: the same dict for every env)."""
        if isinstance(options, Sequence):
            if any(o != options[0] for o in options):
                raise UserError("set_options: this VecEnv resets every env with the same "
                                "options; give one dict")
            options = options[0] if options else None
        self._options = dict(options) if options else None

    def reset(self) -> np.ndarray:
        """Reset every env (with the seeds and options set since the last reset); the
        observations [num_envs, ...]."""
        obs, info = self.vector_env.reset(seed=self._seeds, options=self._options)
        self._seeds = self._options = None
        self.reset_infos = env_infos(info, self.num_envs)
        self._returns[:], self._lengths[:] = 0.0, 0
        self._started = True
        return np.array(obs, copy=True)

    def step_async(self, actions: Any) -> None:
        if not self._started:
            raise UserError("step() before reset(): start with obs = vec_env.reset()")
        self._actions = np.asarray(actions)

    def step_wait(self) -> tuple[np.ndarray, np.ndarray, np.ndarray, list[dict[str, Any]]]:
        obs, rewards, terminated, truncated, info = self.vector_env.step(self._actions)
        dones = np.logical_or(terminated, truncated)
        now = {k: v for k, v in info.items() if k not in FINAL_KEYS}
        infos = env_infos(now, self.num_envs)
        ended = env_infos(info.get("final_info", {}), self.num_envs)
        self._returns += rewards
        self._lengths += 1
        for i in np.flatnonzero(dones):
            self.reset_infos[i], infos[i] = infos[i], ended[i]
            infos[i]["terminal_observation"] = np.array(info["final_obs"][i], copy=True)
            if self._own_episodes:
                infos[i]["episode"] = {"r": float(self._returns[i]), "l": int(self._lengths[i]),
                                       "t": round(time.time() - self._clock, 6)}
            self._returns[i], self._lengths[i] = 0.0, 0
        for i in range(self.num_envs):
            infos[i]["TimeLimit.truncated"] = bool(truncated[i] and not terminated[i])
        return np.array(obs, copy=True), rewards.astype(np.float32), dones, infos

    def step(self, actions: Any) -> tuple[np.ndarray, np.ndarray, np.ndarray, list[dict[str, Any]]]:
        """(observations, rewards, dones, infos) of one step of every env with `actions`."""
        self.step_async(actions)
        return self.step_wait()

    def get_images(self) -> list[np.ndarray]:
        return list(self.vector_env.render())

    def render(self, mode: str | None = None) -> np.ndarray | None:
        """The envs' frames tiled in one image (envs made with render_mode="rgb_array"); None
        for "human" envs, which draw themselves, and, with a warning, for envs made without a
        render_mode."""
        if self.render_mode is None:
            warnings.warn("render(): the envs were made with no render_mode; make them with "
                          "render_mode='rgb_array' or 'human'", stacklevel=2)
            return None
        if mode not in (None, self.render_mode):
            raise UserError(f"render({mode!r}): the envs draw {self.render_mode!r}; call "
                            "render() (make the env with render_mode='human' to see a window)")
        if self.render_mode == "human":
            self.vector_env.render()
            return None
        return tiled(self.get_images())

    def close(self) -> None:
        self.vector_env.close()

    def _sub_envs(self, indices: int | Iterable[int] | None, what: str) -> list[gym.Env]:
        envs = getattr(self.vector_env.unwrapped, "envs", None)
        if envs is None:
            raise UserError(f"{what}: the envs run in worker processes; use "
                            "vec_env.vector_env (gymnasium's get_attr, set_attr, call)")
        if indices is None:
            return list(envs)
        return [envs[i] for i in ([indices] if isinstance(indices, int) else indices)]

    def get_attr(self, attr_name: str, indices: int | Iterable[int] | None = None) -> list[Any]:
        """Attribute `attr_name` of each env (of `indices`), looked up through its wrappers."""
        return [env.get_wrapper_attr(attr_name) for env in self._sub_envs(indices, "get_attr")]

    def has_attr(self, attr_name: str) -> bool:
        try:
            self.get_attr(attr_name, 0)
        except AttributeError:
            return False
        return True

    def set_attr(self, attr_name: str, value: Any,
                 indices: int | Iterable[int] | None = None) -> None:
        for env in self._sub_envs(indices, "set_attr"):
            env.set_wrapper_attr(attr_name, value)

    def env_method(self, method_name: str, *method_args: Any,
                   indices: int | Iterable[int] | None = None, **method_kwargs: Any) -> list[Any]:
        """Method `method_name` of each env (of `indices`) called with the arguments given."""
        return [env.get_wrapper_attr(method_name)(*method_args, **method_kwargs)
                for env in self._sub_envs(indices, "env_method")]

    def env_is_wrapped(self, wrapper_class: type[gym.Wrapper],
                       indices: int | Iterable[int] | None = None) -> list[bool]:
        """Whether each env (of `indices`) has a `wrapper_class` among its wrappers."""
        found = []
        for env in self._sub_envs(indices, "env_is_wrapped"):
            while isinstance(env, gym.Wrapper) and not isinstance(env, wrapper_class):
                env = env.env
            found.append(isinstance(env, wrapper_class))
        return found
