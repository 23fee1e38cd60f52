"""Files read and written whole: every reader refuses an oversized or non-regular file before it
reads (a 2 GB file in under a second, at under 300 MB of RSS), a symbolic link inside a run
directory is refused, and every result is written by a rename, its temporaries cleaned up."""

import os
import resource
import time
from pathlib import Path

import pytest

from tests.tiny_runs import TINY, finished_cell, reproduce, unfinished_run
from xlvin.cli import main
from xlvin.errors import UserError
from xlvin.experiments import table1
from xlvin.io.files import atomic_write_bytes, read_checked, remove_temporaries

#: The cells here are written by hand (`finished_cell`), as runs from before seals were.
pytestmark = pytest.mark.usefixtures("accept_unsealed")

TWO_GB = 2 << 30


def sparse(path: Path, size: int = TWO_GB, keep: bool = False) -> None:
    """Make `path` `size` bytes long without writing them (appended to its content if `keep`)."""
    with open(path, "r+b" if keep else "wb") as f:
        f.truncate(size + (path.stat().st_size if keep else 0))


@pytest.mark.parametrize("append", [False, True], ids=["sparse", "appended to a valid log"])
def test_a_2gb_metrics_file_is_refused_on_resume_fast_and_small(
    tmp_path: Path, capsys, append: bool
) -> None:
    run = unfinished_run(tmp_path)
    sparse(run / "metrics.jsonl", keep=append)
    capsys.readouterr()
    before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    start = time.perf_counter()
    assert main(["train", *TINY, "--out", str(run), "--resume"]) == 2
    seconds = time.perf_counter() - start  # 0.3 s on an idle 2-core machine; the bound: load
    assert seconds < 10 and resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before < 300 * 1024
    err = capsys.readouterr().err.strip()
    assert err.startswith("xlvin: error: ") and "\n" not in err, err
    assert "metrics.jsonl" in err and "refused unread" in err
    assert not (run / "summary.json").exists()


def test_reading_a_2gb_file_takes_no_time_and_no_memory(tmp_path: Path) -> None:
    sparse(tmp_path / "eval.json")
    before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    start = time.process_time()  # CPU time: the refusal's own cost, whatever else the machine runs
    with pytest.raises(UserError, match="refused unread"):
        read_checked(tmp_path / "eval.json")
    assert time.process_time() - start < 1.0
    assert resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before < 300 * 1024


@pytest.mark.parametrize("name", ["summary.json", table1.EVAL_FILE])
def test_reproduce_refuses_a_2gb_result_file_in_one_line(tmp_path: Path, capsys, name: str) -> None:
    run_dir = finished_cell(tmp_path / "runs")
    sparse(run_dir / name)
    before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    start = time.process_time()
    assert reproduce(tmp_path / "runs", tmp_path / "results") == 2
    assert time.process_time() - start < 5
    assert resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before < 300 * 1024
    lines = capsys.readouterr().err.strip().splitlines()  # the legacy cell's notice aside
    err = [line for line in lines if not line.startswith("xlvin: note: ")]
    assert len(err) == 1 and err[0].startswith("xlvin: error: ") and name in err[0], lines


def test_metrics_linked_to_dev_zero_is_refused_on_resume(tmp_path: Path, capsys) -> None:
    run = unfinished_run(tmp_path)
    (run / "metrics.jsonl").unlink()
    (run / "metrics.jsonl").symlink_to("/dev/zero")
    assert main(["train", *TINY, "--out", str(run), "--resume"]) == 2
    err = capsys.readouterr().err.strip()
    assert "metrics.jsonl is a symbolic link" in err and "\n" not in err, err
    assert not (run / "summary.json").exists()


@pytest.mark.parametrize("kind", ["symlink", "fifo", "folder"])
def test_a_non_regular_result_file_in_a_cell_is_refused(tmp_path: Path, capsys, kind: str) -> None:
    run_dir = finished_cell(tmp_path / "runs")
    target = run_dir / table1.EVAL_FILE
    target.rename(tmp_path / "elsewhere.json")
    if kind == "symlink":
        target.symlink_to(tmp_path / "elsewhere.json")
    elif kind == "fifo":
        os.mkfifo(target)
    else:
        target.mkdir()
    assert reproduce(tmp_path / "runs", tmp_path / "results") == 2  # a FIFO never blocks
    err = capsys.readouterr().err.strip().splitlines()[-1]  # after the legacy notice, if any
    assert err.startswith("xlvin: error: ") and "not a regular file" in err, err


def test_a_config_linked_to_dev_zero_is_refused(tmp_path: Path, capsys) -> None:
    (tmp_path / "config.json").symlink_to("/dev/zero")
    assert main(["train", "--config", str(tmp_path / "config.json"), "--out", str(tmp_path / "r")]) == 2
    assert "a character device, not a regular file" in capsys.readouterr().err


def test_results_are_written_by_rename_and_stale_temporaries_removed(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A kill during a write leaves the previous file whole (the write goes to a temporary file
    first); the next run removes what a killed writer left, never a live writer's file."""
    finished_cell(tmp_path / "runs")
    results = tmp_path / "results"
    assert reproduce(tmp_path / "runs", results) == 0
    before = {p.name: p.read_bytes() for p in results.iterdir()}
    assert {"table1-paper.md", "table1-paper.json", "table1-paper.png"} <= set(before)
    stale = results / ".table1-ours.json.abc123.tmp"
    stale.write_text("{")

    class Killed(BaseException):
        pass

    def killed(fd: int, *args) -> None:
        raise Killed

    with monkeypatch.context() as patch:
        patch.setattr(os, "fsync", killed)
        with pytest.raises(Killed):
            reproduce(tmp_path / "runs", results)
    assert {p.name: p.read_bytes() for p in results.iterdir()} == before  # stale one removed


def test_a_figure_killed_while_it_is_drawn_leaves_the_previous_one_whole(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """matplotlib writes a PNG as it draws it: a kill in the middle left a partial (often empty)
    table1-*.png. Drawn into memory and renamed into place, the previous figure stays whole."""
    from matplotlib.figure import Figure

    finished_cell(tmp_path / "runs")
    results = tmp_path / "results"
    assert reproduce(tmp_path / "runs", results) == 0
    figure = results / "table1-paper.png"
    before = figure.read_bytes()
    draw = Figure.savefig

    class Killed(BaseException):
        pass

    def killed_halfway(fig: Figure, target, **kwargs) -> None:
        draw(fig, target, **kwargs)  # what was written before the kill stays where it went
        if isinstance(target, (str, os.PathLike)):
            os.truncate(target, os.path.getsize(target) // 2)
        raise Killed

    monkeypatch.setattr(Figure, "savefig", killed_halfway)
    with pytest.raises(Killed):
        reproduce(tmp_path / "runs", results)
    assert figure.read_bytes() == before


def test_a_live_writers_temporary_file_is_left_alone(tmp_path: Path) -> None:
    import fcntl

    live = tmp_path / ".table1.md.live.tmp"
    fd = os.open(live, os.O_WRONLY | os.O_CREAT)
    fcntl.flock(fd, fcntl.LOCK_EX)
    (tmp_path / ".table1.md.dead.tmp").write_text("half")
    remove_temporaries(tmp_path)
    assert [p.name for p in tmp_path.iterdir()] == [live.name]
    os.close(fd)
    atomic_write_bytes(tmp_path / "x.json", b"{}")
    remove_temporaries(tmp_path)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["x.json"]
