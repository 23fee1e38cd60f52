"""Callbacks of `Model.learn(callback=...)`, in the shape of Stable-Baselines3's.

A callback subclasses `Callback` (`BaseCallback`, SB3's name) and overrides any of its hooks;
xlvin's get the model (its `policy` the network being trained, `num_timesteps` the env steps so
far) and return False to stop the run (anything else continues). `on_start(model)` is called
before training, to refuse bad settings in one UserError before anything is created.

    on_rollout(model)                after each round's data is collected
    on_update(model, metrics)        after each PPO update, with its logged metrics
    on_evaluation(model, result)     after each evaluation: the low-data protocol's own, and
                                     those of an `EvalCallback` (to the callbacks it holds)

Stable-Baselines3's hooks read the attributes SB3 gives them (`self.model`, `self.num_timesteps`,
`self.n_calls`, `self.locals`, `self.training_env`, `self.logger`, `self.verbose`):

    _init_callback(), _on_training_start()         before training
    _on_rollout_start(), _on_step() once per vector step, _on_rollout_end()
                                                   for each rollout of an online run, called
                                                   after it is collected (the loop has no hook
                                                   inside it; the policy does not change within
                                                   one), num_timesteps that of each step

`_on_training_end` is refused: code after `model.learn(...)` runs there. A stop takes effect at
the next update boundary (a stop in `_on_step` after that rollout's update, where SB3 stops at
once): the run saves a checkpoint there and finishes (weights and summary written); `learn(n)`
continues it later. Callbacks run with every random
generator of training saved and restored around them, so a callback that only observes (an
evaluation, a save) leaves the run's numbers as they are without it (`Hooks`, the training
loop's view of them). `model.logger` (`Logger`) records numbers of a callback's own.
"""

import contextlib
import io
import random
import re
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path
from typing import Any

import numpy as np
import torch

from xlvin.errors import UserError
from xlvin.io.files import atomic_write_bytes
from xlvin.io.run_dir import LOCK
from xlvin.io.saves import is_save, owned_folder
from xlvin.run.protocols import protocol_of

#: Stable-Baselines3's hooks of a rollout's steps (online runs only).
STEP_HOOKS = ("_on_rollout_start", "_on_step", "_on_rollout_end")


class StepLocals(dict):
    """A callback's `self.locals`: what the loop gives (the model as "self", the step's index
    in its rollout as "n_steps"); a key it does not keep (SB3's per-step "infos", "dones",
    "rewards", ...) is one UserError saying how to see each step."""

    def __missing__(self, key: Any) -> Any:
        raise UserError(f"self.locals[{key!r}] is not kept: xlvin calls _on_step after each "
                        f"rollout is collected, self.locals holding {', '.join(sorted(self))}; "
                        "to see each step's data, wrap the env (env_wrappers=)")


def _give_one(what: str, sb3: str, ours: str) -> UserError:
    return UserError(f"{what}: {sb3}= (Stable-Baselines3's name) and {ours}= are one setting; "
                     "give one")


def _one(what: str, sb3_name: str, sb3: Any, ours_name: str, ours: Any) -> Any:
    """The value given by SB3's name or ours (None if neither); one UserError for both."""
    if sb3 is not None and ours is not None:
        raise _give_one(what, sb3_name, ours_name)
    return ours if sb3 is None else sb3


