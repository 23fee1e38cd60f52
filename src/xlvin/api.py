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

import dataclasses
import functools
import warnings
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any, ClassVar

import gymnasium as gym
import numpy as np
import torch
from gymnasium.vector import AutoresetMode

from xlvin.api_options import (
    EVAL_SEED,
    check_evaluation,
    learn_arguments,
    load_arguments,
    model_config,
)
from xlvin.api_policy import (
    act,
    executor_metadata,
    initial_policy,
    set_parameters,
    weights_digest,
)
from xlvin.api_runs import learn_run, on_env, stopped_run, stopped_steps
from xlvin.callbacks import Callback, Hooks, Logger, as_callback
from xlvin.envs.given import EnvLike, check_run_env, register_as
from xlvin.envs.sb3_vec import SB3VecEnv
from xlvin.envs.spaces import Spaces, recorded_spaces
from xlvin.errors import FieldError, UserError
from xlvin.io.run_dir import MODEL, require_resumable
from xlvin.io.saves import (
    forget_save,
    read_progress,
    refuse_file_name,
    write_policy,
    write_run_copy,
    writing_save,
)
from xlvin.nn.policy import ActorCritic
from xlvin.process import GeneratorStates
from xlvin.ppo.collect import make_vector_env
from xlvin.ppo.session import deadline_after
from xlvin.run.architecture import made_env
from xlvin.run.checks import check_run
from xlvin.run.config import RunConfig, on_cpu, option_names
from xlvin.run.training import (
    StartingPolicy,
    evaluate_agent,
    read_run,
    train_run,
    weights_metadata,
)
from xlvin.signals import interrupt_deferred

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


