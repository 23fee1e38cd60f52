"""The results of `xlvin.experiments.executor_latent_trees`: per arm and depth, the transition
model's hits@1 and its distance to the true successors' encodings relative to their spread (and
the no-move reference's), IQM over the seeds with 95 % bootstrap intervals;
RESULTS/latent-trees.{md,json}, the table rendered from the JSON alone (`markdown`)."""

from pathlib import Path
from typing import Any

import numpy as np

from xlvin.experiments.maze_ablation import ARMS
from xlvin.experiments.results import kept_records, write_files
from xlvin.experiments.shapes import one_of
from xlvin.io.files import read_json
from xlvin.stats import interval_text, summarize

STEM = "latent-trees"
#: The scores of a depth (`latent_tree_scores`) summarised over seeds -> what the table says.
MEASURES = {"hit": "hits@1, %", "moved_hit": "hits@1 where the agent moves, %",
            "relative": "distance / spread",
            "stay_hit": "no move: hits@1, %", "stay_relative": "no move: distance / spread"}
#: Measures shown as percentages.
PERCENT = ("hit", "moved_hit", "stay_hit")


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


def _estimate(summary: dict[str, Any], key: str) -> str:
    scale, digits = (100, 1) if key in PERCENT else (1, 3)
    return interval_text(scale * summary["iqm"], scale * summary["iqm_low"],
                         scale * summary["iqm_high"], digits)


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
        "", "| arm | depth | seeds | " + " | ".join(MEASURES.values()) + " |",
        "|---|---|---|" + "---|" * len(MEASURES),
    ]
    for row in data["rows"]:
        lines.append(f"| {row['arm']} | {row['depth']} | {len(row['seeds'])} | "
                     + " | ".join(_estimate(row[key], key) for key in MEASURES) + " |")
    lines += ["", "Runs: " + "; ".join(f"{r['arm']} seed {r['seed']} ({r['policy']})"
                                       for r in data["runs"]) + "."]
    return "\n".join(lines) + "\n"


#: A record `run_cell` writes, as a later call keeps it (`kept_records`).
RECORD = {"arm": one_of(ARMS.values()), "seed": int, "policy": str, "depth": int, "mazes": int,
          "states": int, "depths": [{"pairs": int, **dict.fromkeys(MEASURES, float)}]}


def write_results(records: list[dict[str, Any]], results: Path) -> str:
    """RESULTS/latent-trees.{md,json} of the cells' records (`run_cell`; one depth and set of
    mazes) and those an earlier call wrote there of other cells (`kept_records`: run on
    another machine, whose run directories are gone); the page."""
    records = records + kept_records(results / f"{STEM}.json", records, RECORD,
                                     ("depth", "mazes", "states"))
    order = list(ARMS.values())
    runs = sorted(records, key=lambda r: (order.index(r["arm"]), r["seed"]))
    data = {"setup": setup(records), "rows": aggregate(records), "runs": runs}
    md = markdown(data)
    write_files(results, STEM, md, data)
    return md


def page_blocks(results: Path) -> dict[str, str]:
    """The result block `why-latent-trees` of docs/mazes.md: per arm, hits@1 and relative
    distance at depth 1 and at the deepest depth, from why-executor/latent-trees.json."""
    path = results / f"why-executor/{STEM}.json"
    if not path.is_file():  # no cell measured yet
        return {}
    data = read_json(path)
    setup = data["setup"]
    deepest = max(row["depth"] for row in data["rows"])

    def said(row: dict[str, Any]) -> str:
        seeds = len(row["seeds"])
        return (f"{row['arm']} ({seeds} seed{'s' * (seeds > 1)}) at depth {row['depth']}: hits@1 "
                f"{_estimate(row['hit'], 'hit')} % (no move: {_estimate(row['stay_hit'], 'hit')} "
                f"%), distance / spread {_estimate(row['relative'], 'relative')}")

    shown = [row for row in data["rows"] if row["depth"] in (1, deepest)]
    return {"why-latent-trees": (
        f"On {setup['states']:,} held-out 8x8 states, the trained agents' transition models "
        "against the encodings of the true successors (IQM over seeds [95 % interval]): "
        + "; ".join(said(row) for row in shown) + ".")}
