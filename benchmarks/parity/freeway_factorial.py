"""Why our PPO learns Freeway less often than SB3's: starts x learners x branches.

    python -m benchmarks.parity.freeway_factorial run --worker 0 --workers 2 --runs RUNS
    python -m benchmarks.parity.freeway_factorial report --runs RUNS
    python -m benchmarks.parity.freeway_factorial run --transitions 2048 --branches 1 --runs /tmp/f  # smoke
    python -m benchmarks.parity.freeway_factorial production --seed 0 --transitions 3072

Whole runs mix the draw of the initial weights, the learner, the env seeds and luck. Here they
are crossed (the design, fixed before the first run, is in `DESIGN`):

- **starts**: the untrained networks of SB3's PPO (`new_model(seed)`, seeds 0 and 1) and of ours
  (`our_network(seed)`, seeds 0 and 1), as tensors of our network's names;
- **learners**: `sb3` (SB3 2.9.2's PPO, its value loss unclipped), `ours` (our Atari PPO as
  committed, the value loss clipped around the old values) and `ours-unclipped` (SB3's value loss);
- **branches**: from each start, each learner trains B times on fresh games (branch B: env i reset
  with 20,000 + 1,000 B + i, the same games at reset for every learner; our two learners also
  draw the same sampling noise, SB3 its own), with a fresh Adam, at the Atari settings and the
  100,000-transition budget of the seven-seed study (97 updates of 8 x 128, lr decaying to 0).

Every update records the points its rollout scored (a rollout is half a game's transitions, so
points a game = 2 x points a rollout) and, for the policy that collected it, P(UP) and the
entropy averaged over the rollout's 1,024 states. Per branch: the transition of its first point,
its area (mean points a game over training) and whether it learned by 100,000 transitions (its
last 10 rollouts above `LEARNED_SCORE` points a game, as `benchmarks.parity.atari`'s seeds).

One JSON per branch, RUNS/<family>-start<S>/<learner>/branch<B>.json, written when it ends; a
branch on file is not rerun, and `--done` names a second folder of finished branches (the
committed ones) to skip. Jobs are ordered branch-major (every cell's branch 0 first), and worker
k of n takes jobs k, k + n, ... `report` writes OUT/factorial.{json,md,png}. `production` checks
that the `ours` learner is our production path: `xlvin reproduce atari`'s PPO cell of seed S
(its `run_cell`) and `run_ours` from `our_network(S)` on game seed S must end with the same
weights to the bit. Requires the `bench` extra (stable-baselines3); not part of the tests.
"""

import argparse
import json
import math
from pathlib import Path
from typing import Any

import numpy as np
import torch

from benchmarks.parity.atari import (
    LEARNED_SCORE,
    ROOT,
    atari_ppo,
    copy_into_sb3,
    new_model,
    our_network,
    ours_from_sb3,
    rollout_size,
)

FAMILIES = ("sb3", "ours")
START_SEEDS = (0, 1)
LEARNERS = ("sb3", "ours", "ours-unclipped")
TRANSITIONS = 100_000
BRANCHES = 4
#: Freeway's minimal action set is NOOP, UP, DOWN.
UP = 1
#: Rollouts a game's worth of transitions spans: 8 envs x 128 steps is half a 2,048-step game.
GAMES_PER_ROLLOUT = 0.5
#: Transitions by which a first point is counted in the report.
FIRST_POINT_BY = (16_384, 50_000, 100_000)
DESIGN = (
    "B = 4 branches and 100,000 transitions were fixed before the first run, from a power "
    "calculation on the rates seen at 100,000 transitions (SB3 6 of 7 seeds learned, ours 2 of 7, "
    "ours unclipped 4 of 7), Fisher's exact test at 0.05, 3,000 simulated studies: with 4 starts x "
    "4 branches = 16 branches a learner, sb3 vs ours has power 0.88, sb3 vs ours-unclipped 0.30 "
    "and ours-unclipped vs ours 0.25; a start-family effect as large as the learner gap (8 "
    "branches a family within one learner) 0.54. 48 branches of ~12 CPU minutes: ~10 core-hours. "
    "No branch stops early: learning by 100,000 is decided by the last 10 rollouts, and three of "
    "our 100k seeds scored and then fell back."
)


def branch_seed(branch: int) -> int:
    return 20_000 + 1_000 * branch


