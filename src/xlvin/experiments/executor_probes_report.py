"""The results of `xlvin.experiments.executor_probes`: per arm, the held-out R^2 of V* and the
optimal action's accuracy of linear probes from h_s, chi_s, [h_s, chi_s] and no feature, and how
far the policy moves when the heads read another state's chi_s (or h_s), IQM over the seeds with
95 % bootstrap intervals; RESULTS/probes.{md,json,png}, the tables and figure rendered from the
JSON alone (`markdown`, `plot`)."""

from pathlib import Path
from typing import Any

import numpy as np

from xlvin.experiments.executor_probes import FEATURES
from xlvin.experiments.figures import iqm_marks, pyplot
from xlvin.experiments.maze import AGENTS
from xlvin.experiments.maze_ablation import ARMS, COMMITTED
from xlvin.experiments.results import kept_records, write_files
from xlvin.experiments.shapes import Each, Nullable, Optional, one_of
from xlvin.io.files import atomic_savefig, read_json
from xlvin.stats import share_text, summarize
from xlvin.wording import compare_seeds, seed_count

STEM = "probes"
#: A probe's scores -> their heading.
PROBES = {"value_r2": "V*: held-out R^2", "action_accuracy": "optimal action: held-out accuracy, %"}
#: A policy move's scores -> their heading.
MOVES = {"tv": "mean total-variation distance", "greedy_changed": "greedy action changed, %"}
#: What each swap replaces.
SWAPS = {"chi": "chi_s of another state", "h": "h_s of another state"}
#: Scores shown as percentages.
PERCENT = ("action_accuracy", "greedy_changed")


def _summary(values: list[float]) -> dict[str, Any]:
    return {**summarize(np.array(values)), "per_seed": values}