class Callback:
    """A callback that does nothing: override the hooks you need (module docstring), xlvin's
    or Stable-Baselines3's. `verbose`: 0 quiet, 1 info, 2 debug, as SB3's."""

    verbose = 0
    model: Any = None  # the model training, from `init_callback` on
    parent: "Callback | None" = None  # the EvalCallback holding this one
    n_calls = 0  # calls of `on_step`
    num_timesteps = 0  # the model's at the last event
    locals: dict[str, Any] = StepLocals()
    globals: dict[str, Any] = {}

    def __init__(self, verbose: int = 0) -> None:
        self.verbose = verbose
        self.locals = StepLocals()

    @property
    def training_env(self) -> Any:
        """`self.model.get_env()` (SB3's VecEnv of the run's env; `learn` steps envs of its
        own)."""
        return None if self.model is None else self.model.get_env()

    @property
    def logger(self) -> Any:
        """`self.model.logger`: `record(key, value)` logs with the next update's metrics."""
        return self.model.logger

    # --- xlvin's hooks -------------------------------------------------------------------

    def on_start(self, model: Any) -> None:
        """Before training: raise a UserError for settings that cannot work with `model`; then
        SB3's `_on_training_start`."""
        self.on_training_start({"self": model}, {})

    def on_rollout(self, model: Any) -> bool:
        return True

    def on_update(self, model: Any, metrics: dict[str, float]) -> bool:
        return True

    def on_evaluation(self, model: Any, result: dict[str, Any]) -> bool:
        return True

    # --- Stable-Baselines3's, as its algorithms call them --------------------------------

    def uses_steps(self) -> bool:
        """Whether this callback acts on SB3's step hooks (overrides one of `STEP_HOOKS`)."""
        return any(getattr(type(self), hook) is not getattr(Callback, hook)
                   for hook in STEP_HOOKS)

    def init_callback(self, model: Any) -> None:
        """Keep `model` and `_init_callback()`: a refusal there (a UserError) comes before
        anything is made. A `_on_training_end` is refused: xlvin calls none."""
        if hasattr(self, "_on_training_end") or hasattr(self, "on_training_end"):
            raise UserError(f"{type(self).__name__}._on_training_end is not called: learn() "
                            "returns when training ends; put that code after model.learn(...)")
        self.model = model
        self._init_callback()

    def on_training_start(self, locals_: dict[str, Any], globals_: dict[str, Any]) -> None:
        self.locals, self.globals = StepLocals(locals_), globals_
        self.num_timesteps = self.model.num_timesteps
        self._on_training_start()

    def on_rollout_start(self) -> None:
        self._on_rollout_start()

    def on_step(self) -> bool:
        """One vector step: count it, read num_timesteps, `_on_step()`; False stops."""
        self.n_calls += 1
        self.num_timesteps = self.model.num_timesteps
        return self._on_step() is not False

    def on_rollout_end(self) -> None:
        self.num_timesteps = self.model.num_timesteps
        self._on_rollout_end()

    def update_locals(self, locals_: dict[str, Any]) -> None:
        self.locals = StepLocals({**self.locals, **locals_})
        self.update_child_locals(locals_)

    def update_child_locals(self, locals_: dict[str, Any]) -> None:
        """Pass `locals_` on to the callbacks this one holds."""

    def _init_callback(self) -> None:
        """Before training, `self.model` set."""

    def _on_training_start(self) -> None:
        """Before the first rollout."""

    def _on_rollout_start(self) -> None:
        """Before a rollout's steps."""

    def _on_step(self) -> bool:
        """After each vector step (num_envs env steps); False stops the run."""
        return True

    def _on_rollout_end(self) -> None:
        """After a rollout's steps, before its update."""


#: Stable-Baselines3's name of `Callback`.
BaseCallback = Callback


class CallbackList(Callback):
    """Several callbacks, each hook called on all of them in order; any False stops the run
    (SB3's step hooks: every callback at every step, as SB3's CallbackList)."""

    def __init__(self, callbacks: Iterable[Callback]) -> None:
        super().__init__()
        self.callbacks = list(callbacks)

    def uses_steps(self) -> bool:
        return any(c.uses_steps() for c in self.callbacks)

    def on_start(self, model: Any) -> None:
        for callback in self.callbacks:
            callback.on_start(model)

    def on_rollout(self, model: Any) -> bool:
        return all([c.on_rollout(model) is not False for c in self.callbacks])

    def on_update(self, model: Any, metrics: dict[str, float]) -> bool:
        return all([c.on_update(model, metrics) is not False for c in self.callbacks])

    def on_evaluation(self, model: Any, result: dict[str, Any]) -> bool:
        return all([c.on_evaluation(model, result) is not False for c in self.callbacks])

    def _init_callback(self) -> None:
        for callback in self.callbacks:
            callback.init_callback(self.model)

    def _on_rollout_start(self) -> None:
        for callback in self.callbacks:
            callback.on_rollout_start()

    def _on_step(self) -> bool:
        return all([c.on_step() for c in self.callbacks])

    def _on_rollout_end(self) -> None:
        for callback in self.callbacks:
            callback.on_rollout_end()

    def update_child_locals(self, locals_: dict[str, Any]) -> None:
        for callback in self.callbacks:
            callback.update_locals(locals_)


