"""The maze ablation's results (`xlvin.experiments.maze_ablation`'s arms): the arms' table with
P(arm > PPO-32), what the executor contributes, each level's cost, PPO's update sizes and the
encoders' geometry, and the figure; RESULTS/maze.{md,json,png}, with the cells an earlier
maze.json holds of other machines kept."""

import textwrap
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

from xlvin.errors import UserError
from xlvin.experiments.figures import iqm_marks, pyplot
from xlvin.experiments.maze_ablation import (
    ARMS,
    BASELINE,
    COMMITTED,
    EXECUTOR_ARMS,
    FAMILY,
    GEOMETRY,
    HORIZON,
    STATISTICS,
    UPDATE_STATS,
    aggregate,
    cell_scores,
    executor_contribution,
    geometry,
    per_level,
    summarize_geometry,
    with_update_sizes,
)
from xlvin.experiments.maze import Cell
from xlvin.experiments.maze_embeddings import PAPER_LEVELS
from xlvin.experiments.maze_report import RECORD_FIELDS, check_consistent, curves, table_head
from xlvin.experiments.results import others, write_files
from xlvin.experiments.shapes import Each, Holds, Optional, check, check_entries, one_of
from xlvin.io.files import atomic_savefig, read_json
from xlvin.io.run_dir import reading_results
from xlvin.stats import (family_confidence, improvement_over, improvement_text, interval_text,
                         iqm_text)
from xlvin.wording import MIN_SEEDS, compare, seed_count, separated


#: How the reading names each of `STATISTICS`.
_STATISTIC_NAMES = {"steps_to_last": "the env steps to pass level 10",
                    "area": "the area under the level curve",
                    "held_out_8": "held-out 8x8 success", "held_out_16": "held-out 16x16 success"}


def contribution_markdown(contribution: dict[str, dict[str, Any]]) -> list[str]:
    """`executor_contribution` as a table."""
    lines = ["", (f"What the executor contributes: P({COMMITTED} beats the arm) [95 % CI] over the "
                  "cells that ended: fewer env steps to pass level 10, a larger area, higher "
                  "held-out success"), "",
             "| arm | env steps to pass level 10 | area under the level curve | held-out 8x8 | "
             "held-out 16x16 |", "|---|---|---|---|---|"]
    for arm, p in contribution.items():
        cells = [improvement_text(p.get(name)) for name in STATISTICS]
        lines.append(f"| {arm} | " + " | ".join(cells) + " |")
    lines += ["", f"The same, each interval family-wise over the {FAMILY} comparisons "
              f"(Bonferroni: {100 * family_confidence(FAMILY):.2f} %, so that all hold together at "
              "95 %)", "", "| arm | " + " | ".join(_STATISTIC_NAMES[n] for n in STATISTICS)
              + " |", "|---|---|---|---|---|"]
    for arm, p in contribution.items():
        cells = ["-" if name not in p else interval_text(
            p[name]["p"], p[name]["family_low"], p[name]["family_high"], 2)
            for name in STATISTICS]
        lines.append(f"| {arm} | " + " | ".join(cells) + " |")
    return lines + [""]


#: The decimals each of `UPDATE_STATS` is printed with.
UPDATE_DIGITS = {"approx_kl": 3, "clipfrac": 2, "entropy": 2}
#: The levels whose update sizes the tables show (the PPO-32 + TransE arm fails level 2).
UPDATE_LEVELS = (1, 2, 3)


def update_markdown(records: list[dict[str, Any]]) -> list[str]:
    """Per arm and level of `UPDATE_LEVELS`: the median over its cells of their median approx
    KL, clip fraction and entropy (the records' `"updates"`), and the cells."""
    lines = ["", "PPO's update sizes: per cell the median over a level's updates, then the median "
                 "over the cells that tried the level (n): approx KL / clip fraction / entropy", "",
             "| arm | " + " | ".join(f"level {level}" for level in UPDATE_LEVELS) + " |",
             "|---|" + "---|" * len(UPDATE_LEVELS)]
    for arm, agent in ARMS.items():
        cells = [r["updates"] for r in records if r["agent"] == agent and "updates" in r]
        row = [_update_text([c[level] for c in cells if level in c])
               for level in map(str, UPDATE_LEVELS)]
        if cells:
            lines.append(f"| {arm} | " + " | ".join(row) + " |")
    return lines + [""]


