"""`EXPERIMENTS`: every experiment of `xlvin reproduce NAME`, those with a `sweep_name` also of
`xlvin sweep` (`on_ray`). Each entry adapts its module (cells, run_cell, results writer) to the
`Experiment` protocol; what it prints after training is its `report`."""

import argparse
from collections.abc import Callable
from pathlib import Path
from typing import Any

from xlvin.config import add_options, csv_choices, from_args
from xlvin.errors import UserError
from xlvin.experiments import (
    atari,
    atari_report,
    atari_vae,
    atari_vae_report,
    continuous,
    executor_ablation,
    executor_latent_trees,
    executor_latent_trees_report,
    executor_probes,
    executor_probes_report,
    executor_true_trees,
    executor_true_trees_report,
    maze,
    maze_ablation,
    maze_ablation_report,
    maze_report,
    oracle_report,
    table1,
    table1_report,
)
from xlvin.experiments.final_eval import is_finished
from xlvin.experiments.protocol import Experiment, Record, Report
from xlvin.experiments.results import check_setup, kept_records
from xlvin.ppo.curriculum import CurriculumConfig
from xlvin.run.checks import check_device

Cells = list[Any]
Trained = list[Record] | None
Wall = float | None
Options = argparse.Namespace


def _table1_finished(cell: table1.Cell, root: Path) -> Record | None:
    run_dir = cell.run_dir(root)
    return table1.cell_record(cell, run_dir) if is_finished(run_dir) else None


def _table1_write(records: list[Record], results: Path, wall: float) -> str:
    md = table1_report.write_results(records, results, wall)
    stem = results / (table1_report.results_stem(records[0]["protocol"], records[0]["variant"])
                      if records else "table1")
    return md + f"\nwrote {stem}.md, .json, .png"


def _classic_report(cells: Cells, trained: Trained, wall: Wall, args: Options) -> str:
    if trained is None:
        records = [r for r in (_table1_finished(c, args.runs) for c in cells) if r is not None]
        if not records:
            raise UserError(f"none of the {len(cells)} cells has finished under {args.runs}")
        return (table1_report.write_results(records, args.results, None) + f"\n{len(records)} of "
                f"{len(cells)} cells have finished; their results are written")
    stem = args.results / table1_report.results_stem(args.protocol, args.variant)
    return (table1_report.write_results(trained, args.results, wall)
            + f"\nwrote {stem}.md, .json, .png; runs under {args.runs}")


def _final_return(r: Record) -> str:
    return f"{r['env']} {r['agent']} s{r['seed']}: {r['final_return']:.1f}"


CLASSIC = Experiment(
    help="Table 1: CartPole-v0 / Acrobot-v1 / MountainCar-v0, low data",
    description=table1.__doc__ or "",
    cells=lambda seeds, args: table1.cells_from_options(seeds, args, args.first_seed),
    run_cell=table1.run_cell, runs=Path("runs/table1"), add_options=table1.add_cell_options,
    prepare=table1.prepare, config=lambda cell: cell.config(), report=_classic_report,
    read_earlier=table1_report.read_earlier,
    progress=lambda args: f"Table 1 cells ({args.protocol})", postfix=_final_return,
    sweep_name="table1", finished=_table1_finished, write_results=_table1_write,
    sweep_help="Table 1: CartPole-v0 / Acrobot-v1 / MountainCar-v0, low data (as `xlvin "
    "reproduce classic`)",
    label=lambda c: f"{c.protocol} {c.env} {c.agent}{' strict' if c.strict else ''} seed{c.seed}",
    outcome=lambda r: f"final return {r['final_return']:.1f}",
)


def _ablation_options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--protocols", default=",".join(table1.PROTOCOLS),
                        help=f"comma-separated protocols (default {','.join(table1.PROTOCOLS)})")
    parser.add_argument("--envs", default="CartPole-v0,Acrobot-v1",
                        help="comma-separated environments (default CartPole-v0,Acrobot-v1)")
    parser.add_argument("--inits", default="",
                        help=f"comma-separated initialisations of encoder and heads, of "
                        f"{', '.join(executor_ablation.INITS)} (default: each protocol's own, "
                        "paper pytorch and ours orthogonal)")


