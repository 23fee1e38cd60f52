"""The maze sanity check: VIN trained with supervision on the expert actions, as in the
VIN paper (Tamar et al. 2016, section 4.1), must solve >= 95 % of the held-out 8x8 mazes (success:
the goal within 2 x the optimal length, `xlvin.ppo.maze_evaluation`). If it does, the mazes,
their levels, the observation and VIN are right.

Training: every start of the training split is one sample (its observation, its optimal action);
cross-entropy on VIN's action logits, RMSprop (lr 0.002, eps 1e-6) and minibatches of 128 as
the VIN paper's gridworld runs. `--agent gvin` trains GVIN the same way (the same check of the
graph planner).
"""

import time
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch
from torch import nn

from xlvin.config import option
from xlvin.envs.maze_data import maze_split
from xlvin.errors import UserError
from xlvin.nn.baselines.gvin import GVINAgent
from xlvin.nn.policy import ActorCritic
from xlvin.nn.baselines.vin import VINAgent
from xlvin.process import seed_everything, set_threads
from xlvin.ppo.maze_evaluation import maze_observations, success_by_level

#: The issue's target: held-out success of supervised VIN on 8x8.
TARGET_SUCCESS = 0.95


@dataclass
class SupervisedVINConfig:
    """What the sanity check trains on and how long."""

    agent: str = option("vin", "the planner to train: VIN or GVIN", choices=("vin", "gvin"))
    size: int = option(8, "maze side (8 or 16)")
    dataset: str = option("generated", "'generated' (the library's mazes) or a VIN npz file")
    epochs: int = option(10, "passes over the training starts")
    batch_size: int = option(128, "starts per minibatch")
    lr: float = option(0.002, "RMSprop learning rate (the VIN paper's)")
    seed: int = option(0, "seed of the weights and the minibatch order")
    torch_threads: int = option(1, "torch CPU threads")

    def __post_init__(self) -> None:
        if self.agent not in ("vin", "gvin"):
            raise UserError(f"--agent {self.agent!r}: choose vin or gvin")
        if self.epochs < 1 or self.batch_size < 1 or self.lr <= 0:
            raise UserError("--epochs and --batch-size must be >= 1 and --lr > 0")


def train_supervised_vin(
    cfg: SupervisedVINConfig, log: Any = print
) -> tuple[ActorCritic, dict[str, Any]]:
    """Train VIN (or GVIN) on the training split's expert actions; return it and a summary with
    its held-out success per level (`success_by_level` on the test split)."""
    set_threads(cfg.torch_threads)
    seed_everything(cfg.seed)
    train, test = maze_split(cfg.size, "train", cfg.dataset), maze_split(cfg.size, "test", cfg.dataset)
    obs = torch.from_numpy(maze_observations(train, train.maze, train.cells))  # [N, 3, H, W]
    labels = torch.from_numpy(train.actions)  # [N]
    agent: ActorCritic = VINAgent(num_actions=8) if cfg.agent == "vin" else GVINAgent(num_actions=8)
    optimizer = torch.optim.RMSprop(agent.parameters(), lr=cfg.lr, eps=1e-6)
    generator = torch.Generator().manual_seed(cfg.seed)
    start = time.perf_counter()
    for epoch in range(cfg.epochs):
        order = torch.randperm(len(labels), generator=generator)
        total, correct = 0.0, 0
        for batch in order.split(cfg.batch_size):
            logits, _ = agent(obs[batch])
            loss = nn.functional.cross_entropy(logits, labels[batch])
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
            total += loss.item() * len(batch)
            correct += int((logits.argmax(-1) == labels[batch]).sum())
        log(f"epoch {epoch + 1}/{cfg.epochs}: loss {total / len(labels):.4f}, "
            f"train action accuracy {correct / len(labels):.3f} ({time.perf_counter() - start:.0f} s)")
    train_seconds = time.perf_counter() - start
    rates = success_by_level(agent, test)
    summary = {
        "agent": cfg.agent, "size": cfg.size, "dataset": cfg.dataset, "train_starts": len(train),
        "test_starts": len(test), "epochs": cfg.epochs, "train_seconds": train_seconds,
        "test_success": rates.pop(-1), "test_success_by_level": rates,
        "test_starts_by_level": test.level_counts(), "threads": cfg.torch_threads,
    }
    return agent, summary


def level_table(summary: dict[str, Any]) -> str:
    """The held-out success per level as lines of text."""
    counts = summary["test_starts_by_level"]
    lines = [f"level {d:>2}: {100 * rate:5.1f} % of {counts[d]} starts"
             for d, rate in summary["test_success_by_level"].items()]
    passed = "passes" if summary["test_success"] >= TARGET_SUCCESS else "FAILS"
    lines.append(f"all     : {100 * summary['test_success']:5.1f} % of {summary['test_starts']} "
                 f"starts ({passed} the {100 * TARGET_SUCCESS:.0f} % target)")
    return "\n".join(lines)


def level_histograms(size: int, datasets: list[str]) -> str:
    """A markdown table: starts per level (count and %) of each split of each data set."""
    columns = [(d, s, maze_split(size, s, d)) for d in datasets for s in ("train", "test")]
    levels = sorted({lv for _, _, m in columns for lv in m.level_counts()})
    head = " | ".join(f"{d} {s}" for d, s, _ in columns)
    lines = [f"| level | {head} |", "|---" * (len(columns) + 1) + "|"]
    for lv in levels:
        cells = [f"{m.level_counts().get(lv, 0)} ({100 * m.level_counts().get(lv, 0) / len(m):.1f} %)"
                 for _, _, m in columns]
        lines.append(f"| {lv} | " + " | ".join(cells) + " |")
    totals = [f"{len(m)} starts, {len(m.walls)} mazes, mean level {np.mean(m.levels):.2f}"
              for _, _, m in columns]
    lines.append("| all | " + " | ".join(totals) + " |")
    return "\n".join(lines)
