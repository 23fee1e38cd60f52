"""Write docs/cli.md, the command-line reference, from the `xlvin` command's own argparse parser.

    python scripts/cli_reference.py            # rewrite docs/cli.md
    python scripts/cli_reference.py --check    # exit 1 if docs/cli.md is not what it would write

Every command and sub-command gets its `--help` text, in the order the parser lists them. The text
is wrapped at a fixed width (not the terminal's), so the output depends only on the parser and on
Python's argparse (generated under Python 3.11, what scripts/setup.sh installs; other versions lay
argparse's help out slightly differently). tests/test_docs.py checks that the committed file is
this script's output.
"""

import argparse
import os
import sys
from collections.abc import Iterator
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
OUT = ROOT / "docs" / "cli.md"
WIDTH = 100  # argparse wraps to $COLUMNS - 2; fixed here so the file does not depend on a terminal

HEADER = """\
# Command-line reference

Generated from the `xlvin` command's parser by `python scripts/cli_reference.py`; do not edit by
hand (`tests/test_docs.py` fails when this file and the parser disagree). Every command's
`--help` prints the same text. For what the commands are for, start at the
[README](../README.md).

"""


def _subcommands(parser: argparse.ArgumentParser) -> list[argparse.ArgumentParser]:
    """The parser's sub-command parsers, in the order they were added, each once (an alias
    names the same parser again)."""
    seen: dict[int, argparse.ArgumentParser] = {}
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for sub in action.choices.values():
                seen.setdefault(id(sub), sub)
    return list(seen.values())


def _walk(parser: argparse.ArgumentParser) -> Iterator[argparse.ArgumentParser]:
    yield parser
    for sub in _subcommands(parser):
        yield from _walk(sub)


def _help(parser: argparse.ArgumentParser) -> str:
    previous = os.environ.get("COLUMNS")
    os.environ["COLUMNS"] = str(WIDTH + 2)
    try:
        return parser.format_help().rstrip() + "\n"
    finally:
        if previous is None:
            del os.environ["COLUMNS"]
        else:
            os.environ["COLUMNS"] = previous


def render() -> str:
    """The text of docs/cli.md."""
    from xlvin.cli import build_parser

    parsers = list(_walk(build_parser()))
    lines = [HEADER]
    for p in parsers:
        depth = p.prog.count(" ")
        lines.append(f"{'  ' * max(depth - 1, 0)}- [`{p.prog}`](#{p.prog.replace(' ', '-')})\n")
    for p in parsers:
        level = "#" * min(2 + p.prog.count(" "), 4)
        lines.append(f"\n{level} `{p.prog}`\n\n```text\n{_help(p)}```\n")
    return "".join(lines)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description="Write docs/cli.md from the xlvin parser.")
    ap.add_argument("--check", action="store_true",
                    help="do not write; exit 1 if docs/cli.md differs from what would be written")
    args = ap.parse_args(argv)
    text = render()
    if args.check:
        current = OUT.read_text() if OUT.is_file() else ""
        if current != text:
            print(f"{OUT.relative_to(ROOT)} is out of date: run python scripts/cli_reference.py",
                  file=sys.stderr)
            return 1
        return 0
    OUT.parent.mkdir(exist_ok=True)
    OUT.write_text(text)
    print(f"wrote {OUT.relative_to(ROOT)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
