"""`xlvin reproduce classic|executor-ablation|maze|contextual-maze|maze-ablation|atari|continuous`:
the paper's Table 1 (and an ablation of its executor), its maze figures (and an ablation of the
maze executor), its Atari figures 4 and 6, and XLVIN against PPO on continuous actions, every
cell, resumable, into results/."""

import argparse
import time
from collections.abc import Callable
from pathlib import Path

from tqdm import tqdm

from xlvin.config import csv_choices
from xlvin.errors import UserError
from xlvin.config import add_options, from_args
from xlvin.experiments import (
    atari,
    atari_vae,
    continuous,
    executor_ablation,
    maze,
    maze_ablation,
    table1,
)
from xlvin.experiments.figures import require_plots
from xlvin.experiments.jobs import deadline_after
from xlvin.train.curriculum import CurriculumConfig
from xlvin.train.run_config import MAX_SEED, check_device


def _with_progress(
    run: Callable[[Callable[[dict], None]], list[dict]], total: int, desc: str,
    postfix: Callable[[dict], str], prepare: Callable[[], object] = lambda: None,
) -> tuple[list[dict], float]:
    """`prepare()` (what the cells share, with its own progress), then `run(on_done)` under a
    progress bar of `total` cells (each record's `postfix` shown as it finishes); its records
    and wall seconds."""
    start = time.perf_counter()
    prepare()
    with tqdm(total=total, desc=desc, unit="run") as bar:

        def done(record: dict) -> None:
            bar.update()
            bar.set_postfix_str(postfix(record))

        records = run(done)
    return records, time.perf_counter() - start


#: The most training seeds one invocation takes (each is at least one run directory).
MAX_SEEDS = 10_000


def _check_seeds(args: argparse.Namespace) -> None:
    """--seeds in [1, MAX_SEEDS], --first-seed >= 0, the last seed a valid training seed and
    --jobs >= 1, --runs and --results folders that can be made, and matplotlib there for the
    figures every experiment ends with: checked before any cell is built or any folder made."""
    require_plots()
    _check_folder(args.runs, "--runs")
    _check_folder(args.results, "--results")
    if not 1 <= args.seeds <= MAX_SEEDS or args.jobs < 1 or args.first_seed < 0:
        raise UserError(f"--seeds must be in [1, {MAX_SEEDS}], --jobs >= 1, --first-seed >= 0")
    last = args.first_seed + args.seeds - 1
    if last > MAX_SEED:
        raise UserError(f"--first-seed + --seeds - 1 = {last}: training seeds must be <= {MAX_SEED}")


def _check_folder(path: Path, flag: str) -> None:
    """Refuse a folder option naming a file, or a path inside one (the results are written only
    after every cell has trained)."""
    for folder in (path, *path.parents):
        if folder.exists():
            if not folder.is_dir():
                raise UserError(f"{flag} {path}: {folder} is a file, not a folder")
            return


def _classic(args: argparse.Namespace) -> None:
    _check_seeds(args)
    cells = table1.cells_from_options(args.seeds, args, args.first_seed)
    if args.finished_only:
        records = [table1.cell_record(c, c.run_dir(args.runs)) for c in cells
                   if table1.is_finished(c.run_dir(args.runs))]
        if not records:
            raise UserError(f"none of the {len(cells)} cells has finished under {args.runs}")
        print(table1.write_results(records, args.results, None))
        print(f"{len(records)} of {len(cells)} cells have finished; their results are written")
        return
    records, wall = _with_progress(
        lambda done: table1.run_cells(cells, args.runs, args.jobs, on_done=done), len(cells),
        f"Table 1 cells ({args.protocol})",
        lambda r: f"{r['env']} {r['agent']} s{r['seed']}: {r['final_return']:.1f}",
        lambda: table1.prepare(cells, args.jobs),
    )
    md = table1.write_results(records, args.results, wall)
    print(md)
    stem = args.results / table1.results_stem(args.protocol, args.variant)
    print(f"wrote {stem}.md, .json, .png; runs under {args.runs}")


