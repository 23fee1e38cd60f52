"""A save owns only what it wrote, and takes an earlier save's place whole or not at all
(`xlvin.io.saves`): `Model.save`, `save_policy`, both callbacks' folders and `quickstart --out`."""

import errno
import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from xlvin import PPO, CheckpointCallback, EvalCallback
from xlvin.cli import main
from xlvin.errors import UserError
from xlvin.io import saves
from xlvin.io.run_dir import PARTIAL
from xlvin.io.saves import SAVED

TINY = dict(num_envs=2, num_steps=16, hidden=16, update_epochs=1, num_minibatches=1)


def files(folder: Path) -> dict[str, bytes]:
    return {str(p.relative_to(folder)): p.read_bytes() for p in sorted(folder.rglob("*"))
            if p.is_file()}


def hugging_face_folder(path: Path, weights: bool = True) -> Path:
    """A folder in the Hugging Face model layout (the names a save writes, not a save)."""
    path.mkdir(parents=True)
    (path / "config.json").write_text('{"model_type": "bert"}')
    if weights:
        (path / "model.safetensors").write_text("mine")
    return path


@pytest.mark.parametrize("weights", [True, False], ids=["config-and-weights", "config-only"])
def test_a_folder_of_the_same_names_that_no_save_wrote_is_refused_untouched(
    tmp_path: Path, weights: bool
) -> None:
    """A Hugging Face model folder, or a folder holding only the user's config.json, has the
    names a save writes; save, save_policy and both callbacks refuse it and leave it as it is."""
    theirs = hugging_face_folder(tmp_path / "bert", weights)
    before = files(theirs)
    model = PPO("CartPole-v1", seed=0, **TINY)
    for write in (model.save, model.save_policy):
        with pytest.raises(UserError, match="holds a run directory that no save wrote"):
            write(theirs)
    with pytest.raises(UserError, match="EvalCallback: .* already holds files"):
        EvalCallback(every=10, best_model_path=theirs)
    hugging_face_folder(tmp_path / "checkpoints" / "steps-64", weights)
    with pytest.raises(UserError, match="CheckpointCallback: .* already holds files"):
        CheckpointCallback(every=10, directory=tmp_path / "checkpoints")
    assert files(theirs) == before
    assert sorted(p.name for p in tmp_path.iterdir()) == ["bert", "checkpoints"]  # no leftovers


def test_a_save_replaces_only_an_unchanged_earlier_save(tmp_path: Path) -> None:
    """Its manifest lists every file with its digest: a save replaces one with files removed,
    not one with a file edited or added (a byte changed is enough)."""
    first, second = (PPO("CartPole-v1", seed=s, **TINY) for s in (0, 1))
    first.learn(32, progress=False)
    saved = first.save(tmp_path / "run")
    manifest = json.loads((saved / SAVED).read_text())["files"]
    assert set(manifest) == {k for k in files(saved) if k not in (SAVED, ".lock")}
    (saved / "metrics.jsonl").unlink()  # removed: still only what the save wrote
    second.save(saved)
    assert PPO.load(saved).num_timesteps == 0
    weights = saved / "model.safetensors"
    data = bytearray(weights.read_bytes())
    data[-1] ^= 1
    weights.write_bytes(bytes(data))
    before = files(saved)
    with pytest.raises(UserError, match="no save wrote \\(or changed since\\)"):
        first.save(saved)
    assert files(saved) == before
    data[-1] ^= 1
    weights.write_bytes(bytes(data))
    (saved / "tb").mkdir()
    with pytest.raises(UserError, match="no save wrote"):
        first.save(saved)
    (saved / "tb").rmdir()
    first.save(saved)
    assert PPO.load(saved).num_timesteps == 32


