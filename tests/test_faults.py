"""Fault injection: what two processes, a dead parent, a tampered file, a refused resume, a full
disk or a bad value can and cannot do. Each test name is one promise.

Bad input is one `xlvin: error: ...` line on stderr, exit status 2, and no file created or
changed (a byte snapshot of the folder before and after)."""

import errno
import json
import os
import shutil
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import gymnasium as gym
import numpy as np
import pytest
from safetensors.torch import load_file, save_file

from tests.tiny_runs import CELL, TINY, unfinished_run
from xlvin.cli import main
from xlvin.errors import UserError
from xlvin.experiments import ray_reaper, table1
from xlvin.io import run_dir as run_dir_module
from xlvin.io import weights as weights_module
from xlvin.io.checkpoint import CHECKPOINT
from xlvin.io.run_dir import claim_run_dir, read_metrics
from xlvin.envs.spaces import Spaces, env_spaces

SRC = str(Path(__file__).resolve().parents[1] / "src")


def snapshot(folder: Path) -> dict[str, bytes | None]:
    """Every file's bytes and every folder (None) under `folder`."""
    return {str(p.relative_to(folder)): None if p.is_dir() else p.read_bytes()
            for p in sorted(folder.rglob("*"))}


def one_error_line(capsys: pytest.CaptureFixture) -> str:
    err = capsys.readouterr().err.strip()
    assert err.startswith("xlvin: error: ") and len(err.splitlines()) == 1, err
    return err


#: First line of every script a test runs: Ctrl-C raises KeyboardInterrupt, as in a terminal.
#: A suite started in the background by a non-interactive shell inherits SIGINT ignored, and
#: its Ctrl-C tests would then test nothing.
DEFAULT_SIGINT = "import signal; signal.signal(signal.SIGINT, signal.default_int_handler)\n"


def python(script: str, *args: str, **kwargs) -> subprocess.Popen:
    """A Python process running `script` with this checkout's package."""
    env = {**os.environ, "PYTHONPATH": SRC}
    return subprocess.Popen([sys.executable, "-c", DEFAULT_SIGINT + script, *args], env=env,
                            **kwargs)


def header(path: Path) -> dict:
    from safetensors import safe_open

    with safe_open(str(path), framework="pt") as f:
        return json.loads(f.metadata()["xlvin"])


def rewrite_header(path: Path, metadata: str) -> None:
    """Replace the JSON header of a weights file, keeping its tensors, and seal it again (as
    anyone can: the digests are no signature; what a header says is checked field by field)."""
    tensors = load_file(str(path))
    save_file(tensors, str(path), metadata={weights_module.METADATA_KEY: metadata,
                                            weights_module.DIGEST_KEY: weights_module.digest(
                                                metadata, tensors)})


def is_gone(pid: int) -> bool:
    """No such process, or a zombie nobody reaped yet (it runs nothing)."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] == "Z"
    except FileNotFoundError:
        return True


@pytest.fixture(scope="module")
def finished_run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    run = tmp_path_factory.mktemp("finished") / "run"
    assert main(["train", *TINY, "--out", str(run)]) == 0
    return run


# ---------------------------------------------------------- 1. one process per run directory

RACE = textwrap.dedent("""
    import contextlib, io, json, sys, time
    from pathlib import Path
    from xlvin.cli import main
    root, me, other, tries = Path(sys.argv[1]), sys.argv[2], sys.argv[3], int(sys.argv[4])
    args = sys.argv[5:]
    results = []
    for i in range(tries):
        (root / f"ready-{i}-{me}").touch()
        while not (root / f"ready-{i}-{other}").exists():
            time.sleep(0.0005)
        if i % 2 == int(me) % 2:  # both orders: each process starts second every other try
            time.sleep(0.002)
        err = io.StringIO()
        with contextlib.redirect_stderr(err), contextlib.redirect_stdout(io.StringIO()):
            code = main(["train", *args, "--seed", me, "--out", str(root / f"run{i}")])
        results.append([code, err.getvalue()])
    print(json.dumps(results))
