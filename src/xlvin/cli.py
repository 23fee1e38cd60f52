"""The `xlvin` command: one sub-command per module in `xlvin.commands`.

Every failure a user can cause or meet (bad input, a missing or unwritable path, a full disk,
memory, a user env that fails) is one `xlvin: error: ...` line on stderr and exit status 2
(`XLVIN_TRACEBACK=1`: after its traceback); Ctrl-C is `xlvin: interrupted` (130), SIGTERM
`xlvin: terminated` (143; SIGHUP the same, 129: `xlvin.signals`); a closed stdout (`xlvin ... |
head`) ends the command quietly (141). The heavy
imports (torch, gymnasium) happen inside `main`, so Ctrl-C during them is handled too. A command
line builds the parser of the command it names only (`COMMANDS`): `xlvin train --help` imports
no torch, and answers at once.
"""

import argparse
import importlib
import os
import re
import sys
import traceback
import typing
from importlib.metadata import version

from xlvin.config import close_match
from xlvin.errors import UserError, one_line
from xlvin.io.seals import accept_unsealed
from xlvin.kernels import DEFAULT_ON, add_option, pin, wanted
from xlvin.signals import exit_status, received_sigterm, sigterm_raises


#: Set (XLVIN_TRACEBACK=1), an error line is preceded by its traceback, with its cause's: a user
#: env's own exception, for one (`xlvin.envs.failures`).
TRACEBACK = "XLVIN_TRACEBACK"


class Parser(argparse.ArgumentParser):
    """argparse, but a usage error is one line on stderr (exit 2), like every other error, and
    an unknown option or command names the known ones closest to it."""

    def error(self, message: str) -> typing.NoReturn:
        command = _command_parser(self, getattr(self, "argv", []))
        self.exit(2, f"xlvin: error: {message}{self._did_you_mean(message)} "
                     f"(see {command.prog} --help)\n")

    def _did_you_mean(self, message: str) -> str:
        """'; did you mean --total-steps?' for 'unrecognized arguments: --total-timesteps', and
        '; did you mean train?' for "invalid choice: 'trian'"."""
        choice = re.match(r"argument \S+: invalid choice: '([^']*)'", message)
        if choice:
            guess = close_match(choice[1], sorted(_command_words(self)))
            return f"; did you mean {guess}?" if guess else ""
        prefix = "unrecognized arguments: "
        if not message.startswith(prefix):
            return ""
        known = sorted(_option_strings(_command_parser(self, getattr(self, "argv", []))))
        guesses = []
        for word in message[len(prefix):].split():
            name = word.split("=", 1)[0]
            guess = close_match(name, known) if name.startswith("--") else None
            guesses += [guess] if guess else []
        return f"; did you mean {', '.join(guesses)}?" if guesses else ""


def _command_words(parser: argparse.ArgumentParser) -> set[str]:
    """The sub-commands `parser` takes."""
    subs = [a for a in parser._actions if isinstance(a, argparse._SubParsersAction)]
    return set(subs[0].choices) if subs else set()


def _command_parser(parser: argparse.ArgumentParser, argv: list[str]) -> argparse.ArgumentParser:
    """The parser of the (sub-)command that `argv` names (argparse reports an unknown option of
    a sub-command from the top-level parser)."""
    for word in argv:
        subs = [a for a in parser._actions if isinstance(a, argparse._SubParsersAction)]
        if subs and word in subs[0].choices:
            parser = subs[0].choices[word]
    return parser


def _option_strings(parser: argparse.ArgumentParser) -> set[str]:
    return {s for action in parser._actions for s in action.option_strings}


#: Each sub-command -> the module of `xlvin.commands` that registers it, in the order `xlvin
#: --help` lists them.
COMMANDS = {
    "pretrain-executor": "executor", "eval-executor": "executor", "pretrain-transe": "transe",
    "train": "train", "evaluate": "train", "quickstart": "quickstart", "reproduce": "reproduce",
    "sweep": "sweep", "maze": "maze",
}


def build_parser(words: list[str] | None = None) -> argparse.ArgumentParser:
    """The `xlvin` parser: every command's, or where the command line `words` starts with a
    command, that command's module's only (the others import torch or the experiments)."""
    named = COMMANDS.get(words[0]) if words else None
    parser = Parser(
        prog="xlvin",
        description="XLVIN: eXecuted Latent Value Iteration Networks and baselines.",
    )
    parser.add_argument("--version", action="version", version=f"xlvin {version('xlvin')}")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for module in [named] if named else dict.fromkeys(COMMANDS.values()):
        importlib.import_module(f"xlvin.commands.{module}").register(sub)
    for path, command in _commands(parser):
        add_option(command, default=path[0] in DEFAULT_ON)
        command.add_argument(
            "--accept-unsealed", action="store_true",
            help="read result, metrics and weights files that hold no SHA-256 seal, unchecked "
            "(with one note): those of runs written by an xlvin from before seals; without it "
            "such a file is refused (docs/determinism.md)")
    return parser


def _commands(
    parser: argparse.ArgumentParser, path: tuple[str, ...] = ()
) -> list[tuple[tuple[str, ...], argparse.ArgumentParser]]:
    """Every command that runs (a leaf of the sub-command tree), with its words."""
    subs = [a for a in parser._actions if isinstance(a, argparse._SubParsersAction)]
    if not subs:
        return [(path, parser)]
    return [leaf for word, child in subs[0].choices.items()
            for leaf in _commands(child, (*path, word))]


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
        with sigterm_raises():
            code = _run(argv)
            sys.stdout.flush()  # a closed pipe shows here, inside the handlers below
        return code
    except KeyboardInterrupt as err:
        if received_sigterm(err):
            print(f"xlvin: terminated{f' ({err})' if str(err) else ''}", file=sys.stderr)
            return exit_status()
        print("xlvin: interrupted", file=sys.stderr)
        return 130
    except BrokenPipeError:
        _silence_stdout()
        return 141
    except UserError as err:  # the API's errors in the command line's terms
        if os.environ.get(TRACEBACK):
            traceback.print_exception(err)
        message = UserError(getattr(err, "command_line_message", err))
        print(f"xlvin: error: {one_line(message, limit=2000)}", file=sys.stderr)
    except OSError as err:
        print(f"xlvin: error: {os_error_line(err)}", file=sys.stderr)
    except MemoryError:
        print("xlvin: error: out of memory", file=sys.stderr)
    return 2


def _run(argv: list[str] | None) -> int:
    """Parse the command line and run the command (errors are `main`'s)."""
    words = sys.argv[1:] if argv is None else list(argv)
    if words == ["--version"]:  # at once: the parser below imports torch (seconds)
        print(f"xlvin {version('xlvin')}")
        return 0
    if wanted(words):
        pin()  # before the imports below load NumPy and torch
    parser = build_parser(words)
    parser.argv = words  # for the did-you-mean
    try:
        args = parser.parse_args(argv)
    except SystemExit as exit:  # --help, or a usage error already printed in one line
        return int(exit.code or 0)
    from xlvin.process import prepare_process

    prepare_process()
    with accept_unsealed(args.accept_unsealed):
        args.func(args)
    return 0


if __name__ == "__main__":
    sys.exit(main())