def _executor_ablation(args: argparse.Namespace) -> None:
    _check_seeds(args)
    protocols = csv_choices(args.protocols, table1.PROTOCOLS, "protocol")
    envs = csv_choices(args.envs, table1.ENVS, "environment")
    inits = csv_choices(args.inits, executor_ablation.INITS, "init") if args.inits else None
    seeds = list(range(args.first_seed, args.first_seed + args.seeds))
    cells = executor_ablation.cells(protocols, envs, seeds, inits)
    if not args.finished_only:
        _with_progress(
            lambda done: table1.run_cells(cells, args.runs, args.jobs, on_done=done), len(cells),
            "executor ablation cells",
            lambda r: f"{r['protocol']} {r['env']} {r['agent']} {r['variant'] or '-'} "
            f"s{r['seed']}: {r['final_return']:.1f}",
            lambda: table1.prepare(cells, args.jobs),
        )
    records = executor_ablation.finished_records(args.runs, protocols, envs, inits)
    if not records:
        raise UserError(f"no cell of the ablation has finished under {args.runs}")
    print(executor_ablation.write_results(records, args.results))
    print(f"wrote {args.results}/executor.md, .json, .png from {len(records)} finished cells "
          f"(the seeds every arm of a protocol and env has finished)")


def _continuous(args: argparse.Namespace) -> None:
    _check_seeds(args)
    cells = continuous.cells_from_options(args.envs, args.agents, args.seeds, args.first_seed,
                                          args.budget)
    wall = None
    if not args.include_running:
        _, wall = _with_progress(
            lambda done: continuous.run_cells(cells, args.runs, args.jobs, on_done=done),
            len(cells), "continuous-action cells",
            lambda r: f"{r['env']} {r['agent']} s{r['seed']}: {r['final_return']:.1f}",
        )
    print(continuous.table(cells, args.runs, args.results, args.include_running, wall))
    print(f"wrote {args.results}/continuous.md, .json, .png; runs under {args.runs}")


def _curricula_so_far(cells: list[maze.Cell], runs: Path, include_running: bool) -> list[dict]:
    """The records of the cells that have finished under `runs`, and with `include_running`
    the progress of those still training; one UserError when there is none."""
    so_far = [maze.record_so_far(c, c.run_dir(runs)) for c in cells]
    records = [r for r in so_far if r is not None
               and (include_running or r["in_progress"] is None)]
    if not records:
        raise UserError(f"none of the {len(cells)} cells has results under {runs}")
    return records


def _maze(args: argparse.Namespace) -> None:
    _check_seeds(args)
    cells = maze.cells_from_options(args.experiment, args.seeds, args, args.first_seed)
    deadline = deadline_after(args.deadline_minutes)
    if args.finished_only or args.include_running:
        records = _curricula_so_far(cells, args.runs, args.include_running)
        finished = sum(r["in_progress"] is None for r in records)
        print(maze.write_results(records, args.results, None))
        print(f"{finished} of {len(cells)} cells have finished; still training, reported with "
              f"their progress so far: {len(records) - finished}; results written")
        return
    records, wall = _with_progress(
        lambda done: maze.run_cells(cells, args.runs, args.jobs, on_done=done, deadline=deadline),
        len(cells), f"{args.experiment} curricula",
        lambda r: f"{r['agent']} s{r['seed']}: passed {len(r['levels_passed'])}"
        + (" (stopped at the deadline)" if r["in_progress"] else ""),
        lambda: maze.prepare(cells),
    )
    _check_any_ran(records, cells)
    print(maze.write_results(records, args.results, wall))
    print(f"wrote {args.results}/maze.md, .json and the figures; runs under {args.runs}")