def _ablation_choices(args: argparse.Namespace) -> tuple[list[str], list[str], list[str] | None]:
    return (csv_choices(args.protocols, table1.PROTOCOLS, "protocol"),
            csv_choices(args.envs, table1.ENVS, "environment"),
            csv_choices(args.inits, executor_ablation.INITS, "init") if args.inits else None)


def _ablation_cells(seeds: int, args: argparse.Namespace) -> Cells:
    protocols, envs, inits = _ablation_choices(args)
    seed_list = list(range(args.first_seed, args.first_seed + seeds))
    return executor_ablation.cells(protocols, envs, seed_list, inits)


def _ablation_report(cells: Cells, trained: Trained, wall: Wall, args: Options) -> str:
    records = executor_ablation.finished_records(args.runs, *_ablation_choices(args))
    if not records:
        raise UserError(f"no cell of the ablation has finished under {args.runs}")
    return (executor_ablation.write_results(records, args.results)
            + f"\nwrote {args.results}/executor.md, .json, .png from {len(records)} finished "
            "cells (the seeds every arm of a protocol and env has finished)")


EXECUTOR_ABLATION = Experiment(
    help="beyond the paper: Table 1's setting with the executor taken apart",
    description=executor_ablation.__doc__ or "",
    cells=_ablation_cells, run_cell=table1.run_cell, runs=Path("runs/table1"),
    results=Path("results/ablation"), add_options=_ablation_options, prepare=table1.prepare,
    config=lambda cell: cell.config(),
    finished_help="train nothing: write the results of every finished cell",
    report=_ablation_report, read_earlier=executor_ablation.read_earlier,
    recorded=executor_ablation.recorded,
    progress=lambda args: "executor ablation cells",
    postfix=lambda r: f"{r['protocol']} {r['env']} {r['agent']} {r['variant'] or '-'} "
    f"s{r['seed']}: {r['final_return']:.1f}",
)

#: What a curriculum cell does at --deadline-minutes; --include-running of the mazes.
MAZE_DEADLINE = ("each cell checkpoints where it got to and is reported so; the next call resumes "
                 "it; cells not started by then wait for it")
MAZE_RUNNING = ("train nothing: write the results of finished cells and the progress of cells "
                "still training (from their last checkpoint, marked so)")


def _curricula_so_far(cells: Cells, runs: Path,
                      include_running: bool) -> tuple[list[Record], int]:
    """The records of the cells that have finished under `runs`, and with `include_running`
    the progress of those still training; and how many still training were left out. One
    UserError when there is no record."""
    so_far = [r for c in cells if (r := maze.record_so_far(c, c.run_dir(runs))) is not None]
    records = [r for r in so_far if include_running or r["in_progress"] is None]
    if not records:
        raise UserError(f"none of the {len(cells)} cells has results under {runs}")
    return records, len(so_far) - len(records)


def _maze_report(cells: Cells, trained: Trained, wall: Wall, args: Options) -> str:
    if trained is None:
        records, _ = _curricula_so_far(cells, args.runs, args.include_running)
        finished = sum(r["in_progress"] is None for r in records)
        return (maze_report.write_results(records, args.results, None) + f"\n{finished} of {len(cells)} "
                f"cells have finished; still training, reported with their progress so far: "
                f"{len(records) - finished}; results written")
    return (maze_report.write_results(trained, args.results, wall)
            + f"\nwrote {args.results}/maze.md, .json and the figures; runs under {args.runs}")


def _maze_write(records: list[Record], results: Path, wall: float) -> str:
    return (maze_report.write_results(records, results, wall)
            + f"\nwrote {results}/maze.md, .json and the figures")


def _curriculum_postfix(r: Record) -> str:
    return (f"{r['agent']} s{r['seed']}: passed {len(r['levels_passed'])}"
            + (" (stopped at the deadline)" if r["in_progress"] else ""))


def _maze_prepare(cells: Cells, jobs: int) -> list[Path]:
    return maze.prepare(cells)


