"""Paper Q2 (figures 4 and 6): Freeway, Alien and Enduro from pixels, XLVIN against PPO and ATreeC.

Every agent is trained with the Atari PPO of the code the paper names (ikostrikov's
pytorch-a2c-ppo-acktr-gail): 8 envs x 128 steps, Adam lr 2.5e-4 decaying linearly to 0, eps 1e-5,
clip 0.1, 4 epochs x 4 minibatches, entropy 0.01, value coefficient 0.5, GAE 0.95, gamma 0.99,
max grad norm 0.5, on the Nature CNN (32-64-32 convolutions, 512 features, orthogonal init), in
the environments of that code (`xlvin.envs.atari`: `xlvin/<Game>Train-v4`). Agents:

- `ppo`: the CNN and the actor-critic heads;
- `xlvin-r` / `xlvin-cp`: XLVIN with the executor pre-trained on random deterministic graphs /
  CartPole graphs, K = 2 on Freeway and Enduro, 1 on Alien (paper section 4.2); its TransE loss
  (weight 0.001) is learned during PPO only: no random-policy pre-training, so every transition
  an agent sees is one of the budget;
- `atreec`: ATreeC with the PPO loss, the same encoder and depth.

The paper's cells: Freeway x all four agents, Alien and Enduro x ppo, xlvin-r, atreec, each for
1,000,000 transitions. A cell (game, agent, seed, budget) is the run directory
ROOT/t<budget>/<Game>/<dir>/seed<S>, <dir> the agent's name as this experiment first spelled it
(`DIR_NAMES`: xlvin_r for xlvin-r), so runs made before the canonical names resume. A cell may stop at a wall-clock deadline (`run_cell`): its
checkpoint lets a later call resume it exactly, and its record says the budget reached.

Per cell: the training curve (the unclipped score of whole training games against transitions,
from metrics.jsonl), its area (the mean score over the transitions trained, `auc`), and the greedy
policy's score on 10 fresh evaluation games (`xlvin/<Game>Eval-v4`, seeds 1,000,000 on, at most
4,500 agent steps a game) in DIR/final_eval.json (with a SHA-256: a changed digit is refused),
taken at the transitions it names; and the first update in which a training game scored. Over the
seeds of an agent: the interquartile mean of the area and of the greedy score with 95 % bootstrap
intervals, the probability that its area beats PPO's (Agarwal et al. 2021), and how many seeds
ever scored.
"""

import argparse
import dataclasses
import os
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import torch

from xlvin.config import csv_choices
from xlvin.envs.atari import EVAL_MAX_STEPS, atari_eval_id, atari_train_id
from xlvin.errors import UserError
from xlvin.experiments.final_eval import EVAL_SEED
from xlvin.ppo.session import has_passed
from xlvin.io.digests import check_sealed, sealed
from xlvin.io.files import read_json
from xlvin.io.run_dir import (
    CONFIG,
    METRICS,
    SUMMARY,
    claim_run_dir,
    read_metrics,
    reading_results,
    row_digest,
    write_json,
)
from xlvin.nn.policy import ActorCritic
from xlvin.process import quiet_known_warnings, set_threads
from xlvin.run.agents import agent_fields, resolve_agent, resolve_agents
from xlvin.ppo.evaluation import evaluate_policy
from xlvin.ppo.update import PPOConfig
from xlvin.run.saved import CELL_IDENTITY, check_holds_run, fields_apart
from xlvin.run.training import load_run, prepare_executors, train_run
from xlvin.run.config import RunConfig, TrainConfig
from xlvin.run.checks import check_device

