"""Run directories as archives (`xlvin.io.archive`) and the shared files of a sweep: what goes
through Ray's object store between the nodes of a cluster without a shared filesystem."""

import io
import tarfile
from pathlib import Path

import pytest

from xlvin.experiments import sweep
from xlvin.io.archive import archive_files, dir_files, pack_dir, unpack_dir


def tree(folder: Path) -> dict[str, bytes]:
    return {p.relative_to(folder).as_posix(): p.read_bytes()
            for p in sorted(folder.rglob("*")) if p.is_file()}


def test_unpack_makes_a_directory_hold_exactly_the_archive(tmp_path: Path) -> None:
    source = tmp_path / "source"
    (source / "tb").mkdir(parents=True)
    (source / "model.safetensors").write_bytes(bytes(range(256)) * 40)
    (source / "tb" / "events").write_bytes(b"\x00event")
    (source / ".lock").touch()
    (source / ".summary.json.abc.tmp").write_text("half a file")
    data = pack_dir(source)
    assert set(archive_files(data)) == {"model.safetensors", "tb/events"}

    target = tmp_path / "target"
    (target / "old").mkdir(parents=True)
    (target / "old" / "gone.txt").write_text("stale")
    (target / "model.safetensors").write_text("older weights")
    (target / ".lock").write_text("held")
    unpack_dir(data, target)
    assert tree(target) == {".lock": b"held", "model.safetensors": bytes(range(256)) * 40,
                            "tb/events": b"\x00event"}
    assert not (target / "old").exists()
    assert dir_files(target) == [Path("model.safetensors"), Path("tb/events")]


@pytest.mark.parametrize("name", ["../escape.txt", "/etc/escape.txt", "a/../../escape.txt",
                                  ".lock", "tb/.lock", ".model.safetensors.x1.tmp"])
def test_an_archive_leaving_its_root_is_refused_before_anything_is_written(
    name: str, tmp_path: Path
) -> None:
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w:gz") as tar:
        info = tarfile.TarInfo(name)
        info.size = 3
        tar.addfile(info, io.BytesIO(b"bad"))
    target = tmp_path / "deep" / "target"
    target.mkdir(parents=True)
    with pytest.raises(ValueError, match="refusing archive member"):
        unpack_dir(buffer.getvalue(), target)
    assert list(tmp_path.rglob("*escape*")) == [] and list(target.iterdir()) == []


def test_an_archive_too_large_once_unpacked_is_refused(tmp_path: Path, monkeypatch) -> None:
    from xlvin.io import archive

    monkeypatch.setattr(archive, "MAX_UNPACKED_BYTES", 1000)
    (tmp_path / "source").mkdir()
    (tmp_path / "source" / "big").write_bytes(bytes(2000))
    with pytest.raises(ValueError, match="more than 1000 bytes"):
        unpack_dir(pack_dir(tmp_path / "source"), tmp_path / "target")


def test_shared_files_reach_a_node_cache_and_existing_files_are_kept(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    driver, node = tmp_path / "driver-cache", tmp_path / "node-cache"
    (driver / "executors").mkdir(parents=True)
    (driver / "executors" / "executor-random.safetensors").write_bytes(b"weights")
    (driver / "transe.safetensors").write_bytes(b"transe")
    monkeypatch.setenv("XLVIN_CACHE", str(driver))
    files = sweep.shared_files([driver / "executors" / "executor-random.safetensors",
                                driver / "transe.safetensors"])
    assert files == {"executors/executor-random.safetensors": b"weights",
                     "transe.safetensors": b"transe"}
    with pytest.raises(ValueError, match="must be under xlvin's cache"):
        sweep.shared_files([tmp_path / "elsewhere.safetensors"])

    monkeypatch.setenv("XLVIN_CACHE", str(node))
    node.mkdir()
    (node / "transe.safetensors").write_bytes(b"same file, already here")
    sweep.install_shared_files(files)
    assert tree(node) == {"executors/executor-random.safetensors": b"weights",
                          "transe.safetensors": b"same file, already here"}


def test_a_stored_lock_is_never_copied_over_the_local_one(tmp_path: Path) -> None:
    """A --storage copy that holds a lock (or a temporary file): download leaves the local lock
    as it is, so a second process cannot claim a directory whose lock is held."""
    from xlvin.io.storage import RunStorage

    pytest.importorskip("pyarrow")
    stored = tmp_path / "store" / "run"
    stored.mkdir(parents=True)
    (stored / "summary.json").write_text("{}")
    (stored / ".lock").write_text("theirs")
    (stored / ".summary.json.x1.tmp").write_text("half")
    local = tmp_path / "local"
    local.mkdir()
    (local / ".lock").write_text("held")
    RunStorage(f"file://{tmp_path / 'store'}").download("run", local)
    assert tree(local) == {".lock": b"held", "summary.json": b"{}"}