""")


def test_two_trains_started_together_on_one_out_never_share_it(tmp_path: Path) -> None:
    """Started behind a barrier, try after try: one trains, the other gets one line and exit 2,
    and the directory holds one run (config, weights and metrics of the same seed)."""
    tries = 6
    procs = [python(RACE, str(tmp_path), me, other, str(tries), *TINY, stdout=subprocess.PIPE,
                    text=True) for me, other in (("3", "4"), ("4", "3"))]
    results = [json.loads(p.communicate(timeout=300)[0].strip().splitlines()[-1]) for p in procs]
    for i in range(tries):
        (code_a, err_a), (code_b, err_b) = results[0][i], results[1][i]
        assert sorted([code_a, code_b]) == [0, 2], (i, err_a, err_b)
        loser = (err_a if code_a else err_b).strip()
        assert len(loser.splitlines()) == 1 and loser.startswith("xlvin: error: ")
        assert "in use by another xlvin process" in loser or "already holds" in loser
        run, winner = tmp_path / f"run{i}", 3 if code_a == 0 else 4
        assert json.loads((run / "config.json").read_text())["train"]["seed"] == winner
        assert header(run / "model.safetensors")["config"]["train"]["seed"] == winner
        steps = [row["step"] for row in read_metrics(run)]
        assert steps == sorted(set(steps)) and len(steps) == 4


def test_a_run_directory_in_use_is_refused_and_left_alone(tmp_path: Path, capsys) -> None:
    run = tmp_path / "run"
    holder = python("import sys, time\nfrom xlvin.io.run_dir import claim_run_dir\n"
                    "with claim_run_dir(sys.argv[1]):\n    print('held', flush=True)\n"
                    "    time.sleep(120)\n", str(run), stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout.readline().strip() == "held"
        before = snapshot(tmp_path)
        assert main(["train", *TINY, "--out", str(run)]) == 2
        assert "in use by another xlvin process" in one_error_line(capsys)
        cell = CELL
        cell.run_dir(tmp_path / "cells").mkdir(parents=True)
        claimed_cell = python("import sys, time\nfrom xlvin.io.run_dir import claim_run_dir\n"
                              "with claim_run_dir(sys.argv[1]):\n    print('held', flush=True)\n"
                              "    time.sleep(120)\n", str(cell.run_dir(tmp_path / "cells")),
                              stdout=subprocess.PIPE, text=True)
        try:
            assert claimed_cell.stdout.readline().strip() == "held"
            with pytest.raises(UserError, match="in use by another xlvin process"):
                table1.run_cell(cell, tmp_path / "cells")
        finally:
            claimed_cell.kill()
            claimed_cell.wait()
        assert {k: v for k, v in snapshot(tmp_path).items() if not k.startswith("cells")} == before
    finally:
        holder.kill()
        holder.wait()


def test_a_symlinked_lock_is_refused_and_nothing_is_made_or_locked_at_its_target(
    tmp_path: Path, capsys
) -> None:
    """DIR/.lock as a link to a missing path (O_CREAT would make a file there) or to a user's
    file (whose lock the run would take): one line, the target as it was, no run started."""
    mine = tmp_path / "mine.txt"
    mine.write_text("my notes")
    for i, target in enumerate([tmp_path / "outside" / "made-here", mine]):
        target.parent.mkdir(exist_ok=True)
        run = tmp_path / f"run{i}"
        run.mkdir()
        (run / ".lock").symlink_to(target)
        assert main(["train", *TINY, "--out", str(run)]) == 2
        assert f"{run / '.lock'} is a symbolic link, not a regular file" in one_error_line(capsys)
        assert sorted(p.name for p in run.iterdir()) == [".lock"]
    assert not (tmp_path / "outside" / "made-here").exists() and mine.read_text() == "my notes"


def test_a_fifo_lock_is_refused_not_waited_on(tmp_path: Path, capsys) -> None:
    """`xlvin train --resume` on a run whose DIR/.lock is a FIFO: one line at once (opening a
    FIFO for reading blocks until a writer comes, forever)."""
    run = unfinished_run(tmp_path)
    (run / ".lock").unlink()
    before = snapshot(run)
    os.mkfifo(run / ".lock")

    def stuck(*_) -> None:
        raise TimeoutError("blocked opening the FIFO")

    old = signal.signal(signal.SIGALRM, stuck)
    signal.alarm(30)
    try:
        assert main(["train", *TINY, "--out", str(run), "--resume"]) == 2
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, old)
    assert f"{run / '.lock'} is a FIFO, not a regular file" in one_error_line(capsys)
    (run / ".lock").unlink()
    assert snapshot(run) == before


def test_a_killed_runs_temporary_files_are_removed_on_the_next_start(tmp_path: Path) -> None:
    run = tmp_path / "run"
    run.mkdir()
    (run / ".checkpoint.safetensors.abc123.tmp").write_bytes(b"half a checkpoint")
    with claim_run_dir(run):
        assert not list(run.glob("*.tmp")) and not list(run.glob(".*.tmp"))


def test_written_files_respect_the_umask(tmp_path: Path) -> None:
    old = os.umask(0o022)
    try:
        weights_module.atomic_write_bytes(tmp_path / "a.json", b"{}")
        os.umask(0o077)
        weights_module.atomic_write_bytes(tmp_path / "b.json", b"{}")
    finally:
        os.umask(old)
    assert (tmp_path / "a.json").stat().st_mode & 0o777 == 0o644
    assert (tmp_path / "b.json").stat().st_mode & 0o777 == 0o600


# ---------------------------------------------------------- 2. workers end with their parent

POOL = textwrap.dedent("""
    import os, sys, time
    from pathlib import Path

    def work(item):
        Path(sys.argv[1], f"worker-{os.getpid()}").touch()
        time.sleep(120)

    if __name__ == "__main__":
        from xlvin.experiments.jobs import map_jobs
        map_jobs(work, [1, 2, 3], jobs=2)
