"""The results of `xlvin.experiments.executor_latent_trees`: per arm and depth, the transition
model's hits@1 and its distance to the true successors' encodings relative to their spread (and
the no-move reference's), IQM over the seeds with 95 % bootstrap intervals, beside the chance
level of hits@1 (`uniform_guess`); RESULTS/latent-trees.{md,json,png}, the table and figure
rendered from the JSON alone (`markdown`, `plot`)."""

from pathlib import Path
from typing import Any

import numpy as np

from xlvin.envs.maze_data import maze_split
from xlvin.experiments.executor_latent_trees import (MAZE_SIZE, held_out_count, maze_states_of,
                                                     uniform_guess)
from xlvin.experiments.figures import pyplot
from xlvin.experiments.maze_ablation import ARMS, COMMITTED, EXECUTOR_ARMS
from xlvin.experiments.results import kept_records, write_files
from xlvin.experiments.shapes import Optional, one_of
from xlvin.io.files import atomic_savefig, read_json
from xlvin.stats import share_text, summarize
from xlvin.wording import compare_seeds, seed_count

STEM = "latent-trees"
#: The scores of a depth (`latent_tree_scores`) summarised over seeds -> what the table says.
MEASURES = {"hit": "hits@1, %", "moved_hit": "hits@1 where the agent moves, %",
            "relative": "distance / spread",
            "stay_hit": "no move: hits@1, %", "stay_relative": "no move: distance / spread"}
#: Measures shown as percentages.
PERCENT = ("hit", "moved_hit", "stay_hit")
#: The arm whose transition model TransE alone trains (the heads read zeros for chi_s).
TRANSE_ALONE = "XLVIN, chi = 0"


