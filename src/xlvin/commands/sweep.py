"""`xlvin sweep PRESET --seeds N [--address ADDRESS]`: a preset's runs on Ray, then its results."""

import argparse
import os
import time
from pathlib import Path

from xlvin.errors import UserError
from xlvin.experiments import ray_session, registry, sweep
from xlvin.experiments.figures import require_plots
from xlvin.io.storage import RunStorage


def _sweep(args: argparse.Namespace) -> None:
    preset = registry.on_ray()[args.preset]
    if args.seeds < 1:
        raise UserError("--seeds must be >= 1")
    if args.workers is not None and (args.address or args.workers < 1):
        raise UserError("--workers must be >= 1, and is for local Ray only (a cluster has its own)")
    if not args.timeout > 0:
        raise UserError(f"--timeout must be > 0 seconds, got {args.timeout}")
    ray_session.import_ray()  # before any work: without Ray, say how to install it
    require_plots()  # and the results' figures need matplotlib
    preset.read_earlier(args.results)  # a corrupt results file, refused before any run
    cells = preset.cells(args.seeds, args)
    storage = RunStorage(args.storage) if args.storage else None
    root = (args.runs or preset.runs).resolve()
    start = time.perf_counter()
    result = sweep.run_sweep(
        preset, cells, root, report=lambda line: print(line, flush=True),
        address=args.address, workers=args.workers or os.cpu_count() or 1,
        timeout=args.timeout, storage=storage,
    )
    wall = time.perf_counter() - start
    print(
        f"\n{args.preset}: {sweep.count_runs(len(cells))} in {wall:.0f} s: {len(result.trained)} trained, "
        f"{len(result.skipped)} skipped (finished earlier), {len(result.failed)} failed; "
        f"{len(result.failures)} failed attempt(s)"
    )
    for failure in result.failures:
        print(f"  attempt {failure.attempt} of {preset.label(failure.cell)}: {failure.error}")
    if result.records:
        print()
        print(preset.write_results(result.records, args.results, wall).rstrip())
        print(f"runs under {root}")
    if result.failed:
        names = ", ".join(preset.label(c) for c in result.failed)
        raise UserError(f"{len(result.failed)} of {len(cells)} runs failed twice: {names}")


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "sweep",
        help="run a preset's runs on Ray (local or a cluster), then write its results",
        description="Expand a preset into runs (cells) and execute them as Ray tasks, one CPU "
        "each: local Ray on this machine, or the cluster at --address. Each run trains in a "
        "scratch folder of the node it lands on and its run directory comes back through Ray "
        "to --runs here (no shared filesystem needed). Finished runs are skipped, a failed run "
        "is retried once, and the results are written as `xlvin reproduce` writes them. Needs "
        "the ray extra: pip install 'xlvin[ray]'.",
    )
    which = p.add_subparsers(dest="preset", required=True, metavar="PRESET")
    for name, preset in registry.on_ray().items():
        c = which.add_parser(name, help=preset.sweep_help, description=preset.description)
        c.add_argument("--seeds", type=int, default=5, help="training seeds 0..N-1 (default 5)")
        preset.add_options(c)
        c.add_argument(
            "--address", default=None,
            help="Ray cluster to run on (host:port, ray://host:port or 'auto'); default: start "
            "local Ray on this machine. Its nodes need no shared folder: run directories come "
            "back to --runs on this machine. A cluster with token authentication needs "
            "RAY_AUTH_MODE=token and RAY_AUTH_TOKEN (its head's `ray get-auth-token`)",
        )
        c.add_argument(
            "--timeout", type=float, default=ray_session.CONNECT_TIMEOUT, metavar="SECONDS",
            help="give up starting local Ray or reaching the cluster after this long "
            f"(default {ray_session.CONNECT_TIMEOUT:g})",
        )
        c.add_argument(
            "--workers", type=int, default=None,
            help="CPUs (parallel runs) of local Ray (default: all CPUs of this machine)",
        )
        c.add_argument("--runs", type=Path, default=None,
                       help=f"run directories root on this machine, the only one that writes "
                       f"there (default {preset.runs})")
        c.add_argument(
            "--storage", default=None, metavar="URI",
            help="also keep the run directories in this pyarrow filesystem (s3://BUCKET/PATH, "
            "gs://..., hdfs://..., file:///PATH; needs pyarrow): finished ones stored there are "
            "downloaded into --runs and skipped, each run that comes back is uploaded",
        )
        c.add_argument("--results", type=Path, default=Path("results"),
                       help="where the results files go (default results)")
        c.set_defaults(func=_sweep, first_seed=0)  # the cells' seeds are 0..N-1
