"""What the heads of trained maze agents read from the plan (ours, not the paper's): linear probes
of V* and of the optimal action from h_s, chi_s and [h_s, chi_s], and how far the policy moves
when chi_s is another state's.

XLVIN's heads read [h_s, chi_s] (section 3.2, step 5): h_s = z(s) the encoder's embedding, chi_s
the executor's output at the root of the latent tree (steps 2-4), as the heads receive it (after
the projection on chi where the agent has one; zeros in the chi = 0 arm). PPO's heads read h_s
alone: only its probes from h_s are measured.

- Probes: a least-squares linear map with an intercept from a feature set to a target, fitted on
  every non-terminal state (free cell but the goal) of training mazes and tested on those of
  held-out mazes. V*: the maze MDP's (`xlvin.mdp.maze_graphs.maze_mdp`, value iteration, gamma
  0.9), scored by the held-out R^2 = 1 - SS_res / SS_tot (SS_tot about the held-out mean: a
  probe that predicts no better than that mean scores 0 or less). The optimal action: the map
  is fitted to the indicator of the actions greedy for Q* (Q-values within `TIE_TOL` tie)
  divided by their count, its argmax is the probe's action, scored by the share of held-out
  states where that action is optimal. A reference probe reads no feature (the intercept).
- Swaps (XLVIN arms): every held-out state s is paired with another held-out state s' drawn
  uniformly (default_rng(0)); the heads read [h_s, chi_s'] in place of [h_s, chi_s]: the mean
  total-variation distance between the two action distributions and the share of states whose
  greedy action changes. The same with h_s' in place of h_s (chi_s kept) says how much the heads
  read h.

Cells are those of `xlvin.experiments.executor_latent_trees` (a finished run's final policy,
else its last passed level's) over every arm of the maze ablation. Fixed before the first run:
held-out mazes the first N (`--mazes`, 0: all 833) of `maze_split(8, "test")` (dataset seed 0);
training mazes the first `--train-mazes` (default 833) of `maze_split(8, "train")`; per arm,
over its seeds, the IQM with its 95 % bootstrap interval (`xlvin.stats.summarize`).
"""

import argparse
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import torch

from xlvin.config import csv_choices
from xlvin.envs.maze_data import maze_split
from xlvin.errors import UserError
from xlvin.experiments import maze
from xlvin.experiments.executor_latent_trees import (
    MazeStates,
    add_arms_option,
    held_out_count,
    load_policy,
    maze_states_of,
    trained_cells,
)
from xlvin.experiments.executor_true_trees import MAZE_SIZE
from xlvin.experiments.maze_ablation import ARMS
from xlvin.nn.agent import XLVINAgent
from xlvin.nn.policy import ActorCritic
from xlvin.pretrain.executor_eval import TIE_TOL
from xlvin.process import torch_threads

#: The feature sets of the probes: name -> what they are.
FEATURES = {"h": "h_s", "chi": "chi_s", "h+chi": "[h_s, chi_s]", "none": "no feature"}
#: The training mazes the probes are fitted on, by default: as many as the held-out split has.
TRAIN_MAZES = 833
#: States per forward pass.
BATCH = 1024


@dataclass(frozen=True)
class Cell:
    """One trained maze agent (`arm` a maze agent name, `seed`), probed on the first `mazes`
    held-out mazes (0: all) and fitted on the first `train_mazes` training mazes; `policy`, the
    SHA-256 of the policy file it measures (`trained_cells`)."""

    arm: str
    seed: int
    mazes: int = 0
    train_mazes: int = TRAIN_MAZES
    policy: str = ""

    def run_dir(self, root: Path) -> Path:
        return maze.Cell("maze", self.arm, self.seed).run_dir(root)


@torch.no_grad()
def features(agent: ActorCritic, obs: np.ndarray) -> dict[str, np.ndarray]:
    """The feature sets of observations obs [S, 3, H, W]: "h" [S, k], and for an XLVIN agent
    "chi" [S, H] and "h+chi" [S, k + H]; "none" [S, 0]."""
    hs, chis = [], []
    for start in range(0, len(obs), BATCH):
        h = agent.encoder(torch.from_numpy(obs[start : start + BATCH]))  # [b, k]
        hs.append(h)
        if isinstance(agent, XLVINAgent):
            chis.append(agent.plan(h))  # [b, H]
    out = {"h": torch.cat(hs).double().numpy(), "none": np.zeros((len(obs), 0))}
    if chis:
        out["chi"] = torch.cat(chis).double().numpy()
        out["h+chi"] = np.concatenate([out["h"], out["chi"]], axis=1)
    return out


def optimal_actions(q: np.ndarray) -> np.ndarray:
    """The actions greedy for q [S, A] (within `TIE_TOL`): [S, A] bool."""
    return q >= q.max(axis=1, keepdims=True) - TIE_TOL


def fit_probe(x: np.ndarray, y: np.ndarray) -> np.ndarray:
    """The least-squares map with an intercept from x [N, F] to y [N, C]: [F + 1, C] (the
    minimum-norm one where x is rank-deficient: constant features are fine)."""
    return np.linalg.lstsq(np.hstack([x, np.ones((len(x), 1))]), y, rcond=None)[0]


