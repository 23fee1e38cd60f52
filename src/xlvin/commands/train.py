"""`xlvin train` and `xlvin evaluate`: one run into a run directory, and a saved policy evaluated.

Their parsers need only the config schema (`xlvin.run.config`, torch-free): what runs a command
(the API, the agent registry, the run directory, the user's env modules) is imported when it
runs."""

import argparse
import json
import math
import sys
from pathlib import Path
from typing import Any

from xlvin.config import add_options, from_args, load_json
from xlvin.progress import duration
from xlvin.run.config import EVAL_SEED, SECTIONS, RunConfig


#: The options most runs set, listed first in `xlvin train --help`.
COMMON = ("env", "agent", "executor", "depth", "seed", "total_steps", "protocol", "device")


def add_run_options(parser: argparse.ArgumentParser) -> None:
    """Every option of RunConfig: train and PPO options bare, the others prefixed
    (--transe-*, --low-data-*, --curriculum-*); the COMMON ones first."""
    parser.add_argument(
        "--config", type=Path, help="JSON file with train/ppo/transe sections; flags override it"
    )
    common = parser.add_argument_group(
        "common options", "what most runs set; every other option follows, by config section")
    for _, cls, prefix in SECTIONS:
        add_options(parser, cls, prefix=prefix, first=(common, COMMON) if not prefix else None)


def run_config(args: argparse.Namespace, saved: Path | None = None) -> RunConfig:
    """The config from the flags, over --config, over `saved` (a run's config.json) or defaults.
    `--agent NAME` sets the fields its name stands for (xlvin-r: --agent xlvin --executor
    random, `expand_agent`)."""
    from xlvin.run.agents import expand_agent

    if args.agent is not None:
        given = {"agent": args.agent, "executor": args.executor}
        args = argparse.Namespace(**{**vars(args), **expand_agent(
            {k: v for k, v in given.items() if v is not None})})
    base = RunConfig()
    if saved is not None:
        base = RunConfig.from_saved(load_json(saved), str(saved))
    if args.config is not None:
        base = RunConfig.from_json(load_json(args.config), str(args.config))
    cfg = RunConfig(**{section: from_args(cls, args, getattr(base, section), prefix=prefix)
                       for section, cls, prefix in SECTIONS})
    if getattr(args, "target_kl", None) is not None:  # given: it must act (as target_kl=)
        from xlvin.run.checks import check_target_kl

        check_target_kl(cfg)
    return cfg


def time_split(summary: dict[str, Any]) -> str:
    """`trained in 2m24s (pre-training 2m14s: executor 2m07s, TransE 7.0s; training 10.1s)`:
    the summary's seconds, the pre-trainings named only where the run has them."""
    parts = []
    if summary["executor"] is not None:
        parts.append(f"executor {duration(summary['pretrain_executor_seconds'])}")
    if "transe" in summary:
        parts.append(f"TransE {duration(summary['pretrain_transe_seconds'])}")
    total = f"trained in {duration(summary['wall_seconds'])}"
    if not parts:
        return total
    return (f"{total} (pre-training {duration(summary['pretrain_seconds'])}: {', '.join(parts)}; "
            f"training {duration(summary['train_seconds'])})")


def _train(args: argparse.Namespace) -> None:
    from xlvin.api import Model
    from xlvin.envs.packages import import_gym_packages
    from xlvin.envs.wrappers import import_env_wrappers
    from xlvin.io.run_dir import CONFIG

    from xlvin.ppo.session import deadline_after

    deadline_after(args.deadline_minutes)  # checked before anything is read or written
    import_gym_packages(args.gym_packages or [])  # the flag's modules only, never a file's
    import_env_wrappers(args.env_wrappers or [])
    if args.seeds is not None:
        _train_seeds(args)
        return
    saved = args.out / CONFIG if args.resume and (args.out / CONFIG).is_file() else None
    from xlvin.run.protocols import whole_rollouts
    cfg, rounded = whole_rollouts(run_config(args, saved))
    model = Model.from_config(cfg)
    if rounded:
        print(f"xlvin: --total-steps {rounded}", file=sys.stderr)
    model.learn(out=args.out, progress=not args.quiet, resume=args.resume,
                deadline_minutes=args.deadline_minutes)
    assert model.summary is not None
    print(f"{time_split(model.summary)}; {counts(model.summary['ppo'])}; run directory: {args.out}"
          + stopped_note([model.summary], args.out))


