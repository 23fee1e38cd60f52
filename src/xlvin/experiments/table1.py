"""Paper Table 1: CartPole-v0, Acrobot-v1 and MountainCar-v0 in the low-data regime, with PPO,
XLVIN-R, XLVIN-CP and ATreeC (paper section 4.1 and the ATreeC ablation of section 5), under two
protocols.

- `paper`: the authors' public code point by point (dransyhe/CNAP, andreeadeac22/logml_xlvin;
  every setting is a named config field whose help text says where its value comes from):
  CartPole's 15 envs run until 10 episodes have ended, every step kept; 100 updates of one epoch
  of minibatches of 128 (the last partial one dropped) on that fixed data, with log pi_old and
  V_old from collection; Monte Carlo returns with time limits as terminations; advantages
  normalised over the batch; Adam's defaults; PyTorch's default initialisation; the TransE
  loss added for the PPO baseline too; TransE pre-trained once per environment (CartPole 50,000
  random episodes x 10 epochs, Acrobot 4,000 x 5, MountainCar 5,000 x 5); the executor with
  LayerNorm and linear messages, with a Linear before and after it. Acrobot and MountainCar: 5
  envs, 5 episodes a round, 20 rounds of one update. Where the paper's text and the code differ
  ("100 epochs"), the code is followed.
- `ours`: the protocol this library used first: exactly 10 (or 5 x 20) complete episodes, GAE,
  4 epochs x 4 minibatches per update, advantages normalised per minibatch, orthogonal
  initialisation, and log pi_old and V_old recomputed before every update.

Every cell (protocol, environment, agent, seed) is one run directory under
ROOT/PROTOCOL/DATA/ENV/AGENT/seedS; a finished cell (summary.json and eval.json present) is never
re-run. Each cell has three statistics: the final greedy policy on 100 fresh episodes (seeds
1,000,000 on, never used in training: our headline); the authors' statistic, the maximum over
the 100-episode greedy evaluations after every update; and the mean of the last 10 of those
evaluations. Aggregates over training seeds: the interquartile mean with its 95 % stratified
bootstrap interval, mean and std, and P(XLVIN > PPO) (rliable's definitions, `xlvin.stats`).
"""

import argparse
import dataclasses
import json
import os
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from xlvin.config import csv_choices
from xlvin.errors import UserError
from xlvin.experiments.figures import pyplot
from xlvin.experiments.jobs import map_jobs
from xlvin.io.digests import read_sealed, write_sealed
from xlvin.io.files import atomic_savefig, atomic_write_text, prepare_results, read_json
from xlvin.io.run_dir import CONFIG, SUMMARY, claim_run_dir, reading_results, write_json
from xlvin.kernels import check_one_mode
from xlvin.process import quiet_known_warnings, set_threads
from xlvin.stats import improvement_over, improvement_text, interval_text, iqm, summarize
from xlvin.run.agents import agent_fields, resolve_agent, resolve_agents
from xlvin.ppo.update import PPOConfig
from xlvin.pretrain.executor import executor_key
from xlvin.pretrain.files import (
    cached_executor_path,
    executor_config,
    executor_file,
    executors_dir,
    shared_transe_path,
)
from xlvin.pretrain.shipped import find
from xlvin.pretrain.transe import TransEConfig
from xlvin.ppo.low_data import PAPER_LOW_DATA, LowDataConfig
from xlvin.run.training import (
    CELL_IDENTITY,
    check_holds_run,
    evaluate_run,
    fields_apart,
    shared_transe_file,
    train_run,
)
from xlvin.run.config import RunConfig, TrainConfig
from xlvin.run.transe import transe_key
from xlvin.run.checks import check_run

ENVS = ("CartPole-v0", "Acrobot-v1", "MountainCar-v0")
PROTOCOLS = ("paper", "ours")

#: How every output names a protocol: `ours` is always labelled as our variant, not the authors'.
PROTOCOL_LABELS = {
    "paper": "protocol paper (the authors' public code, point by point)",
    "ours": "protocol ours (our variant, not the authors': GAE, 4 epochs x 4 minibatches, "
            "log pi_old recomputed every update)",
}
EVAL_FILE = "eval.json"
EVAL_EPISODES = 100
EVAL_SEED = 1_000_000
#: The evaluations during training: 100 greedy episodes after every update (the authors').
PROGRESS_EPISODES = 100
#: How many of the last evaluations during training the "last 10" statistic averages.
LAST = 10

#: Table-1 agents, by their canonical names (`xlvin.run.agents.AGENT_NAMES`, which also say
#: what each sets); a cell's directory is named by it.
AGENTS = ("ppo", "xlvin-r", "xlvin-cp", "atreec")

