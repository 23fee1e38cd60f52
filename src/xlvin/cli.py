"""The `xlvin` command: one sub-command per module in `xlvin.commands`."""

import argparse
import sys
import typing

from xlvin.errors import UserError
from xlvin.process import prepare_process


class Parser(argparse.ArgumentParser):
    """argparse, but a usage error is one line on stderr (exit 2), like every other error."""

    def error(self, message: str) -> typing.NoReturn:
        self.exit(2, f"xlvin: error: {self.prog}: {message} (see {self.prog} --help)\n")


def build_parser() -> argparse.ArgumentParser:
    from xlvin.commands import executor, maze, quickstart, reproduce, sweep, train

    parser = Parser(
        prog="xlvin",
        description="XLVIN: eXecuted Latent Value Iteration Networks and baselines.",
    )
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for module in (executor, train, quickstart, reproduce, sweep, maze):
        module.register(sub)
    return parser


def main(argv: list[str] | None = None) -> int:
    prepare_process()
    parser = build_parser()
    try:
        args = parser.parse_args(argv)
    except SystemExit as exit:  # --help, or a usage error already printed in one line
        return int(exit.code or 0)
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
