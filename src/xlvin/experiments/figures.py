"""matplotlib, for the experiments' figures only: an optional dependency (the `plots` extra), so
that training and `xlvin quickstart` install without it."""

import importlib.util
from typing import Any

import numpy as np

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


def iqm_marks(ax: Any, x: float, summary: dict[str, Any], colour: str, scale: float = 1.0,
              spread: float = 0.15) -> None:
    """Every seed of a summary (`xlvin.stats.summarize` with its `per_seed` values) as a point
    around x, and its IQM with the 95 % interval as a black bar."""
    values = np.array(summary["per_seed"]) * scale
    ax.scatter(x + np.linspace(-spread, spread, len(values)), values, s=12, color=colour,
               alpha=0.7)
    ax.errorbar(x, summary["iqm"] * scale,
                yerr=[[(summary["iqm"] - summary["iqm_low"]) * scale],
                      [(summary["iqm_high"] - summary["iqm"]) * scale]],
                fmt="_", color="black", markersize=16, capsize=4)
