"""What the executor contributes on the mazes (beyond the paper): the continual 8x8 maze of
`xlvin.experiments.maze` with XLVIN's planner taken apart, every other setting that of the
committed CPU preset (`xlvin-32-b2`: pruned depth-4 tree, 32 wide, orthogonal init; PPO 32 envs x
32 steps, lr 1e-3; a budget of 200,000 episodes a level).

Arms, each a maze agent of `xlvin.experiments.maze.AGENTS` (cells are shared with `xlvin
reproduce maze` under the same --runs):

- XLVIN as committed: the maze executor, pre-trained on the training mazes' MDPs and frozen;
- the same with its executor untrained (its initial weights, frozen);
- the same with its executor pre-trained on XLVIN-R's random graphs instead of mazes;
- the same with zeros in place of the executor's output chi (tree and transition still trained
  by TransE, but the heads hear nothing of the plan);
- PPO-32 with the TransE term (a transition model on PPO's encoder, trained by it alone; no
  tree, no TransE pre-training);
- PPO-32 as committed.

Per cell: env steps and seconds to pass each level, held-out 8x8 and 16x16 success after each.
Per arm, over its finished cells: env steps to pass the last level (a cell that fails a level
counts at `HORIZON`, worse than any that finishes), the area under its level curve (levels passed
against env steps, up to `HORIZON`, as a fraction of all levels), the held-out success after the
last level; each an IQM with its 95 % bootstrap interval and P(arm > PPO-32) (fewer steps,
larger area, higher success); and what the executor contributes, P(XLVIN as committed > each
arm that changes only its executor) on each statistic, with its 95 % interval and its
family-wise one over those `FAMILY` comparisons (Bonferroni). RESULTS/maze.{md,json,png}.
"""

import functools
import json
from pathlib import Path
from typing import Any

import numpy as np

from xlvin.experiments import maze, maze_report
from xlvin.experiments.maze_embeddings import (
    PAPER_LEVELS,
    encode,
    goal_rho_over_mazes,
    long_mazes,
    transe_only,
)
from xlvin.experiments.value_predictability import value_predictability
from xlvin.io.run_dir import METRICS, read_metrics
from xlvin.stats import improvement_over, summarize
from xlvin.ppo.curriculum import CurriculumConfig
from xlvin.run.training import level_weights_file, load_run
from xlvin.run.config import on_cpu

#: arm -> maze agent.
ARMS = {
    "XLVIN (maze executor)": "xlvin-32-b2",
    "XLVIN, untrained executor": "xlvin-32-b2-untrained",
    "XLVIN, executor of random graphs": "xlvin-32-b2-random",
    "XLVIN, chi = 0": "xlvin-32-b2-zero-chi",
    "PPO-32 + TransE term": "ppo-32-transe",
    "PPO-32": "ppo-32",
}
#: The arm every other is compared with.
BASELINE = "PPO-32"
#: XLVIN as committed, and the arms that change only its executor: what the executor
#: contributes is XLVIN against each of them (`executor_contribution`).
COMMITTED = "XLVIN (maze executor)"
EXECUTOR_ARMS = ("XLVIN, untrained executor", "XLVIN, executor of random graphs", "XLVIN, chi = 0")
#: The committed results' seeds, chosen before their first run (`--first-seed`, `--seeds`).
FIRST_SEED, SEEDS = 100, 5
#: The committed CPU preset's budget: episodes a level.
BUDGET = 200_000
#: Env steps over which a level curve's area is taken, and where a cell that failed counts on
#: "env steps to pass the last level". Above the most any committed curriculum took (2.2 M).
HORIZON = 3_000_000


def cells(seeds: list[int], curriculum: CurriculumConfig, device: str = "cpu") -> list[maze.Cell]:
    """Every arm's cell of each seed, seed by seed: cut short, every arm has the same seeds."""
    return [maze.Cell("maze", agent, seed, curriculum, device)
            for seed in seeds for agent in ARMS.values()]


