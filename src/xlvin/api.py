"""The Python API, in the shape of Stable-Baselines3:

    from xlvin import XLVIN
    model = XLVIN("CartPole-v1", depth=2, seed=0)
    model.learn(total_steps=50_000)
    model.save("runs/cp")
    action, value = model.predict(obs, deterministic=True)
    model = XLVIN.load("runs/cp")
    model.evaluate(episodes=100)

Every option of `xlvin train` is a keyword argument of the same name (`--total-steps` is
`total_steps=`, `--transe-epochs` is `transe_epochs=`); `learn` is the run of `xlvin train`
(progress bar, TensorBoard, checkpoints, `resume=True`), `save` writes the run directory `xlvin
evaluate` reads, and `load` reads the ones `xlvin train` writes. The command line is a thin layer
over this module.
"""

import copy
import re
import shutil
import tempfile
import warnings
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any, ClassVar

import gymnasium as gym
import numpy as np
import torch

from xlvin.config import close_match, from_dict, load_json, to_dict
from xlvin.envs.packages import import_gym_packages
from xlvin.errors import UserError
from xlvin.io.run_dir import (
    LOCK,
    MODEL,
    SUMMARY,
    check_new_run_dir,
    claim_run_dir,
    create_run_dir,
    read_json_object,
)
from xlvin.io.weights import save_weights
from xlvin.nn.policy import ActorCritic
from xlvin.process import seed_everything
from xlvin.train.agents import agent_spec, build_agent, expand_agent
from xlvin.train.collect import policy_device
from xlvin.train.pretrained import executor_file, load_executor_processor
from xlvin.train.run import evaluate_agent, load_run, train_run
from xlvin.train.run_config import (
    MAX_SEED,
    SECTIONS,
    RunConfig,
    check_run,
    on_cpu,
    option_names,
    whole_rollouts,
)

#: The first seed of `evaluate` (and `xlvin evaluate`): far from every training seed.
EVAL_SEED = 1_000_000
#: An environment as the API takes it: an id, an instance, a callable that makes one (a class or
#: a function), or a vector env.
EnvLike = str | gym.Env | gym.vector.VectorEnv | Callable[..., gym.Env]
#: Keys of a vector env's spec that describe the vectorisation, not the environment.
VECTOR_KEYS = ("max_episode_steps", "num_envs", "vectorization_mode", "vector_kwargs", "wrappers")


def with_options(cfg: RunConfig, options: dict[str, Any], source: str) -> RunConfig:
    """`cfg` with `options` (Python names of the command line's flags) set, every value checked
    as a config file's is; one UserError for an unknown name or a bad value."""
    known = option_names()
    options = expand_agent(options)  # agent="xlvin-cp": agent xlvin, executor cartpole
    unknown = [name for name in options if name not in known]
    if unknown:
        close = close_match(unknown[0], known)
        hint = f" (did you mean {close}?)" if close else ""
        raise UserError(f"{source}: unknown option {unknown[0]!r}{hint}; the options are those of "
                        "`xlvin train --help`, dashes as underscores")
    sections = {}
    for section, cls, _ in SECTIONS:
        given = {f: options[n] for n, (s, f) in known.items() if s == section and n in options}
        current = getattr(cfg, section)
        sections[section] = from_dict(cls, {**to_dict(current), **given}, source) if given else current
    return RunConfig(**sections)


def _registered_id(make: Callable[..., gym.Env]) -> str:
    """Register `make` (a class or function that makes the env) with gymnasium under
    `api/<module>.<name>` and return that id (the same in every process for the same callable)."""
    module = getattr(make, "__module__", None) or "env"
    name = getattr(make, "__qualname__", None) or type(make).__qualname__
    env_id = "api/" + re.sub(r"[^\w.-]", "_", f"{module}.{name}")
    if env_id not in gym.registry or gym.registry[env_id].entry_point is not make:
        gym.registry.pop(env_id, None)  # a new callable of the same name replaces the old one
        gym.register(env_id, entry_point=make, disable_env_checker=True)
    return env_id


def _spec_kwargs(spec: gym.envs.registration.EnvSpec) -> dict[str, Any]:
    """The keyword arguments `spec` was made with beyond its registration's defaults."""
    registered = gym.registry[spec.id].kwargs
    return {k: v for k, v in spec.kwargs.items()
            if k not in VECTOR_KEYS and (k not in registered or registered[k] != v)}