def _update_text(seen: list[dict[str, float]]) -> str:
    """'kl / clipfrac / entropy (n)': the medians over `seen` cells' update sizes of one level."""
    if not seen:
        return "-"
    medians = (f"{np.median([c[name] for c in seen]):.{UPDATE_DIGITS[name]}f}"
               for name in UPDATE_STATS)
    return " / ".join(medians) + f" ({len(seen)})"


def _stat_text(stat: dict[str, Any] | None, scale: float, digits: int) -> str:
    if stat is None:
        return "-"
    return iqm_text(stat, digits, scale)


def markdown(rows: list[dict[str, Any]], levels: dict[str, Any], budget: int) -> str:
    lines = [("| arm | cells ended (finished / failed) | still training | env steps to pass level "
              "10, k: IQM [95 % CI] | P(fewer than PPO-32) | area under the level curve | "
              "P(> PPO-32) | held-out 8x8 after level 10, % | P(> PPO-32) | held-out 16x16 after "
              "level 10, % | P(> PPO-32) | minutes to pass level 10 |"),
             "|---|---|---|---|---|---|---|---|---|---|---|---|"]
    for r in rows:
        failed = ", ".join(f"s{s}: level {d}" for s, d in r["failed"].items())
        lines.append(
            f"| {r['arm']} | {len(r['seeds'])} ({len(r['finished'])} / {len(r['failed'])}"
            f"{': ' + failed if failed else ''}) | {len(r['running'])} | "
            f"**{_stat_text(r['steps_to_last'], 1e-3, 0)}** | "
            f"{improvement_text(r.get('steps_to_last_over_ppo'))} | "
            f"{_stat_text(r['area'], 1, 3)} | {improvement_text(r.get('area_over_ppo'))} | "
            f"{_stat_text(r['held_out_8'], 100, 1)} | "
            f"{improvement_text(r.get('held_out_8_over_ppo'))} | "
            f"{_stat_text(r['held_out_16'], 100, 1)} | "
            f"{improvement_text(r.get('held_out_16_over_ppo'))} | "
            f"{_stat_text(r['seconds_to_last'], 1 / 60, 1)} |")
    all_levels = sorted({int(d) for arm in levels.values() for d in arm})
    lines += ["", ("Env steps (k) and minutes to pass each level, median over the cells that "
                   "passed it (passed / tried)"), "",
              *table_head("arm", [f"level {d}" for d in all_levels])]
    for arm, per in levels.items():
        cells_text = []
        for d in all_levels:
            p = per.get(str(d))
            if p is None:
                cells_text.append("-")
            elif p["median_env_steps"] is None:
                cells_text.append(f"0 / {p['tried']}")
            else:
                minutes = "" if p["median_seconds"] is None else f", {p['median_seconds'] / 60:.1f} min"
                cells_text.append(f"{p['median_env_steps'] / 1e3:.0f} k{minutes} "
                                  f"({p['passed']} / {p['tried']})")
        lines.append(f"| {arm} | " + " | ".join(cells_text) + " |")
    lines += ["", (
        f"Each arm over its cells that ended (passed every level, or failed one within "
        f"{budget:,} episodes); cells still training are counted but not in the statistics. A "
        f"cell that failed counts at {HORIZON / 1e6:.0f} M env steps to pass level 10; the area "
        f"under its level curve (levels passed against env steps, up to {HORIZON / 1e6:.0f} M, "
        "as a fraction of all 10) holds its last level. IQM with its 95 % bootstrap interval; "
        "P(> PPO-32): the probability that a cell of the arm beats one of PPO-32 (fewer steps, "
        "larger area, higher success), with its bootstrap interval. `xlvin reproduce "
        "maze-ablation`; see `xlvin.experiments.maze_ablation`.")]
    return "\n".join(lines) + "\n"


