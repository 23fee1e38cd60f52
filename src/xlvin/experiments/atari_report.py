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
from xlvin.io.files import atomic_savefig, read_json
from xlvin.run.agents import resolve_agent
from xlvin.stats import improvement_over, improvement_text, iqm_text, summarize
from xlvin.wording import compare, seed_count


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
    return iqm_text(summary, digits)


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
                label=f"{LABELS[agent]} ({seed_count(len(group))})")
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


#: A seed "learned" when its last training window averaged more than this a game (Freeway).
LEARNED = 10.0


def learned(record: dict[str, Any]) -> bool:
    """Whether a cell's last training window averaged more than `LEARNED` a game."""
    return bool(record["curve"]) and record["curve"][-1][1] > LEARNED


def _from(record: dict[str, Any], start: int) -> float:
    """The mean of a cell's training windows from `start` transitions on."""
    return float(np.mean([score for at, score in record["curve"] if at >= start]))


def _cells(results: Path, where: str) -> list[dict[str, Any]]:
    """The records of a committed atari.json (under `where`), agents by their current names."""
    cells = read_json(results / where / "atari.json")["cells"]
    return [{**r, "agent": resolve_agent(r["agent"], tuple(AGENTS))} for r in cells]


def _pick(cells: list[dict[str, Any]], game: str, agent: str) -> list[dict[str, Any]]:
    return sorted((r for r in cells if (r["game"], r["agent"]) == (game, agent)),
                  key=lambda r: r["seed"])


def _freeway(cells: list[dict[str, Any]], budget: str) -> tuple[str, str]:
    """XLVIN-R against PPO on Freeway: (on the AUC, on the rate of seeds that learned)."""
    x, y = _pick(cells, "Freeway", "xlvin-r"), _pick(cells, "Freeway", "ppo")
    auc = compare("XLVIN-R", "PPO", protocol=f"Freeway, {budget} transitions",
                  seeds=f"{len(x)} seeds each", measure="AUC IQM", digits=2,
                  iqms=(over_seeds([r["auc"] for r in x])["iqm"],
                        over_seeds([r["auc"] for r in y])["iqm"]),
                  improvement=_over_ppo([r["auc"] for r in x], [r["auc"] for r in y]),
                  counts=(len(x), len(y)))
    rate = compare("XLVIN-R", "PPO", protocol=f"Freeway, {budget} transitions",
                   seeds="seeds that learned", rates=(sum(map(learned, x)), len(x),
                                                      sum(map(learned, y)), len(y)))
    return auc, rate