def resolve_env(env: EnvLike, env_kwargs: dict[str, Any] | None) -> tuple[str, dict[str, Any], int | None]:
    """(gymnasium id, keyword arguments, number of envs or None) of an environment as the API
    takes it. Made envs are described by their spec (id and keyword arguments: the run remakes
    them, seeded, so that it can checkpoint and resume them exactly); an env without one, or
    with wrappers added after `gym.make`, is registered as a factory of copies of it; a callable
    is registered under `api/<module>.<name>`."""
    kwargs = dict(env_kwargs or {})
    if isinstance(env, str):
        return env, kwargs, None
    if isinstance(env, gym.vector.VectorEnv):
        spec = env.spec
        if spec is not None and spec.id in gym.registry:
            return spec.id, {**_spec_kwargs(spec), **kwargs}, env.num_envs
        makers = getattr(env, "env_fns", None)
        if makers:
            return _registered_id(makers[0]), kwargs, env.num_envs
        raise UserError(f"a {type(env).__name__} without a spec or env_fns: pass the env's id or "
                        "a function that makes one env, and num_envs=")
    if isinstance(env, gym.Env):
        spec = env.spec
        if spec is not None and spec.id in gym.registry and not spec.additional_wrappers:
            return spec.id, {**_spec_kwargs(spec), **kwargs}, None
        if kwargs:
            raise UserError("env_kwargs apply to an env id or a callable that makes the env, not "
                            f"to a {type(env).__name__} instance made without gym.make")

        def copies(**_: Any) -> gym.Env:
            return copy.deepcopy(env)

        copies.__module__, copies.__qualname__ = type(env).__module__, type(env).__qualname__
        return _registered_id(copies), kwargs, None
    if callable(env):
        return _registered_id(env), kwargs, None
    raise UserError(f"env must be an id, a gymnasium Env, a callable that makes one or a vector "
                    f"env, got {type(env).__name__}")


def check_evaluation(episodes: int, seed: int) -> None:
    """Refuse an evaluation of no episodes, or seeds outside [0, MAX_SEED]."""
    if episodes <= 0:
        raise UserError(f"--episodes must be > 0, got {episodes}")
    if not 0 <= seed <= MAX_SEED:
        raise UserError(f"--seed must be in [0, {MAX_SEED}], got {seed}")


