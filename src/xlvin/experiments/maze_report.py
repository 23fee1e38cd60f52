"""The mazes' results (`xlvin.experiments.maze`'s records): per cell the levels passed, per
level what it cost, and the held-out success after each passed level over a whole held-out split
(each level weighted by its share of the split's starts); the tables and figures 2, 7 and 9."""

import dataclasses
import functools
import json
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

from xlvin.envs.maze_data import maze_split
from xlvin.experiments.figures import pyplot
from xlvin.experiments.maze import AGENT_NOTES, AGENTS, DIR_NAMES, MAZE_PPO
from xlvin.config import from_dict
from xlvin.experiments.results import kept, write_files
from xlvin.experiments.shapes import Each, Holds, Nullable, Optional, one_of
from xlvin.io.files import atomic_savefig, read_json
from xlvin.ppo.curriculum import CurriculumConfig
from xlvin.run.agents import resolve_agent
from xlvin.stats import improvement_over, iqm
from xlvin.wording import compare


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


def _cell_key(record: dict[str, Any]) -> tuple[str, str, int]:
    return record["experiment"], record["agent"], record["seed"]


#: A cell's agent as written before the canonical names (vin_mean) -> its name (vin-mean).
LEGACY = {old: name for name, old in DIR_NAMES.items()}


def _canonical(record: dict[str, Any]) -> dict[str, Any]:
    """A kept record with its agent's canonical name."""
    agent = record.get("agent")
    return {**record, "agent": LEGACY.get(agent, agent)} if isinstance(agent, str) else record


@functools.cache
def _curriculum_facts(curriculum: str) -> tuple[int, dict[str, dict[int, int]]]:
    """How many levels the curriculum (JSON) has, and {side: {level: held-out starts}}."""
    cfg = from_dict(CurriculumConfig, json.loads(curriculum), "curriculum")
    return len(cfg.levels()), held_out_counts(json.loads(curriculum))


def check_consistent(record: dict[str, Any]) -> None:
    """Refuse (ValueError) a record whose fields disagree where the reports read them together:
    its curriculum a valid one, every field of it given; a level passed without a held-out
    success on each held-out side, at a level of that side's split; a cell ended without a
    failed level whose last level is not passed; levels tried at no steps per second."""
    curriculum = record["curriculum"]
    missing = [f.name for f in dataclasses.fields(CurriculumConfig) if f.name not in curriculum]
    if missing:
        raise ValueError(f"curriculum: no field {missing[0]!r}")
    levels, counts = _curriculum_facts(json.dumps(curriculum, sort_keys=True))
    if levels < 1:
        raise ValueError("curriculum: no level")
    for i, h in enumerate(record["levels"]):
        for side, per_level in counts.items() if h["passed"] else ():
            rates = (h.get("held_out") or {}).get(side)
            if not isinstance(rates, dict) or not any(str(d) in rates for d in per_level):
                raise ValueError(f"levels[{i}]: passed, without a held-out success on its "
                                 f"{side}x{side} split")
    if record["in_progress"] is None and record["failed_level"] is None and not (
            record["levels"] and record["levels"][-1]["passed"]):
        raise ValueError("ended without a failed level, but its last level is not passed")
    if record["levels"] and not record["steps_per_second"] > 0:
        raise ValueError("steps_per_second: must be > 0 where levels were tried")


#: A level a cell tried (`xlvin.experiments.maze`'s history).
LEVEL = {"level": int, "passed": bool, "episodes": int, "env_steps": int,
         "held_out": Optional(Each(Each(float))), "seconds": Optional(float)}
#: What the reports read of a cell's record kept from an earlier maze.json (`maze.cell_record`).
RECORD_FIELDS = {
    "experiment": str, "agent": one_of(AGENTS), "seed": int, "curriculum": Each(object),
    "levels": [LEVEL], "levels_passed": [int], "failed_level": Nullable(int),
    "in_progress": Nullable({"level": int, "episodes": int, "window_success": float}),
    "env_steps": int, "steps_per_second": float, "episodes": int, "wall_seconds": float,
}
RECORD = Holds(RECORD_FIELDS, check_consistent)


