"""A first run: pre-training shows its progress and is counted in the time a run reports, a
default executor is pre-trained once for every command that needs it, and --total-steps trains
whole rollouts."""

import io
import json
import re
import warnings
from pathlib import Path

import pytest

from xlvin import PPO
from xlvin.cli import main
from xlvin.experiments import atari, table1
from xlvin import progress
from xlvin.pretrain.executor_config import default_executor_config
from xlvin.pretrain.files import cache_dir, cached_executor_path, executor_config, executor_file
from xlvin.run.config import TrainConfig

TINY = ["--env", "CartPole-v1", "--agent", "xlvin", "--num-envs", "2", "--num-steps", "16",
        "--total-steps", "32", "--transe-episodes", "5", "--transe-epochs", "1", "--quiet"]


def train(out: Path, *flags: str) -> int:
    return main(["train", *TINY, "--out", str(out), *flags])


def seconds(text: str) -> float:
    """`2m07s` or `10.1s` in seconds."""
    minutes, _, secs = text.rpartition("m")
    return 60 * int(minutes or 0) + float(secs.rstrip("s"))


def test_progress_lines_off_a_terminal(monkeypatch: pytest.MonkeyPatch) -> None:
    """Not a terminal: a line at the start, one each LINE_EVERY_S with the ETA, one at the end."""
    monkeypatch.setattr(progress, "LINE_EVERY_S", 0.0)
    out = io.StringIO()
    with progress.Progress("pre-training executor", 4, "step", stream=out) as bar:
        for _ in range(4):
            bar.update()
    lines = out.getvalue().splitlines()
    assert lines[0] == "xlvin: pre-training executor: started (4 steps)"
    assert re.fullmatch(r"xlvin: pre-training executor: 2/4 steps \(50 %\), [\d.]+s, about "
                        r"[\d.]+s left", lines[2])
    assert re.fullmatch(r"xlvin: pre-training executor: done, 4 steps in [\d.]+s", lines[-1])
    assert len(lines) == 6


def test_progress_is_one_line_a_minute_and_silent_when_not_shown() -> None:
    out = io.StringIO()
    with progress.Progress("pre-training TransE", 1000, "step", stream=out) as bar:
        for _ in range(1000):
            bar.update()
    assert len(out.getvalue().splitlines()) == 2  # start and end: less than a minute
    quiet = io.StringIO()
    with progress.Progress("pre-training TransE", 10, "step", show=False, stream=quiet) as bar:
        bar.update(10)
    assert quiet.getvalue() == ""


@pytest.mark.parametrize(("value", "text"), [(7.04, "7.0s"), (127.4, "2m07s"), (3725, "1h02m")])
def test_durations_read_as_minutes_and_seconds(value: float, text: str) -> None:
    assert progress.duration(value) == text