def jobs(branches: int) -> list[tuple[str, int, str, int]]:
    """(family, start seed, learner, branch), branch-major."""
    return [(f, s, learner, b) for b in range(branches) for f in FAMILIES for s in START_SEEDS
            for learner in LEARNERS]


def start_weights(family: str, seed: int) -> dict[str, torch.Tensor]:
    """The untrained network of `family`'s PPO drawn with `seed`, in our network's names."""
    if family == "sb3":
        model = new_model(seed, 1)
        model.get_env().close()
        return {k: v.clone() for k, v in ours_from_sb3(model.policy.state_dict()).items()}
    return {k: v.clone() for k, v in our_network(seed).state_dict().items()}


def rollout_stats(rewards: np.ndarray, probs: torch.Tensor, update: int) -> dict[str, Any]:
    """One update's row: points of its rollout (rewards [T, N]), the step of its first point
    (transitions so far, or None), and P(UP) and entropy of the collecting policy over its states
    (probs [T * N, A])."""
    scored = np.flatnonzero(rewards.sum(axis=1) > 0)
    first = (update * rewards.size + (int(scored[0]) + 1) * rewards.shape[1]) if scored.size else None
    entropy = -(probs * probs.clamp_min(1e-12).log()).sum(-1).mean()
    return {"reward": float(rewards.sum()), "first_point_at": first,
            "p_up": float(probs[:, UP].mean()), "entropy": float(entropy)}


def run_sb3(weights: dict[str, torch.Tensor], seed: int, updates: int) -> list[dict[str, Any]]:
    """SB3's PPO from `weights` (fresh Adam) on fresh games seeded `seed`, for `updates` updates."""
    from stable_baselines3.common.callbacks import BaseCallback

    ours = our_network()  # before SB3 seeds torch's global stream, which it samples from
    ours.load_state_dict(weights)
    model = new_model(seed, updates)
    copy_into_sb3(ours, model.policy)
    rows: list[dict[str, Any]] = []

    class Record(BaseCallback):
        def _on_step(self) -> bool:
            return True

        def _on_rollout_end(self) -> None:
            buffer = self.model.rollout_buffer
            obs = torch.as_tensor(buffer.observations).flatten(0, 1)
            with torch.no_grad():
                probs = self.model.policy.get_distribution(obs).distribution.probs
            rows.append(rollout_stats(buffer.rewards, probs, len(rows)))

    try:
        model.learn(updates * rollout_size(), callback=Record())
    finally:
        model.get_env().close()
    return rows


def run_ours(weights: dict[str, torch.Tensor], seed: int, updates: int,
             clip_value_loss: bool) -> tuple[list[dict[str, Any]], torch.nn.Module]:
    """Our PPO (the production path) from `weights` (fresh FlatAdam) on fresh games seeded `seed`:
    its rows and the trained network."""
    from xlvin.envs.atari import atari_train_id
    from xlvin.ppo.collect import collect_rollout, make_actor, make_vector_env, reset_envs
    from xlvin.ppo.update import PPOConfig, make_optimizer, ppo_update, set_learning_rate

    cfg = PPOConfig(total_steps=updates * rollout_size(), clip_value_loss=clip_value_loss,
                    **atari_ppo())
    agent = our_network()
    agent.load_state_dict(weights)
    optimizer = make_optimizer(agent, cfg)
    envs = make_vector_env(atari_train_id("Freeway"), cfg.num_envs)
    state = reset_envs(envs, seed)
    generator = torch.Generator().manual_seed(seed)
    rows = []
    try:
        for u in range(updates):
            set_learning_rate(optimizer, cfg.lr * (1.0 - u / updates))
            rollout = collect_rollout(envs, agent, cfg.num_steps, state, generator, cfg.accelerate)
            with torch.no_grad():
                logits, _ = make_actor(agent, accelerate=False)(rollout.obs[:-1].flatten(0, 1).numpy())
            probs = torch.softmax(torch.as_tensor(logits), -1)
            rows.append(rollout_stats(rollout.rewards.numpy(), probs, u))
            ppo_update(agent, optimizer, rollout, cfg, generator)
    finally:
        envs.close()
    return rows, agent


def branch_path(root: Path, family: str, seed: int, learner: str, branch: int) -> Path:
    return root / f"{family}-start{seed}" / learner / f"branch{branch}.json"