class FunctionCallback(Callback):
    """A plain function as Stable-Baselines3's `learn` takes it, `callback(locals, globals) ->
    bool`: called after each rollout with locals {"self": model, "num_timesteps": ...} and
    globals {}; returning False stops the run (None or anything else continues)."""

    def __init__(self, function: Any) -> None:
        super().__init__()
        self.function = function

    def on_rollout(self, model: Any) -> bool:
        return self.function({"self": model, "num_timesteps": model.num_timesteps}, {}) is not False


def as_callback(callback: Callback | Iterable[Callback] | None) -> Callback | None:
    """`learn`'s callback argument as one Callback (a list becomes a CallbackList, a plain
    function `callback(locals, globals) -> bool` a `FunctionCallback`)."""
    if callback is None or isinstance(callback, Callback):
        return callback
    if callable(callback) and not isinstance(callback, type):
        return FunctionCallback(callback)
    if isinstance(callback, Iterable):
        callbacks = list(callback)
        if all(isinstance(c, Callback) for c in callbacks):
            return CallbackList(callbacks)
    raise UserError(f"callback must be an xlvin Callback, a list of them or a function "
                    f"callback(locals, globals) -> bool, got "
                    f"{type(callback).__name__}")


def _is_checkpoints(path: Path) -> bool:
    """A folder of `CheckpointCallback`'s saves only: `steps-N` saves, each unchanged."""
    return all(p.name == LOCK or (p.name.startswith("steps-") and p.name[6:].isdigit()
                                  and is_save(p)) for p in path.iterdir())


def _saves_named(pattern: re.Pattern[str]) -> Callable[[Path], bool]:
    """Whether a folder's entries named as `pattern` (SB3's checkpoints) are unchanged saves;
    the folder's other entries are left alone."""
    return lambda path: all(not pattern.fullmatch(p.name) or is_save(p) for p in path.iterdir())


def _positive(value: Any, what: str) -> int:
    if type(value) is not int or value <= 0:
        raise UserError(f"{what}, got {value!r}")
    return value


class _Periodic(Callback):
    """Acts every `every` env steps, on the first update of each new multiple (counted from the
    run's start); or, Stable-Baselines3's way, every `freq` calls of `_on_step`: every freq x
    num_envs env steps, within a rollout, with the policy that collects it."""

    def __init__(self, every: int | None, freq: int | None, what: str, freq_name: str,
                 verbose: int) -> None:
        super().__init__(verbose)
        _one(what, freq_name, freq, "every", every)
        self.every = None if every is None else _positive(
            every, f"{what}: every must be a positive number of env steps")
        self.freq = None if freq is None else _positive(
            freq, f"{what}: {freq_name} must be a positive number of calls of _on_step (one "
            "per vector step)")
        self.multiples: int | None = None  # of `every`, acted on (or passed before the first call)

    def uses_steps(self) -> bool:
        return self.freq is not None

    def due(self, model: Any) -> bool:
        if self.multiples is None:  # the first update this callback sees: before it, none due
            self.multiples = (model.num_timesteps - 1) // self.every
        if model.num_timesteps // self.every <= self.multiples:
            return False
        self.multiples = model.num_timesteps // self.every
        return True

    def on_update(self, model: Any, metrics: dict[str, float]) -> bool:
        return self.every is None or not self.due(model) or self.act(model)

    def _on_step(self) -> bool:
        return self.freq is None or self.n_calls % self.freq != 0 or self.act(self.model)

    def act(self, model: Any) -> bool:
        """Evaluate or save now; False stops the run."""
        raise NotImplementedError