def plot(rows: list[dict[str, Any]], records: list[dict[str, Any]], path: Path) -> None:
    """Left: every cell's level curve (levels passed against env steps), one colour per arm.
    Right: per statistic, every cell as a point per arm and the IQM with its interval."""
    plt = pyplot()
    fig, axes = plt.subplots(1, 4, figsize=(18, 4.2),
                             gridspec_kw={"width_ratios": [1.6, 1, 1, 1]})
    colours = {arm: f"C{i}" for i, arm in enumerate(ARMS)}
    arm_of = {agent: arm for arm, agent in ARMS.items()}
    ax = axes[0]
    labelled: set[str] = set()
    for r in records:
        arm = arm_of[r["agent"]]
        s = cell_scores(r)
        xs = [0.0] + [x / 1e6 for x in s["steps_at_pass"]]
        ys = list(range(len(xs)))
        xs.append(max(xs[-1], r["env_steps"] / 1e6))
        ys.append(ys[-1])
        ax.step(xs, ys, where="post", color=colours[arm], alpha=0.7,
                linestyle="--" if r["in_progress"] is not None else "-",
                label=None if arm in labelled else arm)
        labelled.add(arm)
        if r["failed_level"] is not None:
            ax.scatter([xs[-1]], [ys[-1]], marker="x", color=colours[arm], s=40)
    ax.set_xlabel("env steps (M)")
    ax.set_ylabel("levels passed")
    ax.set_title("level curves (dashed: still training; x: failed a level)", fontsize=9)
    ax.legend(fontsize=7)
    for ax, (name, title, scale) in zip(axes[1:], (
            ("steps_to_last", "env steps to pass level 10 (M)", 1e-6),
            ("held_out_8", "held-out 8x8 after level 10", 1.0),
            ("held_out_16", "held-out 16x16 after level 10", 1.0))):
        for i, row in enumerate(rows):
            stat = row[name]
            if stat is None:
                continue
            iqm_marks(ax, i, stat, colours[row["arm"]], scale)
        ax.set_xticks(range(len(rows)), [textwrap.fill(r["arm"], 14) for r in rows], fontsize=6)
        if name.startswith("held_out"):
            ax.set_ylim(-0.02, 1.02)
        else:
            ax.set_ylim(bottom=0)
        ax.set_title(title, fontsize=9)
        ax.grid(axis="y", alpha=0.3)
    fig.suptitle("the maze executor ablated: continual 8x8 maze, CPU preset (pruned depth-4 "
                 "tree, 32 wide); IQM and 95 % CI over the cells that ended", fontsize=9)
    fig.tight_layout()
    atomic_savefig(fig, path, dpi=110)
    plt.close(fig)


def geometry_markdown(geo: dict[str, Any]) -> list[str]:
    if not geo.get("arms"):
        return []
    levels = geo["levels"]
    lines = []
    for name, title in GEOMETRY.items():
        lines += ["", (f"{title[0].upper()}{title[1:]}, over {geo['mazes']} held-out 8x8 mazes "
                       "with a path of 6 or more moves, after each level: IQM [95 % CI] over "
                       "the cells that passed it (n)"), "",
                  *table_head("arm", [f"after level {d}" for d in levels])]
        for arm, per in geo["arms"].items():
            cells = [f"{_stat_text(per[str(d)][name], 1, 2)} ({per[str(d)][name]['n']})"
                     if name in per.get(str(d), {}) else "-" for d in levels]
            lines.append(f"| {arm} | " + " | ".join(cells) + " |")
        if geo.get("transe_only"):
            lines += ["", (f"Before any level, the XLVIN arms' common start (TransE "
                           f"pre-training alone): {geo['transe_only'][name]:.2f}.")]
    return lines


#: What the reports read of a cell's record kept from an earlier maze.json: a maze record of an
#: arm, with its update sizes per level where it has them (`with_update_sizes`).
RECORD = Holds({**RECORD_FIELDS, "agent": one_of(ARMS.values()),
                "updates": Optional(Each(dict.fromkeys(UPDATE_STATS, float)))}, check_consistent)


def _geometry_arms(geo: dict[str, Any]) -> None:
    """Refuse (ValueError) kept geometry of an arm the ablation does not have, or of arms
    without the count of mazes it was measured on."""
    strangers = sorted(set(geo.get("arms") or {}) - set(ARMS))
    if strangers:
        raise ValueError(f"arms: {strangers[0]!r} is none of the ablation's arms")
    if geo.get("arms") and "mazes" not in geo:
        raise ValueError("no field 'mazes'")


