"""`xlvin quickstart`: the README's main job, a small reproduction that runs in minutes on 2 cores.

The CartPole-v0 row of the paper's Table 1 for PPO and XLVIN-R, a few seeds, under the authors'
own protocol (`xlvin reproduce classic --protocol paper`): 15 envs collect until 10 episodes have
ended, then 100 PPO updates on that fixed data, with a 100-episode greedy evaluation after every
update. It prints both statistics side by side: the maximum over those evaluations (what the
paper reports) and the final policy on 100 fresh episodes (our headline). The executor and the
TransE pre-training are cached after the first run. `xlvin reproduce classic` runs the table.
Run again with the same --out, an interrupted quickstart resumes: its finished cells are kept,
the others continue from their checkpoints.
"""

import argparse
import hashlib
import time
from datetime import datetime
from pathlib import Path

import numpy as np

from xlvin.errors import UserError
from xlvin.experiments import table1
from xlvin.experiments.protocol import run_cells
from xlvin.experiments.registry import CLASSIC
from xlvin.io.files import atomic_write_text, read_json, write_json
from xlvin.io.saves import file_digest
from xlvin.stats import summarize

AGENTS = ("ppo", "xlvin-r")
#: The mark a quickstart writes first into its --out: JSON {"results.md": [the digests of the
#: tables it wrote there, the last two]}. Besides it, a quickstart's folder holds its cells' runs
#: (paper/) and its table (results.md).
MARK = ".xlvin-quickstart"
RESULTS = "results.md"


def _written_tables(out: Path) -> list[str] | None:
    """The digests of the tables a quickstart wrote in `out`, from its mark; None: no mark."""
    try:
        digests = read_json(out / MARK).get(RESULTS)
    except (UserError, OSError, ValueError, AttributeError):
        return None
    return digests if isinstance(digests, list) else None


def _is_own(out: Path) -> bool:
    """Whether `out` is empty or a quickstart's folder with nothing of anyone else's in it: its
    mark, paper/ and a results.md it wrote, unchanged."""
    names = {p.name for p in out.iterdir()}
    if not names:
        return True
    written = _written_tables(out)
    if written is None or not names <= {MARK, "paper", RESULTS}:
        return False
    paper, table = out / "paper", out / RESULTS
    return ((not paper.exists() or (paper.is_dir() and not paper.is_symlink()))
            and (not table.exists() or (table.is_file() and not table.is_symlink()
                                        and file_digest(table) in written)))


def _write_table(out: Path, table: str) -> None:
    """Write results.md, its digest recorded in the mark first (a kill between the two leaves a
    table the mark still names)."""
    digest = hashlib.sha256(table.encode()).hexdigest()
    write_json(out / MARK, {RESULTS: [*(_written_tables(out) or [])[-1:], digest]})
    atomic_write_text(out / RESULTS, table)


def _cell(group: list[dict], field: str) -> str:
    """One statistic of one agent's seeds: its IQM and the value of every seed."""
    values = np.array([r[field] for r in group])
    per_seed = " / ".join(f"{v:.0f}" for v in values)
    return f"IQM **{summarize(values)['iqm']:.1f}** (per seed {per_seed})"


def results_table(records: list[dict]) -> str:
    """Markdown: per agent, both statistics per seed and their IQM, beside the paper's number."""
    lines = [
        ("| agent | paper (5 seeds) | measured here: max over per-update evaluations (the "
         "paper's statistic) | measured here: final policy, 100 fresh episodes | seeds | "
         "episodes (transitions) |"),
        "|---|---|---|---|---|---|",
    ]
    for agent in AGENTS:
        group = sorted((r for r in records if r["agent"] == agent), key=lambda r: r["seed"])
        paper_mean, paper_std = table1.PAPER[("CartPole-v0", agent)]

        lines.append(
            f"| {agent} | {paper_mean} +- {paper_std} | {_cell(group, 'max_eval_return')} | "
            f"{_cell(group, 'final_return')} | {len(group)} | "
            f"{np.mean([r['episodes'] for r in group]):.0f} "
            f"({np.mean([r['transitions'] for r in group]):.0f}) |"
        )
    return "\n".join(lines)


def _quickstart(args: argparse.Namespace) -> None:
    if args.seeds < 1 or args.jobs < 1:
        raise UserError("--seeds and --jobs must be >= 1")
    start = time.perf_counter()
    out = args.out or Path("runs") / f"quickstart-{datetime.now():%Y%m%d-%H%M%S}"
    if out.is_symlink() or (out.exists() and not (out.is_dir() and _is_own(out))):
        raise UserError(f"--out {out} already exists and is not a quickstart's folder (or "
                        "holds files it did not write): choose a new directory, or a "
                        "quickstart's to resume it")
    out.mkdir(parents=True, exist_ok=True)
    if not (out / MARK).exists():
        write_json(out / MARK, {RESULTS: []})
    cells = [table1.Cell("paper", "CartPole-v0", agent, seed)
             for seed in range(args.seeds) for agent in AGENTS]
    # the executor and TransE pre-training (with their progress), then the cells
    records, _ = run_cells(CLASSIC, cells, out, args.jobs, "train + evaluate")
    table = results_table(records)
    _write_table(out, table + "\n")
    print()
    print(table)
    print(f"\nwall time {time.perf_counter() - start:.0f} s; runs in {out}")


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "quickstart",
        help="the README's main job: XLVIN-R vs PPO on CartPole-v0 from 10 trajectories",
        description=__doc__,
    )
    p.add_argument("--seeds", type=int, default=4, help="training seeds 0..N-1 (default 4)")
    p.add_argument("--jobs", type=int, default=2, help="parallel worker processes (default 2)")
    p.add_argument("--out", type=Path, help="output folder (default runs/quickstart-TIMESTAMP); "
                   "an interrupted quickstart's resumes")
    p.set_defaults(func=_quickstart)
