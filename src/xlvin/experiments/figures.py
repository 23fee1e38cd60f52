"""matplotlib, for the experiments' figures only: an optional dependency (the `plots` extra), so
that training and `xlvin quickstart` install without it."""

import importlib.util
from typing import Any

from xlvin.errors import UserError

#: The one line a command that draws figures says when matplotlib is missing.
INSTALL_HINT = "figures need matplotlib, which is not installed: pip install 'xlvin[plots]'"


def require_plots() -> None:
    """Refuse, before anything trains, a command whose results end in figures when matplotlib
    is missing (one UserError naming the extra)."""
    if importlib.util.find_spec("matplotlib") is None:
        raise UserError(INSTALL_HINT)


def pyplot() -> Any:
    """matplotlib.pyplot on the Agg backend (files, no display); one UserError naming the
    `plots` extra when matplotlib is missing."""
    try:
        import matplotlib
    except ImportError:
        raise UserError(INSTALL_HINT) from None
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt
