"""The paper's mazes (section 4.1, figures 2, 7 and 9): the continual maze on 8x8 VIN gridworlds,
evaluated after every passed level on held-out 8x8 mazes and on 16x16 mazes (out of
distribution), and the contextual maze (appendix F).

Every cell (experiment, agent, seed) is one curriculum run (`xlvin.ppo.curriculum`) in
ROOT/EXPERIMENT/AGENT/seedS (vin-mean and vin-max in vin_mean and vin_max, their first spelling:
`DIR_NAMES`); a finished cell (summary.json present) is never re-run, an
interrupted one resumes from its checkpoint. Each agent is trained by the library's one PPO
with the same settings (`MAZE_PPO`): the comparison is fair.

Settings that are ours, not the paper's (it does not give them): PPO with 32 envs x 32 steps a
rollout (1,024 steps an update; maze episodes last a few steps, and 32 envs act in one forward
where 8 x 128 took 1.9x longer per step for VIN here), 4 epochs x 4 minibatches, GAE, Adam lr
1e-3 held constant (a curriculum has no known end to anneal to; the authors' later code also
uses 1e-3). Held-out evaluations play at most
`eval_per_level` starts of each level (seeded, the same for every agent); a figure's "all levels"
success weights each level by its share of the whole held-out split, as if every start were
played.
"""

import argparse
import dataclasses
import json
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from xlvin.config import add_options, from_args
from xlvin.envs.maze import CONTEXTUAL_MAZE_ID, MAZE_ID
from xlvin.envs.maze_data import maze_split
from xlvin.errors import UserError
from xlvin.experiments.figures import pyplot
from xlvin.experiments.jobs import has_passed
from xlvin.io.checkpoint import CHECKPOINT, read_loop_state
from xlvin.io.digests import read_sealed
from xlvin.io.files import atomic_savefig, atomic_write_text, prepare_results, read_json
from xlvin.io.run_dir import CONFIG, SUMMARY, claim_run_dir, reading_results, write_json
from xlvin.process import quiet_known_warnings
from xlvin.run.agents import resolve_agent, resolve_agents
from xlvin.ppo.curriculum import CurriculumConfig
from xlvin.ppo.update import PPOConfig
from xlvin.run.training import (
    CELL_IDENTITY,
    check_holds_run,
    fields_apart,
    prepare_executors,
    train_run,
)
from xlvin.run.config import RunConfig, TrainConfig
from xlvin.run.checks import check_device

#: Experiments: name -> (env id, default agents).
EXPERIMENTS = {
    "maze": (MAZE_ID, ("xlvin", "vin", "vin-mean", "vin-max", "gvin", "ppo")),
    "contextual-maze": (CONTEXTUAL_MAZE_ID, ("xlvin", "vin", "ppo")),
}
#: Agents: name -> TrainConfig overrides. `ppo` is the paper's maze encoder (128 channels);
#: `ppo-32` our declared CPU preset of it (32 channels), the same network otherwise. `xlvin` is
#: the paper's maze XLVIN (section 4.1): that encoder (k = 10), transition hidden 128, the maze
#: executor (H = 10, LayerNorm, pre-trained on the training mazes' graphs), the full tree of
#: depth K = 4 over the 8 actions, TransE weight 0.001; `xlvin-k1` and `xlvin-k2` the same at
#: K = 1 and 2 (the authors' later code defaults to K = 1); `xlvin-b2` ours, not the paper's:
#: K = 4 with only the 2 actions a distilled rollout policy ranks highest expanded below depth 1.
#: `xlvin-32*`: the same agents with the CPU preset's 32-wide encoder and transition, as `ppo-32`
#: (here `xlvin-32-b2` trains at ~5x the steps/s of `xlvin-b2`, the full `xlvin-32` at ~1/9 of
#: `xlvin-32-b2`'s). The executor ablation (`xlvin.experiments.maze_ablation`) takes
#: `xlvin-32-b2` apart: its executor untrained (`-untrained`), pre-trained on XLVIN-R's random
#: graphs instead of mazes (`-random`), or its output chi replaced by zeros (`-zero-chi`); and
#: `ppo-32-transe`, PPO-32 with the TransE term (a transition model trained by it alone, no tree).
_XLVIN = {"agent": "xlvin", "executor": "maze"}
AGENTS: dict[str, dict[str, Any]] = {
    "vin": {"agent": "vin"},
    "vin-mean": {"agent": "vin-mean"},
    "vin-max": {"agent": "vin-max"},
    "gvin": {"agent": "gvin"},
    "ppo": {"agent": "ppo"},
    "ppo-32": {"agent": "ppo", "hidden": 32},
    "xlvin": {**_XLVIN, "depth": 4},
    "xlvin-k1": {**_XLVIN, "depth": 1},
    "xlvin-k2": {**_XLVIN, "depth": 2},
    "xlvin-b2": {**_XLVIN, "depth": 4, "prune": 2},
    "xlvin-32": {**_XLVIN, "depth": 4, "hidden": 32},
    "xlvin-32-k1": {**_XLVIN, "depth": 1, "hidden": 32},
    "xlvin-32-k2": {**_XLVIN, "depth": 2, "hidden": 32},
    "xlvin-32-b2": {**_XLVIN, "depth": 4, "prune": 2, "hidden": 32},
    "xlvin-32-b2-untrained": {**_XLVIN, "depth": 4, "prune": 2, "hidden": 32,
                              "executor": "maze-untrained"},
    "xlvin-32-b2-random": {**_XLVIN, "depth": 4, "prune": 2, "hidden": 32,
                           "executor": "maze-random"},
    "xlvin-32-b2-zero-chi": {**_XLVIN, "depth": 4, "prune": 2, "hidden": 32, "zero_chi": True},
    "ppo-32-transe": {"agent": "ppo", "hidden": 32, "ppo_transe": True},
}