""")


@pytest.mark.parametrize("how", ["SIGKILL to the parent", "Ctrl-C (SIGINT to the group)"])
def test_workers_of_a_killed_reproduce_do_not_survive_it(how: str, tmp_path: Path) -> None:
    """`xlvin reproduce`'s worker pool, its parent killed with SIGKILL or stopped with Ctrl-C
    while the workers run their items: the parent ends at once (it does not wait for the
    items) and within seconds no worker is left in the process table."""
    script = tmp_path / "pool.py"
    script.write_text(DEFAULT_SIGINT + POOL)
    parent = subprocess.Popen([sys.executable, str(script), str(tmp_path)],
                              env={**os.environ, "PYTHONPATH": SRC}, stderr=subprocess.DEVNULL,
                              start_new_session=True)
    deadline = time.monotonic() + 120
    while len(list(tmp_path.glob("worker-*"))) < 2 and time.monotonic() < deadline:
        time.sleep(0.1)
    workers = [int(p.name.split("-")[1]) for p in tmp_path.glob("worker-*")]
    assert len(workers) == 2
    if how.startswith("SIGKILL"):
        parent.send_signal(signal.SIGKILL)
    else:
        os.killpg(parent.pid, signal.SIGINT)
    parent.wait(timeout=10)
    deadline = time.monotonic() + 10
    while not all(map(is_gone, workers)) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert all(map(is_gone, workers))


SWEEP = textwrap.dedent("""
    import os, sys, time
    from pathlib import Path
    from xlvin.experiments import sweep
    from xlvin.experiments.protocol import Experiment

    def run_cell(cell, root):  # the cell is the test's folder (the root is a scratch folder)
        Path(cell, f"worker-{os.getpid()}").write_text(str(root))
        time.sleep(120)
        return {}

    if __name__ == "__main__":
        folder = Path(sys.argv[1])
        preset = Experiment(help="", cells=lambda n, a: [folder], run_cell=run_cell,
                            finished=lambda c, r: None, write_results=lambda *a: "",
                            runs=folder, run_dir=lambda c, r: Path(r) / "cell")
        sweep.run_sweep(preset, [folder], folder / "runs", workers=1)
