"""The results of `xlvin.experiments.executor_true_trees`: each executor's values scored against
value iteration on the tree and against V* (with the two references), 95 % bootstrap intervals
over the mazes, the pre-trained executor against the ablations worded by `xlvin.wording.compare`;
RESULTS/true-trees.{md,json,png}, the table and figure rendered from the JSON alone (`markdown`,
`plot`)."""

from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

from xlvin.experiments.executor_true_trees import EXECUTORS, PROTOCOLS, TrueTrees, true_trees
from xlvin.experiments.figures import pyplot
from xlvin.experiments.results import write_files
from xlvin.io.files import atomic_savefig, read_json
from xlvin.pretrain.executor_eval import TIE_TOL
from xlvin.stats import improvement_over, interval_text, stratified_bootstrap_ci
from xlvin.wording import compare

STEM = "true-trees"
#: The references each executor is scored against: name -> its heading in the table.
REFERENCES = {"tree": "value iteration on the same tree", "V*": "V* of the maze"}
#: What each protocol's column says (`xlvin.experiments.executor_true_trees`).
PROTOCOL_NOTES = {
    "planner": "K processor steps over the tree as XLVIN's planner runs them (execute_tree), "
               "decoded once",
    "pre-training": "K decoded backups, as the executor was pre-trained and is evaluated",
}
#: The ablations the shipped executor is compared with.
ABLATIONS = ("maze-untrained", "maze-random")


def greedy_right(q_pred: np.ndarray, q_ref: np.ndarray) -> np.ndarray:
    """Per state [S]: the share of the greedy actions of q_pred [S, A] (ties within TIE_TOL)
    that are greedy for q_ref [S, A] (1 or 0 where q_pred has one greedy action)."""
    chosen = q_pred >= q_pred.max(axis=1, keepdims=True) - TIE_TOL
    optimal = q_ref >= q_ref.max(axis=1, keepdims=True) - TIE_TOL
    return (chosen & optimal).sum(axis=1) / chosen.sum(axis=1)


def per_maze(trees: TrueTrees, columns: np.ndarray) -> np.ndarray:
    """The sums over each maze's roots of columns [S, F]: [M, F]."""
    return np.stack([np.bincount(trees.maze, c, minlength=len(trees.mdps)) for c in columns.T], 1)


def bootstrapped(sums: np.ndarray, statistic: Callable[[np.ndarray], float]) -> dict[str, float]:
    """{"mean", "low", "high"}: `statistic` of the sums over the mazes of per-maze sums [M, F],
    with its 95 % percentile interval over the mazes resampled (2,000 times, default_rng(0))."""
    sums = sums[sums[:, -1] > 0]  # the mazes with states in the count (the last column)
    mazes = np.arange(len(sums), dtype=float)[:, None]  # [M, 1]: one stratum of mazes
    point, low, high = stratified_bootstrap_ci(
        mazes, lambda drawn: statistic(sums[drawn[:, 0].astype(int)].sum(axis=0)))
    return {"mean": point, "low": low, "high": high}


def _ratio(total: np.ndarray) -> float:
    """The pooled mean from the sums of the values and the count."""
    return float(total[0] / total[1])


def _correlation(total: np.ndarray) -> float:
    """Pearson's r from the sums x, y, x^2, y^2, xy and the count n."""
    x, y, xx, yy, xy, n = total
    spread = (n * xx - x * x) * (n * yy - y * y)
    return float((n * xy - x * y) / np.sqrt(spread)) if spread > 0 else float("nan")


def scores(trees: TrueTrees, q_pred: np.ndarray, v_pred: np.ndarray) -> dict[str, Any]:
    """Greedy actions of q_pred [S, A] and root values v_pred [S] against each reference: the
    share right (all roots, and those where the immediate reward does not decide), the mean
    absolute value error and the correlation, each with its interval."""
    rewards = trees.rewards[trees.roots]  # [S, A]
    out = {}
    for name, q_ref in (("tree", trees.q_tree), ("V*", trees.q_star)):
        right = greedy_right(q_pred, q_ref)
        planning = greedy_right(rewards, q_ref) < 1  # the immediate reward does not decide
        v_ref = q_ref.max(axis=1)
        ones = np.ones(len(right))
        sums = per_maze(trees, np.stack([right, ones, right * planning, planning,
                                         np.abs(v_pred - v_ref), ones, v_pred, v_ref,
                                         v_pred**2, v_ref**2, v_pred * v_ref, ones], axis=1))
        out[name] = {
            "greedy": bootstrapped(sums[:, 0:2], _ratio),
            "greedy_planning": bootstrapped(sums[:, 2:4], _ratio),
            "value_error": bootstrapped(sums[:, 4:6], _ratio),
            "correlation": bootstrapped(sums[:, 6:], _correlation),
            "planning_states": int(planning.sum()),
        }
    return out


