"""One experiment protocol: an `Experiment` is what `xlvin reproduce NAME` trains on this
machine's worker processes and reports, and what `xlvin sweep NAME` runs as Ray tasks; and
`run_cells`, the one local cell runner. The entries are in `xlvin.experiments.registry`."""

import argparse
import json
import time
from collections.abc import Callable
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import Any

from tqdm import tqdm

from xlvin.experiments.jobs import map_jobs
from xlvin.io.run_dir import CONFIG, SUMMARY
from xlvin.run.checks import check_run
from xlvin.run.config import RunConfig
from xlvin.run.population import population_refusal, train_population, with_seed

Record = dict[str, Any]
#: (cells, records trained or None, wall seconds or None, options) -> text to print
Report = Callable[[list[Any], list[Record] | None, float | None, argparse.Namespace], str]
#: The --finished-only help of most experiments.
FINISHED_HELP = "train nothing: write the results of the cells that have finished"


def _no_options(parser: argparse.ArgumentParser) -> None:
    pass


def _no_check(args: argparse.Namespace) -> None:
    pass


def _nothing_earlier(results: Path) -> None:
    pass


def _no_run_options(args: argparse.Namespace) -> dict[str, Any]:
    return {}


def _no_shared_files(cells: list[Any], jobs: int) -> list[Path]:
    return []


def _cell_run_dir(cell: Any, root: Path) -> Path:
    return cell.run_dir(root)


@dataclass(frozen=True)
class Experiment:
    """A table or figure as cells. `xlvin reproduce NAME` makes its cells from the options,
    trains them here (`run_cells`) unless told to train nothing, and prints `report`;
    `xlvin sweep SWEEP_NAME` (where `sweep_name` is set) runs the unfinished ones as Ray tasks
    and prints `write_results`. Functions that run on workers (`run_cell`, `run_dir`) must be
    importable module-level functions; cells must be picklable."""

    help: str  # one line for `xlvin reproduce --help`
    #: (seeds, parsed options) -> cells of seeds options.first_seed (0 under sweep) onwards;
    #: raise UserError for bad options
    cells: Callable[[int, argparse.Namespace], list[Any]]
    #: (cell, runs root, **run options) -> record; trains and evaluates the cell in its run
    #: directory under the root, resuming what it holds; None for a cell a deadline left unstarted
    run_cell: Callable[..., Record | None]
    runs: Path  # default root of the run directories
    #: (cell, runs root) -> the record of a finished cell, or None if it still has to run
    finished: Callable[[Any, Path], Record | None] = lambda cell, root: None
    #: sweep: (records, results folder, wall seconds) -> text to print; writes the results files
    write_results: Callable[[list[Record], Path, float], str] | None = None
    #: reproduce: (cells, records trained or None when told to train nothing, wall seconds or
    #: None, options) -> text to print; picks the records, writes the results files
    report: Report | None = None
    #: (cell, runs root) -> the cell's run directory (all it writes); default `cell.run_dir(root)`
    run_dir: Callable[[Any, Path], Path] = _cell_run_dir
    add_options: Callable[[argparse.ArgumentParser], None] = _no_options  # that choose cells
    #: (cells to run, jobs) -> files under xlvin's cache (`xlvin.pretrain.files.cache_dir`) the
    #: cells read, produced once before any cell; a sweep's tasks get copies on their nodes
    prepare: Callable[[list[Any], int], list[Path]] = _no_shared_files
    #: (cell) -> its run's config: cells of one config but the seed may then train together
    #: (`reproduce --population S`, `train_populations`); None: each cell trains alone
    config: Callable[[Any], RunConfig] | None = None
    label: Callable[[Any], str] = str  # a cell, for the sweep's progress lines
    outcome: Callable[[Record], str] = lambda record: ""  # a record, for the sweep's lines
    description: str = ""  # for `--help` of NAME
    # `xlvin reproduce NAME`: its seeds, output options and checks
    seeds: int = 10
    seeds_note: str = ""  # after the default in the help of --seeds
    first_seed: int = 0
    first_seed_note: str = ""
    results: Path = Path("results")
    finished_help: str | None = FINISHED_HELP  # None: no --finished-only
    #: what a cell does at --deadline-minutes, for its help; None: no deadline
    deadline: str | None = None
    include_running: str | None = None  # the help of --include-running; None: no such option
    add_run_options: Callable[[argparse.ArgumentParser], None] = _no_options  # after the rest
    check: Callable[[argparse.Namespace], None] = _no_check  # more options, before any cell
    #: (results folder) -> anything: reads what the results files already there keep for the
    #: report (a corrupt one is one UserError), so that it is refused before any cell trains
    read_earlier: Callable[[Path], Any] = _nothing_earlier
    #: (results folder) -> (cell) -> whether the results files there already hold the cell's
    #: record (trained on another machine, whose run directories are gone): `reproduce
    #: --skip-recorded` trains the others only; None: no such option
    recorded: Callable[[Path], Callable[[Any], bool]] | None = None
    #: the help of --skip-recorded
    recorded_help: str = ("train only the cells whose records --results does not already hold; "
                          "those it holds (trained on another machine, their run directories "
                          "gone) stay in the results as they are: a study goes on across "
                          "machines")
    run_options: Callable[[argparse.Namespace], dict[str, Any]] = _no_run_options  # to run_cell
    progress: Callable[[argparse.Namespace], str] = lambda args: "cells"  # the bar's title
    postfix: Callable[[Record], str] = lambda record: ""  # a record, beside the bar
    # `xlvin sweep`: the name and help it offers this experiment under; None: not on Ray
    sweep_name: str | None = None
    sweep_help: str = ""


