"""`xlvin pretrain-transe`: the shared TransE pre-trainings, made or verified."""

import argparse
from pathlib import Path
from typing import Any

from xlvin.commands.executor import verified
from xlvin.errors import UserError
from xlvin.experiments import table1
from xlvin.io.run_dir import check_creatable
from xlvin.process import set_threads
from xlvin.train.run import shared_transe_file
from xlvin.train.run_config import RunConfig, check_run


def paper_run(env: str) -> RunConfig:
    """The config of the runs that share the TransE pre-training of `env` under the authors'
    protocol (`xlvin reproduce classic`; CartPole-v0's is the quickstart's)."""
    return table1.Cell("paper", env, "xlvin-r", 0).config()


def _remake(entry: dict[str, Any], out: Path) -> None:
    """Re-create a shipped TransE pre-training from the run config its manifest entry holds."""
    cfg = RunConfig.from_json(entry["run"], f"the manifest's entry for {entry['file']}")
    set_threads(cfg.ppo.torch_threads)
    shared_transe_file(cfg, *check_run(cfg), progress=True, out=out)


def _pretrain(args: argparse.Namespace) -> None:
    if verified(args, "TransE", _remake, {"ENV": args.env, "--out": args.out}):
        return
    out = Path(args.out)
    if out.exists() and not args.force:
        raise UserError(f"{out} exists; pass --force to overwrite it")
    check_creatable(out)
    cfg = paper_run(args.env)
    set_threads(cfg.ppo.torch_threads)
    shared_transe_file(cfg, *check_run(cfg), progress=True, out=out)
    print(f"saved {out}")


def register(subparsers: argparse._SubParsersAction) -> None:
    """Add the `pretrain-transe` sub-command."""
    p = subparsers.add_parser(
        "pretrain-transe",
        help="make a shared TransE pre-training, or verify the shipped ones",
        description="Pre-train the encoder and transition model with TransE on random-policy "
        "episodes as the authors' protocol shares them across runs (`xlvin reproduce classic "
        "--protocol paper`; CartPole-v0's is the quickstart's), or (--verify) re-create the "
        "shipped ones and compare their tensors.",
    )
    p.add_argument("env", nargs="?", choices=table1.ENVS, help="the environment")
    p.add_argument("--out", metavar="FILE.safetensors", help="where to write the weights")
    p.add_argument("--force", action="store_true", help="overwrite --out if it exists")
    p.add_argument("--verify", nargs="*", metavar="NAME",
                   help="re-create the shipped TransE pre-trainings NAME (none: all of them) in "
                   "reproducible mode and compare their tensors' SHA-256 with the manifest's, "
                   "printing the seconds each took")
    p.set_defaults(func=_pretrain)
