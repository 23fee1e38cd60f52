"""The oracle arm beside the maze study (docs/mazes.md, "Why the executor does not help"): XLVIN
on the maze's true tree with the pre-trained maze executor, an untrained one and chi = 0
(`xlvin-32-b2-oracle*`, results/oracle/maze.json), and the study's XLVIN arms
(results/ablation/maze.json), each cell read on the oracle protocol's levels 1 to `LEVEL`: the
env steps to pass level `LEVEL` (a failure before it counts at the study's horizon) and the
held-out 8x8 success after passing it. Its pairs say whether the executor separates on a true
tree, and whether the true tree beats the latent one."""

from pathlib import Path
from typing import Any

from xlvin.experiments.maze_ablation import HORIZON, curriculum_facts
from xlvin.experiments.maze_report import weighted_all
from xlvin.io.files import read_json
from xlvin.stats import improvement_over, iqm
from xlvin.wording import MIN_SEEDS, compare, separated

#: The oracle protocol's last level, fixed before its runs (docs/mazes.md).
LEVEL = 4
#: Arm -> maze agent: the oracle arms, then the study's arms they are read beside.
ORACLE = {"oracle, maze executor": "xlvin-32-b2-oracle",
          "oracle, untrained executor": "xlvin-32-b2-oracle-untrained",
          "oracle, chi = 0": "xlvin-32-b2-oracle-zero-chi"}
STUDY = {"XLVIN": "xlvin-32-b2", "XLVIN, untrained executor": "xlvin-32-b2-untrained",
         "XLVIN, chi = 0": "xlvin-32-b2-zero-chi"}
#: The pairs (X, Y) compared: the executor on the true tree; the true tree against the latent
#: one; the same contrasts on the latent tree, over the same levels.
PAIRS = (("oracle, maze executor", "oracle, untrained executor"),
         ("oracle, maze executor", "oracle, chi = 0"),
         ("oracle, maze executor", "XLVIN"),
         ("XLVIN", "XLVIN, untrained executor"),
         ("XLVIN", "XLVIN, chi = 0"))


def level_scores(record: dict[str, Any], level: int = LEVEL) -> dict[str, Any] | None:
    """One cell on levels 1 to `level`: the env steps it took to pass `level` (cumulative;
    `HORIZON` where it failed an earlier level) and its held-out 8x8 success after passing it
    (None after a failure); None while it has neither passed `level` nor failed before it."""
    steps = 0
    for h in record["levels"]:
        steps += h["env_steps"]
        if not h["passed"]:
            return {"steps": HORIZON, "held_out_8": None}
        if h["level"] == level:
            counts = curriculum_facts(record)[1]["8"]
            return {"steps": min(steps, HORIZON),
                    "held_out_8": weighted_all(h["held_out"]["8"], counts)}
    return None


def arm_scores(records: list[dict[str, Any]], arms: dict[str, str]) -> dict[str, dict[str, Any]]:
    """Arm -> its cells' seeds and per-seed steps and held-out success (`level_scores`), in seed
    order, over the cells that have passed level `LEVEL` or failed before it."""
    out = {}
    for arm, agent in arms.items():
        scored = sorted((r["seed"], s) for r in records if r["agent"] == agent
                        for s in [level_scores(r)] if s is not None)
        out[arm] = {"seeds": [seed for seed, _ in scored],
                    "steps": [s["steps"] for _, s in scored],
                    "held_out_8": [s["held_out_8"] for _, s in scored
                                   if s["held_out_8"] is not None]}
    return out


def _compare(x: str, y: str, a: dict[str, Any], b: dict[str, Any], measure: str) -> str:
    """`compare` of one pair on `measure` ("steps": fewer is better, or "held_out_8")."""
    mine, theirs = a[measure], b[measure]
    fewer = measure == "steps"
    sign, scale = (-1.0, 1e-3) if fewer else (1.0, 100.0)
    seeds = (f"{len(mine)} seeds each" if len(mine) == len(theirs)
             else f"{len(mine)} and {len(theirs)} seeds")
    return compare(x, y, protocol=seeds,
                   seeds=(f"env steps to pass level {LEVEL}" if fewer
                          else f"held-out 8x8 after level {LEVEL}"),
                   iqms=(scale * iqm(mine), scale * iqm(theirs)),
                   improvement=improvement_over([sign * v for v in mine],
                                                [sign * v for v in theirs]),
                   digits=0 if fewer else 1,
                   measure="IQM k steps (fewer is better)" if fewer else "IQM %",
                   counts=(len(mine), len(theirs)))


