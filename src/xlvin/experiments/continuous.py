"""XLVIN and PPO on continuous actions (beyond the paper's Table 1, towards its MuJoCo
experiments): MountainCarContinuous-v0 and Pendulum-v1 at a low-data budget, HalfCheetah-v5 and
Hopper-v5 at a CPU budget (the authors' 1,000,000 steps with `--budget paper`).

Agents, every one trained by the same PPO schedule of its environment (`ENVS`):

- `ppo`: a diagonal Gaussian policy with a separate tanh critic (SB3's MLP policy), exploring
  with gSDE on the classic envs (the RL Zoo's Pendulum preset);
- `xlvin-all`, `xlvin-uniform`, `xlvin-gaussian`, `xlvin-policy`: XLVIN-R (the paper's random-
  graph executor, section 4.1) over `BINS` bins per action dimension (a factorised categorical;
  the env receives the bins' centres), its tree `DEPTH` deep, each node expanding every joint
  action (`all`, only where BINS ^ dimensions <= `MAX_FULL_EXPANSION`) or `EXPAND` joint actions
  drawn uniformly, around the node's greedy bins, or from the distilled rollout policy
  (`xlvin.nn.expansion`). TransE is pre-trained once per environment (`TRANSE`, shared by the
  XLVIN cells), as Table 1's `paper` protocol does.

Every cell (budget, env, agent, seed) is one run directory ROOT/STEPS-steps/ENV/AGENT/seedS,
claimed while it trains, resumed from its checkpoint when interrupted and never re-run once
finished (summary.json and eval.json). Its statistic: the final greedy policy's mean return over
`EVAL_EPISODES` fresh episodes (seeds 1,000,000 on, never used in training). Per (env, agent):
the IQM over seeds with its 95 % bootstrap interval and P(agent > PPO) with its interval
(`xlvin.stats`); RESULTS/continuous.{md,json,png}, one panel per env. A table of unfinished cells
is refused unless asked for (`include_running`), and then names every cell still to finish. A
cell whose run directory is missing but whose record an earlier RESULTS/continuous.json holds
counts as finished (`kept_runs`): cells gathered over several machines add up.
"""

import argparse
import dataclasses
import importlib.util
import os
import textwrap
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from xlvin.config import csv_choices
from xlvin.errors import UserError
from xlvin.experiments import table1
from xlvin.experiments.figures import pyplot
from xlvin.experiments.final_eval import EVAL_FILE, EVAL_SEED, finish_run, is_finished
from xlvin.experiments.protocol import Experiment, run_cells
from xlvin.experiments.results import kept, write_files
from xlvin.experiments.shapes import (
    IMPROVEMENT,
    Each,
    Nullable,
    Optional,
    check_entries,
    interval,
    one_of,
)
from xlvin.io.digests import read_sealed
from xlvin.io.files import atomic_savefig, read_json
from xlvin.io.run_dir import CONFIG, SUMMARY, reading_results
from xlvin.kernels import cpu_name
from xlvin.pretrain.transe import TransEConfig
from xlvin.stats import improvement_over, improvement_text, iqm_text, summarize
from xlvin.ppo.update import PPOConfig
from xlvin.run.saved import CELL_IDENTITY, check_holds_run, fields_apart
from xlvin.run.config import MAX_FULL_EXPANSION, RunConfig, TrainConfig
from xlvin.wording import compare


@dataclass(frozen=True)
class EnvSetting:
    """An environment of the experiment: its action dimensions, its default budget (env steps),
    the PPO schedule every agent trains with, and the Gaussian policy's own options."""

    dims: int
    steps: int
    ppo: PPOConfig
    gaussian: dict[str, Any]
    mujoco: bool = False


#: The classic envs' schedule: 4 envs x 128 steps an update, 4 epochs x 4 minibatches, lr 1e-3
#: held (the Zoo's Pendulum preset, its rollouts shortened to fit 20 updates into the low-data
#: budget); their Gaussian policy explores with gSDE, its noise drawn every 4 steps (the Zoo's).
CLASSIC_PPO = PPOConfig(num_envs=4, num_steps=128, lr=1e-3, anneal_lr=False, ent_coef=0.0,
                        update_epochs=4, num_minibatches=4)