class Model:
    """An agent of the agent registry trained with PPO (`agent=` picks it; `XLVIN`, `PPO` and
    `ATreeC` fix it). `model.policy` is the `ActorCritic` network, `model.config` the run's
    `RunConfig`, `model.run_dir` the run directory once it has learned or was loaded."""

    agent: ClassVar[str | None] = None

    def __init__(
        self,
        env: EnvLike | None = None,
        *,
        env_kwargs: dict[str, Any] | None = None,
        gym_packages: Iterable[str] = (),
        config: RunConfig | str | Path | None = None,
        **options: Any,
    ) -> None:
        """env: an id, a `gym.Env`, a callable that makes one, or a vector env (its number of
        envs becomes `num_envs`); env_kwargs: the env's keyword arguments; gym_packages: modules
        to import that register envs (recorded in the run); config: a `RunConfig` or a JSON file
        as `xlvin train --config` reads; options: any option of `xlvin train`, by its name."""
        source = f"{type(self).__name__}()"
        import_gym_packages(list(gym_packages))
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
        if env is not None or env_kwargs is not None:
            env_id, kwargs, num_envs = resolve_env(env or cfg.train.env, env_kwargs)
            options.update(env=env_id, env_kwargs=kwargs)
            if num_envs is not None and options.setdefault("num_envs", num_envs) != num_envs:
                raise UserError(f"{source}: num_envs={options['num_envs']} but the vector env "
                                    f"has {num_envs}")
        self._setup(with_options(cfg, options, source))

    def _setup(self, cfg: RunConfig) -> None:
        """Check `cfg` as `xlvin train` does (before anything is built or written)."""
        self.config = cfg
        self.spaces, self.architecture = check_run(cfg)
        self.policy: ActorCritic | None = None
        self.run_dir: Path | None = None
        self.summary: dict[str, Any] | None = None
        self._executor_meta: dict[str, Any] | None = None
        self._learned = False
        self._generator = torch.Generator().manual_seed(cfg.train.seed)

    @classmethod
    def from_config(cls, cfg: RunConfig) -> "Model":
        """The model of a `RunConfig` (the class of its agent when it has one: `XLVIN`, ...).
        Imports nothing: the envs of `cfg.train.gym_packages` must be imported already."""
        model_cls = cls._class_for(cfg.train.agent, "this config")
        model = model_cls.__new__(model_cls)
        model._setup(cfg)
        return model

    @classmethod
    def _class_for(cls, agent: str, what: str) -> type["Model"]:
        if cls.agent is not None and agent != cls.agent:
            right = MODELS.get(agent, Model).__name__
            raise UserError(f"{what} is a {agent} run; use {right} (or xlvin.Model), not "
                            f"{cls.__name__}")
        return cls if cls is not Model else MODELS.get(agent, Model)

    def learn(
        self,
        total_steps: int | None = None,
        *,
        out: str | Path | None = None,
        resume: bool = False,
        progress: bool = True,
    ) -> "Model":
        """Train as `xlvin train` does: pre-training (its progress shown even with
        progress=False: it can take minutes), PPO, checkpoints, TensorBoard under `out/tb`, the
        progress bar, then the final weights and summary. `total_steps` sets `total_steps`
        (online protocol); a new run rounds it up to whole rollouts, with a warning unless it
        is the default; `out` is the run directory (a new temporary folder when None:
        `model.run_dir`); `resume=True` continues the unfinished run in `out` exactly."""
        if self._learned:
            raise UserError("this model has learned already: a run trains once (make a new model, "
                            "or learn(out=DIR, resume=True) on a new model to continue one)")
        cfg = self.config
        if total_steps is not None:
            cfg = with_options(cfg, {"total_steps": total_steps}, "learn()")
        if not resume:  # a run keeps the total it started with
            cfg, rounded = whole_rollouts(cfg)
            if rounded:
                warnings.warn(f"total_steps {rounded}", stacklevel=2)
        if out is None:
            if resume:
                raise UserError("learn(resume=True) needs out=DIR, the run directory to continue")
            out = Path(tempfile.mkdtemp(prefix="xlvin-")) / "run"
        self.policy, self.summary = train_run(cfg, Path(out), progress=progress, resume=resume)
        self.config, self.run_dir, self._learned = cfg, Path(out), True
        return self

    def _policy(self) -> ActorCritic:
        """The policy network; before `learn`, the initial one the run would start from."""
        if self.policy is None:
            t = self.config.train
            processor = None
            if agent_spec(t.agent).executor:
                processor, self._executor_meta = load_executor_processor(executor_file(t.executor, t))
            seed_everything(t.seed)
            self.policy = build_agent(self.architecture, self.spaces, processor).to(t.device)
        return self.policy

    def predict(self, obs: Any, deterministic: bool = True) -> tuple[np.ndarray, np.ndarray]:
        """(action, value) of one observation, or (actions [N], values [N]) of a batch [N, ...],
        NumPy or torch: the greedy action when `deterministic`, else one sampled from pi(.|s)."""
        policy = self._policy()
        x = obs.detach().cpu() if isinstance(obs, torch.Tensor) else torch.as_tensor(np.asarray(obs))
        shape = self.spaces.obs_shape
        single = tuple(x.shape) == shape
        if not single and tuple(x.shape[1:]) != shape:
            raise UserError(f"predict: an observation has shape {list(shape)} (a batch [N, "
                            f"{', '.join(map(str, shape))}]), got {list(x.shape)}")
        batch = x.unsqueeze(0) if single else x
        training = policy.training
        policy.eval()
        try:
            with torch.no_grad():
                logits, values = policy(batch.to(policy_device(policy)))
        finally:
            policy.train(training)
        logits, values = logits.cpu(), values.cpu()
        if deterministic:
            actions = logits.argmax(-1)
        else:
            actions = torch.multinomial(logits.softmax(-1), 1, generator=self._generator)[:, 0]
        if single:
            return actions[0].numpy(), values[0].numpy()
        return actions.numpy(), values.numpy()

    def evaluate(
        self, episodes: int = 100, seed: int = EVAL_SEED, deterministic: bool = True
    ) -> dict[str, Any]:
        """Return mean, std and every return over `episodes` fresh episodes seeded seed, seed + 1,
        ...: the numbers `xlvin evaluate` prints."""
        check_evaluation(episodes, seed)
        return evaluate_agent(self._policy(), self.config, episodes, seed, deterministic)

    def save(self, path: str | Path) -> Path:
        """Write the run directory `xlvin evaluate` reads to `path` (new, or an empty folder):
        after `learn` or `load`, a copy of the run's directory (metrics, TensorBoard and summary
        included); before, the config and the initial weights."""
        path = Path(path)
        if self.run_dir is not None and path.resolve() == self.run_dir.resolve():
            return path
        check_new_run_dir(path)
        policy = self._policy()
        with claim_run_dir(path) as run_dir:
            if self.run_dir is not None:
                shutil.copytree(self.run_dir, run_dir, dirs_exist_ok=True,
                                ignore=shutil.ignore_patterns(LOCK))
            else:
                create_run_dir(run_dir, self.config.to_json())
                save_weights(run_dir / MODEL, policy, {"config": self.config.to_json(),
                                                       "executor": self._executor_meta})
        return path

    @classmethod
    def load(cls, path: str | Path, *, gym_packages: Iterable[str] = ()) -> "Model":
        """The model of a finished run directory (written by `save` or `xlvin train`), on the CPU.
        Nothing in it is imported or run: an env from modules the run names needs
        `gym_packages=` (or those modules imported first)."""
        import_gym_packages(list(gym_packages))
        path = Path(path)
        agent, cfg = load_run(path)
        model = cls._class_for(cfg.train.agent, str(path)).from_config(on_cpu(cfg))
        model.policy, model.run_dir, model._learned = agent, path, True
        if (path / SUMMARY).is_file():
            model.summary = read_json_object(path / SUMMARY)
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
