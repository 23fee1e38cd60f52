"""`xlvin pretrain-transe`: the shared TransE pre-trainings, made or verified."""

import argparse
from pathlib import Path
from typing import Any

from xlvin.commands.pretrained_files import add_file_options, check_out, verified
from xlvin.experiments import table1
from xlvin.process import set_threads
from xlvin.run.training import shared_transe_file
from xlvin.run.config import RunConfig
from xlvin.run.checks import check_run


def paper_run(env: str) -> RunConfig:
    """The config of the runs that share the TransE pre-training of `env` under the authors'
    protocol (`xlvin reproduce classic`; CartPole-v0's is the quickstart's)."""
    return table1.Cell("paper", env, "xlvin-r", 0).config()


def _make(cfg: RunConfig, out: Path) -> None:
    """Pre-train the TransE of the runs of `cfg` into `out`, with its progress."""
    set_threads(cfg.ppo.torch_threads)
    shared_transe_file(cfg, *check_run(cfg), progress=True, out=out)


def _remake(entry: dict[str, Any], out: Path) -> None:
    """Re-create a shipped TransE pre-training from the run config its manifest entry holds."""
    _make(RunConfig.from_json(entry["run"], f"the manifest's entry for {entry['file']}"), out)


def _pretrain(args: argparse.Namespace) -> None:
    if verified(args, "TransE", _remake, {"ENV": args.env, "--out": args.out}):
        return
    out = check_out(args, "TransE")
    _make(paper_run(args.env), out)
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
    add_file_options(p, "TransE")
    p.set_defaults(func=_pretrain)
