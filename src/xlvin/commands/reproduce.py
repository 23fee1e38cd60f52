"""`xlvin reproduce classic`: the paper's Table 1, every cell, resumable, into results/."""

import argparse
import time
from pathlib import Path

from tqdm import tqdm

from xlvin.errors import UserError
from xlvin.experiments import table1
from xlvin.io.run_dir import write_json


def _csv(text: str, allowed: tuple[str, ...], what: str) -> list[str]:
    items = [x.strip() for x in text.split(",") if x.strip()]
    bad = [x for x in items if x not in allowed]
    if bad or not items:
        raise UserError(f"unknown {what} {', '.join(bad) or text!r}; choose from {', '.join(allowed)}")
    return items


def _classic(args: argparse.Namespace) -> None:
    if args.seeds < 1 or args.jobs < 1:
        raise UserError("--seeds and --jobs must be >= 1")
    envs = _csv(args.envs, table1.ENVS, "environment")
    agents = _csv(args.agents, tuple(table1.AGENTS), "agent")
    settings = {"standard": [False], "strict": [True], "both": [False, True]}[args.transe_data]
    cells = [
        table1.Cell(env, agent, seed, strict)
        for strict in settings
        for env in envs
        for agent in agents
        for seed in range(args.seeds)
        if not (strict and not agent.startswith("xlvin"))
    ]
    start = time.perf_counter()
    bar = tqdm(total=len(cells), desc="Table 1 cells", unit="run")
    records = table1.run_cells(
        cells, args.runs, args.jobs,
        on_done=lambda r: (bar.update(), bar.set_postfix_str(f"{r['env']} {r['agent']} s{r['seed']}: {r['final_return']:.1f}")),
    )
    bar.close()
    wall = time.perf_counter() - start
    rows = table1.aggregate(records)
    args.results.mkdir(parents=True, exist_ok=True)
    md = table1.markdown(rows, wall)
    (args.results / "table1.md").write_text(md)
    write_json(args.results / "table1.json", {"rows": rows, "runs": records, "wall_seconds": wall})
    table1.plot(records, args.results / "table1.png")
    print(md)
    print(f"wrote {args.results / 'table1.md'}, table1.json, table1.png; runs under {args.runs}")


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("reproduce", help="reproduce a table of the paper")
    which = p.add_subparsers(dest="experiment", required=True, metavar="EXPERIMENT")
    c = which.add_parser(
        "classic",
        help="Table 1: CartPole-v0 / Acrobot-v1 / MountainCar-v0, low data",
        description=table1.__doc__,
    )
    c.add_argument("--seeds", type=int, default=5, help="training seeds 0..N-1 (default 5)")
    c.add_argument("--envs", default=",".join(table1.ENVS), help="comma-separated environments")
    c.add_argument("--agents", default=",".join(table1.AGENTS), help="comma-separated agents")
    c.add_argument(
        "--transe-data", choices=("standard", "strict", "both"), default="both",
        help="XLVIN's TransE pre-training data: random-policy episodes (standard), only the "
        "low-data budget (strict), or both (default both)",
    )
    c.add_argument("--jobs", type=int, default=2, help="parallel worker processes (default 2)")
    c.add_argument("--runs", type=Path, default=Path("runs/table1"), help="run directories root")
    c.add_argument("--results", type=Path, default=Path("results"), help="where tables go")
    c.set_defaults(func=_classic)
