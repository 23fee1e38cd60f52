"""Many seeds in one process, compared as our pages compare them: PPO and XLVIN-R on CartPole-v1,
each agent's seeds trained together (`learn_seeds`: seed s's run is its solo run bit for bit),
then each seed's final policy on fresh episodes, the IQMs and P(XLVIN-R > PPO) with 95 %
bootstrap intervals, worded by the interval (fewer than 10 seeds a side: not compared).

    python examples/many_seeds.py [--seeds 10] [--out runs/many-seeds] [--tiny]

`--tiny` trains 3 seeds for a few hundred steps (the tests run every example so); the full run,
100 rollouts of 4 x 128 a seed, takes a few minutes on 2 cores. Each seed's run
directory, OUT/AGENT/seed-S, is the one `xlvin train --seed S` writes.
"""

import argparse

from xlvin import PPO, XLVIN, learn_seeds
from xlvin.stats import iqm_text, summarize
from xlvin.wording import compare_seeds

parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
parser.add_argument("--seeds", type=int, default=10, help="seeds per agent (0 to N-1)")
parser.add_argument("--out", default="runs/many-seeds", help="folder of the seeds' runs")
parser.add_argument("--tiny", action="store_true", help="a smoke run: 3 seeds, a tiny budget")
args = parser.parse_args()
tiny = {"num_envs": 2, "num_steps": 32, "transe_episodes": 5, "transe_epochs": 1}
seeds = range(3 if args.tiny else args.seeds)

finals = {}  # agent -> each seed's mean return over fresh episodes, greedy
for name, kind in (("PPO", PPO), ("XLVIN-R", XLVIN)):
    models = learn_seeds(kind("CartPole-v1", **(tiny if args.tiny else {})), seeds,
                         total_steps=128 if args.tiny else 51_200, out=f"{args.out}/{name}")
    finals[name] = [m.evaluate(episodes=2 if args.tiny else 100)["mean"] for m in models]
    print(f"{name}, {len(models)} seeds: final return IQM "
          f"{iqm_text(summarize(finals[name]), 1)}")
print(compare_seeds("XLVIN-R", "PPO", finals["XLVIN-R"], finals["PPO"],
                    protocol="CartPole-v1, final policy"))