class EvalCallback(_Periodic):
    """Evaluate the policy on `n_eval_episodes` (`episodes`, default 10) fresh episodes of
    `eval_env` (`env`: an id, an env or a callable that makes one: a separate env; None: the
    run's), seeded `seed` onwards as `Model.evaluate` does, greedily unless
    `deterministic=False`: every `eval_freq` calls of `_on_step` (SB3's: eval_freq x num_envs
    env steps), or every `every` env steps (default 10,000, at an update). Each result (mean,
    std, returns, lengths, `num_timesteps`) is appended to `evaluations`, logged (eval/mean_reward,
    eval/mean_ep_length) and, with `log_path`, written to log_path/evaluations.npz (SB3's
    timesteps, results, ep_lengths). The best policy so far (highest mean) is saved as a run
    directory `Model.load` reads (with its `num_timesteps`) in `best_model_save_path`/best_model
    or `best_model_path` (a new or empty folder, or an earlier best model, replaced). After a new
    best `callback_on_new_best` is stepped, after every evaluation `callback_after_eval` (SB3's
    children: their `_on_step`, `self.parent` this callback) and `callback` gets `on_evaluation`
    (e.g. `StopOnReward`); any False stops the run. Every argument but the env goes by keyword;
    `render=True` is refused, `warn` taken and unused (episodes are counted whole)."""

    def __init__(
        self, env: Any = None, *positional: Any, every: int | None = None,
        episodes: int | None = None, seed: int = 2_000_000,
        best_model_path: str | Path | None = None, callback: Callback | None = None,
        eval_env: Any = None, callback_on_new_best: Callback | None = None,
        callback_after_eval: Callback | None = None, n_eval_episodes: int | None = None,
        eval_freq: int | None = None, log_path: str | Path | None = None,
        best_model_save_path: str | Path | None = None, deterministic: bool = True,
        render: bool = False, verbose: int = 0, warn: bool = True,
    ) -> None:
        what = "EvalCallback"
        if positional:
            raise UserError(f"{what} takes the env first and the rest by keyword: eval_freq=, "
                            "n_eval_episodes=, callback_on_new_best=, ... (SB3's names) or "
                            "every=, episodes=, callback=, ...")
        if render:
            raise UserError(f"{what}(render=True): xlvin evaluates without drawing; give "
                            "render=False and watch the policy with the get_env() loop (an env "
                            "made with render_mode='human')")
        every = 10_000 if every is None and eval_freq is None else every
        super().__init__(every, eval_freq, what, "eval_freq", verbose)
        episodes = _one(what, "n_eval_episodes", n_eval_episodes, "episodes", episodes)
        self.episodes = 10 if episodes is None else _positive(
            episodes, f"{what}: n_eval_episodes must be > 0")
        self.env = _one(what, "eval_env", eval_env, "env", env)
        self.seed, self.deterministic = seed, deterministic
        self.callback = callback
        self.callback_on_new_best = callback_on_new_best
        self.callback_after_eval = callback_after_eval
        for child in self._children():
            child.parent = self
        best = _one(what, "best_model_save_path", best_model_save_path, "best_model_path",
                    best_model_path)
        if best_model_save_path is not None:
            best = Path(best_model_save_path) / "best_model"
        self.best_model_path = None if best is None else owned_folder(Path(best), what, is_save)
        self.log_path = None if log_path is None else Path(log_path) / "evaluations.npz"
        self.evaluations: list[dict[str, Any]] = []
        self.best_mean = float("-inf")

    def _children(self) -> list[Callback]:
        return [c for c in (self.callback, self.callback_on_new_best, self.callback_after_eval)
                if c is not None]

    @property
    def best_mean_reward(self) -> float:
        """SB3's name of `best_mean`: the highest mean return so far."""
        return self.best_mean

    @property
    def last_mean_reward(self) -> float:
        """The mean return of the last evaluation (-inf before the first)."""
        return self.evaluations[-1]["mean"] if self.evaluations else float("-inf")

    def _init_callback(self) -> None:
        self.model.check_evaluation_env(self.env)
        for child in self._children():
            child.init_callback(self.model)

    def on_start(self, model: Any) -> None:
        super().on_start(model)
        for child in self._children():
            child.on_start(model)

    def act(self, model: Any) -> bool:
        result = model.evaluate(self.episodes, self.seed, self.deterministic, env=self.env)
        result["num_timesteps"] = model.num_timesteps
        self.evaluations.append(result)
        model.logger.record("eval/mean_reward", result["mean"])
        model.logger.record("eval/mean_ep_length", float(np.mean(result["lengths"])))
        if self.log_path is not None:
            self._write_log()
        if self.verbose >= 1:
            print(f"EvalCallback: {model.num_timesteps} steps, mean return {result['mean']:.2f} "
                  f"+/- {result['std']:.2f} over {self.episodes} episodes")
        go_on = True
        if result["mean"] > self.best_mean:
            self.best_mean = result["mean"]
            if self.verbose >= 1:
                print("EvalCallback: new best mean return")
            if self.best_model_path is not None:
                model.save_policy(self.best_model_path)
            if self.callback_on_new_best is not None:
                go_on = self.callback_on_new_best.on_step()
        if self.callback_after_eval is not None:
            go_on = self.callback_after_eval.on_step() and go_on
        if self.callback is not None:
            go_on = self.callback.on_evaluation(model, result) is not False and go_on
        return go_on

    def _write_log(self) -> None:
        """evaluations.npz as SB3 writes it: timesteps [E], results and ep_lengths [E, episodes]."""
        data = io.BytesIO()
        np.savez(data, timesteps=np.array([e["num_timesteps"] for e in self.evaluations]),
                 results=np.array([e["returns"] for e in self.evaluations]),
                 ep_lengths=np.array([e["lengths"] for e in self.evaluations]))
        self.log_path.parent.mkdir(parents=True, exist_ok=True)
        atomic_write_bytes(self.log_path, data.getvalue())