def _maze_ablation(args: argparse.Namespace) -> None:
    _check_seeds(args)
    check_device(args.device)
    curriculum = from_args(CurriculumConfig, args, CurriculumConfig(budget=maze_ablation.BUDGET))
    seeds = list(range(args.first_seed, args.first_seed + args.seeds))
    cells = maze_ablation.cells(seeds, curriculum, args.device)
    curriculum.levels()  # mazes with the levels asked for, before anything runs
    deadline = deadline_after(args.deadline_minutes)
    train = not (args.finished_only or args.include_running)
    if train:
        records, _ = _with_progress(
            lambda done: maze.run_cells(cells, args.runs, args.jobs, on_done=done,
                                        deadline=deadline),
            len(cells), "maze ablation curricula",
            lambda r: f"{r['agent']} s{r['seed']}: passed {len(r['levels_passed'])}"
            + (" (stopped at the deadline)" if r["in_progress"] else ""),
            lambda: maze.prepare(cells),
        )
        _check_any_ran(records, cells)
    # after training, the cells a deadline stopped are reported with their progress
    records = _curricula_so_far(cells, args.runs, train or args.include_running)
    print(maze_ablation.write_results(records, args.results, args.runs))
    ended = sum(r["in_progress"] is None for r in records)
    print(f"wrote {args.results}/maze.md, .json, .png: {ended} of {len(cells)} cells ended, "
          f"{len(records) - ended} still training; runs under {args.runs}")


def _check_any_ran(records: list[dict], cells: list) -> None:
    """One error line, not an empty table, when the deadline passed before any cell started."""
    if not records:
        raise UserError(f"the deadline passed before any of the {len(cells)} cells started; "
                        "nothing to report")


def _atari(args: argparse.Namespace) -> None:
    _check_atari_options(args)
    cells = atari.cells_from_options(args.seeds, args, args.first_seed)
    deadline = deadline_after(args.deadline_minutes)
    if args.finished_only:
        records = [atari.cell_record(c, c.run_dir(args.runs)) for c in cells
                   if atari.has_record(c, args.runs)]
        if not records:
            raise UserError(f"none of the {len(cells)} cells has a record under {args.runs}")
        print(atari.write_results(records, args.results))
        print(f"{len(records)} of {len(cells)} cells have records; their results are written")
        return
    records, _ = _with_progress(
        lambda done: atari.run_cells(cells, args.runs, args.jobs, deadline, args.eval_games,
                                     on_done=done), len(cells), "Atari cells",
        lambda r: (f"{r['game']} {r['agent']} s{r['seed']}: {r['transitions_reached']:,} "
                   f"transitions, greedy {r['final_eval']['mean']:.1f}"),
        lambda: atari.prepare(cells),
    )
    _check_any_ran(records, cells)
    print(atari.write_results(records, args.results))
    print(f"wrote {args.results}/atari.json and atari_<game>.png; runs under {args.runs}")


def _atari_vae(args: argparse.Namespace) -> None:
    _check_atari_options(args)
    cells = atari_vae.cells_from_options(args)
    deadline = deadline_after(args.deadline_minutes)
    if args.finished_only:
        records = [r for r in (atari_vae.record_of(c, args.runs) for c in cells) if r is not None]
        if not records:
            raise UserError(f"none of the {len(cells)} cells has a record under {args.runs}")
    else:
        records, _ = _with_progress(
            lambda done: atari_vae.run_cells(cells, args.runs, args.jobs, deadline,
                                             args.eval_games, on_done=done),
            len(cells), "VAE world-model cells",
            lambda r: (f"{r['agent']} s{r['seed']}: {r['transitions_reached']:,} transitions, "
                       f"participation ratio {r['embedding']['spread']['participation_ratio']:.1f}"),
        )
        _check_any_ran(records, cells)
    print(atari_vae.write_results(records, args.results, args.committed,
                                  atari_vae.saved_images(cells, args.runs)))
    print(f"{len(records)} of {len(cells)} cells have records; wrote {args.results}/atari_vae.json, "
          ".md, .png")