#: The paper's numbers (Table 1 and section 5; mean +- std over 5 seeds, 100 episodes).
PAPER: dict[tuple[str, str], tuple[float, float]] = {
    ("CartPole-v0", "ppo"): (104.6, 48.5),
    ("CartPole-v0", "xlvin-r"): (199.2, 1.6),
    ("CartPole-v0", "xlvin-cp"): (195.2, 5.0),
    ("CartPole-v0", "atreec"): (117.1, 56.2),
    ("Acrobot-v1", "ppo"): (-500.0, 0.0),
    ("Acrobot-v1", "xlvin-r"): (-353.1, 120.3),
    ("Acrobot-v1", "xlvin-cp"): (-245.4, 48.4),
    ("Acrobot-v1", "atreec"): (-500.0, float("nan")),
    ("MountainCar-v0", "ppo"): (-200.0, 0.0),
    ("MountainCar-v0", "xlvin-r"): (-185.6, 8.1),
    ("MountainCar-v0", "xlvin-cp"): (-168.9, 24.7),
    ("MountainCar-v0", "atreec"): (-200.0, float("nan")),
}

# --------------------------------------------------------------------------- protocol `ours`

#: The authors' classic-control PPO settings as our first protocol used them (dransyhe/CNAP):
#: lr 1e-3, clip 0.2, value coefficient 0.5, entropy 0.01, max grad norm 0.5, gamma 0.99, no
#: learning-rate decay; with our GAE and 4 epochs x 4 minibatches.
OURS_PPO = PPOConfig(lr=1e-3, anneal_lr=False)

#: TransE pre-training data per environment under `ours`. CartPole: 20,000 random episodes,
#: about 440,000 transitions, 2 passes; Acrobot and MountainCar keep the library default (1,000
#: episodes capped at 25,000 transitions, 10 passes).
OURS_TRANSE: dict[str, TransEConfig] = {
    "CartPole-v0": TransEConfig(episodes=20_000, max_transitions=500_000, epochs=2),
}

# --------------------------------------------------------------------------- protocol `paper`

#: The authors' PPO (cnap/arguments.py, models/ppo/ppo.py, rollout.py).
PAPER_PPO = PPOConfig(
    lr=1e-3,  # optim.Adam(params): PyTorch's default lr (the --lr flag is never used)
    adam_eps=1e-8,  # PyTorch's default
    anneal_lr=False,
    update_epochs=1,  # --ppo_epoch 1 for CartPole, Acrobot and MountainCar
    minibatch_size=128,  # --mini_batch_size 128, BatchSampler(drop_last=True)
    advantages="monte_carlo",  # --use_gae False: compute_returns without GAE
    time_limit_terminal=True,  # --enable_time_limit False
    norm_adv=True,
    norm_adv_batch=True,  # PPO.update: (A - mean) / (std + 1e-5) over the whole storage
    clip_coef=0.2, clip_value_loss=True, ent_coef=0.01, vf_coef=0.5, max_grad_norm=0.5,
    gamma=0.99,
)

#: The authors' low-data loop: (rounds, episodes, updates, envs) per environment.
PAPER_LOOP = {"CartPole-v0": (1, 10, 100, 15), "Acrobot-v1": (20, 5, 1, 5),
              "MountainCar-v0": (20, 5, 1, 5)}

#: The authors' TransE pre-training data: (random episodes, epochs) per environment.
PAPER_TRANSE = {"CartPole-v0": (50_000, 10), "Acrobot-v1": (4_000, 5),
                "MountainCar-v0": (5_000, 5)}

#: The authors' policy network: PyTorch's default initialisation, the executor with LayerNorm
#: and linear messages (--layernorm True, --activation False), a Linear before and after it
#: (--transe2gnn 1, --gnn_decoder 1), the TransE term for the PPO baseline as well, its negatives
#: the batch's next states drawn with replacement (TransE.contrastive_loss).
PAPER_ARCHITECTURE = {"init": "pytorch", "executor_layer_norm": True,
                      "executor_messages": "linear", "executor_projections": True,
                      "ppo_transe": True, "transe_negatives": "next_states"}
#: The authors' tree depth and executor steps for XLVIN on classic control: --gnn_steps 1 (their
#: default, and the value of their README's command), where the paper's text says K = 2.
PAPER_XLVIN_DEPTH = 1
#: XLVIN-R's executor in the authors' code: their Erdos-Renyi pre-training (`authors-random`,
#: pre-trained with sum aggregation), run by the policy with max aggregation
#: (--neighbour_aggregation max), where the paper's text pre-trains on random deterministic graphs.
PAPER_EXECUTORS = {"random": "authors-random"}
PAPER_EXECUTOR_AGGREGATION = "max"