def _freeway_1m(big: list[dict[str, Any]], long_table: Any) -> dict[str, str]:
    """docs/atari.md's Freeway at 1,000,000 transitions: the cells and their aggregate, when each
    seed first scored, what the seeds that scored early learned, and the one XLVIN-CP seed."""
    cells = {a: _pick(big, "Freeway", a) for a in ("ppo", "xlvin-r", "xlvin-cp")}
    rows = [r for r in aggregate(big) if r["game"] == "Freeway" and r["agent"] != "xlvin-cp"]
    table = long_table([(LABELS[a], r) for a in ("ppo", "xlvin-r") for r in cells[a]]) + [
        "", "| agent | AUC, IQM [95 % CI] | P(AUC > PPO's) [95 % CI] | greedy, IQM [95 % CI] | "
        "seeds that scored |", "|---|---|---|---|---|"] + [
        f"| {r['label']} | {_iqm(r['auc'], 2)} | {improvement_text(r['auc_over_ppo'])} | "
        f"{_iqm(r['final_eval'], 1)} | {r['seeds_scored']} of {len(r['seeds'])} |" for r in rows]

    def firsts(agent: str) -> str:
        return ", ".join(_k(r["first_score_at"]) for r in cells[agent]
                         if r["first_score_at"] is not None)

    def never(agent: str) -> list[int]:
        return [r["seed"] for r in cells[agent] if r["first_score_at"] is None]

    early = sorted((r for r in cells["xlvin-r"] if r["first_score_at"] is not None),
                   key=lambda r: r["first_score_at"])[:2]
    flat = [r for a in ("ppo", "xlvin-r") for r in cells[a]
            if r["first_score_at"] is not None and r not in early]
    cp, x0 = cells["xlvin-cp"][0], next(r for r in cells["xlvin-r"] if r["seed"] == 0)
    greedy_early = [f"{r['final_eval']['mean']:.1f}" for r in early]
    p0 = next(r for r in cells["ppo"] if r["seed"] == 0)
    first0 = "PPO" if p0["first_score_at"] < x0["first_score_at"] else "XLVIN-R"
    return {
        "atari-1m-freeway": "\n".join(table),
        "atari-1m-first": (
            f"- \"From the inception of training, XLVIN explores and exploits better\": XLVIN-R "
            f"scored on {len(cells['xlvin-r']) - len(never('xlvin-r'))} seeds of "
            f"{len(cells['xlvin-r'])} (its first points at {firsts('xlvin-r')} transitions), PPO "
            f"on {len(cells['ppo']) - len(never('ppo'))} ({firsts('ppo')}; seeds "
            f"{' and '.join(map(str, never('ppo')))} never scored in the million: their policies "
            f"drifted with nothing to learn from). On seed 0 {first0} scored first ("
            f"{p0['first_score_at']:,} against {x0['first_score_at']:,}): XLVIN-R's policy settled "
            f"away from UP, which alone scores, before it found the crossing."),
        "atari-1m-beyond": (
            f"- Beyond the paper's words: the XLVIN-R seeds that scored earliest (seeds "
            f"{' and '.join(str(r['seed']) for r in early)}) average "
            f"{' and '.join(f'{_from(r, 800_000):.1f}' for r in early)} a game from 800,000 "
            f"transitions on, greedy {' and '.join(greedy_early)}; "
            f"the other seeds that scored ("
            + ", ".join(f"{LABELS[r['agent']]} seed {r['seed']}" for r in flat)
            + f") average {' and '.join(f'{_from(r, 800_000):.1f}' for r in flat)}, greedy "
            + " and ".join(f"{r['final_eval']['mean']:.1f}" for r in flat) + "."),
        "atari-1m-cp": (
            f"- \"[the executor trained on random graphs] is comparable to using the "
            f"CartPole-based graphs on Freeway\": one XLVIN-CP seed (the executor pre-trained on "
            f"CartPole graphs; seed {cp['seed']}, the same commit and machine, in one call, `--agents xlvin-cp "
            f"--seeds 1`, its curve in the figure above) scored first at "
            f"{cp['first_score_at']:,} transitions (XLVIN-R seed 0: {x0['first_score_at']:,}), "
            f"then {_from(cp, 800_000):.1f} a game from 800,000 on, greedy "
            f"{cp['final_eval']['mean']:.1f}, AUC {cp['auc']:.2f} against XLVIN-R's "
            f"{x0['auc']:.2f} on that seed. One seed cannot compare the two executors; ATreeC at "
            f"1,000,000 was not run."),
    }


def _k(transitions: int) -> str:
    return f"{transitions / 1000:.0f} k"