CLASSIC_GAUSSIAN = {"use_sde": True, "sde_sample_freq": 4}
#: MuJoCo's schedule: CleanRL's (one env x 2048 steps, 10 epochs x 32 minibatches, lr 3e-4
#: annealed, observations and rewards normalised); the Gaussian's noise independent per step.
MUJOCO_PPO = PPOConfig(num_envs=1, num_steps=2048, lr=3e-4, anneal_lr=True, ent_coef=0.0,
                       update_epochs=10, num_minibatches=32, norm_obs=True, norm_reward=True)

ENVS: dict[str, EnvSetting] = {
    # gamma 0.99 over the 999-step episodes; the flag is a sparse +100: normalise both (the Zoo's)
    "MountainCarContinuous-v0": EnvSetting(1, 10_240, dataclasses.replace(
        CLASSIC_PPO, gamma=0.99, norm_obs=True, norm_reward=True), CLASSIC_GAUSSIAN),
    # gamma 0.9 and no normalisation: the Zoo's Pendulum preset
    "Pendulum-v1": EnvSetting(1, 10_240, dataclasses.replace(
        CLASSIC_PPO, gamma=0.9, norm_obs=False, norm_reward=False), CLASSIC_GAUSSIAN),
    "HalfCheetah-v5": EnvSetting(6, 49_152, MUJOCO_PPO, {}, mujoco=True),
    "Hopper-v5": EnvSetting(3, 49_152, MUJOCO_PPO, {}, mujoco=True),
}
CLASSIC = ("MountainCarContinuous-v0", "Pendulum-v1")
#: The authors' budget on MuJoCo (`--budget paper`).
PAPER_STEPS = 1_000_000
BUDGETS = ("low", "paper")

#: agent -> XLVIN's expansion (None: PPO's Gaussian).
AGENTS: dict[str, str | None] = {"ppo": None, "xlvin-all": "all", "xlvin-uniform": "uniform",
                                 "xlvin-gaussian": "gaussian", "xlvin-policy": "policy"}
BASELINE = "ppo"
#: XLVIN's bins per action dimension, joint actions drawn per node, and tree depth K.
BINS, EXPAND, DEPTH = 7, 4, 2
#: TransE's random-policy pre-training, once per environment: at most 5,000 transitions.
TRANSE = TransEConfig(episodes=100, max_transitions=5_000, epochs=5, shared=True)
EVAL_EPISODES = 10


def joint_actions(env: str) -> int:
    """BINS ^ the env's action dimensions: the children of a node that expands all."""
    return BINS ** ENVS[env].dims


def runs_on(env: str, agent: str) -> bool:
    """Whether the agent runs on the env: `xlvin-all` only where every joint action fits."""
    return AGENTS[agent] != "all" or joint_actions(env) <= MAX_FULL_EXPANSION


def budget_steps(env: str, budget: str) -> int:
    """The env steps of a cell: the env's own (`low`), the authors' (`paper`), or a number."""
    if budget == "low":
        return ENVS[env].steps
    if budget == "paper":
        return PAPER_STEPS
    return int(budget)


@dataclass(frozen=True)
class Cell:
    env: str
    agent: str
    seed: int
    steps: int

    def run_dir(self, root: Path) -> Path:
        return Path(root) / f"{self.steps}-steps" / self.env / self.agent / f"seed{self.seed}"

    @classmethod
    def of(cls, record: dict[str, Any]) -> "Cell":
        """The cell a record (`cell_record`) is of."""
        return cls(record["env"], record["agent"], record["seed"], record["steps"])

    def config(self) -> RunConfig:
        setting = ENVS[self.env]
        ppo = dataclasses.replace(setting.ppo, total_steps=self.steps)
        method = AGENTS[self.agent]
        if method is None:
            train = TrainConfig(env=self.env, agent="ppo", seed=self.seed, separate_critic=True,
                                activation="tanh")
            ppo = dataclasses.replace(ppo, **setting.gaussian)
        else:
            train = TrainConfig(env=self.env, agent="xlvin", seed=self.seed, depth=DEPTH,
                                action_bins=BINS, expansion=method,
                                expand=0 if method == "all" else EXPAND)
        return RunConfig(train=train, ppo=ppo, transe=TRANSE)