def probe(coef: np.ndarray, x: np.ndarray) -> np.ndarray:
    """`fit_probe`'s map applied to x [N, F]: [N, C]."""
    return x @ coef[:-1] + coef[-1]


def r_squared(predicted: np.ndarray, y: np.ndarray) -> float:
    """1 - SS_res / SS_tot of predicted [N] against y [N], SS_tot about y's mean."""
    return float(1.0 - ((y - predicted) ** 2).sum() / ((y - y.mean()) ** 2).sum())


def probe_scores(train: tuple[np.ndarray, np.ndarray], test: tuple[np.ndarray, np.ndarray]
                 ) -> dict[str, float]:
    """The probes of one feature set (module docstring), fitted on train (features [N, F], Q*
    [N, A]) and scored on test: {"value_r2", "action_accuracy"}."""
    (x_train, q_train), (x_test, q_test) = train, test
    optimal = optimal_actions(q_train)
    y = np.hstack([q_train.max(axis=1, keepdims=True),
                   optimal / optimal.sum(axis=1, keepdims=True)])  # [N, 1 + A]: V*, actions
    predicted = probe(fit_probe(x_train, y), x_test)
    chosen = predicted[:, 1:].argmax(axis=1)
    return {"value_r2": r_squared(predicted[:, 0], q_test.max(axis=1)),
            "action_accuracy": float(optimal_actions(q_test)[np.arange(len(x_test)),
                                                             chosen].mean())}


def others(count: int, seed: int = 0) -> np.ndarray:
    """For each of `count` states another one [count] (long), drawn uniformly."""
    return (np.arange(count) + np.random.default_rng(seed).integers(1, count, count)) % count


@torch.no_grad()
def policy_moves(agent: XLVINAgent, h: np.ndarray, chi: np.ndarray, other: np.ndarray
                 ) -> dict[str, dict[str, float]]:
    """How far the policy moves when the heads read another state's chi (h) [S, H] ([S, k]),
    `other` [S] naming it: {"chi" / "h": {"tv": mean total-variation distance, "greedy_changed":
    share of states whose greedy action changes}}."""
    def policy(h_in: np.ndarray, chi_in: np.ndarray) -> torch.Tensor:
        logits, _ = agent.heads(torch.from_numpy(np.hstack([h_in, chi_in])).float())  # [S, A]
        return torch.softmax(logits.double(), dim=-1)

    pi = policy(h, chi)
    out = {}
    for name, moved in (("chi", policy(h, chi[other])), ("h", policy(h[other], chi))):
        out[name] = {"tv": float(0.5 * (pi - moved).abs().sum(-1).mean()),
                     "greedy_changed": float((pi.argmax(-1) != moved.argmax(-1)).double().mean())}
    return out


def probe_agent(agent: ActorCritic, train: MazeStates, test: MazeStates) -> dict[str, Any]:
    """The probes of every feature set the agent has and, for XLVIN, its `policy_moves`."""
    x_train, x_test = features(agent, train.obs), features(agent, test.obs)
    moves = None
    if isinstance(agent, XLVINAgent):
        moves = policy_moves(agent, x_test["h"], x_test["chi"], others(len(test.obs)))
    return {"probes": {name: probe_scores((x_train[name], train.q_star),
                                          (x_test[name], test.q_star))
                       for name in FEATURES if name in x_train},
            "moves": moves}


def run_cell(cell: Cell, root: Path) -> dict[str, Any]:
    """The cell's probes and policy moves (`probe_agent`) with what was measured; nothing is
    written."""
    agent, record = load_policy(cell, root)
    with torch_threads(1):
        train = maze_states_of(maze_split(MAZE_SIZE, "train"), cell.train_mazes)
        test = maze_states_of(maze_split(MAZE_SIZE, "test"), held_out_count(cell.mazes))
        measured = probe_agent(agent, train, test)
    return {**record, "mazes": cell.mazes, "train_mazes": cell.train_mazes,
            "states": {"train": len(train.maze), "test": len(test.maze)}, **measured}


def add_options(parser: argparse.ArgumentParser) -> None:
    add_arms_option(parser, tuple(ARMS.values()))
    parser.add_argument("--mazes", type=int, default=0,
                        help="probe on the first N held-out 8x8 mazes (default 0: all 833)")
    parser.add_argument("--train-mazes", type=int, default=TRAIN_MAZES,
                        help=f"fit the probes on the first N training 8x8 mazes (default "
                        f"{TRAIN_MAZES})")


def cells(seeds: int, args: argparse.Namespace) -> list[Cell]:
    """The cells of the options with a policy under --runs (`trained_cells`): every arm of
    --arms, seeds --first-seed onwards."""
    held_out_count(args.mazes)
    train = len(maze_split(MAZE_SIZE, "train").walls)
    if not 1 <= args.train_mazes <= train:
        raise UserError(f"--train-mazes must be in [1, {train}]")
    arms = csv_choices(args.arms, tuple(ARMS.values()), "arm")
    return trained_cells([Cell(arm, seed, args.mazes, args.train_mazes)
                          for seed in range(args.first_seed, args.first_seed + seeds)
                          for arm in arms], args.runs, args.ended_only)