def _enduro_alien(big: list[dict[str, Any]]) -> str:
    """docs/atari.md's reading of Enduro and Alien at 1,000,000 transitions, one seed each:
    when PPO passed Enduro's first car, and Alien's training games per 100,000 transitions."""
    enduro = {a: _pick(big, "Enduro", a)[0] for a in ("ppo", "xlvin-r")}
    alien = {a: _pick(big, "Alien", a)[0] for a in ("ppo", "xlvin-r")}
    bins = {a: [float(np.mean([v for t, v in r["curve"] if k * 100_000 <= t < (k + 1) * 100_000]))
                for k in range(10)] for a, r in alien.items()}
    ahead = [bins["xlvin-r"][k] > bins["ppo"][k] for k in range(10)]
    since = next(k for k in range(10) if all(ahead[k:]))
    return "\n".join([
        f"- Enduro, \"XLVIN ahead from the inception ... matching it in the latter stages of "
        f"Enduro\": not on this seed. PPO passed its first car in the game ending at "
        f"{enduro['ppo']['first_score_at']:,} transitions and climbed to the scores of the table "
        f"above. XLVIN-R " + ("never passed a car" if enduro["xlvin-r"]["first_score_at"] is None
                              else f"passed its first at {enduro['xlvin-r']['first_score_at']:,}")
        + ": its value loss stayed at zero (no reward in any rollout) and its policy drifted with "
        "nothing to learn from; its greedy action never accelerates, so the car never catches "
        "one. Enduro, like Freeway, is decided by whether exploration finds the first reward, and "
        "one seed cannot tell a seed's luck from the agent's.",
        f"- Alien, \"from the inception of the training, XLVIN explores and exploits better, "
        f"consistently remaining ahead\": on this one seed, XLVIN-R's mean training game is the "
        f"higher in every 100,000 transitions from {since * 100_000:,} on, not from the "
        f"inception. Mean training game per 100,000 before that: PPO "
        + ", ".join(f"{v:.0f}" for v in bins["ppo"][:since]) + " against XLVIN-R "
        + ", ".join(f"{v:.0f}" for v in bins["xlvin-r"][:since])
        + "; its mean from 800,000 on, AUC and greedy score are in the table above. XLVIN-R "
        "trained in three calls on the same machine and commit (the first stopped at its "
        "deadline, the second killed with its machine), each resumed from a checkpoint."])


def _seven_table(seven: list[dict[str, Any]]) -> str:
    """docs/atari.md's table of the seven Freeway seeds at 100,000 transitions: per agent the
    area, who learned, each seed's first point, the greedy score and the speed."""
    rows = ["| agent | AUC, IQM [95 % CI] | AUC, mean | learned to cross (last window > "
            f"{LEARNED:.0f} a game) | first point (seeds in order) | greedy, IQM [95 % CI] (10 "
            "games) | steps/s |", "|---|---|---|---|---|---|---|"]
    for row in (r for r in aggregate(seven) if r["game"] == "Freeway"):
        cells = _pick(seven, "Freeway", row["agent"])
        won = [r["seed"] for r in cells if learned(r)]
        firsts = ", ".join("never" if r["first_score_at"] is None else _k(r["first_score_at"])
                           for r in cells)
        rows.append(f"| {row['label']} | {_iqm(row['auc'], 2)} | {row['auc']['mean']:.2f} | "
                    f"{len(won)} of {len(cells)} (seeds {', '.join(map(str, won))}) | {firsts} | "
                    f"{_iqm(row['final_eval'], 1)} | {row['steps_per_second']:.0f} |")
    return "\n".join(rows)


def _one_seed_prose(one: list[dict[str, Any]]) -> str:
    """What the one H100 seed per cell shows on Freeway: who scored first, and when."""
    cells = {r["agent"]: r for r in one if r["game"] == "Freeway"}

    def first(agent: str) -> str:
        at = cells[agent]["first_score_at"]
        return "never scored" if at is None else f"first point in the update ending at {at:,}"

    crossed = [a for a, r in cells.items() if learned(r)]
    stayed = [a for a in cells if a not in crossed]
    return (
        "On Freeway's one H100 seed "
        + " and ".join(f"{LABELS[a]} ({first(a)}, AUC {cells[a]['auc']:.2f})" for a in crossed)
        + " learned to cross, while "
        + " and ".join(f"{LABELS[a]} ({first(a)}, AUC {cells[a]['auc']:.2f})" for a in stayed)
        + " did not: on this seed, the opposite of \"XLVIN ahead from the start\".")