def _maze_finished(cell: maze.Cell, root: Path) -> Record | None:
    run_dir = cell.run_dir(root)
    return maze.cell_record(cell, run_dir) if maze.is_finished(run_dir) else None


def maze_experiment(experiment: str) -> Experiment:
    """The curricula of a maze experiment (`maze` or `contextual-maze`)."""
    env, _ = maze.EXPERIMENTS[experiment]
    return Experiment(
        help=f"the continual maze on {env}, held-out success after each level",
        description=maze.__doc__ or "",
        cells=lambda seeds, args: maze.cells_from_options(experiment, seeds, args, args.first_seed),
        run_cell=maze.run_cell, runs=Path("runs/maze"),
        add_options=lambda parser: maze.add_cell_options(parser, experiment),
        prepare=_maze_prepare, deadline=MAZE_DEADLINE, include_running=MAZE_RUNNING,
        report=_maze_report, read_earlier=maze_report.read_earlier,
        progress=lambda args: f"{experiment} curricula",
        postfix=_curriculum_postfix,
        sweep_name=experiment, sweep_help=f"the continual maze on {env} (as `xlvin reproduce "
        f"{experiment}`)", finished=_maze_finished, write_results=_maze_write,
        label=lambda c: f"{c.experiment} {c.agent} seed{c.seed}",
        outcome=lambda r: f"passed levels {r['levels_passed']}",
    )


def _study_options(fixed: tuple[str, ...], budget: str) -> Callable[[argparse.ArgumentParser],
                                                                    None]:
    """A maze study's options: the device and the curriculum's fields but `fixed` (its
    protocol's), and --budget with `budget` saying whose its default is."""

    def add(parser: argparse.ArgumentParser) -> None:
        parser.add_argument("--device", default="cpu",
                            help="torch device: cpu (default) or cuda[:N]")
        add_options(parser, CurriculumConfig, skip=("budget", *fixed))
        parser.add_argument("--budget", type=int, default=None,
                            help=f"episodes allowed a level before it is failed (default "
                            f"{maze_ablation.BUDGET:,}: {budget})")
    return add


def _study_cells(default: CurriculumConfig,
                 make: Callable[[list[int], CurriculumConfig, str], Cells]) -> Callable[
                     [int, argparse.Namespace], Cells]:
    """A maze study's cells (`make`) of the options' seeds, on `default`'s curriculum but what
    the options set; its mazes checked before anything runs."""

    def cells(seeds: int, args: argparse.Namespace) -> Cells:
        check_device(args.device)
        curriculum = from_args(CurriculumConfig, args, default)
        made = make(list(range(args.first_seed, args.first_seed + seeds)), curriculum,
                    args.device)
        curriculum.levels()  # mazes with the levels asked for, before anything runs
        return made
    return cells


def _study_report(write: Callable[[list[Record], Options], str], files: str) -> Report:
    """A maze study's report: its ended cells (after training, those a deadline stopped with
    their progress too) through `write`, then what was written (`files`), how many ended and
    how many are still training (in the results or, with --finished-only, left out)."""

    def report(cells: Cells, trained: Trained, wall: Wall, args: Options) -> str:
        records, left_out = _curricula_so_far(cells, args.runs,
                                              trained is not None or args.include_running)
        ended = sum(r["in_progress"] is None for r in records)
        return (write(records, args) + f"\nwrote {args.results}/{files}: {ended} of "
                f"{len(cells)} cells ended, {len(records) - ended + left_out} still training"
                + (" (left out)" if left_out else "") + f"; runs under {args.runs}")
    return report


MAZE_ABLATION = Experiment(
    help="beyond the paper: the continual maze with XLVIN's executor taken apart",
    description=maze_ablation.__doc__ or "",
    cells=_study_cells(CurriculumConfig(budget=maze_ablation.BUDGET), maze_ablation.cells),
    run_cell=maze.run_cell, runs=Path("runs/maze"),
    results=Path("results/ablation"), seeds=maze_ablation.SEEDS,
    first_seed=maze_ablation.FIRST_SEED,
    first_seed_note=": the committed results' seeds, chosen before their first run",
    add_options=_study_options((), "the committed CPU preset's; the paper's 1,000,000"),
    prepare=_maze_prepare, deadline=MAZE_DEADLINE, include_running=MAZE_RUNNING,
    report=_study_report(lambda records, args: maze_ablation_report.write_results(
        records, args.results, args.runs), "maze.md, .json, .png"),
    read_earlier=maze_ablation_report.read_earlier, recorded=maze_ablation_report.recorded,
    progress=lambda args: "maze ablation curricula", postfix=_curriculum_postfix,
)