#: What the reports read of the geometry kept from an earlier maze.json (`geometry`):
#: arm -> level -> measure -> per-seed values, the mazes measured on, the TransE start.
GEOMETRY_KEPT = Optional(Holds({
    "arms": Optional(Each(Each(Each({"per_seed": Each(float)})))), "mazes": Optional(int),
    "transe_only": Optional(dict.fromkeys(GEOMETRY, float))}, _geometry_arms))


def read_earlier(results: Path) -> None:
    """Read what RESULTS/maze.json keeps (one UserError if it is corrupt or another's)."""
    kept_results(results, [])


def recorded(results: Path) -> Callable[[Cell], bool]:
    """Whether RESULTS/maze.json already holds a cell's (agent, seed), ended (a cell it holds
    still training, `--include-running`, trains on)."""
    held = {(r["agent"], r["seed"]) for r in kept_results(results, [])[0]
            if r["in_progress"] is None}
    return lambda cell: (cell.agent, cell.seed) in held


def kept_results(results: Path, records: list[dict[str, Any]]) -> tuple[list[dict[str, Any]], dict]:
    """What RESULTS/maze.json holds of cells not in `records` (run elsewhere, or on a machine
    whose run directories are gone): their records, and their geometry {arm: {level: {measure:
    {"per_seed": {seed: value}}}}}, with the TransE start's if `records` do not bring it."""
    path = results / "maze.json"
    if not path.is_file():
        return [], {}
    with reading_results(path):
        data = read_json(path)
        agents = {r.get("agent") for r in check_entries(data, "runs", Each(object))}
        strangers = sorted({a for a in agents if isinstance(a, str)} - set(ARMS.values()))
        if strangers:
            raise UserError(f"{path} is not the maze ablation's (it has {', '.join(strangers)}, "
                            "which are none of its arms): give --results a folder of its own, "
                            "such as results/ablation")
        check_entries(data, "runs", RECORD)
        check(data.get("geometry"), GEOMETRY_KEPT, "geometry")
        runs = others(data["runs"], records, lambda r: (r["agent"], r["seed"]))
        cells = {(r["agent"], str(r["seed"])) for r in runs}
        geo = data.get("geometry") or {}
        kept = {arm: {level: {name: {"per_seed": {seed: value
                                                  for seed, value in row["per_seed"].items()
                                                  if (ARMS[arm], seed) in cells}}
                              for name, row in measures.items()}
                      for level, measures in levels.items()}
                for arm, levels in geo.get("arms", {}).items()}
        return runs, {**{k: v for k, v in geo.items() if k != "arms"}, "arms": kept}


def merge_geometry(geo: dict[str, Any], kept: dict[str, Any]) -> dict[str, Any]:
    """`geometry`'s output with the kept cells' values added (and summarised again)."""
    arms: dict[str, Any] = {}
    for arm in ARMS:
        for level in map(str, PAPER_LEVELS):
            for name in GEOMETRY:
                per_seed = {
                    **kept.get("arms", {}).get(arm, {}).get(level, {}).get(name, {}).get("per_seed", {}),
                    **geo.get("arms", {}).get(arm, {}).get(level, {}).get(name, {}).get("per_seed", {})}
                if per_seed:
                    arms.setdefault(arm, {}).setdefault(level, {})[name] = {"per_seed": per_seed}
    out = {**kept, **geo, "arms": arms, "levels": list(PAPER_LEVELS)}
    return summarize_geometry(out) if arms else {}


def write_results(records: list[dict[str, Any]], results: Path, root: Path | None = None) -> str:
    """RESULTS/maze.{md,json,png} of the ablation's records (finished and still training), with
    figure 5's geometry of every arm (`geometry`) when their run directories under `root` are
    given. Cells in an earlier RESULTS/maze.json and not in `records` are kept (`kept_results`),
    so that results gathered over several machines add up."""
    kept_runs, kept_geo = kept_results(results, records)
    records = kept_runs + (with_update_sizes(records, root) if root is not None else records)
    rows = aggregate(records)
    levels = per_level(records)
    geo = merge_geometry(geometry(records, root) if root is not None else {}, kept_geo)
    budget = records[0]["curriculum"]["budget"]
    contribution = executor_contribution(rows)
    md = (markdown(rows, levels, budget) + "\n".join(contribution_markdown(contribution))
          + "\n".join(update_markdown(records)) + "\n".join(geometry_markdown(geo)) + "\n")
    write_files(results, "maze", md, {"arms": ARMS, "baseline": BASELINE, "horizon": HORIZON,
                                      "rows": rows, "executor_contribution": contribution,
                                      "per_level": levels, "geometry": geo, "runs": records})
    plot(rows, records, results / "maze.png")
    return md


