"""The Atari results (`xlvin.experiments.atari`'s records): over the seeds of an agent, the
interquartile mean of the training curve's area and of the greedy score with 95 % bootstrap
intervals, the probability that its area beats PPO's (Agarwal et al. 2021) and how many seeds
ever scored; the tables, and a figure of the training curves per game (figures 4 and 6)."""

import math
import textwrap
from pathlib import Path
from typing import Any

import numpy as np

from xlvin.envs.atari import EVAL_MAX_STEPS
from xlvin.errors import UserError
from xlvin.experiments.atari import AGENTS, GAMES, LABELS, WINDOW_UPDATES
from xlvin.experiments.figures import pyplot
from xlvin.experiments.final_eval import EVAL_SEED
from xlvin.experiments.results import kept, write_files
from xlvin.experiments.shapes import Nullable, one_of
from xlvin.io.files import atomic_savefig
from xlvin.run.agents import resolve_agent
from xlvin.stats import improvement_over, improvement_text, interval_text, summarize


def over_seeds(values: list[float]) -> dict[str, float]:
    """`xlvin.stats.summarize` of the finite values (IQM with its 95 % bootstrap interval, mean,
    population std, median, n); NaNs without one."""
    finite = [v for v in values if math.isfinite(v)]
    if not finite:
        return dict.fromkeys(("iqm", "iqm_low", "iqm_high", "mean", "std", "median"), float("nan"))
    return summarize(finite)