def aggregate(records: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """One row per arm (in `ARMS` order): its seeds and policies, each probe's scores and (XLVIN
    arms) each swap's, over the seeds (`summarize`, with the per-seed values)."""
    label = {agent: arm for arm, agent in ARMS.items()}
    order = list(ARMS.values())
    rows = []
    for agent in sorted({r["arm"] for r in records}, key=order.index):
        mine = sorted((r for r in records if r["arm"] == agent), key=lambda r: r["seed"])
        moved = mine[0]["moves"] is not None
        rows.append({
            "arm": label[agent], "agent": agent, "seeds": [r["seed"] for r in mine],
            "policies": {str(r["seed"]): r["policy"] for r in mine},
            "probes": {name: {score: _summary([r["probes"][name][score] for r in mine])
                              for score in PROBES}
                       for name in FEATURES if name in mine[0]["probes"]},
            "moves": {swap: {score: _summary([r["moves"][swap][score] for r in mine])
                             for score in MOVES} for swap in SWAPS} if moved else None,
        })
    return rows


def setup(records: list[dict[str, Any]]) -> dict[str, Any]:
    """What the measurement was fixed to (`xlvin.experiments.executor_probes`)."""
    first = records[0]
    return {
        "mazes": first["mazes"] or "all", "train_mazes": first["train_mazes"],
        "states": first["states"],
        "split": "held-out: the 8x8 test split of the generated mazes (dataset seed 0); "
                 "training: its train split; the first mazes of each in index order",
        "states_are": "every free cell but the goal",
        "probe": "least squares with an intercept, fitted on the training mazes' states, "
                 "scored on the held-out ones",
        "swap": "each held-out state paired with another drawn uniformly, default_rng(0)",
        "policy": "a finished run's final policy, else the policy of the last level it passed",
        "intervals": "IQM over the seeds, 95 % percentile bootstrap, 2,000 resamples",
    }


def markdown(data: dict[str, Any]) -> str:
    """The page of RESULTS/probes.json."""
    setup = data["setup"]
    states = setup["states"]
    lines = [
        "# What the heads read: probes of h_s and chi_s", "",
        "Linear probes of V* and of the optimal action (`xlvin reproduce executor-probes`): "
        f"{setup['probe']} ({states['train']:,} training, {states['test']:,} held-out states: "
        f"{setup['states_are']}; {setup['split']}). Policy: {setup['policy']}. "
        f"{setup['intervals']}.", "",
        "| arm | seeds | features | " + " | ".join(PROBES.values()) + " |",
        "|---|---|---|" + "---|" * len(PROBES),
    ]
    for row in data["rows"]:
        for name in (n for n in FEATURES if n in row["probes"]):  # the JSON sorts its keys
            lines.append(f"| {row['arm']} | {len(row['seeds'])} | {FEATURES[name]} | "
                         + " | ".join(share_text(row["probes"][name][k], k in PERCENT)
                                      for k in PROBES)
                         + " |")
    lines += ["", f"How far the policy moves when the heads read another state's input "
              f"({setup['swap']}):", "",
              "| arm | seeds | replaced | " + " | ".join(MOVES.values()) + " |",
              "|---|---|---|" + "---|" * len(MOVES)]
    for row in (r for r in data["rows"] if r["moves"] is not None):
        for swap, replaced in SWAPS.items():
            lines.append(f"| {row['arm']} | {len(row['seeds'])} | {replaced} | "
                         + " | ".join(share_text(row["moves"][swap][k], k in PERCENT)
                                      for k in MOVES) + " |")
    lines += ["", "Runs: " + "; ".join(f"{r['arm']} seed {r['seed']} ({r['policy']})"
                                       for r in data["runs"]) + "."]
    return "\n".join(lines) + "\n"


#: A record `run_cell` writes, as a later call keeps it (`kept_records`).
RECORD = {"arm": one_of(ARMS.values()), "seed": int, "policy": str, "digest": Optional(str),
          "mazes": int, "train_mazes": int, "states": {"train": int, "test": int},
          "probes": Each(dict.fromkeys(PROBES, float)),
          "moves": Nullable(Each(dict.fromkeys(MOVES, float)))}


def write_results(records: list[dict[str, Any]], results: Path) -> str:
    """RESULTS/probes.{md,json,png} of the cells' records (`run_cell`; one set of mazes) and those
    an earlier call wrote there of other cells (`kept_records`: run on another machine, whose
    run directories are gone); the page."""
    records = records + kept_records(results / f"{STEM}.json", records, RECORD,
                                     ("mazes", "train_mazes", "states"))
    order = list(ARMS.values())
    runs = sorted(records, key=lambda r: (order.index(r["arm"]), r["seed"]))
    data = {"setup": setup(records), "rows": aggregate(records), "runs": runs}
    md = markdown(data)
    write_files(results, STEM, md, data)
    plot(data, results / f"{STEM}.png")
    return md


def plot(data: dict[str, Any], path: Path) -> None:
    """Left: the V* probe's held-out R^2 from each feature, per arm (the maze ablation's
    colours). Right: the share of states whose greedy action changes when the heads read
    another state's chi_s or h_s, per XLVIN arm. Every seed a point, the IQM with its 95 %
    interval a black bar."""
    plt = pyplot()
    fig, axes = plt.subplots(1, 2, figsize=(13, 4.2), gridspec_kw={"width_ratios": [1.6, 1]})
    colours = {arm: f"C{i}" for i, arm in enumerate(ARMS)}
    rows = data["rows"]
    width = 0.8 / len(rows)
    features = [name for name in FEATURES if any(name in row["probes"] for row in rows)]
    for j, row in enumerate(rows):
        for name in (n for n in features if n in row["probes"]):
            iqm_marks(axes[0], features.index(name) + (j - (len(rows) - 1) / 2) * width,
                      row["probes"][name]["value_r2"], colours[row["arm"]], spread=width / 3)
        axes[0].scatter([], [], color=colours[row["arm"]], label=f"{row['arm']} "
                        f"({seed_count(len(row['seeds']))})")
    axes[0].set_xticks(range(len(features)), [FEATURES[n] for n in features])
    axes[0].set_title("a linear probe's held-out R^2 of V*, from", fontsize=9)
    axes[0].legend(fontsize=7)
    moved = [row for row in rows if row["moves"] is not None]
    step = 0.8 / max(len(moved), 1)
    for j, row in enumerate(moved):
        for i, swap in enumerate(SWAPS):
            iqm_marks(axes[1], i + (j - (len(moved) - 1) / 2) * step,
                      row["moves"][swap]["greedy_changed"], colours[row["arm"]], scale=100,
                      spread=step / 3)
    axes[1].set_xticks(range(len(SWAPS)), list(SWAPS.values()))
    axes[1].set_ylim(-2, 102)
    axes[1].set_title("greedy action changed when the heads read, %", fontsize=9)
    for ax in axes:
        ax.grid(axis="y", alpha=0.3)
    fig.suptitle(f"what the trained agents' heads read, {data['setup']['states']['test']:,} "
                 "held-out 8x8 states; IQM and 95 % CI over seeds", fontsize=9)
    fig.tight_layout()
    atomic_savefig(fig, path, dpi=110)
    plt.close(fig)


def chi_adds(row: dict[str, Any]) -> str:
    """Does chi_s add to h_s what V* needs? An arm's V* probe from [h_s, chi_s] against h_s
    alone, on the held-out R^2 over its seeds."""
    probes = row["probes"]
    return compare_seeds("[h_s, chi_s]", "h_s", probes["h+chi"]["value_r2"]["per_seed"],
                         probes["h"]["value_r2"]["per_seed"],
                         protocol=f"{row['arm']}, V* probe's held-out R^2", digits=3)


def page_blocks(results: Path) -> dict[str, str]:
    """The result block `why-probes` of docs/mazes.md: per arm, the probes' V* R^2 from h_s and
    from [h_s, chi_s], and the policy's move when chi_s is another state's, from
    why-executor/probes.json."""
    path = results / f"why-executor/{STEM}.json"
    if not path.is_file():  # no cell measured yet
        return {}
    data = read_json(path)

    def said(row: dict[str, Any]) -> str:
        probes, seeds = row["probes"], len(row["seeds"])
        text = (f"{row['arm']} ({seed_count(seeds)}): V* R^2 from h_s "
                f"{share_text(probes['h']['value_r2'], False)}")
        if "h+chi" in probes:
            chi = row["moves"]["chi"]
            text += (f", from [h_s, chi_s] {share_text(probes['h+chi']['value_r2'], False)}; "
                     f"another state's chi_s moves the policy by {share_text(chi['tv'], False)} "
                     "in total variation and changes the greedy action on "
                     f"{share_text(chi['greedy_changed'], True)} % of states")
        return text

    xlvin = next((row for row in data["rows"] if row["agent"] == ARMS[COMMITTED]), None)
    return {"why-probes": (
        f"On {data['setup']['states']['test']:,} held-out 8x8 states (IQM over seeds [95 % "
        "interval]): " + "; ".join(said(row) for row in data["rows"]) + ". Does chi_s add to "
        "h_s what V* needs? " + "; ".join(chi_adds(row) for row in data["rows"] if "h+chi" in
                                          row["probes"] and not AGENTS[row["agent"]].get(
                                              "zero_chi")) + "."),
        "why-probes-headline": "" if xlvin is None else (
            "(c) Do the heads read chi_s? Another state's chi_s changes XLVIN's greedy action "
            f"on {share_text(xlvin['moves']['chi']['greedy_changed'], True)} % of states "
            f"({seed_count(len(xlvin['seeds']))}); " + chi_adds(xlvin) + ".")}
