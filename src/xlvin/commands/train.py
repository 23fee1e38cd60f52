"""`xlvin train` and `xlvin evaluate`: one run into a run directory, and a saved policy evaluated."""

import argparse
import json
from pathlib import Path

from xlvin.config import add_options, from_args, load_json
from xlvin.errors import UserError
from xlvin.io.run_dir import CONFIG
from xlvin.train.curriculum import CurriculumConfig
from xlvin.train.ppo import PPOConfig
from xlvin.train.pretrain_transe import TransEConfig
from xlvin.train.protocols import LowDataConfig
from xlvin.train.run import MAX_SEED, RunConfig, TrainConfig, evaluate_run, train_run

EVAL_SEED = 1_000_000


def add_run_options(parser: argparse.ArgumentParser) -> None:
    """Every option of RunConfig: train and PPO options bare, the others prefixed
    (--transe-*, --low-data-*, --curriculum-*)."""
    parser.add_argument(
        "--config", type=Path, help="JSON file with train/ppo/transe sections; flags override it"
    )
    add_options(parser, TrainConfig)
    add_options(parser, PPOConfig)
    add_options(parser, TransEConfig, prefix="transe-")
    add_options(parser, LowDataConfig, prefix="low-data-")
    add_options(parser, CurriculumConfig, prefix="curriculum-")


def run_config(args: argparse.Namespace, saved: Path | None = None) -> RunConfig:
    """The config from the flags, over --config, over `saved` (a run's config.json) or defaults."""
    base = RunConfig()
    if saved is not None:
        base = RunConfig.from_json(load_json(saved), str(saved))
    if args.config is not None:
        base = RunConfig.from_json(load_json(args.config), str(args.config))
    return RunConfig(
        train=from_args(TrainConfig, args, base.train),
        ppo=from_args(PPOConfig, args, base.ppo),
        transe=from_args(TransEConfig, args, base.transe, prefix="transe-"),
        low_data=from_args(LowDataConfig, args, base.low_data, prefix="low-data-"),
        curriculum=from_args(CurriculumConfig, args, base.curriculum, prefix="curriculum-"),
    )


def _train(args: argparse.Namespace) -> None:
    saved = args.out / CONFIG if args.resume and (args.out / CONFIG).is_file() else None
    _, summary = train_run(
        run_config(args, saved), args.out, progress=not args.quiet, resume=args.resume
    )
    ppo = summary["ppo"]
    print(f"trained in {summary['wall_seconds']:.1f}s; run directory: {args.out}")
    print(json.dumps({k: v for k, v in ppo.items() if not isinstance(v, list)}, indent=2))


def _evaluate(args: argparse.Namespace) -> None:
    if args.episodes <= 0:
        raise UserError(f"--episodes must be > 0, got {args.episodes}")
    if not 0 <= args.seed <= MAX_SEED:
        raise UserError(f"--seed must be in [0, {MAX_SEED}], got {args.seed}")
    result = evaluate_run(args.run_dir, episodes=args.episodes, seed=args.seed)
    if args.json:
        print(json.dumps(result))
    else:
        print(f"{args.run_dir}: return {result['mean']:.2f} +- {result['std']:.2f} "
              f"over {args.episodes} episodes (seeds {args.seed}..{args.seed + args.episodes - 1})")


def register(sub: argparse._SubParsersAction) -> None:
    train = sub.add_parser(
        "train",
        help="train XLVIN or the PPO baseline on a gymnasium environment",
        description="Train one agent with PPO and write a run directory (config.json, "
        "model.safetensors, metrics.jsonl, summary.json, tb/).",
    )
    train.add_argument("--out", type=Path, required=True, help="new run directory to create")
    train.add_argument("--quiet", action="store_true", help="no progress bars")
    train.add_argument(
        "--resume", action="store_true",
        help="continue the unfinished run in --out from its last checkpoint (its config.json is "
        "the default; flags given must agree with it)",
    )
    add_run_options(train)
    train.set_defaults(func=_train)

    evaluate = sub.add_parser(
        "evaluate",
        help="evaluate a saved policy on fresh episodes",
        description="Load DIR/model.safetensors and report the mean and std return of the policy.",
    )
    evaluate.add_argument("run_dir", type=Path, help="run directory written by `xlvin train`")
    evaluate.add_argument("--episodes", type=int, default=100, help="episodes to run (default 100)")
    evaluate.add_argument(
        "--seed", type=int, default=EVAL_SEED,
        help=f"first evaluation seed; episode i uses seed+i (default {EVAL_SEED}, far from "
        "training seeds)",
    )
    evaluate.add_argument("--json", action="store_true", help="print one JSON object")
    evaluate.set_defaults(func=_evaluate)