def check_budget(text: str) -> str:
    """A --budget value: low, paper, or whole env steps >= 1; one UserError otherwise."""
    if text in BUDGETS or (text.isdigit() and int(text) >= 1):
        return text
    raise UserError(f"--budget must be low, paper or a whole number of env steps >= 1, got {text!r}")


def cells(envs: list[str], agents: list[str], seeds: list[int], budget: str = "low") -> list[Cell]:
    """The cells of `agents` on `envs` (xlvin-all where it runs: `runs_on`), seed by seed: cut
    short, every env and agent has the same seeds. One UserError when none is left, before
    anything is made."""
    if not seeds or min(seeds) < 0:
        raise UserError(f"training seeds must be >= 0, and at least one, got {seeds}")
    chosen = [Cell(env, agent, seed, budget_steps(env, budget))
              for seed in seeds for env in envs for agent in agents if runs_on(env, agent)]
    if not chosen:
        raise UserError(f"xlvin-all expands all {BINS} ^ d joint actions, which only fits envs "
                        f"with at most {MAX_FULL_EXPANSION}: none of {', '.join(envs)}")
    return chosen


def cells_from_options(envs: str, agents: str, seeds: int, first_seed: int,
                       budget: str) -> list[Cell]:
    """`cells` of the comma-separated --envs and --agents, each checked (one UserError), and
    MuJoCo envs only where the `mujoco` package is installed."""
    chosen = cells(csv_choices(envs, tuple(ENVS), "environment"),
                   csv_choices(agents, tuple(AGENTS), "agent"),
                   list(range(first_seed, first_seed + seeds)), check_budget(budget))
    if any(ENVS[c.env].mujoco for c in chosen) and importlib.util.find_spec("mujoco") is None:
        raise UserError("the MuJoCo envs need the mujoco package: pip install 'gymnasium[mujoco]'")
    return chosen


def status(cell: Cell, root: Path) -> str:
    """finished, started (a run directory with a config: training, or interrupted and to
    resume) or pending."""
    run_dir = cell.run_dir(root)
    if is_finished(run_dir):
        return "finished"
    return "started" if (run_dir / CONFIG).is_file() else "pending"


def run_cell(cell: Cell, root: Path) -> dict[str, Any]:
    """Train and evaluate one cell unless finished (`finish_run`); its record."""
    finish_run(cell.run_dir(root), cell.config(), EVAL_EPISODES, EVAL_SEED)
    return cell_record(cell, root)


def cell_record(cell: Cell, root: Path) -> dict[str, Any]:
    """A finished cell's final return and what it trained on; a run of another cell (another
    seed, env or agent), copied or moved in, is one UserError."""
    run_dir = cell.run_dir(root)
    others = [dataclasses.replace(cell, agent=agent).config() for agent in AGENTS]
    check_holds_run(run_dir, cell.config(), [*CELL_IDENTITY, *fields_apart(others)])
    with reading_results(run_dir):
        summary = read_sealed(run_dir / SUMMARY, run_dir)
        evaluation = read_sealed(run_dir / EVAL_FILE, run_dir)
        return {
            **dataclasses.asdict(cell),
            "final_return": evaluation["mean"],
            "final_return_std_over_episodes": evaluation["std"],
            "training_returns": summary["ppo"]["episode_returns"],
            "env_steps": summary["ppo"]["env_steps"],
            "transe_transitions": summary["transe_transitions"],
            "wall_seconds": summary["wall_seconds"],
            "train_seconds": summary["train_seconds"],
        }


# --------------------------------------------------------------------------- results


