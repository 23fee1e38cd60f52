"""`xlvin train --deadline-minutes`, `learn(deadline_minutes=)` and `learn_seeds(...,
deadline_minutes=)`: a run stops at the first update boundary past its deadline with a
checkpoint, and resumed it ends as the run never stopped; a bad value is one line before
anything is made."""

import time
from pathlib import Path
from types import SimpleNamespace

import pytest
import torch

from xlvin import PPO, learn_seeds
from xlvin.cli import main
from xlvin.errors import UserError
from xlvin.io.run_dir import METRICS, MODEL, SUMMARY, read_metrics
from xlvin.ppo import session
from tests.test_population import RUN, assert_same_run

OPTIONS = dict(num_envs=4, num_steps=32, checkpoint_every=3, verbose=0)


@pytest.fixture
def clock(monkeypatch: pytest.MonkeyPatch) -> None:
    """The session's wall clock moves one second each time it is read (from 0), so a deadline
    of n seconds passes at a fixed update boundary."""
    now = iter(range(10**6))
    monkeypatch.setattr(session, "time", SimpleNamespace(
        time=lambda: float(next(now)), perf_counter=time.perf_counter))


@pytest.mark.parametrize("value", ["0", "-1", "nan", "inf"])
def test_a_deadline_that_is_not_a_positive_number_is_one_line_before_anything(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], value: str
) -> None:
    for seeds in ([], ["--seeds", "0,3"]):
        assert main(["train", *RUN, *seeds, "--out", str(tmp_path / "run"),
                     "--deadline-minutes", value]) == 2
        err = capsys.readouterr().err
        assert err.startswith("xlvin: error: --deadline-minutes must be a finite number > 0, got ")
        assert err.count("\n") == 1 and not (tmp_path / "run").exists()
    with pytest.raises(UserError, match="^deadline_minutes must be a finite number > 0"):
        PPO("CartPole-v1", **OPTIONS).learn(256, out=tmp_path / "run",
                                             deadline_minutes=float(value))
    with pytest.raises(UserError, match="^deadline_minutes must be a finite number > 0"):
        learn_seeds(PPO("CartPole-v1", **OPTIONS), [0, 3], 256, out=tmp_path / "run",
                    deadline_minutes=float(value))
    assert not (tmp_path / "run").exists()


