"""Swap in your own executor: pre-train one on the graph family you choose (or bring a file),
then XLVIN plans with it on CartPole.

    python examples/own_executor.py [--family grid] [--executor FILE] [--out runs/grid] [--tiny]

The executor is the processor pre-trained to imitate value iteration (paper section 3.1); XLVIN
freezes it and runs it over its latent tree. `xlvin pretrain-executor --graphs grid --out F` is
the command line's way to make the same file, and `xlvin train --executor F` uses it.
"""

import argparse
from pathlib import Path

from xlvin import XLVIN
from xlvin.pretrain.executor import GRAPH_FAMILIES, ExecutorConfig, pretrain_and_save

parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
parser.add_argument("--family", default="grid", choices=GRAPH_FAMILIES,
                    help="graph family to pre-train on (default grid)")
parser.add_argument("--executor", type=Path, help="an executor file to use instead of pre-training")
parser.add_argument("--out", default="runs/grid", help="run directory to create")
parser.add_argument("--tiny", action="store_true", help="a smoke run: a tiny training budget")
args = parser.parse_args()

executor = args.executor
if executor is None:
    executor = Path(args.out).with_name(Path(args.out).name + "-executor.safetensors")
    # H = 50: the width of XLVIN's latent state on CartPole, so no projection is needed
    cfg = ExecutorConfig(family=args.family, hidden=50, seed=0,
                         **({"train_graphs": 4, "epochs": 1} if args.tiny else {}))
    meta = pretrain_and_save(cfg, executor, eval_count=4 if args.tiny else 40)
    print(f"{executor}: held-out policy accuracy {meta['held_out']['policy_accuracy']:.1%}")

tiny = {"num_envs": 2, "num_steps": 32, "transe_episodes": 5, "transe_epochs": 1}
model = XLVIN("CartPole-v1", executor=str(executor), depth=2, seed=0, **(tiny if args.tiny else {}))
model.learn(total_steps=256 if args.tiny else 50_000)
model.save(args.out)
result = model.evaluate(episodes=10 if args.tiny else 100)
print(f"greedy return {result['mean']:.1f} +- {result['std']:.1f}")