class CheckpointCallback(_Periodic):
    """Save the policy as a run directory (which `Model.load` reads, with its num_timesteps):
    every `save_freq` calls of `_on_step` (SB3's: save_freq x num_envs env steps) as
    `save_path/<name_prefix>_<N>_steps`, an earlier save of that name replaced and the folder's
    other files left alone; or every `every` env steps (at an update) as `directory/steps-N`, a
    new or empty folder or one of earlier such saves. N: the env steps so far. Arguments go by
    keyword; `save_replay_buffer` and `save_vecnormalize` are taken and unused (PPO has no replay
    buffer; observation statistics are saved with the policy)."""

    def __init__(
        self, *positional: Any, every: int | None = None, directory: str | Path | None = None,
        save_freq: int | None = None, save_path: str | Path | None = None,
        name_prefix: str = "rl_model", save_replay_buffer: bool = False,
        save_vecnormalize: bool = False, verbose: int = 0,
    ) -> None:
        what = "CheckpointCallback"
        if positional or (every is None and save_freq is None):
            raise UserError(f"{what} takes its arguments by keyword: save_freq= and save_path= "
                            "(SB3's: every save_freq calls of _on_step, as "
                            "save_path/rl_model_N_steps), or every= and directory= (every N env "
                            "steps, as directory/steps-N)")
        super().__init__(every, save_freq, what, "save_freq", verbose)
        folder = _one(what, "save_path", save_path, "directory", directory)
        if folder is None:
            raise UserError(f"{what}: give save_path=, the folder of the saves")
        if save_path is None:
            self.name, own = "steps-{}", _is_checkpoints
        else:
            self.name = f"{name_prefix}_{{}}_steps"
            own = _saves_named(re.compile(re.escape(name_prefix) + r"_\d+_steps"))
        self.directory = owned_folder(Path(folder), what, own)
        self.saved: list[Path] = []

    def act(self, model: Any) -> bool:
        path = self.directory / self.name.format(model.num_timesteps)
        model.save_policy(path)
        self.saved.append(path)
        if self.verbose >= 2:
            print(f"CheckpointCallback: saved {path}")
        return True