def paper_config(env: str, train: TrainConfig) -> RunConfig:
    rounds, episodes, updates, envs = PAPER_LOOP[env]
    transe_episodes, transe_epochs = PAPER_TRANSE[env]
    if train.agent == "xlvin":
        train = dataclasses.replace(
            train, depth=PAPER_XLVIN_DEPTH,
            executor=PAPER_EXECUTORS.get(train.executor, train.executor),
            executor_aggregation=PAPER_EXECUTOR_AGGREGATION)
    return RunConfig(
        train=dataclasses.replace(train, **PAPER_ARCHITECTURE),
        ppo=PAPER_PPO,
        transe=TransEConfig(episodes=transe_episodes, max_transitions=10**9, epochs=transe_epochs,
                            shared=True),
        low_data=LowDataConfig(rounds=rounds, episodes=episodes, updates=updates,
                               collect="until_done", num_envs=envs,
                               eval_points=rounds * updates, eval_episodes=PROGRESS_EPISODES),
    )


def ours_config(env: str, train: TrainConfig, strict: bool) -> RunConfig:
    low = dataclasses.replace(
        PAPER_LOW_DATA[env], strict_transe=strict, refresh_old_policy=True,
        eval_points=PAPER_LOW_DATA[env].rounds * PAPER_LOW_DATA[env].updates,
        eval_episodes=PROGRESS_EPISODES,
    )
    return RunConfig(train=train, ppo=OURS_PPO, transe=OURS_TRANSE.get(env, TransEConfig()),
                     low_data=low)


def _low(**changes: Any) -> Callable[[RunConfig], RunConfig]:
    return lambda cfg: dataclasses.replace(cfg, low_data=dataclasses.replace(cfg.low_data, **changes))


def _train(**changes: Any) -> Callable[[RunConfig], RunConfig]:
    return lambda cfg: dataclasses.replace(cfg, train=dataclasses.replace(cfg.train, **changes))


def _ppo(**changes: Any) -> Callable[[RunConfig], RunConfig]:
    return lambda cfg: dataclasses.replace(cfg, ppo=dataclasses.replace(cfg.ppo, **changes))


#: Variants of a protocol (ablations, settings tried beyond the paper): name -> what it changes.
VARIANTS: dict[str, Callable[[RunConfig], RunConfig]] = {
    "": lambda cfg: cfg,
    # beyond the paper, on the same data: a final policy that averages the weights of the last
    # N updates, or a round cut short once the policy moved away from the collecting one
    "swa-20": _low(average_last=20),
    "swa-50": _low(average_last=50),
    "kl-0.01": _ppo(target_kl=0.01),
    "kl-0.03": _ppo(target_kl=0.03),
    # our update instead of the authors' (4 epochs x 4 minibatches: ~16 Adam steps an update, not 2)
    "epochs-4x4": _ppo(update_epochs=4, num_minibatches=4, minibatch_size=0),
    "orthogonal-init": _train(init="orthogonal"),
    "pytorch-init": _train(init="pytorch"),
    "relu-messages": _train(executor_messages="relu"),
    "no-layernorm": _train(executor_layer_norm=False),
    "relu-messages-no-layernorm": _train(executor_messages="relu", executor_layer_norm=False),
    # what the executor contributes (beyond the paper): PPO with and without the TransE term;
    # XLVIN with its executor frozen at its initial weights, with zeros in place of chi, and
    # at depth 1 and 2
    "ppo-transe": _train(ppo_transe=True),
    "no-ppo-transe": _train(ppo_transe=False),
    "untrained-executor": _train(executor="untrained"),
    "zero-chi": _train(zero_chi=True),
    "depth-1": _train(depth=1),
    "depth-2": _train(depth=2),
}


@dataclass(frozen=True)
class Cell:
    protocol: str
    env: str
    agent: str
    seed: int
    strict: bool = False
    variant: str = ""

    def run_dir(self, root: Path) -> Path:
        data = ("strict" if self.strict else "standard") + (f"-{self.variant}" if self.variant else "")
        return Path(root) / self.protocol / data / self.env / self.agent / f"seed{self.seed}"

    def __post_init__(self) -> None:
        object.__setattr__(self, "agent", resolve_agent(self.agent, AGENTS))  # xlvin_r: xlvin-r

    def config(self) -> RunConfig:
        train = TrainConfig(env=self.env, seed=self.seed, protocol="low_data",
                            **agent_fields(self.agent))
        if self.protocol == "paper":
            cfg = paper_config(self.env, train)
        else:
            cfg = ours_config(self.env, train, self.strict)
        for part in self.variant.split("+") if self.variant else ():
            cfg = VARIANTS[part](cfg)
        return cfg


