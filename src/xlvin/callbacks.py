"""Callbacks of `Model.learn(callback=...)`, in the shape of Stable-Baselines3's.

A callback subclasses `Callback` and overrides any of three hooks; each gets the model (its
`policy` the network being trained, `num_timesteps` the env steps so far) and returns False to
stop the run (anything else continues). `on_start(model)` is called before training, to refuse
bad settings in one UserError before anything is created.

    on_rollout(model)                after each round's data is collected
    on_update(model, metrics)        after each PPO update, with its logged metrics
    on_evaluation(model, result)     after each evaluation: the low-data protocol's own, and
                                     those of an `EvalCallback` (to the callbacks it holds)

A stop takes effect at the next update boundary: the run saves a checkpoint there and finishes
(weights and summary written); `learn(n)` continues it later. Callbacks run with every random
generator of training saved and restored around them, so a callback that only observes (an
evaluation, a save) leaves the run's numbers as they are without it (`Hooks`, the training
loop's view of them). `model.logger` (`Logger`) records numbers of a callback's own.
"""

import contextlib
import random
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path
from typing import Any

import numpy as np
import torch

from xlvin.errors import UserError
from xlvin.io.run_dir import LOCK
from xlvin.io.saves import is_save, owned_folder


class Callback:
    """A callback that does nothing: override the hooks you need."""

    def on_start(self, model: Any) -> None:
        """Before training: raise a UserError for settings that cannot work with `model`."""

    def on_rollout(self, model: Any) -> bool:
        return True

    def on_update(self, model: Any, metrics: dict[str, float]) -> bool:
        return True

    def on_evaluation(self, model: Any, result: dict[str, Any]) -> bool:
        return True


class CallbackList(Callback):
    """Several callbacks, each hook called on all of them in order; any False stops the run."""

    def __init__(self, callbacks: Iterable[Callback]) -> None:
        self.callbacks = list(callbacks)

    def on_start(self, model: Any) -> None:
        for callback in self.callbacks:
            callback.on_start(model)

    def on_rollout(self, model: Any) -> bool:
        return all([c.on_rollout(model) is not False for c in self.callbacks])

    def on_update(self, model: Any, metrics: dict[str, float]) -> bool:
        return all([c.on_update(model, metrics) is not False for c in self.callbacks])

    def on_evaluation(self, model: Any, result: dict[str, Any]) -> bool:
        return all([c.on_evaluation(model, result) is not False for c in self.callbacks])


class FunctionCallback(Callback):
    """A plain function as Stable-Baselines3's `learn` takes it, `callback(locals, globals) ->
    bool`: called after each rollout with locals {"self": model, "num_timesteps": ...} and
    globals {}; returning False stops the run (None or anything else continues)."""

    def __init__(self, function: Any) -> None:
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


def _check_every(every: int, what: str) -> int:
    if type(every) is not int or every <= 0:
        raise UserError(f"{what}: every must be a positive number of env steps, got {every!r}")
    return every


class _Periodic(Callback):
    """Acts on the first update of each new multiple of `every` env steps (counted from the
    run's start)."""

    def __init__(self, every: int, what: str) -> None:
        self.every = _check_every(every, what)
        self.multiples: int | None = None  # of `every`, acted on (or passed before the first call)

    def due(self, model: Any) -> bool:
        if self.multiples is None:  # the first update this callback sees: before it, none due
            self.multiples = (model.num_timesteps - 1) // self.every
        if model.num_timesteps // self.every <= self.multiples:
            return False
        self.multiples = model.num_timesteps // self.every
        return True


class EvalCallback(_Periodic):
    """Every `every` env steps, evaluate the policy greedily on `episodes` fresh episodes of
    `env` (an id, an env or a callable that makes one: a separate env; None: the run's), seeded
    `seed` onwards as `Model.evaluate` does. Each result (mean, std, returns, `num_timesteps`) is
    appended to `evaluations`; with `best_model_path`, the best policy so far (highest mean) is
    saved there as a run directory (`Model.load` reads it, with its `num_timesteps`; a new or
    empty folder, or an earlier best model, overwritten at each new best). `callback` (e.g. `StopOnReward`) gets `on_evaluation` after each
    evaluation; returning False stops the run."""

    def __init__(
        self, env: Any = None, every: int = 10_000, episodes: int = 10,
        seed: int = 2_000_000, best_model_path: str | Path | None = None,
        callback: Callback | None = None,
    ) -> None:
        super().__init__(every, "EvalCallback")
        if type(episodes) is not int or episodes <= 0:
            raise UserError(f"EvalCallback: episodes must be > 0, got {episodes!r}")
        self.env, self.episodes, self.seed, self.callback = env, episodes, seed, callback
        self.best_model_path = None if best_model_path is None else owned_folder(
            Path(best_model_path), "EvalCallback", is_save)
        self.evaluations: list[dict[str, Any]] = []
        self.best_mean = float("-inf")

    def on_start(self, model: Any) -> None:
        model.check_evaluation_env(self.env)
        if self.callback is not None:
            self.callback.on_start(model)

    def on_update(self, model: Any, metrics: dict[str, float]) -> bool:
        if not self.due(model):
            return True
        result = model.evaluate(self.episodes, self.seed, env=self.env)
        result["num_timesteps"] = model.num_timesteps
        self.evaluations.append(result)
        if result["mean"] > self.best_mean:
            self.best_mean = result["mean"]
            if self.best_model_path is not None:
                model.save_policy(self.best_model_path)
        return self.callback is None or self.callback.on_evaluation(model, result) is not False


class CheckpointCallback(_Periodic):
    """Every `every` env steps, save the policy as a run directory `directory/steps-N` (N: the
    env steps so far), which `Model.load` reads; a new or empty folder, or one of earlier saves
    (a save of the same N is overwritten)."""

    def __init__(self, every: int, directory: str | Path) -> None:
        super().__init__(every, "CheckpointCallback")
        self.directory = owned_folder(Path(directory), "CheckpointCallback", _is_checkpoints)
        self.saved: list[Path] = []

    def on_update(self, model: Any, metrics: dict[str, float]) -> bool:
        if self.due(model):
            path = self.directory / f"steps-{model.num_timesteps}"
            model.save_policy(path)
            self.saved.append(path)
        return True


class StopOnReward(Callback):
    """Stop the run once an evaluation's mean return reaches `threshold` (the low-data
    protocol's own evaluations, or inside `EvalCallback(callback=StopOnReward(...))`)."""

    def __init__(self, threshold: float) -> None:
        self.threshold = float(threshold)

    def on_evaluation(self, model: Any, result: dict[str, Any]) -> bool:
        return result["mean"] < self.threshold


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
    trained and the steps so far, and the training's random generators are kept."""

    def __init__(self, model: Any, callback: Callback) -> None:
        self.model, self.callback = model, callback

    def _call(self, policy: Any, result: Any, hook: Callable[..., Any], *args: Any) -> bool:
        self.model.policy, self.model._num_timesteps = policy, result.env_steps
        with rngs_kept():
            return hook(self.model, *args) is not False

    def on_rollout(self, policy: Any, result: Any) -> bool:
        return self._call(policy, result, self.callback.on_rollout)

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
