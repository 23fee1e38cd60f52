"""Our `paper` protocol with the authors' own pre-trained executor in place of ours.

    .venv/bin/python -m benchmarks.authors_code.their_executor --executor THEIRS.pt \
        --seeds 0-9 [--runs DIR] [--jobs 2] [--results results/authors-code]

THEIRS.pt is the executor `run.sh` pre-trained with their code (dransyhe/CNAP
models/executor/train.py, their defaults); `convert.py` writes it as one of our executor files
(max aggregation, as their policy runs it). Then CartPole-v0 XLVIN-R cells of `xlvin reproduce
classic --protocol paper` run with that file as the executor, everything else ours. Beside our
own executor (the same cells from `xlvin reproduce classic`), this separates "their executor" from
"the rest of the pipeline" as the cause of a difference. Results: RESULTS/their-executor.{md,json},
in the format of our Table 1 (variant `their-executor`).
"""

import argparse
import dataclasses
import sys
import time
from functools import partial
from pathlib import Path

from benchmarks.authors_code.convert import write_executor_file
from xlvin.experiments import table1, table1_report
from xlvin.experiments.jobs import map_jobs

VARIANT = "their-executor"


def seeds(text: str) -> list[int]:
    first, _, last = text.partition("-")
    return list(range(int(first), int(last or first) + 1))


def run(seed: int, root: Path, executor: Path) -> dict:
    cell = table1.Cell("paper", "CartPole-v0", "xlvin-r", seed, variant=VARIANT)
    cfg = table1.Cell("paper", "CartPole-v0", "xlvin-r", seed).config()
    cfg = dataclasses.replace(cfg, train=dataclasses.replace(cfg.train, executor=str(executor)))
    return table1.run_cell(cell, root, cfg)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--executor", type=Path, required=True, help="their executor .pt")
    parser.add_argument("--seeds", type=seeds, default=seeds("0-9"))
    parser.add_argument("--runs", type=Path, default=Path.home() / "xlvin-runs" / "their-executor")
    parser.add_argument("--jobs", type=int, default=1)
    parser.add_argument("--results", type=Path, default=Path("results/authors-code"))
    args = parser.parse_args(argv)
    args.runs.mkdir(parents=True, exist_ok=True)
    ours = args.runs / "executor.safetensors"
    if not ours.exists():
        write_executor_file(str(args.executor), str(ours))
    start = time.time()
    records = map_jobs(partial(run, root=args.runs, executor=ours), args.seeds, args.jobs)
    args.results.mkdir(parents=True, exist_ok=True)
    print(table1_report.write_results(records, args.results / VARIANT, time.time() - start))
    return 0


if __name__ == "__main__":
    sys.exit(main())
