"""`xlvin reproduce classic|executor-ablation|maze|contextual-maze|maze-ablation|atari|atari-vae|
continuous`: the paper's Table 1 (and an ablation of its executor), its maze figures (and an
ablation of the maze executor), its Atari figures 4, 6 and 10, and XLVIN against PPO on
continuous actions, every cell, resumable, into results/; then the result blocks of the pages
(README.md, docs/) beside the results/ folder that holds --results are re-written from it (none
where --results is in no results/ folder). One handler for every entry of
`xlvin.experiments.registry.EXPERIMENTS`."""

import argparse
from pathlib import Path

from xlvin.errors import UserError
from xlvin.experiments import pages, registry
from xlvin.experiments.figures import require_plots
from xlvin.ppo.session import deadline_after
from xlvin.experiments.protocol import Experiment, run_cells
from xlvin.run.config import MAX_SEED

#: The most training seeds one invocation takes (each is at least one run directory).
MAX_SEEDS = 10_000


def _check_options(experiment: Experiment, args: argparse.Namespace) -> None:
    """--seeds in [1, MAX_SEEDS], --first-seed >= 0, the last seed a valid training seed,
    --jobs >= 1, the experiment's own checks, --runs and --results not files, the results files
    already in --results readable (`Experiment.read_earlier`: the report keeps their other
    cells), and matplotlib for the figures every experiment ends with: checked before any cell
    is built or folder made."""
    require_plots()
    if (not 1 <= args.seeds <= MAX_SEEDS or args.jobs < 1 or args.first_seed < 0
            or args.population < 1):
        raise UserError(f"--seeds must be in [1, {MAX_SEEDS}], --jobs >= 1, --first-seed >= 0, "
                        "--population >= 1")
    last = args.first_seed + args.seeds - 1
    if last > MAX_SEED:
        raise UserError(f"--first-seed + --seeds - 1 = {last}: training seeds must be <= "
                        f"{MAX_SEED}")
    if args.skip_recorded and (args.finished_only or args.include_running):
        raise UserError("--skip-recorded chooses the cells to train, and --finished-only / "
                        "--include-running train none: give one of them")
    experiment.check(args)
    for folder, flag in ((args.runs, "--runs"), (args.results, "--results")):
        _check_folder(folder, flag)
    experiment.read_earlier(args.results)


def _check_folder(path: Path, flag: str) -> None:
    """Refuse a folder option naming a file, or a path inside one (the results are written only
    after every cell has trained)."""
    for folder in (path, *path.parents):
        if folder.exists():
            if not folder.is_dir():
                raise UserError(f"{flag} {path}: {folder} is a file, not a folder")
            return


def _reproduce(args: argparse.Namespace) -> None:
    """Build the cells, train them here unless told to train nothing (one error line when a
    deadline passed before any started), print the experiment's report, and re-write the
    pages' result blocks (`xlvin.experiments.pages`) where the current folder has them."""
    experiment = registry.EXPERIMENTS[args.experiment]
    _check_options(experiment, args)
    cells = experiment.cells(args.seeds, args)
    if args.skip_recorded:
        assert experiment.recorded is not None  # the option is offered only then
        held = experiment.recorded(args.results)
        left = [cell for cell in cells if not held(cell)]
        print(f"{len(cells) - len(left)} of the {len(cells)} cells are already in "
              f"{args.results}: running the other {len(left)}")
        if not left:
            return
        cells = left
    options = experiment.run_options(args)
    if experiment.deadline is not None:
        options["deadline"] = deadline_after(args.deadline_minutes)
    trained = wall = None
    if not (args.finished_only or args.include_running):
        trained, wall = run_cells(experiment, cells, args.runs, args.jobs,
                                  experiment.progress(args), population=args.population,
                                  **options)
        if experiment.deadline is not None and not trained:
            raise UserError(f"the deadline passed before any of the {len(cells)} cells started; "
                            "nothing to report")
    print(experiment.report(cells, trained, wall, args))
    root = pages_root(args.results)
    changed = [] if root is None else pages.rewrite(root)
    if changed:
        print(f"re-wrote the result blocks {', '.join(changed)} of the pages from "
              f"{root / 'results'}")


def pages_root(results: Path) -> Path | None:
    """The folder whose results/ holds `results` (results/ itself or a folder in it): the pages
    there show what was just written. None where no results/ folder holds it."""
    results = results.resolve()
    return next((folder.parent for folder in (results, *results.parents)
                 if folder.name == "results"), None)


def add_parser(which: argparse._SubParsersAction, name: str, experiment: Experiment) -> None:
    """`xlvin reproduce NAME`: its seeds, its own options, then the output options."""
    p = which.add_parser(name, help=experiment.help, description=experiment.description)
    p.add_argument("--seeds", type=int, default=experiment.seeds,
                   help=f"training seeds (default {experiment.seeds}{experiment.seeds_note})")
    p.add_argument("--first-seed", type=int, default=experiment.first_seed,
                   help=f"the first training seed (default {experiment.first_seed}"
                   f"{experiment.first_seed_note})")
    experiment.add_options(p)
    p.add_argument("--jobs", type=int, default=2, help="parallel worker processes (default 2)")
    if experiment.config is not None:
        p.add_argument("--population", type=int, default=1, metavar="S",
                       help="go S seeds at a time: the cells of those seeds that differ only "
                       "in their seed train together in one process, each with its solo run's "
                       "numbers bit for bit, where the population trainer takes their agent "
                       "(`xlvin train --seeds`), the others alone, and all are evaluated before "
                       "the next S seeds start (default 1: every cell alone)")
    if experiment.finished_help is not None:
        p.add_argument("--finished-only", action="store_true", help=experiment.finished_help)
    p.add_argument("--runs", type=Path, default=experiment.runs,
                   help=f"run directories root (default {experiment.runs})")
    p.add_argument("--results", type=Path, default=experiment.results,
                   help=f"where results go (default {experiment.results})")
    if experiment.deadline is not None:
        p.add_argument("--deadline-minutes", type=float, default=None,
                       help=f"stop training this many minutes from now ({experiment.deadline})")
    if experiment.include_running is not None:
        p.add_argument("--include-running", action="store_true", help=experiment.include_running)
    if experiment.recorded is not None:
        p.add_argument("--skip-recorded", action="store_true", help=experiment.recorded_help)
    experiment.add_run_options(p)
    p.set_defaults(func=_reproduce, finished_only=False, include_running=False, population=1,
                   skip_recorded=False)


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("reproduce", help="reproduce a table of the paper")
    which = p.add_subparsers(dest="experiment", required=True, metavar="EXPERIMENT")
    for name, experiment in registry.EXPERIMENTS.items():
        add_parser(which, name, experiment)
