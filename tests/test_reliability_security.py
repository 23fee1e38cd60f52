"""No file names code that we call (issue: Reliability 5, F5): a wrapper is applied only when it is
a `gymnasium.Wrapper` subclass the user named (`--env-wrapper` on the command line,
`env_wrappers=` in Python), never because a run's config.json, a weights header or a --config
file names it; an env id a file names is made only if it is in gymnasium's registry already
(gymnasium imports the module of a `module:Env` id). A refusal is one line (one UserError in
Python), before any env is made, and changes no byte of the run directory."""

import builtins
import json
import os
import sys
from pathlib import Path

import gymnasium as gym
import pytest
from test_faults import TINY, header, one_error_line, snapshot

from tests.tiny_runs import unfinished_run
from xlvin import PPO, Model
from xlvin.cli import main
from xlvin.envs import wrappers
from xlvin.errors import UserError
from xlvin.io.run_dir import CONFIG, MODEL
from xlvin.io.weights import atomic_save_tensors, load_weights
from xlvin.run.training import evaluate_run

#: Functions in modules every process has imported: a file naming one as a wrapper must not
#: get it called with the env.
FUNCTIONS = ["sys:exit", "builtins:print", "os:system"]


@pytest.fixture(autouse=True)
def nothing_named(monkeypatch: pytest.MonkeyPatch) -> None:
    """Each test starts as a fresh process does: no wrapper named by the user yet."""
    monkeypatch.setattr(wrappers, "_NAMED", set())