""")


def children(pid: int) -> list[int]:
    """Processes whose parent is `pid`."""
    found = []
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            if int(stat.read_text().rsplit(")", 1)[1].split()[1]) == pid:
                found.append(int(stat.parent.name))
        except (OSError, IndexError, ValueError):
            continue
    return found


def command_line(pid: int) -> str:
    """The command line of process `pid` (its beginning), to name a survivor."""
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ")[:120].decode()
    except OSError:
        return "?"


def test_the_reaper_sees_a_process_that_closes_a_file_while_it_looks(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A Ray process shutting down closes files while the reaper reads its open files: the one
    that closed is skipped, the process is still found by the session file it keeps open."""
    session = tmp_path / "session"
    session.mkdir()
    with open(session / "raylet.out", "w") as log:
        holder = subprocess.Popen(["sleep", "60"], stdin=subprocess.PIPE, stdout=log)
    try:
        real_readlink = os.readlink
        closed_once: set[str] = set()

        def readlink(path):  # of each process, one descriptor (not the session's) has closed
            target, process = real_readlink(path), str(Path(path).parent)
            if process not in closed_once and not target.startswith(str(session)):
                closed_once.add(process)
                raise FileNotFoundError(errno.ENOENT, "closed", str(path))
            return target

        monkeypatch.setattr(ray_reaper.os, "readlink", readlink)
        assert ray_reaper.session_processes(str(session)) == [holder.pid]
    finally:
        holder.kill()
        holder.wait()


def test_a_killed_sweep_leaves_no_ray_process_and_no_worker(tmp_path: Path) -> None:
    """`xlvin sweep` on local Ray killed with SIGKILL while a task runs: its raylet, the task's
    worker and Ray's agents are all gone within seconds (none finishes the cell alone)."""
    pytest.importorskip("ray")
    script = tmp_path / "sweep.py"
    script.write_text(SWEEP)
    driver = subprocess.Popen([sys.executable, str(script), str(tmp_path)],
                              env={**os.environ, "PYTHONPATH": SRC}, stdout=subprocess.DEVNULL,
                              stderr=subprocess.DEVNULL, start_new_session=True)
    deadline = time.monotonic() + 180
    while not list(tmp_path.glob("worker-*")) and time.monotonic() < deadline:
        time.sleep(0.2)
    (worker,) = [int(p.name.split("-")[1]) for p in tmp_path.glob("worker-*")]
    raylet = int(Path(f"/proc/{worker}/stat").read_text().rsplit(")", 1)[1].split()[1])
    ray_processes = [raylet, *children(raylet), *children(driver.pid)]
    driver.send_signal(signal.SIGKILL)
    driver.wait()
    deadline = time.monotonic() + 20
    while not all(map(is_gone, ray_processes)) and time.monotonic() < deadline:
        time.sleep(0.2)
    assert {pid: command_line(pid) for pid in ray_processes if not is_gone(pid)} == {}
    # the killed task's scratch folder, unless Ray's cleanup removed it first (under load it may)
    shutil.rmtree((tmp_path / f"worker-{worker}").read_text(), ignore_errors=True)


# ---------------------------------------------------------- 3. a tampered run directory is inert

def tampered_copy(run: Path, dest: Path, change) -> Path:
    """A copy of the finished run `run` whose model header's config went through `change`, its
    config.json too where that is an object (else config.json and the header would disagree,
    which is refused before the header's fields are read)."""
    dest.mkdir()
    for name in ("config.json", "model.safetensors"):
        (dest / name).write_bytes((run / name).read_bytes())
    changed = change(header(dest / "model.safetensors"))
    rewrite_header(dest / "model.safetensors", changed)
    try:
        config = json.loads(changed).get("config")
    except (ValueError, RecursionError, AttributeError):
        config = None
    if isinstance(config, dict):
        (dest / "config.json").write_text(json.dumps(config))
    return dest