def read_earlier(results: Path) -> list[dict[str, Any]]:
    """What RESULTS/maze.json keeps: its records (one UserError if it is corrupt: `RECORD`)."""
    return kept(results / "maze.json", "runs", [], _cell_key, RECORD, _canonical)


def recorded(results: Path) -> Callable[[Any], bool]:
    """Whether RESULTS/maze.json already holds a cell's (experiment, agent, seed), ended (a
    cell it holds still training, `--include-running`, trains on)."""
    held = {_cell_key(r) for r in read_earlier(results) if r["in_progress"] is None}
    return lambda cell: (cell.experiment, cell.agent, cell.seed) in held


def write_results(records: list[dict[str, Any]], results: Path, wall_seconds: float | None) -> str:
    """RESULTS/maze.{md,json} (every experiment's records and curves) and the figures: maze_8x8
    and maze_16x16 (figure 2), contextual_maze (figure 9; contextual_maze_16x16 beside it),
    maze_stats (figure 7). Records of an
    experiment already in maze.json and not in `records` are kept."""
    records = kept(results / "maze.json", "runs", records, _cell_key, RECORD, _canonical) + records
    md = markdown(records, wall_seconds)
    curve_data = curves(records)
    write_files(results, "maze", md, {"curves": curve_data, "runs": records})
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


#: The agents of the mazes page's table, in its order, with their names there.
PAGE_AGENTS = {"gvin": "GVIN", "ppo-32": "PPO, maze CNN 32 ch (CPU preset)", "vin": "VIN",
               "vin-mean": "VIN-mean", "vin-max": "VIN-max",
               "xlvin-32-b2": "XLVIN, pruned b = 2, 32 wide (ours)"}


def _levels_text(r: dict[str, Any]) -> str:
    """What one curriculum passed: 'all 10', '1-2, **failed 3**', '1-8, still training on 9'."""
    passed = r["levels_passed"]
    done = f"1-{max(passed)}, " if passed else ""
    if r["failed_level"] is not None:
        return f"{done}**failed {r['failed_level']}**"
    if r["in_progress"] is not None:
        return f"{done}still training on {r['in_progress']['level']}"
    return f"all {len(passed)}"


def _mean_after(side: dict[str, Any], level: int) -> float | None:
    seeds = side["after_level"].get(str(level))
    return float(np.mean(list(seeds.values()))) if seeds else None


def page_blocks(results: Path) -> dict[str, str]:
    """The result blocks of README.md and docs/mazes.md (`xlvin.experiments.pages`): the
    continual maze's table and headline, from maze.json's records and curves."""
    data = read_json(results / "maze.json")
    records = [_canonical(r) for r in data["runs"] if r["experiment"] == "maze"]
    sides = {side: {resolve_agent(a, tuple(AGENTS)): v for a, v in by_agent.items()}
             for side, by_agent in data["curves"]["maze"].items()}
    lines = table_head("agent", [
        "levels passed, by seed", "env steps a seed", "wall a seed",
        "held-out 8x8 after level 1 / 5 / 10 (mean of the seeds that passed it)",
        "held-out 16x16, best / after level 10"])
    for agent, label in PAGE_AGENTS.items():
        mine = sorted((r for r in records if r["agent"] == agent), key=lambda r: r["seed"])
        levels = [_levels_text(r) for r in mine]
        passed = " / ".join(levels) if len(set(levels)) > 1 else f"{levels[0]} x {len(levels)}"
        steps = [r["env_steps"] / 1e6 for r in mine]
        minutes = [r["wall_seconds"] / 60 for r in mine]
        eight = [_mean_after(sides["8"][agent], lv) for lv in (1, 5, 10)]
        sixteen = [v for lv in range(1, 11) if (v := _mean_after(sides["16"][agent], lv))]
        held8 = " / ".join(f"{100 * v:.1f}" for v in eight) + " %" if None not in eight else ""
        held16 = (f"{100 * max(sixteen):.0f} / {100 * _mean_after(sides['16'][agent], 10):.0f} %"
                  if sixteen and _mean_after(sides["16"][agent], 10) else "")
        lines.append(f"| {label} | {passed} | {min(steps):.2f}-{max(steps):.2f} M | "
                     f"{min(minutes):.0f}-{max(minutes):.0f} min | {held8} | {held16} |")
    xlvin_last = _mean_after(sides["8"]["xlvin-32-b2"], 10)
    every = [PAGE_AGENTS[a].split(",")[0] for a in ("gvin", "ppo-32", "xlvin-32-b2")
             if all(_levels_text(r) == "all 10" for r in records if r["agent"] == a)]
    none = [PAGE_AGENTS[a] for a in ("vin-mean", "vin-max")
            if all(r["failed_level"] == 1 for r in records if r["agent"] == a)]
    seeds = len({r["seed"] for r in records})
    below = [lv for lv in range(1, 11) if (x := _mean_after(sides["16"]["xlvin-32-b2"], lv))
             and (p := _mean_after(sides["16"]["ppo-32"], lv)) and x < p]
    return {
        "maze-table": "\n".join(lines),
        "maze-headline": (
            f"{seeds} seeds: {', '.join(every[:-1])} and {every[-1]} (ours: pruned tree) pass all "
            f"10 levels, {' and '.join(none)} fail level 1; XLVIN {100 * xlvin_last:.1f} % on "
            f"held-out 8x8 after level 10, below PPO's mean on 16x16 after {len(below)} of 10 "
            f"levels"),
    }