def run_cells(experiment: Experiment, cells: list[Any], root: Path, jobs: int, desc: str,
              population: int = 1, **options: Any) -> tuple[list[Record], float]:
    """The files the cells share made (`experiment.prepare`, with their own progress), then
    `experiment.run_cell(cell, root, **options)` of every cell on `jobs` spawned worker
    processes (`map_jobs`) under a progress bar titled `desc`: the records of the cells that
    have one (completion order) and the wall seconds of it all. With `population` > 1 the cells
    go `population` seeds at a time (`seed_blocks`): the block's cells that a population can
    train train together first (`train_populations`), then every cell of the block runs (one
    trained together is only evaluated), so a study's results come block by block."""
    start = time.perf_counter()
    experiment.prepare(cells, jobs)
    records: list[Record] = []
    with tqdm(total=len(cells), desc=desc, unit="run") as bar:

        def done(record: Record) -> None:
            bar.update()
            bar.set_postfix_str(experiment.postfix(record))

        for block in seed_blocks(cells, population):
            if population > 1:
                train_populations(experiment, block, root, population)
            records += map_jobs(partial(experiment.run_cell, root=root, **options), block, jobs,
                                done)
    return records, time.perf_counter() - start


def seed_blocks(cells: list[Any], size: int) -> list[list[Any]]:
    """The cells in blocks of `size` seeds each (the seeds in increasing order, every cell of
    a seed in its block, in the cells' order); one block of them all for a size of 1."""
    if size <= 1:
        return [cells]
    seeds = sorted({cell.seed for cell in cells})
    block_of = {seed: i // size for i, seed in enumerate(seeds)}
    blocks: list[list[Any]] = [[] for _ in range(-(-len(seeds) // size))]
    for cell in cells:
        blocks[block_of[cell.seed]].append(cell)
    return blocks


def train_populations(experiment: Experiment, cells: list[Any], root: Path, size: int) -> int:
    """Train together, `size` at a time, the cells whose configs differ only in their seed and
    that have not finished, each into its own run directory
    (`xlvin.run.population.train_population`: every cell's run is its solo run's, bit for bit):
    the cells not started yet (no run directory) together, and those stopped with a checkpoint
    (a config, no summary: a study interrupted) resumed together. A configuration a population
    cannot train, a group of one and any other directory are left to their cells. The number of
    cells trained."""
    assert experiment.config is not None, "the experiment takes no --population"
    groups: dict[tuple[str, bool], list[tuple[RunConfig, Path]]] = {}
    for cell in cells:
        run_dir = experiment.run_dir(cell, root)
        started = run_dir.exists()
        if started and not ((run_dir / CONFIG).is_file() and not (run_dir / SUMMARY).exists()):
            continue  # finished, or not a stopped run: the cell's own
        cfg = experiment.config(cell)
        key = json.dumps(with_seed(cfg, 0).to_json(), sort_keys=True)
        groups.setdefault((key, started), []).append((cfg, run_dir))
    trained = 0
    for (_, resume), group in groups.items():
        if len(group) < 2 or population_refusal(group[0][0], *check_run(group[0][0])):
            continue
        for first in range(0, len(group), size):
            chunk = group[first:first + size]
            if len(chunk) > 1:
                train_population(chunk[0][0], [cfg.train.seed for cfg, _ in chunk], None,
                                 resume=resume,
                                 dirs={cfg.train.seed: run_dir for cfg, run_dir in chunk})
                trained += len(chunk)
    return trained