GAMES = ("Freeway", "Alien", "Enduro")
#: The agents, by their canonical names (`xlvin.run.agents.AGENT_NAMES`, which also say what
#: each sets).
AGENTS = ("ppo", "xlvin-r", "xlvin-cp", "atreec")
#: A cell's directory name where it is not the agent's name: the spelling of the runs made
#: before the canonical names (kept, so that they resume and are found).
DIR_NAMES = {"xlvin-r": "xlvin_r", "xlvin-cp": "xlvin_cp"}
LABELS = {"ppo": "PPO", "xlvin-r": "XLVIN-R", "xlvin-cp": "XLVIN-CP", "atreec": "ATreeC"}
#: The agents the paper runs on each game (figures 4 and 6).
PAPER_AGENTS = {
    "Freeway": ("ppo", "xlvin-r", "xlvin-cp", "atreec"),
    "Alien": ("ppo", "xlvin-r", "atreec"),
    "Enduro": ("ppo", "xlvin-r", "atreec"),
}
#: Executor steps K (and ATreeC's tree depth) per game (paper section 4.2).
DEPTH = {"Freeway": 2, "Alien": 1, "Enduro": 2}
PAPER_TRANSITIONS = 1_000_000
#: ikostrikov's Atari PPO settings (pytorch-a2c-ppo-acktr-gail).
ATARI_PPO = {
    "num_envs": 8, "num_steps": 128, "lr": 2.5e-4, "anneal_lr": True, "adam_eps": 1e-5,
    "clip_coef": 0.1, "update_epochs": 4, "num_minibatches": 4, "ent_coef": 0.01,
    "vf_coef": 0.5, "gamma": 0.99, "gae_lambda": 0.95, "max_grad_norm": 0.5,
}
EVAL_FILE = "final_eval.json"
EVAL_GAMES = 10
#: Width of the windows the training curve averages games over, in PPO updates (8 x 128 steps).
WINDOW_UPDATES = 10


@dataclass(frozen=True)
class Cell:
    """One training run of the experiment; `device` is where it trains (part of its config)."""

    game: str
    agent: str
    seed: int
    transitions: int = PAPER_TRANSITIONS
    device: str = "cpu"

    def __post_init__(self) -> None:
        object.__setattr__(self, "agent", resolve_agent(self.agent, AGENTS))  # xlvin_r: xlvin-r

    def run_dir(self, root: Path) -> Path:
        agent = DIR_NAMES.get(self.agent, self.agent)
        return Path(root) / f"t{self.transitions}" / self.game / agent / f"seed{self.seed}"

    def config(self) -> RunConfig:
        train = TrainConfig(
            env=atari_train_id(self.game), seed=self.seed, depth=DEPTH[self.game],
            pretrain_transe=False, device=self.device, **agent_fields(self.agent),
        )
        return RunConfig(train=train, ppo=PPOConfig(total_steps=self.transitions, **ATARI_PPO))


def add_cell_options(parser: argparse.ArgumentParser) -> None:
    """The options that choose cells besides --seeds (`xlvin reproduce atari`)."""
    parser.add_argument("--games", default=",".join(GAMES),
                        help=f"comma-separated games (default {','.join(GAMES)})")
    parser.add_argument("--agents", default="paper",
                        help="comma-separated agents of " + ", ".join(AGENTS) + " (older "
                        "spellings such as xlvin_r are accepted), or 'paper': "
                        "each game's agents in the paper (default)")
    parser.add_argument("--transitions", default=str(PAPER_TRANSITIONS),
                        help=f"training transitions per run: N, or GAME=N,... per game (default "
                        f"{PAPER_TRANSITIONS}, the paper)")
    parser.add_argument("--device", default="cpu", help="torch device: cpu (default) or cuda[:N]")


def cells_from_options(seeds: int, args: argparse.Namespace, first_seed: int = 0) -> list[Cell]:
    """Cells of seeds first_seed .. first_seed + seeds - 1 for the options of `add_cell_options`."""
    games = csv_choices(args.games, GAMES, "game")
    agents = None if args.agents == "paper" else resolve_agents(args.agents, AGENTS)
    budget = transitions_per_game(args.transitions, games)
    check_device(args.device)
    return [
        Cell(game, agent, seed, budget[game], args.device)
        for game in games
        for agent in (agents or PAPER_AGENTS[game])
        for seed in range(first_seed, first_seed + seeds)
    ]


def transitions_per_game(text: str, games: list[str]) -> dict[str, int]:
    """--transitions: one number for every game, or GAME=N pairs naming each of `games`."""
    rollout = ATARI_PPO["num_envs"] * ATARI_PPO["num_steps"]
    try:
        if "=" not in text:
            budget = dict.fromkeys(games, int(text))
        else:
            budget = {g.strip(): int(n) for g, n in (pair.split("=") for pair in text.split(","))}
    except ValueError:
        raise UserError(f"--transitions must be N or GAME=N,..., got {text!r}") from None
    missing = [g for g in games if g not in budget]
    if missing:
        raise UserError(f"--transitions names no budget for {', '.join(missing)}")
    small = [g for g in games if budget[g] < rollout]
    if small:
        raise UserError(f"--transitions must be >= one rollout ({rollout:,}) for {', '.join(small)}")
    return {g: budget[g] for g in games}