EXECUTOR_ORACLE = Experiment(
    help="beyond the paper: XLVIN on the maze's true tree (the oracle arm), levels 1-4",
    description=oracle_report.__doc__ or "",
    cells=_study_cells(oracle_report.CURRICULUM, oracle_report.cells),
    run_cell=maze.run_cell, runs=Path("runs/maze"),
    results=Path("results/oracle"), seeds=oracle_report.SEEDS,
    first_seed=oracle_report.FIRST_SEED,
    first_seed_note=": the oracle arm's seeds, chosen before its first run",
    add_options=_study_options(("last_level", "ood_size"), "the maze study's"),
    prepare=_maze_prepare, deadline=MAZE_DEADLINE, include_running=MAZE_RUNNING,
    report=_study_report(lambda records, args: oracle_report.write_results(
        records, args.results), "oracle.md, .json, .png and maze.md, .json"),
    read_earlier=maze_report.read_earlier, recorded=maze_report.recorded,
    progress=lambda args: "oracle curricula", postfix=_curriculum_postfix,
)


def _true_trees_report(cells: Cells, trained: Trained, wall: Wall, args: Options) -> str:
    assert trained is not None  # nothing is trained: every call measures
    return (executor_true_trees_report.write_results(trained, args.results)
            + f"\nwrote {args.results}/{executor_true_trees_report.STEM}.md, .json, .png")


EXECUTOR_TRUE_TREES = Experiment(
    help="beyond the paper: do the frozen maze executors compute value iteration on true trees?",
    description=executor_true_trees.__doc__ or "",
    cells=executor_true_trees.cells, run_cell=executor_true_trees.run_cell,
    runs=Path("runs/why-executor"), results=Path("results/why-executor"), seeds=1,
    seeds_note=": the shipped executors; others are pre-trained here",
    add_options=executor_true_trees.add_options, prepare=executor_true_trees.prepare,
    finished_help=None, report=_true_trees_report,
    progress=lambda args: "executors on true trees",
    postfix=lambda r: f"{r['executor']} seed {r['seed']}",
)

def _measured_report(module: Any) -> Report:
    """The report of an experiment that trains nothing (every call measures the runs): its
    `module.write_results` of the records, and where they went."""
    def report(cells: Cells, trained: Trained, wall: Wall, args: Options) -> str:
        assert trained is not None
        return (module.write_results(trained, args.results)
                + f"\nwrote {args.results}/{module.STEM}.md, .json, .png from {len(trained)} "
                f"cell{'s' * (len(trained) != 1)}; runs under {args.runs}")
    return report


def _measured_earlier(module: Any) -> Callable[[Path], Any]:
    """What an earlier `module.STEM`.json in the results folder keeps (`kept_records`), read
    before anything is measured: a corrupt one is one UserError."""
    return lambda results: kept_records(results / f"{module.STEM}.json", [], module.RECORD, ())


def _measured_recorded(module: Any) -> Callable[[Path], Callable[[Any], bool]]:
    """--skip-recorded of a measurement: the cells whose arm and seed an earlier
    `module.STEM`.json holds measured from the same policy file
    (`executor_latent_trees.measured`)."""
    return lambda results: executor_latent_trees.measured(_measured_earlier(module)(results))


#: --skip-recorded's help for the measurements of trained runs.
MEASURED_HELP = ("measure only the cells whose policy file --results does not already hold "
                 "measured (by the file's SHA-256): a harvest as a study's runs end measures the "
                 "new ones; after a change to the measurement, leave it out")


