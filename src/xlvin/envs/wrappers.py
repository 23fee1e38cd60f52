"""A user's environment wrappers: `--env-wrapper module:Class` (repeatable, applied in the order
given; `env_wrappers=[...]` in Python), each a `gymnasium.Wrapper` subclass.

As with `--gym-packages`, only a module the user names on the command line or in Python is
imported, by its name. A run records its wrappers, but a file never names code that is called:
a wrapper is applied only if the user named it in this process (`import_env_wrappers`: the
command line's flags, the API's `env_wrappers=`) and it is a `gymnasium.Wrapper` subclass. A
wrapper that a run's config.json, a weights header or a --config file names and the user did not
is refused in one line saying which flag to pass (`require_env_wrappers`), before any env is made.

Every path that makes a run's env (training, TransE's random-policy data, evaluation,
`Model.env`) makes it by the id `wrapped_env_id` returns: the run's env with its wrappers
applied, registered with gymnasium in this process.
"""

import functools
import hashlib
import re
import sys
from collections.abc import Callable, Sequence
from typing import Any

import gymnasium as gym

from xlvin.envs.packages import ensure_registered, import_named
from xlvin.errors import FieldError, UserError, one_line

#: module:Class, both dotted Python names (`my_pkg.wrappers:Flat`, `gymnasium.wrappers:...`).
SPEC = re.compile(r"[A-Za-z_]\w*(\.[A-Za-z_]\w*)*:[A-Za-z_]\w*(\.[A-Za-z_]\w*)*")
#: Characters of an env id that gymnasium's ids do not take after a namespace.
ID_UNSAFE = re.compile(r"[^\w.-]")
#: The namespace of the ids `wrapped_env_id` registers.
WRAPPED_NAMESPACE = "xlvin-wrapped"


def check_wrapper_specs(specs: Sequence[str]) -> None:
    """Refuse, in one line, a wrapper that is not written module:Class."""
    for spec in specs:
        if not isinstance(spec, str) or not SPEC.fullmatch(spec):
            raise FieldError("{env_wrappers=!r}: expected module:Class (a module to import and "
                             "the wrapper in it, e.g. my_wrappers:FlatObs)", env_wrappers=spec)


def wrapper_spec(wrapper: str | Callable[..., gym.Env]) -> str:
    """The module:Class of a wrapper given in Python: as written, or a class's own module and
    name; one UserError for one that could not be found again by name (`import_env_wrappers`
    then checks that it is a `gymnasium.Wrapper` subclass)."""
    if isinstance(wrapper, str):
        return wrapper
    name = getattr(wrapper, "__qualname__", "")
    module = getattr(wrapper, "__module__", None)
    if not callable(wrapper) or not module or not name or "<" in name:
        raise UserError(f"env_wrappers: {wrapper!r} is not a class or function defined at the "
                        "top level of a module: give 'module:Class'")
    return f"{module}:{name}"


#: The wrappers the user named in this process (`import_env_wrappers`), module:Class: the only
#: ones ever applied.
_NAMED: set[str] = set()


def import_env_wrappers(specs: Sequence[str]) -> None:
    """Import the module of each wrapper the user named (from the current directory too, as
    `python -m` would), check that it is a `gymnasium.Wrapper` subclass and allow it in this
    process; one UserError if one fails. Only the user's own words come here (flags, the API's
    arguments), never a file's."""
    check_wrapper_specs(specs)
    for spec in specs:
        import_named(spec.partition(":")[0], "env_wrappers", spec)
        wrapper_class(spec)
    _NAMED.update(specs)


def require_env_wrappers(specs: Sequence[str]) -> None:
    """Refuse, in one line naming the flag, wrappers the user did not name in this process (a
    run's, a --config file's): a file's are never imported or called."""
    check_wrapper_specs(specs)
    unnamed = [spec for spec in specs
               if spec not in _NAMED or spec.partition(":")[0] not in sys.modules]
    if unnamed:
        flags = " ".join(f"--env-wrapper {spec}" for spec in specs)
        raise UserError(f"the run wraps its environment in {', '.join(unnamed)}, which you did "
                        f"not name (a file never names code to run): pass {flags} if it is your "
                        "gymnasium.Wrapper (in Python: env_wrappers=[...])")
    for spec in specs:
        wrapper_class(spec)


def wrapper_class(spec: str) -> type[gym.Wrapper]:
    """The wrapper class `spec` names, from its module as imported; one UserError if the module
    has none, or what it has is not a `gymnasium.Wrapper` subclass."""
    module, _, name = spec.partition(":")
    found: Any = sys.modules[module]
    for attribute in name.split("."):
        found = getattr(found, attribute, None)
    if found is None:
        raise FieldError("{env_wrappers=}: module {} has no class or function {}", module, name,
                         env_wrappers=spec)
    if not (isinstance(found, type) and issubclass(found, gym.Wrapper)):
        raise FieldError("{env_wrappers=}: {} is not a gymnasium.Wrapper subclass (a class that "
                         "takes the env); only wrapper classes are applied", name,
                         env_wrappers=spec)
    return found


def _make_wrapped(env_id: str, specs: tuple[str, ...], **kwargs: Any) -> gym.Env:
    """`gym.make(env_id, **kwargs)` in the wrappers `specs`, in order."""
    ensure_registered(env_id)
    env = gym.make(env_id, disable_env_checker=True, **kwargs)
    for spec in specs:
        try:
            env = wrapper_class(spec)(env)
        except Exception as err:  # the user's code: any failure is theirs, said in one line
            raise FieldError("{env_wrappers=} failed on {}: {}", env_id, one_line(err),
                             env_wrappers=spec) from None
    return env


def wrapped_env_id(env_id: str, specs: Sequence[str]) -> str:
    """The id that makes `env_id` in the wrappers `specs` (`env_id` itself without any),
    registered with gymnasium in this process on first use: xlvin-wrapped/<env>-<hash>. Each
    wrapper must be one the user named (`import_env_wrappers`); others are refused
    (`require_env_wrappers`) before anything is made."""
    if not specs:
        return env_id
    require_env_wrappers(specs)
    digest = hashlib.sha256("\n".join([env_id, *specs]).encode()).hexdigest()[:10]
    wrapped = f"{WRAPPED_NAMESPACE}/{ID_UNSAFE.sub('_', env_id)}-{digest}"
    if wrapped not in gym.registry:
        gym.register(wrapped, entry_point=functools.partial(_make_wrapped, env_id, tuple(specs)),
                     disable_env_checker=True)
    return wrapped