def _note(overrides: dict[str, Any]) -> str:
    """The settings of an agent that are ours, not the paper's: pruning, the CPU width and the
    ablations."""
    parts = [f"pruned b = {overrides['prune']} (ours)"] if overrides.get("prune") else []
    if overrides.get("hidden"):
        parts.append(f"{overrides['hidden']} channels (CPU preset)")
    ablations = {"maze-untrained": "untrained executor", "maze-random": "executor of random graphs"}
    if overrides.get("executor") in ablations:
        parts.append(ablations[overrides["executor"]])
    if overrides.get("zero_chi"):
        parts.append("chi = 0")
    if overrides.get("ppo_transe"):
        parts.append("+ TransE term")
    return ", ".join(parts)


#: A cell's directory name where it is not the agent's name: the spelling of the runs made
#: before the canonical names (kept, so that they resume and are found).
DIR_NAMES = {"vin-mean": "vin_mean", "vin-max": "vin_max"}
#: What the figures add to an agent's name: the settings that are ours, not the paper's.
AGENT_NOTES = {name: _note(o) for name, o in AGENTS.items() if _note(o)}
#: The PPO every maze agent trains with (module docstring).
MAZE_PPO = PPOConfig(num_envs=32, num_steps=32, lr=1e-3, anneal_lr=False)
#: `--quick`: level 1 only, passed at 80 % of a window of 100 episodes, 20,000 episodes allowed,
#: 20 held-out starts per level: a minute or two on two cores, for trying the pipeline (and the
#: tests), not results.
QUICK = CurriculumConfig(last_level=1, window=100, threshold=0.8, budget=20_000, eval_per_level=20)


@dataclass(frozen=True)
class Cell:
    experiment: str
    agent: str
    seed: int
    curriculum: CurriculumConfig = field(default_factory=CurriculumConfig)
    device: str = "cpu"  # where it trains (part of its config: a run resumes on its device)

    def __post_init__(self) -> None:
        object.__setattr__(self, "agent", resolve_agent(self.agent, tuple(AGENTS)))

    def run_dir(self, root: Path) -> Path:
        agent = DIR_NAMES.get(self.agent, self.agent)
        return Path(root) / self.experiment / agent / f"seed{self.seed}"

    def config(self) -> RunConfig:
        env, _ = EXPERIMENTS[self.experiment]
        train = TrainConfig(env=env, seed=self.seed, protocol="curriculum", checkpoint_every=50,
                            device=self.device, **AGENTS[self.agent])
        return RunConfig(train=train, ppo=MAZE_PPO, curriculum=self.curriculum)