def verdict(scores: dict[str, dict[str, Any]]) -> str | None:
    """What the oracle arm says of the latent tree, on the env steps to pass level `LEVEL`, once
    its three arms have `MIN_SEEDS` cells each (None before)."""
    if min(len(scores[arm]["steps"]) for arm in ORACLE) < MIN_SEEDS:
        return None
    mine = [-v for v in scores["oracle, maze executor"]["steps"]]
    ahead = [separated(improvement_over(mine, [-v for v in scores[arm]["steps"]]))
             for arm in ("oracle, untrained executor", "oracle, chi = 0")]
    if all(a is True for a in ahead):
        return ("on the true tree the pre-trained executor is ahead of both the untrained one "
                "and chi = 0: the learned latent tree (b) is what breaks the mechanism")
    return ("on the true tree too the pre-trained executor is not ahead of both the untrained "
            "one and chi = 0: the latent tree (b) is not what breaks the mechanism alone; the "
            "executor's inputs or the heads are")


def read_scores(results: Path) -> dict[str, dict[str, Any]] | None:
    """`arm_scores` of the oracle arms (results/oracle/maze.json; none before it exists) and the
    study's XLVIN arms (results/ablation/maze.json); None while the study has no results."""
    oracle_path, study_path = results / "oracle/maze.json", results / "ablation/maze.json"
    if not study_path.is_file():
        return None
    runs = read_json(oracle_path)["runs"] if oracle_path.is_file() else []
    return {**arm_scores(runs, ORACLE), **arm_scores(read_json(study_path)["runs"], STUDY)}


def page_blocks(results: Path) -> dict[str, str]:
    """The block `why-oracle` of docs/mazes.md, once the study has results."""
    scores = read_scores(results)
    if scores is None:
        return {}
    cells = "; ".join(f"{arm} {len(s['steps'])} cells (seeds {_span(s['seeds'])})"
                      for arm, s in scores.items() if s["seeds"])
    none = [arm for arm, s in scores.items() if not s["seeds"]]
    pairs = [(x, y) for x, y in PAIRS if scores[x]["seeds"] and scores[y]["seeds"]]
    steps = "; ".join(_compare(x, y, scores[x], scores[y], "steps") for x, y in pairs)
    held = "; ".join(_compare(x, y, scores[x], scores[y], "held_out_8") for x, y in pairs
                     if scores[x]["held_out_8"] and scores[y]["held_out_8"])
    said = verdict(scores)
    reading = (f" What it says: {said}." if said else
               f" The oracle arm is read from {MIN_SEEDS} cells an arm, which it has not yet.")
    counts = ", ".join(str(len(scores[arm]["steps"])) for arm in ORACLE)
    headline = (f"(d) On the true tree (the oracle arm, levels 1-{LEVEL}, pre-trained, untrained "
                f"and chi = 0: {counts} of {MIN_SEEDS} cells): "
                + (f"{said}." if said else "too few cells to read yet."))
    return {"why-oracle-headline": headline, "why-oracle": (
        f"On levels 1-{LEVEL} (cells that passed level {LEVEL} or failed before it: {cells}"
        + (f"; no cell yet of {', '.join(none)}" if none else "") + f"): {steps}."
        + (f" Held out: {held}." if held else "") + reading)}


def _span(seeds: list[int]) -> str:
    """'105-111' for consecutive seeds, else '105, 107, 110'."""
    if seeds == list(range(seeds[0], seeds[-1] + 1)):
        return str(seeds[0]) if len(seeds) == 1 else f"{seeds[0]}-{seeds[-1]}"
    return ", ".join(map(str, seeds))