def add_cell_options(parser: argparse.ArgumentParser) -> None:
    """The options that choose cells besides --seeds (`xlvin reproduce classic`, `xlvin sweep
    table1`)."""
    parser.add_argument("--protocol", choices=PROTOCOLS, default="paper",
                        help="the authors' protocol, or ours (default paper)")
    parser.add_argument("--envs", default=",".join(ENVS),
                        help=f"comma-separated environments (default {','.join(ENVS)})")
    parser.add_argument("--agents", default=",".join(AGENTS),
                        help=f"comma-separated agents (default {','.join(AGENTS)}; older "
                        "spellings such as xlvin_r are accepted)")
    parser.add_argument(
        "--transe-data", choices=("standard", "strict", "both"), default="standard",
        help="protocol ours: XLVIN's TransE pre-training data: random-policy episodes "
        "(standard), only the low-data budget (strict), or both (default standard)",
    )
    parser.add_argument(
        "--variant", type=variant, default="",
        help=f"a change to the protocol, or several joined by '+' (default none): "
        f"{', '.join(v for v in VARIANTS if v)}",
    )


def variant(text: str) -> str:
    """A --variant value: names of VARIANTS joined by '+' (argparse type)."""
    unknown = [part for part in text.split("+") if text and part not in VARIANTS]
    if unknown:
        raise argparse.ArgumentTypeError(
            f"unknown variant {', '.join(unknown)}; choose from {', '.join(v for v in VARIANTS if v)}"
        )
    return text


def cells_from_options(seeds: int, args: argparse.Namespace, first_seed: int = 0) -> list[Cell]:
    """Cells of seeds first_seed .. first_seed + seeds - 1 for the options of `add_cell_options`;
    the strict TransE setting only exists for XLVIN agents under protocol `ours`."""
    envs = csv_choices(args.envs, ENVS, "environment")
    agents = resolve_agents(args.agents, AGENTS)
    settings = {"standard": [False], "strict": [True], "both": [False, True]}[args.transe_data]
    if args.protocol == "paper":
        settings = [False]
    return [
        Cell(args.protocol, env, agent, seed, strict, args.variant)
        for strict in settings
        for env in envs
        for agent in agents
        for seed in range(first_seed, first_seed + seeds)
        if not (strict and not agent.startswith("xlvin"))
    ]


def is_finished(run_dir: Path) -> bool:
    """Both result files are there (of whatever type: reading them checks it)."""
    return os.path.lexists(run_dir / SUMMARY) and os.path.lexists(run_dir / EVAL_FILE)


def run_cell(cell: Cell, root: Path, config: RunConfig | None = None) -> dict[str, Any]:
    """Train and evaluate one cell (with `config` in place of `cell.config()` when given)
    unless it is already finished (`finish_run`: an interrupted one resumes); return its
    record."""
    run_dir = cell.run_dir(root)
    finish_run(run_dir, config or cell.config(), EVAL_EPISODES, EVAL_SEED)
    return cell_record(cell, run_dir, config)


def finish_run(run_dir: Path, config: RunConfig, episodes: int, seed: int) -> None:
    """Train the run `config` in `run_dir` and evaluate its final greedy policy on `episodes`
    fresh episodes seeded from `seed` (EVAL_FILE), each unless done. A directory with a config
    but no summary is an interrupted run: it resumes from its last checkpoint. The directory is
    claimed meanwhile: a run another invocation holds is one UserError."""
    quiet_known_warnings()  # in spawned workers too
    with claim_run_dir(run_dir):
        if not (run_dir / SUMMARY).is_file():
            train_run(config, run_dir, progress=False, resume=(run_dir / CONFIG).is_file(),
                      pretrain_progress=False)
        if not (run_dir / EVAL_FILE).is_file():
            write_sealed(run_dir / EVAL_FILE, evaluate_run(run_dir, episodes, seed), run_dir)


def identity_fields(cell: Cell, config: RunConfig) -> list[tuple[str, str]]:
    """CELL_IDENTITY and every field a variant sets: those in which the cell's `config`, or its
    protocol's with any one of VARIANTS, differs from its protocol's without one. So a run of
    another variant copied in is told apart, the plain protocol's cell's included."""
    plain = dataclasses.replace(cell, variant="").config()
    apart = fields_apart([plain, config, *(change(plain) for change in VARIANTS.values())])
    return [*CELL_IDENTITY, *(field for field in apart if field not in CELL_IDENTITY)]


def cell_record(cell: Cell, run_dir: Path, config: RunConfig | None = None) -> dict[str, Any]:
    """The cell's three statistics, its progress curve and its data counts, once its directory
    is known to hold the cell's own run: its recorded seed, env, agent and variant those of
    `config` (default the cell's; `check_holds_run`). Another cell's run, copied or swapped in,
    is one UserError, never tabled."""
    config = config or cell.config()
    check_holds_run(run_dir, config, identity_fields(cell, config))
    with reading_results(run_dir):
        return _cell_record(cell, run_dir)