def stopped_note(summaries: list[dict[str, Any]], out: Path) -> str:
    """What the last line adds when runs stopped at the deadline: how to continue them."""
    stopped = sum(s["stopped_at_deadline"] for s in summaries)
    if not stopped:
        return ""
    runs = "" if len(summaries) == 1 else f" ({stopped} of {len(summaries)} seeds)"
    return (f"; stopped at the deadline{runs}, a checkpoint saved: `xlvin train --resume --out "
            f"{out}` with the same flags continues it")


def _train_seeds(args: argparse.Namespace) -> None:
    """`xlvin train --seeds`: every seed into OUT/seed-S, trained together
    (`xlvin.run.population`)."""
    from xlvin.errors import FieldError
    from xlvin.io.run_dir import CONFIG
    from xlvin.ppo.session import deadline_after
    from xlvin.run.population import parse_seeds, seed_dir, train_population

    if args.seed is not None:
        raise FieldError("give {seeds} or {seed}, not both", seeds=None, seed=None)
    seeds = parse_seeds(args.seeds)
    saved = seed_dir(args.out, seeds[0]) / CONFIG
    from xlvin.run.protocols import whole_rollouts
    cfg, rounded = whole_rollouts(run_config(args, saved if args.resume and saved.is_file()
                                             else None))
    if rounded:
        print(f"xlvin: --total-steps {rounded}", file=sys.stderr)
    summaries = train_population(cfg, seeds, args.out, progress=not args.quiet,
                                 resume=args.resume,
                                 deadline=deadline_after(args.deadline_minutes))
    last = [sum(s["ppo"]["episode_returns"][-20:]) / max(1, len(s["ppo"]["episode_returns"][-20:]))
            for s in summaries]
    wall = max(s["wall_seconds"] for s in summaries)
    print(f"{len(seeds)} seeds trained in {duration(wall)}; {counts(summaries[0]['ppo'])} for "
          f"seed {seeds[0]}; mean return of the last 20 episodes {min(last):.1f} to "
          f"{max(last):.1f} over the seeds; run directories: {seed_dir(args.out, seeds[0])} ..."
          + stopped_note(summaries, args.out))


def counts(ppo: dict[str, Any]) -> str:
    """`5,120 env steps, 40 updates, 212 episodes (last 20: return 23.4)`: what PPO trained on
    (summary.json's `ppo` holds every number)."""
    line = (f"{ppo['env_steps']:,} env steps, {ppo['updates']:,} updates, "
            f"{ppo['episodes']:,} episodes")
    returns = ppo["episode_returns"][-20:]
    if returns:
        line += f" (last {len(returns)}: return {sum(returns) / len(returns):.1f})"
    return line


def _evaluate(args: argparse.Namespace) -> None:
    from xlvin.api import Model
    from xlvin.api_options import check_evaluation
    from xlvin.io.run_dir import MODEL

    check_evaluation(args.episodes, args.seed)
    model = Model.load(args.run_dir, gym_packages=args.gym_packages,
                       env_wrappers=args.env_wrappers)
    if not (args.run_dir / MODEL).is_file():
        print(f"xlvin: note: {args.run_dir} stopped before it finished: the policy of its "
              f"checkpoint, at {model.num_timesteps:,} env steps, is evaluated", file=sys.stderr)
    result = model.evaluate(episodes=args.episodes, seed=args.seed, env=args.env,
                            deterministic=not args.stochastic)
    bad = sum(not math.isfinite(r) for r in result["returns"])
    if bad:
        print(f"xlvin: note: {bad} of {len(result['returns'])} returns are not finite (NaN or "
              "inf): the env's rewards were not", file=sys.stderr)
    if args.json:
        print(evaluation_json(result))
    else:
        acting = "sampled" if args.stochastic else "greedy"
        print(f"{args.run_dir}: return {result['mean']:.2f} +- {result['std']:.2f} "
              f"over {args.episodes} episodes (seeds {args.seed}..{args.seed + args.episodes - 1}, "
              f"{acting} actions)")


def finite(result: dict[str, Any]) -> bool:
    """Whether an evaluation's mean, std and every return are finite numbers."""
    return all(math.isfinite(x) for x in (result["mean"], result["std"], *result["returns"]))


def evaluation_json(result: dict[str, Any]) -> str:
    """An evaluation as strict JSON, which has no NaN or Infinity: a number that is not finite
    is null, and `finite` says whether every number was."""

    def strict(value: Any) -> Any:
        if isinstance(value, float) and not math.isfinite(value):
            return None
        return [strict(v) for v in value] if isinstance(value, list) else value

    return json.dumps({**{k: strict(v) for k, v in result.items()}, "finite": finite(result)},
                      allow_nan=False)


