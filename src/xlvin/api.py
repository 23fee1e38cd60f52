"""The Python API, in the shape of Stable-Baselines3:

    from xlvin import XLVIN
    model = XLVIN("CartPole-v1", depth=2, seed=0)
    model.learn(total_steps=50_000)
    model.save("runs/cp")
    action, _ = model.predict(obs, deterministic=True)   # (action, state), as in SB3
    model = XLVIN.load("runs/cp")
    model.evaluate(episodes=100)

Every option of `xlvin train` is a keyword argument of the same name (`--total-steps` is
`total_steps=`, `--transe-epochs` is `transe_epochs=`); `learn` is the run of `xlvin train`
(progress bar, TensorBoard, checkpoints, `resume=True`), `save` writes the run directory `xlvin
evaluate` reads, and `load` reads the ones `xlvin train` writes. The command line is a thin layer
over this module.
"""

import contextlib
import copy
import dataclasses
import functools
import random
import shutil
import tempfile
import warnings
import weakref
from collections.abc import Callable, Iterable, Iterator, Mapping
from pathlib import Path
from typing import Any, ClassVar

import gymnasium as gym
import numpy as np
import torch

from xlvin.accel.numpy_sampling import env_actions, mode_actions, sample_actions
from xlvin.callbacks import Callback, as_callback
from xlvin.config import close_match, from_dict, load_json, to_dict
from xlvin.envs.given import API_PREFIX, EnvLike, GivenEnv, given_env, resolve_env
from xlvin.envs.packages import import_gym_packages, require_gym_packages
from xlvin.envs.wrappers import import_env_wrappers, wrapper_spec
from xlvin.errors import FieldError, UserError
from xlvin.io.digests import read_sealed
from xlvin.io.executor_file import read_executor_meta
from xlvin.io.checkpoint import CHECKPOINT, read_loop_state
from xlvin.io.run_dir import (
    CONFIG,
    LOCK,
    MODEL,
    SUMMARY,
    check_new_run_dir,
    claim_run_dir,
    is_saved_policy,
    read_json_object,
    reading_results,
    write_json,
)
from xlvin.io.weights import read_metadata, save_weights
from xlvin.nn.policy import ActorCritic
from xlvin.process import seed_everything
from xlvin.run.agents import agent_spec, build_agent, expand_agent
from xlvin.ppo.collect import make_vector_env, policy_device
from xlvin.ppo.loop import TrainResult
from xlvin.pretrain.files import executor_file, load_executor_processor
from xlvin.run.training import evaluate_agent, read_run, train_run, weights_metadata
from xlvin.run.config import EVAL_SEED, MAX_SEED, SECTIONS, RunConfig, on_cpu, option_names, whole_rollouts
from xlvin.run.architecture import made_env
from xlvin.run.checks import check_device, check_run
from xlvin.envs.spaces import Spaces, env_spaces, flatten_parts

#: Stable-Baselines3's policy names: `PPO("MlpPolicy", env)` takes the env second.
SB3_POLICIES = ("MlpPolicy", "CnnPolicy", "MultiInputPolicy")
#: Stable-Baselines3's constructor names that are ours under another name.
SB3_OPTIONS = {"learning_rate": "lr"}
#: Stable-Baselines3's names refused, each with what to use instead.
SB3_REFUSED = {
    "tensorboard_log": "TensorBoard is written into the run directory: learn(out=DIR) writes "
                       "DIR/tb (tensorboard --logdir DIR)",
    "policy_kwargs": "the network's settings are options by name (hidden=, depth=, ...: those "
                     "of `xlvin train --help`)",
    "tb_log_name": "TensorBoard is written into the run directory: learn(out=DIR) writes DIR/tb",
}


def resolve_device(device: str) -> str:
    """Stable-Baselines3's device="auto": cuda where a GPU is available, else cpu."""
    if device == "auto":
        return "cuda" if torch.cuda.is_available() else "cpu"
    return device


def sb3_options(options: dict[str, Any], source: str) -> dict[str, Any]:
    """`options` with Stable-Baselines3's names as ours (`learning_rate` -> `lr`, device="auto"),
    or one UserError naming what to use for one we do not take."""
    for name, hint in SB3_REFUSED.items():
        if name in options:
            raise UserError(f"{source}: {name}= is not taken: {hint}")
    for name, ours in SB3_OPTIONS.items():
        if name in options:
            value = options.pop(name)
            if callable(value):
                raise UserError(f"{source}: {name}= a schedule is not taken: give a number; "
                                "anneal_lr=True (the default) decays it linearly to 0")
            options[ours] = value
    if "device" in options:
        options["device"] = resolve_device(options["device"])
    return options


