"""The env a user passed to the API (`resolve_env`): an id, or an object (an instance, a
callable, or a vector env of different or asynchronous sub-envs) as the entry point the API
registers for it; the options a model takes from it (`env_options`); and, for a run loaded in
another process, the checks that its env can be made here (`check_run_env`) or the registration
of the user's env under the run's id (`register_as`).

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
import itertools
import re
from collections.abc import Callable, Sequence
from typing import Any, Literal

import gymnasium as gym
import numpy as np

from xlvin.envs.packages import require_gym_packages
from xlvin.envs.spaces import Spaces, require_spaces
from xlvin.errors import UserError, one_line

#: ids of the instances a training vector env holds now (one holder at a time).
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
    env (`xlvin.ppo.collect.make_vector_env`)."""

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
        """Refuse, in one line, an instance that cannot be copied (before anything is built), or
        whose copies are not the same env: the instance's spaces, and one first observation for
        one seed (two copies reset alike; the instance itself is left as it is)."""
        if self.instance is None:
            return
        name = type(self.instance).__name__
        first, second = self._copy(), self._copy()  # not closed: a copy may share what the
        # instance holds (a window, a file)
        if (first.observation_space != self.instance.observation_space
                or first.action_space != self.instance.action_space):
            raise UserError(f"a copy of the {name} instance has other spaces than the instance: "
                            "pass a function that makes the env instead")
        try:
            same = _same(first.reset(seed=0)[0], second.reset(seed=0)[0])
        except Exception as err:  # the user's env
            raise UserError(f"a copy of the {name} instance cannot be reset ({one_line(err)}): "
                            "pass a function that makes the env instead") from None
        if not same:
            raise UserError(f"copies of the {name} instance reset with one seed give other first "
                            "observations (they share state with it): pass a function that "
                            "makes the env instead")

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
        first is the user's instance itself when no vector env holds it already."""
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


#: An environment as the API takes it: an id, an instance, a callable that makes one (a class or
#: a function), or a vector env.
EnvLike = str | gym.Env | gym.vector.VectorEnv | Callable[..., gym.Env]
#: The prefix of the ids the API registers its envs' callables and instances under.
API_PREFIX = "api/"
#: Keys of a vector env's spec that describe the vectorisation, not the environment.
VECTOR_KEYS = ("max_episode_steps", "num_envs", "vectorization_mode", "vector_kwargs", "wrappers")


def _registered_id(make: Callable[..., gym.Env], named: Any = None) -> str:
    """Register `make` (a class or function that makes the env, or a `GivenEnv`) with gymnasium
    under its own id and return that id: `api/<module>.<name>` of `named` (`make` itself by
    default), a lambda's or local function's with its line (`-L12`), and `-2`, `-3`, ... when
    another callable holds the name already. Every callable has its own id (the last of two
    lambdas never replaces the first), the same in every process that registers the same
    callables in the same order."""
    named = make if named is None else named
    module = getattr(named, "__module__", None) or "env"
    name = getattr(named, "__qualname__", None) or type(named).__qualname__
    code = getattr(named, "__code__", None)
    if code is not None and "<" in name:  # <lambda>, <locals>: many share the name
        name += f"-L{code.co_firstlineno}"
    base = API_PREFIX + re.sub(r"[^\w.-]", "_", f"{module}.{name}")
    for n in itertools.count(1):
        env_id = base if n == 1 else f"{base}-{n}"
        if env_id not in gym.registry:
            gym.register(env_id, entry_point=make, disable_env_checker=True)
            return env_id
        if gym.registry[env_id].entry_point is make:
            return env_id
    raise AssertionError("unreachable")


def _spec_kwargs(spec: gym.envs.registration.EnvSpec) -> dict[str, Any]:
    """The keyword arguments `spec` was made with beyond its registration's defaults."""
    registered = gym.registry[spec.id].kwargs
    return {k: v for k, v in spec.kwargs.items()
            if k not in VECTOR_KEYS and (k not in registered or registered[k] != v)}


def _plain_spec(spec: gym.envs.registration.EnvSpec | None, vector: bool = False) -> bool:
    """Whether `spec` is its registered env as `gym.make(id, **kwargs)` (or `gym.make_vec(id,
    n, **kwargs)`, synchronous) makes it: no wrappers added, the registered time limit."""
    if spec is None or spec.id not in gym.registry:
        return False
    registered = gym.registry[spec.id]
    if vector:
        kwargs = spec.kwargs
        return (not kwargs.get("wrappers") and kwargs.get("vectorization_mode", "sync") in
                ("sync", "vector_entry_point") and not kwargs.get("vector_kwargs") and
                kwargs.get("max_episode_steps", registered.max_episode_steps)
                == registered.max_episode_steps)
    return not spec.additional_wrappers and spec.max_episode_steps == registered.max_episode_steps


