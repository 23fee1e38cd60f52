"""`xlvin sweep`: a tiny Table 1 sweep on local Ray with two workers (aggregate, skip of finished
runs, retry of a failed run) and the one-line error without Ray."""

import dataclasses
import json
import os
import socket
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest

from xlvin.cli import main
from xlvin.experiments import ray_session, registry, sweep, table1, table1_report
from xlvin.experiments.protocol import Experiment

SRC = str(Path(__file__).resolve().parents[1] / "src")
INSTALL_ERROR = "xlvin: error: `xlvin sweep` needs Ray: pip install 'xlvin[ray]'"


@dataclasses.dataclass(frozen=True)
class TinyCell(table1.Cell):
    """A Table 1 cell with 2 PPO updates and one 2-episode progress evaluation (seconds, not
    a minute); the final evaluation is Table 1's own."""

    def config(self):
        cfg = super().config()
        cfg.low_data = dataclasses.replace(cfg.low_data, updates=2, eval_points=1, eval_episodes=2)
        return cfg


def flaky(markers: Path):
    """A run_cell whose first attempt of seed 1 fails (a marker file in `markers` remembers the
    attempt across workers: each attempt runs in a scratch root of its own)."""

    def run_cell(cell: table1.Cell, root: Path) -> dict:
        marker = markers / f"attempted-seed{cell.seed}"
        if cell.seed == 1 and not marker.exists():
            marker.touch()
            raise RuntimeError("first attempt of seed 1 fails on purpose\nsecond line")
        return table1.run_cell(cell, root)

    return run_cell


def broken_run_cell(cell: table1.Cell, root: Path) -> dict:
    raise ValueError(f"seed {cell.seed} always fails")


def tiny_preset(name: str, run_cell) -> Experiment:
    """Table 1's preset (finished check, aggregation, results files) on tiny CartPole PPO cells."""
    return dataclasses.replace(
        registry.CLASSIC,
        sweep_name=name,
        sweep_help="tiny test sweep",
        cells=lambda seeds, args: [TinyCell("ours", "CartPole-v0", "ppo", s) for s in range(seeds)],
        run_cell=run_cell,
        add_options=lambda parser: None,
    )


@pytest.fixture(scope="module")
def local_ray():
    """One local Ray session (two CPUs) for the module: `xlvin sweep` reuses a running one."""
    ray = pytest.importorskip("ray")
    # Ray workers cannot import this test module: send its cells and run functions by value
    ray.cloudpickle.register_pickle_by_value(sys.modules[__name__])
    assert ray_session.init_ray(None, 2)
    assert ray.cluster_resources()["CPU"] == 2
    yield ray
    ray.shutdown()


def sweep_cli(preset: str, tmp_path: Path, seeds: int) -> int:
    return main(["sweep", preset, "--seeds", str(seeds), "--runs", str(tmp_path / "runs"),
                 "--results", str(tmp_path / "results")])


def mtimes(folder: Path) -> dict[str, int]:
    return {str(p.relative_to(folder)): p.stat().st_mtime_ns for p in folder.rglob("*") if p.is_file()}