def page_blocks(results: Path) -> dict[str, str]:
    """The result block of README.md (`xlvin.experiments.pages`): env steps to pass the last
    level, against PPO-32 and against XLVIN's own executor, from ablation/maze.json (whatever
    seeds it holds)."""
    data = read_json(results / "ablation/maze.json")
    rows = {r["arm"]: r for r in data["rows"]}
    xlvin, ppo = rows["XLVIN (maze executor)"], rows[data["baseline"]]

    def seeds(a: dict[str, Any], b: dict[str, Any], measure: str) -> str:
        """How many seeds each side's measure has: 'n seeds', or 'n and m seeds' (a cell that
        failed a level has a capped step count and no held-out success)."""
        n, m = a[measure]["n"], b[measure]["n"]
        return seed_count(n) if n == m else f"{n} and {seed_count(m)}"

    def counts(a: dict[str, Any], b: dict[str, Any], measure: str) -> tuple[int, int]:
        return a[measure]["n"], b[measure]["n"]

    def steps(x: str, y: str, a: dict[str, Any], b: dict[str, Any], better: dict) -> str:
        return compare(x, y, protocol=seeds(a, b, "steps_to_last"),
                       seeds="env steps to pass level 10",
                       iqms=(a["steps_to_last"]["iqm"] / 1e3, b["steps_to_last"]["iqm"] / 1e3),
                       improvement=better, digits=0, measure="IQM k steps (fewer is better)",
                       counts=counts(a, b, "steps_to_last"))

    def held(x: str, y: str, a: dict[str, Any], b: dict[str, Any], better: dict) -> str:
        return compare(x, y, protocol=seeds(a, b, "held_out_8"),
                       seeds="held-out 8x8 after level 10",
                       iqms=(100 * a["held_out_8"]["iqm"], 100 * b["held_out_8"]["iqm"]),
                       improvement=better, measure="IQM %", counts=counts(a, b, "held_out_8"))

    chi = rows["XLVIN, chi = 0"]
    arms = list(data["executor_contribution"])
    contribution = data["executor_contribution"]
    headline = (
        f"On the maze: {steps('XLVIN', 'PPO-32', xlvin, ppo, xlvin['steps_to_last_over_ppo'])}; "
        f"{steps('chi = 0', 'PPO-32', chi, ppo, chi['steps_to_last_over_ppo'])}; against XLVIN's "
        "pre-trained maze executor: " + "; ".join(
            steps("XLVIN", arm.removeprefix("XLVIN, "), xlvin, rows[arm],
                  contribution[arm]["steps_to_last"]) for arm in arms) + ".")
    return {"maze-ablation-headline": headline,
            "maze-ablation-page": headline + " Held out: " + "; ".join(
                [held("XLVIN", "PPO-32", xlvin, ppo, xlvin["held_out_8_over_ppo"])]
                + [held("XLVIN", arm.removeprefix("XLVIN, "), xlvin, rows[arm],
                        contribution[arm]["held_out_8"]) for arm in arms]) + ".",
            "maze-ablation-reading": _reading(rows, contribution, data["runs"])}


def _against_xlvin(rows: dict[str, dict[str, Any]], arm: str, contribution: dict[str, Any],
                   family: bool = False) -> dict[str, bool | None]:
    """statistic -> XLVIN ahead of `arm` (True), behind it (False), not separated (None), for
    each of `STATISTICS` (in its order) that both have `MIN_SEEDS` cells or more of; by the
    family-wise intervals where `family`."""
    return {name: separated(contribution[name], family) for name in STATISTICS
            if name in contribution
            and min(rows[COMMITTED][name]["n"], rows[arm][name]["n"]) >= MIN_SEEDS}