def make_cells(
    experiment: str, agents: list[str], seeds: int, first_seed: int, curriculum: CurriculumConfig,
    device: str = "cpu",
) -> list[Cell]:
    """The cells of seeds first_seed .. first_seed + seeds - 1 (checked before anything runs)."""
    if seeds < 1 or first_seed < 0:
        raise UserError("--seeds must be >= 1 and --first-seed >= 0")
    check_device(device)
    cells = [Cell(experiment, agent, seed, curriculum, device)
             for agent in agents for seed in range(first_seed, first_seed + seeds)]
    for cell in cells:
        cell.config().curriculum.levels()  # mazes with the levels asked for
    return cells


def add_cell_options(parser: argparse.ArgumentParser, experiment: str) -> None:
    """The options that choose an experiment's cells besides --seeds (`xlvin reproduce
    EXPERIMENT`, `xlvin sweep EXPERIMENT`)."""
    _, agents = EXPERIMENTS[experiment]
    parser.add_argument("--agents", default="",
                        help=f"comma-separated agents of {', '.join(AGENTS)} "
                        f"(default {','.join(agents)}; older spellings such as vin_mean are "
                        "accepted)")
    parser.add_argument("--quick", action="store_true",
                        help="a small curriculum to try the pipeline in minutes (not results): "
                        "level 1 only, pass at 80 %% of 100 episodes, 20,000 episodes allowed")
    parser.add_argument("--device", default="cpu", help="torch device: cpu (default) or cuda[:N]")
    add_options(parser, CurriculumConfig)


def cells_from_options(
    experiment: str, seeds: int, args: argparse.Namespace, first_seed: int = 0
) -> list[Cell]:
    """The cells of `experiment` for the options of `add_cell_options`."""
    curriculum = from_args(CurriculumConfig, args, QUICK if args.quick else CurriculumConfig())
    _, default_agents = EXPERIMENTS[experiment]
    agents = resolve_agents(args.agents or ",".join(default_agents), tuple(AGENTS))
    return make_cells(experiment, agents, seeds, first_seed, curriculum, args.device)


def prepare(cells: list[Cell]) -> list[Path]:
    """The maze executor the XLVIN cells need, pre-trained once before their workers start
    (`prepare_executors`); its file (a sweep copies it to its nodes)."""
    return prepare_executors(c.config().train for c in cells)


def is_finished(run_dir: Path) -> bool:
    return (run_dir / SUMMARY).is_file()


def has_checkpoint(run_dir: Path) -> bool:
    return (run_dir / CHECKPOINT).is_file()


def run_cell(cell: Cell, root: Path, deadline: float | None = None) -> dict[str, Any] | None:
    """Train one cell's curriculum unless it has finished (resuming an interrupted one) until
    it ends or `deadline` (a `time.time()` value) passes; its record so far (`record_so_far`).
    A cell whose turn comes after the deadline is not started: None unless it already had a
    record. The cell is claimed while it trains: one running elsewhere is one UserError."""
    run_dir = cell.run_dir(root)
    if not has_passed(deadline):
        quiet_known_warnings()
        with claim_run_dir(run_dir):
            if not is_finished(run_dir):
                train_run(cell.config(), run_dir, progress=False,
                          resume=(run_dir / CONFIG).is_file(), deadline=deadline,
                          pretrain_progress=False)
    return record_so_far(cell, run_dir)


def record_so_far(cell: Cell, run_dir: Path) -> dict[str, Any] | None:
    """The cell's record if it has finished, its progress if it has a checkpoint, else None."""
    if is_finished(run_dir):
        return cell_record(cell, run_dir)
    return running_record(cell, run_dir) if has_checkpoint(run_dir) else None


def check_holds_cell(cell: Cell, run_dir: Path) -> None:
    """Refuse, in one line, a directory that holds another cell's run: another seed, env or
    agent (any setting in which the experiment's agents differ), copied or moved in."""
    others = [dataclasses.replace(cell, agent=agent).config() for agent in AGENTS]
    check_holds_run(run_dir, cell.config(), [*CELL_IDENTITY, *fields_apart(others)])


def cell_record(cell: Cell, run_dir: Path) -> dict[str, Any]:
    """What a cell's curriculum did: each level tried (passed or failed, episodes, steps,
    held-out success after a pass), its totals and wall time; a run of another cell is one
    UserError (`check_holds_cell`)."""
    check_holds_cell(cell, run_dir)
    with reading_results(run_dir):
        summary = read_sealed(run_dir / SUMMARY, run_dir)
        return _record(cell, summary["curriculum"], summary["ppo"], summary["wall_seconds"], None)