@pytest.fixture
def calls(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The FUNCTIONS replaced by recorders: each call with an env is recorded (print still
    prints everything else)."""
    seen: list[str] = []
    real_print = builtins.print

    def recorder(name, fallback=None):
        def record(*args, **kwargs):
            if args and isinstance(args[0], gym.Env):
                seen.append(name)
                return args[0]
            return fallback(*args, **kwargs) if fallback else None
        return record

    monkeypatch.setattr(sys, "exit", recorder("sys:exit"))
    monkeypatch.setattr(builtins, "print", recorder("builtins:print", real_print))
    monkeypatch.setattr(os, "system", recorder("os:system"))
    return seen


@pytest.fixture
def made(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The ids of every env made (gym.make, gym.make_vec) while the test runs."""
    ids: list[str] = []
    make, make_vec = gym.make, gym.make_vec

    def counted(real):
        def call(env_id, *args, **kwargs):
            ids.append(str(env_id))
            return real(env_id, *args, **kwargs)
        return call

    monkeypatch.setattr(gym, "make", counted(make))
    monkeypatch.setattr(gym, "make_vec", counted(make_vec))
    return ids


@pytest.fixture(scope="module")
def finished(tmp_path_factory: pytest.TempPathFactory) -> Path:
    run = tmp_path_factory.mktemp("security") / "run"
    assert main(["train", *TINY, "--out", str(run)]) == 0
    return run


def copy_run(run: Path, dest: Path) -> Path:
    """The finished run's config and weights (as `Model.save_policy` writes them: its summary,
    sealed to the weights' digest, left out)."""
    dest.mkdir()
    for p in run.iterdir():
        if p.name in (CONFIG, MODEL):
            (dest / p.name).write_bytes(p.read_bytes())
    return dest


def set_config(run: Path, **train: object) -> None:
    """Set `train` fields in config.json and in the model's header, the header re-saved with a
    valid digest (as anyone who can write the file can)."""
    config = json.loads((run / CONFIG).read_text())
    config["train"].update(train)
    (run / CONFIG).write_text(json.dumps(config))
    if (run / MODEL).is_file():
        tensors, meta = load_weights(run / MODEL)
        meta["config"]["train"].update(train)
        atomic_save_tensors(run / MODEL, tensors, meta)


def planted(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A module `xlvin_planted` on sys.path that leaves the file IMPORTED when imported."""
    folder = tmp_path / "planted"
    folder.mkdir()
    (folder / "xlvin_planted.py").write_text(
        f"open({str(tmp_path / 'IMPORTED')!r}, 'w').close()\nclass Env: pass\n")
    monkeypatch.syspath_prepend(str(folder))
    monkeypatch.delitem(sys.modules, "xlvin_planted", raising=False)
    return tmp_path / "IMPORTED"


# ------------------------------------------------- wrappers a run's files name are never called

@pytest.mark.parametrize("spec", FUNCTIONS)
def test_a_resumed_run_whose_config_names_a_function_as_wrapper_is_refused(
    spec: str, tmp_path: Path, calls: list[str], made: list[str], capsys
) -> None:
    run = unfinished_run(tmp_path)
    set_config(run, env_wrappers=[spec])
    before = snapshot(tmp_path)
    made.clear()
    capsys.readouterr()
    assert main(["train", "--out", str(run), "--resume", "--total-steps", "1024"]) == 2
    assert spec in one_error_line(capsys)
    assert (calls, made) == ([], [])
    assert snapshot(tmp_path) == before


@pytest.mark.parametrize("spec", FUNCTIONS)
def test_evaluate_of_a_run_whose_files_name_a_function_as_wrapper_is_refused(
    spec: str, finished: Path, tmp_path: Path, calls: list[str], made: list[str], capsys
) -> None:
    run = copy_run(finished, tmp_path / "run")
    set_config(run, env_wrappers=[spec])
    before = snapshot(tmp_path)
    made.clear()
    capsys.readouterr()
    assert main(["evaluate", str(run), "--episodes", "1"]) == 2
    assert spec in one_error_line(capsys)
    assert (calls, made) == ([], [])
    assert snapshot(tmp_path) == before


def test_in_python_a_loaded_runs_wrapper_is_refused_until_named(
    finished: Path, tmp_path: Path, calls: list[str], made: list[str]
) -> None:
    run = copy_run(finished, tmp_path / "run")
    set_config(run, env_wrappers=["os:system"])
    model = Model.load(run)
    made.clear()
    with pytest.raises(UserError, match="os:system"):
        model.evaluate(episodes=1)
    with pytest.raises(UserError, match="os:system"):
        model.learn(64)
    assert model.get_env() is None
    with pytest.raises(UserError, match="not a gymnasium.Wrapper subclass"):
        Model.load(run, env_wrappers=["os:system"])
    assert (calls, made) == ([], [])


def test_a_config_file_naming_a_wrapper_is_refused_unless_named_on_the_command_line(
    tmp_path: Path, calls: list[str], made: list[str], capsys
) -> None:
    config = tmp_path / "c.json"
    config.write_text(json.dumps({"train": {"env_wrappers": ["builtins:print"]}}))
    before = snapshot(tmp_path)
    assert main(["train", *TINY, "--config", str(config), "--out", str(tmp_path / "r")]) == 2
    assert "builtins:print" in one_error_line(capsys)
    with pytest.raises(UserError, match="builtins:print"):
        PPO("CartPole-v1", config=config)
    assert (calls, made, snapshot(tmp_path)) == ([], [], before)
    flatten = "gymnasium.wrappers:FlattenObservation"  # a real wrapper, imported already
    config.write_text(json.dumps({"train": {"env_wrappers": [flatten]}}))
    assert main(["train", *TINY, "--config", str(config), "--out", str(tmp_path / "r")]) == 2
    assert f"pass --env-wrapper {flatten} if it is your" in one_error_line(capsys)
    assert main(["train", *TINY, "--config", str(config), "--env-wrapper", flatten,
                 "--out", str(tmp_path / "r")]) == 0


@pytest.mark.parametrize("spec", [*FUNCTIONS, "json:dumps", "gymnasium:Env",
                                  "gymnasium.spaces:Box"])
def test_a_named_wrapper_must_be_a_gymnasium_wrapper_class(
    spec: str, tmp_path: Path, calls: list[str], made: list[str], capsys
) -> None:
    assert main(["train", *TINY, "--env-wrapper", spec, "--out", str(tmp_path / "r")]) == 2
    assert f"--env-wrapper {spec}" in (err := one_error_line(capsys))
    assert "not a gymnasium.Wrapper subclass" in err
    with pytest.raises(UserError, match="not a gymnasium.Wrapper subclass"):
        PPO("CartPole-v1", env_wrappers=[spec])
    assert (calls, made) == ([], [])
    assert not (tmp_path / "r").exists()


# --------------------------------------------- env ids a run's files name are never imported

def test_reproduces_evaluation_of_a_run_whose_header_names_a_module_imports_nothing(
    finished: Path, tmp_path: Path, monkeypatch
) -> None:
    """`xlvin reproduce` evaluates a cell that has a summary but no eval.json with
    `evaluate_run`, which reads the weights' header: an env id naming a module there is
    refused as not registered, not handed to gym.make (which would import the module)."""
    imported = planted(tmp_path, monkeypatch)
    run = copy_run(finished, tmp_path / "run")
    set_config(run, env="xlvin_planted:Env")
    assert header(run / MODEL)["config"]["train"]["env"] == "xlvin_planted:Env"
    with pytest.raises(UserError, match="not in gymnasium's registry"):
        evaluate_run(run, 1, 0)
    assert not imported.exists() and "xlvin_planted" not in sys.modules