def _family_text(rows: dict[str, dict[str, Any]], contribution: dict[str, Any]) -> str:
    """' Read together ...': which of XLVIN's verdicts against the executor arms stay separated
    when their `FAMILY` comparisons are read as one family (Bonferroni); '' where none is
    separated even alone."""
    if all(v is None for arm, c in contribution.items()
           for v in _against_xlvin(rows, arm, c).values()):
        return ""
    kept = [f"{'ahead of' if ahead else 'behind'} {arm.removeprefix('XLVIN, ')} on "
            f"{_STATISTIC_NAMES[name]} (P = {improvement_text(c[name])}, family-wise "
            f"[{c[name]['family_low']:.2f}, {c[name]['family_high']:.2f}])"
            for arm, c in contribution.items()
            for name, ahead in _against_xlvin(rows, arm, c, family=True).items()
            if ahead is not None]
    head = (f" Read together, as one family of {FAMILY} comparisons (XLVIN against each "
            f"executor arm on each statistic; each interval widened to "
            f"{100 * family_confidence(FAMILY):.2f} %, Bonferroni, so that all of them hold "
            "together at 95 %), ")
    if not kept:
        return head + "none of these verdicts stays separated."
    return head + "XLVIN stays " + "; ".join(kept) + "; no other verdict stays separated."


def _listed(names: list[str]) -> str:
    """'A', 'A and B', 'A, B and C'."""
    return " and ".join([", ".join(names[:-1]), names[-1]] if len(names) > 1 else names)


def _verdicts_text(arm: str, verdicts: dict[str, bool | None]) -> str:
    """'ARM: XLVIN ahead on A, behind on B, not separated on C', naming the statistics."""
    said = {True: "XLVIN ahead on", False: "XLVIN behind on", None: "not separated on"}
    return f"{arm}: " + ", ".join(
        f"{words} {_listed([_STATISTIC_NAMES[n] for n, v in verdicts.items() if v is w])}"
        for w, words in said.items() if w in verdicts.values())


def _reading(rows: dict[str, dict[str, Any]], contribution: dict[str, Any],
             runs: list[dict[str, Any]]) -> str:
    """What the verdicts say together, only as far as they go (nothing before every arm has
    `MIN_SEEDS` seeds): XLVIN and chi = 0 against PPO-32 on env steps, XLVIN against each
    executor arm on every statistic both have `MIN_SEEDS` cells of; and what the TransE term
    alone did to PPO-32."""
    fewest = min(r["steps_to_last"]["n"] for r in rows.values())
    transe = [r for r in runs if r["agent"] == ARMS["PPO-32 + TransE term"]
              and r.get("in_progress") is None]
    failed = sorted({r["failed_level"] for r in transe if r.get("failed_level") is not None})
    alone = (f" The TransE term alone, on PPO-32's network, failed a level in "
             f"{sum(r.get('failed_level') is not None for r in transe)} of {len(transe)} cells"
             + (f" (level {', '.join(map(str, failed))})." if failed else "."))
    if fewest < MIN_SEEDS:
        return (f"The study reads its verdicts once every arm has {MIN_SEEDS} seeds or more (its "
                f"seeds were fixed before they ran; the arm with fewest has {fewest} now); "
                "`results/ablation/maze.md` gives every P(X > Y) with its interval as it "
                "stands." + alone)
    xlvin, chi = rows[COMMITTED], rows["XLVIN, chi = 0"]
    if separated(xlvin["steps_to_last_over_ppo"]) is not True:
        return "XLVIN is not ahead of PPO-32 on the env steps to pass level 10." + alone
    chi_over_ppo = separated(chi["steps_to_last_over_ppo"]) is True
    verdicts = {arm: _against_xlvin(rows, arm, c) for arm, c in contribution.items()}
    each = "; ".join(_verdicts_text(arm.removeprefix("XLVIN, "), v) for arm, v in verdicts.items())
    # the arms whose executor computes something other than value iteration (not chi = 0)
    others = [v for arm, v in verdicts.items() if arm != "XLVIN, chi = 0"]
    zero = verdicts.get("XLVIN, chi = 0", {})
    against = (f"Against each executor arm, on the statistics with {MIN_SEEDS} cells or more "
               f"a side (the others are not compared): {each}."
               + _family_text(rows, contribution))
    if not (chi_over_ppo and others and all(v is None for o in others for v in o.values())):
        return (f"XLVIN is ahead of PPO-32 on the env steps to pass level 10; chi = 0 is "
                f"{'' if chi_over_ppo else 'not '}ahead of PPO-32. {against}" + alone)
    moved = [n for n, v in zero.items() if v is not None]
    return (f"{against} So what separates XLVIN from PPO-32 on mazes comes with its network, "
            "not with the value iteration its executor was pre-trained to compute: an "
            "untrained executor, or one pre-trained on random graphs, is separated from it on "
            "no statistic compared, and "
            "zeroing the executor's output keeps XLVIN's lead over PPO-32."
            + (" Zeroing it does change the agent (on " + _listed(
                [_STATISTIC_NAMES[n] for n in moved]) + "): what the heads read of chi_s is not "
               "inert, but it need not be value iteration." if moved else "")
            + " Which part of the network carries the lead these arms do not say (the tree's "
            "transition model and encoder trained by the TransE term, the heads' width, their "
            "initial weights)." + _behind_xlvin_and_ppo(rows) + alone)


