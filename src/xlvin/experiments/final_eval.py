"""A cell's final greedy evaluation: on fresh episodes seeded from `EVAL_SEED` on (never a
training seed), sealed in the run directory beside its summary; a cell with both files has
finished and is never run again (`is_finished`), one with a config but no summary resumes
(`finish_run`)."""

import os
from pathlib import Path

from xlvin.io.digests import write_sealed
from xlvin.io.run_dir import CONFIG, SUMMARY, claim_run_dir
from xlvin.process import quiet_known_warnings
from xlvin.run.config import EVAL_SEED, RunConfig  # EVAL_SEED: the first seed of final evaluations
from xlvin.run.training import evaluate_run, train_run

#: The sealed final evaluation of a run directory.
EVAL_FILE = "eval.json"


def is_finished(run_dir: Path) -> bool:
    """Both result files are there (of whatever type: reading them checks it)."""
    return os.path.lexists(run_dir / SUMMARY) and os.path.lexists(run_dir / EVAL_FILE)


def finish_run(run_dir: Path, config: RunConfig, episodes: int, seed: int) -> None:
    """Train the run `config` in `run_dir` and evaluate its final greedy policy on `episodes`
    fresh episodes seeded from `seed` (EVAL_FILE), each unless done. A directory with a config
    but no summary is an interrupted run: it resumes from its last checkpoint. The directory is
    claimed meanwhile: a run another invocation holds is one UserError."""
    quiet_known_warnings()  # in spawned workers too
    with claim_run_dir(run_dir):
        if not (run_dir / SUMMARY).is_file():
            train_run(config, run_dir, progress=False, resume=(run_dir / CONFIG).is_file(),
                      pretrain_progress=False)
        if not (run_dir / EVAL_FILE).is_file():
            write_sealed(run_dir / EVAL_FILE, evaluate_run(run_dir, episodes, seed), run_dir)
