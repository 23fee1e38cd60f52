"""Many seeds of one model in one process, from Python: `xlvin train --seeds` as a function.

    from xlvin import PPO, learn_seeds
    models = learn_seeds(PPO("CartPole-v1"), seeds=range(64), total_steps=50_000, out="runs/cp")

is `[PPO("CartPole-v1", seed=s).learn(50_000, out=f"runs/cp/seed-{s}") for s in range(64)]`,
the same run directories and models bit for bit (`xlvin.run.population`), trained together.
"""

import warnings
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from xlvin.api import Model, _python_errors
from xlvin.api_options import learn_arguments
from xlvin.api_runs import learn_run
from xlvin.errors import UserError
from xlvin.ppo.session import deadline_after
from xlvin.run.population import seed_dir, train_population


@_python_errors
def learn_seeds(
    model: Model, seeds: Iterable[int], total_steps: int | None = None, *, out: str | Path,
    resume: bool = False, progress: bool | None = None, deadline_minutes: float | None = None,
    **sb3: Any,
) -> list[Model]:
    """Train `model`'s configuration (a model that has not learned) once for every seed in
    `seeds`, all together in this process, seed s into OUT/seed-s as
    `learn(total_steps, out=OUT/seed-s)` on the model with `seed=s` would; return the trained
    models, in the order of `seeds`. `resume=True` continues every seed's run in `out`;
    `deadline_minutes` stops every seed as `learn`'s does.
    `total_timesteps=` and `progress_bar=` are taken as in `learn`. What trains together is
    `xlvin train --seeds`' (the PPO baseline or XLVIN on the CPU, online, low-data or the
    continual maze; gSDE is not); anything else is refused before anything is written."""
    if model.run_dir is not None:
        raise UserError("learn_seeds(): the model has trained a run already; give a new model "
                        "(its configuration is what every seed trains)")
    seeds = [int(s) for s in seeds]
    total_steps, progress = learn_arguments(total_steps, progress, sb3, None, model.verbose)
    deadline = deadline_after(deadline_minutes)
    cfg, out, resume, rounded = learn_run(model.config, None, 0, total_steps, out, resume, model)
    if rounded:
        warnings.warn(f"total_steps {rounded}", stacklevel=3)
    summaries = train_population(cfg, seeds, out, progress=progress, resume=resume,
                                 deadline=deadline)
    models = [type(model).load(seed_dir(out, seed)) for seed in seeds]
    for stopped, summary in zip(models, summaries):
        if summary["stopped_at_deadline"]:  # as `learn` leaves it: its checkpoint's policy
            stopped.summary = summary
    return models
