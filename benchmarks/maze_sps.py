"""Training throughput of every maze agent under the library's PPO: environment steps per second
of short online runs on xlvin/Maze-v0 (8x8, all levels), to size the curriculum runs (issue 15).

    python -m benchmarks.maze_sps [--total-steps 8192] [--threads 1] [--agents ...]

Each agent trains `--total-steps` steps (8 envs x 128 steps a rollout, 4 epochs of 4 minibatches:
the library's PPO defaults but 8 envs) in this process, one after the other; the figure is the
run's `sps` (collection and updates, wall clock). PPO is the paper's maze CNN at 128 channels
and the 32-channel CPU preset (`--hidden 32`). Not part of the test suite.
"""

import argparse
import os
import platform
import tempfile
from pathlib import Path

from xlvin.train.ppo import PPOConfig
from xlvin.train.run import RunConfig, TrainConfig, train_run

#: (label, agent, --hidden)
AGENTS = [("VIN", "vin", 0), ("VIN-mean", "vin_mean", 0), ("VIN-max", "vin_max", 0),
          ("GVIN", "gvin", 0), ("PPO (maze CNN, 128 ch)", "ppo", 128),
          ("PPO (maze CNN, 32 ch)", "ppo", 32)]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--total-steps", type=int, default=8192)
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--agents", nargs="+", default=[a for _, a, _ in AGENTS])
    args = parser.parse_args()
    print(f"machine: {platform.processor() or platform.machine()}, {os.cpu_count()} cores, "
          f"load average {os.getloadavg()[0]:.1f}; torch threads {args.threads}")
    print("| agent | env steps/s | episodes | wall s |\n|---|---|---|---|")
    with tempfile.TemporaryDirectory() as tmp:
        for label, agent, hidden in AGENTS:
            if agent not in args.agents:
                continue
            cfg = RunConfig(
                train=TrainConfig(env="xlvin/Maze-v0", agent=agent, hidden=hidden, checkpoint_every=0),
                ppo=PPOConfig(num_envs=8, num_steps=128, total_steps=args.total_steps,
                              torch_threads=args.threads),
            )
            _, summary = train_run(cfg, Path(tmp) / f"{agent}{hidden}", progress=False)
            ppo = summary["ppo"]
            print(f"| {label} | {ppo['sps']:,.0f} | {ppo['episodes']:,} | {ppo['wall_time_s']:.1f} |",
                  flush=True)
    print(f"load average at the end {os.getloadavg()[0]:.1f}")


if __name__ == "__main__":
    main()
