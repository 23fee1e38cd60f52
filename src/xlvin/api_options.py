"""The Python API's keyword arguments: every option of `xlvin train` by its name (`with_options`),
Stable-Baselines3's names for ours (`learning_rate=` is `lr=`, `total_timesteps=` is
`total_steps=`), those of its arguments taken and unused, and those refused, each with what to
use instead (docs/api.md has the table); the config a model's arguments make (`model_config`);
and the checks of the arguments of `load` and `evaluate`.
"""

from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

import gymnasium as gym
import torch

from xlvin.config import close_match, from_dict, load_json, to_dict
from xlvin.envs.given import env_options
from xlvin.envs.packages import import_gym_packages
from xlvin.envs.wrappers import import_env_wrappers, wrapper_spec
from xlvin.errors import FieldError, UserError
from xlvin.run.agents import expand_agent
from xlvin.run.checks import check_device, check_target_kl
from xlvin.run.config import EVAL_SEED, MAX_SEED, SECTIONS, RunConfig, option_names

#: The most episodes one evaluation plays: its result lists every return.
MAX_EVAL_EPISODES = 1_000_000
#: Stable-Baselines3's policy names: `PPO("MlpPolicy", env)` takes the env second.
SB3_POLICIES = ("MlpPolicy", "CnnPolicy", "MultiInputPolicy")
#: Stable-Baselines3's constructor names that are ours under another name, meaning the same:
#: n_steps is per env as num_steps, normalize_advantage normalises per minibatch as norm_adv,
#: clip_range clips the surrogate as clip_coef (which also bounds the value clipping of
#: clip_value_loss=True, SB3's clip_range_vf=None turning it off).
SB3_OPTIONS = {"learning_rate": "lr", "n_steps": "num_steps", "n_epochs": "update_epochs",
               "normalize_advantage": "norm_adv", "clip_range": "clip_coef"}
#: Stable-Baselines3's names taken with a rule of their own (`sb3_options`, `sb3_batch_size`).
SB3_RULED = ("batch_size", "clip_range_vf")
#: Stable-Baselines3's names refused, each with what to use instead.
SB3_REFUSED = {
    "tensorboard_log": "TensorBoard is written into the run directory: learn(out=DIR) writes "
                       "DIR/tb (tensorboard --logdir DIR)",
    "policy_kwargs": "the network's settings are options by name (hidden=, depth=, ...: those "
                     "of `xlvin train --help`)",
    "tb_log_name": "TensorBoard is written into the run directory: learn(out=DIR) writes DIR/tb",
}
#: `learn`'s keyword arguments, ours and Stable-Baselines3's.
LEARN_ARGUMENTS = ("total_steps", "total_timesteps", "out", "resume", "progress", "progress_bar",
                   "callback", "reset_num_timesteps", "log_interval")
#: Stable-Baselines3's arguments of `load` taken and unused; and ours.
SB3_LOAD_UNUSED = ("custom_objects", "print_system_info", "force_reset")
LOAD_ARGUMENTS = ("env", "device", "gym_packages", "env_wrappers")


def _unknown(source: str, name: str, known: list[str] | tuple[str, ...]) -> UserError:
    close = close_match(name, list(known))
    return UserError(f"{source}: unknown argument {name!r}"
                     f"{f' (did you mean {close}?)' if close else ''}")


def resolve_device(device: str) -> str:
    """Stable-Baselines3's device="auto": cuda where a GPU is available, else cpu."""
    if device == "auto":
        return "cuda" if torch.cuda.is_available() else "cpu"
    return device


def sb3_positional(env: Any, sb3_env: Any, source: str) -> Any:
    """The env of a constructor's positional arguments: the first, or the second after one of
    Stable-Baselines3's policy names (`PPO("MlpPolicy", env)`)."""
    if isinstance(env, str) and env in SB3_POLICIES:
        env, sb3_env = sb3_env, None
    if sb3_env is not None:
        raise UserError(f"{source} takes the env first; a second positional argument is "
                        f"only for a Stable-Baselines3 policy name ({', '.join(SB3_POLICIES)})"
                        " before it")
    return env


def _give_one(source: str, sb3: str, ours: str) -> UserError:
    return UserError(f"{source}: {sb3}= (Stable-Baselines3's name) and {ours}= are one "
                     "setting; give one")