def page_blocks(results: Path) -> dict[str, str]:
    """The result blocks of README.md and docs/atari.md (`xlvin.experiments.pages`)."""
    one, seven, big = (_cells(results, w) for w in ("", "atari-freeway-seeds", "atari-1m"))
    seven_auc, seven_rate = _freeway(seven, "100,000")
    big_auc, big_rate = _freeway(big, "1,000,000")
    at = [20_472, 40_944, 51_176, 71_648, 99_280]

    def mean_curve(agent: str) -> str:
        mine = _pick(seven, "Freeway", agent)
        return " / ".join(f"{np.mean([dict(map(tuple, r['curve']))[t] for r in mine]):.1f}"
                          for t in at)

    def greedy(r: dict[str, Any]) -> str:
        return f"{r['final_eval']['mean']:.1f} +- {float(np.std(r['final_eval']['returns'])):.1f}"

    rows_one = ["| game | agent | transitions | AUC (mean training game score) | greedy, 10 games |",
                "|---|---|---|---|---|"]
    for r in sorted(one, key=lambda r: (GAMES.index(r["game"]), list(AGENTS).index(r["agent"]))):
        auc = f"{r['auc']:.2f}" if r["game"] == "Freeway" else f"{r['auc']:.1f}"
        rows_one.append(f"| {r['game']} | {LABELS[r['agent']]} | {r['transitions_reached']:,} | "
                        f"{auc} | {greedy(r)} |")
    def long_table(cells: list[tuple[str, dict[str, Any]]]) -> list[str]:
        """The 1M cells' table: (label, cell) each a row."""
        rows = ["| cell | transitions | first training game with a point | AUC (mean training "
                "score) | mean training score from 800,000 on | greedy score (10 games) |",
                "|---|---|---|---|---|---|"]
        for label, r in cells:
            first = "never" if r["first_score_at"] is None else f"{r['first_score_at']:,}"
            rows.append(f"| {label} seed {r['seed']} | {r['transitions_reached']:,} | {first} | "
                        f"{r['auc']:.2f} | {_from(r, 800_000):.1f} | "
                        f"{r['final_eval']['mean']:.1f} |")
        return rows

    long = long_table([(f"{game} {LABELS[agent]}", r) for game in ("Enduro", "Alien")
                       for agent in ("ppo", "xlvin-r") for r in _pick(big, game, agent)])
    alien = {a: _pick(big, "Alien", a)[0] for a in ("ppo", "xlvin-r")}
    enduro = _pick(big, "Enduro", "ppo")[0]
    x7, p7 = _pick(seven, "Freeway", "xlvin-r"), _pick(seven, "Freeway", "ppo")
    scored = [sum(r["first_score_at"] is not None for r in c) for c in (x7, p7)]
    return {
        "atari-one-seed": "\n".join(rows_one),
        "atari-seven-seeds": (
            f"- On the area: {seven_auc}. On the seeds that learned to cross (last window above "
            f"{LEARNED:.0f} a game): {seven_rate}. Scored at least a point: XLVIN-R "
            f"{scored[0]} of {len(x7)}, PPO {scored[1]} of {len(p7)}.\n"
            f"- The mean training score over the seeds at "
            + " / ".join(f"{round(t / 1000)} k" for t in at)
            + f" transitions: PPO {mean_curve('ppo')}, XLVIN-R {mean_curve('xlvin-r')}."),
        "atari-1m-claims": f"On the area: {big_auc}. On the seeds that learned: {big_rate}.",
        "atari-seven-table": _seven_table(seven),
        "atari-one-seed-prose": _one_seed_prose(one),
        "atari-1m-others": "\n".join(long),
        **_freeway_1m(big, long_table),
        "atari-1m-enduro-alien": _enduro_alien(big),
        "atari-headline": (
            f"At 100k transitions, Freeway over {len(x7)} seeds: {seven_auc}; {seven_rate} "
            f"(reruns of 3 XLVIN-R seeds on other kernels scored on none). At the paper's 1M on "
            f"Freeway: {big_auc}; {big_rate}. Enduro at 1M, 1 seed: PPO greedy "
            f"{enduro['final_eval']['mean']:.0f}, XLVIN-R never passed a car. Alien at 1M, 1 "
            f"seed: mean training score from 800k on, XLVIN-R {_from(alien['xlvin-r'], 800_000):.0f}"
            f", PPO {_from(alien['ppo'], 800_000):.0f} (one seed: no comparison)."),
    }
