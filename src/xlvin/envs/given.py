"""The env a user passed to the API as an object (an instance, or a vector env of different or
asynchronous sub-envs), as the entry point the API registers for it (`xlvin.api.resolve_env`).

Every path that makes a run's env makes it from its id; for such an id, `GivenEnv` makes it
the way the user made it, never as something else:

- an instance: the training vector env's first sub-env is the instance itself (`lend`); every
  other env made from it (more sub-envs, evaluation, pre-training data, the spaces check) is a
  `copy.deepcopy` of it, its whole wrapper stack and time limit included;
- a vector env: sub-env i is made by the user's own `env_fns[i]` (for a vector env of n
  sub-envs, sub-env i of a vector env of any size by `env_fns[i % n]`), in worker processes
  when the user's was an `AsyncVectorEnv` (`mode`); one env alone by `env_fns[0]`.
"""

import copy
import functools
from collections.abc import Callable, Sequence
from typing import Any, Literal

import gymnasium as gym

from xlvin.errors import UserError, one_line

#: ids of the instances lent to a training vector env now (one lender at a time).
_LENT: set[int] = set()


def _call(make: Callable[..., gym.Env], kwargs: dict[str, Any]) -> gym.Env:
    return make(**kwargs) if kwargs else make()


class _Lent(gym.Wrapper):
    """The user's own instance as a sub-env: closing the vector env leaves it open (it is the
    user's) and returns it to its lender."""

    def close(self) -> None:
        _LENT.discard(id(self.env))


class GivenEnv:
    """A gymnasium entry point (`gym.register(id, entry_point=GivenEnv(...))`) that makes one env
    as the user made it (the first sub-env), and whose `env_fns` make the sub-envs of a vector
    env (`xlvin.train.collect.make_vector_env`)."""

    def __init__(self, makers: Sequence[Callable[..., gym.Env]] = (),
                 mode: Literal["sync", "async"] = "sync", instance: gym.Env | None = None) -> None:
        self.makers = list(makers)
        self.mode = mode
        self.instance = instance
        if instance is not None:
            self.makers = [self._copy]

    def _copy(self, **kwargs: Any) -> gym.Env:
        if kwargs:
            raise UserError("env_kwargs apply to an env id or a callable that makes the env, not "
                            f"to a {type(self.instance).__name__} instance")
        try:
            return copy.deepcopy(self.instance)
        except Exception as err:  # the user's env: any failure is one line saying what to pass
            raise UserError(
                f"a second {type(self.instance).__name__} is needed (more envs, evaluation or "
                f"pre-training) but the instance cannot be copied ({one_line(err)}): pass a "
                "function that makes it instead") from None

    def check_copy(self) -> None:
        """Refuse, in one line, an instance that cannot be copied (before anything is built)."""
        if self.instance is not None:
            env = self._copy()
            del env  # not closed: a copy may share what the instance holds (a window, a file)

    @property
    def own_vector(self) -> bool:
        """Whether the vector env must be built from `env_fns` (not `gym.make_vec` of the id):
        different sub-envs, worker processes, or an instance to lend."""
        return self.instance is not None or self.mode == "async" or len(
            {id(m) for m in self.makers}) > 1

    def __call__(self, **kwargs: Any) -> gym.Env:
        return _call(self.makers[0], kwargs)

    def env_fns(self, num_envs: int, kwargs: dict[str, Any], wrap: Callable[[gym.Env], gym.Env],
                lend: bool = False) -> list[Callable[[], gym.Env]]:
        """The sub-envs' makers of a vector env of `num_envs`, each in `wrap`; with `lend`, the
        first is the user's instance itself when it is not lent already."""
        fns: list[Callable[[], gym.Env]] = [
            functools.partial(_wrapped, self.makers[i % len(self.makers)], kwargs, wrap)
            for i in range(num_envs)]
        if lend and self.instance is not None and id(self.instance) not in _LENT and not kwargs:
            fns[0] = functools.partial(_lend, self.instance, wrap)
        return fns


def _wrapped(make: Callable[..., gym.Env], kwargs: dict[str, Any],
             wrap: Callable[[gym.Env], gym.Env]) -> gym.Env:
    return wrap(_call(make, kwargs))


def _lend(instance: gym.Env, wrap: Callable[[gym.Env], gym.Env]) -> gym.Env:
    _LENT.add(id(instance))
    return wrap(_Lent(instance))


def given_env(env_id: str) -> GivenEnv | None:
    """The `GivenEnv` registered under `env_id`, or None for any other id."""
    spec = gym.registry.get(env_id)
    entry = spec.entry_point if spec is not None else None
    return entry if isinstance(entry, GivenEnv) else None