def sb3_options(options: dict[str, Any], source: str) -> tuple[dict[str, Any], Any]:
    """(`options` with Stable-Baselines3's names as ours, SB3's `batch_size` or None: it needs
    the rollout's size, `sb3_batch_size`); one UserError naming what to use for a name or value
    we do not take. `learning_rate` -> `lr` (`SB3_OPTIONS`), `clip_range_vf=None` ->
    `clip_value_loss=False` (a number: refused, our clipping is another loss), SB3's
    `target_kl=None` -> 0 (never), device="auto"."""
    for name, hint in SB3_REFUSED.items():
        if name in options:
            raise UserError(f"{source}: {name}= is not taken: {hint}")
    for name, ours in SB3_OPTIONS.items():
        if name in options:
            value = options.pop(name)
            if callable(value):
                decay = "; anneal_lr=True (the default) decays it linearly to 0" if (
                    ours == "lr") else ""
                raise UserError(f"{source}: {name}= a schedule is not taken: give a number{decay}")
            if ours in options:
                raise _give_one(source, name, ours)
            options[ours] = value
    if "clip_range_vf" in options:
        value = options.pop("clip_range_vf")
        if value is not None:
            raise UserError(
                f"{source}: clip_range_vf={value!r} is not taken: xlvin clips the value loss by "
                "clip_coef, as the larger of the clipped and unclipped losses "
                "(clip_value_loss=True), or not at all (clip_value_loss=False, SB3's "
                "clip_range_vf=None)")
        if "clip_value_loss" in options:
            raise _give_one(source, "clip_range_vf", "clip_value_loss")
        options["clip_value_loss"] = False
    if "target_kl" in options and options["target_kl"] is None:
        options["target_kl"] = 0.0  # SB3's None: no early stop
    batch_size = options.pop("batch_size", None)
    for ours in ("num_minibatches", "minibatch_size"):
        if batch_size is not None and ours in options:
            raise _give_one(source, "batch_size", ours)
    if "device" in options:
        options["device"] = resolve_device(options["device"])
    return options, batch_size