def running_record(cell: Cell, run_dir: Path) -> dict[str, Any]:
    """The record of a cell still training, from its last checkpoint: the levels it has passed
    so far, and the level it is on (`in_progress`: level, episodes, window success)."""
    loop = read_loop_state(run_dir / CHECKPOINT)
    state = loop["data"]["curriculum"]
    window = state["window"]
    current = {"level": state["levels"][state["index"]], "episodes": state["episodes"],
               "window_success": float(np.mean(window)) if window else 0.0}
    result = loop["result"]
    return _record(cell, state["history"], result, result["wall_time_s"], current)


def _record(cell: Cell, history: list[dict[str, Any]], ppo: dict[str, Any], wall: float,
            in_progress: dict[str, Any] | None) -> dict[str, Any]:
    failed = [h["level"] for h in history if not h["passed"]]
    return {
        "experiment": cell.experiment, "agent": cell.agent, "seed": cell.seed,
        "curriculum": dataclasses.asdict(cell.curriculum),
        "levels": history,
        "levels_passed": [h["level"] for h in history if h["passed"]],
        "failed_level": failed[0] if failed else None,
        "in_progress": in_progress,
        "env_steps": ppo["env_steps"],
        "steps_per_second": ppo["sps"] if in_progress is None else ppo["env_steps"] / max(wall, 1e-9),
        "episodes": ppo["episodes"],
        "wall_seconds": wall,
    }


# --------------------------------------------------------------------------- results


def weighted_all(rates: dict[str, float], counts: dict[int, int]) -> float:
    """Success over a whole held-out split from per-level rates: each level weighted by its
    count of starts in the split (levels without a rate are skipped)."""
    levels = [d for d in counts if str(d) in rates]
    total = sum(counts[d] for d in levels)
    return sum(rates[str(d)] * counts[d] for d in levels) / total


def held_out_counts(curriculum: dict[str, Any]) -> dict[str, dict[int, int]]:
    """{side: {level: starts}} of the held-out splits a curriculum evaluates on."""
    splits = CurriculumConfig(**curriculum).held_out_splits()
    return {str(size): mazes.level_counts() for size, mazes in splits.items()}


def curves(records: list[dict[str, Any]]) -> dict[str, Any]:
    """Per experiment, agent and held-out side: the success over the whole held-out split after
    passing each level, per seed (None after a failure), the failures, and the seeds still
    training."""
    out: dict[str, Any] = {}
    for r in records:
        counts = held_out_counts(r["curriculum"])
        for side, per_level in counts.items():
            row = out.setdefault(r["experiment"], {}).setdefault(side, {}).setdefault(
                r["agent"], {"seeds": [], "after_level": {}, "failed_at": {}, "running": []})
            row["seeds"].append(r["seed"])
            if r.get("in_progress") is not None:
                row["running"].append(r["seed"])
            for h in r["levels"]:
                if h["passed"]:
                    value = weighted_all(h["held_out"][side], per_level)
                    row["after_level"].setdefault(str(h["level"]), {})[str(r["seed"])] = value
            if r["failed_level"] is not None:
                row["failed_at"][str(r["seed"])] = r["failed_level"]
    return out


def level_costs(records: list[dict[str, Any]]) -> list[str]:
    """Per experiment, agent and level tried: how many seeds passed it of those that tried it,
    and the median (min - max) episodes and env steps it took; the wall time is estimated from
    each run's mean steps/s (runs log no per-level clock)."""
    lines = [("What each level cost, over the seeds that tried it (wall: env steps / the run's "
              "mean steps/s)"), "",
             ("| experiment | agent | level | passed / tried | episodes, median (min - max) | "
              "env steps, median (min - max) | wall, median (min) |"),
             "|---|---|---|---|---|---|---|"]
    tried: dict[tuple[str, str, int], list[tuple[dict[str, Any], float]]] = {}
    for r in records:
        for h in r["levels"]:
            tried.setdefault((r["experiment"], r["agent"], h["level"]), []).append(
                (h, r["steps_per_second"]))
    for (experiment, agent, level), runs in sorted(
            tried.items(), key=lambda kv: (kv[0][0], list(AGENTS).index(kv[0][1]), kv[0][2])):
        episodes = [h["episodes"] for h, _ in runs]
        steps = [h["env_steps"] for h, _ in runs]
        wall = [h["env_steps"] / sps / 60 for h, sps in runs]
        lines.append(f"| {experiment} | {agent} | {level} | {sum(h['passed'] for h, _ in runs)} / "
                     f"{len(runs)} | {np.median(episodes):,.0f} ({min(episodes):,} - "
                     f"{max(episodes):,}) | {np.median(steps):,.0f} ({min(steps):,} - "
                     f"{max(steps):,}) | {np.median(wall):.1f} |")
    return lines