@functools.cache
def _facts(curriculum: str) -> tuple[int, dict[str, dict[int, int]]]:
    cfg = json.loads(curriculum)
    return len(CurriculumConfig(**cfg).levels()), maze_report.held_out_counts(cfg)


def curriculum_facts(record: dict[str, Any]) -> tuple[int, dict[str, dict[int, int]]]:
    """The record's curriculum: how many levels it has, and {side: {level: held-out starts}}."""
    return _facts(json.dumps(record["curriculum"], sort_keys=True))


def cell_scores(record: dict[str, Any]) -> dict[str, Any]:
    """One cell's numbers: whether it passed every level, the env steps and seconds at which it
    passed each level (cumulative), the area under its level curve and, if it finished, the
    held-out success (all levels) after its last level, per side."""
    levels, counts = curriculum_facts(record)
    steps, seconds, passed_at, seconds_at = 0, 0.0, [], []
    for h in record["levels"]:
        steps += h["env_steps"]
        seconds += h.get("seconds", float("nan"))  # runs made before levels were timed: unknown
        if h["passed"]:
            passed_at.append(steps)
            seconds_at.append(seconds)
    finished = record["in_progress"] is None and record["failed_level"] is None
    # the level curve: levels passed against env steps, held after a failure or the last level
    area = sum(HORIZON - min(at, HORIZON) for at in passed_at) / (levels * HORIZON)
    last = record["levels"][-1] if finished else None
    return {
        "finished": finished, "levels": levels, "levels_passed": len(passed_at),
        "steps_at_pass": passed_at, "seconds_at_pass": seconds_at,
        "steps_to_last": passed_at[-1] if finished else None,
        "steps_to_last_or_horizon": min(passed_at[-1], HORIZON) if finished else HORIZON,
        "seconds_to_last": seconds_at[-1] if finished else None,
        "area": area,
        "held_out_last": {side: maze_report.weighted_all(last["held_out"][side], per_level)
                          for side, per_level in counts.items()} if last else {},
    }


#: The statistics of each arm -> whether higher is better: env steps to pass the last level (a
#: failure counts at the horizon), the area under the level curve, held-out 8x8 and 16x16
#: success after the last level.
STATISTICS = {"steps_to_last": False, "area": True, "held_out_8": True, "held_out_16": True}