def sb3_batch_size(cfg: RunConfig, batch_size: Any, source: str) -> RunConfig:
    """`cfg` with SB3's `batch_size` (the minibatch size, in env steps of a rollout of num_steps
    x num_envs) as ours: the rollout cut into num_minibatches equal minibatches (ours leave
    out the autoreset steps, so that they may hold a few transitions fewer). One that does not
    divide the rollout (SB3 would end each epoch with a truncated minibatch) is refused."""
    ppo = cfg.ppo
    rollout = ppo.num_steps * ppo.num_envs
    if type(batch_size) is not int or batch_size <= 0 or rollout % batch_size:
        raise UserError(
            f"{source}: batch_size={batch_size!r} (SB3's minibatch size) must divide a rollout "
            f"of num_steps x num_envs = {ppo.num_steps} x {ppo.num_envs} = {rollout} env "
            "steps; else give num_minibatches= (equal minibatches) or minibatch_size= (the "
            "last partial one dropped)")
    return with_options(cfg, {"num_minibatches": rollout // batch_size, "minibatch_size": 0},
                        source)


def with_options(cfg: RunConfig, options: dict[str, Any], source: str) -> RunConfig:
    """`cfg` with `options` (Python names of the command line's flags) set, every value checked
    as a config file's is; one UserError for an unknown name or a bad value."""
    known = option_names()
    options = expand_agent(options)  # agent="xlvin-cp": agent xlvin, executor cartpole
    unknown = [name for name in options if name not in known]
    if unknown:
        close = close_match(unknown[0], [*known, *SB3_OPTIONS, *SB3_RULED])
        hint = f" (did you mean {close}?)" if close else ""
        raise UserError(f"{source}: unknown option {unknown[0]!r}{hint}; the options are those of "
                        "`xlvin train --help`, dashes as underscores")
    sections = {}
    for section, cls, _ in SECTIONS:
        given = {f: options[n] for n, (s, f) in known.items() if s == section and n in options}
        current = getattr(cfg, section)
        sections[section] = from_dict(cls, {**to_dict(current), **given}, source) if given else current
    return RunConfig(**sections)


def model_config(
    agent: str | None, env: Any, sb3_env: Any, env_kwargs: dict[str, Any] | None,
    gym_packages: Iterable[str], env_wrappers: Iterable[str | Callable[..., gym.Env]],
    config: RunConfig | str | Path | None, options: dict[str, Any], source: str,
) -> RunConfig:
    """The config of a model of `agent` (None: any, `agent=`) made with these arguments
    (`xlvin.api.Model`), checked: `options` over `config` (a RunConfig, or a JSON file as
    `xlvin train --config` reads), the env resolved (`env_options`), the modules and wrappers
    named imported. An env must be given, or named by `config`: a missing one is refused, not
    replaced by a default (`load` builds its model from the saved config instead)."""
    env = sb3_positional(env, sb3_env, source)  # PPO("MlpPolicy", env), as SB3
    if env is None and config is None:
        raise UserError(f"{source}: no env given: pass one (an id such as 'CartPole-v1', a "
                        "gym.Env, a callable that makes one, or a vector env), or config= a run's "
                        "config that names it")
    target_kl = "target_kl" in options
    options, batch_size = sb3_options(options, source)
    import_gym_packages(list(gym_packages))
    wrappers = [wrapper_spec(w) for w in env_wrappers]
    import_env_wrappers(wrappers)
    if isinstance(config, (str, Path)):
        config = RunConfig.from_json(load_json(Path(config)), str(config))
    cfg = config or RunConfig()
    if agent is not None:
        if "agent" in options:
            raise UserError(f"{source} trains agent {agent!r}; use xlvin.Model(agent=...) for "
                            "another")
        options["agent"] = agent
    if gym_packages:
        options["gym_packages"] = list(gym_packages)
    if wrappers:
        options["env_wrappers"] = wrappers
    if env is not None or env_kwargs is not None:
        options.update(env_options(env or cfg.train.env, env_kwargs, wrappers,
                                   options.get("num_envs"), source))
    cfg = with_options(cfg, options, source)
    if batch_size is not None:
        cfg = sb3_batch_size(cfg, batch_size, source)
    if target_kl:
        check_target_kl(cfg)
    return cfg


def learn_arguments(total_steps: int | None, progress: bool | None, sb3: dict[str, Any],
                    trained: int | None, verbose: int | None) -> tuple[int | None, bool]:
    """(total_steps, progress) of `learn` with Stable-Baselines3's names in `sb3`; `trained`: the
    steps of the model's run, None before it has one (`reset_num_timesteps=True` is refused
    after); progress by default unless `verbose` is 0."""
    if "total_timesteps" in sb3:
        if total_steps is not None:
            raise UserError("learn(): total_steps and total_timesteps are one number; give one")
        total_steps = sb3.pop("total_timesteps")
    if "progress_bar" in sb3:
        progress = bool(sb3.pop("progress_bar")) if progress is None else progress
    sb3.pop("log_interval", None)
    reset = sb3.pop("reset_num_timesteps", None)
    if reset and trained is not None:
        raise UserError(f"learn(reset_num_timesteps=True): this model has trained {trained} steps "
                        "and learn continues its run (reset_num_timesteps=False); a new model "
                        "trains a fresh run")
    for name in sb3:
        hint = SB3_REFUSED.get(name)
        if hint:
            raise UserError(f"learn(): {name}= is not taken: {hint}")
        raise _unknown("learn()", name, LEARN_ARGUMENTS)
    return total_steps, verbose != 0 if progress is None else progress


def load_arguments(device: str, gym_packages: Iterable[str],
                   env_wrappers: Iterable[str | Callable[..., gym.Env]], sb3: dict[str, Any]) -> str:
    """The device of `load`, checked (device="auto" as Stable-Baselines3's), once the modules
    and wrappers named are imported; an argument neither ours nor one of Stable-Baselines3's
    taken and unused (`SB3_LOAD_UNUSED`) is refused."""
    unknown = set(sb3) - set(SB3_LOAD_UNUSED)
    if unknown:
        raise _unknown("load()", sorted(unknown)[0], LOAD_ARGUMENTS)
    device = resolve_device(device)
    check_device(device)
    import_gym_packages(list(gym_packages))
    import_env_wrappers([wrapper_spec(w) for w in env_wrappers])
    return device


def check_evaluation(episodes: int, seed: int) -> None:
    """Refuse an evaluation of no episodes or more than MAX_EVAL_EPISODES, or seeds outside
    [0, MAX_SEED]."""
    if episodes <= 0:
        raise FieldError("{episodes} must be > 0, got {}", episodes)
    if episodes > MAX_EVAL_EPISODES:
        raise FieldError("{episodes} must be at most {:,}, got {:,}", MAX_EVAL_EPISODES, episodes)
    if not 0 <= seed <= MAX_SEED:
        raise FieldError("{seed} must be in [0, {}], got {}", MAX_SEED, seed)