def prepare(cells: list[Cell]) -> list[Path]:
    """The default executors the cells need, pre-trained once before their workers start
    (`prepare_executors`); their files (under xlvin's cache: a sweep copies them to its nodes)."""
    return prepare_executors(c.config().train for c in cells)


def transitions_reached(run_dir: Path) -> int:
    """Transitions trained so far by the run in `run_dir`, by its metrics (0 before any)."""
    if not (run_dir / METRICS).is_file():
        return 0
    rows = read_metrics(run_dir)
    return int(rows[-1]["charts/transitions"]) if rows else 0


def machine(device: str) -> str:
    """The machine a cell trained on, in words: the GPU's name or the CPU, and the core count."""
    cores = f"{os.cpu_count()} cores"
    if device.startswith("cuda"):
        return f"{torch.cuda.get_device_name(torch.device(device))} machine ({cores})"
    return f"CPU machine ({cores})"


def run_cell(cell: Cell, root: Path, deadline: float | None = None,
             eval_games: int = EVAL_GAMES) -> dict[str, Any] | None:
    """Train the cell (resuming an interrupted run) until it is finished or `deadline` (a
    `time.time()` value) passes, then evaluate its greedy policy on `eval_games` fresh games
    unless the evaluation on file is already of the policy at these transitions; return its
    record. A cell whose turn comes after the deadline is neither started nor evaluated again:
    its record so far, or None (a queue cut by the deadline costs no untrained evaluation)."""
    if has_passed(deadline):
        return cell_record(cell, cell.run_dir(root)) if has_record(cell, root) else None
    quiet_known_warnings()
    cfg = cell.config()
    set_threads(cfg.ppo.torch_threads)
    run_dir = cell.run_dir(root)
    with claim_run_dir(run_dir):
        agent: ActorCritic
        if (run_dir / SUMMARY).is_file():
            agent = load_run(run_dir)[0].to(cell.device)
        else:
            agent, _ = train_run(cfg, run_dir, progress=False, pretrain_progress=False,
                                 resume=(run_dir / CONFIG).is_file(), deadline=deadline)
        reached = transitions_reached(run_dir)
        if _evaluated_at(run_dir) != reached:
            evaluation = evaluate_policy(agent, atari_eval_id(cell.game), eval_games, EVAL_SEED,
                                         num_envs=eval_games, accelerate=cfg.ppo.accelerate)
            evaluation.update(transitions=reached, max_steps=EVAL_MAX_STEPS,
                              machine=machine(cell.device))
            write_evaluation(run_dir, evaluation)
    return cell_record(cell, run_dir)


def write_evaluation(run_dir: Path, evaluation: dict[str, Any]) -> None:
    """DIR/final_eval.json: the greedy evaluation of the policy at `evaluation["transitions"]`,
    sealed (`_evaluation_tie`)."""
    tie = _evaluation_tie(run_dir, evaluation["transitions"])
    write_json(run_dir / EVAL_FILE, sealed(evaluation, tie))


def _evaluation_tie(run_dir: Path, transitions: Any) -> str:
    """What DIR/final_eval.json is tied to: the digest of the metrics row at the transitions it
    evaluated (`row_digest`), which seals the training up to them. Not the weights: the policy
    evaluated may be a deadline's checkpoint, which a later call trains on from."""
    return row_digest(run_dir, "charts/transitions", transitions)


def read_evaluation(run_dir: Path) -> dict[str, Any]:
    """DIR/final_eval.json, checked against its digest (`xlvin.io.digests.check_sealed`): a
    changed digit is one UserError naming the file."""
    path = run_dir / EVAL_FILE
    data = read_json(path)
    return check_sealed(path, data, lambda: _evaluation_tie(run_dir, data.get("transitions")),
                        "the run's metrics.jsonl at the transitions it evaluated")


