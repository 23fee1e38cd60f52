"""The oracle arm (beyond the paper; docs/mazes.md, "Why the executor does not help"): XLVIN
on the maze's true tree (`xlvin.nn.true_tree`: the encoder's embeddings of the true successor
observations, no transition model) with the pre-trained maze executor, an untrained one and
chi = 0 (`xlvin-32-b2-oracle*`), on the maze study's curriculum cut at level 4 (`LEVEL`: the goal
inside the depth-4 tree) with held-out 8x8 evaluations only, since an oracle cell costs several
times an `xlvin-32-b2` cell. Each cell, and each of the study's XLVIN arms
(results/ablation/maze.json), is read on levels 1 to 4: the env steps to pass level 4 (a
failure before it counts at the study's horizon) and the held-out 8x8 success after
it. If the pre-trained executor separates from the untrained one and from chi = 0 on the true
tree, the learned latent tree is what breaks XLVIN's mechanism; if not, the executor's inputs or
the heads are. Seeds 105-114 (`FIRST_SEED`, `SEEDS`), fixed before any oracle run."""

import dataclasses
from pathlib import Path
from typing import Any

import numpy as np

from xlvin.experiments import maze, maze_report
from xlvin.experiments.figures import iqm_marks, pyplot
from xlvin.experiments.maze_ablation import BUDGET, HORIZON, curriculum_facts
from xlvin.experiments.results import write_files
from xlvin.io.files import atomic_savefig, read_json
from xlvin.ppo.curriculum import CurriculumConfig
from xlvin.stats import improvement_over, iqm, summarize
from xlvin.wording import MIN_SEEDS, compare, seed_counts, separated

#: The oracle protocol's last level, fixed before its runs (docs/mazes.md).
LEVEL = 4
#: Its curriculum: the maze study's budget, levels 1 to `LEVEL`, held-out 8x8 evaluations only.
CURRICULUM = CurriculumConfig(budget=BUDGET, last_level=LEVEL, ood_size=0)
#: Its seeds, fixed before any of its runs: the maze study's first ten new ones.
FIRST_SEED, SEEDS = 105, 10
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


def cells(seeds: list[int], curriculum: CurriculumConfig, device: str = "cpu") -> list[maze.Cell]:
    """The three oracle agents' cells of each seed, seed by seed: cut short, every arm has the
    same seeds."""
    return [maze.Cell("maze", agent, seed, curriculum, device)
            for seed in seeds for agent in ORACLE.values()]


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
                    "held_out_8": maze_report.weighted_all(h["held_out"]["8"], counts)}
    return None


#: The curriculum fields a cell read beside the oracle's shares with `CURRICULUM`: all but
#: where it ends and its 16x16 evaluations.
SHARED = {k: v for k, v in dataclasses.asdict(CURRICULUM).items()
          if k not in ("last_level", "ood_size")}


def on_protocol(record: dict[str, Any]) -> bool:
    """Whether a cell trained on the oracle protocol's levels 1 to `LEVEL` as the oracle's do:
    the same curriculum but where it ends (at `LEVEL` or later) and its 16x16 evaluations."""
    curriculum = record["curriculum"]
    return (all(curriculum.get(k) == v for k, v in SHARED.items())
            and (curriculum.get("last_level") == 0 or curriculum.get("last_level", 0) >= LEVEL))