def _with(section: str, **values):
    def change(meta: dict) -> str:
        meta["config"][section].update(values)
        return json.dumps(meta)
    return change


TAMPERED = {
    "env id naming a module": (_with("train", env="xlvin_planted:Env"),
                               "not in gymnasium's registry"),
    "huge depth": (_with("train", agent="xlvin", depth=100000), "--depth 100000 with 2 actions"),
    "huge width": (_with("train", hidden=10**7), "need about"),
    "bogus protocol": (_with("train", protocol="bogus"), "must be one of online, low_data"),
    "seed out of range": (_with("train", seed=-1), "--seed must be in"),
    "missing config": (lambda m: json.dumps({"executor": None}),
                       "the config must be a JSON object"),
    "null section": (lambda m: json.dumps({**m, "config": {**m["config"], "ppo": None}}),
                     "section must be an object"),
    "list section": (lambda m: json.dumps({**m, "config": {**m["config"], "train": []}}),
                     "section must be an object"),
    "null executor of an xlvin run": (
        lambda m: json.dumps({"config": {**m["config"], "train": {**m["config"]["train"],
                                                                  "agent": "xlvin"}},
                              "executor": None}), "corrupt executor description"),
    "deeply nested JSON": (lambda m: "[" * 100_000 + "]" * 100_000, "corrupt weights file"),
    "huge integer": (lambda m: '{"config": ' + "9" * 5000 + "}", "corrupt weights file"),
    "infinite float": (_with("ppo", lr=float("inf")), "must be a finite number"),
}


@pytest.mark.parametrize("case", TAMPERED)
def test_evaluate_refuses_a_tampered_header_in_one_line(
    case: str, finished_run: Path, tmp_path: Path, monkeypatch, capsys
) -> None:
    """Nothing a header says is imported, allocated or trusted: one line, nothing written."""
    planted = tmp_path / "planted"
    planted.mkdir()
    (planted / "xlvin_planted.py").write_text(
        f"open({str(tmp_path / 'IMPORTED')!r}, 'w').close()\nclass Env: pass\n")
    monkeypatch.syspath_prepend(str(planted))
    change, message = TAMPERED[case]
    run = tampered_copy(finished_run, tmp_path / "run", change)
    before = snapshot(tmp_path)
    assert main(["evaluate", str(run), "--episodes", "1"]) == 2
    assert message in one_error_line(capsys)
    assert snapshot(tmp_path) == before
    assert "xlvin_planted" not in sys.modules


def test_a_config_file_naming_a_module_is_refused_not_imported(tmp_path: Path, capsys) -> None:
    config = tmp_path / "config.json"
    config.write_text('{"train": {"env": "this_module_does_not_exist:Env"}}')
    before = snapshot(tmp_path)
    assert main(["train", "--config", str(config), "--out", str(tmp_path / "run")]) == 2
    assert "not in gymnasium's registry" in one_error_line(capsys)
    assert snapshot(tmp_path) == before


# ---------------------------------------------------------- 4. a refused resume changes nothing

def unfinished_copy(run: Path, dest: Path, checkpoint_from: Path) -> Path:
    """`run` as if killed before its end (no summary, no model), with the checkpoint of
    `checkpoint_from`."""
    dest.mkdir()
    for p in run.rglob("*"):
        target = dest / p.relative_to(run)
        if p.is_dir():
            target.mkdir(exist_ok=True)
        elif p.name not in ("summary.json", "model.safetensors", CHECKPOINT):
            target.write_bytes(p.read_bytes())
    (dest / CHECKPOINT).write_bytes((checkpoint_from / CHECKPOINT).read_bytes())
    return dest


