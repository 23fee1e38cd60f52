"""The `xlvin` command: one sub-command per module in `xlvin.commands`."""

import argparse
import sys
import typing
import warnings

from xlvin.errors import UserError


class Parser(argparse.ArgumentParser):
    """argparse, but a usage error is one line on stderr (exit 2), like every other error."""

    def error(self, message: str) -> typing.NoReturn:
        self.exit(2, f"xlvin: error: {self.prog}: {message} (see {self.prog} --help)\n")


def build_parser() -> argparse.ArgumentParser:
    from xlvin.commands import executor, quickstart, reproduce, sweep, train

    parser = Parser(
        prog="xlvin",
        description="XLVIN: eXecuted Latent Value Iteration Networks and baselines.",
    )
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for module in (executor, train, quickstart, reproduce, sweep):
        module.register(sub)
    return parser


def quiet_known_warnings() -> None:
    """The paper's CartPole-v0 is deprecated in gymnasium 1.x; its warning says nothing new."""
    warnings.filterwarnings("ignore", message=".*CartPole-v0 is out of date.*")


def main(argv: list[str] | None = None) -> int:
    quiet_known_warnings()
    parser = build_parser()
    try:
        args = parser.parse_args(argv)
    except SystemExit as exit:  # --help, or a usage error already printed in one line
        return int(exit.code or 0)
    # Big latent trees (the maze's (8, 4): ~1.2 M nodes per minibatch) run ~2x faster when freed
    # activations stay in the malloc heap instead of being unmapped and re-faulted every forward;
    # a training process re-reaches its peak memory every minibatch anyway.
    from xlvin.nn.tree import retain_freed_memory

    retain_freed_memory()
    try:
        args.func(args)
    except UserError as err:
        print(f"xlvin: error: {err}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("xlvin: interrupted", file=sys.stderr)
        return 130
    return 0


if __name__ == "__main__":
    sys.exit(main())