@pytest.mark.slow
def test_tiny_sweep_on_local_ray_with_two_workers(
    local_ray, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture
) -> None:
    monkeypatch.setitem(registry.EXPERIMENTS, "tiny", tiny_preset("tiny", flaky(tmp_path)))
    monkeypatch.setitem(registry.EXPERIMENTS, "broken", tiny_preset("broken", broken_run_cell))
    runs, results = tmp_path / "runs", tmp_path / "results"

    # first sweep: both seeds trained; seed 1 fails once and is retried
    assert sweep_cli("tiny", tmp_path, seeds=2) == 0
    out = capsys.readouterr().out
    assert "2 runs: 0 finished earlier (skipped), 2 to run" in out
    assert ("FAILED ours CartPole-v0 ppo seed1 (attempt 1/2): RuntimeError: first attempt of "
            "seed 1 fails on purpose; retrying") in out
    assert "2 trained, 0 skipped (finished earlier), 0 failed; 1 failed attempt(s)" in out
    assert (tmp_path / "attempted-seed1").is_file()

    # the aggregate is over the per-seed final evaluations on disk (IQM of 2 runs = their mean)
    finals = [json.loads((TinyCell("ours", "CartPole-v0", "ppo", s).run_dir(runs)
                          / table1.EVAL_FILE).read_text())["mean"] for s in (0, 1)]
    data = json.loads((results / "table1-ours.json").read_text())
    (row,) = data["rows"]
    assert (row["env"], row["agent"], row["strict"], row["seeds"]) == ("CartPole-v0", "ppo", False, [0, 1])
    assert row["final"]["mean"] == pytest.approx(np.mean(finals))
    assert row["final"]["iqm"] == pytest.approx(np.mean(finals))
    assert row["final"]["std"] == pytest.approx(np.std(finals))
    assert [r["final_return"] for r in sorted(data["runs"], key=lambda r: r["seed"])] == finals
    assert row["episodes_mean"] == 10 and all(r["progress"][0]["updates"] == 2 for r in data["runs"])
    md = (results / "table1-ours.md").read_text()
    assert md == table1_report.markdown(table1_report.aggregate(data["runs"]),
                                       data["wall_seconds"])
    assert f"**{np.mean(finals):.1f} [" in md and md in out
    assert (results / "table1-ours.png").stat().st_size > 0

    # second sweep: nothing is retrained, the same table comes out
    before = mtimes(runs)
    assert sweep_cli("tiny", tmp_path, seeds=2) == 0
    out = capsys.readouterr().out
    assert "2 runs: 2 finished earlier (skipped), 0 to run" in out and "FAILED" not in out
    assert mtimes(runs) == before
    assert json.loads((results / "table1-ours.json").read_text())["rows"] == data["rows"]

    # a run that fails twice: both attempts reported, one error line, exit 2, no results
    assert sweep_cli("broken", tmp_path / "broken", seeds=1) == 2
    captured = capsys.readouterr()
    assert captured.err == "xlvin: error: 1 of 1 runs failed twice: ours CartPole-v0 ppo seed0\n"
    for attempt in (1, 2):
        assert (f"attempt {attempt} of ours CartPole-v0 ppo seed0: ValueError: seed 0 always "
                "fails") in captured.out
    assert not (tmp_path / "broken" / "results").exists()


def test_without_ray_the_command_says_how_to_install_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture
) -> None:
    monkeypatch.setitem(sys.modules, "ray", None)  # `import ray` raises ImportError
    assert sweep_cli("table1", tmp_path, seeds=1) == 2
    captured = capsys.readouterr()
    assert captured.err == INSTALL_ERROR + "\n"
    assert not (tmp_path / "runs").exists() and not (tmp_path / "results").exists()


@pytest.mark.parametrize(
    "args, message",
    [
        (["--seeds", "0"], "--seeds must be >= 1"),
        (["--workers", "2", "--address", "auto"], "--workers must be >= 1, and is for local Ray"),
        (["--agents", "dqn"], "unknown agent 'dqn'"),
    ],
)
def test_bad_options_are_one_line_errors(
    args: list[str], message: str, tmp_path: Path, capsys: pytest.CaptureFixture
) -> None:
    assert main(["sweep", "table1", *args, "--runs", str(tmp_path / "runs")]) == 2
    err = capsys.readouterr().err
    assert err.startswith("xlvin: error: ") and message in err and err.count("\n") == 1
    assert not (tmp_path / "runs").exists()


def test_every_preset_has_a_help_page(capsys: pytest.CaptureFixture) -> None:
    for name in registry.on_ray():
        assert main(["sweep", name, "--help"]) == 0
        text = capsys.readouterr().out
        for flag in ("--seeds", "--address", "--workers", "--runs", "--results"):
            assert flag in text


@dataclasses.dataclass(frozen=True)
class NoteCell:
    """A cell whose run directory is ROOT/cellN."""

    n: int

    def run_dir(self, root: Path) -> Path:
        return Path(root) / f"cell{self.n}"


def note_run_cell(cell: NoteCell, root: Path) -> dict:
    """Reads what its run directory holds, drops stale.txt, writes out.txt: no training."""
    run_dir = cell.run_dir(root)
    run_dir.mkdir(parents=True, exist_ok=True)
    record = {"n": cell.n, "root": str(root),
              "found": sorted(p.name for p in run_dir.iterdir() if p.name != ".lock")}
    (run_dir / "stale.txt").unlink(missing_ok=True)
    (run_dir / "sub").mkdir(exist_ok=True)
    (run_dir / "sub" / "out.txt").write_text(f"cell {cell.n}")
    return record


