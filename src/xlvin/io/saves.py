"""Saves: the folders `Model.save`, `Model.save_policy` and the callbacks write, and which of them
a later save may replace.

    a saved policy   DIR/config.json and DIR/model.safetensors (its `num_timesteps` in the
                     header): `save_policy`, the callbacks' saves, `save` before `learn`
    a saved run      a copy of a run directory (`save` after `learn` or `load`), marked by
                     DIR/.saved, the names of the files the save wrote

A save replaces an earlier save only, as Stable-Baselines3's does, so that a script runs twice;
a folder holding anything a save did not write (a run directory `xlvin train` or `learn(out=)`
wrote, a saved run trained on since, any other file) is refused and left as it is.
"""

import contextlib
import json
import shutil
from pathlib import Path
from typing import Any

from torch import nn

from xlvin.errors import UserError
from xlvin.io.digests import read_sealed
from xlvin.io.files import write_json
from xlvin.io.run_dir import CONFIG, LOCK, MODEL, SUMMARY, check_creatable, reading_results
from xlvin.io.weights import read_metadata, save_weights

#: The mark of a saved run: JSON {"files": [the names the save wrote]}.
SAVED = ".saved"
#: File suffixes that a save refuses: it writes a folder, not one file.
FILE_SUFFIXES = (".zip", ".pkl", ".pt", ".pth", ".safetensors", ".tar", ".gz")


def is_saved_policy(path: Path) -> bool:
    """Whether `path` is a folder holding at most what `Model.save_policy` writes (its config,
    weights and lock): one that a later save may overwrite."""
    return path.is_dir() and {p.name for p in path.iterdir()} <= {CONFIG, MODEL, LOCK}


def _saved_files(path: Path) -> set[str] | None:
    """The names a saved run's mark lists, or None where `path` has no readable mark."""
    mark = path / SAVED
    if not mark.is_file() or mark.is_symlink():
        return None
    try:
        files = json.loads(mark.read_text())["files"]
    except (OSError, ValueError, KeyError, TypeError):
        return None
    return {f for f in files if isinstance(f, str)} if isinstance(files, list) else None


def is_save(path: Path) -> bool:
    """Whether `path` is an empty folder or an earlier save with nothing added since: a saved
    policy, or a saved run holding no file its mark does not list."""
    if is_saved_policy(path):
        return True
    files = _saved_files(path) if path.is_dir() else None
    return files is not None and {p.name for p in path.iterdir()} <= files | {LOCK, SAVED}


def refuse_file_name(path: Path, what: str) -> None:
    """Refuse a path `what` (a save) is given that names a file, such as model.zip."""
    if path.suffix.lower() in FILE_SUFFIXES and not path.is_dir():
        raise UserError(f"{what}: a model is saved as a run directory, not a {path.suffix} "
                        f"file; give a folder, e.g. {str(path.with_suffix(''))!r}")


def check_save_path(path: Path, what: str) -> None:
    """Refuse, in one line and changing nothing, a path `what` (a save) may not write: one
    holding anything but an earlier save; a new or empty folder, or an earlier save, it may."""
    if path.is_dir() and is_save(path):
        return
    if path.exists() and not path.is_dir():
        raise UserError(f"{what}: {path} is a file, kept as it is; give a folder")
    if path.exists():
        held = "a run directory" if (path / CONFIG).exists() else "files"
        raise UserError(f"{what}: {path} holds {held} that no save wrote, kept as it is; give a "
                        "new or empty folder, or one an earlier save wrote (it is overwritten)")
    check_creatable(path)


def clear_save(folder: Path) -> None:
    """Remove an earlier save's files from the claimed `folder`: its lock kept, and its mark,
    so that a save cut short is still one a later save replaces."""
    for entry in folder.iterdir():
        if entry.name in (LOCK, SAVED):
            continue
        if entry.is_dir() and not entry.is_symlink():
            shutil.rmtree(entry)
        else:
            entry.unlink()


def write_policy(folder: Path, config: dict[str, Any], policy: nn.Module,
                 metadata: dict[str, Any]) -> None:
    """Write a saved policy into the claimed `folder`: the run's config and the weights with
    their `metadata` (`num_timesteps` included); a saved run's mark there goes last."""
    write_json(folder / CONFIG, config)
    save_weights(folder / MODEL, policy, metadata)
    (folder / SAVED).unlink(missing_ok=True)


def write_run_copy(run_dir: Path, folder: Path) -> None:
    """Copy the run directory `run_dir` (its lock aside) into the claimed, cleared `folder`, its
    mark first."""
    names = sorted(p.name for p in run_dir.iterdir() if p.name not in (LOCK, SAVED))
    write_json(folder / SAVED, {"files": names})
    shutil.copytree(run_dir, folder, dirs_exist_ok=True,
                    ignore=shutil.ignore_patterns(LOCK, SAVED))


def forget_save(run_dir: Path) -> None:
    """A saved run about to train on in place (continued, resumed) becomes a run directory of
    its own: no later save replaces it. A folder it cannot write is left as it is: training
    refuses it in one line."""
    mark = run_dir / SAVED
    with contextlib.suppress(OSError):
        if mark.is_file() or mark.is_symlink():
            mark.unlink()


def read_progress(path: Path) -> tuple[dict[str, Any] | None, int, dict[str, Any] | None]:
    """(the executor's description, num_timesteps, the summary or None) of the finished run or
    save in `path`: the steps its summary counts, else those its weights' header records (a
    saved policy), else 0."""
    metadata = read_metadata(path / MODEL)
    steps = metadata.get("num_timesteps")
    steps = steps if type(steps) is int and steps >= 0 else 0
    summary = None
    if (path / SUMMARY).is_file():
        summary = read_sealed(path / SUMMARY, path)
        with reading_results(path / SUMMARY):
            steps = int(summary["ppo"]["env_steps"])
    return metadata.get("executor"), steps, summary