@pytest.mark.parametrize("other, message", [
    (["--seed", "1"], "was saved by another run"),
    (["--hidden", "8"], ("does not fit this run: Error(s) in loading state_dict for PPOAgent: "
                         "size mismatch")),
])
def test_a_refused_resume_leaves_every_byte_as_it_was(
    other: list[str], message: str, finished_run: Path, tmp_path: Path, capsys
) -> None:
    """With another run's checkpoint in the directory (one that names its run, or an older one
    that does not), --resume is refused before the metrics are rewound or a TensorBoard file is
    added."""
    assert main(["train", *TINY, *other, "--out", str(tmp_path / "other")]) == 0
    if "--hidden" in other:  # a checkpoint written before checkpoints named their run
        meta = header(tmp_path / "other" / CHECKPOINT)
        del meta["run"]
        rewrite_header(tmp_path / "other" / CHECKPOINT, json.dumps(meta))
    run = unfinished_copy(finished_run, tmp_path / "run", tmp_path / "other")
    assert len(read_metrics(run)) == 4
    before = snapshot(tmp_path)
    capsys.readouterr()
    assert main(["train", *TINY, "--out", str(run), "--resume"]) == 2
    assert message in one_error_line(capsys)
    assert snapshot(tmp_path) == before


# ---------------------------------------------------------- 6. disk full, read-only, unwritable

def mount_tmpfs(where: Path, options: str) -> None:
    """Mount a small tmpfs at `where`, or skip the test (needs root and mount permission)."""
    where.mkdir()
    if os.geteuid() != 0:
        pytest.skip("mounting a tmpfs needs root")
    done = subprocess.run(["mount", "-t", "tmpfs", "-o", options, "tmpfs", str(where)],
                          capture_output=True, text=True, check=False)
    if done.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here: {done.stderr.strip()}")


def mounted_tmpfs(where: Path, options: str):
    """A tmpfs mounted at `where` for the test, unmounted after it."""
    mount_tmpfs(where, options)
    yield where
    subprocess.run(["umount", "-l", str(where)], check=True)


@pytest.fixture
def small_disk(tmp_path: Path):
    yield from mounted_tmpfs(tmp_path / "disk", "size=2m")


def test_a_full_disk_is_one_line_and_keeps_the_previous_checkpoint(
    small_disk: Path, monkeypatch, capsys
) -> None:
    """The disk fills up after the second update: the next checkpoint cannot be written; the
    command says so in one line, the previous checkpoint is intact and no temporary file is
    left."""
    run, calls, kept = small_disk / "run", {"n": 0}, {}
    original = run_dir_module.MetricsLogger.__call__

    def fill_the_disk_after_two_updates(self, step, metrics):
        original(self, step, metrics)
        calls["n"] += 1
        if calls["n"] == 2:
            kept["checkpoint"] = (run / CHECKPOINT).read_bytes()
            with open(small_disk / "ballast", "wb", buffering=0) as f:
                try:
                    while True:
                        f.write(b"\0" * 4096)
                except OSError as err:
                    assert err.errno == errno.ENOSPC

    monkeypatch.setattr(run_dir_module.MetricsLogger, "__call__", fill_the_disk_after_two_updates)
    assert main(["train", *TINY, "--out", str(run)]) == 2
    assert f"{run / CHECKPOINT}: No space left on device" in one_error_line(capsys)
    assert (run / CHECKPOINT).read_bytes() == kept["checkpoint"]
    assert not list(run.glob(".*.tmp"))


@pytest.fixture
def read_only_disk(tmp_path: Path):
    yield from mounted_tmpfs(tmp_path / "ro", "size=1m,ro")


def test_a_read_only_file_system_is_one_line(
    read_only_disk: Path, finished_run: Path, capsys
) -> None:
    assert main(["train", *TINY, "--out", str(read_only_disk / "run")]) == 2
    assert "cannot write in" in one_error_line(capsys)
    # an unfinished run on a file system remounted read-only: --resume cannot claim it
    subprocess.run(["mount", "-o", "remount,rw", str(read_only_disk)], check=True)
    run = unfinished_copy(finished_run, read_only_disk / "run", finished_run)
    subprocess.run(["mount", "-o", "remount,ro", str(read_only_disk)], check=True)
    before = snapshot(read_only_disk)
    assert main(["train", *TINY, "--out", str(run), "--resume"]) == 2
    assert "cannot write in it" in one_error_line(capsys)
    assert snapshot(read_only_disk) == before