def table_head(first: str, columns: list[str]) -> list[str]:
    """The header and rule of a markdown table of a `first` column and one per `columns`."""
    return [f"| {first} | " + " | ".join(columns) + " |", "|---|" + "---|" * len(columns)]


def markdown(records: list[dict[str, Any]], wall_seconds: float | None) -> str:
    """Per cell: levels passed, the failed level, env steps, wall; per level: the seeds that
    passed it and its cost; then the held-out success after each passed level (mean over seeds
    that passed it)."""
    lines = [("| experiment | agent | seed | levels passed | failed at level | env steps | "
             "episodes | wall (s) | steps/s |"), "|---|---|---|---|---|---|---|---|---|"]
    for r in sorted(records, key=lambda r: (r["experiment"], list(AGENTS).index(r["agent"]),
                                            r["seed"])):
        passed = r["levels_passed"]
        span = f"{passed[0]}-{passed[-1]}" if passed else "none"
        now = r.get("in_progress")
        if now is not None:
            span += (f" (still training on level {now['level']}: {now['episodes']:,} episodes, "
                     f"{100 * now['window_success']:.1f} % of the window)")
        lines.append(f"| {r['experiment']} | {r['agent']} | {r['seed']} | {span} | "
                     f"{r['failed_level'] or '-'} | {r['env_steps']:,} | {r['episodes']:,} | "
                     f"{r['wall_seconds']:.0f} | {r['steps_per_second']:,.0f} |")
    lines += ["", *level_costs(records)]
    for experiment, sides in curves(records).items():
        for side, agents in sides.items():
            levels = sorted({int(d) for a in agents.values() for d in a["after_level"]})
            if not levels:
                lines += ["", f"{experiment}: no agent passed a level; no held-out evaluation."]
                break
            lines += ["", (f"{experiment}: held-out {side}x{side} success (all levels) after "
                      "passing each level, mean over the seeds that passed it (n)"), "",
                      *table_head("agent", [f"level {d}" for d in levels])]
            for agent, row in agents.items():
                cells = []
                for d in levels:
                    values = list(row["after_level"].get(str(d), {}).values())
                    cells.append(f"{100 * np.mean(values):.1f} % ({len(values)})" if values else "-")
                lines.append(f"| {agent} | " + " | ".join(cells) + " |")
    config = records[0]["curriculum"]
    lines += ["", (f"Curriculum: levels {config['first_level']}-{config['last_level'] or 'max'}, "
              f"pass at {100 * config['threshold']:.0f} % of the last {config['window']:,} "
              f"episodes, budget {config['budget']:,} episodes a level, held-out starts per level "
              f"{config['eval_per_level'] or 'all'}; PPO: {MAZE_PPO.num_envs} envs x "
              f"{MAZE_PPO.num_steps} steps, lr {MAZE_PPO.lr} constant (ours).")]
    if wall_seconds is not None:
        lines.append(f"Wall time of this invocation: {wall_seconds:.0f} s.")
    return "\n".join(lines) + "\n"


def write_results(records: list[dict[str, Any]], results: Path, wall_seconds: float | None) -> str:
    """RESULTS/maze.{md,json} (every experiment's records and curves) and the figures: maze_8x8
    and maze_16x16 (figure 2), contextual_maze (figure 9; contextual_maze_16x16 beside it),
    maze_stats (figure 7). Records of an
    experiment already in maze.json and not in `records` are kept."""
    prepare_results(results)
    path = results / "maze.json"
    kept = []
    if path.is_file():
        with reading_results(path):
            kept = [dict(r) for r in read_json(path)["runs"]]
        legacy = {old: name for name, old in DIR_NAMES.items()}
        for r in kept:  # written before the canonical names: vin_mean is vin-mean
            r["agent"] = legacy.get(r["agent"], r["agent"])
    mine = {(r["experiment"], r["agent"], r["seed"]) for r in records}
    records = [r for r in kept if (r["experiment"], r["agent"], r["seed"]) not in mine] + records
    md = markdown(records, wall_seconds)
    atomic_write_text(results / "maze.md", md)
    curve_data = curves(records)
    write_json(path, {"curves": curve_data, "runs": records})
    budget = records[0]["curriculum"]["budget"]
    for experiment, sides in curve_data.items():
        for side, agents in sides.items():
            name = (f"maze_{side}x{side}" if experiment == "maze" else
                    "contextual_maze" + ("" if side == "8" else f"_{side}x{side}"))
            plot_curves(agents, side, experiment, budget, results / f"{name}.png")
    plot_stats(records[0]["curriculum"], results / "maze_stats.png")
    return md


