"""An image env for the tests of image encoders: uint8 images, zero but for one channel at 200
(drawn anew every step), a reward of 1 when the action names that channel, episodes of 8 steps."""

import gymnasium as gym
import numpy as np


class BrightChannel(gym.Env):
    """Subclasses set `observation_space` (uint8 images) and `channel_axis`, the axis of its
    shape that holds the channels; `action_space` needs as many actions as channels, or more."""

    channel_axis = 0

    def _obs(self) -> np.ndarray:
        shape = self.observation_space.shape
        self.bright = int(self.np_random.integers(0, shape[self.channel_axis]))
        obs = np.zeros(shape, np.uint8)
        np.moveaxis(obs, self.channel_axis, 0)[self.bright] = 200
        return obs

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        self.t = 0
        return self._obs(), {}

    def step(self, action):
        reward = float(action == self.bright)
        self.t += 1
        return self._obs(), reward, False, self.t >= 8, {}