# ---------------------------------------------------------- 6, 7. every bad input: one line

EVAL = ["eval-executor", "{executor}", "--graphs", "erdos_renyi"]
BAD_INPUT = {
    "negative seed": (["train", *TINY, "--seed", "-1"], "--seed must be in [0, 4294967295]"),
    "seed 2**70": (["train", *TINY, "--seed", str(2**70)], "--seed must be in"),
    "out under a file": (["train", *TINY, "--out", "{tmp}/a-file/run"], "is not a directory"),
    "out in /proc": (["train", *TINY, "--out", "/proc/xlvin-test-run"], "xlvin-test-run"),
    "depth 3000": (["train", *TINY, "--agent", "xlvin", "--depth", "3000"], "builds more than"),
    "depth 1000000": (["train", *TINY, "--agent", "xlvin", "--depth", "1000000"],
                      "builds more than"),
    "transe lr nan": (["train", *TINY, "--transe-lr", "nan"], "--transe-lr must be a finite"),
    "transe holdout nan": (["train", *TINY, "--transe-holdout", "nan"], "--transe-holdout must"),
    "transe batch size 0": (["train", *TINY, "--transe-batch-size", "0"],
                            "batch_size must be >= 1"),
    "transe episodes 0": (["train", *TINY, "--transe-episodes", "0"], "episodes must be >= 1"),
    "transe max transitions 0": (["train", *TINY, "--transe-max-transitions", "0"],
                                 "max_transitions must be >= 1"),
    "100000 envs": (["train", *TINY, "--num-envs", "100000"], "num_envs must be in [1, 1024]"),
    "lr inf": (["train", *TINY, "--lr", "inf"], "--lr must be a finite number"),
    "transe weight nan": (["train", *TINY, "--transe-weight", "nan"], "--transe-weight must be"),
    "null config section": (["train", *TINY, "--config", "{tmp}/null.json"], "must be an object"),
    "list config section": (["train", *TINY, "--config", "{tmp}/list.json"], "must be an object"),
    "bogus protocol": (["train", *TINY, "--config", "{tmp}/bogus.json"],
                       "must be one of online, low_data, curriculum, got 'bogus'"),
    "deeply nested config": (["train", *TINY, "--config", "{tmp}/deep.json"], "corrupt JSON"),
    "eval-executor seed -1": ([*EVAL, "--seed", "-1"], "--seed must be in"),
    "eval-executor threads 0": ([*EVAL, "--threads", "0"], "--threads must be >= 1"),
    "eval-executor huge MDPs": ([*EVAL, "--states", "100000", "--actions", "100000"],
                                "MDPs of 100000 states and 100000 actions need"),
    "eval-executor 0 states": ([*EVAL, "--states", "0", "--actions", "0"],
                               "--states and --actions must be >= 1"),
    "eval-executor tol 0": ([*EVAL, "--tol", "0"], "--tol must be"),
    "pretrain-executor out under a file": (
        ["pretrain-executor", "--graphs", "erdos_renyi", "--out", "{tmp}/a-file/x.safetensors"],
        "is not a directory"),
    "pretrain-transe out exists": (["pretrain-transe", "CartPole-v0", "--out", "{tmp}/a-file"],
                                   "a-file exists; pass --force to overwrite it"),
    "pretrain-transe out is a folder": (
        ["pretrain-transe", "CartPole-v0", "--out", "{tmp}", "--force"],
        "is a directory; name the TransE file"),
    "evaluate seed -1": (["evaluate", "{run}", "--seed", "-1"], "--seed must be in"),
    "sweep address that does not answer": (
        ["sweep", "table1", "--seeds", "1", "--envs", "CartPole-v0", "--agents", "ppo",
         "--address", "127.0.0.1:1", "--timeout", "5", "--runs", "{tmp}/runs"], "does not answer"),
}