def with_options(cfg: RunConfig, options: dict[str, Any], source: str) -> RunConfig:
    """`cfg` with `options` (Python names of the command line's flags) set, every value checked
    as a config file's is; one UserError for an unknown name or a bad value."""
    known = option_names()
    options = expand_agent(options)  # agent="xlvin-cp": agent xlvin, executor cartpole
    unknown = [name for name in options if name not in known]
    if unknown:
        close = close_match(unknown[0], [*known, *SB3_OPTIONS])
        hint = f" (did you mean {close}?)" if close else ""
        raise UserError(f"{source}: unknown option {unknown[0]!r}{hint}; the options are those of "
                        "`xlvin train --help`, dashes as underscores")
    sections = {}
    for section, cls, _ in SECTIONS:
        given = {f: options[n] for n, (s, f) in known.items() if s == section and n in options}
        current = getattr(cfg, section)
        sections[section] = from_dict(cls, {**to_dict(current), **given}, source) if given else current
    return RunConfig(**sections)


#: The most episodes one evaluation plays: its result lists every return.
MAX_EVAL_EPISODES = 1_000_000


def check_evaluation(episodes: int, seed: int) -> None:
    """Refuse an evaluation of no episodes or more than MAX_EVAL_EPISODES, or seeds outside
    [0, MAX_SEED]."""
    if episodes <= 0:
        raise FieldError("{episodes} must be > 0, got {}", episodes)
    if episodes > MAX_EVAL_EPISODES:
        raise FieldError("{episodes} must be at most {:,}, got {:,}", MAX_EVAL_EPISODES, episodes)
    if not 0 <= seed <= MAX_SEED:
        raise FieldError("{seed} must be in [0, {}], got {}", MAX_SEED, seed)


def _python_errors(method: Callable[..., Any]) -> Callable[..., Any]:
    """`method` with its FieldErrors naming keyword arguments, not flags (`FieldError.
    in_python`); the command line, which calls the API too, prints its own terms
    (`command_line_message`)."""

    @functools.wraps(method)
    def wrapped(*args: Any, **kwargs: Any) -> Any:
        try:
            return method(*args, **kwargs)
        except FieldError as err:
            if hasattr(err, "command_line_message"):
                raise
            raise err.in_python() from None

    return wrapped


#: File suffixes that `save` refuses: it writes a run directory, not one file.
FILE_SUFFIXES = (".zip", ".pkl", ".pt", ".pth", ".safetensors", ".tar", ".gz")


def _make_as(env_id: str, kwargs: dict[str, Any], **run_kwargs: Any) -> gym.Env:
    """`gym.make(env_id)`: the env a run's unregistered id stands for (`Model.load(env=...)`)."""
    return gym.make(env_id, **{**kwargs, **run_kwargs})


@contextlib.contextmanager
def _rngs_kept() -> Iterator[None]:
    """Restore torch's, NumPy's and Python's global generators after the block."""
    numpy_state, python_state = np.random.get_state(), random.getstate()
    with torch.random.fork_rng(devices=[]):
        try:
            yield
        finally:
            np.random.set_state(numpy_state)
            random.setstate(python_state)


class _Hooks:
    """The training loop's hooks over a user's `Callback`: the model shows the policy being
    trained and the steps so far, and the training's random generators are kept."""

    def __init__(self, model: "Model", callback: Callback) -> None:
        self.model, self.callback = model, callback

    def _call(self, policy: ActorCritic, result: TrainResult, hook: Callable[..., Any],
              *args: Any) -> bool:
        self.model.policy, self.model._num_timesteps = policy, result.env_steps
        with _rngs_kept():
            return hook(self.model, *args) is not False

    def on_rollout(self, policy: ActorCritic, result: TrainResult) -> bool:
        return self._call(policy, result, self.callback.on_rollout)

    def on_update(self, policy: ActorCritic, result: TrainResult,
                  metrics: dict[str, float]) -> bool:
        return self._call(policy, result, self.callback.on_update, dict(metrics))

    def on_evaluation(self, policy: ActorCritic, result: TrainResult,
                      evaluation: dict[str, float]) -> bool:
        return self._call(policy, result, self.callback.on_evaluation,
                          {"mean": evaluation["eval_return"], **evaluation})

    def recorded(self) -> dict[str, float]:
        return self.model.logger.dump()


class Logger:
    """`model.logger`, as Stable-Baselines3's for what callbacks use of it: `record(key, value)`
    logs a number with the next update's metrics (DIR/metrics.jsonl and TensorBoard, under
    `key`; the last value recorded for a key wins)."""

    def __init__(self) -> None:
        self.values: dict[str, float] = {}

    def record(self, key: str, value: Any, exclude: Any = None) -> None:
        if not isinstance(key, str) or not key or key == "step":
            raise UserError(f"logger.record: key must be a name other than 'step', got {key!r}")
        if isinstance(value, torch.Tensor | np.ndarray | np.generic) and np.size(value) == 1:
            value = value.item()
        if type(value) not in (int, float) or not np.isfinite(value):
            raise UserError(f"logger.record({key!r}, ...): a finite number, got {value!r}")
        self.values[key] = float(value)

    def dump(self) -> dict[str, float]:
        """The values recorded since the last dump, and forget them."""
        values, self.values = self.values, {}
        return values


