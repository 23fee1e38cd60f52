"""A saved run's config as this code reads it, and what is checked against it: a run directory
resumed or continued to a larger total (`open_to_resume`), a checkpoint's config
(`checkpoint_config`), and a run directory an experiment tables (`check_holds_run`: it holds
the cell's run, not one copied from another cell)."""

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

from xlvin.errors import FieldError, UserError
from xlvin.io.checkpoint import CHECKPOINT, read_loop_state
from xlvin.io.run_dir import CONFIG, MODEL, SUMMARY, open_run_dir, read_json_object
from xlvin.io.weights import load_weights
from xlvin.run.config import RunConfig
from xlvin.run.protocols import protocol_of


def saved_config(data: dict[str, Any]) -> dict[str, Any]:
    """A run's saved config (config.json, a checkpoint's) as this code reads it: fields added
    since it was saved hold their defaults, so such a run still resumes."""
    return RunConfig.from_saved(data, "the run's saved config").to_json()


def with_total(config: dict[str, Any], total_steps: int) -> dict[str, Any]:
    """A config's JSON with `ppo.total_steps` set to `total_steps`."""
    return {**config, "ppo": {**config["ppo"], "total_steps": total_steps}}


def checkpoint_config(cfg: RunConfig) -> Callable[[dict[str, Any]], dict[str, Any]]:
    """How a checkpoint's saved config is compared with `cfg`: as `saved_config` reads it, and
    for runs in env steps (online) whatever their total (a run continued to a larger total resumes from a
    checkpoint taken under the smaller one)."""
    if not protocol_of(cfg).in_env_steps:
        return saved_config
    return lambda data: with_total(saved_config(data), cfg.ppo.total_steps)


#: The fields of a run's config that say which cell of an experiment it is: its seed, env,
#: agent (and executor) and TransE data; each experiment adds those its cells differ in
#: (`fields_apart`, Table 1's variants).
CELL_IDENTITY = (("train", "seed"), ("train", "env"), ("train", "agent"), ("train", "executor"),
                 ("low_data", "strict_transe"))


def check_holds_run(run_dir: Path, cfg: RunConfig, fields: list[tuple[str, str]]) -> None:
    """Refuse, in one UserError, a run directory that holds another run than `cfg`'s (copied or
    swapped in from another cell) before its numbers are read: its config.json and its weights'
    header must both record `cfg`'s value of each of `fields` (section, name), and the weights
    must match their SHA-256, which summary.json and eval.json are sealed to. A directory with
    neither file (results written by hand, or before runs wrote them) is left to the digests'
    legacy reading."""
    expected = saved_config(cfg.to_json())
    recorded = []
    if (run_dir / CONFIG).is_file():
        recorded.append((run_dir / CONFIG, read_json_object(run_dir / CONFIG)))
    if (run_dir / MODEL).is_file():
        recorded.append((run_dir / MODEL, load_weights(run_dir / MODEL)[1].get("config")))
    for path, data in recorded:
        config = saved_config(data)
        for section, name in fields:
            ours, theirs = config[section].get(name), expected[section].get(name)
            if ours != theirs:
                raise UserError(
                    f"{path} records another run ({section}.{name} is {json.dumps(ours)}, the "
                    f"cell's is {json.dumps(theirs)}): a run copied or moved from another cell "
                    "is not tabled; move its directory away and run the cell again")


def fields_apart(configs: list[RunConfig]) -> list[tuple[str, str]]:
    """The (section, name) fields in which `configs` (the cells of one experiment, say) do not
    all agree: what tells their runs apart, for `check_holds_run`."""
    saved = [cfg.to_json() for cfg in configs]
    names = {(section, name) for config in saved for section, values in config.items()
             for name in values}
    return sorted((section, name) for section, name in names
                  if len({json.dumps(c.get(section, {}).get(name)) for c in saved}) > 1)


def steps_done(out: Path) -> int:
    """The env steps the run in `out` has trained, at its last checkpoint (0 without one)."""
    if not (out / CHECKPOINT).is_file():
        return 0
    steps = read_loop_state(out / CHECKPOINT).get("log_step")
    if type(steps) is not int or steps < 0:
        raise UserError(f"checkpoint {out / CHECKPOINT} does not fit this run: no valid step count")
    return steps


def open_to_resume(out: Path, cfg: RunConfig) -> bool:
    """Check that `out` holds the run that `cfg` resumes, changing nothing; True when `cfg`
    continues it to another total: an online run (finished or not) whose config differs only in
    `ppo.total_steps`, more than the steps it has trained. Training then continues from its last
    checkpoint (a finished run keeps one at its end) as if the run had been started with the new
    total, except for the learning-rate schedule (`xlvin.api.Model.learn`)."""
    config = cfg.to_json()
    saved = saved_config(read_json_object(out / CONFIG)) if (out / CONFIG).is_file() else None
    total, finished = cfg.ppo.total_steps, (out / SUMMARY).is_file()
    if (saved is None or not protocol_of(cfg).in_env_steps
            or (saved["ppo"]["total_steps"] == total and not finished)):
        open_run_dir(out, config, saved_config)
        return False
    open_run_dir(out, with_total(config, saved["ppo"]["total_steps"]), saved_config,
                 finished_ok=True)
    done = steps_done(out)
    if finished and not (out / CHECKPOINT).is_file():
        raise FieldError("{} has no checkpoint to continue from (trained with "
                         "{checkpoint_every=}, or by an xlvin that kept none at the end)", out,
                         checkpoint_every=0)
    if total <= done:
        state = "finished" if finished else "unfinished"
        raise FieldError("{} holds a {} run of {} steps: {total_steps=} must be more to "
                         "continue it", out, state, done, total_steps=total)
    return True