def test_a_cell_gets_what_the_driver_holds_and_its_run_directory_comes_back(
    local_ray, tmp_path: Path
) -> None:
    """The worker runs the cell in a scratch root of its own, starting from the driver's copy of
    its run directory; afterwards the driver's copy is exactly the worker's (a file the worker
    removed is gone, a new one is there, the lock stays)."""
    preset = Experiment(
        help="", cells=lambda n, a: [], run_cell=note_run_cell, finished=lambda c, r: None,
        write_results=lambda *a: "", runs=tmp_path,
    )
    runs = tmp_path / "runs"
    (runs / "cell0").mkdir(parents=True)
    (runs / "cell0" / "note.txt").write_text("resume me")
    (runs / "cell0" / "stale.txt").write_text("old")
    result = sweep.run_sweep(preset, [NoteCell(0), NoteCell(1)], runs, report=lambda line: None)
    assert result.failures == []
    first, second = result.records
    assert first["found"] == ["note.txt", "stale.txt"] and second["found"] == []
    assert not first["root"].startswith(str(runs)) and first["root"] != second["root"]
    assert not Path(first["root"]).exists()  # the scratch root is gone
    assert sorted(str(p.relative_to(runs)) for p in runs.rglob("*")) == [
        "cell0", "cell0/.lock", "cell0/note.txt", "cell0/sub", "cell0/sub/out.txt",
        "cell1", "cell1/.lock", "cell1/sub", "cell1/sub/out.txt",
    ]
    assert (runs / "cell0" / "note.txt").read_text() == "resume me"
    assert (runs / "cell1" / "sub" / "out.txt").read_text() == "cell 1"


def note_finished(cell: NoteCell, root: Path) -> dict | None:
    out = cell.run_dir(root) / "sub" / "out.txt"
    return {"n": cell.n, "out": out.read_text()} if out.is_file() else None


def test_run_directories_are_kept_in_a_pyarrow_storage_and_resumed_from_it(
    local_ray, tmp_path: Path
) -> None:
    """`--storage URI`: every run directory that comes back is uploaded (exactly its files);
    a driver without a local copy downloads the finished ones and skips them; a cell finished
    only locally is uploaded."""
    pytest.importorskip("pyarrow")
    from xlvin.io.storage import RunStorage

    preset = Experiment(help="", cells=lambda n, a: [], run_cell=note_run_cell,
                          finished=note_finished, write_results=lambda *a: "", runs=tmp_path)
    stored = tmp_path / "bucket" / "runs"
    storage = RunStorage(f"file://{stored}")
    lines: list[str] = []
    first = sweep.run_sweep(preset, [NoteCell(0), NoteCell(1)], tmp_path / "a", lines.append,
                            storage=storage)
    assert len(first.trained) == 2 and "storage file://" in lines[0]
    assert sorted(str(p.relative_to(stored)) for p in stored.rglob("*") if p.is_file()) == [
        "cell0/sub/out.txt", "cell1/sub/out.txt"]

    # another driver, no local copy: both come from the storage, nothing runs
    (tmp_path / "b" / "cell2" / "sub").mkdir(parents=True)
    (tmp_path / "b" / "cell2" / "sub" / "out.txt").write_text("finished here")
    lines.clear()
    second = sweep.run_sweep(preset, [NoteCell(0), NoteCell(1), NoteCell(2)], tmp_path / "b",
                             lines.append, storage=storage)
    assert lines == [f"storage file://{stored}: 2 runs downloaded",
                     "3 runs: 3 finished earlier (skipped), 0 to run",
                     f"storage file://{stored}: 1 run finished earlier uploaded"]
    assert second.records == [{"n": n, "out": f"cell {n}"} for n in (0, 1)] + [
        {"n": 2, "out": "finished here"}]
    assert (stored / "cell2" / "sub" / "out.txt").read_text() == "finished here"

    # a stored copy that lost a file the local finished run has is uploaded again, whole
    (tmp_path / "b" / "cell0" / "summary.json").write_text("{}")
    lines.clear()
    sweep.run_sweep(preset, [NoteCell(0), NoteCell(1), NoteCell(2)], tmp_path / "b",
                    lines.append, storage=storage)
    assert lines[-1] == f"storage file://{stored}: 1 run finished earlier uploaded"
    assert (stored / "cell0" / "summary.json").read_text() == "{}"