def _measured_setup(module: Any, options: tuple[str, ...]) -> Callable[[Options], None]:
    """Refuse, before anything is measured, options (`--depth` say) other than those the cells
    an earlier `module.STEM`.json keeps were measured with (`check_setup`)."""
    def check(args: Options) -> None:
        path = args.results / f"{module.STEM}.json"
        check_setup(path, _measured_earlier(module)(args.results),
                    {name: getattr(args, name) for name in options})
    return check


EXECUTOR_LATENT_TREES = Experiment(
    help="beyond the paper: do trained maze agents' transition models grow the true tree?",
    description=executor_latent_trees.__doc__ or "",
    cells=executor_latent_trees.cells, run_cell=executor_latent_trees.run_cell,
    runs=Path("runs/maze"), results=Path("results/why-executor"),
    seeds=executor_latent_trees.SEEDS, seeds_note=": the maze ablation's; cells without a run "
    "are left out", first_seed=maze_ablation.FIRST_SEED,
    first_seed_note=": the maze ablation's", add_options=executor_latent_trees.add_options,
    finished_help=None, report=_measured_report(executor_latent_trees_report),
    read_earlier=_measured_earlier(executor_latent_trees_report),
    recorded=_measured_recorded(executor_latent_trees_report), recorded_help=MEASURED_HELP,
    check=_measured_setup(executor_latent_trees_report, ("depth", "mazes")),
    progress=lambda args: "latent trees of trained agents",
    postfix=lambda r: f"{r['arm']} seed {r['seed']}",
)


EXECUTOR_PROBES = Experiment(
    help="beyond the paper: what trained maze agents' h_s and chi_s hold, and the heads read",
    description=executor_probes.__doc__ or "",
    cells=executor_probes.cells, run_cell=executor_probes.run_cell,
    runs=Path("runs/maze"), results=Path("results/why-executor"),
    seeds=executor_latent_trees.SEEDS, seeds_note=": the maze ablation's; cells without a run "
    "are left out", first_seed=maze_ablation.FIRST_SEED,
    first_seed_note=": the maze ablation's", add_options=executor_probes.add_options,
    finished_help=None, report=_measured_report(executor_probes_report),
    read_earlier=_measured_earlier(executor_probes_report),
    recorded=_measured_recorded(executor_probes_report), recorded_help=MEASURED_HELP,
    check=_measured_setup(executor_probes_report, ("mazes", "train_mazes")),
    progress=lambda args: "probes of trained agents",
    postfix=lambda r: f"{r['arm']} seed {r['seed']}",
)

#: --finished-only of the Atari experiments, whose cells are evaluated where they stop.
EVALUATED_HELP = ("train nothing: write the results of the cells that have been evaluated "
                  "(finished, or stopped at a deadline: the transitions reached are reported)")


def _atari_deadline(evaluated: str) -> str:
    return (f"each cell checkpoints, {evaluated} where it got to, and resumes on the next call; "
            "cells not started by then wait for it")


def _eval_games_option(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--eval-games", type=int, default=atari.EVAL_GAMES,
                        help=f"fresh games of the final greedy evaluation (default "
                        f"{atari.EVAL_GAMES})")


def _check_eval_games(args: argparse.Namespace) -> None:
    if args.eval_games < 1:
        raise UserError("--eval-games must be >= 1")


def _eval_games(args: argparse.Namespace) -> dict[str, Any]:
    return {"eval_games": args.eval_games}


def _atari_report(cells: Cells, trained: Trained, wall: Wall, args: Options) -> str:
    if trained is None:
        records = [atari.cell_record(c, c.run_dir(args.runs)) for c in cells
                   if atari.has_record(c, args.runs)]
        if not records:
            raise UserError(f"none of the {len(cells)} cells has a record under {args.runs}")
        return (atari_report.write_results(records, args.results) + f"\n{len(records)} of {len(cells)} "
                f"cells have records under {args.runs}; their results are written")
    return (atari_report.write_results(trained, args.results)
            + f"\nwrote {args.results}/atari.json and atari_<game>.png; runs under {args.runs}")


def _atari_prepare(cells: Cells, jobs: int) -> list[Path]:
    return atari.prepare(cells)