def aggregate(records: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """One row per arm (in `ARMS` order) and depth: its seeds, the policy measured of each, and
    each of `MEASURES` over the seeds (`summarize`, with the per-seed values)."""
    label = {agent: arm for arm, agent in ARMS.items()}
    order = list(ARMS.values())
    rows = []
    for agent in sorted({r["arm"] for r in records}, key=order.index):
        mine = sorted((r for r in records if r["arm"] == agent), key=lambda r: r["seed"])
        for d, _ in enumerate(mine[0]["depths"]):
            rows.append({
                "arm": label[agent], "agent": agent, "depth": d + 1,
                "seeds": [r["seed"] for r in mine],
                "policies": {str(r["seed"]): r["policy"] for r in mine},
                "pairs": [r["depths"][d]["pairs"] for r in mine],
                **{key: {**summarize(np.array(values)), "per_seed": values}
                   for key in MEASURES
                   for values in [[r["depths"][d][key] for r in mine]]},
            })
    return rows


def setup(records: list[dict[str, Any]]) -> dict[str, Any]:
    """What the measurement was fixed to (`xlvin.experiments.executor_latent_trees`)."""
    first = records[0]
    return {
        "mazes": first["mazes"] or "all", "states": first["states"], "depth": first["depth"],
        "split": "the held-out 8x8 split of the generated mazes (maze_split(8, 'test'), "
                 "dataset seed 0), its first mazes in index order",
        "roots": "every free cell but the goal",
        "tree": "every action of every node whose true episode has not ended",
        "policy": "a finished run's final policy, else the policy of the last level it passed",
        "intervals": "IQM over the seeds, 95 % percentile bootstrap, 2,000 resamples",
    }


def markdown(data: dict[str, Any]) -> str:
    """The page of RESULTS/latent-trees.json."""
    setup = data["setup"]
    lines = [
        "# The latent tree against the maze's true tree", "",
        "Does the transition model of a trained maze agent grow the MDP's tree (`xlvin reproduce "
        f"executor-latent-trees`)? On {setup['states']:,} root states of {setup['split']} "
        f"({setup['roots']}), to depth {setup['depth']}, {setup['tree']}: at each depth, each "
        "node's predicted child for action a, h + T(h, a), against the encodings z(s_a) of its "
        "true state's true children. hits@1: the prediction is nearest to z(s_a) among the "
        "true children of all actions (also over the actions that move the agent, not into a "
        "wall); distance: ||h + T(h, a) - z(s_a)|| over the mean distance between the "
        "encodings of two free cells of the maze. No move: the prediction "
        f"z(s), the true parent's encoding. Policy: {setup['policy']}. {setup['intervals']}.",
        "", "Chance level: a guess drawn uniformly among each node's distinct true successors "
        "hits in expectation on " + "; ".join(
            f"depth {g['depth']} {100 * g['hit']:.1f} % (where the agent moves "
            f"{100 * g['moved_hit']:.1f} %)" for g in data["uniform_guess"]) + ".",
        "", "| arm | depth | seeds | " + " | ".join(MEASURES.values()) + " |",
        "|---|---|---|" + "---|" * len(MEASURES),
    ]
    for row in data["rows"]:
        lines.append(f"| {row['arm']} | {row['depth']} | {len(row['seeds'])} | "
                     + " | ".join(share_text(row[key], key in PERCENT) for key in MEASURES) + " |")
    lines += ["", "Runs: " + "; ".join(f"{r['arm']} seed {r['seed']} ({r['policy']})"
                                       for r in data["runs"]) + "."]
    return "\n".join(lines) + "\n"


#: A record `run_cell` writes, as a later call keeps it (`kept_records`).
RECORD = {"arm": one_of(ARMS.values()), "seed": int, "policy": str, "digest": Optional(str),
          "depth": int, "mazes": int, "states": int,
          "depths": [{"pairs": int, **dict.fromkeys(MEASURES, float)}]}


def write_results(records: list[dict[str, Any]], results: Path) -> str:
    """RESULTS/latent-trees.{md,json,png} of the cells' records (`run_cell`; one depth and set of
    mazes) and those an earlier call wrote there of other cells (`kept_records`: run on
    another machine, whose run directories are gone), with the chance level of hits@1 on the
    same states (`uniform_guess`); the page."""
    records = records + kept_records(results / f"{STEM}.json", records, RECORD,
                                     ("depth", "mazes", "states"))
    order = list(ARMS.values())
    runs = sorted(records, key=lambda r: (order.index(r["arm"]), r["seed"]))
    first = records[0]
    states = maze_states_of(maze_split(MAZE_SIZE, "test"), held_out_count(first["mazes"]))
    data = {"setup": setup(records), "rows": aggregate(records),
            "uniform_guess": uniform_guess(states, first["depth"]), "runs": runs}
    md = markdown(data)
    write_files(results, STEM, md, data)
    plot(data, results / f"{STEM}.png")
    return md


def plot(data: dict[str, Any], path: Path) -> None:
    """Per arm (the maze ablation's colours), against depth: hits@1 (left) and the distance to
    the true successor's encoding over the spread (right), IQM over the seeds with its 95 %
    interval; dotted, the same arm's no-move reference."""
    plt = pyplot()
    fig, axes = plt.subplots(1, 2, figsize=(11, 4))
    colours = {arm: f"C{i}" for i, arm in enumerate(ARMS)}
    arms = list(dict.fromkeys(row["arm"] for row in data["rows"]))
    for ax, (key, stay, scale, title) in zip(axes, (
            ("hit", "stay_hit", 100, "hits@1 among the actions' true successors, %"),
            ("relative", "stay_relative", 1, "distance to the true successor / spread"))):
        for i, arm in enumerate(arms):
            rows = [row for row in data["rows"] if row["arm"] == arm]
            depths = np.array([row["depth"] for row in rows]) + 0.06 * (i - len(arms) / 2)
            iqm = np.array([row[key]["iqm"] for row in rows]) * scale
            low = iqm - np.array([row[key]["iqm_low"] for row in rows]) * scale
            high = np.array([row[key]["iqm_high"] for row in rows]) * scale - iqm
            ax.errorbar(depths, iqm, yerr=[low, high], fmt="o-", color=colours[arm], capsize=3,
                        markersize=4, label=f"{arm} ({seed_count(len(rows[0]['seeds']))})")
            ax.plot(depths, [row[stay]["iqm"] * scale for row in rows], ":",
                    color=colours[arm], alpha=0.8)
        if key == "hit":
            guess = data["uniform_guess"]
            ax.plot([g["depth"] for g in guess], [100 * g["hit"] for g in guess], "--",
                    color="grey", label="a uniform guess (chance)")
        ax.set_xlabel("depth of the tree")
        ax.set_xticks(sorted({row["depth"] for row in data["rows"]}))
        ax.set_title(title, fontsize=9)
        ax.grid(alpha=0.3)
    axes[0].legend(fontsize=7)
    fig.suptitle("the trained agents' latent trees against the true ones, "
                 f"{data['setup']['states']:,} held-out 8x8 states; dotted: predicting no move; "
                 "IQM and 95 % CI over seeds", fontsize=9)
    fig.tight_layout()
    atomic_savefig(fig, path, dpi=110)
    plt.close(fig)


def depth_one(data: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """The rows of latent-trees.json at depth 1, by agent."""
    return {row["agent"]: row for row in data["rows"] if row["depth"] == 1}


def against_transe_alone(row: dict[str, Any], alone: dict[str, Any]) -> str:
    """An arm's depth-1 row against `TRANSE_ALONE`'s on hits@1 where the agent moves: does the
    policy's gradient through the tree move the transition model off the MDP?"""
    return compare_seeds(
        row["arm"], TRANSE_ALONE, [100 * v for v in row["moved_hit"]["per_seed"]],
        [100 * v for v in alone["moved_hit"]["per_seed"]],
        protocol="transition models' hits@1 at depth 1 where the agent moves", measure="IQM %")


def against_chance(row: dict[str, Any], data: dict[str, Any]) -> str:
    """An arm's row of latent-trees.json against the chance level of hits@1 where the agent
    moves at its depth (`uniform_guess`), worded by the row's 95 % interval."""
    chance = next(g for g in data["uniform_guess"] if g["depth"] == row["depth"])["moved_hit"]
    hits = row["moved_hit"]
    where = ("below" if hits["iqm_high"] < chance else "above" if hits["iqm_low"] > chance
             else "not separated from")
    return (f"{where} chance ({100 * chance:.1f} %: a guess drawn uniformly among the node's "
            "distinct true successors)")


def page_blocks(results: Path) -> dict[str, str]:
    """The result blocks `why-latent-trees` (per arm, hits@1, where the agent moves too, and
    relative distance at depth 1 and at the deepest depth; each arm that plans against the one
    whose heads read no tree) and `why-latent-trees-headline` of docs/mazes.md, from
    why-executor/latent-trees.json."""
    path = results / f"why-executor/{STEM}.json"
    if not path.is_file():  # no cell measured yet
        return {}
    data = read_json(path)
    setup = data["setup"]
    deepest = max(row["depth"] for row in data["rows"])

    def said(row: dict[str, Any]) -> str:
        seeds = len(row["seeds"])
        return (f"{row['arm']} ({seed_count(seeds)}) at depth {row['depth']}: hits@1 "
                f"{share_text(row['hit'], True)} % (no move: {share_text(row['stay_hit'], True)} "
                f"%), where the agent moves {share_text(row['moved_hit'], True)} %, "
                f"distance / spread {share_text(row['relative'], False)}")

    first = depth_one(data)
    alone = first.get(ARMS[TRANSE_ALONE])  # its tree unread by the heads: TransE alone trains it

    shown = [row for row in data["rows"] if row["depth"] in (1, deepest)]
    planned = [first[agent] for agent in (ARMS[COMMITTED], *(ARMS[a] for a in EXECUTOR_ARMS))
               if agent in first and agent != ARMS[TRANSE_ALONE]]
    xlvin = first.get(ARMS[COMMITTED])
    compared = "" if alone is None else (
        f" Does the policy's gradient through the tree move the transition model off the MDP "
        f"(against {TRANSE_ALONE}, whose heads read no tree)? "
        + "; ".join(against_transe_alone(row, alone) for row in planned) + ".")
    return {"why-latent-trees": (
        f"On {setup['states']:,} held-out 8x8 states, the trained agents' transition models "
        "against the encodings of the true successors (IQM over seeds [95 % interval]): "
        + "; ".join(said(row) for row in shown) + "." + compared),
        "why-latent-trees-headline": "" if xlvin is None else (
            "(b) Is the latent tree the MDP's? Where the agent moves, the prediction of XLVIN's "
            "transition model is nearest its own move's true successor (hits@1) on "
            f"{share_text(xlvin['moved_hit'], True)} % of depth-1 moves "
            f"({seed_count(len(xlvin['seeds']))}), {against_chance(xlvin, data)}"
            + ("." if alone is None else "; " + against_transe_alone(xlvin, alone) + "."))}
