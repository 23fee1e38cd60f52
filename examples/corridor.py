"""XLVIN on an environment of your own, written here: a corridor to walk to its end.

    python examples/corridor.py [--length 8] [--out runs/corridor] [--tiny]

The same file is a module that registers `Corridor-v0` with gymnasium, so the command line
trains and evaluates it too (from this folder, or with it on PYTHONPATH):

    xlvin train --gym-packages corridor --env Corridor-v0 --env-kwargs length=8 --out runs/c
    xlvin evaluate runs/c --gym-packages corridor
"""

import argparse

import gymnasium as gym
import numpy as np


class Corridor(gym.Env):
    """States 0..length-1 (a Discrete observation: the agent reads it one-hot), start at 0;
    actions: 0 left, 1 right. Reaching the end pays 1 and ends the episode; every other step
    costs 0.01; episodes are cut at 4 x length steps."""

    def __init__(self, length: int = 8) -> None:
        self.length = length
        self.observation_space = gym.spaces.Discrete(length)
        self.action_space = gym.spaces.Discrete(2)

    def reset(self, *, seed: int | None = None, options: dict | None = None):
        super().reset(seed=seed)
        self.position, self.steps = 0, 0
        return self.position, {}

    def step(self, action: int):
        self.position = int(np.clip(self.position + (1 if action == 1 else -1), 0, self.length - 1))
        self.steps += 1
        done = self.position == self.length - 1
        reward = 1.0 if done else -0.01
        return self.position, reward, done, self.steps >= 4 * self.length, {}


if "Corridor-v0" not in gym.registry:
    gym.register("Corridor-v0", entry_point=Corridor)


def main() -> None:
    from xlvin import XLVIN

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--length", type=int, default=8)
    parser.add_argument("--out", default="runs/corridor", help="run directory to create")
    parser.add_argument("--tiny", action="store_true", help="a smoke run: a tiny training budget")
    args = parser.parse_args()
    tiny = {"num_envs": 2, "num_steps": 32, "transe_episodes": 5, "transe_epochs": 1}

    # the class itself (or an instance, or "Corridor-v0"), with its keyword arguments
    model = XLVIN(Corridor, env_kwargs={"length": args.length}, depth=2, seed=0,
                  **(tiny if args.tiny else {}))
    model.learn(total_steps=256 if args.tiny else 20_000)
    model.save(args.out)
    result = model.evaluate(episodes=10 if args.tiny else 100)
    print(f"greedy return {result['mean']:.2f} (the best possible: {1 - 0.01 * (args.length - 2):.2f})")


if __name__ == "__main__":
    main()