def _seed_options(parser: argparse.ArgumentParser, seeds: int, note: str = "") -> None:
    parser.add_argument("--seeds", type=int, default=seeds,
                        help=f"training seeds (default {seeds}{note})")
    parser.add_argument("--first-seed", type=int, default=0,
                        help="the first training seed (default 0)")


def _output_options(parser: argparse.ArgumentParser, runs: str, finished_help: str | None,
                    results: str = "results") -> None:
    """--jobs, --finished-only (unless `finished_help` is None), --runs and --results, the
    options every experiment shares."""
    parser.add_argument("--jobs", type=int, default=2, help="parallel worker processes (default 2)")
    if finished_help is not None:
        parser.add_argument("--finished-only", action="store_true", help=finished_help)
    parser.add_argument("--runs", type=Path, default=Path(runs),
                        help=f"run directories root (default {runs})")
    parser.add_argument("--results", type=Path, default=Path(results),
                        help=f"where results go (default {results})")


def _deadline_option(parser: argparse.ArgumentParser, what_then: str) -> None:
    parser.add_argument("--deadline-minutes", type=float, default=None,
                        help=f"stop training this many minutes from now ({what_then})")


FINISHED_HELP = "train nothing: write the results of the cells that have finished"


def _curriculum_output_options(parser: argparse.ArgumentParser, results: str = "results") -> None:
    """The output options of the maze experiments: `_output_options`, the deadline, and
    --include-running (curricula report their progress so far)."""
    _output_options(parser, "runs/maze", FINISHED_HELP, results)
    _deadline_option(parser, "each cell checkpoints where it got to and is reported so; the "
                     "next call resumes it; cells not started by then wait for it")
    parser.add_argument("--include-running", action="store_true",
                        help="train nothing: write the results of finished cells and the "
                        "progress of cells still training (from their last checkpoint, marked so)")


def _evaluated_cell_options(parser: argparse.ArgumentParser, runs: str, evaluated: str) -> None:
    """The output, deadline and --eval-games options of the Atari experiments, whose cells are
    evaluated where they stop (`_check_atari_options`)."""
    _output_options(parser, runs, "train nothing: write the results of the cells that have "
                    "been evaluated (finished, or stopped at a deadline: the transitions reached "
                    "are reported)")
    _deadline_option(parser, f"each cell checkpoints, {evaluated} where it got to, and resumes "
                     "on the next call; cells not started by then wait for it")
    parser.add_argument("--eval-games", type=int, default=atari.EVAL_GAMES,
                        help=f"fresh games of the final greedy evaluation (default "
                        f"{atari.EVAL_GAMES})")