def _behind_xlvin_and_ppo(rows: dict[str, dict[str, Any]]) -> str:
    """' The untrained executor ... is not separated from PPO-32 either': the executor arms that
    neither XLVIN nor PPO-32 is separated from on env steps (not separated is not equal)."""
    between = [arm.removeprefix("XLVIN, ") for arm in EXECUTOR_ARMS
               if arm in rows and rows[arm]["steps_to_last"]["n"] >= MIN_SEEDS
               and separated(rows[arm]["steps_to_last_over_ppo"]) is None]
    if not between:
        return ""
    return (f" Not separated is not equal: the {' and the '.join(between)} "
            f"{'is' if len(between) == 1 else 'are'} not separated from PPO-32 on the env steps "
            "to pass level 10 either.")


def geometry_blocks(results: Path) -> dict[str, str]:
    """docs/mazes.md's encoder geometry of every arm (results/ablation/maze.json's `geometry`):
    figure 5's rho and the authors' value R^2 after levels 1, 2 and 9, and each executor arm's
    R^2 after the last level against XLVIN's through `xlvin.wording.compare`."""
    geo = read_json(results / "ablation/maze.json")["geometry"]
    levels, arms = geo["levels"], geo["arms"]

    def cells(arm: str, measure: str) -> str:
        return " / ".join(f"{arms[arm][str(d)][measure]['iqm']:.2f}"
                          if measure in arms[arm].get(str(d), {}) else "-" for d in levels)

    steps = " / ".join(map(str, levels))
    lines = [f"| encoder | rho after level {steps} | value R^2 after level {steps} |",
             "|---|---|---|",
             f"| TransE pre-training alone (the XLVIN arms' start) | "
             f"{geo['transe_only']['rho']:.2f} | {geo['transe_only']['value_r2']:.2f} |"]
    lines += [f"| {arm} | {cells(arm, 'rho')} | {cells(arm, 'value_r2')} |" for arm in ARMS]
    seeds = sorted({int(s) for per in arms.values() for level in per.values()
                    for m in level.values() for s in m["per_seed"]})
    last = str(levels[-1])

    def r2(arm: str) -> list[float]:
        return list(arms[arm][last]["value_r2"]["per_seed"].values())

    def short(arm: str) -> str:
        return "XLVIN" if arm == xlvin else arm.removeprefix("XLVIN, ")

    xlvin = next(iter(ARMS))
    verdicts = [compare(short(arm), "XLVIN", protocol=f"value R^2 after level {last}",
                        seeds=f"{len(r2(arm))} and {len(r2(xlvin))} cells", digits=2,
                        iqms=(arms[arm][last]["value_r2"]["iqm"],
                              arms[xlvin][last]["value_r2"]["iqm"]),
                        improvement=improvement_over(r2(arm), r2(xlvin)),
                        counts=(len(r2(arm)), len(r2(xlvin))))
                for arm in [*ARMS][1:4] + ["PPO-32"]]
    ppo = arms["PPO-32"]
    prose = (
        f"IQM over the cells that passed the level, seeds {seeds[0]}-{seeds[-1]} (the cells per "
        f"arm and the intervals are in `results/ablation/maze.md`). PPO-32, which has no "
        f"transition model and no executor, lays the states out as XLVIN does: rho "
        + ", ".join(f"{ppo[str(d)]['rho']['iqm']:.2f}" for d in levels)
        + f" after levels {steps}, against XLVIN's {cells(xlvin, 'rho')}. The negative rho of "
        f"our figure 5 is what PPO's training does to a maze encoder, not something the "
        f"executor adds. Under the authors' measure, after level {last}: "
        + "; ".join(verdicts) + ".")
    return {"ablation-geometry-table": "\n".join(lines), "ablation-geometry-prose": prose}