def aggregate(records: list[dict[str, Any]], unfinished: dict[Cell, str]) -> list[dict[str, Any]]:
    """One row per (env, steps, agent) with cells: the final return's IQM [95 % CI] over its
    finished seeds, P(> PPO) against PPO's finished seeds of the same env and steps, and its
    unfinished seeds ({seed: status})."""
    keys = {(r["env"], r["steps"], r["agent"]) for r in records}
    keys |= {(c.env, c.steps, c.agent) for c in unfinished}
    order = list(ENVS), list(AGENTS)
    rows = []
    for env, steps, agent in sorted(keys, key=lambda k: (order[0].index(k[0]), k[1],
                                                         order[1].index(k[2]))):
        mine = sorted((r for r in records if (r["env"], r["steps"], r["agent"]) == (env, steps, agent)),
                      key=lambda r: r["seed"])
        ppo = [r["final_return"] for r in records
               if (r["env"], r["steps"], r["agent"]) == (env, steps, BASELINE)]
        runs = [r["final_return"] for r in mine]
        row: dict[str, Any] = {
            "env": env, "steps": steps, "agent": agent, "seeds": [r["seed"] for r in mine],
            "unfinished": {str(c.seed): s for c, s in sorted(unfinished.items(), key=lambda kv: kv[0].seed)
                           if (c.env, c.steps, c.agent) == (env, steps, agent)},
            "final": {**summarize(np.array(runs)), "per_seed": runs} if runs else None,
            "wall_seconds_mean": float(np.mean([r["wall_seconds"] for r in mine])) if mine else None,
        }
        if agent != BASELINE and runs and ppo:
            row["over_ppo"] = {**improvement_over(runs, ppo), "ppo_seeds": len(ppo)}
        rows.append(row)
    return rows


def _unfinished_text(row: dict[str, Any]) -> str:
    return ", ".join(f"s{seed} ({state})" for seed, state in row["unfinished"].items()) or "-"


def markdown(rows: list[dict[str, Any]]) -> str:
    partial_table = any(r["unfinished"] for r in rows)
    lines = []
    if partial_table:
        cells_left = sum(len(r["unfinished"]) for r in rows)
        lines += [f"**Partial table: {cells_left} cells have not finished** (listed per row; "
                  "statistics are over the finished seeds only).", ""]
    for env, steps in dict.fromkeys((r["env"], r["steps"]) for r in rows):
        lines += [f"### {env}, {steps:,} env steps", "",
                  "| agent | seeds finished | final return: IQM [95 % CI] | mean +- std | "
                  "P(> PPO) [95 % CI] | minutes per cell | unfinished |",
                  "|---|---|---|---|---|---|---|"]
        for r in (r for r in rows if (r["env"], r["steps"]) == (env, steps)):
            s = r["final"]
            stat = "-" if s is None else f"**{iqm_text(s, 1)}**"
            spread = "-" if s is None else f"{s['mean']:.1f} +- {s['std']:.1f}"
            minutes = "-" if r["wall_seconds_mean"] is None else f"{r['wall_seconds_mean'] / 60:.1f}"
            lines.append(f"| {r['agent']} | {len(r['seeds'])} | {stat} | {spread} | "
                         f"{improvement_text(r.get('over_ppo'))} | {minutes} | "
                         f"{_unfinished_text(r)} |")
        skipped = [a for a in AGENTS if not runs_on(env, a)]
        if skipped:
            lines.append(f"\n{', '.join(skipped)}: not run, {BINS} ^ {ENVS[env].dims} = "
                         f"{joint_actions(env):,} joint actions a node (more than "
                         f"{MAX_FULL_EXPANSION}).")
        lines.append("")
    lines.append(
        f"Final return: the final greedy policy's mean over {EVAL_EPISODES} fresh episodes "
        f"(seeds {EVAL_SEED:,} on). IQM over training seeds with its 95 % bootstrap interval; "
        "P(> PPO): the probability that a seed of the agent beats a seed of PPO, with its "
        f"bootstrap interval. XLVIN: {BINS} bins a dimension, depth {DEPTH}, {EXPAND} joint "
        "actions a node for the sampled expansions. Minutes per cell: training and "
        "pre-training, on whatever else the machine ran. `xlvin reproduce continuous`; see "
        "`xlvin.experiments.continuous`.")
    return "\n".join(lines) + "\n"


