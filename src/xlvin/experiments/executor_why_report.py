"""docs/mazes.md's reading of why the executor does not help: which link of XLVIN's chain the
measurements break so far, and at what power. (a) from the true trees
(`executor_true_trees_report`), (b) and (c) from the trained cells' latent trees and probes
(`executor_latent_trees_report`, `executor_probes_report`), compared only from `MIN_SEEDS`
seeds an arm; and how many cells of its protocol the oracle arm has (`oracle_report`'s,
results/oracle/maze.json), with its verdict once it has 10 an arm."""

from pathlib import Path
from typing import Any

from xlvin.experiments import oracle_report
from xlvin.io.files import read_json
from xlvin.stats import improvement_text
from xlvin.wording import MIN_SEEDS, separated


def _link_a(trees: dict[str, Any]) -> str:
    """(a) from the pre-trained executor against the others, run as XLVIN's planner runs it and
    scored against value iteration on the tree."""
    planner = [c for c in trees["comparisons"] if (c["protocol"], c["reference"])
               == ("planner", "tree") and c["x"] == "maze"]
    evidence = (f"P(`maze` right more often) over {trees['setup']['mazes']} mazes: "
                + ", ".join(f"against `{c['y']}` {improvement_text(c['improvement'])}"
                            for c in planner))
    if planner and all(separated(c["improvement"]) is True for c in planner):
        return ("(a) does not break before learning: over true trees, run as XLVIN's planner "
                "runs it, the pre-trained executor picks value iteration's action more often "
                f"than the untrained one and the one of random graphs ({evidence})")
    return ("(a) is not established: the pre-trained executor is not ahead of every other "
            f"({evidence})")


def page_blocks(results: Path) -> dict[str, str]:
    """The block `why-reading` of docs/mazes.md, once the three measurements have results."""
    folder = results / "why-executor"
    paths = [folder / f"{stem}.json" for stem in ("true-trees", "latent-trees", "probes")]
    if not all(path.is_file() for path in paths):
        return {}
    trees, latent, probes = (read_json(path) for path in paths)
    seeds = [len(r["seeds"]) for r in latent["rows"] if r["depth"] == 1]
    seeds += [len(r["seeds"]) for r in probes["rows"]]
    fewest, most = min(seeds), max(seeds)
    if fewest < MIN_SEEDS:
        trained = (f"(b) and (c) are compared from {MIN_SEEDS} seeds an arm, and the maze "
                   f"study's ended cells measured so far give {fewest}"
                   + ("" if most == fewest else f" to {most}") + " an arm: at this power "
                   "neither link is shown to break or to hold (their verdicts above say 'not "
                   "compared')")
    else:
        trained = (f"(b) and (c) have {fewest} seeds an arm or more: their verdicts are the "
                   "sentences above")
    oracle = results / "oracle/maze.json"
    runs = read_json(oracle)["runs"] if oracle.is_file() else []
    cells = oracle_report.arm_scores(runs, oracle_report.ORACLE)  # the cells read, per arm
    done = ", ".join(f"`{agent}` {len(cells[arm]['seeds'])} of {oracle_report.SEEDS}"
                     for arm, agent in oracle_report.ORACLE.items())
    study = results / "ablation/maze.json"
    said = (oracle_report.verdict(oracle_report.scores_of(runs, read_json(study)["runs"]))
            if study.is_file() else None)
    return {"why-reading": (
        f"Which link breaks, as far as the measurements go: {_link_a(trees)}; {trained}. The "
        f"oracle arm, which would tell a broken latent tree (b) from the rest, has these cells "
        f"ended: {done}" + (f"; it says that {said}." if said else "."))}