class Model:
    """An agent of the agent registry trained with PPO (`agent=` picks it; `XLVIN`, `PPO` and
    `ATreeC` fix it). `model.policy` is the `ActorCritic` network, `model.config` the run's
    `RunConfig`, `model.run_dir` the run directory once it has learned or was loaded,
    `model.num_timesteps` the env steps it has trained, `model.env` (`get_env()`) its envs as
    Stable-Baselines3's VecEnv."""

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
        self._setup(model_config(self.agent, env, sb3_env, env_kwargs, gym_packages, env_wrappers,
                                 config, options, f"{type(self).__name__}()"))
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
        self._net: ActorCritic | None = None
        self._built: GeneratorStates | None = None  # the generators just after it was built
        self._executor_seconds = 0.0  # what making or loading its executor took
        self._held: str | None = None  # the digest of the weights the model's run left
        self.run_dir: Path | None = None
        self.summary: dict[str, Any] | None = None
        self._executor_meta: dict[str, Any] | None = None
        self._num_timesteps = 0
        self._env: SB3VecEnv | None = None
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
    def policy(self) -> ActorCritic:
        """The policy network the model holds, which `learn` trains in place (built on first
        use, as the run would start: seeded, its executor loaded); set its weights, or edit
        it, before `learn` and that is what trains."""
        return self._policy()

    @policy.setter
    def policy(self, net: ActorCritic) -> None:
        self._net = net

    @property
    def num_timesteps(self) -> int:
        """The env steps the model has trained (all envs, autoreset steps included): 0 before
        `learn`, live inside a callback."""
        return self._num_timesteps

    @property
    def env(self) -> SB3VecEnv | None:
        """`get_env()`."""
        return self.get_env()

    def get_env(self) -> SB3VecEnv | None:
        """`num_envs` envs of the run's env as Stable-Baselines3's VecEnv (`reset()` returns the
        observations, `step` 4 values with autoreset; `xlvin.envs.sb3_vec`), made on first use
        and kept; its `vector_env` is the gymnasium vector env. None where the run's env cannot
        be made (`Model.load(env=...)`)."""
        if self._env is None:
            t = self.config.train
            try:
                self._run_env_available()
            except UserError:
                return None
            self._env = SB3VecEnv(make_vector_env(
                made_env(t), self.config.ppo.num_envs, AutoresetMode.SAME_STEP,
                record_stats=False, env_kwargs=t.env_kwargs))
        return self._env

    @_python_errors
    def set_env(self, env: EnvLike) -> None:
        """Train on `env` from now on (Stable-Baselines3's `set_env`): it must have the model's
        spaces. Before `learn`, it becomes the run's env (a vector env's size its num_envs);
        after `learn` or `load`, the run continues on it as `load(path, env=env)` takes it."""
        if self.run_dir is not None:
            self._use_env(env)
        else:
            self.config = on_env(self.config, self.spaces, env, vector_size=True)
        if self._env is not None:
            self._env.close()
        self._env = None

    @property
    def observation_space(self) -> gym.Space:
        """One env's observation space as read (its env's; else a Box of the recorded shape)."""
        env = self.get_env()
        return env.observation_space if env is not None else recorded_spaces(self.spaces)[0]

    @property
    def action_space(self) -> gym.Space:
        """One env's action space (its env's; where that cannot be made here, the recorded)."""
        env = self.get_env()
        return env.action_space if env is not None else recorded_spaces(self.spaces)[1]

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
        set_parameters(self._policy(), load_path_or_dict, exact_match)

    @_python_errors
    def learn(
        self,
        total_steps: int | None = None,
        *,
        out: str | Path | None = None,
        resume: bool = False,
        progress: bool | None = None,
        callback: Callback | Iterable[Callback] | Callable[..., Any] | None = None,
        deadline_minutes: float | None = None,
        **sb3: Any,
    ) -> "Model":
        """Train as `xlvin train` does: pre-training (its progress shown even with
        progress=False: it can take minutes), PPO, checkpoints, TensorBoard under `out/tb`, the
        progress bar, then the final weights and summary. `total_steps` (online protocol) is
        rounded up to whole rollouts (num_envs x num_steps), with a warning unless it is the
        default; `out`: the run directory (None: a temporary one, `model.run_dir`, removed with
        the model; `save(path)` keeps it); `resume=True` continues the unfinished run in `out`
        exactly, or a finished one to a larger `total_steps`.

        Again (or after `load`), `learn(n)` continues the model's run in place for n more env
        steps, as Stable-Baselines3's `learn(n, reset_num_timesteps=False)` (online runs only):
        metrics, TensorBoard and checkpoints carry on, `num_timesteps` counts on, and
        `config.ppo.total_steps` is the new total; the learning rate's schedule then runs over it
        (docs/architecture.md, "Continuing": with `anneal_lr=False`, learn(n) twice is learn(2 n)).

        `deadline_minutes`: stop at the first update boundary that many minutes from the call,
        with a checkpoint (`summary["stopped_at_deadline"]`; no final weights are written);
        `learn(out=run_dir, resume=True)` continues it exactly, as `xlvin train
        --deadline-minutes`.

        `callback`: a `xlvin.callbacks.Callback` (or a list) called after each rollout, update
        and evaluation, returning False to finish the run at the next update boundary (with a
        checkpoint to continue from); or a function `callback(locals, globals) -> bool` called
        after each rollout, as Stable-Baselines3's. Its other names (docs/api.md):
        `total_timesteps=`, `progress_bar=` (default: on, off with `verbose=0`), `log_interval=`
        (unused), `reset_num_timesteps=False` (True is refused on a model that has trained)."""
        total_steps, progress = learn_arguments(
            total_steps, progress, sb3, None if self.run_dir is None else self.num_timesteps,
            self.verbose)
        deadline = deadline_after(deadline_minutes)
        self._run_env_available()  # what trains has the spaces the model records
        if resume and out is not None:
            require_resumable(out)  # before the policy is built (its executor cached)
        hooks = None if callback is None else Hooks(self, as_callback(callback))
        if hooks is not None:
            hooks.callback.on_start(self)
        policy = self._policy()
        changed = weights_digest(policy) != self._held
        run_dir = self.run_dir
        if run_dir is not None and not resume and (changed or stopped_steps(run_dir) is None):
            if changed:  # a run's checkpoint would put back the weights it left
                warnings.warn("the policy's weights changed since its run: learn() starts a new "
                              "run from them (a fresh optimizer, num_timesteps from 0)",
                              stacklevel=3)
            run_dir = None
        cfg, run_dir, resume, rounded = learn_run(
            self.config, run_dir, self.num_timesteps if run_dir else 0, total_steps, out,
            resume, self)
        if rounded:
            warnings.warn(f"total_steps {rounded}", stacklevel=3)
        if resume:
            forget_save(run_dir)  # a saved run trained on is a run of its own
        start = {k: v.detach().clone() for k, v in policy.state_dict().items()}
        try:
            with interrupt_deferred():
                initialised = changed or self.run_dir is not None
                start_from = StartingPolicy(policy, None if initialised else self._built,
                                            initialised, self._executor_seconds)
                self._executor_seconds = 0.0  # counted once, in the first run
                _, self.summary = train_run(cfg, run_dir, progress=progress, resume=resume,
                                            deadline=deadline, hooks=hooks, starting=start_from)
        except BaseException:  # stopped (Ctrl-C, a callback's error): held as its run left it
            self._hold_stopped(cfg, run_dir, start)
            raise
        self.config, self.run_dir = cfg, run_dir
        self._executor_meta = self.summary["executor"]
        self._num_timesteps = self.summary["ppo"]["env_steps"]
        self._held = weights_digest(policy)
        return self

    def _hold_stopped(self, cfg: RunConfig, run_dir: Path,
                      start: dict[str, torch.Tensor]) -> None:
        """After `learn` stopped early: the policy as the run's checkpoint holds it (the last
        update boundary it reached: Ctrl-C waits for one) and `num_timesteps` matching, so that
        `learn(n)` continues it exactly and `save` writes what `load` reads; without a
        checkpoint, the policy `learn` started from."""
        try:
            stopped = stopped_run(run_dir)
            steps = None if stopped is None else stopped[1].load_policy(self.policy)
        except UserError:  # refused before training (a checkpoint of another run)
            steps = None
        if steps is None:
            self.policy.load_state_dict(start)
            return
        self.config, self.run_dir, self._num_timesteps = cfg, run_dir, steps
        self._held = weights_digest(self.policy)

    def _policy(self) -> ActorCritic:
        """The policy network; before `learn`, the initial one the run would start from."""
        if self._net is None:
            start, self._executor_meta = initial_policy(self.config, self.architecture,
                                                        self.spaces)
            self._net, self._built = start.agent, start.generators
            self._executor_seconds = start.executor_seconds
            self._held = weights_digest(self._net)
        return self._net

    @_python_errors
    def predict(
        self, observation: Any, state: Any = None, episode_start: Any = None,
        deterministic: bool = False,
    ) -> tuple[np.ndarray, None]:
        """(action, state) of one observation, or (actions [N], state) of a batch [N, ...], NumPy
        or torch (Dict ones as the env gives them; a dict of arrays [N, ...] for a batch), as
        Stable-Baselines3's `predict`: sampled from pi(.|s) by default, its mode with
        `deterministic=True`; Box actions clipped to the bounds, observations normalised with the
        model's frozen statistics where it has them. No recurrent state: `state` is returned as
        given (None), `episode_start` taken and unused. Needs no env; values: `predict_values`."""
        actions, _ = act(self._policy(), self.spaces, observation, deterministic,
                         self._generator, "predict")
        return actions, state

    @_python_errors
    def predict_values(self, observation: Any) -> np.ndarray:
        """The critic's value V(s) of one observation (a 0-d array), or values [N] of a batch,
        as `predict` reads them (what `predict` returned second before; CHANGELOG.md)."""
        return act(self._policy(), self.spaces, observation, True, self._generator,
                   "predict_values")[1]

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
        """Refuse a run's env this process cannot make, or without the model's spaces."""
        t = self.config.train
        check_run_env(t.env, t.env_kwargs, t.gym_packages, t.env_wrappers, self.spaces)

    def _evaluation_config(self, env: EnvLike | None) -> RunConfig:
        """The config evaluations run under: the run's, or with `env` (of the model's spaces)."""
        if env is None:
            self._run_env_available()
            return self.config
        return on_env(self.config, self.spaces, env, vector_size=False)

    def _use_env(self, env: EnvLike) -> None:
        """Make the run's env with `env` in this process (`load(env=...)`, `register_as`)."""
        register_as(env, self.config.train.env, self.config.train.env_kwargs)
        self._run_env_available()

    @_python_errors
    def save(self, path: str | Path) -> Path:
        """Write the run directory `xlvin evaluate` reads to `path` (a new or empty folder, or an
        earlier save with nothing in it changed, which the new one replaces whole, in one step;
        not a file name such as model.zip, nor a folder holding anything a save did not write,
        which is refused and kept as it is): after `learn` or `load`, a copy of the run's
        directory (metrics, TensorBoard and summary included); before, the config and the
        initial weights."""
        path, what = Path(path), f"save({str(path)!r})"
        refuse_file_name(path, what)
        if self.run_dir is not None and path.resolve() == self.run_dir.resolve():
            return path
        run_dir, policy = self.run_dir, self._policy()  # built before anything is written
        whole_run = (run_dir is not None and (run_dir / MODEL).is_file()
                     and weights_digest(policy) == self._held)
        with writing_save(path, what) as folder:
            if whole_run:
                write_run_copy(run_dir, folder)
            else:  # before learn, stopped early, or weights set since: what the model holds
                self._write_policy(folder, policy)
        return path

    @_python_errors
    def save_policy(self, path: str | Path) -> Path:
        """Write the current policy (mid-training too: the callbacks' saves) as a run directory
        `Model.load` and `xlvin evaluate` read: its config and weights (with `num_timesteps`)
        only. `path`: a new or empty folder, or an earlier save (replaced whole, in one step)."""
        path = Path(path)
        policy = self._policy()
        with writing_save(path, f"save_policy({str(path)!r})") as folder:
            self._write_policy(folder, policy)
        return path

    def _write_policy(self, folder: Path, policy: ActorCritic) -> None:
        """Write `policy` as a saved policy, its executor's description read where not known."""
        if self._executor_meta is None:
            self._executor_meta = executor_metadata(self.config.train)
        write_policy(folder, self.config.to_json(), policy, weights_metadata(
            self.config, self._executor_meta, self.spaces, num_timesteps=self.num_timesteps))

    @classmethod
    @_python_errors
    def load(
        cls, path: str | Path, env: EnvLike | None = None, device: str = "cpu", *,
        gym_packages: Iterable[str] = (), env_wrappers: Iterable[str | Callable[..., gym.Env]] = (),
        **sb3: Any,
    ) -> "Model":
        """The model of a run directory (`save`'s or `xlvin train`'s): a finished run's, or one
        stopped early (Ctrl-C, a deadline) as its checkpoint holds it, which `learn(n)` continues
        exactly, as it continues a model `learn` stopped. Nothing in it is imported or run, and
        `predict` needs no env for a finished run (it stores its spaces; a stopped run's spaces
        are its env's); `evaluate` and `learn` make the run's env: its modules need
        `gym_packages=` (or importing first), an env the API registered from a Python object in
        the training process `env=` (it, or a callable that makes it), its wrappers
        `env_wrappers=` (never applied because a file names them). `device`: cpu (the default),
        cuda, cuda:N or "auto"; Stable-Baselines3's `custom_objects`, `print_system_info` and
        `force_reset` are taken and unused."""
        device = load_arguments(device, gym_packages, env_wrappers, sb3)
        path = Path(path)
        stopped = stopped_run(path)
        if stopped is None:
            agent, cfg, spaces = read_run(path)
            model = cls._class_for(cfg.train.agent, str(path)).from_config(on_cpu(cfg), spaces)
            model.policy = agent
            model._executor_meta, model._num_timesteps, model.summary = read_progress(path)
        else:
            cfg, checkpoint = stopped
            model = cls._class_for(cfg.train.agent, str(path)).from_config(on_cpu(cfg))
            model._num_timesteps = checkpoint.load_policy(model.policy)
        if device != "cpu":
            model.config = dataclasses.replace(model.config, train=dataclasses.replace(
                model.config.train, device=device))
            model.policy = model.policy.to(device)
        model.run_dir = path
        model._held = weights_digest(model.policy)
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