def contextual_blocks(results: Path) -> dict[str, str]:
    """The README's block (`xlvin.experiments.pages`): who passed the contextual maze."""
    records = [_canonical(r) for r in read_json(results / "maze.json")["runs"]
               if r["experiment"] == "contextual-maze"]
    xlvin = [r for r in records if r["agent"] == "xlvin-32-b2"]
    others = [a for a in ("vin", "ppo-32") if all(r["failed_level"] == 1 for r in records
                                                 if r["agent"] == a)]
    names = {"vin": "VIN", "ppo-32": "PPO"}
    return {"contextual-maze-headline": (
        f"XLVIN (ours: pruned tree) passes on {sum(not r['failed_level'] for r in xlvin)} seed of "
        f"{len(xlvin)}; {' and '.join(names[a] for a in others)} fail level 1")}


def _k(steps: float) -> str:
    return f"{steps / 1000:.0f} k"


def _pct(values: list[float]) -> str:
    """'a %' or 'a-b %' of fractions."""
    low, high = 100 * min(values), 100 * max(values)
    return f"{low:.1f} %" if f"{low:.1f}" == f"{high:.1f}" else f"{low:.1f}-{high:.1f} %"


def _range(values: list[float], digits: int = 0) -> str:
    low, high = f"{min(values):,.{digits}f}", f"{max(values):,.{digits}f}"
    return low if low == high else f"{low}-{high}"


def _seeds_text(seeds: list[int]) -> str:
    """'0', '0 and 2', '0, 1 and 2'."""
    names = [str(s) for s in seeds]
    return names[0] if len(names) == 1 else ", ".join(names[:-1]) + " and " + names[-1]