def aggregate(records: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """One row per (game, agent, budget): seeds, budget reached, AUC and final evaluation over
    seeds (`over_seeds`), how many seeds scored in training, mean steps/s, and for every agent
    but PPO trained with PPO on the same game and budget, the probability that its AUC beats
    PPO's (`auc_over_ppo`, see `_over_ppo`)."""
    groups: dict[tuple[str, str, int], list[dict[str, Any]]] = {}  # (game, agent, budget) -> seeds
    for r in records:
        groups.setdefault((r["game"], r["agent"], r["transitions"]), []).append(r)
    rows = []
    for game, agent, budget in sorted(groups, key=lambda k: (GAMES.index(k[0]),
                                                             list(AGENTS).index(k[1]), k[2])):
        group, ppo = groups[game, agent, budget], groups.get((game, "ppo", budget))
        rows.append({
            "game": game, "agent": agent, "label": LABELS[agent], "budget": budget,
            "seeds": sorted(r["seed"] for r in group),
            "transitions_reached": min(r["transitions_reached"] for r in group),
            "finished": all(r["finished"] for r in group),
            "seeds_stopped": sum(not r["finished"] for r in group),
            "auc": over_seeds([r["auc"] for r in group]),
            "final_eval": over_seeds([r["final_eval"]["mean"] for r in group]),
            "eval_games": min(len(r["final_eval"]["returns"]) for r in group),
            "seeds_scored": sum(r["first_score_at"] is not None for r in group),
            "steps_per_second": float(np.mean([r["steps_per_second"] for r in group])),
            "machines": sorted({r["final_eval"]["machine"] for r in group}),
            "auc_over_ppo": None if agent == "ppo" or ppo is None else
            _over_ppo([r["auc"] for r in group], [r["auc"] for r in ppo]),
        })
    return rows


def _over_ppo(aucs: list[float], ppo_aucs: list[float]) -> dict[str, float] | None:
    """P(AUC > PPO's AUC) over pairs of seeds (Agarwal et al. 2021's probability of
    improvement: ties count half) with its 95 % bootstrap interval, or None without two finite
    values on each side."""
    x, y = ([v for v in values if math.isfinite(v)] for values in (aucs, ppo_aucs))
    if min(len(x), len(y)) < 2:
        return None
    return improvement_over(x, y)


def budget_note(rows: list[dict[str, Any]]) -> str:
    """'trained on: <machines>; budget N transitions' (and how far runs stopped at a deadline
    got) for a figure or table."""
    machines = ", ".join(sorted({m for r in rows for m in r["machines"]}))
    budgets = sorted({r["budget"] for r in rows})
    short = [r for r in rows if not r["finished"]]
    text = f"trained on: {machines}; budget " + " / ".join(f"{b:,}" for b in budgets) + " transitions"
    if short:  # a row is one (game, agent, budget); count its seeds, which are the runs
        stopped = sum(r["seeds_stopped"] for r in short)
        text += f" ({stopped} run{'s' * (stopped > 1)} stopped at the deadline, the shortest at " \
            f"{min(r['transitions_reached'] for r in short):,})"
    return text


def _iqm(summary: dict[str, float], digits: int) -> str:
    """'IQM [low, high]', or the one seed's value."""
    if summary.get("n", 1) == 1:
        return f"{summary['iqm']:.{digits}f}"
    return interval_text(summary["iqm"], summary["iqm_low"], summary["iqm_high"], digits)


def markdown(rows: list[dict[str, Any]], records: list[dict[str, Any]]) -> str:
    """The results table (over seeds: IQM [95 % bootstrap interval]) and the per-seed table."""
    lines = [
        ("| game | agent | seeds | transitions (budget) | AUC: mean training score, IQM [95 % CI] "
        "| AUC, mean | P(AUC > PPO's) [95 % CI] | final greedy score, IQM [95 % CI] (games) "
        "| seeds that scored in training | steps/s |"),
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    for r in rows:
        lines.append(
            f"| {r['game']} | {r['label']} | {len(r['seeds'])} | {r['transitions_reached']:,} "
            f"({r['budget']:,}) | {_iqm(r['auc'], 2)} | {r['auc']['mean']:.2f} | "
            f"{improvement_text(r['auc_over_ppo'])} | {_iqm(r['final_eval'], 1)} ({r['eval_games']}) | "
            f"{r['seeds_scored']} of {len(r['seeds'])} | {r['steps_per_second']:.0f} |"
        )
    lines += ["", "Per seed:", "",
              ("| game | agent | budget | seed | transitions | first training game with a point "
              "| AUC | final greedy score | machine |"),
              "|---|---|---|---|---|---|---|---|---|"]
    for r in sorted(records, key=lambda r: (GAMES.index(r["game"]), list(AGENTS).index(r["agent"]),
                                            r["transitions"], r["seed"])):
        first = "never" if r["first_score_at"] is None else f"{r['first_score_at']:,}"
        lines.append(
            f"| {r['game']} | {LABELS[r['agent']]} | {r['transitions']:,} | {r['seed']} | "
            f"{r['transitions_reached']:,} | {first} | {r['auc']:.2f} | "
            f"{r['final_eval']['mean']:.1f} | {r['final_eval']['machine']} |"
        )
    return "\n".join(lines)


def cell_key(record: dict[str, Any]) -> tuple[str, str, int, int]:
    """A record's cell: game, agent, seed and budget, as its run directory names them."""
    return record["game"], record["agent"], record["seed"], record["transitions"]


def _canonical(record: dict[str, Any]) -> dict[str, Any]:
    """A kept record with its agent's canonical name (xlvin_r: xlvin-r)."""
    agent = record.get("agent")
    return {**record, "agent": resolve_agent(agent, AGENTS)} if isinstance(agent, str) else record


#: What the tables and figures read of a cell's record kept from an earlier atari.json
#: (`xlvin.experiments.atari.cell_record`).
RECORD = {
    "game": one_of(GAMES), "agent": one_of(AGENTS), "seed": int, "transitions": int,
    "transitions_reached": int, "finished": bool, "auc": float,
    "final_eval": {"mean": float, "returns": list, "machine": str},
    "first_score_at": Nullable(int), "steps_per_second": float, "curve": [(float, float)],
}


def read_earlier(results: Path) -> None:
    """Read what RESULTS/atari.json keeps (one UserError if it is corrupt: `RECORD`)."""
    kept(results / "atari.json", "cells", [], cell_key, RECORD, _canonical)


def write_results(records: list[dict[str, Any]], results: Path) -> str:
    """results/atari.json (rows, per-cell records with their curves, the budget note),
    results/atari.md (the tables) and results/atari_<game>.png; returns the markdown, and a
    last line naming the records kept. Records of cells already in atari.json and not in
    `records` (run on another machine, or by another invocation) are kept."""
    if not records:
        raise UserError("no Atari cell has a record to write")
    earlier = kept(results / "atari.json", "cells", records, cell_key, RECORD, _canonical)
    # one order for the JSON and the figures: a figure re-drawn from atari.json is the same bytes
    records = sorted(earlier + records, key=cell_key)
    rows = aggregate(records)
    note = budget_note(rows)
    text = markdown(rows, records) + f"\n\n{note}"
    write_files(results, "atari", text + "\n", {
        "note": note, "window_updates": WINDOW_UPDATES,
        "eval_max_steps": EVAL_MAX_STEPS, "eval_seed": EVAL_SEED, "rows": rows,
        "cells": records,
    })
    for game in sorted({r["game"] for r in records}):
        plot(game, [r for r in records if r["game"] == game],
             budget_note([r for r in rows if r["game"] == game]), results / f"atari_{game}.png")
    if earlier:
        text += (f"\n\nkept from {results / 'atari.json'} the records of {len(earlier)} cell"
                 f"{'s' * (len(earlier) > 1)} not given here: "
                 + ", ".join(f"{g} {LABELS[a]} seed {s} ({t:,})"
                             for g, a, s, t in map(cell_key, earlier)))
    return text


def plot(game: str, records: list[dict[str, Any]], note: str, path: Path) -> None:
    """Training score against transitions, one line per agent: the mean over seeds, shaded
    between the lowest and highest seed, each seed a thin line (figures 4 and 6)."""
    plt = pyplot()

    fig, ax = plt.subplots(figsize=(6.4, 4.2))
    for agent in AGENTS:
        group = [r for r in records if r["agent"] == agent and r["curve"]]
        if not group:
            continue
        grid = sorted({t for r in group for t, _ in r["curve"]})
        ys = np.array([np.interp(grid, *zip(*r["curve"]), right=np.nan) for r in group])
        with np.errstate(all="ignore"):
            mean = np.nanmean(ys, 0)
        color = f"C{list(AGENTS).index(agent)}"  # one colour per agent in every figure
        ax.plot(grid, mean, color=color,
                label=f"{LABELS[agent]} ({len(group)} seed{'s' * (len(group) > 1)})")
        if len(group) > 1:
            ax.fill_between(grid, np.nanmin(ys, 0), np.nanmax(ys, 0), alpha=0.15, color=color)
            for r in group:
                ax.plot(*zip(*r["curve"]), color=color, linewidth=0.6, alpha=0.5)
    ax.set_xlabel("transitions")
    ax.set_ylabel("average training game score (unclipped)")
    ax.set_title(game + "\n" + textwrap.fill(note, 90), fontsize=8)
    if ax.get_legend_handles_labels()[0]:
        ax.legend()
    fig.tight_layout()
    atomic_savefig(fig, path, dpi=110)
    plt.close(fig)
