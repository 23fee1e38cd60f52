"""Faults from the user's env (issue: Reliability 5). F1: an env that raises in `reset` or
`step`, or returns an observation of another shape or dtype, is one error line naming the env,
the call, the step and the exception's own message, in `xlvin train` (PPO's rollouts, XLVIN's
TransE collection) and `xlvin evaluate`; the run directory is left resumable, and the line says
so; XLVIN_TRACEBACK=1 prints the traceback above it; the Python API raises one `EnvFailed` that
names the same. F3: `xlvin evaluate --json` of an env with NaN rewards is strict JSON.

The envs are `tests.badenvs` (`--gym-packages tests.badenvs`); each behaves when
`badenvs.HEALED` is set, as a user's fixed env would."""

import json
from pathlib import Path

import pytest
from test_faults import one_error_line, snapshot

from tests import badenvs
from xlvin import PPO, Model
from xlvin.cli import main
from xlvin.envs.failures import EnvFailed
from xlvin.io.run_dir import MODEL, SUMMARY

PACKAGES = ["--gym-packages", "tests.badenvs"]
RAISED = f"RuntimeError: {badenvs.MESSAGE}"


def tiny(env: str) -> list[str]:
    """A PPO run of 4 updates of 16 steps on `xlvin-test/<env>-v0`, a checkpoint after each."""
    return ["--env", f"xlvin-test/{env}-v0", "--agent", "ppo", "--num-envs", "1",
            "--num-steps", "16", "--total-steps", "64", "--checkpoint-every", "1", "--quiet",
            *PACKAGES]


def strict_json(text: str) -> dict:
    """`text` parsed as JSON, which has no NaN or Infinity (Python's json reads them)."""

    def refuse(constant: str) -> None:
        raise ValueError(f"not JSON: {constant}")

    return json.loads(text, parse_constant=refuse)


#: env -> what the line says: the call, where, and the reason (the exception's own message).
TRAIN_FAULTS = {
    "StepRaises": ("failed in step at step 5 of 16 in the data for update 1", RAISED),
    # the second reset: the vector env's autoreset after the 8-step episode, inside its step 9
    "ResetRaises": ("failed in reset at step 9 of 16 in the data for update 1", RAISED),
    "FirstResetRaises": ("failed in reset at step 0 (seed 0)", RAISED),
    "WrongShape": ("failed in step at step 5 of 16", "Output array is the wrong shape"),
    "WrongDtype": ("failed in step at step 5 of 16", "dtype('<U1')"),
    # the reward named as the cause, not a NaN loss updates later
    "NaNReward": ("failed in step at step 1 of 16 in the data for update 1",
                  "returned the reward nan (env 0), which PPO cannot learn from"),
    "InfReward": ("failed in step at step 3 of 16 in the data for update 1",
                  "returned the reward -inf (env 0), which PPO cannot learn from"),
}


@pytest.mark.parametrize("env", TRAIN_FAULTS)
def test_an_env_failing_in_training_is_one_line_and_the_run_resumes_once_fixed(
    env: str, tmp_path: Path, capsys, monkeypatch: pytest.MonkeyPatch
) -> None:
    run = tmp_path / "run"
    assert main(["train", *tiny(env), "--out", str(run)]) == 2
    err = one_error_line(capsys)
    where, reason = TRAIN_FAULTS[env]
    assert f"environment 'xlvin-test/{env}-v0' {where}" in err and reason in err, err
    assert f"{run} is kept" in err and "--resume" in err and "XLVIN_TRACEBACK=1" in err, err
    monkeypatch.setenv(badenvs.HEALED, "1")
    assert main(["train", *tiny(env), "--out", str(run), "--resume"]) == 0
    assert (run / MODEL).is_file() and (run / SUMMARY).is_file()


def test_xlvin_tells_an_env_failing_in_its_transe_collection_in_one_line(
    executor_path: Path, tmp_path: Path, capsys, monkeypatch: pytest.MonkeyPatch
) -> None:
    run = tmp_path / "run"
    args = ["train", *tiny("WrongShape"), "--agent", "xlvin", "--executor", str(executor_path),
            "--transe-episodes", "3", "--transe-epochs", "1", "--out", str(run)]
    assert main(args) == 2
    lines = capsys.readouterr().err.strip().splitlines()  # after the pre-training's progress
    errors = [line for line in lines if line.startswith("xlvin: error: ")]
    assert len(errors) == 1 and errors[0] == lines[-1] and "Traceback" not in "".join(lines)
    assert ("environment 'xlvin-test/WrongShape-v0' failed in step at step 5 of TransE data "
            "episode 1 (seed 10000): returned an observation of shape (5,), where its "
            "observation space has (4,)") in errors[0], errors[0]
    assert "resumes from the start" in errors[0] and "--resume" in errors[0]
    monkeypatch.setenv(badenvs.HEALED, "1")
    assert main([*args, "--resume"]) == 0