def plot_curves(agents: dict[str, Any], side: str, experiment: str, budget: int, path: Path) -> None:
    """Held-out success after each passed level, one line per agent (mean over seeds, every seed
    a dot), a cross where a seed failed a level (paper figures 2 and 9)."""
    plt = pyplot()
    from matplotlib.ticker import MaxNLocator

    fig, ax = plt.subplots(figsize=(6.4, 4.2))
    for i, (agent, row) in enumerate(agents.items()):
        color = f"C{i}"
        levels = sorted(int(d) for d in row["after_level"])
        means = [np.mean(list(row["after_level"][str(d)].values())) for d in levels]
        n, running = len(row["seeds"]), len(row.get("running", []))
        seeds = f"{n} seed{'s' if n > 1 else ''}" + (f", {running} still training" if running else "")
        note = f", {AGENT_NOTES[agent]}" if agent in AGENT_NOTES else ""
        ax.plot(levels, means, "-o", color=color, markersize=4, label=f"{agent}{note} ({seeds})")
        for d in levels:
            values = list(row["after_level"][str(d)].values())
            ax.scatter([d] * len(values), values, color=color, s=8, alpha=0.4)
        shift = 0.15 * (i - (len(agents) - 1) / 2)  # agents failing one level side by side
        for level, count in Counter(row["failed_at"].values()).items():
            ax.scatter([level + shift], [0.0], marker="x", color=color, s=60)
            if count > 1:
                ax.annotate(str(count), (level + shift, 0.0), xytext=(0, 6),
                            textcoords="offset points", ha="center", fontsize=7, color=color)
    ax.xaxis.set_major_locator(MaxNLocator(integer=True))
    ax.set_xlabel("level passed (8x8 training mazes)")
    ax.set_ylabel(f"held-out success, {side}x{side} mazes")
    ax.set_ylim(-0.05, 1.05)
    title = "contextual maze" if experiment == "contextual-maze" else "continual maze"
    ax.set_title(f"{title}: held-out {side}x{side} after each level\n"
                 f"x: a level failed within {budget:,} episodes (with the number of seeds)\n"
                 f"every agent: PPO {MAZE_PPO.num_envs} envs x {MAZE_PPO.num_steps} steps, "
                 f"lr {MAZE_PPO.lr} constant", fontsize=9)
    ax.legend(fontsize=8)
    fig.tight_layout()
    atomic_savefig(fig, path, dpi=120)
    plt.close(fig)


def plot_stats(curriculum: dict[str, Any], path: Path) -> None:
    """Optimal path length histograms of the 8x8 training and held-out mazes and the 16x16
    held-out mazes (paper figure 7)."""
    plt = pyplot()
    from matplotlib.ticker import MaxNLocator

    cfg = CurriculumConfig(**curriculum)
    sets = [(f"{cfg.size}x{cfg.size} train", maze_split(cfg.size, "train", cfg.dataset, cfg.dataset_seed))]
    sets += [(f"{size}x{size} test", mazes) for size, mazes in cfg.held_out_splits().items()]
    fig, axes = plt.subplots(1, len(sets), figsize=(4 * len(sets), 3.2))
    for ax, (name, mazes) in zip(np.atleast_1d(axes), sets):
        counts = mazes.level_counts()
        ax.bar(list(counts), list(counts.values()))
        ax.set_yscale("log")
        ax.set_title(f"{name} ({len(mazes):,} starts)", fontsize=9)
        ax.xaxis.set_major_locator(MaxNLocator(integer=True))
        ax.set_xlabel("optimal path length (level)")
    np.atleast_1d(axes)[0].set_ylabel("starts")
    fig.suptitle(f"dataset: {cfg.dataset}", fontsize=9)
    fig.tight_layout()
    atomic_savefig(fig, path, dpi=120)
    plt.close(fig)