def _cell_record(cell: Cell, run_dir: Path) -> dict[str, Any]:
    summary = read_sealed(run_dir / SUMMARY, run_dir)
    evaluation = read_sealed(run_dir / EVAL_FILE, run_dir)
    progress = summary["ppo"]["progress"]
    curve = [float(p["eval_return"]) for p in progress]
    return {
        **dataclasses.asdict(cell),
        "final_return": evaluation["mean"],
        "final_return_std_over_episodes": evaluation["std"],
        "max_eval_return": max(curve, default=float("nan")),
        "last_evals_mean": float(np.mean(curve[-LAST:])) if curve else float("nan"),
        "progress": progress,
        "training_returns": summary["ppo"]["episode_returns"],  # every finished training episode
        "episodes": summary["ppo_episodes"],
        "transitions": summary["ppo_transitions"],
        "transe_transitions": summary["transe_transitions"],
        "wall_seconds": summary["wall_seconds"],
        "kernels": (summary.get("kernels") or {}).get("mode"),  # None: recorded before modes
    }


def prepare(cells: Iterable[Cell], jobs: int = 1) -> list[Path]:
    """Find the files the cells share (default executors, shared TransE pre-trainings), cached
    or shipped (`xlvin.pretrain.files`), and produce the others once each, on `jobs` processes,
    before the cells' workers would race to them, each showing its progress on a line of its
    own below the cursor (cleared when done); returns every shared file."""
    needs: dict[Path, tuple[str, Cell, dict[str, Any]]] = {}
    for cell in cells:
        cfg = cell.config()
        t = cfg.train
        if t.agent != "xlvin":
            continue
        executor = executor_config(t.executor, t)
        if executor is not None:
            needs.setdefault(cached_executor_path(executor, executors_dir()),
                             ("executor", cell, executor_key(executor)))
        if cfg.transe.shared:
            key = transe_key(cfg, *check_run(cfg))
            needs.setdefault(shared_transe_path(key, t.env), ("transe", cell, key))
    ready = [(kind, cell, 0) for path, (kind, cell, key) in needs.items()
             if path.exists() or find(key) is not None]
    missing = [(kind, cell, line) for line, (kind, cell, key) in enumerate(
        (need for path, need in needs.items() if not path.exists() and find(need[2]) is None),
        start=1)]
    return sorted([_shared_file(need) for need in ready] + map_jobs(_produce, missing, jobs))


def _produce(need: tuple[str, Cell, int]) -> Path:
    """Make one shared file in a worker process (`_shared_file`, its progress on its line)."""
    quiet_known_warnings()
    set_threads(need[1].config().ppo.torch_threads)
    return _shared_file(need)


def _shared_file(need: tuple[str, Cell, int]) -> Path:
    """One shared file (a default executor or a shared TransE pre-training): cached, shipped
    or made here, its progress on line `position`; returns it."""
    kind, cell, position = need
    cfg = cell.config()
    if kind == "executor":
        return executor_file(cfg.train.executor, cfg.train, progress=True, position=position)
    spaces, arch = check_run(cfg)
    return shared_transe_file(cfg, spaces, arch, progress=True, position=position)


# --------------------------------------------------------------------------- results

STATISTICS = {
    "final": ("final_return", "final policy (100 fresh episodes)"),
    "max_eval": ("max_eval_return", "max over per-update evaluations (authors' statistic)"),
    "last_evals": ("last_evals_mean", f"mean of the last {LAST} per-update evaluations"),
}


def _key(r: dict[str, Any]) -> tuple[str, str, str, bool, str]:
    return r["protocol"], r["env"], r["agent"], r["strict"], r["variant"]