def test_a_bad_storage_is_one_line_and_writes_nothing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture
) -> None:
    pytest.importorskip("pyarrow")
    args = ["sweep", "table1", "--seeds", "1", "--runs", str(tmp_path / "runs"), "--storage"]
    assert main([*args, "nosuchscheme://bucket/runs"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("xlvin: error: --storage nosuchscheme://bucket/runs: ")
    assert err.count("\n") == 1
    monkeypatch.setitem(sys.modules, "pyarrow.fs", None)
    assert main([*args, "s3://bucket/runs"]) == 2
    assert capsys.readouterr().err == "xlvin: error: --storage needs pyarrow: pip install pyarrow\n"
    assert not (tmp_path / "runs").exists()


def lost_after_a_snapshot(driver_runs: Path):
    """A run_cell whose first attempt writes a checkpoint, waits until a snapshot brought it to
    the driver, then fails as a lost node would; a later attempt that starts from the checkpoint
    finishes."""

    def run_cell(cell: NoteCell, root: Path) -> dict:
        run_dir = cell.run_dir(root)
        run_dir.mkdir(parents=True, exist_ok=True)
        if (run_dir / "checkpoint.txt").is_file():
            return {"n": cell.n, "resumed from": (run_dir / "checkpoint.txt").read_text()}
        (run_dir / "checkpoint.txt").write_text("update 7")
        deadline = time.monotonic() + 30
        while not (cell.run_dir(driver_runs) / "checkpoint.txt").is_file():
            if time.monotonic() > deadline:
                raise TimeoutError("no snapshot reached the driver")
            time.sleep(0.05)
        raise RuntimeError("the node was lost")

    return run_cell


def test_a_running_cells_snapshots_reach_the_driver_and_a_retry_resumes_from_them(
    local_ray, tmp_path: Path
) -> None:
    runs = tmp_path / "runs"
    preset = Experiment(help="", cells=lambda n, a: [], run_cell=lost_after_a_snapshot(runs),
                          finished=lambda c, r: None, write_results=lambda *a: "", runs=runs,
                          label=lambda c: f"cell{c.n}")
    lines: list[str] = []
    result = sweep.run_sweep(preset, [NoteCell(0)], runs, lines.append, sync_seconds=0.1)
    assert lines[-2:] == ["FAILED cell0 (attempt 1/2): RuntimeError: the node was lost; retrying",
                          lines[-1]] and lines[-1].startswith("[1/1] done cell0 (")
    assert result.records == [{"n": 0, "resumed from": "update 7"}]
    assert (runs / "cell0" / "checkpoint.txt").read_text() == "update 7"


@pytest.mark.parametrize("experiment", ["maze", "contextual-maze"])
def test_the_maze_presets_make_the_cells_and_run_directories_of_reproduce(experiment: str) -> None:
    from xlvin.cli import build_parser
    from xlvin.experiments import maze

    options = ["--seeds", "2", "--agents", "vin,ppo", "--quick", "--budget", "500"]
    parser = build_parser()
    args = parser.parse_args(["sweep", experiment, *options])
    preset = registry.on_ray()[experiment]
    cells = preset.cells(args.seeds, args)
    curriculum = dataclasses.replace(maze.QUICK, budget=500)
    assert cells == [maze.Cell(experiment, agent, seed, curriculum)
                     for agent in ("vin", "ppo") for seed in (0, 1)]
    reproduce = parser.parse_args(["reproduce", experiment, *options])
    assert preset.runs == reproduce.runs == Path("runs/maze")
    assert [preset.run_dir(c, preset.runs) for c in cells] == [
        c.run_dir(reproduce.runs)
        for c in maze.cells_from_options(experiment, reproduce.seeds, reproduce)]
    assert [preset.label(c) for c in cells[:2]] == [f"{experiment} vin seed0", f"{experiment} vin seed1"]


def test_token_mode_without_a_token_is_one_line(tmp_path: Path) -> None:
    """RAY_AUTH_MODE=token on a machine with no token (no RAY_AUTH_TOKEN, no ~/.ray/auth_token):
    one line before Ray's client is made (it would abort the process), nothing written."""
    pytest.importorskip("ray")
    with socket.socket() as head:  # something listens where the head would
        head.bind(("127.0.0.1", 0))
        head.listen()
        env = {k: v for k, v in os.environ.items() if not k.startswith("RAY_")}
        env.update(RAY_AUTH_MODE="token", HOME=str(tmp_path), PYTHONPATH=SRC)
        done = subprocess.run(
            [sys.executable, "-m", "xlvin.cli", "sweep", "table1", "--seeds", "1", "--address",
             f"127.0.0.1:{head.getsockname()[1]}", "--runs", str(tmp_path / "runs")],
            env=env, capture_output=True, text=True, timeout=120, check=False)
    assert done.returncode == 2
    assert done.stderr == ("xlvin: error: RAY_AUTH_MODE=token, but this machine has no token: set "
                           "RAY_AUTH_TOKEN=<the output of `ray get-auth-token` on the head node>\n")
    assert not (tmp_path / "runs").exists()
