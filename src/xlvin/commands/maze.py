"""`xlvin maze levels` (the level histograms of maze data sets), `xlvin maze vin-check` (the
sanity check: VIN trained on expert actions, its held-out success) and `xlvin maze embeddings`
(paper figure 5: a curriculum XLVIN's state embeddings of one held-out maze)."""

import argparse
import json
from pathlib import Path

from xlvin.config import add_options, from_args
from xlvin.experiments.figures import require_plots
from xlvin.experiments.maze_embeddings import (
    PAPER_LEVELS,
    check_xlvin_run,
    maze_embeddings,
    parse_levels,
)
from xlvin.experiments.vin_supervised import (
    SupervisedVINConfig,
    level_histograms,
    level_table,
    train_supervised_vin,
)
from xlvin.io.files import atomic_write_text
from xlvin.pretrain.transe import TransEConfig


def _levels(args: argparse.Namespace) -> None:
    print(level_histograms(args.size, args.datasets))


def _vin_check(args: argparse.Namespace) -> None:
    _, summary = train_supervised_vin(from_args(SupervisedVINConfig, args))
    print(level_table(summary))
    if args.json is not None:
        atomic_write_text(args.json, json.dumps(summary, indent=2) + "\n")


def _embeddings(args: argparse.Namespace) -> None:
    require_plots()
    levels = parse_levels(args.levels)
    run = args.run.expanduser()
    transe = from_args(TransEConfig, args, check_xlvin_run(run).transe, prefix="transe-")
    summary = maze_embeddings(run, levels, args.out, args.maze, args.seed, transe,
                              progress=not args.quiet)
    for p in summary["panels"]:
        print(f"{p['label']}: Spearman rho {p['spearman_rho']:.3f} over {p['states'] - 1} states, "
              f"transition hits@1 {p['transition_hits_at_1']:.2f}")
    for note in summary["notes"]:
        print(note)
    print(f"wrote {args.out} and {args.out.with_suffix('.json')}")


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("maze", help="maze data sets, the supervised VIN sanity check and "
                       "XLVIN's state embeddings (figure 5)")
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
    emb = which.add_parser(
        "embeddings", help="paper figure 5: 3D PCA of a curriculum XLVIN's state embeddings of a "
        "held-out maze after given levels, beside a TransE-only model",
        description="The TransE-only model's --transe-* options default to the run's own TransE "
        "settings (its config.json), not to the defaults listed below.",
    )
    emb.add_argument("--run", type=Path, required=True,
                     help="a curriculum XLVIN run directory (its levels/level-DD.safetensors)")
    emb.add_argument("--levels", default=",".join(map(str, PAPER_LEVELS)),
                     help="levels whose policy to plot, comma-separated (default 1,2,9: the "
                     "paper's); one the run never passed is replaced by its last passed level")
    emb.add_argument("--maze", type=int, help="index of the held-out maze (default: a seeded "
                     "choice among those with a long optimal path)")
    emb.add_argument("--seed", type=int, default=0, help="seed of the maze choice (default 0)")
    emb.add_argument("--out", type=Path, default=Path("results/maze_embeddings.png"),
                     help="the figure; its numbers go beside it as .json "
                     "(default results/maze_embeddings.png)")
    emb.add_argument("--quiet", action="store_true", help="no progress bar")
    add_options(emb, TransEConfig, skip=("shared",), prefix="transe-")
    emb.set_defaults(func=_embeddings)