def test_the_cli_stops_at_the_deadline_and_resume_ends_as_uninterrupted(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    for seeds, run in (([], "one"), (["--seeds", "0,3"], "two")):
        assert main(["train", *RUN, *seeds, "--out", str(tmp_path / "full" / run)]) == 0
        assert main(["train", *RUN, *seeds, "--out", str(tmp_path / "cut" / run),
                     "--deadline-minutes", "1e-9"]) == 0
        out = capsys.readouterr().out
        assert "stopped at the deadline" in out and "--resume" in out
        dirs = ([""] if not seeds else ["seed-0", "seed-3"])
        for d in dirs:
            assert not (tmp_path / "cut" / run / d / MODEL).exists()
        if not seeds:  # `xlvin evaluate` of the stopped run: its checkpoint's policy, said
            assert main(["evaluate", str(tmp_path / "cut" / run), "--episodes", "2"]) == 0
            said = capsys.readouterr()
            assert "stopped before it finished: the policy of its checkpoint" in said.err
            assert said.out.startswith(f"{tmp_path / 'cut' / run}: return ")
        assert main(["train", *RUN, *seeds, "--out", str(tmp_path / "cut" / run), "--resume"]) == 0
        assert "stopped at the deadline" not in capsys.readouterr().out
        for d in dirs:
            assert_same_run(tmp_path / "full" / run / d, tmp_path / "cut" / run / d)


def test_learn_stops_at_the_deadline_holding_its_checkpoint_and_resumes_exactly(
    tmp_path: Path, clock: None
) -> None:
    full = PPO("CartPole-v1", seed=3, **OPTIONS).learn(1024, out=tmp_path / "full")
    model = PPO("CartPole-v1", seed=3, **OPTIONS)
    model.learn(1024, out=tmp_path / "cut", deadline_minutes=0.1)  # 6 reads of the clock
    assert model.summary is not None and model.summary["stopped_at_deadline"]
    updates = len(read_metrics(tmp_path / "cut"))
    assert 0 < updates < 8 and model.num_timesteps == updates * 128
    assert not (tmp_path / "cut" / MODEL).exists() and not (tmp_path / "cut" / SUMMARY).exists()
    model.learn(1024, out=tmp_path / "cut", resume=True)
    assert not model.summary["stopped_at_deadline"] and model.num_timesteps == 1024
    assert_same_run(tmp_path / "full", tmp_path / "cut")
    own, held = full.get_parameters()["policy"], model.get_parameters()["policy"]
    assert all(torch.equal(own[k], held[k]) for k in own)


def test_learn_seeds_stops_every_seed_and_returns_their_checkpoints(
    tmp_path: Path, clock: None
) -> None:
    models = learn_seeds(PPO("CartPole-v1", **OPTIONS), [0, 3], 1024, out=tmp_path / "pop",
                         deadline_minutes=0.1)
    for seed, model in zip((0, 3), models):
        run = tmp_path / "pop" / f"seed-{seed}"
        assert model.summary is not None and model.summary["stopped_at_deadline"]
        assert model.config.train.seed == seed and model.run_dir == run
        assert 0 < model.num_timesteps == 128 * len(read_metrics(run)) < 1024
        assert not (run / MODEL).exists() and (run / METRICS).exists()
    done = learn_seeds(PPO("CartPole-v1", **OPTIONS), [0, 3], 1024, out=tmp_path / "pop",
                       resume=True)
    alone = PPO("CartPole-v1", seed=3, **OPTIONS).learn(1024, out=tmp_path / "alone")
    assert_same_run(tmp_path / "alone", tmp_path / "pop" / "seed-3")
    own, held = alone.get_parameters()["policy"], done[1].get_parameters()["policy"]
    assert all(torch.equal(own[k], held[k]) for k in own)


def test_a_stopped_run_loads_as_learn_left_it_and_learn_continues_it_exactly(
    tmp_path: Path, clock: None, capsys: pytest.CaptureFixture[str]
) -> None:
    """`load` of a run stopped at its deadline (from the CLI: nothing in memory) gives the
    model `learn` held when it stopped: its checkpoint's policy and env steps; `learn(n)`
    continues it to the run that never stopped. A checkpoint of another run is refused."""
    full = PPO("CartPole-v1", seed=3, **OPTIONS).learn(1024, out=tmp_path / "full")
    held = PPO("CartPole-v1", seed=3, **OPTIONS)
    held.learn(1024, out=tmp_path / "cut", deadline_minutes=0.1)
    loaded = PPO.load(tmp_path / "cut")
    assert loaded.run_dir == tmp_path / "cut" and 0 < loaded.num_timesteps < 1024
    assert loaded.num_timesteps == held.num_timesteps
    mine, theirs = held.get_parameters()["policy"], loaded.get_parameters()["policy"]
    assert all(torch.equal(mine[k], theirs[k]) for k in mine)
    loaded.learn(1024 - loaded.num_timesteps)
    assert loaded.num_timesteps == 1024 and (tmp_path / "cut" / MODEL).is_file()
    assert_same_run(tmp_path / "full", tmp_path / "cut")
    own, again = full.get_parameters()["policy"], loaded.get_parameters()["policy"]
    assert all(torch.equal(own[k], again[k]) for k in own)
    # another run's checkpoint beside this run's config: refused, not loaded as this run
    PPO("CartPole-v1", seed=4, **OPTIONS).learn(1024, out=tmp_path / "other",
                                                deadline_minutes=0.1)
    PPO("CartPole-v1", seed=5, **OPTIONS).learn(1024, out=tmp_path / "swapped",
                                                deadline_minutes=0.1)
    (tmp_path / "other" / "checkpoint.safetensors").replace(
        tmp_path / "swapped" / "checkpoint.safetensors")
    with pytest.raises(UserError, match="was saved by another run; refused"):
        PPO.load(tmp_path / "swapped")
