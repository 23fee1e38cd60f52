"""Training throughput and first learning curves of the maze agents under the library's PPO, to
size the curriculum runs (issue 15).

    python -m benchmarks.suite.maze_sps [--total-steps 8192] [--threads 1] [--agents ...] [--level D]

Each agent trains `--total-steps` steps on xlvin/Maze-v0 (8x8) in this process, one after the
other: 8 envs x 128 steps a rollout, 4 epochs of 4 minibatches (the library's PPO defaults but
8 envs), Adam lr `--lr` decayed linearly to 0. Without `--level` the mazes are of every level
and the figure is the run's env steps per second (collection and updates, wall clock). With
`--level D` the envs draw level-D starts only and the table adds the training success over the
last 1,000 episodes (the goal within 2 x D moves, as the curriculum counts it) and the greedy
success on the held-out level-D starts. PPO is the paper's maze CNN at 128 channels and the
32-channel CPU preset. XLVIN (issue 16) is the paper's maze configuration: the same 128-channel
CNN, latent k = 10, transition hidden 128, the default maze executor (H = 10, LayerNorm),
TransE weight 0.001, at depth K = 1, 2, 4 over the full tree, and at K = 4 pruned to the b = 2
or 3 actions a rollout policy ranks highest below depth 1 (ours, `--prune`). Not part of the
test suite.
"""

import argparse
import os
import platform

import gymnasium as gym
import numpy as np

from xlvin.envs.maze import GOAL_REWARD, MOVE_REWARD, MazeEnv
from xlvin.envs.maze_data import generated_split
from xlvin.nn.agent import XLVINAgent
from xlvin.nn.baselines.ppo import PPOAgent
from xlvin.nn.encoders import MazeCNN
from xlvin.nn.baselines.gvin import GVINAgent
from xlvin.nn.policy import ActorCritic
from xlvin.nn.transition import TransitionModel
from xlvin.nn.baselines.vin import VINAgent
from xlvin.process import prepare_process, seed_everything
from xlvin.ppo.loop import OnlineData, train
from xlvin.ppo.session import Session
from xlvin.ppo.maze_evaluation import greedy_success
from xlvin.ppo.update import PPOConfig
from xlvin.pretrain.files import executor_file, load_executor_processor
from xlvin.run.config import TrainConfig


def xlvin(depth: int, prune: int = 0, width: int = 128) -> ActorCritic:
    """The paper's maze XLVIN (module docstring) at depth `depth`, pruned to `prune` actions
    below depth 1 when `prune` > 0 (ours), with encoder and transition `width` wide (the
    paper's 128, or the 32 of the CPU preset)."""
    processor, _ = load_executor_processor(executor_file("maze", TrainConfig()))
    return XLVINAgent(MazeCNN(3, width, 10), 10, 8, TransitionModel(10, 8, width), processor,
                      depth=depth, prune=prune)


#: label -> a fresh policy
AGENTS = {
    "vin": ("VIN", lambda: VINAgent(8)),
    "vin_mean": ("VIN-mean", lambda: VINAgent(8, "mean")),
    "vin_max": ("VIN-max", lambda: VINAgent(8, "max")),
    "gvin": ("GVIN", lambda: GVINAgent(8)),
    "ppo128": ("PPO (maze CNN, 128 ch)", lambda: PPOAgent(MazeCNN(3, 128, 10), 10, 8)),
    "ppo32": ("PPO (maze CNN, 32 ch)", lambda: PPOAgent(MazeCNN(3, 32, 10), 10, 8)),
    "ppo128_transe": ("PPO (maze CNN, 128 ch) + TransE term",
                      lambda: PPOAgent(MazeCNN(3, 128, 10), 10, 8, TransitionModel(10, 8, 128))),
    "xlvin_k1": ("XLVIN K = 1 (full)", lambda: xlvin(1)),
    "xlvin_k2": ("XLVIN K = 2 (full)", lambda: xlvin(2)),
    "xlvin_k4": ("XLVIN K = 4 (full, the paper's)", lambda: xlvin(4)),
    "xlvin_k4_b2": ("XLVIN K = 4 pruned b = 2 (ours)", lambda: xlvin(4, prune=2)),
    "xlvin_k4_b3": ("XLVIN K = 4 pruned b = 3 (ours)", lambda: xlvin(4, prune=3)),
    "xlvin32_k2": ("XLVIN K = 2 (full), 32 ch (CPU preset)", lambda: xlvin(2, width=32)),
    "xlvin32_k4": ("XLVIN K = 4 (full), 32 ch (CPU preset)", lambda: xlvin(4, width=32)),
    "xlvin32_k4_b2": ("XLVIN K = 4 pruned b = 2 (ours), 32 ch (CPU preset)",
                      lambda: xlvin(4, prune=2, width=32)),
}


def moves_of(returns: np.ndarray) -> np.ndarray:
    """Moves of episodes that reached the goal, from their returns: 1 - 0.01 (moves - 1)."""
    return 1 + np.round((GOAL_REWARD - returns) / -MOVE_REWARD).astype(int)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--total-steps", type=int, default=8192)
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--lr", type=float, default=2.5e-4)
    parser.add_argument("--level", type=int, default=0, help="0: every level")
    parser.add_argument("--agents", nargs="+", default=list(AGENTS), choices=list(AGENTS))
    parser.add_argument("--device", default="cpu", help="torch device of the policy (cpu, cuda)")
    args = parser.parse_args()
    prepare_process()  # as every `xlvin` command: big latent trees need the retained memory
    env_id = "xlvin/Maze-v0"
    if args.level:
        env_id = f"xlvin/BenchMazeLevel{args.level}-v0"
        gym.register(id=env_id, entry_point=MazeEnv, kwargs={"level": args.level})
    test = generated_split(8, "test")
    held_out = np.flatnonzero(test.levels == args.level)
    print(f"machine: {platform.processor() or platform.machine()}, {os.cpu_count()} cores, "
          f"load average {os.getloadavg()[0]:.1f}; torch threads {args.threads}; "
          f"{args.total_steps:,} steps, lr {args.lr}, level {args.level or 'all'}, "
          f"device {args.device}")
    print("| agent | env steps/s | episodes | wall s | train success, last 1,000 | held-out greedy |")
    print("|---|---|---|---|---|---|")
    for name in args.agents:
        label, make = AGENTS[name]
        seed_everything(0)
        policy: ActorCritic = make().to(args.device)
        cfg = PPOConfig(num_envs=8, num_steps=128, total_steps=args.total_steps, lr=args.lr,
                        torch_threads=args.threads)
        result = train(policy, OnlineData(env_id, cfg, 0), cfg, 0, Session(progress=False))
        returns = np.array(result.episode_returns[-1000:])
        trained, greedy = "-", "-"
        if args.level:
            solved = (returns > 0) & (moves_of(returns) <= 2 * args.level)
            trained = f"{100 * solved.mean():.1f} %"
            greedy = f"{100 * greedy_success(policy, test, held_out).mean():.1f} %"
        print(f"| {label} | {result.sps:,.0f} | {result.episodes:,} | {result.wall_time_s:.1f} | "
              f"{trained} | {greedy} |", flush=True)
    print(f"load average at the end {os.getloadavg()[0]:.1f}")


if __name__ == "__main__":
    main()