def predicted(trees: TrueTrees, record: dict[str, Any], protocol: str) -> tuple[np.ndarray, ...]:
    """A cell's (`run_cell`) Q^(s, a) = R(s, a) + gamma V^(s_a) [S, A] and V^(s) [S] in one
    protocol."""
    values = record["values"][protocol]
    q_pred = trees.rewards[trees.roots] + trees.gamma * np.asarray(values["children"])
    return q_pred, np.asarray(values["roots"])


def executor_rows(trees: TrueTrees, record: dict[str, Any]) -> list[dict[str, Any]]:
    """One row per protocol of a cell's record, its values scored (`scores`)."""
    return [{"executor": record["executor"], "seed": record["seed"], "protocol": protocol,
             **scores(trees, *predicted(trees, record, protocol))} for protocol in PROTOCOLS]


def reference_rows(trees: TrueTrees) -> list[dict[str, Any]]:
    """Value iteration on the tree itself, and greedy on the immediate reward (its values
    max_a R(s, a): one backup from 0), scored as the executors are."""
    rewards = trees.rewards[trees.roots]
    return [{"reference": "VI on the tree", **scores(trees, trees.q_tree, trees.q_tree.max(1))},
            {"reference": "greedy on the immediate reward",
             **scores(trees, rewards, rewards.max(1))}]