def _same(a: Any, b: Any, depth: int = 0) -> bool:
    """Whether two attribute values of envs are equal: arrays by their values, generators by
    their state, spaces by ==, other objects by their own attributes (a few levels deep)."""
    if type(a) is not type(b):
        return False
    if isinstance(a, np.ndarray):
        return a.shape == b.shape and bool(np.array_equal(a, b, equal_nan=a.dtype.kind in "fc"))
    if isinstance(a, np.random.Generator):
        return a.bit_generator.state == b.bit_generator.state
    if isinstance(a, (list, tuple)):
        return len(a) == len(b) and all(_same(x, y, depth + 1) for x, y in zip(a, b))
    if isinstance(a, dict):
        return a.keys() == b.keys() and all(_same(a[k], b[k], depth + 1) for k in a)
    if isinstance(a, float):
        return a == b or (a != a and b != b)
    if isinstance(a, np.generic):
        return bool(a == b) or (a.dtype.kind in "fc" and bool(np.isnan(a) and np.isnan(b)))
    if isinstance(a, (int, str, bytes, bool, type(None), gym.Space)) or depth >= 3:
        return bool(a == b)
    state_a, state_b = getattr(a, "__dict__", None), getattr(b, "__dict__", None)
    return state_a is not None and state_b is not None and _same(state_a, state_b, depth + 1)


#: Attributes of a layer that are not its settings: the layer it wraps, its cached spec
#: (`_plain_spec` compares the spec), and gymnasium's wrappers' records of calls made.
_NOT_SETTINGS = {"env", "_env", "_cached_spec", "_has_reset", "checked_reset", "checked_step",
                 "checked_render", "_previous_data"}


def _own_state(layer: gym.Env) -> dict[str, Any]:
    """A wrapper's or env's attributes that are its settings or state (`_NOT_SETTINGS` aside)."""
    return {k: v for k, v in vars(layer).items() if k not in _NOT_SETTINGS}


def _as_made(env: gym.Env, spec: gym.envs.registration.EnvSpec) -> bool:
    """Whether the instance `env` is what `gym.make` of its spec makes: a copy of it and a fresh
    env, both reset with one seed, hold equal attributes in every layer (so an attribute the
    user changed, such as CartPole's `theta_threshold_radians`, is seen); False where they
    cannot be compared."""
    try:
        mine, fresh = copy.deepcopy(env), gym.make(spec.id, **_spec_kwargs(spec))
        try:
            mine.reset(seed=0)
            fresh.reset(seed=0)
            layers = [(mine, fresh)]
            while isinstance(layers[-1][0], gym.Wrapper):
                a, b = layers[-1]
                if not isinstance(b, gym.Wrapper):
                    return False
                layers.append((a.env, b.env))
            return all(type(a) is type(b) and _same(_own_state(a), _own_state(b))
                       for a, b in layers)
        finally:
            fresh.close()
    except Exception:  # the user's env: anything that cannot be compared is kept as given
        return False


def _vector_env(env: gym.vector.VectorEnv) -> tuple[str, int]:
    """(id, num_envs) of a vector env that is not its registered env plainly: its sub-envs made
    by its own `env_fns`, in worker processes where it has them, or one UserError saying why
    not and what to pass."""
    name = type(env).__name__
    if isinstance(env, gym.vector.VectorWrapper):
        raise UserError(f"a vector env in a {name}: the run makes its sub-envs again and cannot "
                        "re-make a vector wrapper; pass the vector env without it, or wrap each "
                        "sub-env (gym.make_vec(..., wrappers=[...]))")
    makers = list(getattr(env, "env_fns", None) or [])
    if not makers:
        raise UserError(f"a {name} without env_fns (its sub-envs cannot be made again as it "
                        "made them): pass gym.make_vec(..., vectorization_mode='sync'), a "
                        "SyncVectorEnv, the env's id or a function that makes one env, and "
                        "num_envs=")
    mode = "async" if isinstance(env, gym.vector.AsyncVectorEnv) else "sync"
    if mode == "sync" and all(m is makers[0] for m in makers):
        return _registered_id(makers[0]), env.num_envs
    return _registered_id(GivenEnv(makers, mode), makers[0]), env.num_envs