def findings_blocks(results: Path) -> dict[str, str]:
    """docs/mazes.md's findings under the results table: the continual maze against the paper,
    what the curricula cost, the paper's encoder width, the paper's XLVIN on an H100, the pruned
    tree at the paper's width and the contextual maze (maze.json, maze-width/maze.json,
    maze_xlvin_h100.json); comparisons through `xlvin.wording.compare`."""
    data = read_json(results / "maze.json")
    runs = [_canonical(r) for r in data["runs"]]
    side = {s: {resolve_agent(a, tuple(AGENTS)): v for a, v in by.items()}
            for s, by in data["curves"]["maze"].items()}

    def cells(agent: str, experiment: str = "maze") -> list[dict[str, Any]]:
        return sorted((r for r in runs if (r["experiment"], r["agent"]) == (experiment, agent)),
                      key=lambda r: r["seed"])

    def level_steps(r: dict[str, Any], level: int) -> int | None:
        return next((h["env_steps"] for h in r["levels"] if h["level"] == level and h["passed"]),
                    None)

    def median_level1(agent: str) -> str:
        return _k(float(np.median([s for r in cells(agent) if (s := level_steps(r, 1))])))

    def after(agent: str, level: int, size: str = "8") -> float | None:
        return _mean_after(side[size][agent], level)

    def versus(x: str, y: str, level: int, size: str) -> str:
        values = [list(side[size][a]["after_level"][str(level)].values()) for a in (x, y)]
        return compare(PAGE_AGENTS[x].split(",")[0], PAGE_AGENTS[y].split(",")[0],
                       protocol=f"held-out {size}x{size} after level {level}",
                       seeds=f"{len(values[0])} and {len(values[1])} seeds",
                       iqms=(100 * iqm(values[0]), 100 * iqm(values[1])),
                       improvement=improvement_over(*values), measure="IQM %",
                       counts=(len(values[0]), len(values[1])))

    every = [PAGE_AGENTS[a].split(",")[0] for a in ("gvin", "ppo-32", "xlvin-32-b2")
             if all(not r["failed_level"] and r["in_progress"] is None for r in cells(a))]
    none = [PAGE_AGENTS[a] for a in ("vin-mean", "vin-max")
            if all(r["failed_level"] == 1 for r in cells(a))]
    mid = [after("xlvin-32-b2", lv) for lv in range(3, 10)]
    vin_last = side["8"]["vin"]["after_level"]["10"]
    early = {a: max(after(a, lv) for lv in (3, 4, 5)) for a in ("gvin", "ppo-32")}
    below = [lv for lv in range(1, 11)
             if after("xlvin-32-b2", lv, "16") < after("ppo-32", lv, "16")]
    vin = cells("vin")
    vin_long = {r["seed"]: [h for h in r["levels"] if h["passed"] and h["episodes"] > 100_000]
                for r in vin}
    slow = {s: hs for s, hs in vin_long.items() if len(hs) > 1}
    minutes = {a: [r["wall_seconds"] / 60 for r in cells(a)] for a in PAGE_AGENTS}
    in_hour = [PAGE_AGENTS[a].split(",")[0] for a, m in minutes.items() if max(m) <= 60]
    over_hour = [a for a, m in minutes.items() if max(m) > 60]
    width = [r for r in read_json(results / "maze-width/maze.json")["runs"] if r["seed"] == 0][0]
    ppo32 = cells("ppo-32")[0]
    h100 = read_json(results / "maze_xlvin_h100.json")
    h_rec = h100["record"]
    h_curves = curves([h_rec])["maze"]
    h_levels = h_rec["levels_passed"]
    b2 = cells("xlvin-b2")
    ctx = {a: cells(a, "contextual-maze") for a in ("vin", "ppo-32", "xlvin-32-b2")}
    ctx_base = ctx["vin"] + ctx["ppo-32"]
    ctx_fail = [r for r in ctx["xlvin-32-b2"] if r["failed_level"]]
    ctx_pass = [r for r in ctx["xlvin-32-b2"] if not r["failed_level"]]
    ctx_side = {s: by["xlvin-32-b2"]["after_level"]
                for s, by in data["curves"]["contextual-maze"].items()}
    ctx_mid = [v for lv in range(2, 10) for v in ctx_side["8"][str(lv)].values()]
    budget = ctx_base[0]["curriculum"]["budget"]

    def h_after(size: str) -> str:
        by_level = h_curves[size]["xlvin"]["after_level"]
        return ", ".join(f"{100 * v:.1f}" for lv in h_levels
                         for v in by_level[str(lv)].values()) + " %"

    ppo_sps = [r["steps_per_second"] for r in cells("ppo-32")]
    b2_l1 = list(side["8"]["xlvin-b2"]["after_level"]["1"].values())
    b2_l4 = list(side["8"]["xlvin-b2"]["after_level"].get("4", {}).values())
    lines = [
        f"- **As in the paper:** {' and '.join(none)} fail level 1 on every seed; "
        f"{', '.join(every[:-1])} and {every[-1]} pass every level on every seed. In "
        f"distribution XLVIN's held-out 8x8 mean is {_pct(mid)} after levels 3-9 and "
        f"{100 * after('xlvin-32-b2', 10):.1f} % after level 10, against VIN's "
        f"{100 * float(np.mean(list(vin_last.values()))):.1f} % ({len(vin_last)} seed), "
        f"PPO's {100 * after('ppo-32', 10):.1f} % and GVIN's {100 * after('gvin', 10):.1f} %: "
        + versus("xlvin-32-b2", "ppo-32", 10, "8")
        + f". The agents forget as the levels get harder and sparser: GVIN's mean falls from "
        f"{100 * early['gvin']:.0f} % (its best after levels 3-5) to "
        f"{100 * after('gvin', 10):.0f} % after level 10, PPO's from "
        f"{100 * early['ppo-32']:.0f} % to {100 * after('ppo-32', 10):.0f} %.",
        f"- **Unlike the paper:** GVIN passed level 6 on "
        f"{sum(6 in r['levels_passed'] for r in cells('gvin'))} of {len(cells('gvin'))} seeds. "
        f"VIN's curricula vary the "
        f"most: level 1 took it {median_level1('vin')} env steps (median), but "
        + "; ".join(f"seed {r['seed']} failed level {r['failed_level']}" if r["failed_level"]
                    else f"seed {r['seed']} was still training on level "
                    f"{r['in_progress']['level']}"
                    for r in vin if r["failed_level"] or r["in_progress"])
        + ", and "
        + "; ".join(f"seed {s} spent {_range([h['episodes'] / 1000 for h in hs])} k episodes "
                    f"on each of levels {', '.join(str(h['level']) for h in hs)}"
                    for s, hs in slow.items())
        + f". Where VIN passes level 10 ({len(vin_last)} seed) it scores "
        f"{100 * float(np.mean(list(vin_last.values()))):.0f} % held out in distribution and "
        f"{100 * after('vin', 10, '16'):.0f} % on 16x16. On 16x16 XLVIN's mean is under PPO's "
        f"after {len(below)} of 10 levels ("
        f"{_pct([after('xlvin-32-b2', lv, '16') for lv in range(1, 11)])} against "
        f"{_pct([after('ppo-32', lv, '16') for lv in range(1, 11)])}): "
        + versus("xlvin-32-b2", "ppo-32", 10, "16")
        + "; the paper has it competitive with PPO and below VIN. The curricula took "
        + ", ".join(f"{name} {_range([r['env_steps'] / 1e6 for r in cells(a)], 2)} M"
                    for a, name in (("xlvin-32-b2", "XLVIN"), ("gvin", "GVIN"),
                                    ("ppo-32", "PPO-32"), ("vin", "VIN")))
        + " env steps"
        + f". Level 1 took XLVIN {median_level1('xlvin-32-b2')} steps (median; "
        f"{_range([r['levels'][0]['episodes'] / 1000 for r in cells('xlvin-32-b2')])} k "
        f"episodes), VIN {median_level1('vin')} and PPO-32 {median_level1('ppo-32')}.",
        f"- **Steps/s depend on the load more than on the agent.** PPO-32 ran at "
        f"{', '.join(f'{sps:,.0f}' for sps in ppo_sps)} "
        f"steps/s on seeds {_seeds_text([r['seed'] for r in cells('ppo-32')])}, beside "
        f"different loads (`results/bench.md` section 5). The one-hour target per seed was met "
        f"by {', '.join(in_hour)} on every seed; "
        + "; ".join(f"{PAGE_AGENTS[a].split(',')[0]} took "
                    f"{', '.join(f'{m:.0f}' for m in minutes[a])} min on seeds "
                    f"{_seeds_text([r['seed'] for r in cells(a)])}" for a in over_hour) + ".",
        f"- **The paper's encoder width beside the CPU preset** (`--agents ppo --last-level "
        f"{max(width['levels_passed'])}`, seed 0; `results/maze-width/`): PPO with 128 channels "
        f"passed " + " and ".join(f"level {h['level']} in {_k(h['env_steps'])} steps"
                                  for h in width["levels"])
        + f"; the 32-channel preset took "
        + " and ".join(_k(level_steps(ppo32, h["level"])) for h in width["levels"])
        + f". Each step of the paper's width ran at {width['steps_per_second']:.0f} steps/s "
        f"against the preset's {ppo32['steps_per_second']:.0f} on seed 0.",
        f"- **The paper's XLVIN** (`xlvin`, K = 4, full tree), on an NVIDIA H100 GPU machine, "
        f"for a few minutes (`results/maze_xlvin_h100.json`): it passed levels "
        f"1-{max(h_levels)} in {_k(h_rec['env_steps'])} env steps and "
        f"{h_rec['wall_seconds']:.0f} s ({h_rec['steps_per_second']:,.0f} steps/s), then was "
        f"stopped by the time limit on level {h_rec['in_progress']['level']}; held-out 8x8 "
        f"after levels 1-{max(h_levels)}: {h_after('8')}; 16x16: {h_after('16')}; "
        f"{h100['deviations']}.",
        f"- **The pruned tree at the paper's 128 width** (`xlvin-b2`, ours; in the figures, "
        f"still training: started earlier and set aside for the faster `xlvin-32-b2`): "
        + "; ".join(f"seed {r['seed']} passed levels 1-{max(r['levels_passed'])} in "
                    f"{_k(r['env_steps'])} steps (on level {r['in_progress']['level']} at "
                    f"{100 * r['in_progress']['window_success']:.0f} % of its window when last "
                    f"written)" for r in b2)
        + f"; level 1 took {' and '.join(_k(level_steps(r, 1)) for r in b2)} steps, against "
        f"medians of {median_level1('vin')} (VIN), {median_level1('ppo-32')} (PPO-32) and "
        f"{median_level1('gvin')} (GVIN); held-out 8x8 after level 1: "
        f"{100 * float(np.mean(b2_l1)):.0f} % ({len(b2_l1)} seeds), after level 4: "
        f"{100 * float(np.mean(b2_l4)):.0f} % ({len(b2_l4)} seed); "
        f"{_range([r['steps_per_second'] for r in b2])} steps/s here.",
        f"- **The contextual maze** (`xlvin reproduce contextual-maze --agents "
        f"vin,ppo-32,xlvin-32-b2 --seeds 3 --budget {budget} --include-running`, "
        f"`results/contextual_maze.png`): VIN and PPO-32 failed level 1 on all "
        f"{len(ctx['vin'])} seeds within {budget:,} episodes "
        f"({_range([r['env_steps'] / 1e6 for r in ctx_base], 2)} M steps, "
        f"{_range([r['wall_seconds'] / 60 for r in ctx_base])} min each). XLVIN (`xlvin-32-b2`, "
        f"ours) failed level 1 on seeds {_seeds_text([r['seed'] for r in ctx_fail])} "
        f"({_range([r['env_steps'] / 1e6 for r in ctx_fail], 2)} M steps, "
        f"{_range([r['wall_seconds'] / 60 for r in ctx_fail])} min each) and **passed it on "
        f"seed {_seeds_text([r['seed'] for r in ctx_pass])}** "
        f"({_k(ctx_pass[0]['levels'][0]['episodes'])} episodes), then every level after it "
        f"({ctx_pass[0]['env_steps'] / 1e6:.2f} M steps, {ctx_pass[0]['wall_seconds'] / 60:.0f} "
        f"min; held-out contextual 8x8 {_pct(list(ctx_side['8']['1'].values()))} after level 1, "
        f"{_pct(ctx_mid)} after levels 2-9, "
        f"{_pct(list(ctx_side['8']['10'].values()))} after level 10; 16x16 "
        f"{_pct([v for lv in ctx_side['16'].values() for v in lv.values()])}). The paper has "
        f"XLVIN clearly above VIN and PPO passing; here "
        + compare("XLVIN", "VIN", protocol="contextual maze, level 1",
                  seeds=f"{len(ctx['xlvin-32-b2'])} seeds each, seeds that passed",
                  rates=(len(ctx_pass), len(ctx["xlvin-32-b2"]),
                         sum(not r["failed_level"] for r in ctx["vin"]), len(ctx["vin"])))
        + ". The 1,000,000-episode budget is the next test.",
    ]
    return {"maze-findings": "\n".join(lines)}


