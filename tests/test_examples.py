"""Every script in examples/ and the README's Python block run as written (with a tiny budget),
so neither can go stale."""

import json
import re
import runpy
import sys
import warnings
from pathlib import Path

import pytest

import xlvin
from xlvin.cli import main

ROOT = Path(__file__).resolve().parents[1]
EXAMPLES = ROOT / "examples"


def run_example(name: str, *args: str, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(sys, "argv", [name, *args])
    runpy.run_path(str(EXAMPLES / name), run_name="__main__")


def test_examples_folder_holds_the_five_examples() -> None:
    assert sorted(p.name for p in EXAMPLES.glob("*.py")) == [
        "cartpole_api.py", "corridor.py", "many_seeds.py", "own_executor.py",
        "xlvin_single_file.py"]


def test_single_file_example_from_the_command_line(monkeypatch: pytest.MonkeyPatch, capsys) -> None:
    """Its flags as written (its numbers: tests/test_single_file.py)."""
    run_example("xlvin_single_file.py", "--total-steps", "64", "--num-envs", "2", "--num-steps",
                "32", "--transe-episodes", "5", "--transe-epochs", "1", "--anneal-lr", "false",
                monkeypatch=monkeypatch)
    out = capsys.readouterr().out
    assert "TransE on " in out and "update 1/1, 64 steps" in out


@pytest.mark.usefixtures("tiny_default_executors")
def test_cartpole_api_example(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys) -> None:
    for _ in range(2):  # twice: the second run's save overwrites the first's
        run_example("cartpole_api.py", "--tiny", "--out", str(tmp_path / "cp"),
                    monkeypatch=monkeypatch)
        out = capsys.readouterr().out
        assert re.search(r"action [01], V\(s\) = -?\d", out) and "over 10 episodes" in out
    # the example's run directory is an `xlvin evaluate` one
    assert main(["evaluate", str(tmp_path / "cp"), "--episodes", "2"]) == 0


@pytest.mark.usefixtures("tiny_default_executors")
def test_corridor_example_and_its_module_from_the_command_line(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys
) -> None:
    run_example("corridor.py", "--tiny", "--out", str(tmp_path / "api"), monkeypatch=monkeypatch)
    assert "greedy return" in capsys.readouterr().out
    monkeypatch.chdir(EXAMPLES)  # the module the user names is found in the current folder
    monkeypatch.delitem(sys.modules, "corridor", raising=False)
    out = tmp_path / "cli"
    assert main(["train", "--gym-packages", "corridor", "--env", "Corridor-v0", "--env-kwargs",
                 "length=5", "--agent", "ppo", "--num-envs", "2", "--num-steps", "16",
                 "--total-steps", "64", "--quiet", "--out", str(out)]) == 0
    assert main(["evaluate", str(out), "--gym-packages", "corridor", "--episodes", "3"]) == 0
    assert "over 3 episodes" in capsys.readouterr().out
    sys.modules.pop("corridor")


@pytest.mark.usefixtures("tiny_default_executors")
def test_own_executor_example(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys) -> None:
    run_example("own_executor.py", "--tiny", "--family", "grid", "--out", str(tmp_path / "grid"),
                monkeypatch=monkeypatch)
    out = capsys.readouterr().out
    assert "held-out policy accuracy" in out and "greedy return" in out
    executor = tmp_path / "grid-executor.safetensors"
    assert executor.is_file()
    # ... and with a file instead of pre-training
    run_example("own_executor.py", "--tiny", "--executor", str(executor),
                "--out", str(tmp_path / "file"), monkeypatch=monkeypatch)
    assert "held-out" not in capsys.readouterr().out


@pytest.mark.usefixtures("tiny_default_executors")
def test_many_seeds_example(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys) -> None:
    """Three seeds of each agent together, each a solo run's directory; the comparison says
    'not compared' at three seeds."""
    run_example("many_seeds.py", "--tiny", "--out", str(tmp_path / "many"),
                monkeypatch=monkeypatch)
    out = capsys.readouterr().out
    assert "PPO, 3 seeds: final return IQM" in out and "XLVIN-R, 3 seeds" in out
    assert "XLVIN-R and PPO are not compared (CartPole-v1, final policy, 3 seeds each" in out
    for agent in ("PPO", "XLVIN-R"):
        assert sorted(p.name for p in (tmp_path / "many" / agent).iterdir()) == [
            "seed-0", "seed-1", "seed-2"]
    assert main(["evaluate", str(tmp_path / "many" / "XLVIN-R" / "seed-2"), "--episodes",
                 "2"]) == 0


def readme_python_block() -> str:
    text = (ROOT / "README.md").read_text()
    section = text[text.index("## Python API"):]
    return re.search(r"```python\n(.*?)```", section, re.DOTALL).group(1)


@pytest.mark.usefixtures("tiny_default_executors")
def test_readme_python_block_runs(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys) -> None:
    """The block itself, with its 51,200 and 10,240 steps cut to 256 and 64, its evaluations
    every 128 steps (and the pre-training to a few episodes): the only edits made to it. Its
    totals are whole rollouts: it runs without a warning; and it runs twice, its saves
    overwritten by the second run's (issue 58)."""
    code = readme_python_block()
    assert "total_steps=51_200" in code and "depth=2, seed=0)" in code
    assert "total_steps=10_240" in code and "every=10_000" in code
    assert "num_timesteps 61,440" in code  # its comment: 51,200 + 10,240, whole rollouts of 512
    model = xlvin.XLVIN("CartPole-v1", depth=2, seed=0)
    assert 51_200 % model.config.ppo.batch_size == 0 and 10_240 % model.config.ppo.batch_size == 0
    code = code.replace("total_steps=51_200", "total_steps=256").replace(
        "total_steps=10_240", "total_steps=64").replace("every=10_000", "every=128").replace(
        "depth=2, seed=0)", "depth=2, seed=0, num_envs=2, num_steps=32, transe_episodes=5, "
        "transe_epochs=1)")
    monkeypatch.chdir(tmp_path)
    (tmp_path / "readme.py").write_text(code)
    for _ in range(2):
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            runpy.run_path(str(tmp_path / "readme.py"), run_name="__main__")
        assert float(capsys.readouterr().out.strip().splitlines()[-1]) > 0
        assert (tmp_path / "runs" / "cp" / "model.safetensors").is_file()
        assert (tmp_path / "runs" / "best" / "model.safetensors").is_file()
        assert json.loads((tmp_path / "runs" / "cp" / "summary.json").read_text())["ppo"][
            "env_steps"] == 256 + 64