@pytest.mark.parametrize("case", BAD_INPUT)
def test_bad_input_is_one_line_exit_2_and_writes_nothing(
    case: str, tmp_path: Path, executor_path: Path, finished_run: Path, monkeypatch, capsys
) -> None:
    if case.startswith("sweep"):
        pytest.importorskip("ray")
    monkeypatch.chdir(tmp_path)
    (tmp_path / "a-file").write_text("")
    (tmp_path / "null.json").write_text('{"ppo": null}')
    (tmp_path / "list.json").write_text('{"train": [1, 2]}')
    (tmp_path / "bogus.json").write_text('{"train": {"protocol": "bogus"}}')
    (tmp_path / "deep.json").write_text("[" * 100_000 + "]" * 100_000)
    args, message = BAD_INPUT[case]
    args = [a.format(tmp=tmp_path, executor=executor_path, run=finished_run) for a in args]
    if "--out" not in args and args[0] == "train":
        args += ["--out", str(tmp_path / "run")]
    before = snapshot(tmp_path), snapshot(finished_run)
    assert main(args) == 2
    assert message in one_error_line(capsys)
    assert (snapshot(tmp_path), snapshot(finished_run)) == before


class GrayImages(gym.Env):
    """84 x 84 grayscale frames without a channel axis."""

    observation_space = gym.spaces.Box(0, 255, (84, 84), np.uint8)
    action_space = gym.spaces.Discrete(2)


def test_images_are_never_fed_to_the_mlp_encoder() -> None:
    gym.register("xlvin-test/GrayImages-v0", entry_point=GrayImages)
    try:
        with pytest.raises(UserError, match=r"observations of shape \(84, 84\); supported: Discrete"):
            env_spaces("xlvin-test/GrayImages-v0")
    finally:
        del gym.registry["xlvin-test/GrayImages-v0"]


def test_ale_ids_are_found_when_ale_is_installed(tmp_path: Path, capfd) -> None:
    """ALE/<Game>-v5 is made, no ALE banner: its raw frames are channels last, read channels
    first by the Nature CNN."""
    pytest.importorskip("ale_py")
    assert env_spaces("ALE/Pong-v5") == Spaces((210, 160, 3), "image_hwc", 6)
    assert capfd.readouterr().err == ""
    assert env_spaces("xlvin/Pong-v5") == Spaces((4, 84, 84), "image", 6)


def test_a_closed_stdout_ends_the_command_quietly(executor_path: Path) -> None:
    """`xlvin ... | head`: the reader went away; no traceback, no line, exit 141."""
    process = python("import sys\nfrom xlvin.cli import main\nsys.exit(main())", "eval-executor",
                     str(executor_path), "--graphs", "erdos_renyi", "--states", "5", "--actions",
                     "2", "--count", "1", "--json", stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    process.stdout.close()
    assert process.wait(timeout=120) == 141
    assert process.stderr.read() == b""


def test_ctrl_c_while_starting_is_one_line() -> None:
    """SIGINT during the heavy imports (torch) is `xlvin: interrupted`, not a traceback."""
    process = python("import sys\nfrom xlvin.cli import main\nsys.exit(main())", "--help",
                     stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    maps, deadline = Path(f"/proc/{process.pid}/maps"), time.monotonic() + 60
    while "libtorch" not in maps.read_text() and time.monotonic() < deadline:
        time.sleep(0.01)  # until main() is importing torch
    process.send_signal(signal.SIGINT)
    assert process.wait(timeout=120) == 130
    assert process.stderr.read().decode().strip() == "xlvin: interrupted"


def test_cartpole_v0_trains_without_a_warning(tmp_path: Path) -> None:
    process = python("import sys\nfrom xlvin.cli import main\nsys.exit(main())", "train",
                     *TINY, "--env", "CartPole-v0", "--out", str(tmp_path / "run"),
                     stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    assert process.wait(timeout=120) == 0
    assert process.stderr.read() == b""