class Model:
    """An agent of the agent registry trained with PPO (`agent=` picks it; `XLVIN`, `PPO` and
    `ATreeC` fix it). `model.policy` is the `ActorCritic` network, `model.config` the run's
    `RunConfig`, `model.run_dir` the run directory once it has learned or was loaded,
    `model.num_timesteps` the env steps it has trained, `model.env` (`get_env()`) its vector env."""

    agent: ClassVar[str | None] = None

    @_python_errors
    def __init__(
        self,
        env: EnvLike | None = None,
        sb3_env: EnvLike | None = None,
        *,
        verbose: int | None = None,
        env_kwargs: dict[str, Any] | None = None,
        gym_packages: Iterable[str] = (),
        env_wrappers: Iterable[str | Callable[..., gym.Env]] = (),
        config: RunConfig | str | Path | None = None,
        **options: Any,
    ) -> None:
        """env: an id, a `gym.Env`, a callable that makes one, or a vector env (its number of
        envs becomes `num_envs`); env_kwargs: the env's keyword arguments; gym_packages: modules
        to import that register envs (recorded in the run); env_wrappers: wrappers put around
        the env, in order, each a `gymnasium.Wrapper` subclass defined at the top level of a
        module or its 'module:Class' (recorded as module:Class, its module imported; a wrapper
        a file names, config= or a run's, is applied only if named here); config: a `RunConfig` or a
        JSON file as `xlvin train --config` reads; options: any option of `xlvin train`, by its
        name."""
        source = f"{type(self).__name__}()"
        if isinstance(env, str) and env in SB3_POLICIES:  # PPO("MlpPolicy", env), as SB3
            env, sb3_env = sb3_env, None
        if sb3_env is not None:
            raise UserError(f"{source} takes the env first; a second positional argument is "
                            f"only for a Stable-Baselines3 policy name ({', '.join(SB3_POLICIES)})"
                            " before it")
        options = sb3_options(options, source)
        import_gym_packages(list(gym_packages))
        wrappers = [wrapper_spec(w) for w in env_wrappers]
        import_env_wrappers(wrappers)
        if isinstance(config, (str, Path)):
            config = RunConfig.from_json(load_json(Path(config)), str(config))
        cfg = config or RunConfig()
        if self.agent is not None:
            if "agent" in options:
                raise UserError(f"{source} trains agent {self.agent!r}; use xlvin.Model(agent=...) "
                                "for another")
            options["agent"] = self.agent
        if gym_packages:
            options["gym_packages"] = list(gym_packages)
        if wrappers:
            options["env_wrappers"] = wrappers
        if env is not None or env_kwargs is not None:
            env_id, kwargs, num_envs = resolve_env(env or cfg.train.env, env_kwargs)
            options.update(env=env_id, env_kwargs=kwargs)
            given = given_env(env_id)
            if wrappers and given is not None and given.own_vector and given.instance is None:
                raise UserError(f"{source}: env_wrappers= wrap every sub-env alike; this vector "
                                "env's sub-envs are each its own (or in worker processes): wrap "
                                "them in its env_fns instead")
            if num_envs is not None and options.setdefault("num_envs", num_envs) != num_envs:
                raise UserError(f"{source}: num_envs={options['num_envs']} but the vector env "
                                    f"has {num_envs}")
        self._setup(with_options(cfg, options, source))
        self.verbose = verbose

    @property
    def logger(self) -> Logger:
        """Stable-Baselines3's `model.logger` for callbacks: `record(key, value)` (`Logger`)."""
        if getattr(self, "_logger", None) is None:
            self._logger = Logger()
        return self._logger

    def _setup(self, cfg: RunConfig, spaces: Spaces | None = None) -> None:
        """Check `cfg` as `xlvin train` does (before anything is built or written); `spaces`: a
        saved run's, the env then not needed."""
        self.config = cfg
        self.spaces, self.architecture = check_run(cfg, spaces)
        self.policy: ActorCritic | None = None
        self.run_dir: Path | None = None
        self.summary: dict[str, Any] | None = None
        self._executor_meta: dict[str, Any] | None = None
        self._num_timesteps = 0
        self._env: gym.vector.VectorEnv | None = None
        self._generator = torch.Generator().manual_seed(cfg.train.seed)
        self.verbose: int | None = getattr(self, "verbose", None)

    @classmethod
    def from_config(cls, cfg: RunConfig, spaces: Spaces | None = None) -> "Model":
        """The model of a `RunConfig` (the class of its agent when it has one: `XLVIN`, ...).
        Imports nothing: the envs of `cfg.train.gym_packages` must be imported already, unless
        `spaces` (a saved run's) are given."""
        model_cls = cls._class_for(cfg.train.agent, "this config")
        model = model_cls.__new__(model_cls)
        model._setup(cfg, spaces)
        return model

    @classmethod
    def _class_for(cls, agent: str, what: str) -> type["Model"]:
        if cls.agent is not None and agent != cls.agent:
            right = MODELS.get(agent, Model).__name__
            raise UserError(f"{what} is a {agent} run; use {right} (or xlvin.Model), not "
                            f"{cls.__name__}")
        return cls if cls is not Model else MODELS.get(agent, Model)

    @property
    def num_timesteps(self) -> int:
        """The env steps the model has trained (all envs, autoreset steps included): 0 before
        `learn`, live inside a callback."""
        return self._num_timesteps

    @property
    def env(self) -> gym.vector.VectorEnv | None:
        """`get_env()`."""
        return self.get_env()

    def get_env(self) -> gym.vector.VectorEnv | None:
        """The vector env the model trains on (`num_envs` copies of the run's env, made on first
        use and kept), or None where the run's env cannot be made (`Model.load(env=...)`)."""
        if self._env is None:
            t = self.config.train
            try:
                self._run_env_available()
            except UserError:
                return None
            self._env = make_vector_env(made_env(t), self.config.ppo.num_envs,
                                        env_kwargs=t.env_kwargs)
        return self._env

    @_python_errors
    def set_env(self, env: EnvLike) -> None:
        """Train on `env` from now on (Stable-Baselines3's `set_env`): it must have the model's
        spaces. Before `learn`, it becomes the run's env (a vector env's size its num_envs);
        after `learn` or `load`, the run continues on it as `load(path, env=env)` takes it."""
        if self.run_dir is not None:
            self._use_env(env)
        else:
            env_id, kwargs, num_envs = resolve_env(env, None)
            self._check_spaces(env_id, kwargs)
            train = dataclasses.replace(self.config.train, env=env_id, env_kwargs=kwargs)
            ppo = self.config.ppo if num_envs is None else dataclasses.replace(
                self.config.ppo, num_envs=num_envs)
            self.config = dataclasses.replace(self.config, train=train, ppo=ppo)
        if self._env is not None:
            self._env.close()
        self._env = None

    @property
    def observation_space(self) -> gym.Space:
        """The observation space of one env as the model reads it (the env's, where it can be
        made here; else a Box of the recorded shape)."""
        env = self.get_env()
        if env is not None:
            return env.single_observation_space
        return gym.spaces.Box(-np.inf, np.inf, self.spaces.obs_shape, np.float32)

    @property
    def action_space(self) -> gym.Space:
        """The action space of one env (the env's, where it can be made here; else rebuilt
        from the recorded spaces)."""
        env = self.get_env()
        if env is not None:
            return env.single_action_space
        sp = self.spaces
        if sp.action_kind == "discrete":
            return gym.spaces.Discrete(sp.num_actions)
        if sp.action_kind == "multidiscrete":
            return gym.spaces.MultiDiscrete(list(sp.action_nvec))
        return gym.spaces.Box(np.array(sp.action_low, np.float32),
                              np.array(sp.action_high, np.float32))

    def get_parameters(self) -> dict[str, dict[str, torch.Tensor]]:
        """{"policy": the policy's state_dict}, as Stable-Baselines3's `get_parameters` (no
        optimizer: a run's checkpoint holds it)."""
        return {"policy": {k: v.detach().clone() for k, v in self._policy().state_dict().items()}}

    @_python_errors
    def set_parameters(self, load_path_or_dict: str | Path | dict[str, Any],
                       exact_match: bool = True, device: str = "auto") -> None:
        """Load weights: a dict as `get_parameters` gives ({"policy": state_dict}), or a run
        directory's. `exact_match`: every tensor of the policy and no other (else those that
        are given); one UserError naming a mismatch. `device` is taken as SB3's and unused
        (the weights go to the policy's device)."""
        if isinstance(load_path_or_dict, (str, Path)):
            state = {"policy": read_run(Path(load_path_or_dict))[0].state_dict()}
        else:
            state = dict(load_path_or_dict)
        if set(state) - {"policy"}:
            raise UserError(f"set_parameters: takes {{'policy': state_dict}}, got keys "
                            f"{sorted(state)}")
        policy = self._policy()
        ours = policy.state_dict()
        given = state.get("policy", {})
        missing, extra = sorted(set(ours) - set(given)), sorted(set(given) - set(ours))
        if exact_match and (missing or extra):
            raise UserError(f"set_parameters(exact_match=True): missing {missing[:3]}, "
                            f"unexpected {extra[:3]}")
        for name, value in given.items():
            if name in ours and tuple(value.shape) != tuple(ours[name].shape):
                raise UserError(f"set_parameters: {name} has shape {list(value.shape)}, the "
                                f"model's {list(ours[name].shape)}")
        policy.load_state_dict({k: v for k, v in given.items() if k in ours}, strict=False)

    @_python_errors
    def learn(
        self,
        total_steps: int | None = None,
        *,
        out: str | Path | None = None,
        resume: bool = False,
        progress: bool | None = None,
        callback: Callback | Iterable[Callback] | Callable[..., Any] | None = None,
        **sb3: Any,
    ) -> "Model":
        """Train as `xlvin train` does: pre-training (its progress shown even with
        progress=False: it can take minutes), PPO, checkpoints, TensorBoard under `out/tb`, the
        progress bar, then the final weights and summary. `total_steps` sets `total_steps`
        (online protocol), rounded up to whole rollouts (num_envs x num_steps), with a warning
        unless it is the default; `out` is the run directory (when None, a new temporary folder,
        `model.run_dir`, removed with the model: `save(path)` keeps it); `resume=True` continues
        the unfinished run in `out` exactly, or, with a larger `total_steps`, a finished one to
        that total.

        Again (or after `load`), `learn(n)` continues the model's run in place for n more env
        steps (as Stable-Baselines3's `learn(n, reset_num_timesteps=False)`): metrics,
        TensorBoard and checkpoints carry on from the run's last checkpoint (a finished run keeps
        one at its end), `num_timesteps` counts on, and `config.ppo.total_steps` becomes the new
        total. Online runs only. Learning rate: with `anneal_lr` (the default) it decays linearly
        to 0 over the run's current total, lr x (1 - updates / total updates); continuing raises
        the total, so the next update's rate is lr x n / (steps before + n), where the run had
        stopped near 0, and the extended run differs from one trained for the whole total at
        once. With `anneal_lr=False` it does not: learn(n) then learn(n) gives exactly the
        weights and metrics of learn(2 n) (same machine).

        `callback`: a `xlvin.callbacks.Callback` (or a list of them) called after each rollout,
        update and evaluation; returning False finishes the run at the next update boundary,
        with a checkpoint to continue from; a plain function `callback(locals, globals) -> bool`
        is called after each rollout, as Stable-Baselines3's.

        Stable-Baselines3's names: `total_timesteps=` is `total_steps`, `progress_bar=` is
        `progress` (default: on, off with the model's `verbose=0`), `log_interval=` is taken and
        unused (metrics are logged every update), `reset_num_timesteps=False` is what learning
        again does; `reset_num_timesteps=True` on a model that has trained is refused (a new
        model trains a fresh run)."""
        total_steps, progress = self._sb3_learn(total_steps, progress, sb3)
        self._run_env_available()  # what trains has the spaces the model records
        hooks = None if callback is None else _Hooks(self, as_callback(callback))
        if hooks is not None:
            hooks.callback.on_start(self)
        if self.run_dir is not None and not resume:
            cfg, out, resume = self._continued(total_steps, out), self.run_dir, True
        else:
            cfg = self.config
            if total_steps is not None:
                cfg = with_options(cfg, {"total_steps": total_steps}, "learn()")
            cfg = self._whole_rollouts(cfg)
            if out is None:
                if resume:
                    raise UserError("learn(resume=True) needs out=DIR, the run directory to "
                                    "continue")
                out = self._temporary_run_dir()
        try:
            self.policy, self.summary = train_run(cfg, Path(out), progress=progress,
                                                  resume=resume, hooks=hooks)
        except BaseException:
            self._hold_stopped_run(cfg, Path(out))
            raise
        self.config, self.run_dir = cfg, Path(out)
        self._executor_meta = self.summary["executor"]
        self._num_timesteps = self.summary["ppo"]["env_steps"]
        return self

    def _temporary_run_dir(self) -> Path:
        """A run directory for `learn()` without `out=`, in a new temporary folder that is
        removed with the model (garbage-collected, or at the latest when Python exits):
        `save(path)` keeps the run."""
        folder = tempfile.mkdtemp(prefix="xlvin-")
        weakref.finalize(self, shutil.rmtree, folder, ignore_errors=True)
        return Path(folder) / "run"

    def _hold_stopped_run(self, cfg: RunConfig, out: Path) -> None:
        """After `learn` raised (a callback's error, Ctrl-C) with a checkpoint left in `out`:
        the model holds that run at its checkpoint, so that `learn(n)` on it continues the run
        for n more steps from there, as `learn(out=out, resume=True)` resumes it."""
        if (out / CHECKPOINT).is_file() and not (out / CHECKPOINT).is_symlink():
            self.config, self.run_dir = cfg, out
            self._num_timesteps = int(read_loop_state(out / CHECKPOINT)["result"]["env_steps"])

    def _sb3_learn(self, total_steps: int | None, progress: bool | None,
                   sb3: dict[str, Any]) -> tuple[int | None, bool]:
        """(total_steps, progress) of `learn` with Stable-Baselines3's names in `sb3`."""
        if "total_timesteps" in sb3:
            if total_steps is not None:
                raise UserError("learn(): total_steps and total_timesteps are one number; give one")
            total_steps = sb3.pop("total_timesteps")
        if "progress_bar" in sb3:
            progress = bool(sb3.pop("progress_bar")) if progress is None else progress
        sb3.pop("log_interval", None)
        reset = sb3.pop("reset_num_timesteps", None)
        if reset and self.run_dir is not None:
            raise UserError(f"learn(reset_num_timesteps=True): this model has trained "
                            f"{self.num_timesteps} steps and learn continues its run "
                            "(reset_num_timesteps=False); a new model trains a fresh run")
        for name in sb3:
            hint = SB3_REFUSED.get(name)
            if hint:
                raise UserError(f"learn(): {name}= is not taken: {hint}")
            known = ["total_steps", "total_timesteps", "out", "resume", "progress", "progress_bar",
                     "callback", "reset_num_timesteps", "log_interval"]
            close = close_match(name, known)
            raise UserError(f"learn(): unknown argument {name!r}"
                            f"{f' (did you mean {close}?)' if close else ''}")
        if progress is None:
            progress = self.verbose != 0
        return total_steps, progress

    @staticmethod
    def _whole_rollouts(cfg: RunConfig) -> RunConfig:
        cfg, rounded = whole_rollouts(cfg)
        if rounded:
            warnings.warn(f"total_steps {rounded}", stacklevel=4)
        return cfg

    def _continued(self, steps: int | None, out: str | Path | None) -> RunConfig:
        """The config of this model's run continued for `steps` more env steps."""
        assert self.run_dir is not None
        if steps is None:
            raise UserError(f"this model's run has trained {self.num_timesteps} steps: "
                            "learn(n) continues it for n more")
        if out is not None and Path(out).resolve() != self.run_dir.resolve():
            raise UserError(f"learn() continues this model's run in place, in {self.run_dir}; "
                            "save() copies it elsewhere")
        saved = RunConfig.from_saved(read_json_object(self.run_dir / CONFIG), str(self.run_dir))
        if saved.train.protocol != "online":
            raise UserError(f"only online runs continue; {self.run_dir} is a "
                            f"{saved.train.protocol} run")
        more = self._whole_rollouts(with_options(saved, {"total_steps": steps}, "learn()"))
        return with_options(saved, {"total_steps": self.num_timesteps + more.ppo.total_steps},
                            "learn()")

    def _policy(self) -> ActorCritic:
        """The policy network; before `learn`, the initial one the run would start from."""
        if self.policy is None:
            t = self.config.train
            processor = None
            if agent_spec(t.agent).executor:
                processor, self._executor_meta = load_executor_processor(
                    executor_file(t.executor, t, progress=True))
            seed_everything(t.seed)
            self.policy = build_agent(self.architecture, self.spaces, processor).to(t.device)
        return self.policy

    @_python_errors
    def predict(
        self, observation: Any, state: Any = None, episode_start: Any = None,
        deterministic: bool = False,
    ) -> tuple[np.ndarray, None]:
        """(action, state) of one observation, or (actions [N], state) of a batch [N, ...], NumPy
        or torch, as Stable-Baselines3's `predict`: an action sampled from pi(.|s) by default,
        the greedy one (the mode of pi(.|s)) with `deterministic=True`; Box actions clipped to
        the bounds, observations normalised with the model's frozen statistics where it has
        them; Dict observations as the env gives them (a dict of arrays [N, ...] for a batch).
        The policies have no recurrent state: `state` is returned as given (None), and
        `episode_start` is accepted and unused. The value of an observation: `predict_values`.
        Needs no env: a loaded model knows its spaces."""
        actions, _ = self._act(observation, deterministic, "predict")
        return actions, state

    @_python_errors
    def predict_values(self, observation: Any) -> np.ndarray:
        """The critic's value V(s) of one observation (a 0-d array), or values [N] of a batch,
        as `predict` reads them (what `predict` returned second before; CHANGELOG.md)."""
        return self._act(observation, True, "predict_values")[1]

    def _act(self, obs: Any, deterministic: bool, name: str) -> tuple[np.ndarray, np.ndarray]:
        """(actions, values) of an observation or a batch (`predict`)."""
        policy = self._policy()
        if self.spaces.parts:
            obs = self._flat_dict(obs)
        x = obs.detach().cpu() if isinstance(obs, torch.Tensor) else torch.as_tensor(np.asarray(obs))
        shape = self.spaces.obs_shape
        single = tuple(x.shape) == shape
        if not single and tuple(x.shape[1:]) != shape:
            raise UserError(f"{name}: an observation has shape {list(shape)} (a batch [N, "
                            f"{', '.join(map(str, shape))}]), got {list(x.shape)}")
        batch = x.unsqueeze(0) if single else x
        training = policy.training
        policy.eval()
        try:
            with torch.no_grad():
                logits, values = policy(batch.to(policy_device(policy)))
        finally:
            policy.train(training)
        params, values = logits.cpu().numpy(), values.cpu().numpy()
        dist = policy.action_distribution()
        if deterministic:
            actions = env_actions(dist, mode_actions(dist, params))
        else:
            noise = dist.noise((len(params),), self._generator).numpy()
            actions = env_actions(dist, sample_actions(dist, params, noise))
        if single:
            return np.asarray(actions[0]), np.asarray(values[0])
        return actions, values

    def _flat_dict(self, obs: Any) -> np.ndarray:
        """A Dict observation (or batch) as the flat vector the policy reads (`flatten_parts`)."""
        parts = self.spaces.parts
        keys = ", ".join(p.key for p in parts)
        if not isinstance(obs, Mapping) or any(p.key not in obs for p in parts):
            raise UserError(f"predict: this model reads Dict observations with parts {keys}; got "
                            f"{type(obs).__name__}")
        try:
            return flatten_parts(parts, obs)
        except ValueError:
            shapes = ", ".join(f"{p.key} {list(p.shape)}" for p in parts)
            raise UserError(f"predict: the parts of an observation have shapes {shapes} (a batch "
                            "[N, ...] each)") from None

    @_python_errors
    def evaluate(
        self, episodes: int = 100, seed: int = EVAL_SEED, deterministic: bool = True,
        env: EnvLike | None = None,
    ) -> dict[str, Any]:
        """Return mean, std and every return over `episodes` fresh episodes seeded seed, seed + 1,
        ..., greedy or (`deterministic=False`) sampled, and which: the numbers `xlvin evaluate`
        (`--stochastic`) prints. `env`: evaluate on this env (an id, an env or a
        callable that makes one, with the model's spaces) instead of the run's; needed when the
        run's env was made from a Python object this process has not registered."""
        check_evaluation(episodes, seed)
        result = evaluate_agent(self._policy(), self._evaluation_config(env), episodes, seed,
                                deterministic)
        return {**result, "deterministic": deterministic}

    @_python_errors
    def check_evaluation_env(self, env: EnvLike | None = None) -> None:
        """Refuse, in one UserError, an env `evaluate(env=env)` could not evaluate on (the
        run's when None): what an `EvalCallback` checks before training."""
        self._evaluation_config(env)

    def _run_env_available(self) -> None:
        """Refuse, in one line saying what to pass, a run's env that cannot be made here, or
        whose spaces are not the model's. Only ids in gymnasium's registry are made (`env_spaces`):
        a loaded run's id that names a module (`module:Env`) is refused, never imported."""
        t = self.config.train
        require_gym_packages(t.gym_packages, t.env)
        if t.env.startswith(API_PREFIX) and t.env not in gym.registry:
            raise UserError(
                f"the run's environment {t.env!r} was registered from a Python object by the "
                "process that trained it and cannot be made here: pass --env ID, a registered "
                "env with its spaces, to xlvin evaluate (--gym-packages MODULE registers yours; "
                "in Python: env=, the env or a callable that makes it)")
        self._check_spaces(t.env, t.env_kwargs)

    def _evaluation_config(self, env: EnvLike | None) -> RunConfig:
        """The config evaluations run under: the run's, or with `env` (checked to have the
        model's spaces) as its env."""
        if env is None:
            self._run_env_available()
            return self.config
        env_id, kwargs, _ = resolve_env(env, None)
        self._check_spaces(env_id, kwargs)
        train = dataclasses.replace(self.config.train, env=env_id, env_kwargs=kwargs)
        return dataclasses.replace(self.config, train=train)

    def _check_spaces(self, env_id: str, kwargs: dict[str, Any]) -> None:
        found = env_spaces(env_id, kwargs, self.config.train.env_wrappers)
        ours = self.spaces
        if (found.obs_shape, found.num_actions, found.states, found.action_kind,
                found.action_nvec, found.parts) != (ours.obs_shape, ours.num_actions, ours.states,
                                                    ours.action_kind, ours.action_nvec, ours.parts):
            raise UserError(
                f"env {env_id!r} has observations {list(found.obs_shape)} and "
                f"{found.num_actions} actions; the model reads {list(ours.obs_shape)} and "
                f"{ours.num_actions}")

    def _use_env(self, env: EnvLike) -> None:
        """Make the run's env with `env` in this process (`load(env=...)`): an env the API
        registered from a Python object in the process that trained it is registered again,
        under the run's id, as `env` (a callable or instance as the API registers it, so that
        the run's checkpoint of its state fits); any other must be the run's own env."""
        t = self.config.train
        env_id, kwargs, _ = resolve_env(env, None)
        if (env_id, kwargs) != (t.env, t.env_kwargs):
            if not t.env.startswith(API_PREFIX):
                raise UserError(f"env= is {env_id!r} but the run trained on {t.env!r}; "
                                "evaluate(env=...) evaluates on another env")
            maker = (gym.registry[env_id].entry_point if env_id.startswith(API_PREFIX)
                     else functools.partial(_make_as, env_id, kwargs))
            gym.registry.pop(t.env, None)
            gym.register(t.env, entry_point=maker, disable_env_checker=True)
        self._run_env_available()

    @_python_errors
    def save(self, path: str | Path) -> Path:
        """Write the run directory `xlvin evaluate` reads to `path` (a new or empty folder, not a
        file name such as model.zip): after `learn` or `load`, a copy of the run's directory
        (metrics, TensorBoard and summary included); before, the config and the initial
        weights."""
        path = Path(path)
        if path.suffix.lower() in FILE_SUFFIXES and not path.is_dir():
            folder = str(path.with_suffix(""))
            raise UserError(f"save({str(path)!r}): a model is saved as a run directory, not a "
                            f"{path.suffix} file; give a folder, e.g. {folder!r}")
        if self.run_dir is not None and path.resolve() == self.run_dir.resolve():
            return path
        check_new_run_dir(path)
        if self.run_dir is None:
            return self.save_policy(path)
        with claim_run_dir(path) as run_dir:
            shutil.copytree(self.run_dir, run_dir, dirs_exist_ok=True,
                            ignore=shutil.ignore_patterns(LOCK))
        return path

    @_python_errors
    def save_policy(self, path: str | Path) -> Path:
        """Write the current policy (mid-training too: the callbacks' saves) as a run directory
        `Model.load` and `xlvin evaluate` read: its config and weights (with `num_timesteps`) only.
        `path`: a new or
        empty folder, or one `save_policy` wrote before (overwritten)."""
        path = Path(path)
        if not is_saved_policy(path):
            check_new_run_dir(path)
        policy = self._policy()
        with claim_run_dir(path) as run_dir:
            write_json(run_dir / CONFIG, self.config.to_json())
            save_weights(run_dir / MODEL, policy, weights_metadata(
                self.config, self._executor_metadata(), self.spaces,
                num_timesteps=self.num_timesteps))
        return path

    def _executor_metadata(self) -> dict[str, Any] | None:
        """The description of the policy's executor (its file's header; None without one)."""
        t = self.config.train
        if self._executor_meta is None and agent_spec(t.agent).executor:
            self._executor_meta = read_executor_meta(executor_file(t.executor, t, progress=True))
        return self._executor_meta

    @classmethod
    @_python_errors
    def load(
        cls, path: str | Path, env: EnvLike | None = None, device: str = "cpu", *,
        gym_packages: Iterable[str] = (), env_wrappers: Iterable[str | Callable[..., gym.Env]] = (),
        **sb3: Any,
    ) -> "Model":
        """The model of a finished run directory (written by `save` or `xlvin train`), on the CPU.
        Nothing in it is imported or run, and no env is needed to `predict`: the run stores its
        observation and action spaces. `evaluate` and `learn` make the run's env: one from
        modules the run names needs `gym_packages=` (or those modules imported first); one the
        API registered from a callable or an instance in the training process needs `env=`
        here (the env, or a callable that makes it); one trained in wrappers needs them named
        (`env_wrappers=`, as the run records them, or given so earlier in this process): a
        wrapper is never applied because the run's files name it. `device`: where the policy
        goes (cpu, cuda, cuda:N, or "auto" as Stable-Baselines3's); other SB3 keyword arguments
        (`custom_objects`, `print_system_info`, `force_reset`) are taken and unused."""
        unknown = set(sb3) - {"custom_objects", "print_system_info", "force_reset"}
        if unknown:
            name = sorted(unknown)[0]
            close = close_match(name, ["env", "device", "gym_packages", "env_wrappers"])
            raise UserError(f"load(): unknown argument {name!r}"
                            f"{f' (did you mean {close}?)' if close else ''}")
        device = resolve_device(device)
        check_device(device)
        import_gym_packages(list(gym_packages))
        import_env_wrappers([wrapper_spec(w) for w in env_wrappers])
        path = Path(path)
        agent, cfg, spaces = read_run(path)
        model = cls._class_for(cfg.train.agent, str(path)).from_config(on_cpu(cfg), spaces)
        if device != "cpu":
            model.config = dataclasses.replace(model.config, train=dataclasses.replace(
                model.config.train, device=device))
            agent = agent.to(device)
        model.policy, model.run_dir = agent, path
        metadata = read_metadata(path / MODEL)
        model._executor_meta = metadata.get("executor")
        steps = metadata.get("num_timesteps")  # a `save_policy` save, which has no summary
        if type(steps) is int and steps >= 0:
            model._num_timesteps = steps
        if (path / SUMMARY).is_file():
            model.summary = read_sealed(path / SUMMARY, path)
            with reading_results(path / SUMMARY):
                model._num_timesteps = int(model.summary["ppo"]["env_steps"])
        if env is not None:
            model._use_env(env)
        return model


class XLVIN(Model):
    """XLVIN (Deac et al. 2020): the executed latent value iteration network."""

    agent = "xlvin"


class PPO(Model):
    """The paper's PPO baseline: XLVIN's encoder and heads without tree or executor."""

    agent = "ppo"


class ATreeC(Model):
    """ATreeC (Farquhar et al. 2018) trained with the PPO loss."""

    agent = "atreec"


MODELS: dict[str, type[Model]] = {m.agent: m for m in (XLVIN, PPO, ATreeC) if m.agent}
