"""`xlvin quickstart`: the README's main job, a small reproduction that runs in minutes on 2 cores.

One seed of the CartPole-v0 row of the paper's Table 1: the default XLVIN-R executor is
pre-trained on random deterministic graphs (cached after the first time), then PPO and XLVIN-R
learn from only 10 trajectories collected with their initial policy (100 PPO updates on that
data), and both final policies are evaluated greedily on 100 fresh episodes.
`xlvin reproduce classic` runs the whole table.
"""

import argparse
import time
from datetime import datetime
from pathlib import Path

from tqdm import tqdm

from xlvin.errors import UserError
from xlvin.experiments import table1


def results_table(records: list[dict]) -> str:
    """Markdown table of the quickstart's results, beside the paper's numbers."""
    lines = [
        "| agent | env | trajectories (transitions) | TransE random transitions | "
        "final return (100 ep.) | paper (5 seeds) | train time |",
        "|---|---|---|---|---|---|---|",
    ]
    for r in records:
        paper_mean, paper_std = table1.PAPER[(r["env"], r["agent"])]
        lines.append(
            f"| {r['agent']} | {r['env']} | {r['episodes']} ({r['transitions']}) | "
            f"{r['transe_transitions']:,} | {r['final_return']:.1f} +- "
            f"{r['final_return_std_over_episodes']:.1f} | {paper_mean} +- {paper_std} | "
            f"{r['wall_seconds']:.0f} s |"
        )
    return "\n".join(lines)


def _quickstart(args: argparse.Namespace) -> None:
    start = time.perf_counter()
    out = args.out or Path("runs") / f"quickstart-{datetime.now():%Y%m%d-%H%M%S}"
    if out.exists():
        raise UserError(f"--out {out} already exists; choose a new directory")
    cells = [table1.Cell("CartPole-v0", agent, args.seed) for agent in ("ppo", "xlvin-r")]
    bar = tqdm(total=len(cells), desc="train + evaluate", unit="agent")
    records = table1.run_cells(cells, out, jobs=1, on_done=lambda _: bar.update())
    bar.close()
    table = results_table(records)
    (out / "results.md").write_text(table + "\n")
    print()
    print(table)
    print(f"\nwall time {time.perf_counter() - start:.0f} s; runs in {out}")


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "quickstart",
        help="the README's main job: XLVIN-R vs PPO on CartPole-v0 from 10 trajectories",
        description=__doc__,
    )
    p.add_argument("--seed", type=int, default=0, help="training seed (default 0)")
    p.add_argument("--out", type=Path, help="new output folder (default runs/quickstart-TIMESTAMP)")
    p.set_defaults(func=_quickstart)