def _evaluated_at(run_dir: Path) -> int | None:
    """The transitions of the policy DIR/final_eval.json evaluated, or None without one."""
    if not (run_dir / EVAL_FILE).is_file():
        return None
    with reading_results(run_dir):
        return int(read_evaluation(run_dir)["transitions"])


def finished_record(cell: Cell, root: Path) -> dict[str, Any] | None:
    """The record of a cell that has trained its whole budget and been evaluated at its end,
    else None (it still has to run: `run_cell` resumes it)."""
    run_dir = cell.run_dir(root)
    if not (run_dir / SUMMARY).is_file() or _evaluated_at(run_dir) != transitions_reached(run_dir):
        return None
    return cell_record(cell, run_dir)


def has_record(cell: Cell, root: Path) -> bool:
    """Whether the cell has trained and been evaluated (finished, or stopped at a deadline)."""
    return (cell.run_dir(root) / EVAL_FILE).is_file()


def training_curve(rows: list[dict[str, float]]) -> list[tuple[int, float]]:
    """(transitions, mean unclipped score of the training games that ended in the window) for
    windows of WINDOW_UPDATES updates; windows in which no game ended are left out. Each row
    holds the mean score of its round's games (`charts/episodic_return`) and the running game
    count (`charts/episodes`), so a window's mean weighs every game once."""
    curve, total, games, previous = [], 0.0, 0, 0
    for i, row in enumerate(rows, 1):
        ended = int(row["charts/episodes"]) - previous
        previous = int(row["charts/episodes"])
        if ended and "charts/episodic_return" in row:
            total, games = total + ended * row["charts/episodic_return"], games + ended
        if i % WINDOW_UPDATES == 0 or i == len(rows):
            if games:
                curve.append((int(row["charts/transitions"]), total / games))
            total, games = 0.0, 0
    return curve


def area_under_curve(curve: list[tuple[int, float]], transitions: int) -> float:
    """The mean score over training: the curve's area (a step function, each window's score held
    over its transitions) divided by the transitions trained; NaN without a game."""
    if not curve or transitions <= 0:
        return float("nan")
    area, start = 0.0, 0
    for end, score in curve:
        area += (end - start) * score
        start = end
    area += (transitions - start) * curve[-1][1]
    return area / transitions


def first_score_at(rows: list[dict[str, float]]) -> int | None:
    """The transitions at the first update in which a training game ended with a positive
    score, or None if none did: on Freeway and Enduro, where random play scores 0, when the
    agent first found a reward."""
    for row in rows:
        if row.get("charts/episodic_return", 0.0) > 0:
            return int(row["charts/transitions"])
    return None


def cell_record(cell: Cell, run_dir: Path) -> dict[str, Any]:
    """The cell's curve, area, first score, final evaluation, throughput and how far it
    trained, as of its greedy evaluation: a cell that another call has resumed since is reported
    where it was evaluated, so that every number of the record is of the same run up to the
    same transitions. A run of another cell (another seed, game or agent), copied or moved in,
    is one UserError."""
    config = cell.config()
    others = [dataclasses.replace(cell, agent=agent).config() for agent in AGENTS]
    check_holds_run(run_dir, config, [*CELL_IDENTITY, *fields_apart([config, *others])])
    with reading_results(run_dir):
        return _cell_record(cell, run_dir)


def _cell_record(cell: Cell, run_dir: Path) -> dict[str, Any]:
    evaluation = read_evaluation(run_dir)
    rows = [r for r in (read_metrics(run_dir) if (run_dir / METRICS).is_file() else [])
            if r["charts/transitions"] <= evaluation["transitions"]]
    reached = int(rows[-1]["charts/transitions"]) if rows else 0
    curve = training_curve(rows)
    config = read_json(run_dir / CONFIG)
    return {
        **asdict(cell),
        "device": config["train"]["device"],  # where it trained, whichever device reads it
        "transitions_reached": reached,
        "finished": (run_dir / SUMMARY).is_file(),
        "curve": curve,
        "auc": area_under_curve(curve, reached),
        "first_score_at": first_score_at(rows),
        "games": int(rows[-1]["charts/episodes"]) if rows else 0,
        "steps_per_second": rows[-1]["charts/sps"] if rows else float("nan"),
        "final_eval": {k: evaluation[k] for k in ("mean", "std", "returns", "lengths", "transitions",
                                                  "max_steps", "machine")},
    }