def test_xlvin_traceback_prints_the_envs_traceback_above_the_line(
    tmp_path: Path, capsys, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("XLVIN_TRACEBACK", "1")
    assert main(["train", *tiny("StepRaises"), "--out", str(tmp_path / "run")]) == 2
    err = capsys.readouterr().err
    assert "Traceback (most recent call last)" in err and "badenvs.py" in err, err
    assert err.splitlines()[-1].startswith("xlvin: error: environment 'xlvin-test/StepRaises-v0'")


def test_the_api_raises_one_env_failed_naming_env_call_and_step(tmp_path: Path) -> None:
    model = PPO("xlvin-test/StepRaises-v0", num_envs=1, num_steps=16, checkpoint_every=1,
                verbose=0)
    with pytest.raises(EnvFailed) as failed:
        model.learn(64, out=tmp_path / "run")
    err = failed.value
    assert (err.env_id, err.call, err.reason) == ("xlvin-test/StepRaises-v0", "step", RAISED)
    assert err.step == "step 5 of 16 in the data for update 1"
    assert f"learn(out={str(tmp_path / 'run')!r}, resume=True)" in str(err), err
    assert isinstance(err.__cause__, RuntimeError)  # the env's own, with its traceback
    given = PPO(badenvs.BadEnv("step raises", 5), num_envs=1, num_steps=16, verbose=0)
    with pytest.raises(EnvFailed, match="failed in step at step 5 of 16") as failed:
        given.learn(64, out=tmp_path / "given")
    assert failed.value.env_id == given.config.train.env  # the id the run records


@pytest.fixture(scope="module")
def healed_runs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """A finished run on each env, trained while it behaved."""
    root, runs = tmp_path_factory.mktemp("healed"), {}
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv(badenvs.HEALED, "1")
        for env in ("StepRaises", "WrongShape", "WrongDtype", "NaNReward"):
            runs[env] = root / env
            assert main(["train", *tiny(env), "--out", str(runs[env])]) == 0
    return runs


#: env -> what `xlvin evaluate` says after the env's id
EVAL_FAULTS = {
    "StepRaises": f"failed in step at step 5 of the evaluation episode of seed 1000000: {RAISED}",
    "WrongShape": "failed in step at step 5 of the evaluation episode of seed 1000000: returned "
                  "an observation of shape (5,), where its observation space has (4,)",
    "WrongDtype": "returned an observation of dtype <U1, where its observation space has float32",
}


@pytest.mark.parametrize("env", EVAL_FAULTS)
def test_an_env_failing_in_evaluate_is_one_line(
    env: str, healed_runs: dict[str, Path], capsys
) -> None:
    run = healed_runs[env]
    before = snapshot(run)
    assert main(["evaluate", str(run), "--episodes", "2", *PACKAGES]) == 2
    err = one_error_line(capsys)
    assert f"environment 'xlvin-test/{env}-v0' " in err and EVAL_FAULTS[env] in err, err
    with pytest.raises(EnvFailed, match="evaluation episode of seed 1000000"):
        Model.load(run, gym_packages=["tests.badenvs"]).evaluate(episodes=2)
    assert snapshot(run) == before


def test_evaluate_json_of_nan_returns_is_strict_json_with_null_and_a_flag(
    healed_runs: dict[str, Path], capsys
) -> None:
    assert main(["evaluate", str(healed_runs["NaNReward"]), "--episodes", "2", "--json",
                 *PACKAGES]) == 0
    out, err = capsys.readouterr()
    result = strict_json(out)
    assert result["mean"] is None and result["std"] is None and result["returns"] == [None, None]
    assert result["finite"] is False and result["lengths"] == [8, 8]
    assert "xlvin: note: 2 of 2 returns are not finite" in err


def test_evaluate_json_of_finite_returns_says_finite(healed_runs: dict[str, Path], capsys,
                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(badenvs.HEALED, "1")
    assert main(["evaluate", str(healed_runs["NaNReward"]), "--episodes", "2", "--json",
                 *PACKAGES]) == 0
    result = strict_json(capsys.readouterr().out)
    assert result["finite"] is True and result["mean"] == pytest.approx(sum(result["returns"]) / 2)