def plot(rows: list[dict[str, Any]], path: Path) -> None:
    """One panel per (env, steps): every finished seed as a point per agent, the IQM with its
    95 % interval; the title says how many cells have not finished."""
    plt = pyplot()
    panels = list(dict.fromkeys((r["env"], r["steps"]) for r in rows))
    fig, axes = plt.subplots(1, len(panels), figsize=(5 * len(panels), 4), squeeze=False)
    for ax, (env, steps) in zip(axes[0], panels):
        part = [r for r in rows if (r["env"], r["steps"]) == (env, steps)]
        for i, r in enumerate(part):
            s = r["final"]
            if s is None:
                continue
            ax.scatter(i + np.linspace(-0.15, 0.15, len(s["per_seed"])), s["per_seed"], s=12,
                       color=f"C{i}", alpha=0.7)
            ax.errorbar(i, s["iqm"], yerr=[[s["iqm"] - s["iqm_low"]], [s["iqm_high"] - s["iqm"]]],
                        fmt="_", color="black", markersize=16, capsize=4)
        ax.set_xticks(range(len(part)), [textwrap.fill(r["agent"], 10) for r in part], fontsize=8)
        left = sum(len(r["unfinished"]) for r in part)
        ax.set_title(f"{env}, {steps:,} steps" + (f" (partial: {left} cells unfinished)" if left
                                                  else ""), fontsize=9)
        ax.set_ylabel("final greedy return: seeds, IQM, 95 % CI")
        ax.grid(axis="y", alpha=0.3)
    fig.tight_layout()
    atomic_savefig(fig, path, dpi=110)
    plt.close(fig)


