"""docs/mazes.md's reading of why the executor does not help: which link of XLVIN's chain the
measurements break so far, and at what power. (a) from the true trees
(`executor_true_trees_report`), (b) and (c) from the trained cells' latent trees and probes
(`executor_latent_trees_report`, `executor_probes_report`), compared only from `MIN_SEEDS`
seeds an arm; and how many cells of its protocol the oracle arm has (`oracle_report`'s,
results/oracle/maze.json), with its verdict once it has 10 an arm."""

from pathlib import Path
from typing import Any

from xlvin.experiments import oracle_report
from xlvin.experiments.executor_latent_trees_report import (TRANSE_ALONE, against_chance,
                                                            against_transe_alone, depth_one)
from xlvin.experiments.executor_probes_report import chi_adds
from xlvin.experiments.maze_ablation import ARMS, COMMITTED
from xlvin.io.files import read_json
from xlvin.stats import improvement_text, share_text
from xlvin.wording import MIN_SEEDS, seed_count, separated

#: Link (b) breaks where, at depth 1 and where the agent moves, the 95 % interval of XLVIN's
#: hits@1 lies below this share: most of its predicted moves land nearer another action's true
#: successor than their own (written after reading nine seeds an arm, docs/mazes.md).
MOST = 0.5


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


def _link_b(latent: dict[str, Any]) -> tuple[str, bool | None]:
    """(b) from XLVIN's hits@1 where the agent moves at depth 1 against `MOST`, and against the
    arm whose heads read no tree; and whether it breaks (None: not shown either way)."""
    first = depth_one(latent)
    xlvin, alone = first[ARMS[COMMITTED]], first[ARMS[TRANSE_ALONE]]
    hits = xlvin["moved_hit"]
    evidence = (f"where the agent moves, XLVIN's depth-1 prediction is nearest its own move's "
                f"true successor on {share_text(hits, True)} % of moves "
                f"({seed_count(len(xlvin['seeds']))}; on the true tree, 100 %), "
                + against_chance(xlvin, latent))
    if hits["iqm_high"] < MOST:
        broken, said = True, ("(b) breaks, the latent tree is not the MDP's: " + evidence
                              + ", so most of its moves land nearer another action's true "
                                "successor than their own")
    elif hits["iqm_low"] > MOST:
        broken, said = False, (f"(b) holds at depth 1: {evidence}, so most of its moves land "
                               "nearest their own true successor")
    else:
        broken, said = None, f"(b) is not shown to break or to hold: {evidence}"
    return f"{said}; {against_transe_alone(xlvin, alone)}", broken


def _link_c(probes: dict[str, Any]) -> tuple[str, bool | None]:
    """(c) from whether another state's chi_s moves XLVIN's greedy action (the heads read it)
    and whether chi_s adds to h_s what a probe of V* needs; and whether it breaks."""
    xlvin = next(row for row in probes["rows"] if row["agent"] == ARMS[COMMITTED])
    changed = xlvin["moves"]["chi"]["greedy_changed"]
    evidence = (f"another state's chi_s changes XLVIN's greedy action on "
                f"{share_text(changed, True)} % of states ({seed_count(len(xlvin['seeds']))})")
    if changed["iqm_low"] > 0:
        broken, said = False, f"(c) does not break: the heads read chi_s ({evidence})"
    else:
        broken, said = True, f"(c) breaks: the heads do not read chi_s ({evidence})"
    return f"{said}; {chi_adds(xlvin)}", broken


def _trained_links(latent: dict[str, Any], probes: dict[str, Any]) -> tuple[str, str]:
    """(b) and (c) once each arm has `MIN_SEEDS` seeds, and which of them break."""
    (b, b_breaks), (c, c_breaks) = _link_b(latent), _link_c(probes)
    broken = [link for link, breaks in (("(b)", b_breaks), ("(c)", c_breaks)) if breaks]
    return f"{b}; {c}", " and ".join(broken) if broken else "none of (b) and (c)"


def page_blocks(results: Path) -> dict[str, str]:
    """The blocks `why-reading` and `why-verdict-headline` of docs/mazes.md, once the three
    measurements have results."""
    folder = results / "why-executor"
    paths = [folder / f"{stem}.json" for stem in ("true-trees", "latent-trees", "probes")]
    if not all(path.is_file() for path in paths):
        return {}
    trees, latent, probes = (read_json(path) for path in paths)
    seeds = [len(r["seeds"]) for r in latent["rows"] if r["depth"] == 1]
    seeds += [len(r["seeds"]) for r in probes["rows"]]
    read = ({r.get("agent") for r in latent["rows"]} >= {ARMS[COMMITTED], ARMS[TRANSE_ALONE]}
            and ARMS[COMMITTED] in {r.get("agent") for r in probes["rows"]})
    seeds += [] if read else [0]  # an arm the reading needs has no cell measured yet
    fewest, most = min(seeds), max(seeds)
    if fewest < MIN_SEEDS:
        measured = f"{fewest}" + ("" if most == fewest else f" to {most}")
        trained = (f"(b) and (c) are compared from {MIN_SEEDS} seeds an arm, and the maze "
                   f"study's ended cells measured so far give {measured} an arm: at this power "
                   "neither link is shown to break or to hold (their verdicts above say 'not "
                   "compared')")
        headline = (f"Which of (b) and (c) breaks is read from {MIN_SEEDS} seeds an arm; "
                    f"the measurements have {measured} so far.")
    else:
        links, broken = _trained_links(latent, probes)
        trained = f"{links}. So the link that breaks, at this power, is {broken}"
        headline = f"The link that breaks, at this power: {broken} (the reading on the page)."
    oracle = results / "oracle/maze.json"
    runs = read_json(oracle)["runs"] if oracle.is_file() else []
    cells = oracle_report.arm_scores(runs, oracle_report.ORACLE)  # the cells read, per arm
    done = ", ".join(f"`{agent}` {len(cells[arm]['seeds'])} of {oracle_report.SEEDS}"
                     for arm, agent in oracle_report.ORACLE.items())
    study = results / "ablation/maze.json"
    said = (oracle_report.verdict(oracle_report.scores_of(runs, read_json(study)["runs"]))
            if study.is_file() else None)
    return {"why-verdict-headline": headline, "why-reading": (
        f"Which link breaks, as far as the measurements go: {_link_a(trees)}; {trained}. The "
        f"oracle arm, which would tell a broken latent tree (b) from the rest, has these cells "
        f"ended: {done}" + (f"; it says that {said}." if said else "."))}
