"""The Python API on CartPole: train XLVIN, save the run, act with it, load it back, evaluate.

    python examples/cartpole_api.py [--out runs/cp] [--tiny]

`--tiny` trains for a few hundred steps only (the tests run every example so). The run
directory is the one `xlvin train` writes: `xlvin evaluate runs/cp` reads it too; running the
example again overwrites its save.
"""

import argparse

import gymnasium as gym

from xlvin import XLVIN

parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
parser.add_argument("--out", default="runs/cp", help="run directory to save to")
parser.add_argument("--tiny", action="store_true", help="a smoke run: a tiny training budget")
args = parser.parse_args()
# any option of `xlvin train`, by name: here the smoke run's small rollouts and pre-training
tiny = {"num_envs": 2, "num_steps": 32, "transe_episodes": 5, "transe_epochs": 1}

model = XLVIN("CartPole-v1", depth=2, seed=0, **(tiny if args.tiny else {}))
model.learn(total_steps=256 if args.tiny else 50_000)
model.save(args.out)

obs, _ = gym.make("CartPole-v1").reset(seed=0)
action, _ = model.predict(obs, deterministic=True)  # (action, state), as in SB3
value = model.predict_values(obs)
print(f"in the first state: action {action}, V(s) = {value:.2f}")

model = XLVIN.load(args.out)
result = model.evaluate(episodes=10 if args.tiny else 100)
print(f"greedy return {result['mean']:.1f} +- {result['std']:.1f} over {result['episodes']} "
      "episodes")
