"""A user's env that fails inside a run: one line saying which env, which call, at which step,
and the exception's own message, not a traceback through gymnasium and xlvin.

An env fails when its `reset` or `step` raises, or returns an observation of another shape than
its observation space's, or of no numeric dtype. The env's own exception is the `EnvFailed`'s
cause (`XLVIN_TRACEBACK=1` prints the traceback on the command line)."""

from pathlib import Path
from typing import Any

import gymnasium as gym
import numpy as np

from xlvin.errors import UserError, one_line

#: What a failing env's call passes on as it is (after `except PASSED_ON: raise`, the callers
#: turn every other Exception into an EnvFailed): a UserError is already one line, and out of
#: memory is the CLI's own line.
PASSED_ON = (UserError, MemoryError)


class EnvFailed(UserError):
    """A user's env failed in `call` ("reset" or "step") at `step`; `reason` is the exception's
    type and own message. The message has no flags: the API raises it as it is."""

    def __init__(self, message: str, *, env_id: str = "", call: str = "", step: str = "",
                 reason: str = "") -> None:
        super().__init__(message)
        self.env_id, self.call, self.step, self.reason = env_id, call, step, reason
        self.command_line_message = message

    @classmethod
    def of(cls, env_id: str, call: str, step: str, reason: str) -> "EnvFailed":
        return cls(f"environment {env_id!r} failed in {call} at {step}: {reason}",
                   env_id=env_id, call=call, step=step, reason=reason)

    def during(self, what: str) -> "EnvFailed":
        """The same failure placed in the run, at its step in `what` ("the data for update 3");
        raise it `from` this one's cause."""
        return EnvFailed.of(self.env_id, self.call, f"{self.step} in {what}", self.reason)

    def resumable(self, env_id: str, run_dir: Path, checkpointed: bool) -> "EnvFailed":
        """The same failure of the run's env `env_id`, saying that the run in `run_dir` resumes
        once the env is fixed: from its last checkpoint, or from the start without one (in the
        API's terms, and in the command line's); raise it `from` this one's cause."""
        failed = EnvFailed.of(env_id, self.call, self.step, self.reason)
        line = (f"{failed}; {run_dir} is kept and resumes from "
                f"{'its last checkpoint' if checkpointed else 'the start'} once the env is fixed")
        resumed = EnvFailed(f"{line}: learn(out={str(run_dir)!r}, resume=True)",
                            env_id=env_id, call=self.call, step=self.step, reason=self.reason)
        resumed.command_line_message = (f"{line}: run the command again (xlvin train: with "
                                        "--resume; XLVIN_TRACEBACK=1 prints the traceback)")
        return resumed


def env_failed(env_id: str, call: str, step: str, err: Exception) -> EnvFailed:
    """The EnvFailed for `err` (raise it `from err`), which `env_id` raised in `call` at `step`.
    `call` is the deepest env method `reset` or `step` `err` passed through (a vector env's step
    calls a sub-env's reset after an episode ends); an error raised outside every env method is
    the vector env's, storing what the env returned."""
    reason = f"{type(err).__name__}: {one_line(err)}"
    tb, inside = err.__traceback__, False
    while tb is not None:
        name = tb.tb_frame.f_code.co_name
        if name in ("reset", "step") and isinstance(tb.tb_frame.f_locals.get("self"), gym.Env):
            call, inside = name, True
        tb = tb.tb_next
    if not inside:
        reason = f"returned an observation or reward its spaces cannot hold ({reason})"
    return EnvFailed.of(env_id, call, step, reason)


def observation_problem(obs: Any, space: gym.Space) -> str | None:
    """What is wrong with `obs`, an env's observation, for its observation `space` (another
    shape, or no numeric dtype); None when nothing is."""
    try:
        array = np.asarray(obs)
    except (TypeError, ValueError) as err:
        return f"returned an observation NumPy cannot read ({one_line(err)})"
    if space.shape is not None and array.shape != space.shape:
        return (f"returned an observation of shape {array.shape}, where its observation space "
                f"has {space.shape}")
    if array.dtype.kind not in "biuf":
        return (f"returned an observation of dtype {array.dtype}, where its observation space "
                f"has {space.dtype}")
    return None
