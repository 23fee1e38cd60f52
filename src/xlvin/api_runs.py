"""The run behind a model of `xlvin.api`: the config and run directory `learn` trains (a new run,
or the model's continued in place for n more steps), a config on another env (`set_env`,
`evaluate(env=...)`), the temporary run directory of `learn()` without `out=`, and where a
stopped run's checkpoint left it.
"""

import dataclasses
import os
import shutil
import tempfile
import weakref
from pathlib import Path
from typing import Any

from xlvin.api_options import with_options
from xlvin.envs.given import EnvLike, resolve_env
from xlvin.envs.spaces import Spaces, require_spaces
from xlvin.errors import UserError
from xlvin.io.checkpoint import CHECKPOINT, Checkpointer, read_loop_state
from xlvin.io.run_dir import CONFIG, MODEL, PARTIAL, read_json_object
from xlvin.run.config import RunConfig
from xlvin.run.protocols import protocol_of, whole_rollouts
from xlvin.run.saved import checkpoint_config


def continued_config(run_dir: Path, trained: int, steps: int | None,
                     out: str | Path | None) -> tuple[RunConfig, str | None]:
    """(the config of the run in `run_dir`, `trained` env steps so far, continued in place for
    `steps` more, rounded up to whole rollouts; what was rounded, or None): online runs only."""
    if steps is None:
        raise UserError(f"this model's run has trained {trained} steps: learn(n) continues it "
                        "for n more")
    if out is not None and Path(out).resolve() != run_dir.resolve():
        raise UserError(f"learn() continues this model's run in place, in {run_dir}; save() "
                        "copies it elsewhere")
    saved = RunConfig.from_saved(read_json_object(run_dir / CONFIG), str(run_dir))
    if not protocol_of(saved).in_env_steps:
        raise UserError(f"only online runs (counted in env steps) continue; {run_dir} is a "
                        f"{saved.train.protocol} run")
    more, rounded = whole_rollouts(with_options(saved, {"total_steps": steps}, "learn()"))
    total = with_options(saved, {"total_steps": trained + more.ppo.total_steps}, "learn()")
    return total, rounded


def learn_run(cfg: RunConfig, run_dir: Path | None, trained: int, steps: int | None,
              out: str | Path | None, resume: bool,
              owner: Any) -> tuple[RunConfig, Path, bool, str | None]:
    """(config, run directory, resume, what was rounded up to whole rollouts or None) of
    `learn(steps, out=out, resume=resume)` on a model of `cfg` whose run is `run_dir` (None
    before it has one) after `trained` steps: that run continued in place, else a run of `cfg`
    in `out` (None: a temporary one removed with `owner`), resumed with `resume`."""
    if run_dir is not None and not resume:
        cfg, rounded = continued_config(run_dir, trained, steps, out)
        return cfg, run_dir, True, rounded
    cfg, rounded = whole_rollouts(cfg if steps is None else with_options(
        cfg, {"total_steps": steps}, "learn()"))
    if out is None:
        if resume:
            raise UserError("learn(resume=True) needs out=DIR, the run directory to continue")
        out = temporary_run_dir(owner)
    return cfg, Path(out), resume, rounded


def on_env(cfg: RunConfig, spaces: Spaces, env: EnvLike, vector_size: bool) -> RunConfig:
    """`cfg` with `env` (`resolve_env`), which must have the model's `spaces`, as its env, and
    with `vector_size` a vector env's number of envs as its num_envs."""
    env_id, kwargs, num_envs = resolve_env(env, None)
    require_spaces(env_id, kwargs, cfg.train.env_wrappers, spaces)
    train = dataclasses.replace(cfg.train, env=env_id, env_kwargs=kwargs)
    ppo = cfg.ppo if num_envs is None or not vector_size else dataclasses.replace(
        cfg.ppo, num_envs=num_envs)
    return dataclasses.replace(cfg, train=train, ppo=ppo)


def temporary_run_dir(owner: Any) -> Path:
    """A run directory for `learn()` without `out=`, in a new temporary folder that is removed
    with `owner` (garbage-collected, or at the latest when Python exits): `save(path)` keeps
    the run."""
    folder = tempfile.mkdtemp(prefix="xlvin-")
    weakref.finalize(owner, shutil.rmtree, folder, ignore_errors=True)
    return Path(folder) / "run"


def stopped_run(run_dir: Path) -> tuple[RunConfig, Checkpointer] | None:
    """A run stopped before it finished (Ctrl-C, a deadline, a callback's error: a checkpoint
    and no model.safetensors): its config (config.json) and its checkpoint, which must have been
    saved by that config (`Checkpointer.load_policy`). None where `run_dir` holds no such run
    (a save cut short before it was complete included: `read_run` refuses it)."""
    if (os.path.lexists(run_dir / MODEL) or os.path.lexists(run_dir / PARTIAL)
            or stopped_steps(run_dir) is None):
        return None
    cfg = RunConfig.from_saved(read_json_object(run_dir / CONFIG), str(run_dir / CONFIG))
    return cfg, Checkpointer(run_dir / CHECKPOINT, 0, run=cfg.to_json(),
                             normalize=checkpoint_config(cfg))


def stopped_steps(out: Path) -> int | None:
    """The env steps of the checkpoint a stopped run (a callback's error, Ctrl-C) left in `out`,
    or None where it left none: `learn(n)` continues from there."""
    if (out / CHECKPOINT).is_file() and not (out / CHECKPOINT).is_symlink():
        return int(read_loop_state(out / CHECKPOINT)["result"]["env_steps"])
    return None