#: The rows of docs/mazes.md's depth study: (results file, agent, label, short name).
DEPTH_ROWS = (("maze.json", "ppo-32", "PPO, 32 ch (K = 0)", "PPO-32"),
              ("maze-depth/maze.json", "xlvin-32-k1", "XLVIN K = 1, 32 wide", "K = 1"),
              ("maze-depth/maze.json", "xlvin-32-k2", "XLVIN K = 2, 32 wide", "K = 2"),
              ("maze.json", "xlvin-32-b2", "XLVIN K = 4, pruned b = 2 (ours), 32 wide",
               "pruned K = 4"),
              ("maze-depth-k4/maze.json", "xlvin-32", "XLVIN K = 4, full tree, 32 wide",
               "full K = 4"))


def depth_blocks(results: Path) -> dict[str, str]:
    """docs/mazes.md's study of tree depth at the CPU preset's width: env steps to pass levels 1
    and 2 and held-out 8x8 success after them (maze-depth, maze-depth-k4 and maze.json), each
    tree's level-1 steps against PPO-32's through `xlvin.wording.compare`."""
    steps: dict[str, dict[int, list[int]]] = {}
    lines = table_head("agent", ["level 1: env steps", "held-out after level 1",
                                 "level 2: env steps", "held-out after level 2"])
    for file, agent, label, _ in DEPTH_ROWS:
        data = read_json(results / file)
        mine = [r for r in map(_canonical, data["runs"])
                if (r["experiment"], r["agent"]) == ("maze", agent)]
        curve = data["curves"]["maze"]["8"][agent]
        steps[agent] = {lv: [h["env_steps"] for r in mine for h in r["levels"]
                             if h["level"] == lv and h["passed"]] for lv in (1, 2)}
        cells = []
        for lv in (1, 2):
            got, held = steps[agent][lv], _mean_after(curve, lv)
            cells += ["-", "-"] if not got else [
                f"{_k(float(np.median(got)))} ({_range([s / 1000 for s in got])} k)",
                f"{100 * held:.1f} %"]
        lines.append(f"| {label} | " + " | ".join(cells) + " |")
    ppo = steps["ppo-32"][1]
    trees = [(agent, short) for _, agent, _, short in DEPTH_ROWS[1:]]
    full = read_json(results / "maze-depth-k4/maze.json")["runs"]
    prose = (
        f"The full depth-4 tree ran level 1 only, at "
        f"{_range([r['steps_per_second'] for r in full])} steps/s beside other curricula, "
        f"{_range([r['wall_seconds'] / 60 for r in full])} min a seed. Env steps to pass level 1, fewer is better (so P(X > PPO-32) is that of fewer steps): "
        + "; ".join(compare(short, "PPO-32", protocol="level 1",
                            seeds=f"{len(steps[agent][1])} and {len(ppo)} seeds",
                            iqms=(iqm(steps[agent][1]) / 1000, iqm(ppo) / 1000),
                            improvement=improvement_over([-s for s in steps[agent][1]],
                                                         [-s for s in ppo]),
                            measure="IQM k steps", counts=(len(steps[agent][1]), len(ppo)))
                    for agent, short in trees)
        + ". Depth buys no clear speed: the medians of the trees span "
        + _range([float(np.median(steps[a][1])) / 1000 for a, _ in trees])
        + " k, the full depth-4 tree's seeds "
        + _range([s / 1000 for s in steps["xlvin-32"][1]]) + " k.")
    return {"maze-depth-table": "\n".join(lines), "maze-depth-prose": prose}
