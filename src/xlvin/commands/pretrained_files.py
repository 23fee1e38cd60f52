"""What `xlvin pretrain-executor` and `xlvin pretrain-transe` share: a pre-trained file written to
--out (refused if it exists, without --force), or, with --verify, the shipped files re-created and
compared with their manifest."""

import argparse
from collections.abc import Callable
from pathlib import Path
from typing import Any

from xlvin.errors import UserError
from xlvin.io.run_dir import check_creatable
from xlvin.pretrain import shipped


def add_file_options(parser: argparse.ArgumentParser, kind: str, names: str = "") -> None:
    """--out, --force and --verify of the files of `kind` (`names`: what NAME may be)."""
    parser.add_argument("--out", metavar="FILE.safetensors",
                        help=f"where to write the {kind} file; required without --verify")
    parser.add_argument("--force", action="store_true", help="overwrite --out if it exists")
    parser.add_argument("--verify", nargs="*", metavar="NAME",
                        help=f"re-create the shipped {kind} files NAME ({names}none: all of "
                        "them) in reproducible mode and compare their tensors' SHA-256 with the "
                        "manifest's, printing the seconds each took")


def check_out(args: argparse.Namespace, kind: str) -> Path:
    """--out as a path that is not a folder and can be written (one that exists: with --force)."""
    out = Path(args.out)
    if out.exists() and not args.force:
        raise UserError(f"{out} exists; pass --force to overwrite it")
    if out.is_dir():
        raise UserError(f"--out {out} is a directory; name the {kind} file")
    check_creatable(out)
    return out


def verify_shipped(
    kind: str, names: list[str], remake: Callable[[dict[str, Any], Path], None]
) -> None:
    """Re-create the shipped files of `kind` that `names` name (none: all), one line each with
    the seconds it took; a UserError if any differs from its manifest."""
    rows = shipped.verify(shipped.entries(kind, names), remake)
    for entry, seconds, problem in rows:
        print(f"{entry['file']} ({entry['name']}): {problem or 'bit-identical tensors'}, "
              f"re-created in {seconds:.0f} s", flush=True)
    bad = [entry["file"] for entry, _, problem in rows if problem]
    if bad:
        raise UserError(f"{len(bad)} of {len(rows)} shipped {kind} files differ: {', '.join(bad)}")


def verified(
    args: argparse.Namespace, kind: str, remake: Callable[[dict[str, Any], Path], None],
    needs: dict[str, Any],
) -> bool:
    """With --verify, verify the shipped files of `kind` (`verify_shipped`) and say True; else
    check that every argument of `needs` (its name -> its value) is given and say False."""
    if args.verify is not None:
        verify_shipped(kind, args.verify, remake)
        return True
    if any(value is None for value in needs.values()):
        raise UserError(f"pretrain-{kind.lower()} needs {' and '.join(needs)} (or --verify)")
    return False
