"""`xlvin pretrain-executor` and `xlvin eval-executor`: the VI executor's sub-commands."""

import argparse
import dataclasses
import json
import math
from pathlib import Path
from typing import Any

from xlvin.commands.pretrained_files import add_file_options, check_out, verified
from xlvin.config import add_options, from_args, parse_bool
from xlvin.errors import UserError
from xlvin.io.executor_file import load_executor, read_executor_meta
from xlvin.process import set_threads
from xlvin.pretrain.executor import pretrain_and_save
from xlvin.pretrain.executor_config import GRAPH_FAMILIES, MAZE_SIZES, ExecutorConfig
from xlvin.pretrain.executor_eval import evaluate_executor
from xlvin.pretrain.files import make_executor
from xlvin.run.config import MAX_SEED
from xlvin.run.architecture import machine_memory


def _table(rows: list[dict[str, Any]]) -> str:
    """The executor's metrics and, below each row, the greedy-on-immediate-reward baseline's."""
    lines = [(f"{'family':<22} {'states':>7} {'actions':>7} {'graphs':>6} "
              f"{'policy accuracy':>18} {'value MSE':>20} {'diverged':>8}")]
    for r in rows:
        acc = f"{100 * r['policy_accuracy']:.1f} +- {100 * r['policy_accuracy_std']:.1f} %"
        mse = "-" if r["value_mse"] is None else f"{r['value_mse']:.3g} +- {r['value_mse_std']:.2g}"
        lines.append(f"{r['family']:<22} {r['states']:>7.0f} {r['actions']:>7} {r['graphs']:>6} "
                     f"{acc:>18} {mse:>20} {r['diverged']:>8}")
        base_acc = (f"{100 * r['baseline_policy_accuracy']:.1f} +- "
                    f"{100 * r['baseline_policy_accuracy_std']:.1f} %")
        base_mse = f"{r['baseline_value_mse']:.3g} +- {r['baseline_value_mse_std']:.2g}"
        lines.append(f"{'  greedy on R (baseline)':<46} {base_acc:>18} {base_mse:>20} {'-':>8}")
    return "\n".join(lines)


def check_threads(threads: int) -> None:
    if threads < 1:
        raise UserError(f"--threads must be >= 1, got {threads}")


def check_mdps_fit(states: int, actions: int, count: int) -> None:
    """Refuse MDPs whose transition tensors (count x S x A x S doubles, and as much again for
    rewards and value iteration) could not fit in this machine's memory."""
    need = 2 * count * states * actions * states * 8
    if need > machine_memory():
        raise UserError(
            f"{count} MDPs of {states} states and {actions} actions need about "
            f"{need / 2**30:,.0f} GiB; this machine has {machine_memory() / 2**30:,.0f} GiB"
        )


def _remake(entry: dict[str, Any], out: Path) -> None:
    """Re-create a shipped executor from its manifest entry."""
    fields = {f.name for f in dataclasses.fields(ExecutorConfig)}
    make_executor(ExecutorConfig(**{k: v for k, v in entry["config"].items() if k in fields}),
                  out, progress=True, accelerate=entry.get("accelerate", False))


def _pretrain(args: argparse.Namespace) -> None:
    if verified(args, "executor", _remake, {"--graphs": args.graphs, "--out": args.out}):
        return
    check_threads(args.threads)
    out = check_out(args, "executor")
    if args.eval_count < 1:
        raise UserError(f"--eval-count must be >= 1, got {args.eval_count}")
    cfg = from_args(ExecutorConfig, args, ExecutorConfig(family=args.graphs))
    check_mdps_fit(cfg.states, cfg.actions, max(cfg.train_graphs, args.eval_count))
    set_threads(args.threads)
    meta = pretrain_and_save(cfg, out, args.eval_count, progress=not args.quiet,
                             overwrite=args.force, accelerate=args.accelerate)
    print(f"saved {out} (trained in {meta['training']['train_seconds']:.0f} s); held-out graphs:")
    print(_table([meta["held_out"]]))


def _given_or_saved(given: Any, meta: dict[str, Any], key: str, kind: type, default: Any) -> Any:
    """A flag's value, else the executor file's (checked: a file is not trusted), else `default`."""
    if given is not None:
        return given
    saved = meta.get(key, default)
    if kind is float and type(saved) is int:
        saved = float(saved)
    if type(saved) is not kind:
        raise UserError(f"the executor file's {key} is not a {kind.__name__}; pass --{key}")
    return saved


