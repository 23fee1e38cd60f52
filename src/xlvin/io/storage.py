"""Run directories kept in a pyarrow filesystem (`xlvin sweep --storage URI`): an object store
(s3://, gs://, abfs://), HDFS, or a local path (file://), wherever the user has one.

The sweep's driver is the only process that writes there: it downloads the run directories the
storage holds before deciding which cells have finished, and uploads each run directory that comes
back from the cluster. pyarrow is imported only when a storage is named.
"""

from pathlib import Path, PurePosixPath

from xlvin.errors import UserError
from xlvin.io.archive import dir_files, is_run_file
from xlvin.io.files import atomic_write_bytes

INSTALL_HINT = "--storage needs pyarrow: pip install pyarrow"


class RunStorage:
    """A folder of run directories in the pyarrow filesystem at `uri`; paths relative to it."""

    def __init__(self, uri: str) -> None:
        try:
            import pyarrow.fs
        except ImportError:
            raise UserError(INSTALL_HINT) from None
        try:
            self.fs, base = pyarrow.fs.FileSystem.from_uri(uri)
        except (ValueError, OSError) as err:  # pyarrow's ArrowInvalid is a ValueError
            raise UserError(f"--storage {uri}: {' '.join(str(err).split())}") from None
        self.uri, self.base = uri, base.rstrip("/")
        self._pyarrow_fs = pyarrow.fs

    def _path(self, relative: str) -> str:
        return f"{self.base}/{PurePosixPath(relative)}"

    def files(self, relative: str) -> list[str]:
        """The files of the run directory `relative`, relative to it (none if it is missing)."""
        selector = self._pyarrow_fs.FileSelector(self._path(relative), recursive=True,
                                                 allow_not_found=True)
        prefix = self._path(relative) + "/"
        return sorted(info.path.removeprefix(prefix) for info in self.fs.get_file_info(selector)
                      if info.type == self._pyarrow_fs.FileType.File)

    def download(self, relative: str, local: Path) -> None:
        """Make the local run directory `local` hold exactly the files of the stored run
        directory `relative` (its lock stays); each file is written atomically. A stored lock or
        temporary file (never uploaded from here) is left where it is, never copied over the
        local lock."""
        names = [name for name in self.files(relative) if is_run_file(Path(name))]
        for stale in dir_files(local):
            if stale.as_posix() not in names:
                (Path(local) / stale).unlink()
        for name in names:
            target = Path(local) / name
            target.parent.mkdir(parents=True, exist_ok=True)
            atomic_write_bytes(target, self._read(f"{self._path(relative)}/{name}"))

    def upload(self, local: Path, relative: str) -> None:
        """Make the stored run directory `relative` hold exactly the files of the local run
        directory `local` (its lock and temporary files left out)."""
        keep = {p.as_posix() for p in dir_files(local)}
        for name in self.files(relative):
            if name not in keep:
                self.fs.delete_file(f"{self._path(relative)}/{name}")
        for name in sorted(keep):
            path = f"{self._path(relative)}/{name}"
            self.fs.create_dir(path.rpartition("/")[0], recursive=True)
            with self.fs.open_output_stream(path) as stream:
                stream.write((Path(local) / name).read_bytes())

    def _read(self, path: str) -> bytes:
        with self.fs.open_input_stream(path) as stream:
            return stream.read()