def summary(rows: list[dict[str, Any]]) -> dict[str, Any]:
    """First point, area (points a game over training) and learned (last 10 rollouts)."""
    points = np.array([r["reward"] for r in rows]) / GAMES_PER_ROLLOUT
    first = next((r["first_point_at"] for r in rows if r["first_point_at"] is not None), None)
    return {"first_point_at": first, "area": float(points.mean()),
            "last10": float(points[-10:].mean()), "learned": bool(points[-10:].mean() > LEARNED_SCORE)}


def run(worker: int, workers: int, branches: int, transitions: int, runs: Path,
        done: Path | None) -> None:
    import time

    torch.set_num_threads(1)
    updates = max(1, transitions // rollout_size())
    for i, (family, seed, learner, branch) in enumerate(jobs(branches)):
        path = branch_path(runs, family, seed, learner, branch)
        if i % workers != worker or path.is_file() or (
                done is not None and branch_path(done, family, seed, learner, branch).is_file()):
            continue
        weights = start_weights(family, seed)
        game_seed = branch_seed(branch)
        began, cpu = time.perf_counter(), time.process_time()
        rows = (run_sb3(weights, game_seed, updates) if learner == "sb3"
                else run_ours(weights, game_seed, updates, clip_value_loss=learner == "ours")[0])
        record = {"family": family, "start_seed": seed, "learner": learner, "branch": branch,
                  "game_seed": game_seed, "transitions": updates * rollout_size(),
                  "wall_seconds": time.perf_counter() - began,
                  "cpu_seconds": time.process_time() - cpu, **summary(rows), "rows": rows}
        path.parent.mkdir(parents=True, exist_ok=True)
        path.with_suffix(".tmp").write_text(json.dumps(record))
        path.with_suffix(".tmp").replace(path)
        print(f"{family}-start{seed} {learner} branch {branch}: first point "
              f"{record['first_point_at']}, area {record['area']:.2f}, learned {record['learned']}, "
              f"{record['cpu_seconds']:.0f} CPU s", flush=True)


def production(seed: int, transitions: int, runs: Path) -> float:
    """The largest weight difference between `xlvin reproduce atari`'s PPO cell of `seed`
    trained for `transitions` and `run_ours` from the same untrained network and game seed."""
    from safetensors.torch import load_file

    from xlvin.experiments.atari import Cell, run_cell

    torch.set_num_threads(1)
    cell = Cell("Freeway", "ppo", seed, transitions)
    run_cell(cell, runs, eval_games=1)
    theirs = load_file(str(cell.run_dir(runs) / "model.safetensors"))
    _, agent = run_ours(start_weights("ours", seed), seed, transitions // rollout_size(), True)
    ours = agent.state_dict()
    apart = max(float((ours[k] - theirs[k]).abs().max()) for k in ours)
    print(f"seed {seed}, {transitions:,} transitions: largest weight difference {apart:.3g}")
    return apart


def proportion(k: int, n: int) -> str:
    """k of n with Wilson's 95 % interval."""
    if n == 0:
        return "-"
    z, p = 1.96, k / n
    centre = (p + z * z / (2 * n)) / (1 + z * z / n)
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / (1 + z * z / n)
    return f"{k}/{n} [{max(0.0, centre - half):.2f}, {min(1.0, centre + half):.2f}]"


def report(runs: Path, out: Path) -> None:
    """OUT/factorial.{json,md,png}: per learner x start family, P(first point by N), P(learned by
    100k) with Wilson intervals, the area's IQM [95 % bootstrap CI]; Fisher's test between
    learners (pooled over families) and between families (within a learner)."""
    from xlvin.stats import fisher_exact, interval_text, summarize

    records = [json.loads(p.read_text()) for p in sorted(runs.glob("*-start*/*/branch*.json"))]
    groups: dict[tuple[str, str], list[dict[str, Any]]] = {}
    for r in records:
        groups.setdefault((r["learner"], r["family"]), []).append(r)
        groups.setdefault((r["learner"], "both"), []).append(r)
    by = " | ".join(f"first point by {n:,}" for n in FIRST_POINT_BY)
    lines = ["# Freeway factorial: starts x learners x branches", "",
             f"{len(records)} of {len(jobs(BRANCHES)) } branches on file. "
             "`benchmarks/parity/freeway_factorial.py` says how; the design was fixed first: "
             + DESIGN, "",
             f"| learner | starts | branches | {by} | learned by 100k | area, IQM [95 % CI] |",
             "|---|---|---|" + "---|" * len(FIRST_POINT_BY) + "---|---|"]
    table: dict[str, Any] = {}
    for learner in LEARNERS:
        for family in (*FAMILIES, "both"):
            rs = groups.get((learner, family), [])
            if not rs:
                continue
            counts = {n: sum(r["first_point_at"] is not None and r["first_point_at"] <= n for r in rs)
                      for n in FIRST_POINT_BY}
            learned = sum(r["learned"] for r in rs)
            area = summarize([r["area"] for r in rs])
            table[f"{learner}/{family}"] = {"branches": len(rs), "first_point_by": counts,
                                            "learned": learned, "area": area}
            lines.append(f"| {learner} | {family} | {len(rs)} | "
                         + " | ".join(proportion(counts[n], len(rs)) for n in FIRST_POINT_BY)
                         + f" | {proportion(learned, len(rs))} | "
                         f"{interval_text(area['iqm'], area['iqm_low'], area['iqm_high'], 2)} |")
    lines.append("")
    tests = {}
    for a, b in (("sb3", "ours"), ("sb3", "ours-unclipped"), ("ours-unclipped", "ours")):
        x, y = table.get(f"{a}/both"), table.get(f"{b}/both")
        if x and y:
            tests[f"{a} vs {b}"] = fisher_exact(x["learned"], x["branches"], y["learned"], y["branches"])
    for learner in LEARNERS:
        x, y = table.get(f"{learner}/sb3"), table.get(f"{learner}/ours")
        if x and y:
            tests[f"{learner}: sb3 starts vs ours"] = fisher_exact(
                x["learned"], x["branches"], y["learned"], y["branches"])
    lines += [f"- learned by 100k, {k}: Fisher p = {p:.2f}" for k, p in tests.items()]
    out.mkdir(parents=True, exist_ok=True)
    (out / "factorial.json").write_text(json.dumps({"design": DESIGN, "table": table,
                                                    "fisher_learned": tests}, indent=1))
    (out / "factorial.md").write_text("\n".join(lines) + "\n")
    plot(records, out / "factorial.png")
    print("\n".join(lines))


def plot(records: list[dict[str, Any]], path: Path) -> None:
    """Points a game per update and P(UP) per update, a column per learner, a colour per family."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(2, len(LEARNERS), figsize=(12, 6), sharex=True, sharey="row",
                             squeeze=False)
    colours = {"sb3": "tab:blue", "ours": "tab:orange"}
    for j, learner in enumerate(LEARNERS):
        axes[0, j].set_title(learner)
        for r in (r for r in records if r["learner"] == learner):
            x = np.arange(1, len(r["rows"]) + 1) * rollout_size()
            axes[0, j].plot(x, [row["reward"] / GAMES_PER_ROLLOUT for row in r["rows"]],
                            color=colours[r["family"]], alpha=0.6, lw=1)
            axes[1, j].plot(x, [row["p_up"] for row in r["rows"]], color=colours[r["family"]],
                            alpha=0.6, lw=1)
        axes[1, j].set_xlabel("transitions")
    axes[0, 0].set_ylabel("points a game (training)")
    axes[1, 0].set_ylabel("P(UP) over the rollout")
    for family, colour in colours.items():
        axes[0, 0].plot([], [], color=colour, label=f"{family} starts")
    axes[0, 0].legend()
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("mode", choices=("run", "report", "production"))
    parser.add_argument("--seed", type=int, default=0, help="production: the cell's seed")
    parser.add_argument("--worker", type=int, default=0)
    parser.add_argument("--workers", type=int, default=1)
    parser.add_argument("--branches", type=int, default=BRANCHES)
    parser.add_argument("--transitions", type=int, default=TRANSITIONS)
    parser.add_argument("--runs", type=Path, default=ROOT / "runs" / "freeway-factorial")
    parser.add_argument("--done", type=Path, default=None,
                        help="run: a folder of finished branches to skip (the committed ones)")
    parser.add_argument("--out", type=Path,
                        default=ROOT / "results" / "parity" / "freeway-factorial")
    args = parser.parse_args()
    if not 0 <= args.worker < args.workers:
        parser.error(f"--worker: 0 .. {args.workers - 1}, got {args.worker}")
    if args.mode == "production":
        production(args.seed, args.transitions, args.runs)
    elif args.mode == "run":
        run(args.worker, args.workers, args.branches, args.transitions, args.runs, args.done)
    else:
        report(args.runs, args.out)


if __name__ == "__main__":
    main()