def aggregate(records: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Per arm: its cells (finished, failed, still training) and, over the cells that ended
    (passed every level or failed one), each of `STATISTICS` as IQM [95 % CI] with P(> PPO-32)."""
    rows = []
    for arm, agent in ARMS.items():
        mine = sorted((r for r in records if r["agent"] == agent), key=lambda r: r["seed"])
        ended = [r for r in mine if r["in_progress"] is None]
        scores = [cell_scores(r) for r in ended]
        values = {
            "steps_to_last": [s["steps_to_last_or_horizon"] for s in scores],
            "area": [s["area"] for s in scores],
            "held_out_8": [s["held_out_last"]["8"] for s in scores if "8" in s["held_out_last"]],
            "held_out_16": [s["held_out_last"]["16"] for s in scores
                            if "16" in s["held_out_last"]],
        }
        seconds = [s["seconds_to_last"] for s in scores if s["finished"]]
        row: dict[str, Any] = {
            "arm": arm, "agent": agent, "seeds": [r["seed"] for r in ended],
            "finished": [r["seed"] for r, s in zip(ended, scores) if s["finished"]],
            "failed": {str(r["seed"]): r["failed_level"] for r in ended if r["failed_level"]},
            "running": [r["seed"] for r in mine if r["in_progress"] is not None],
            "cells": {str(r["seed"]): s for r, s in zip(ended, scores)},
            "seconds_to_last": ({**summarize(np.array(seconds)), "per_seed": seconds}
                                if seconds and np.all(np.isfinite(seconds)) else None),
        }
        for name, runs in values.items():
            row[name] = {**summarize(np.array(runs)), "per_seed": runs} if runs else None
        rows.append(row)
    base = next(r for r in rows if r["arm"] == BASELINE)
    for row in rows:
        if row is not base:
            row.update({f"{name}_over_ppo": p for name, p in _beats(row, base).items()})
    return rows


def _beats(mine: dict[str, Any], theirs: dict[str, Any], family: int = 1) -> dict[str, Any]:
    """statistic -> P(a cell of arm `mine` beats one of arm `theirs`) with its 95 % bootstrap
    interval (`improvement_over`, and its family-wise one in a `family` of comparisons), for
    each of `STATISTICS` both `aggregate` rows have cells of."""
    out = {}
    for name, higher in STATISTICS.items():
        if mine[name] and theirs[name]:
            sign = 1.0 if higher else -1.0
            out[name] = improvement_over(sign * np.array(mine[name]["per_seed"]),
                                         sign * np.array(theirs[name]["per_seed"]), family)
    return out


#: The comparisons read together of what the executor contributes: XLVIN against each of
#: `EXECUTOR_ARMS` on each of `STATISTICS`.
FAMILY = len(EXECUTOR_ARMS) * len(STATISTICS)


def executor_contribution(rows: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    """Each of `EXECUTOR_ARMS` with a cell ended -> P(XLVIN as committed beats it) on each of
    `STATISTICS`, over the cells that ended (`aggregate`'s per-seed values), with its interval
    and its family-wise one over the `FAMILY` comparisons: what the pre-trained maze executor
    adds over an untrained one, one pre-trained on random graphs, and none."""
    by_arm = {r["arm"]: r for r in rows}  # `aggregate` gives every arm a row
    beats = {arm: _beats(by_arm[COMMITTED], by_arm[arm], FAMILY) for arm in EXECUTOR_ARMS}
    return {arm: b for arm, b in beats.items() if b}  # arms with no cell ended yet: none


def per_level(records: list[dict[str, Any]]) -> dict[str, dict[str, dict[str, float]]]:
    """arm -> level -> median env steps and seconds it took to pass (over the cells that passed
    it), and how many of the cells that tried it passed it."""
    out: dict[str, dict[str, dict[str, float]]] = {}
    for arm, agent in ARMS.items():
        tried: dict[int, list[dict[str, Any]]] = {}
        for r in records:
            if r["agent"] == agent:
                for h in r["levels"]:
                    tried.setdefault(h["level"], []).append(h)
        for level, hs in sorted(tried.items()):
            passed = [h for h in hs if h["passed"]]
            timed = [h["seconds"] for h in passed if "seconds" in h]
            out.setdefault(arm, {})[str(level)] = {
                "passed": len(passed), "tried": len(hs),
                "median_env_steps": float(np.median([h["env_steps"] for h in passed])) if passed else None,
                "median_seconds": float(np.median(timed)) if timed else None,
            }
    return out


#: PPO's update-size diagnostics (`update_sizes`): the name in the results -> its metrics tag.
UPDATE_STATS = {"approx_kl": "losses/approx_kl", "clipfrac": "losses/clipfrac",
                "entropy": "losses/entropy"}
def update_sizes(run_dir: Path) -> dict[str, dict[str, float]]:
    """level -> the median, over that level's PPO updates, of the approximate KL between the
    policy before and after an update, the fraction of clipped ratios and the policy's entropy
    (DIR/metrics.jsonl), and the number of updates. It tells a curriculum that fails because its
    policy steps grow too large from one that simply learns slowly."""
    if not (run_dir / METRICS).is_file():  # a record kept from elsewhere, its runs not here
        return {}
    by_level: dict[int, list[dict[str, float]]] = {}
    for row in read_metrics(run_dir):
        if "curriculum/level" in row:
            by_level.setdefault(int(row["curriculum/level"]), []).append(row)
    return {str(level): {"updates": len(rows),
                         **{name: float(np.median([r[tag] for r in rows]))
                            for name, tag in UPDATE_STATS.items()}}
            for level, rows in sorted(by_level.items())}


def cell_dir(record: dict[str, Any], root: Path) -> Path:
    """The run directory under `root` of the cell a record describes."""
    cell = maze.Cell("maze", record["agent"], record["seed"],
                     CurriculumConfig(**record["curriculum"]))
    return cell.run_dir(root)


def with_update_sizes(records: list[dict[str, Any]], root: Path) -> list[dict[str, Any]]:
    """Each record with its cell's `update_sizes` (`"updates"`) read from its run directory
    under `root`."""
    return [{**r, "updates": update_sizes(cell_dir(r, root))} for r in records]


def _geometry_of(encoder: Any, mazes: Any, indices: np.ndarray) -> dict[str, float]:
    """Figure 5's rho (mean over the mazes) and the authors' value predictability (R^2 of V*,
    pooled over the mazes) of one encoder's embeddings."""
    rho = float(np.nanmean(goal_rho_over_mazes(encoder, mazes, indices)))
    r2 = value_predictability(lambda obs: encode(encoder, obs),
                              [(mazes.walls[i], mazes.goals[i]) for i in indices])["r2"]
    return {"rho": rho, "value_r2": r2}


def geometry(records: list[dict[str, Any]], root: Path) -> dict[str, Any]:
    """How each arm's encoder lays out a maze's states, by two measures over the held-out mazes
    with a path of 6 or more moves (`long_mazes`: 56 of the 833 8x8 ones), after levels 1, 2
    and 9 (the paper's figure 5) and, for the XLVIN arms' common start, the TransE pre-training
    alone:

    - rho: figure 5's Spearman rho of ||h_s - h_goal|| against the BFS distance
      (`maze_embeddings.goal_rho`), averaged over the mazes rather than figure 5's one maze;
    - value_r2: the authors' value predictability (`value_predictability`), the in-sample R^2 of
      a linear read-out of V* (the paper's maze MDP) from the embeddings, the mazes' states
      pooled (about 1,100 states for k = 10 features, so it is not the degenerate fit of one
      maze).

    Per arm, level and measure: the per-seed values and their IQM [95 % CI]."""
    if not records:
        return {}
    curriculum = CurriculumConfig(**records[0]["curriculum"])
    mazes = curriculum.held_out_splits()[curriculum.size]
    indices = long_mazes(mazes)
    out: dict[str, Any] = {"mazes": len(indices), "levels": list(PAPER_LEVELS), "arms": {}}
    arm_of = {agent: arm for arm, agent in ARMS.items()}
    for r in sorted(records, key=lambda r: (list(ARMS.values()).index(r["agent"]), r["seed"])):
        run_dir = cell_dir(r, root)
        for level in PAPER_LEVELS:
            if level_weights_file(run_dir, level).is_file():
                agent, _ = load_run(run_dir, level=level)
                measures = _geometry_of(agent.encoder, mazes, indices)
                row = out["arms"].setdefault(arm_of[r["agent"]], {}).setdefault(str(level), {})
                for name, value in measures.items():
                    row.setdefault(name, {"per_seed": {}})["per_seed"][str(r["seed"])] = value
    if any(agent.startswith("xlvin") and arm in out["arms"] for arm, agent in ARMS.items()):
        cfg = on_cpu(maze.Cell("maze", ARMS["XLVIN (maze executor)"], 0, curriculum).config())
        encoder, _, _ = transe_only(cfg, progress=False)
        out["transe_only"] = _geometry_of(encoder, mazes, indices)
    return summarize_geometry(out)


#: The measures of `geometry`, as the tables name them.
GEOMETRY = {"rho": "figure 5's Spearman rho (||h_s - h_goal|| against BFS distance), mean over "
                   "the mazes",
            "value_r2": "the authors' value predictability: R^2 of a linear read-out of V*, the "
                        "mazes' states pooled"}


def summarize_geometry(geo: dict[str, Any]) -> dict[str, Any]:
    """`geo` with each (arm, level, measure)'s per-seed values summarised (`summarize`)."""
    for levels in geo.get("arms", {}).values():
        for measures in levels.values():
            for name, row in measures.items():
                measures[name] = {"per_seed": row["per_seed"],
                                  **summarize(np.array(list(row["per_seed"].values())))}
    return geo