def kept_rows(results: Path, rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The rows of an earlier RESULTS/continuous.json for the (env, steps) `rows` do not bring
    (run elsewhere, or by another invocation's --envs)."""
    return kept(results / "continuous.json", "rows", rows, lambda r: (r["env"], r["steps"]), ROW)


def write_results(records: list[dict[str, Any]], results: Path,
                  unfinished: dict[Cell, str] | None = None, include_running: bool = False,
                  wall_seconds: float | None = None) -> str:
    """RESULTS/continuous.{md,json,png} of the finished cells' `records`, beside the kept rows
    of other (env, steps) (`kept_rows`). `unfinished` ({cell: status}) cells are refused (one
    UserError) unless `include_running`, and then named in every output."""
    unfinished = unfinished or {}
    if unfinished and not include_running:
        raise UserError(f"{len(unfinished)} cells have not finished (first: "
                        f"{next(iter(unfinished)).run_dir('')}): finish them, or ask for a "
                        "partial table with --include-running")
    if not records:
        raise UserError(f"none of the {len(unfinished)} cells has finished")
    rows = aggregate(records, unfinished)
    order = list(ENVS)
    rows = sorted(kept_rows(results, rows) + rows,
                  key=lambda r: (order.index(r["env"]), r["steps"], list(AGENTS).index(r["agent"])))
    md = markdown(rows)
    write_files(results, "continuous", md, {
        "partial": any(r["unfinished"] for r in rows),
        "settings": {"bins": BINS, "expand": EXPAND, "depth": DEPTH,
                     "eval_episodes": EVAL_EPISODES, "eval_seed": EVAL_SEED,
                     "transe": dataclasses.asdict(TRANSE),
                     "envs": {e: {"ppo": dataclasses.asdict(s.ppo), "gaussian": s.gaussian,
                                  "low_steps": s.steps} for e, s in ENVS.items()}},
        "machine": {"cpu": cpu_name(), "cpus": os.cpu_count(),
                    "load_average": [round(x, 2) for x in os.getloadavg()]},
        "wall_seconds": wall_seconds, "rows": rows, "runs": records})
    plot(rows, results / "continuous.png")
    return md


#: What the table and figure read of a row and a run kept from an earlier continuous.json
#: (`aggregate`, `cell_record`).
_CELL = {"env": one_of(ENVS), "steps": int, "agent": one_of(AGENTS)}
ROW = {**_CELL, "seeds": list, "unfinished": Each(str),
       "final": Nullable(interval({"mean": float, "std": float, "per_seed": [float]})),
       "wall_seconds_mean": Nullable(float), "over_ppo": Optional(IMPROVEMENT)}
RUN = {**_CELL, "seed": int, "final_return": float, "wall_seconds": float}


def read_earlier(results: Path) -> None:
    """Read what RESULTS/continuous.json keeps (one UserError if it is corrupt)."""
    kept_rows(results, [])
    kept_runs(results, [])


def kept_runs(results: Path, cells: list[Cell]) -> list[dict[str, Any]]:
    """The records an earlier RESULTS/continuous.json holds of `cells` (finished elsewhere, or
    on a machine whose run directories are gone), so that results gathered over several
    machines add up."""
    path = results / "continuous.json"
    if not path.is_file():
        return []
    wanted = set(cells)
    with reading_results(path):
        return [r for r in check_entries(read_json(path), "runs", RUN) if Cell.of(r) in wanted]


def table(chosen: list[Cell], runs: Path, results: Path, include_running: bool = False,
          wall_seconds: float | None = None) -> str:
    """`write_results` of the cells' finished records under `runs`, and of the records
    RESULTS/continuous.json already holds of the others (`kept_runs`); the rest are named by
    their status (refused unless `include_running`); returns the markdown."""
    states = {c: status(c, runs) for c in chosen}
    records = [cell_record(c, runs) for c, state in states.items() if state == "finished"]
    records += kept_runs(results, [c for c, state in states.items() if state != "finished"])
    recorded = {Cell.of(r) for r in records}
    unfinished = {c: state for c, state in states.items() if c not in recorded}
    return write_results(records, results, unfinished, include_running, wall_seconds)


def reproduce(envs: str = ",".join(CLASSIC), agents: str = ",".join(AGENTS), seeds: int = 5,
              first_seed: int = 0, budget: str = "low", runs: Path = Path("runs/continuous"),
              results: Path = Path("results"), jobs: int = 2,
              include_running: bool = False) -> str:
    """The experiment from Python, as `xlvin reproduce continuous`: train every cell not yet
    finished (with `include_running`, none: the finished ones are tabled, the others named),
    then write the results; returns the markdown."""
    chosen = cells_from_options(envs, agents, seeds, first_seed, budget)
    if not include_running:
        run_cells(EXPERIMENT, chosen, runs, jobs, "continuous-action cells")
    return table(chosen, runs, results, include_running)


def _add_options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--envs", default=",".join(CLASSIC),
                        help=f"comma-separated environments of {', '.join(ENVS)} (default "
                        f"{','.join(CLASSIC)})")
    parser.add_argument("--agents", default=",".join(AGENTS),
                        help=f"comma-separated agents (default {','.join(AGENTS)}; "
                        "xlvin-all only where every joint action fits)")
    parser.add_argument("--budget", default="low",
                        help="env steps a cell: low (default: " + ", ".join(
                            f"{e} {s.steps:,}" for e, s in ENVS.items())
                        + f"), paper ({PAPER_STEPS:,}, the authors' MuJoCo budget) or a number")


def _report(chosen: list[Cell], trained: list[dict[str, Any]] | None, wall: float | None,
            args: argparse.Namespace) -> str:
    return (table(chosen, args.runs, args.results, args.include_running, wall)
            + f"\nwrote {args.results}/continuous.md, .json, .png; runs under {args.runs}")


#: `xlvin reproduce continuous` (`xlvin.experiments.registry`).
EXPERIMENT = Experiment(
    help="beyond the paper: XLVIN (each tree expansion) vs PPO on continuous actions",
    description=__doc__ or "",
    cells=lambda seeds, args: cells_from_options(args.envs, args.agents, seeds, args.first_seed,
                                                 args.budget),
    run_cell=run_cell, runs=Path("runs/continuous"), seeds=5, add_options=_add_options,
    prepare=table1.prepare, finished_help=None, report=_report, read_earlier=read_earlier,
    include_running="train nothing: write the results of the finished cells, naming every cell "
    "still training or not started",
    progress=lambda args: "continuous-action cells",
    postfix=lambda r: f"{r['env']} {r['agent']} s{r['seed']}: {r['final_return']:.1f}",
)


def _versus_ppo(row: dict[str, Any], ppo: dict[str, Any]) -> str:
    """`xlvin.wording.compare` of an expansion's final return with PPO's on its env."""
    return compare(row["agent"], "PPO", protocol=f"{row['steps']:,} steps",
                   seeds=f"{len(row['seeds'])} seeds each, final return",
                   iqms=(row["final"]["iqm"], ppo["final"]["iqm"]), improvement=row["over_ppo"],
                   counts=(len(row["seeds"]), len(ppo["seeds"])))


def page_blocks(results: Path) -> dict[str, str]:
    """The result blocks of README.md and docs/continuous.md (`xlvin.experiments.pages`): every
    expansion against PPO on every env, and the README's line (each env's best expansion)."""
    rows = [r for r in read_json(results / "continuous.json")["rows"] if r["final"] is not None]
    envs = list(dict.fromkeys(r["env"] for r in rows))
    ppo = {r["env"]: r for r in rows if r["agent"] == BASELINE}
    xlvin = {env: [r for r in rows if r["env"] == env and "over_ppo" in r] for env in envs}
    best = {env: max(xlvin[env], key=lambda r: r["final"]["iqm"]) for env in envs}
    seeds = sorted({len(r["seeds"]) for r in rows})
    return {
        "continuous-headline": (
            f"{'-'.join(map(str, seeds))} seeds, each env's best expansion (final return IQM): "
            + "; ".join(f"{env}: {_versus_ppo(best[env], ppo[env])}" for env in envs)),
        "continuous-page": "\n".join(
            f"- **{env}** (PPO's final return {iqm_text(ppo[env]['final'], 1)}): "  # noqa: E501
            + "; ".join(_versus_ppo(r, ppo[env]) for r in xlvin[env]) + "."
            for env in envs),
    }


def mujoco_blocks(results: Path) -> dict[str, str]:
    """docs/continuous.md's per-env tables and its reading of the MuJoCo cells, seed by seed
    (results/continuous.json's rows and runs), beside the authors' code on HalfCheetah
    (results/authors-code/continuous.json)."""
    data = read_json(results / "continuous.json")
    tables = markdown(data["rows"]).split("Final return: ")[0].strip()
    runs = data["runs"]

    def finals(env: str, agent: str) -> list[float]:
        return [r["final_return"] for r in sorted(runs, key=lambda r: r["seed"])
                if (r["env"], r["agent"]) == (env, agent)]

    def span(values: list[float]) -> str:
        return f"{min(values):.1f} to {max(values):.1f}"

    hop, cheetah = "Hopper-v5", "HalfCheetah-v5"
    sampled = [a for a in AGENTS if a != BASELINE and runs_on(hop, a) and finals(hop, a)]
    above = [(a, v) for a in sampled for v in finals(hop, a) if v > min(finals(hop, BASELINE))]
    theirs = {r["agent"]: r for r in read_json(results / "authors-code/continuous.json")["rows"]
              if r["env"] == "halfcheetah"}
    expansions = [v for a in sampled for v in finals(cheetah, a)]
    steps = next(r["steps"] for r in data["rows"] if r["env"] == hop)
    prose = (
        f"On MuJoCo, at {steps:,} steps, Hopper-v5's per-seed finals: PPO "
        + ", ".join(f"{v:.1f}" for v in finals(hop, BASELINE)) + "; "
        + ", ".join(f"`{a.removeprefix('xlvin-')}` {span(finals(hop, a))}" for a in sampled)
        + f"; XLVIN seeds above PPO's lowest seed: {len(above)}. On HalfCheetah-v5 PPO's seeds "
        f"end at "
        + ", ".join(f"{v:.1f}" for v in finals(cheetah, BASELINE))
        + f", the expansions' seeds at {span(expansions)} "
        f"({sum(v > 0 for v in expansions)} of {len(expansions)} positive). The authors' own "
        f"code on HalfCheetah at the same steps ([its page](continuous-authors.md)): last-100 "
        f"training mean IQM, PPO {theirs['ppo']['last100']['iqm']:.1f}, XLVIN "
        f"{theirs['xlvin']['last100']['iqm']:.1f}.")
    minutes = {kind: [r["wall_seconds"] / 60 for r in runs
                      if (r["agent"] == BASELINE) == (kind == "PPO")] for kind in ("PPO", "XLVIN")}
    ppo1 = next(r for r in runs if (r["env"], r["agent"], r["seed"]) == (cheetah, BASELINE, 1))
    speed = (
        f"MuJoCo cells' wall time as recorded: XLVIN {min(minutes['XLVIN']):.1f}-"
        f"{max(minutes['XLVIN']):.1f} minutes a cell, PPO {min(minutes['PPO']):.1f}-"
        f"{max(minutes['PPO']):.1f}. PPO's seed 1 on HalfCheetah-v5 ran on both machines and "
        f"ended at the same final return to the last digit ({ppo1['final_return']!r}).")
    return {"continuous-tables": tables, "continuous-mujoco": prose, "continuous-speed": speed}
