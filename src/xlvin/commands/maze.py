"""`xlvin maze levels` (the level histograms of maze data sets) and `xlvin maze vin-check` (the
sanity check: VIN trained on expert actions, its held-out success)."""

import argparse
import json
from pathlib import Path

from xlvin.config import add_options, from_args
from xlvin.experiments.vin_supervised import (
    SupervisedVINConfig,
    level_histograms,
    level_table,
    train_supervised_vin,
)


def _levels(args: argparse.Namespace) -> None:
    print(level_histograms(args.size, args.datasets))


def _vin_check(args: argparse.Namespace) -> None:
    _, summary = train_supervised_vin(from_args(SupervisedVINConfig, args))
    print(level_table(summary))
    if args.json is not None:
        args.json.write_text(json.dumps(summary, indent=2) + "\n")


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("maze", help="maze data sets and the supervised VIN sanity check")
    which = p.add_subparsers(dest="maze_command", required=True, metavar="WHAT")
    levels = which.add_parser("levels", help="starts per level of maze data sets, train and test")
    levels.add_argument("--size", type=int, default=8, help="maze side (default 8)")
    levels.add_argument("--datasets", nargs="+", default=["generated"],
                        help="'generated' and/or VIN npz files (default generated)")
    levels.set_defaults(func=_levels)
    check = which.add_parser(
        "vin-check", help="train VIN (or GVIN) on expert actions, report held-out success per level",
    )
    add_options(check, SupervisedVINConfig)
    check.add_argument("--json", type=Path, help="also write the summary to this JSON file")
    check.set_defaults(func=_vin_check)