def comparisons(trees: TrueTrees, records: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The shipped executor against each ablation of the same seed, per protocol and reference:
    the mean over the mazes of their share of greedy actions right, with P(maze > ablation)
    over the mazes (`improvement_over`)."""
    ones = np.ones(len(trees.roots))

    def right(record: dict[str, Any], protocol: str, q_ref: np.ndarray) -> np.ndarray:
        q_pred, _ = predicted(trees, record, protocol)
        sums = per_maze(trees, np.stack([greedy_right(q_pred, q_ref), ones], axis=1))
        return sums[:, 0] / sums[:, 1]  # [M]

    by = {(r["executor"], r["seed"]): r for r in records}
    out = []
    for (kind, seed), record in by.items():
        for other in (by[(a, seed)] for a in ABLATIONS if kind == "maze" and (a, seed) in by):
            for protocol in PROTOCOLS:
                for ref, q_ref in (("tree", trees.q_tree), ("V*", trees.q_star)):
                    x, y = right(record, protocol, q_ref), right(other, protocol, q_ref)
                    out.append({"x": _label(record), "y": _label(other),
                                "protocol": protocol, "reference": ref,
                                "means": [100 * float(x.mean()), 100 * float(y.mean())],
                                "improvement": improvement_over(x, y)})
    return out


def _label(row: dict[str, Any]) -> str:
    if "reference" in row:
        return f"{row['reference']} (reference)"
    return row["executor"] + (f" seed {row['seed']}" if row["seed"] else "")


def _table(rows: list[dict[str, Any]], ref: str) -> list[str]:
    lines = ["| executor | run as | greedy action right, % | where the reward does not decide, "
             "% | abs. value error | correlation |", "|---|---|---|---|---|---|"]
    for row in rows:
        s = row[ref]
        percent = [interval_text(100 * s[k]["mean"], 100 * s[k]["low"], 100 * s[k]["high"], 1)
                   for k in ("greedy", "greedy_planning")]
        error, r = s["value_error"], s["correlation"]
        lines.append(f"| {_label(row)} | {row.get('protocol', '-')} | {percent[0]} | {percent[1]} "
                     f"| {interval_text(error['mean'], error['low'], error['high'], 3)} "
                     f"| {interval_text(r['mean'], r['low'], r['high'], 2)} |")
    return lines


def setup(trees: TrueTrees, records: list[dict[str, Any]]) -> dict[str, Any]:
    """What the measurement was fixed to before it ran (`xlvin.experiments.executor_true_trees`),
    as the JSON keeps it."""
    nodes = sum(trees.successors.shape[1] ** d for d in range(trees.depth + 1))
    return {
        "mazes": len(trees.mdps), "states": len(trees.roots), "depth": trees.depth,
        "gamma": trees.gamma,
        "split": "the held-out 8x8 split of the generated mazes (maze_split(8, 'test'), "
                 "dataset seed 0), its first mazes in index order",
        "roots": "every free cell but the goal",
        "tree": f"every action of every node, {nodes:,} nodes a tree; the committed agent "
                "xlvin-32-b2 prunes its tree to 2 actions below depth 1",
        "inputs": "V_0 = 0; edges edge_encoder([1, gamma]); node n node_encoder([0, reward "
                  "of the move into n])",
        "intervals": "percentile bootstrap over the mazes, 2,000 resamples, default_rng(0)",
        "executors": [{"executor": r["executor"], "seed": r["seed"], "file": r["file"]}
                      for r in records],
    }


def markdown(data: dict[str, Any]) -> str:
    """The page of RESULTS/true-trees.json."""
    setup = data["setup"]
    lines = [
        "# The maze executor on true trees", "",
        "Does the frozen executor compute value iteration on the trees XLVIN grows, given the "
        "inputs it was pre-trained on (`xlvin reproduce executor-true-trees`)? On "
        f"{setup['mazes']} mazes of {setup['split']}: {setup['states']:,} root states "
        f"({setup['roots']}), each with its "
        f"full tree of depth K = {setup['depth']} from the maze's true transitions and rewards "
        f"({setup['tree']}); gamma {setup['gamma']}; inputs: {setup['inputs']}. Run as: "
        + "; ".join(f"{name}, {note}" for name, note in PROTOCOL_NOTES.items())
        + ". The greedy action is argmax_a R(s, a) + gamma V^(s_a), s_a's value after K - 1 "
        f"steps. 95 % intervals: {setup['intervals']}.",
    ]
    for ref, heading in REFERENCES.items():
        planning = data["references"][0][ref]["planning_states"]
        lines += ["", f"Against {heading} (the immediate reward does not decide on {planning:,} "
                  f"of the {setup['states']:,} states):", "",
                  *_table([*data["rows"], *data["references"]], ref)]
    lines += ["", "The shipped executor against its ablations (per maze, the share of greedy "
              "actions right):", ""]
    for c in data["comparisons"]:
        lines.append("- " + compare(
            c["x"], c["y"], protocol=f"run as {c['protocol']}, against "
            f"{REFERENCES[c['reference']]}", seeds=f"{setup['mazes']} mazes",
            iqms=(c["means"][0], c["means"][1]), improvement=c["improvement"],
            measure="mean %"))
    return "\n".join(lines) + "\n"


def write_results(records: list[dict[str, Any]], results: Path) -> str:
    """RESULTS/true-trees.{md,json,png} of the cells' records (`run_cell`; one depth and set of
    mazes); the page."""
    first = records[0]
    trees = true_trees(first["depth"], first["mazes"], first["gamma"])
    order = {kind: i for i, kind in enumerate(EXECUTORS)}
    records = sorted(records, key=lambda r: (order[r["executor"]], r["seed"]))
    data = {"setup": setup(trees, records),
            "rows": [row for record in records for row in executor_rows(trees, record)],
            "references": reference_rows(trees), "comparisons": comparisons(trees, records)}
    md = markdown(data)
    write_files(results, STEM, md, data)
    plot(data, results / f"{STEM}.png")
    return md


def plot(data: dict[str, Any], path: Path) -> None:
    """The share of states whose greedy action is value iteration's on the tree, per executor
    and the way it runs, on all states (left) and where the immediate reward does not decide
    (right), with its 95 % interval over the mazes; dashed, greedy on the immediate reward."""
    plt = pyplot()
    fig, axes = plt.subplots(1, 2, figsize=(11, 4), sharey=True)
    rows = data["rows"]
    greedy = next(r for r in data["references"] if r["reference"].startswith("greedy"))
    for ax, (key, title) in zip(axes, (("greedy", "all states"),
                                        ("greedy_planning",
                                         "where the immediate reward does not decide"))):
        for i, protocol in enumerate(PROTOCOLS):
            mine = [row for row in rows if row["protocol"] == protocol]
            x = np.arange(len(mine)) + (i - (len(PROTOCOLS) - 1) / 2) * 0.35
            score = [row["tree"][key] for row in mine]
            mean = np.array([s["mean"] for s in score]) * 100
            ax.bar(x, mean, width=0.35, color=f"C{i}", alpha=0.8, label=f"run as {protocol}",
                   yerr=[mean - np.array([s["low"] for s in score]) * 100,
                         np.array([s["high"] for s in score]) * 100 - mean], capsize=3)
        ax.axhline(greedy["tree"][key]["mean"] * 100, color="black", linestyle="--",
                   linewidth=1, label="greedy on the immediate reward")
        labels = list(dict.fromkeys(_label(row) for row in rows))
        ax.set_xticks(range(len(labels)), labels)
        ax.set_ylim(0, 102)
        ax.set_title(title, fontsize=9)
        ax.grid(axis="y", alpha=0.3)
    axes[0].set_ylabel("greedy action = value iteration's on the tree, %")
    axes[0].legend(fontsize=7, loc="lower left")
    setup = data["setup"]
    fig.suptitle(f"the frozen executors on true trees of depth {setup['depth']}: "
                 f"{setup['states']:,} states of {setup['mazes']} held-out 8x8 mazes; "
                 "95 % CI over the mazes", fontsize=9)
    fig.tight_layout()
    atomic_savefig(fig, path, dpi=110)
    plt.close(fig)


def page_blocks(results: Path) -> dict[str, str]:
    """The result block of docs/mazes.md (`xlvin.experiments.pages`): each executor's greedy
    action against value iteration on the true trees, run as XLVIN's planner runs it, and the
    pre-trained executor against the other two, from why-executor/true-trees.json."""
    data = read_json(results / "why-executor/true-trees.json")
    setup = data["setup"]
    rows = {(r["executor"], r["protocol"]): r for r in data["rows"]}
    refs = {r["reference"]: r for r in data["references"]}

    def right(scores: dict[str, Any], key: str) -> str:
        s = scores[key]
        return interval_text(100 * s["mean"], 100 * s["low"], 100 * s["high"], 1) + " %"

    def said(executor: str, protocol: str) -> str:
        tree = rows[(executor, protocol)]["tree"]
        return (f"`{executor}` {right(tree, 'greedy')} ({right(tree, 'greedy_planning')} where "
                "the immediate reward does not decide)")

    def versus(comparison: dict[str, Any]) -> str:
        return compare(f"`{comparison['x']}`", f"`{comparison['y']}`",
                       protocol=f"run as {comparison['protocol']}",
                       seeds=f"{setup['mazes']} mazes, scored against "
                             + {"tree": "value iteration on the tree"}.get(
                                 comparison["reference"], comparison["reference"]),
                       iqms=tuple(comparison["means"]), improvement=comparison["improvement"],
                       measure="mean % right over mazes")

    planner = [c for c in data["comparisons"] if c["reference"] == "tree"]
    greedy = refs["greedy on the immediate reward"]["tree"]
    return {"why-true-trees": (
        f"On {setup['mazes']} held-out 8x8 mazes, from every free cell, with the full tree of "
        f"depth {setup['depth']} built from the true transitions and rewards and fed the inputs "
        "it was pre-trained on, run as XLVIN's planner runs it, the executor picks value "
        "iteration's action at the root on this share of states: "
        + "; ".join(said(e, "planner") for e in EXECUTORS)
        + f"; greedy on the immediate reward alone: {right(greedy, 'greedy')} "
        f"({right(greedy, 'greedy_planning')}). "
        + " ".join(versus(c) + "." for c in planner)),
        "why-true-trees-headline": (
            "(a) On true trees the frozen maze executor computes value iteration: it picks its "
            f"action on {right(rows[('maze', 'planner')]['tree'], 'greedy')} of held-out 8x8 "
            f"states (untrained {right(rows[('maze-untrained', 'planner')]['tree'], 'greedy')}"
            f", random graphs {right(rows[('maze-random', 'planner')]['tree'], 'greedy')}; "
            f"greedy on the reward {right(greedy, 'greedy')}; 95 % intervals over "
            f"{setup['mazes']} mazes).")}