ATARI = Experiment(
    help="figures 4 and 6: Freeway / Alien / Enduro from pixels, XLVIN vs PPO vs ATreeC",
    description=atari.__doc__ or "",
    cells=lambda seeds, args: atari.cells_from_options(seeds, args, args.first_seed),
    run_cell=atari.run_cell, runs=Path("runs/atari"), seeds=3, seeds_note=", the paper",
    add_options=atari.add_cell_options, prepare=_atari_prepare, finished_help=EVALUATED_HELP,
    deadline=_atari_deadline("is evaluated"), add_run_options=_eval_games_option,
    check=_check_eval_games, run_options=_eval_games, report=_atari_report,
    read_earlier=atari_report.read_earlier,
    progress=lambda args: "Atari cells",
    postfix=lambda r: (f"{r['game']} {r['agent']} s{r['seed']}: {r['transitions_reached']:,} "
                       f"transitions, greedy {r['final_eval']['mean']:.1f}"),
    sweep_name="atari", finished=atari.finished_record,
    write_results=lambda records, results, wall: atari_report.write_results(records, results),
    sweep_help="Figures 4 and 6: Freeway / Alien / Enduro from pixels (as `xlvin reproduce atari`)",
    label=lambda c: f"{c.game} {c.agent} seed{c.seed} ({c.transitions:,} transitions)",
    outcome=lambda r: f"AUC {r['auc']:.2f}, greedy {r['final_eval']['mean']:.1f}",
)


def _vae_report(cells: Cells, trained: Trained, wall: Wall, args: Options) -> str:
    records = trained
    if records is None:
        records = [r for r in (atari_vae.record_of(c, args.runs) for c in cells) if r is not None]
        if not records:
            raise UserError(f"none of the {len(cells)} cells has a record under {args.runs}")
    return (atari_vae_report.write_results(records, args.results, args.committed,
                                    atari_vae_report.saved_images(cells, args.runs))
            + f"\n{len(records)} of {len(cells)} cells have records; wrote "
            f"{args.results}/atari_vae.json, .md, .png")


ATARI_VAE = Experiment(
    help="appendix figure 10: XLVIN-R on Freeway with a VAE world model in place of TransE",
    description=atari_vae.__doc__ or "",
    cells=lambda seeds, args: atari_vae.cells_from_options(args),
    run_cell=atari_vae.run_vae_cell, runs=Path("runs/atari-vae"), seeds=3,
    add_options=atari_vae.add_options, prepare=_atari_prepare, finished_help=EVALUATED_HELP,
    deadline=_atari_deadline("is evaluated and analysed"), add_run_options=_eval_games_option,
    check=_check_eval_games, run_options=_eval_games, report=_vae_report,
    progress=lambda args: "VAE world-model cells",
    postfix=lambda r: (f"{r['agent']} s{r['seed']}: {r['transitions_reached']:,} transitions, "
                       "participation ratio "
                       f"{r['embedding']['spread']['participation_ratio']:.1f}"),
)


#: name -> experiment: the EXPERIMENT of `xlvin reproduce`, in its --help's order.
EXPERIMENTS: dict[str, Experiment] = {
    "classic": CLASSIC,
    "executor-ablation": EXECUTOR_ABLATION,
    **{name: maze_experiment(name) for name in maze.EXPERIMENTS},
    "maze-ablation": MAZE_ABLATION,
    "executor-true-trees": EXECUTOR_TRUE_TREES,
    "executor-latent-trees": EXECUTOR_LATENT_TREES,
    "executor-probes": EXECUTOR_PROBES,
    "executor-oracle": EXECUTOR_ORACLE,
    "atari": ATARI,
    "atari-vae": ATARI_VAE,
    "continuous": continuous.EXPERIMENT,
}


def on_ray() -> dict[str, Experiment]:
    """sweep name -> experiment: the PRESET of `xlvin sweep`, the entries with a `sweep_name`
    (table1 and atari first, as its --help has always listed them)."""
    entries = sorted((e for e in EXPERIMENTS.values() if e.sweep_name),
                     key=lambda e: e.sweep_name not in ("table1", "atari"))
    return {e.sweep_name: e for e in entries if e.sweep_name}