def test_a_save_that_fails_midway_leaves_the_earlier_one_whole(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A full disk while writing: the earlier save is kept byte for byte, the error is one
    short line, and nothing is left beside it."""
    model = PPO("CartPole-v1", seed=0, **TINY)
    model.learn(32, progress=False)
    saved = model.save(tmp_path / "save")
    before = files(saved)

    def full(*args, **kwargs):
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC), "somewhere")

    monkeypatch.setattr(saves.shutil, "copyfile", full)
    with pytest.raises(UserError) as err:
        model.save(saved)
    assert "No space left on device" in str(err.value) and "kept as it was" in str(err.value)
    assert len(str(err.value)) < 300 and "\n" not in str(err.value)
    assert files(saved) == before and sorted(p.name for p in tmp_path.iterdir()) == ["save"]


KILLED_SAVE = """
import sys, time, shutil
from xlvin import PPO
from xlvin.io import saves
copy = shutil.copyfile
def slow(*args, **kwargs):
    time.sleep(0.05)
    return copy(*args, **kwargs)
saves.shutil.copyfile = slow
model = PPO.load(sys.argv[1])
print("saving", flush=True)
model.save(sys.argv[2])
"""


def test_a_save_killed_at_any_instant_leaves_the_old_save_or_the_new_one_whole(
    tmp_path: Path,
) -> None:
    """kill -9 at several instants of a save over an earlier one: the folder loads, as the old
    save or the new one; the half-written copy beside it is never loadable, and the next save
    removes it."""
    old = PPO("CartPole-v1", seed=0, **TINY).save(tmp_path / "target")
    old_files = files(old)
    trained = PPO("CartPole-v1", seed=1, **TINY)
    trained.learn(64, out=tmp_path / "trained", progress=False)
    new_files = files(tmp_path / "trained")
    outcomes = set()
    for delay in (0.0, 0.15, 0.4, 5.0):
        proc = subprocess.Popen([sys.executable, "-c", KILLED_SAVE, str(tmp_path / "trained"),
                                 str(old)], stdout=subprocess.PIPE, text=True)
        assert proc.stdout.readline() == "saving\n"
        try:
            proc.wait(delay)
        except subprocess.TimeoutExpired:
            proc.send_signal(signal.SIGKILL)
            proc.wait()
        now = {k: v for k, v in files(old).items() if k not in (SAVED, ".lock")}
        if now == {k: v for k, v in old_files.items() if k not in (SAVED, ".lock")}:
            outcomes.add("old")
            assert PPO.load(old).num_timesteps == 0
        else:
            assert now == {k: v for k, v in new_files.items() if k != ".lock"}
            outcomes.add("new")
            assert PPO.load(old).num_timesteps == 64
        for leftover in tmp_path.glob(".target.xlvin-save-*"):
            if (leftover / PARTIAL).exists():
                with pytest.raises(UserError, match="cut short"):
                    PPO.load(leftover)
        PPO("CartPole-v1", seed=0, **TINY).save(old)  # back to the old save; leftovers gone
        assert not list(tmp_path.glob(".target.xlvin-save-*"))
        old_files = files(old)
    assert outcomes == {"old", "new"}


def test_quickstart_refuses_an_out_holding_a_results_md_it_did_not_write(
    tmp_path: Path, capsys: pytest.CaptureFixture
) -> None:
    out = tmp_path / "out"
    out.mkdir()
    (out / "results.md").write_text("my results")
    assert main(["quickstart", "--seeds", "1", "--out", str(out)]) == 2
    err = capsys.readouterr().err
    assert err.startswith("xlvin: error: --out") and err.count("\n") == 1
    assert files(out) == {"results.md": b"my results"}


def test_a_save_refuses_a_symbolic_link_and_writes_nothing_through_it(tmp_path: Path) -> None:
    target = tmp_path / "elsewhere"
    target.mkdir()
    (tmp_path / "link").symlink_to(target)
    with pytest.raises(UserError, match="symbolic link"):
        PPO("CartPole-v1", seed=0, **TINY).save(tmp_path / "link")
    assert list(target.iterdir()) == []
