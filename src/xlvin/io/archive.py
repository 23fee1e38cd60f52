"""A run directory as bytes: how `xlvin sweep` moves run directories between the nodes of a Ray
cluster that share no filesystem (they travel as task arguments and return values, through Ray's
object store).

`pack_dir` makes a gzipped tar of a directory's files (its lock and the temporary files of
interrupted writes left out); `unpack_dir` makes a directory hold exactly an archive's files,
writing each one atomically, so a reader of the directory never sees half a file.
"""

import io
import tarfile
from pathlib import Path, PurePosixPath

from xlvin.io.run_dir import LOCK
from xlvin.io.files import TEMPORARY_SUFFIX, atomic_write_bytes


def is_run_file(relative: Path) -> bool:
    """Whether a file belongs to a run directory's contents (archives, stored copies): not the
    lock, not a temporary file."""
    name = relative.name
    return name != LOCK and not (name.startswith(".") and name.endswith(TEMPORARY_SUFFIX))


def dir_files(path: Path) -> list[Path]:
    """The files under `path` that an archive of it holds, relative to it, sorted."""
    path = Path(path)
    if not path.is_dir():
        return []
    return sorted(p.relative_to(path) for p in path.rglob("*")
                  if p.is_file() and is_run_file(p.relative_to(path)))


def pack_dir(path: Path) -> bytes:
    """The files under `path` (see `dir_files`) as a gzipped tar. A process may be writing there
    meanwhile (a snapshot of a cell that trains): each file is read once, whole, as it is at that
    moment (xlvin replaces files atomically), and one removed meanwhile is left out. Files are
    read in sorted order, so a run directory's checkpoint.safetensors is read before its
    metrics.jsonl and tb/: the metrics are at least as recent as the checkpoint, as after a kill,
    which resume handles."""
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w:gz") as tar:
        for relative in dir_files(path):
            try:
                contents = (Path(path) / relative).read_bytes()
            except FileNotFoundError:
                continue
            info = tarfile.TarInfo(relative.as_posix())
            info.size = len(contents)
            tar.addfile(info, io.BytesIO(contents))
    return buffer.getvalue()


#: The most bytes an archive's files may hold once unpacked (a run directory with Atari
#: checkpoints: tens of MB); more is refused before any file is read.
MAX_UNPACKED_BYTES = 1 << 31


def archive_files(data: bytes) -> dict[str, bytes]:
    """An archive's regular files: relative POSIX path -> contents. A member that is not a plain
    file or directory, whose path leaves the archive's root, or that a packed directory never
    holds (a lock, which would replace the one a process holds, or a temporary file), and files
    over MAX_UNPACKED_BYTES in all, are a ValueError."""
    files = {}
    with tarfile.open(fileobj=io.BytesIO(data), mode="r:gz") as tar:
        members = tar.getmembers()
        for member in members:
            path = PurePosixPath(member.name)
            if (member.name.startswith("/") or ".." in path.parts
                    or not (member.isfile() or member.isdir())
                    or (member.isfile() and not is_run_file(Path(path)))):
                raise ValueError(f"refusing archive member {member.name!r}")
        if sum(m.size for m in members if m.isfile()) > MAX_UNPACKED_BYTES:
            raise ValueError(f"refusing an archive of more than {MAX_UNPACKED_BYTES} bytes")
        for member in members:
            if member.isfile():
                files[member.name] = tar.extractfile(member).read()
    return files


def unpack_dir(data: bytes, path: Path) -> None:
    """Make the directory `path` hold exactly the files of the archive `data` (its lock and
    anything `dir_files` leaves out stay): new and changed files are written atomically, files
    the archive lacks are removed, as are folders left empty."""
    path = Path(path)
    files = archive_files(data)
    for relative in dir_files(path):
        if relative.as_posix() not in files:
            (path / relative).unlink()
    for name, contents in files.items():
        target = path / name
        target.parent.mkdir(parents=True, exist_ok=True)
        atomic_write_bytes(target, contents)
    for folder in sorted((p for p in path.rglob("*") if p.is_dir()), reverse=True):
        if not any(folder.iterdir()):
            folder.rmdir()