def aggregate(records: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """One row per (protocol, env, agent, TransE data, variant): every statistic's IQM with its
    95 % bootstrap interval, mean and std over seeds; P(agent > PPO) on the final policy (against
    the PPO cells of the same protocol, env and variant); data counts."""
    groups: dict[tuple[str, str, str, bool, str], list[dict[str, Any]]] = {}
    for r in records:
        groups.setdefault(_key(r), []).append(r)
    rows = []
    for key in sorted(groups, key=lambda k: (PROTOCOLS.index(k[0]), ENVS.index(k[1]),
                                             list(AGENTS).index(k[2]), k[3], k[4])):
        protocol, env, agent, strict, variant = key
        group = sorted(groups[key], key=lambda r: r["seed"])
        paper = PAPER.get((env, agent), (float("nan"), float("nan")))
        row: dict[str, Any] = {
            "protocol": protocol, "env": env, "agent": agent, "strict": strict,
            "variant": variant, "seeds": [r["seed"] for r in group],
            "paper_mean": paper[0], "paper_std": paper[1],
            "episodes_mean": float(np.mean([r["episodes"] for r in group])),
            "transitions_mean": float(np.mean([r["transitions"] for r in group])),
            "transe_transitions_mean": float(np.mean([r["transe_transitions"] for r in group])),
            "wall_seconds_total": float(sum(r["wall_seconds"] for r in group)),
        }
        for name, (field, _) in STATISTICS.items():
            row[name] = summarize(np.array([r[field] for r in group]))
        if env == "MountainCar-v0":  # the flag: an episode shorter than the 200-step limit
            row["flag_episodes_per_seed"] = [sum(x > -200 for x in r["training_returns"])
                                             for r in group]
        ppo = groups.get((protocol, env, "ppo", False, variant))
        if agent != "ppo" and ppo:
            row["p_better_than_ppo"] = {
                **improvement_over([r["final_return"] for r in group],
                                   [r["final_return"] for r in ppo]),
                "ppo_seeds": len(ppo)}
        rows.append(row)
    return rows


def _ci(s: dict[str, float]) -> str:
    return interval_text(s["iqm"], s["iqm_low"], s["iqm_high"], 1)


def _stat(row: dict[str, Any] | None, name: str) -> str:
    """A row's statistic as IQM [CI], or - where the row is missing."""
    return "-" if row is None else _ci(row[name])


def _pm(mean: float, std: float) -> str:
    return "-" if np.isnan(mean) else (f"{mean:.1f}" if np.isnan(std) else f"{mean:.1f} +- {std:.1f}")


def _label(r: dict[str, Any]) -> str:
    label = r["agent"]
    if r["strict"]:
        label += " (strict TransE)"
    if r["variant"]:
        label += f" [{r['variant']}]"
    return label


def markdown(rows: list[dict[str, Any]], wall_seconds: float | None) -> str:
    """One protocol's table: every statistic of every cell."""
    header = (
        "| env | agent | paper (mean +- std, 5 seeds) | final policy: IQM [95 % CI] | final: mean "
        "+- std | max over evaluations (authors'): IQM [95 % CI] | last 10 evaluations: IQM "
        "[95 % CI] | P(> PPO), final [95 % CI] | episodes | transitions | TransE random "
        "transitions | seeds |"
    )
    lines = [header, "|---|---|---|---|---|---|---|---|---|---|---|---|"]
    for r in rows:
        better = improvement_text(r.get("p_better_than_ppo"))
        lines.append(
            f"| {r['env']} | {_label(r)} | {_pm(r['paper_mean'], r['paper_std'])} | "
            f"**{_ci(r['final'])}** | {r['final']['mean']:.1f} +- {r['final']['std']:.1f} | "
            f"{_ci(r['max_eval'])} | {_ci(r['last_evals'])} | {better} | "
            f"{r['episodes_mean']:.1f} | {r['transitions_mean']:.0f} | "
            f"{r['transe_transitions_mean']:.0f} | {len(r['seeds'])} |"
        )
    protocols = sorted({r["protocol"] for r in rows})
    about = (
        f"Run under {'; '.join(PROTOCOL_LABELS[p] for p in protocols)} (`xlvin reproduce "
        f"classic --protocol {'|'.join(protocols)}`; see `xlvin.experiments.table1`). Final "
        "policy: greedy, 100 episodes with seeds 1,000,000+, never used in training: our "
        "headline. Max over "
        f"evaluations: the best of the {PROGRESS_EPISODES}-episode greedy evaluations after "
        "every update (fresh episodes each time), the statistic the authors' script prints; "
        f"last 10: the mean of the last {LAST} of them. IQM: interquartile mean over training "
        "seeds, 95 % stratified bootstrap interval (2,000 resamples); P(> PPO): probability that "
        "a run of the agent beats a run of PPO on the final policy, with its bootstrap interval. "
        "Episodes and transitions: what PPO learned from (protocol paper: every step of all envs, "
        "unfinished episodes included); TransE random transitions: the random-policy data of "
        "its pre-training (protocol paper: one shared pre-training per environment)."
    )
    notes = ["", about]
    for r in rows:
        if "flag_episodes_per_seed" in r:
            notes.append(
                f"{r['env']} {_label(r)}: training episodes that reached the flag, per seed: "
                f"{', '.join(map(str, r['flag_episodes_per_seed']))} (of "
                f"{r['episodes_mean']:.0f} a seed on average)."
            )
    cells = sum(len(r["seeds"]) for r in rows)
    train = sum(r["wall_seconds_total"] for r in rows)
    notes.append(
        f"{cells} cells; their training (pre-training included, final evaluation excluded) took "
        f"{train:.0f} s of worker time in all."
    )
    if wall_seconds is not None:
        notes.append(
            f"Wall time of this invocation: {wall_seconds:.0f} s (cells finished earlier are "
            "skipped, so a resumed invocation is shorter than a full run)."
        )
    return "\n".join(lines + notes) + "\n"


def combined_markdown(rows: list[dict[str, Any]]) -> str:
    """The paper's number beside ours under both protocols and both statistics (standard TransE
    data, no variant)."""
    by = {(r["protocol"], r["env"], r["agent"]): r for r in rows
          if not r["strict"] and not r["variant"]}
    header = (
        "| env | agent | paper | protocol paper: authors' statistic (max over evaluations) | "
        "protocol paper: final policy | protocol ours: authors' statistic | protocol ours: "
        "final policy | P(> PPO), final, paper protocol | P(> PPO), final, ours |"
    )
    lines = [header, "|---|---|---|---|---|---|---|---|---|"]
    for env in ENVS:
        for agent in AGENTS:
            paper, ours = by.get(("paper", env, agent)), by.get(("ours", env, agent))
            if paper is None and ours is None:
                continue
            ref = PAPER.get((env, agent), (float("nan"), float("nan")))
            lines.append(
                f"| {env} | {agent} | {_pm(*ref)} | {_stat(paper, 'max_eval')} | "
                f"**{_stat(paper, 'final')}** | {_stat(ours, 'max_eval')} | "
                f"**{_stat(ours, 'final')}** | {improvement_text(paper and paper.get('p_better_than_ppo'))} | "
                f"{improvement_text(ours and ours.get('p_better_than_ppo'))} |"
            )
    return "\n".join(lines) + (
        "\n\nIQM over training seeds [95 % stratified bootstrap CI]; the final policy (bold) is "
        "our headline. The paper reports mean +- std over 5 seeds of the maximum over "
        f"evaluations. The {PROTOCOL_LABELS['ours']}.\n"
    )


def results_stem(protocol: str, variant: str = "") -> str:
    """The file name (without suffix) of a protocol's (and variant's) results."""
    return f"table1-{protocol}" + (f"-{variant}" if variant else "")


def write_results(records: list[dict[str, Any]], results: Path, wall_seconds: float | None) -> str:
    """Aggregate one protocol's records (of one variant) into RESULTS/table1-PROTOCOL.{md,json,png}
    (table1-PROTOCOL-VARIANT.* for a variant); when both protocols have results without variant,
    also RESULTS/table1.{md,json,png} (the combined table and plot). Returns the markdown."""
    kinds = {(r["protocol"], r["variant"]) for r in records}
    if len(kinds) != 1:
        raise UserError(f"write_results takes one protocol's and variant's records, got {sorted(kinds)}")
    ((protocol, variant),) = kinds
    check_one_mode({f"{r['env']} {r['agent']} seed {r['seed']}": r.get("kernels") for r in records})
    rows = aggregate(records)
    prepare_results(results)
    md = markdown(rows, wall_seconds)
    stem = results_stem(protocol, variant)  # may hold dots (kl-0.01): append, never with_suffix
    atomic_write_text(results / f"{stem}.md", md)
    write_json(results / f"{stem}.json",
               {"protocol": protocol, "rows": rows, "runs": records, "wall_seconds": wall_seconds})
    plot(rows, records, results / f"{stem}.png")
    both = []
    for p in PROTOCOLS:
        if (results / f"table1-{p}.json").is_file():
            with reading_results(results / f"table1-{p}.json"):
                table = read_json(results / f"table1-{p}.json")
                both.append({"rows": list(table["rows"]), "runs": list(table["runs"])})
    if len(both) == len(PROTOCOLS):
        rows = [row for table in both for row in table["rows"]]
        atomic_write_text(results / "table1.md", combined_markdown(rows))
        write_json(results / "table1.json", {"protocols": list(PROTOCOLS), "rows": rows})
        plot_combined(rows, [run for table in both for run in table["runs"]],
                      results / "table1.png")
    return md


def plot(rows: list[dict[str, Any]], records: list[dict[str, Any]], path: Path) -> None:
    """Top: every seed's final policy (filled) and max over evaluations (hollow) per agent, with
    the IQM and its 95 % interval, and the paper's number (star). Bottom: the per-update greedy
    evaluations, IQM over seeds with a band from the 25th to the 75th percentile."""
    plt = pyplot()

    envs = [e for e in ENVS if any(r["env"] == e for r in rows)]
    fig, axes = plt.subplots(2, len(envs), figsize=(5.5 * len(envs), 8), squeeze=False)
    rng = np.random.default_rng(0)
    for column, env in enumerate(envs):
        top, bottom = axes[0, column], axes[1, column]
        env_rows = [r for r in rows if r["env"] == env]
        for i, row in enumerate(env_rows):
            group = [r for r in records if _key(r) == _key(row)]
            color = f"C{i}"
            for offset, (name, marker) in ((-0.15, ("final", "o")), (0.15, ("max_eval", "o"))):
                field = STATISTICS[name][0]
                values = [r[field] for r in group]
                x = i + offset + rng.uniform(-0.05, 0.05, len(values))
                top.scatter(x, values, s=14, marker=marker, alpha=0.7,
                            facecolors=color if name == "final" else "none", edgecolors=color)
                s = row[name]
                top.errorbar(i + offset, s["iqm"], yerr=[[s["iqm"] - s["iqm_low"]],
                             [s["iqm_high"] - s["iqm"]]], fmt="_", color="k", capsize=4, ms=14)
            if not np.isnan(row["paper_mean"]):
                top.scatter(i, row["paper_mean"], marker="*", s=120, color="gold",
                            edgecolors="k", zorder=5)
            curves = [[p["eval_return"] for p in r["progress"]] for r in group]
            length = min(len(c) for c in curves) if curves else 0
            if length:
                y = np.array([c[:length] for c in curves])  # [seeds, evaluations]
                x = [p["updates"] for p in group[0]["progress"][:length]]
                iqm_curve = [iqm(y[:, j]) for j in range(length)]
                bottom.plot(x, iqm_curve, color=color, label=_label(row))
                bottom.fill_between(x, np.percentile(y, 25, 0), np.percentile(y, 75, 0),
                                    color=color, alpha=0.15)
        top.set_xticks(range(len(env_rows)), [_label(r) for r in env_rows], rotation=20,
                       fontsize=8)
        top.set_title(f"{env}: filled final policy, hollow max over evaluations, * paper")
        top.title.set_fontsize(9)
        top.set_ylabel("return (IQM, 95 % CI)")
        top.grid(alpha=0.3)
        bottom.set_xlabel("PPO updates")
        bottom.set_ylabel(f"greedy return ({PROGRESS_EPISODES} episodes), IQM over seeds")
        bottom.grid(alpha=0.3)
        if bottom.lines:
            bottom.legend(fontsize=7)
        else:  # records written before learning curves were kept
            bottom.text(0.5, 0.5, "no evaluations during training recorded", ha="center",
                        va="center", transform=bottom.transAxes, fontsize=8)
    protocol = rows[0]["protocol"] if rows else ""
    fig.suptitle(f"Table 1, protocol {protocol}: {len(rows[0]['seeds']) if rows else 0} seeds")
    fig.tight_layout()
    atomic_savefig(fig, path, dpi=110)
    plt.close(fig)


def plot_combined(rows: list[dict[str, Any]], records: list[dict[str, Any]], path: Path) -> None:
    """One panel per environment; per agent, every seed as a point with the IQM and its 95 %
    interval: protocol paper's final policy, its max over evaluations (the authors' statistic),
    and protocol ours' final policy; the paper's number as a star."""
    plt = pyplot()

    by = {(r["protocol"], r["env"], r["agent"]): r for r in rows
          if not r["strict"] and not r["variant"]}
    shown = (("paper", "final", "o", "full", "paper: final policy"),
             ("paper", "max_eval", "o", "none", "paper: max over evaluations (authors')"),
             ("ours", "final", "s", "full", "ours (our variant): final policy"))
    envs = [e for e in ENVS if any(k[1] == e for k in by)]
    fig, axes = plt.subplots(1, len(envs), figsize=(5.5 * len(envs), 4.5), squeeze=False)
    rng = np.random.default_rng(0)
    for ax, env in zip(axes[0], envs, strict=True):
        agents = [a for a in AGENTS if any((p, env, a) in by for p in PROTOCOLS)]
        for i, agent in enumerate(agents):
            for j, (protocol, name, marker, fill, label) in enumerate(shown):
                row = by.get((protocol, env, agent))
                if row is None:
                    continue
                x0 = i + (j - 1) * 0.25
                values = [r[STATISTICS[name][0]] for r in records if _key(r) == _key(row)]
                color = f"C{j}"
                ax.scatter(x0 + rng.uniform(-0.05, 0.05, len(values)), values, s=14,
                           marker=marker, alpha=0.7, edgecolors=color,
                           facecolors=color if fill == "full" else "none",
                           label=label if i == 0 else None)
                s = row[name]
                ax.errorbar(x0, s["iqm"], yerr=[[s["iqm"] - s["iqm_low"]],
                            [s["iqm_high"] - s["iqm"]]], fmt="_", color="k", capsize=4, ms=12)
            paper_mean = PAPER.get((env, agent), (float("nan"),))[0]
            if not np.isnan(paper_mean):
                ax.scatter(i, paper_mean, marker="*", s=130, color="gold", edgecolors="k",
                           zorder=5, label="paper (max over evaluations)" if i == 0 else None)
        ax.set_xticks(range(len(agents)), agents)
        ax.set_title(env)
        ax.set_ylabel("return: seeds, IQM and 95 % CI")
        ax.grid(alpha=0.3)
    handles, labels = axes[0, 0].get_legend_handles_labels()
    fig.legend(handles, labels, loc="lower center", ncol=len(labels), fontsize=8)
    fig.suptitle("Table 1: both protocols, both statistics")
    fig.tight_layout(rect=(0, 0.07, 1, 1))
    atomic_savefig(fig, path, dpi=110)
    plt.close(fig)