def _check_atari_options(args: argparse.Namespace) -> None:
    """`_check_seeds`, and at least one evaluation game."""
    _check_seeds(args)
    if args.eval_games < 1:
        raise UserError("--eval-games must be >= 1")


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("reproduce", help="reproduce a table of the paper")
    which = p.add_subparsers(dest="experiment", required=True, metavar="EXPERIMENT")
    c = which.add_parser(
        "classic",
        help="Table 1: CartPole-v0 / Acrobot-v1 / MountainCar-v0, low data",
        description=table1.__doc__,
    )
    _seed_options(c, 10)
    table1.add_cell_options(c)
    _output_options(c, "runs/table1", FINISHED_HELP)
    c.set_defaults(func=_classic)
    e = which.add_parser(
        "executor-ablation",
        help="beyond the paper: Table 1's setting with the executor taken apart",
        description=executor_ablation.__doc__,
    )
    _seed_options(e, 10)
    e.add_argument("--protocols", default=",".join(table1.PROTOCOLS),
                   help=f"comma-separated protocols (default {','.join(table1.PROTOCOLS)})")
    e.add_argument("--envs", default="CartPole-v0,Acrobot-v1",
                   help="comma-separated environments (default CartPole-v0,Acrobot-v1)")
    e.add_argument("--inits", default="",
                   help=f"comma-separated initialisations of encoder and heads, of "
                   f"{', '.join(executor_ablation.INITS)} (default: each protocol's own, paper "
                   "pytorch and ours orthogonal)")
    _output_options(e, "runs/table1", "train nothing: write the results of every finished cell",
                    "results/ablation")
    e.set_defaults(func=_executor_ablation)
    for name, (env, _) in maze.EXPERIMENTS.items():
        m = which.add_parser(
            name, help=f"the continual maze on {env}, held-out success after each level",
            description=maze.__doc__,
        )
        _seed_options(m, 10)
        maze.add_cell_options(m, name)
        _curriculum_output_options(m)
        m.set_defaults(func=_maze)

    m = which.add_parser(
        "maze-ablation",
        help="beyond the paper: the continual maze with XLVIN's executor taken apart",
        description=maze_ablation.__doc__,
    )
    m.add_argument("--seeds", type=int, default=maze_ablation.SEEDS,
                   help=f"training seeds (default {maze_ablation.SEEDS})")
    m.add_argument("--first-seed", type=int, default=maze_ablation.FIRST_SEED,
                   help=f"the first training seed (default {maze_ablation.FIRST_SEED}: the "
                   "committed results' seeds, chosen before their first run)")
    m.add_argument("--device", default="cpu", help="torch device: cpu (default) or cuda[:N]")
    add_options(m, CurriculumConfig, skip=("budget",))
    m.add_argument("--budget", type=int, default=None,
                   help=f"episodes allowed a level before it is failed (default "
                   f"{maze_ablation.BUDGET:,}: the committed CPU preset's; the paper's 1,000,000)")
    _curriculum_output_options(m, "results/ablation")
    m.set_defaults(func=_maze_ablation)

    a = which.add_parser(
        "atari",
        help="figures 4 and 6: Freeway / Alien / Enduro from pixels, XLVIN vs PPO vs ATreeC",
        description=atari.__doc__,
    )
    _seed_options(a, 3, ", the paper")
    atari.add_cell_options(a)
    _evaluated_cell_options(a, "runs/atari", "is evaluated")
    a.set_defaults(func=_atari)

    v = which.add_parser(
        "atari-vae",
        help="appendix figure 10: XLVIN-R on Freeway with a VAE world model in place of TransE",
        description=atari_vae.__doc__,
    )
    _seed_options(v, 3)
    atari_vae.add_options(v)
    _evaluated_cell_options(v, "runs/atari-vae", "is evaluated and analysed")
    v.set_defaults(func=_atari_vae)

    c = which.add_parser(
        "continuous",
        help="beyond the paper: XLVIN (each tree expansion) vs PPO on continuous actions",
        description=continuous.__doc__,
    )
    _seed_options(c, 5)
    c.add_argument("--envs", default=",".join(continuous.CLASSIC),
                   help=f"comma-separated environments of {', '.join(continuous.ENVS)} (default "
                   f"{','.join(continuous.CLASSIC)})")
    c.add_argument("--agents", default=",".join(continuous.AGENTS),
                   help=f"comma-separated agents (default {','.join(continuous.AGENTS)}; "
                   "xlvin-all only where every joint action fits)")
    c.add_argument("--budget", default="low",
                   help="env steps a cell: low (default: " + ", ".join(
                       f"{e} {s.steps:,}" for e, s in continuous.ENVS.items())
                   + f"), paper ({continuous.PAPER_STEPS:,}, the authors' MuJoCo budget) or a "
                   "number")
    _output_options(c, "runs/continuous", None)
    c.add_argument("--include-running", action="store_true",
                   help="train nothing: write the results of the finished cells, naming every "
                   "cell still training or not started")
    c.set_defaults(func=_continuous)