@pytest.mark.usefixtures("tiny_default_executors")
def test_quiet_train_reports_pretraining_and_splits_its_time(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """--quiet, stderr not a terminal: the pre-trainings' start and end lines; the time line
    and summary.json split pre-training (executor, TransE) from training, and add up."""
    assert train(tmp_path / "run") == 0
    captured = capsys.readouterr()
    for name in ("pre-training executor", "collecting TransE data", "pre-training TransE"):
        assert f"xlvin: {name}: started" in captured.err
        assert f"xlvin: {name}: done" in captured.err
    line = re.search(r"trained in (\S+) \(pre-training (\S+): executor (\S+), TransE (\S+); "
                     r"training (\S+)\); [\d,]+ env steps, .*; run directory", captured.out)
    assert line is not None
    total, pre, executor, transe, training = map(seconds, line.groups())
    summary = json.loads((tmp_path / "run" / "summary.json").read_text())
    assert summary["pretrain_seconds"] == pytest.approx(
        summary["pretrain_executor_seconds"] + summary["pretrain_transe_seconds"])
    assert summary["wall_seconds"] == pytest.approx(
        summary["pretrain_seconds"] + summary["train_seconds"])
    assert summary["train_seconds"] == pytest.approx(summary["ppo"]["wall_time_s"])
    printed = (total, pre, executor, transe, training)
    recorded = (summary["wall_seconds"], summary["pretrain_seconds"],
                summary["pretrain_executor_seconds"], summary["pretrain_transe_seconds"],
                summary["train_seconds"])
    assert printed == pytest.approx(recorded, abs=0.051)
    assert summary["pretrain_executor_seconds"] > summary["pretrain_transe_seconds"] > 0


@pytest.mark.usefixtures("tiny_default_executors")
def test_a_second_run_reuses_the_cached_executor(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    import xlvin.pretrain.files as pretrain

    calls = []
    real = pretrain.pretrain_and_save
    monkeypatch.setattr(pretrain, "pretrain_and_save",
                        lambda *args, **kwargs: calls.append(1) or real(*args, **kwargs))
    assert train(tmp_path / "first") == 0 and len(calls) == 1
    capsys.readouterr()
    assert train(tmp_path / "second") == 0 and len(calls) == 1
    assert "pre-training executor" not in capsys.readouterr().err
    first, second = (json.loads((tmp_path / name / "summary.json").read_text())
                     for name in ("first", "second"))
    assert first["executor"] == second["executor"]
    assert len(list((cache_dir() / "executors").iterdir())) == 1


def test_equal_executors_share_one_file_whichever_command_needs_them(tmp_path: Path) -> None:
    """The quickstart's XLVIN-R (protocol paper: the authors' executor) and `xlvin train
    --executor authors-random` need the same executor; `reproduce atari`'s XLVIN-R and `xlvin
    train`'s default too. A field that differs gives another file."""
    quickstart = table1.Cell("paper", "CartPole-v0", "xlvin-r", 0).config().train
    assert quickstart.executor_messages == "linear"

    def path(cfg: TrainConfig) -> Path:
        executor = executor_config(cfg.executor, cfg)
        assert executor is not None
        return cached_executor_path(executor, tmp_path)

    assert path(quickstart) == path(TrainConfig(executor="authors-random"))
    atari_cell = atari.Cell("Freeway", "xlvin_r", 0).config().train
    assert path(atari_cell) == path(TrainConfig(env="CartPole-v1", depth=1, seed=5))
    others = {path(TrainConfig()), path(quickstart), path(TrainConfig(executor_messages="linear")),
              path(TrainConfig(executor_layer_norm=True)), path(TrainConfig(executor="cartpole")),
              path(TrainConfig(executor="untrained"))}
    assert len(others) == 6
    assert path(TrainConfig()).name.startswith("executor-random_deterministic-")


def test_an_executor_cached_under_its_earlier_name_is_found(tmp_path: Path) -> None:
    new = cached_executor_path(default_executor_config("random"), tmp_path)
    digest = new.stem.rsplit("-", 1)[1]
    earlier = tmp_path / f"executor-random-seed0-{digest}.safetensors"
    earlier.write_bytes(b"")
    assert cached_executor_path(default_executor_config("random"), tmp_path) == earlier


@pytest.mark.usefixtures("tiny_default_executors")
def test_prepare_and_a_run_resolve_to_one_file(tmp_path: Path) -> None:
    """`reproduce atari` prepares the file `xlvin train --executor random` then reads."""
    cells = [atari.Cell("Freeway", "xlvin_r", 0, transitions=1024)]
    assert atari.prepare(cells) == [executor_file("random", TrainConfig())]


def test_the_maze_experiment_prepares_its_executor_once_before_its_cells(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """`reproduce maze` pre-trains the maze executor its XLVIN cells share up front, with its
    progress shown, once for all cells, and the baselines need none."""
    from xlvin.experiments import maze
    from xlvin.pretrain.files import executor_config
    from xlvin.run import training as run

    made: list[tuple[str, bool]] = []

    def record(cfg, cache_dir, progress=False, **_):
        made.append((cfg.family, progress))
        return tmp_path / f"{cfg.family}.safetensors"

    monkeypatch.setattr(run, "cached_executor", record)
    cells = maze.make_cells("maze", ["xlvin", "vin", "ppo"], 2, 0, maze.QUICK)
    train = cells[0].config().train
    assert maze.prepare(cells) == [tmp_path / f"{made[0][0]}.safetensors"]
    assert made == [(executor_config(train.executor, train).family, True)]


@pytest.mark.usefixtures("tiny_default_executors")
def test_prepare_produces_only_what_is_missing(monkeypatch: pytest.MonkeyPatch) -> None:
    """A second `reproduce classic` (or quickstart) starts no pre-training and no worker."""
    cells = [table1.Cell("ours", "CartPole-v0", agent, seed)
             for agent in ("xlvin-r", "xlvin-cp", "ppo") for seed in (0, 1)]
    made: list[str] = []
    real = table1._produce
    monkeypatch.setattr(table1, "_produce", lambda need: made.append(need[0]) or real(need))
    files = table1.prepare(cells)
    assert made == ["executor", "executor"] and len(files) == 2
    assert all(f.exists() for f in files)
    assert table1.prepare(cells, jobs=2) == files and len(made) == 2


@pytest.mark.usefixtures("tiny_default_executors")
def test_total_steps_round_up_to_whole_rollouts(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert train(tmp_path / "run", "--total-steps", "40", "--agent", "ppo") == 0
    err = capsys.readouterr().err
    assert ("xlvin: --total-steps 40 is not a multiple of the rollout (2 envs x 16 steps = 32); "
            "training 64\n") in err
    config = json.loads((tmp_path / "run" / "config.json").read_text())
    summary = json.loads((tmp_path / "run" / "summary.json").read_text())
    assert config["ppo"]["total_steps"] == 64 and summary["ppo"]["env_steps"] == 64
    assert train(tmp_path / "whole", "--total-steps", "64", "--agent", "ppo") == 0
    assert "not a multiple" not in capsys.readouterr().err


def test_learn_rounds_up_with_a_warning(tmp_path: Path) -> None:
    def model() -> PPO:
        return PPO("CartPole-v1", num_envs=2, num_steps=16, pretrain_transe=False)

    first = model()
    with pytest.warns(UserWarning, match=r"total_steps 40 is not a multiple of the rollout "
                      r"\(2 envs x 16 steps = 32\); training 64"):
        first.learn(total_steps=40, out=tmp_path / "run", progress=False)
    assert first.config.ppo.total_steps == 64
    assert first.summary is not None and first.summary["ppo"]["env_steps"] == 64
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        model().learn(total_steps=64, out=tmp_path / "whole", progress=False)


@pytest.mark.parametrize("env, given, expected", [
    ("CartPole-v1", None, True), ("xlvin/FreewayTrain-v4", None, False),
    ("xlvin/FreewayTrain-v4", True, True), ("CartPole-v1", False, False),
])
def test_transe_pretraining_is_off_by_default_for_images_only(env: str, given, expected) -> None:
    """The paper's Atari agents learn TransE during PPO only: a first pixel run does not spend
    minutes pre-training it, unless asked."""
    pytest.importorskip("ale_py")
    from xlvin.run.config import RunConfig, TrainConfig
    from xlvin.run.transe import with_transe_pretraining
    from xlvin.run.checks import check_run

    cfg = RunConfig(train=TrainConfig(env=env, agent="xlvin", pretrain_transe=given))
    spaces, _ = check_run(cfg)
    assert with_transe_pretraining(cfg, spaces).train.pretrain_transe is expected