def arm_scores(records: list[dict[str, Any]], arms: dict[str, str]) -> dict[str, dict[str, Any]]:
    """Arm -> its cells' seeds and per-seed steps and held-out success (`level_scores`), in seed
    order, over the cells on the protocol (`on_protocol`) that have passed level `LEVEL` or
    failed before it."""
    out = {}
    for arm, agent in arms.items():
        scored = sorted((r["seed"], s) for r in records if r["agent"] == agent
                        and on_protocol(r) for s in [level_scores(r)] if s is not None)
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
    return compare(x, y, protocol=seed_counts(len(mine), len(theirs)),
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


def read_scores(oracle_json: Path, study_json: Path) -> dict[str, dict[str, Any]] | None:
    """`arm_scores` of the oracle arms (an oracle results file; none before it exists) and the
    study's XLVIN arms (the study's results file); None while the study has no results."""
    if not study_json.is_file():
        return None
    runs = read_json(oracle_json)["runs"] if oracle_json.is_file() else []
    return scores_of(runs, read_json(study_json)["runs"])


def scores_of(oracle_runs: list[dict[str, Any]],
              study_runs: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    """`arm_scores` of the oracle arms' records and of the study's XLVIN arms' records."""
    return {**arm_scores(oracle_runs, ORACLE), **arm_scores(study_runs, STUDY)}


def reading(scores: dict[str, dict[str, Any]]) -> str:
    """Each arm's cells and `PAIRS` worded by their intervals, then the verdict (`verdict`)."""
    cells = "; ".join(f"{arm} {len(s['steps'])} cell{'s' * (len(s['steps']) != 1)} "
                      f"(seed{'s' * (len(s['seeds']) != 1)} {_span(s['seeds'])})"
                      for arm, s in scores.items() if s["seeds"])
    none = [arm for arm, s in scores.items() if not s["seeds"]]
    pairs = [(x, y) for x, y in PAIRS if scores[x]["seeds"] and scores[y]["seeds"]]
    steps = "; ".join(_compare(x, y, scores[x], scores[y], "steps") for x, y in pairs)
    held = "; ".join(_compare(x, y, scores[x], scores[y], "held_out_8") for x, y in pairs
                     if scores[x]["held_out_8"] and scores[y]["held_out_8"])
    said = verdict(scores)
    return (f"On levels 1-{LEVEL} (cells that passed level {LEVEL} or failed before it: {cells}"
            + (f"; no cell yet of {', '.join(none)}" if none else "") + f"): {steps}."
            + (f" Held out: {held}." if held else "")
            + (f" What it says: {said}." if said else
               f" The oracle arm is read from {MIN_SEEDS} cells an arm, which it has not yet."))


def page_blocks(results: Path) -> dict[str, str]:
    """The block `why-oracle` of docs/mazes.md and its README headline, once the study has
    results (from results/oracle/maze.json and results/ablation/maze.json)."""
    scores = read_scores(results / "oracle/maze.json", results / "ablation/maze.json")
    if scores is None:
        return {}
    said = verdict(scores)
    counts = ", ".join(str(len(scores[arm]["steps"])) for arm in ORACLE)
    headline = (f"(d) On the true tree (the oracle arm, levels 1-{LEVEL}, pre-trained, untrained "
                f"and chi = 0: {counts} of {MIN_SEEDS} cells): "
                + (f"{said}." if said else "too few cells to read yet."))
    return {"why-oracle-headline": headline, "why-oracle": reading(scores)}


def level_steps(records: list[dict[str, Any]], agent: str) -> dict[int, list[float]]:
    """Level -> the agent's cells' cumulative env steps to pass it (`HORIZON` after a failure),
    over levels 1 to `LEVEL`, of the cells that have got that far."""
    out: dict[int, list[float]] = {}
    for r in records:
        if r["agent"] == agent:
            for level in range(1, LEVEL + 1):
                score = level_scores(r, level)
                if score is not None:
                    out.setdefault(level, []).append(score["steps"])
    return out


#: Each arm's colour in the figure: oracle arms solid, the study's arms their lighter kin.
COLOURS = dict(zip([*ORACLE, *STUDY], ["tab:blue", "tab:orange", "tab:green",
                                        "lightsteelblue", "navajowhite", "palegreen"]))


def plot(oracle_records: list[dict[str, Any]], study_records: list[dict[str, Any]],
         path: Path) -> None:
    """The env steps each arm's cells took to pass levels 1 to `LEVEL` (cumulative): every
    seed a point, the IQM with its 95 % interval a bar; the oracle arms beside the study's."""
    plt = pyplot()
    fig, ax = plt.subplots(figsize=(7.6, 4.2))
    arms = [(arm, agent, oracle_records) for arm, agent in ORACLE.items()]
    arms += [(arm, agent, study_records) for arm, agent in STUDY.items()]
    width = 0.8 / len(arms)
    for i, (arm, agent, records) in enumerate(arms):
        for level, steps in level_steps(records, agent).items():
            x = level - 0.4 + width * (i + 0.5)
            iqm_marks(ax, x, {**summarize(np.array(steps)), "per_seed": steps}, COLOURS[arm],
                      scale=1e-3, spread=width / 3)
        ax.scatter([], [], color=COLOURS[arm], label=arm)
    ax.set_xticks(range(1, LEVEL + 1))
    ax.set_xlabel("level passed")
    ax.set_ylabel("env steps to pass it (thousands)")
    ax.set_title("XLVIN on the true tree (oracle) and on its latent tree")
    ax.legend(fontsize=7, ncol=2)
    fig.tight_layout()
    atomic_savefig(fig, path, dpi=130)
    plt.close(fig)


def write_results(records: list[dict[str, Any]], results: Path) -> str:
    """RESULTS/maze.{md,json} and its figures (`maze_report.write_results`: the oracle cells'
    curricula), and RESULTS/oracle.{md,json,png}: the oracle arms beside the study's XLVIN arms
    of RESULTS/../ablation/maze.json (`reading`)."""
    maze_report.write_results(records, results, None)
    study_json = results.parent / "ablation/maze.json"
    if not study_json.is_file():
        return f"no study results at {study_json}: only the oracle curricula were written"
    oracle_runs, study = read_json(results / "maze.json")["runs"], read_json(study_json)["runs"]
    scores = scores_of(oracle_runs, study)
    md = (f"# The oracle arm: XLVIN on the maze's true tree\n\n{reading(scores)}\n")
    write_files(results, "oracle", md, {"level": LEVEL, "horizon": HORIZON, "scores": scores})
    plot(oracle_runs, study, results / "oracle.png")
    return md


def _span(seeds: list[int]) -> str:
    """'105-111' for consecutive seeds, else '105, 107, 110'."""
    if seeds == list(range(seeds[0], seeds[-1] + 1)):
        return str(seeds[0]) if len(seeds) == 1 else f"{seeds[0]}-{seeds[-1]}"
    return ", ".join(map(str, seeds))
