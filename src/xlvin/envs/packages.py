"""Environments from other packages: MiniGrid's and ALE's, registered on first use, and a
user's own environments: modules that register envs with gymnasium when imported, named
by the user (`--gym-packages MODULE`, the RL Zoo's flag, or `gym_packages=[...]` in Python).

Only a module the user names on the command line or in Python is ever imported. A run records
the modules it was trained with; loading that run checks that they are imported and otherwise
says which flag is missing, without importing anything a file names.
"""

import importlib
import os
import sys

from xlvin.envs.atari import require_ale
from xlvin.errors import FieldError, UserError, one_line

#: The ids of MiniGrid's environments, registered when the package is imported.
MINIGRID_PREFIXES = ("MiniGrid-", "BabyAI-")


def ensure_registered(env_id: str) -> None:
    """Register the environments of the package that provides `env_id`, on first use, or fail
    saying how to install it: ALE's (`ALE/...`, its banner quieted) and MiniGrid's
    (`MiniGrid-...`, `BabyAI-...`); other ids are left alone."""
    if env_id.startswith("ALE/"):
        require_ale()
    elif env_id.startswith(MINIGRID_PREFIXES):
        try:
            import minigrid  # noqa: F401  (registers its envs when imported)
        except ImportError:
            raise UserError(f"{env_id} needs the minigrid package: pip install -e "
                            "'.[minigrid]'") from None


def import_named(name: str, field: str, value: str) -> None:
    """Import the module `name` a user named (from the current directory too, as `python -m`
    would), unless it is imported already; one UserError if it fails, naming the config `field`
    the module comes from with its `value` (`--gym-packages NAME`, `--env-wrapper SPEC`)."""
    if name in sys.modules:
        return
    here = os.getcwd()
    sys.path.insert(0, here)
    try:
        importlib.import_module(name)
    except ImportError as err:
        raise FieldError("{" + field + "=}: cannot import {}: {}", name, one_line(err),
                         **{field: value}) from None
    finally:
        sys.path.remove(here)


def import_gym_packages(modules: list[str]) -> None:
    """Import each named module, so that the environments it registers are in gymnasium's
    registry; one UserError if one fails."""
    for name in modules:
        import_named(name, "gym_packages", name)


def require_gym_packages(modules: list[str], env_id: str) -> None:
    """Refuse, in one line naming the flag, a run whose environment needs modules that are not
    imported (they are never imported because a file names them)."""
    missing = [name for name in modules if name not in sys.modules]
    if missing:
        raise UserError(
            f"environment {env_id!r} is registered by {', '.join(missing)}: pass "
            f"--gym-packages {' '.join(modules)} (in Python: gym_packages=[...] or import it)"
        )
