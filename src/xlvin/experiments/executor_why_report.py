"""docs/mazes.md's reading of why the executor does not help: which link of XLVIN's chain the
measurements break so far, and at what power. (a) from the true trees
(`executor_true_trees_report`), (b) and (c) from the trained cells' latent trees and probes
(`executor_latent_trees_report`, `executor_probes_report`), compared only from `MIN_SEEDS`
seeds an arm; and how many cells the oracle arm has (`xlvin.experiments.maze`'s
`xlvin-32-b2-oracle*`, results/oracle/maze.json), with its verdict (`oracle_report`) once it has
10 an arm."""

from pathlib import Path
from typing import Any

from xlvin.experiments import oracle_report
from xlvin.experiments.maze import AGENTS
from xlvin.io.files import read_json
from xlvin.stats import improvement_text
from xlvin.wording import MIN_SEEDS, separated

#: The oracle arm's agents, and the seeds fixed for it before any ran (docs/mazes.md).
ORACLE_AGENTS = tuple(agent for agent in AGENTS if "oracle" in agent)
ORACLE_SEEDS = 10


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


def _oracle_cells(results: Path) -> dict[str, int]:
    """Oracle agent -> its cells that ended, in results/oracle/maze.json (none: no file)."""
    ended = dict.fromkeys(ORACLE_AGENTS, 0)
    path = results / "oracle/maze.json"
    if path.is_file():
        for run in read_json(path)["runs"]:
            if run.get("agent") in ended and run.get("in_progress") is None:
                ended[run["agent"]] += 1
    return ended


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
    oracle = _oracle_cells(results)
    done = ", ".join(f"`{agent}` {n} of {ORACLE_SEEDS}" for agent, n in oracle.items())
    scores = oracle_report.read_scores(results / "oracle/maze.json",
                                       results / "ablation/maze.json")
    said = None if scores is None else oracle_report.verdict(scores)
    return {"why-reading": (
        f"Which link breaks, as far as the measurements go: {_link_a(trees)}; {trained}. The "
        f"oracle arm, which would tell a broken latent tree (b) from the rest, has these cells "
        f"ended: {done}" + (f"; it says that {said}." if said else "."))}