def cell_blocks(results: Path) -> dict[str, str]:
    """docs/mazes.md's maze ablation cell by cell (results/ablation/maze.json): each arm's
    minutes to pass level 10, every cell's levels, steps, minutes and held-out success after
    level 10, the size of PPO's updates on level 2, and the authors' maze code
    (results/authors-code/maze.json) beside our cells' first level."""
    data = read_json(results / "ablation/maze.json")
    done = sorted((r for r in data["rows"] if r["seconds_to_last"]),
                  key=lambda r: r["seconds_to_last"]["iqm"])
    minutes = ("In wall-clock time, minutes to pass level 10 (IQM over the cells that passed it, "
               "two cells at once beside other jobs): "
               + ", ".join(f"{r['arm']} {r['seconds_to_last']['iqm'] / 60:.0f}" for r in done)
               + ".")
    table = ["| arm | seed | levels passed | env steps to pass level 10 | minutes | held-out 8x8 "
             "/ 16x16 after level 10 |", "|---|---|---|---|---|---|"]
    level2: dict[str, list[dict[str, float]]] = {}
    for arm, agent in ARMS.items():
        for r in sorted((r for r in data["runs"] if r["agent"] == agent), key=lambda r: r["seed"]):
            after = {side: by[agent]["after_level"].get("10", {}).get(str(r["seed"]))
                     for side, by in curves([{**r, "experiment": "maze"}])["maze"].items()}
            levels = r["levels_passed"]
            upto = "" if not levels else f"{max(levels)}, " if len(levels) == 1 else \
                f"1-{max(levels)}, "
            if r["failed_level"]:
                passed, steps, held, spent = f"{upto}**failed {r['failed_level']}**", "-", "-", "-"
            else:
                passed = "all 10" if r["in_progress"] is None else f"{upto}running"
                steps = f"{r['env_steps'] / 1000:,.0f} k"
                spent = f"{sum(h['seconds'] for h in r['levels'] if h['passed']) / 60:.0f}"
                held = ("-" if after["8"] is None else
                        f"{100 * after['8']:.1f} % / {100 * after['16']:.1f} %")
            table.append(f"| {arm} | {r['seed']} | {passed} | {steps} | {spent} | {held} |")
            if "2" in (r.get("updates") or {}):
                level2.setdefault(arm, []).append(r["updates"]["2"])
    sizes = ["| arm | cells | approx KL | clip fraction | entropy |", "|---|---|---|---|---|"]
    sizes += [f"| {arm} | {len(ups)} | "
              + " | ".join(f"{float(np.median([u[k] for u in ups])):.3f}"
                           for k in ("approx_kl", "clipfrac", "entropy")) + " |"
              for arm, ups in level2.items()]
    theirs = read_json(results / "authors-code/maze.json")
    first = {arm: [h["env_steps"] for r in data["runs"] if r["agent"] == ARMS[arm]
                   for h in r["levels"] if h["level"] == 1 and h["passed"]] for arm in ARMS}
    authors = (
        f"Their runs each stopped at {theirs['cpu_budget_s']:,.0f} s of CPU, "
        + "; ".join(f"{row['label']}: {row['env_steps']['iqm']:,.0f} env steps, levels passed "
                    f"{row['levels_passed']['iqm']:.0f} (seeds "
                    f"{', '.join(map(str, row['seeds']))})" for row in theirs["rows"])
        + ". Env steps our arms took to pass level 1 (median over cells): "
        + ", ".join(f"{arm} {float(np.median(s)) / 1000:.0f} k" for arm, s in first.items() if s)
        + " (our test is the success over a window of episodes, not theirs).")
    return {"ablation-minutes": minutes, "ablation-cells": "\n".join(table),
            "ablation-updates": "\n".join(sizes), "ablation-authors": authors}
