"""Maze data sets handed over with --dataset / --datasets: anything that is not a VIN npz of
the expected layout is one line and exit 2, before anything is built."""

import zipfile
from pathlib import Path

import numpy as np
import pytest

from xlvin.cli import main
from xlvin.envs import maze_data


def vin_npz(path: Path, rows=None, cols=None, images=None) -> Path:
    """A one-maze VIN npz: an 8x8 border, the goal at (1, 1), one start at (6, 6)."""
    walls = np.zeros((8, 8))
    walls[0, :] = walls[-1, :] = walls[:, 0] = walls[:, -1] = 1
    goal = np.zeros((8, 8))
    goal[1, 1] = 10
    img = np.stack([walls, goal])[None] if images is None else images
    r = np.array([[6]]) if rows is None else rows
    c = np.array([[6]]) if cols is None else cols
    label = np.array([[5]])
    np.savez(path, img, r, c, label, img, r, c, label)
    return path


def levels(dataset: Path, capsys) -> tuple[int, str]:
    code = main(["maze", "levels", "--datasets", str(dataset)])
    return code, capsys.readouterr().err.strip()


def test_a_good_npz_reads(tmp_path: Path, capsys) -> None:
    code, err = levels(vin_npz(tmp_path / "ok.npz"), capsys)
    assert code == 0, err


@pytest.mark.parametrize("case, message", [
    ("npy", "not a zip archive"),
    ("flat images", "images must be [N, 2, S, S]"),
    ("flat starts", "start rows must be [1, >= 1]"),
    ("start outside", "start rows must lie in [0, 8)"),
    ("negative column", "start columns must lie in [0, 8)"),
])
def test_a_malformed_data_set_is_one_line(case: str, message: str, tmp_path: Path, capsys) -> None:
    path = tmp_path / "bad.npz"
    if case == "npy":
        path = tmp_path / "bad.npy"
        np.save(path, np.zeros((3, 2, 8, 8)))
    elif case == "flat images":
        vin_npz(path, images=np.zeros(16))
    elif case == "flat starts":
        vin_npz(path, rows=np.array([6]))
    elif case == "start outside":
        vin_npz(path, rows=np.array([[100]]))
    else:
        vin_npz(path, cols=np.array([[-100]]))
    code, err = levels(path, capsys)
    assert code == 2 and message in err and len(err.splitlines()) == 1, err


def test_a_zip_bomb_is_refused_before_decompression(tmp_path: Path, capsys, monkeypatch) -> None:
    """The limit is checked on the archive's declared sizes: nothing is inflated."""
    monkeypatch.setattr(maze_data, "MAX_NPZ_BYTES", 1 << 20)
    path = tmp_path / "bomb.npz"
    with zipfile.ZipFile(path, "w", compression=zipfile.ZIP_DEFLATED) as archive:
        archive.writestr("arr_0.npy", b"\0" * (4 << 20))
    assert path.stat().st_size < 64 << 10
    code, err = levels(path, capsys)
    assert code == 2 and "more than the 1048576 a maze npz may hold" in err