def register(sub: argparse._SubParsersAction) -> None:
    train = sub.add_parser(
        "train",
        help="train XLVIN or the PPO baseline on a gymnasium environment",
        description="Train one agent with PPO and write a run directory (config.json, "
        "model.safetensors, metrics.jsonl, summary.json, tb/). Pre-training comes first and shows "
        "its progress, with --quiet too; the time printed at the end and summary.json split it "
        "from training. The default executors ship with xlvin (pre-trained in reproducible "
        "mode: nothing is pre-trained first); an executor of other settings is pre-trained once "
        "(as --executor random's: 6,410 Adam steps on 200 random deterministic graphs, 1 to 2.5 "
        "min of a 2-core CPU) and cached under $XLVIN_CACHE (default ~/.cache/xlvin) for every "
        "command that needs the same executor. TransE is pre-trained at the start of every run on "
        "random-policy transitions: seconds on classic control, 5 to 15 min of a 2-core CPU on "
        "Atari frames (25,000 transitions x 10 epochs through the Nature CNN; the paper's Atari "
        "runs skip it: --pretrain-transe false).",
    )
    train.add_argument("--out", type=Path, required=True,
                       help="new run directory to create (with --seeds: the folder of the seeds' "
                       "run directories)")
    train.add_argument(
        "--seeds", metavar="SEEDS",
        help="train these seeds of one configuration together in this process (0-63, 0,5,9 or "
        "both: 0-9,20-29), each into OUT/seed-S: the run directory --seed S writes, the same "
        "numbers bit for bit on this machine; for the PPO baseline and XLVIN on the CPU, in a "
        "fraction of the time where its stacked kernels compute them (an MLP encoder: "
        "docs/architecture.md, Populations)",
    )
    train.add_argument(
        "--quiet", action="store_true",
        help="no PPO progress bar (pre-training still shows its progress: a bar on a terminal, "
        "else a line a minute)",
    )
    train.add_argument(
        "--resume", action="store_true",
        help="continue the unfinished run in --out from its last checkpoint (its config.json is "
        "the default; flags given must agree with it); with a larger --total-steps, continue "
        "a finished online run to that total",
    )
    train.add_argument(
        "--deadline-minutes", type=float, default=None, metavar="M",
        help="stop training at the first update boundary M minutes from now, with a checkpoint "
        "(with --seeds: every seed); --resume continues it exactly, as if never stopped",
    )
    add_run_options(train)
    train.set_defaults(func=_train)

    evaluate = sub.add_parser(
        "evaluate",
        help="evaluate a saved policy on fresh episodes",
        description="Load DIR/model.safetensors and report the mean and std return of the policy, "
        "greedy (default) or sampled (--stochastic).",
    )
    evaluate.add_argument("run_dir", type=Path,
                          help="run directory written by `xlvin train` (one stopped early: "
                          "its checkpoint's policy)")
    evaluate.add_argument("--episodes", type=int, default=100, help="episodes to run (default 100)")
    evaluate.add_argument(
        "--seed", type=int, default=EVAL_SEED,
        help=f"first evaluation seed; episode i uses seed+i (default {EVAL_SEED}, far from "
        "training seeds)",
    )
    evaluate.add_argument("--json", action="store_true",
                          help="print one JSON object (strict JSON: a mean, std or return that is "
                          "not finite, from an env's NaN or inf rewards, is null, and \"finite\" "
                          "is false)")
    evaluate.add_argument(
        "--stochastic", action="store_true",
        help="sample actions from the policy (the action noise seeded by --seed) instead of the "
        "greedy action, as predict(deterministic=False) does",
    )
    evaluate.add_argument(
        "--gym-packages", nargs="+", default=[], metavar="NAME",
        help="modules to import that register the run's environment (the run says which it "
        "needs), or the --env to evaluate on",
    )
    evaluate.add_argument(
        "--env-wrapper", dest="env_wrappers", action="append", default=[],
        metavar="MODULE:CLASS",
        help="a wrapper the run put around its env (the run says which it needs), imported by "
        "module name; repeat the flag for each",
    )
    evaluate.add_argument(
        "--env", default=None, metavar="ID",
        help="evaluate on this registered env (same observation and action spaces) instead of "
        "the run's: for a run whose env was made from a Python object (xlvin's Python API)",
    )
    evaluate.set_defaults(func=_evaluate)
