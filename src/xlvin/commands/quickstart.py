"""`xlvin quickstart`: the README's main job, a small reproduction that runs in minutes on 2 cores.

It produces the default XLVIN-R executor (pre-trained on random deterministic graphs), trains
XLVIN and the PPO baseline on CartPole-v0 with one seed and the same PPO budget, evaluates both
final policies on fresh seeds and prints a results table.
"""

import argparse
import dataclasses
import time
from datetime import datetime
from pathlib import Path

from xlvin.commands.train import EVAL_SEED
from xlvin.io.run_dir import write_json
from xlvin.train.ppo import PPOConfig
from xlvin.train.run import RunConfig, TrainConfig, evaluate_run, train_run


def results_table(rows: list[dict]) -> str:
    """Markdown table of the quickstart's results."""
    lines = [
        "| agent | env | PPO env steps | TransE random steps | eval return (100 ep.) | train time |",
        "|---|---|---|---|---|---|",
    ]
    for r in rows:
        lines.append(
            f"| {r['agent']} | {r['env']} | {r['steps']:,} | {r['transe_transitions']:,} | "
            f"{r['mean']:.1f} +- {r['std']:.1f} | {r['seconds']:.0f} s |"
        )
    return "\n".join(lines)


def _quickstart(args: argparse.Namespace) -> None:
    start = time.perf_counter()
    out = args.out or Path("runs") / f"quickstart-{datetime.now():%Y%m%d-%H%M%S}"
    rows = []
    for agent in ("xlvin", "ppo"):
        cfg = RunConfig(
            train=TrainConfig(env=args.env, agent=agent, seed=args.seed),
            ppo=dataclasses.replace(PPOConfig(), total_steps=args.steps),
        )
        _, summary = train_run(cfg, out / agent, progress=not args.quiet)
        result = evaluate_run(out / agent, episodes=args.episodes, seed=EVAL_SEED)
        rows.append(
            {
                "agent": agent,
                "env": args.env,
                "steps": summary["ppo"]["global_step"],
                "transe_transitions": summary.get("transe_transitions", 0),
                "mean": result["mean"],
                "std": result["std"],
                "seconds": summary["wall_seconds"],
            }
        )
    table = results_table(rows)
    write_json(out / "results.json", {"rows": rows, "wall_seconds": time.perf_counter() - start})
    (out / "results.md").write_text(table + "\n")
    print()
    print(table)
    print(f"\nwall time {time.perf_counter() - start:.0f} s; runs in {out}")


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "quickstart",
        help="the README's main job: XLVIN vs PPO on CartPole-v0, one seed, a few minutes",
        description=__doc__,
    )
    p.add_argument("--env", default="CartPole-v0", help="environment id (default CartPole-v0)")
    p.add_argument("--seed", type=int, default=0, help="training seed (default 0)")
    p.add_argument("--steps", type=int, default=30_000, help="PPO env steps per agent (default 30000)")
    p.add_argument("--episodes", type=int, default=100, help="evaluation episodes (default 100)")
    p.add_argument("--out", type=Path, help="output folder (default runs/quickstart-TIMESTAMP)")
    p.add_argument("--quiet", action="store_true", help="no progress bars")
    p.set_defaults(func=_quickstart)
