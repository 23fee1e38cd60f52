"""Envs that misbehave at a chosen step, registered when imported (`--gym-packages
tests.badenvs`): a user's env that raises in `reset` or `step`, returns an observation of
another shape or dtype, or a NaN or infinite reward. Each is a small CartPole-like env with 4-float
observations and 2 actions whose episodes last 8 steps."""

import os

import gymnasium as gym
import numpy as np

#: id -> (what goes wrong, at which step of the env's life: its n-th call of reset or step)
FAULTS = {
    "xlvin-test/StepRaises-v0": ("step raises", 5),
    "xlvin-test/ResetRaises-v0": ("reset raises", 2),
    "xlvin-test/FirstResetRaises-v0": ("reset raises", 1),
    "xlvin-test/WrongShape-v0": ("wrong shape", 5),
    "xlvin-test/WrongDtype-v0": ("wrong dtype", 5),
    "xlvin-test/NaNReward-v0": ("nan reward", 1),
    "xlvin-test/InfReward-v0": ("inf reward", 3),
}
#: The message the raising envs raise with.
MESSAGE = "the simulator lost its licence"
#: Set (to anything) in the process's environment, the envs behave: the user has fixed the env
#: and resumes the run.
HEALED = "XLVIN_TEST_ENV_HEALED"


class BadEnv(gym.Env):
    """4 floats, 2 actions, 8 steps an episode; `fault` happens on the `at`-th call of its kind
    (and on every one after it), unless HEALED is set when it is made."""

    observation_space = gym.spaces.Box(-1.0, 1.0, (4,), np.float32)
    action_space = gym.spaces.Discrete(2)

    def __init__(self, fault: str, at: int) -> None:
        self.fault = "" if os.environ.get(HEALED) else fault
        self.at = at
        self.resets = self.steps = self.t = 0

    def _obs(self) -> np.ndarray:
        return np.full(4, self.t / 8, dtype=np.float32)

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        self.resets += 1
        if self.fault == "reset raises" and self.resets >= self.at:
            raise RuntimeError(MESSAGE)
        self.t = 0
        return self._obs(), {}

    def step(self, action):
        self.steps += 1
        self.t += 1
        obs, reward = self._obs(), float(action)
        late = self.steps >= self.at
        if self.fault == "step raises" and late:
            raise RuntimeError(MESSAGE)
        if self.fault == "wrong shape" and late:
            obs = np.zeros(5, dtype=np.float32)
        if self.fault == "wrong dtype" and late:
            obs = np.array(["a", "b", "c", "d"])
        if self.fault == "nan reward" and late:
            reward = float("nan")
        if self.fault == "inf reward" and late:
            reward = -float("inf")
        return obs, reward, self.t >= 8, False, {}


for env_id, (fault, at) in FAULTS.items():
    if env_id not in gym.registry:
        gym.register(env_id, entry_point=BadEnv, kwargs={"fault": fault, "at": at})