def resolve_env(env: EnvLike, env_kwargs: dict[str, Any] | None) -> tuple[str, dict[str, Any], int | None]:
    """(gymnasium id, keyword arguments, number of envs or None) of an environment as the API
    takes it; the run makes every env from the id. An env that is its registered env plainly
    (`gym.make(id, **kwargs)`, `gym.make_vec(id, n, **kwargs)`: no wrappers added, its
    registered time limit, and for an instance no attribute changed since, `_as_made`) is
    described by its spec, so that the run remakes it, seeded, and
    resumes it in any process. Any other is made as the user made it (`GivenEnv`): an
    instance (its time limit and wrappers with it) trains as the first sub-env itself, copied
    for more; a vector env's sub-envs are made by its own `env_fns` (each its own, in workers
    when it has them); a callable is called. Each is registered under its own id
    (`_registered_id`)."""
    kwargs = dict(env_kwargs or {})
    if isinstance(env, str):
        return env, kwargs, None
    if isinstance(env, gym.vector.VectorEnv):
        spec = env.spec
        if _plain_spec(spec, vector=True) and not isinstance(env, gym.vector.VectorWrapper):
            return spec.id, {**_spec_kwargs(spec), **kwargs}, env.num_envs
        return (*_vector_env(env)[:1], kwargs, env.num_envs)
    if isinstance(env, gym.Env):
        spec = env.spec
        if _plain_spec(spec) and _as_made(env, spec):
            return spec.id, {**_spec_kwargs(spec), **kwargs}, None
        if kwargs:
            raise UserError("env_kwargs apply to an env id or a callable that makes the env, not "
                            f"to a {type(env).__name__} instance (it is made already)")
        given = GivenEnv(instance=env)
        given.check_copy()
        return _registered_id(given, type(env)), kwargs, None
    if callable(env):
        return _registered_id(env), kwargs, None
    raise UserError(f"env must be an id, a gymnasium Env, a callable that makes one or a vector "
                    f"env, got {type(env).__name__}")


def env_options(env: EnvLike, env_kwargs: dict[str, Any] | None, wrappers: Sequence[str],
                num_envs: int | None, source: str) -> dict[str, Any]:
    """The run options of the env a model is made with (`resolve_env`): env, env_kwargs and a
    vector env's num_envs; one UserError for `num_envs` (the option given) other than the vector
    env's, or for `wrappers` around a vector env whose sub-envs are each its own."""
    env_id, kwargs, size = resolve_env(env, env_kwargs)
    given = given_env(env_id)
    if wrappers and given is not None and given.own_vector and given.instance is None:
        raise UserError(f"{source}: env_wrappers= wrap every sub-env alike; this vector env's "
                        "sub-envs are each its own (or in worker processes): wrap them in its "
                        "env_fns instead")
    if size is None:
        return {"env": env_id, "env_kwargs": kwargs}
    if num_envs is not None and num_envs != size:
        raise UserError(f"{source}: num_envs={num_envs} but the vector env has {size}")
    return {"env": env_id, "env_kwargs": kwargs, "num_envs": size}


def check_run_env(env_id: str, env_kwargs: dict[str, Any], gym_packages: list[str],
                  wrappers: Sequence[str], spaces: Spaces) -> None:
    """Refuse, in one line saying what to pass, a run's env that cannot be made in this process
    (its modules not imported, or an env the API registered from a Python object in the process
    that trained it), or whose spaces are not `spaces`, the model's. Only ids in gymnasium's
    registry are made (`env_spaces`): a run's id that names a module (`module:Env`) is refused,
    never imported."""
    require_gym_packages(gym_packages, env_id)
    if env_id.startswith(API_PREFIX) and env_id not in gym.registry:
        raise UserError(
            f"the run's environment {env_id!r} was registered from a Python object by the "
            "process that trained it and cannot be made here: pass --env ID, a registered "
            "env with its spaces, to xlvin evaluate (--gym-packages MODULE registers yours; "
            "in Python: env=, the env or a callable that makes it)")
    require_spaces(env_id, env_kwargs, wrappers, spaces)


def _make_as(env_id: str, kwargs: dict[str, Any], **run_kwargs: Any) -> gym.Env:
    """`gym.make(env_id)`: the env a run's unregistered id stands for (`register_as`)."""
    return gym.make(env_id, **{**kwargs, **run_kwargs})


def register_as(env: EnvLike, run_id: str, run_kwargs: dict[str, Any]) -> None:
    """Make the run's env `run_id` with `env` in this process (`Model.load(env=...)`): an env the
    API registered from a Python object in the process that trained it is registered again,
    under the run's id, as `env` (a callable or instance as the API registers it, so that the
    run's checkpoint of its state fits); any other must be the run's own env."""
    env_id, kwargs, _ = resolve_env(env, None)
    if (env_id, kwargs) == (run_id, run_kwargs):
        return
    if not run_id.startswith(API_PREFIX):
        raise UserError(f"env= is {env_id!r} but the run trained on {run_id!r}; "
                        "evaluate(env=...) evaluates on another env")
    maker = (gym.registry[env_id].entry_point if env_id.startswith(API_PREFIX)
             else functools.partial(_make_as, env_id, kwargs))
    gym.registry.pop(run_id, None)
    gym.register(run_id, entry_point=maker, disable_env_checker=True)