class StopOnReward(Callback):
    """Stop the run once an evaluation's mean return reaches `threshold` (the low-data
    protocol's own evaluations, or inside `EvalCallback(callback=StopOnReward(...))`)."""

    def __init__(self, threshold: float) -> None:
        super().__init__()
        self.threshold = float(threshold)

    def on_evaluation(self, model: Any, result: dict[str, Any]) -> bool:
        return result["mean"] < self.threshold


class StopTrainingOnRewardThreshold(StopOnReward):
    """Stable-Baselines3's: inside an `EvalCallback` (`callback_on_new_best=` or
    `callback_after_eval=`), stop the run once the best mean return reaches `reward_threshold`
    (saying so with verbose=1); alone, refused before training, as SB3's."""

    def __init__(self, reward_threshold: float, verbose: int = 0) -> None:
        super().__init__(reward_threshold)
        self.reward_threshold, self.verbose = self.threshold, verbose

    def _init_callback(self) -> None:
        if self.parent is None:
            raise UserError("StopTrainingOnRewardThreshold acts inside an EvalCallback: "
                            "EvalCallback(eval_env, callback_on_new_best="
                            "StopTrainingOnRewardThreshold(...), eval_freq=...)")

    def _on_step(self) -> bool:
        best = self.parent.best_mean_reward
        if best >= self.reward_threshold and self.verbose >= 1:
            print(f"StopTrainingOnRewardThreshold: best mean return {best:.2f} reached "
                  f"{self.reward_threshold:.2f}; stopping")
        return best < self.reward_threshold


@contextlib.contextmanager
def rngs_kept() -> Iterator[None]:
    """Restore torch's, NumPy's and Python's global generators after the block."""
    numpy_state, python_state = np.random.get_state(), random.getstate()
    with torch.random.fork_rng(devices=[]):
        try:
            yield
        finally:
            np.random.set_state(numpy_state)
            random.setstate(python_state)


class Hooks:
    """The training loop's hooks over a user's `Callback`: the model shows the policy being
    trained and the steps so far, and the training's random generators are kept. Made before
    anything is created: the callback's `init_callback` refuses what cannot work then."""

    def __init__(self, model: Any, callback: Callback) -> None:
        self.model, self.callback = model, callback
        protocol = model.config.train.protocol
        if not protocol_of(model.config).in_env_steps and callback.uses_steps():
            raise UserError(f"SB3's step hooks (_on_step, _on_rollout_start, _on_rollout_end, "
                            f"eval_freq=, save_freq=) run in online runs, this one's protocol is "
                            f"{protocol!r}: use on_rollout(model) and on_update(model, metrics) "
                            "(every= of EvalCallback and CheckpointCallback)")
        callback.init_callback(model)

    def _call(self, policy: Any, result: Any, hook: Callable[..., Any], *args: Any) -> bool:
        self.model.policy, self.model._num_timesteps = policy, result.env_steps
        with rngs_kept():
            return hook(self.model, *args) is not False

    def on_rollout(self, policy: Any, result: Any) -> bool:
        return self._call(policy, result, self._rollout)

    def _rollout(self, model: Any) -> bool:
        stepped = not protocol_of(model.config).in_env_steps or self._steps(model)
        return self.callback.on_rollout(model) is not False and stepped

    def _steps(self, model: Any) -> bool:
        """SB3's rollout, told after it was collected (the policy is the one that collected
        it): `on_rollout_start`, `on_step` once per vector step, the model's num_timesteps that
        of the step, then `on_rollout_end`; a False from `on_step` ends it there."""
        steps, envs = model.config.ppo.num_steps, model.config.ppo.num_envs
        end, callback = model.num_timesteps, self.callback
        callback.on_rollout_start()
        try:
            for k in range(steps):
                model._num_timesteps = end - (steps - 1 - k) * envs
                callback.update_locals({"self": model, "n_steps": k})
                if not callback.on_step():
                    return False
        finally:
            model._num_timesteps = end
        callback.on_rollout_end()
        return True

    def on_update(self, policy: Any, result: Any, metrics: dict[str, float]) -> bool:
        return self._call(policy, result, self.callback.on_update, dict(metrics))

    def on_evaluation(self, policy: Any, result: Any, evaluation: dict[str, float]) -> bool:
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
