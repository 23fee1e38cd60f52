"""The `xlvin` command: one sub-command per module in `xlvin.commands`.

Every failure a user can cause or meet (bad input, a missing or unwritable path, a full disk,
memory) is one `xlvin: error: ...` line on stderr and exit status 2; Ctrl-C is `xlvin:
interrupted` (130); a closed stdout (`xlvin ... | head`) ends the command quietly (141). The heavy
imports (torch, gymnasium) happen inside `main`, so Ctrl-C during them is handled too.
"""

import argparse
import os
import sys
import typing

from xlvin.errors import UserError, one_line


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


def os_error_line(err: OSError) -> str:
    """An OSError (missing folder, permissions, read-only file system, full disk) as one line."""
    where = f"{err.filename}: " if err.filename is not None else ""
    return f"{where}{err.strerror or one_line(err)}"


def _silence_stdout() -> None:
    """After a closed pipe: point stdout at /dev/null so the exit flush cannot fail again."""
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, sys.stdout.fileno())
    os.close(devnull)


def main(argv: list[str] | None = None) -> int:
    """Run one `xlvin` command; return its exit status."""
    try:
        code = _run(argv)
        sys.stdout.flush()  # a closed pipe shows here, inside the handlers below
        return code
    except KeyboardInterrupt:
        print("xlvin: interrupted", file=sys.stderr)
        return 130
    except BrokenPipeError:
        _silence_stdout()
        return 141
    except UserError as err:
        print(f"xlvin: error: {one_line(err, limit=2000)}", file=sys.stderr)
    except OSError as err:
        print(f"xlvin: error: {os_error_line(err)}", file=sys.stderr)
    except MemoryError:
        print("xlvin: error: out of memory", file=sys.stderr)
    return 2


def _run(argv: list[str] | None) -> int:
    """Parse the command line and run the command (errors are `main`'s)."""
    from xlvin.process import prepare_process

    parser = build_parser()
    prepare_process()  # after the imports: some of them reset warning filters
    try:
        args = parser.parse_args(argv)
    except SystemExit as exit:  # --help, or a usage error already printed in one line
        return int(exit.code or 0)
    args.func(args)
    return 0


if __name__ == "__main__":
    sys.exit(main())
