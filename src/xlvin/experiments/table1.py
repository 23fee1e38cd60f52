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
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from xlvin.config import csv_choices
from xlvin.experiments.final_eval import EVAL_FILE, EVAL_SEED, finish_run
from xlvin.experiments.jobs import map_jobs
from xlvin.io.digests import read_sealed
from xlvin.io.run_dir import SUMMARY, reading_results
from xlvin.process import quiet_known_warnings, set_threads
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
from xlvin.run.saved import CELL_IDENTITY, check_holds_run, fields_apart
from xlvin.run.training import shared_transe_file
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
EVAL_EPISODES = 100
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


def run_cell(cell: Cell, root: Path, config: RunConfig | None = None) -> dict[str, Any]:
    """Train and evaluate one cell (with `config` in place of `cell.config()` when given)
    unless it is already finished (`finish_run`: an interrupted one resumes); return its
    record."""
    run_dir = cell.run_dir(root)
    finish_run(run_dir, config or cell.config(), EVAL_EPISODES, EVAL_SEED)
    return cell_record(cell, run_dir, config)


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