def _evaluate(args: argparse.Namespace) -> None:
    check_threads(args.threads)
    meta = read_executor_meta(Path(args.file))
    family = args.graphs or meta.get("family")
    if family not in GRAPH_FAMILIES:
        raise UserError(f"{args.file} names no graph family; pass --graphs")
    states = _given_or_saved(args.states, meta, "states", int, 20)
    maze_size = _given_or_saved(args.maze_size, meta, "maze_size", int, 8)
    actions = _given_or_saved(args.actions, meta, "actions", int, 8)
    gamma = _given_or_saved(args.gamma, meta, "gamma", float, 0.9)
    checks = [
        (states >= 1 and actions >= 1, "--states and --actions must be >= 1"),
        (args.count >= 1, "--count must be >= 1"),
        (0 <= args.seed <= MAX_SEED, f"--seed must be in [0, {MAX_SEED}]"),
        (0 <= gamma < 1, "--gamma must lie in [0, 1)"),
        (args.tol > 0 and math.isfinite(args.tol), "--tol must be a finite number > 0"),
        (maze_size in MAZE_SIZES, f"--maze-size must be one of {', '.join(map(str, MAZE_SIZES))}"),
    ]
    for ok, message in checks:
        if not ok:
            raise UserError(message)
    check_mdps_fit(states, actions, args.count)
    set_threads(args.threads)
    executor = load_executor(Path(args.file))
    result = evaluate_executor(
        executor, family, states, actions, args.count, args.seed, gamma, args.tol, maze_size
    )
    print(json.dumps(result, indent=2) if args.json else _table([result]))


def register(subparsers: argparse._SubParsersAction) -> None:
    """Add the `pretrain-executor` and `eval-executor` sub-commands."""
    families = GRAPH_FAMILIES
    p = subparsers.add_parser(
        "pretrain-executor",
        help="pre-train the VI executor on synthetic MDPs and save it",
        description="Pre-train the message-passing executor to imitate value iteration "
        "(teacher-forced, MSE on V_{t+1} - V_t), save it as safetensors and print its "
        "accuracy on held-out graphs. --verify re-creates the executors shipped with xlvin "
        "and compares their tensors.",
    )
    p.add_argument("--graphs", choices=families,
                   help="graph family to train on (maze: the training mazes' MDPs); required "
                   "without --verify")
    add_file_options(p, "executor", names="default executor names; ")
    p.add_argument("--eval-count", type=int, default=40, metavar="N",
                   help="held-out graphs evaluated after training (default: 40)")
    p.add_argument("--quiet", action="store_true", help="no progress bar")
    p.add_argument("--threads", type=int, default=1, metavar="N",
                   help="torch CPU threads; one is fastest for small graphs on a busy machine "
                   "(default: 1)")
    p.add_argument("--accelerate", type=parse_bool, default=True, metavar="BOOL",
                   help="train on the accelerated path (each step by hand in NumPy, "
                   "xlvin.accel.numpy_executor, where it applies, else the forward of "
                   "xlvin.accel.dense_executor: the same function up to float rounding, several "
                   "times faster; other weights "
                   "bit-wise: the shipped files made before it need false) (default: true)")
    add_options(p, ExecutorConfig, skip=("family",))
    p.set_defaults(func=_pretrain)

    e = subparsers.add_parser(
        "eval-executor",
        help="evaluate a pre-trained executor on held-out synthetic MDPs",
        description="Run the executor on its own predictions for as many steps as VI needs "
        "and compare with VI: accuracy of the greedy policy and MSE of the values.",
    )
    e.add_argument("file", metavar="FILE", help="executor file written by pretrain-executor")
    e.add_argument("--graphs", choices=families, default=None,
                   help="graph family to evaluate on (default: the training family)")
    e.add_argument("--states", type=int, default=None, metavar="N",
                   help="states per MDP (default: the training size)")
    e.add_argument("--actions", type=int, default=None, metavar="A",
                   help="actions per MDP (default: the training size)")
    e.add_argument("--count", type=int, default=40, metavar="N",
                   help="number of held-out MDPs (default: 40)")
    e.add_argument("--seed", type=int, default=0, metavar="S",
                   help="seed of the held-out MDPs (a stream disjoint from training; default: 0)")
    e.add_argument("--maze-size", type=int, default=None, metavar="N",
                   help="--graphs maze: side of the held-out mazes, 8 or 16 (default: the "
                   "training size)")
    e.add_argument("--gamma", type=float, default=None,
                   help="discount factor (default: the training one)")
    e.add_argument("--tol", type=float, default=1e-4,
                   help="VI stopping tolerance, which sets the number of steps (default: 1e-4)")
    e.add_argument("--threads", type=int, default=1, metavar="N",
                   help="torch CPU threads; one is fastest for small graphs on a busy machine "
                   "(default: 1)")
    e.add_argument("--json", action="store_true", help="print the metrics as JSON")
    e.set_defaults(func=_evaluate)
