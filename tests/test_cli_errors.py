"""Bad input: one clear line on stderr, a non-zero exit, and existing run directories untouched."""

import re
import resource
import subprocess
import sys
from pathlib import Path

import pytest

from xlvin import PPO
from xlvin.cli import main
from xlvin.errors import UserError


def snapshot(folder: Path) -> dict[str, bytes]:
    return {str(p.relative_to(folder)): p.read_bytes() for p in sorted(folder.rglob("*")) if p.is_file()}


@pytest.fixture
def existing_run(tmp_path: Path) -> Path:
    run = tmp_path / "existing"
    run.mkdir()
    (run / "config.json").write_text('{"train": {}}\n')
    (run / "model.safetensors").write_bytes(b"weights")
    return run


CASES = {
    "unknown env": (["train", "--env", "NoSuchEnv-v9", "--agent", "ppo"], "unknown environment"),
    "continuous actions": (["train", "--env", "Pendulum-v1", "--agent", "atreec"], "--agent atreec needs Discrete actions (use --agent ppo or xlvin)"),
    "negative depth": (["train", "--depth", "-1"], "--depth must be >= 0"),
    "zero lr": (["train", "--agent", "ppo", "--lr", "0"], "lr must be > 0"),
    "missing executor": (["train", "--executor", "/nonexistent.safetensors"], "neither 'random'"),
    "existing out": (["train", "--agent", "ppo"], "already holds a run"),
    "unknown agent": (["train", "--agent", "dqn"], "unknown agent 'dqn' (choose from ppo, xlvin-r, xlvin-cp"),
    "mistyped flag value": (["train", "--depth", "two"], "argument --depth: invalid int value"),
    "huge depth": (["train", "--agent", "xlvin", "--depth", "40"],
                   "--depth 40 with 2 actions builds more than"),
    "negative checkpoint interval": (["train", "--checkpoint-every", "-1"], "--checkpoint-every must be >= 0"),
    "resume nothing": (["train", "--resume"], "holds no run to resume"),
}


@pytest.mark.parametrize("case", CASES)
def test_train_rejects_bad_input(case: str, tmp_path: Path, existing_run: Path, capsys: pytest.CaptureFixture) -> None:
    args, message = CASES[case]
    out = existing_run if case == "existing out" else tmp_path / "new"
    before = snapshot(existing_run)
    code = main([*args, "--out", str(out), "--quiet"])
    err = capsys.readouterr().err.strip()
    assert code != 0
    assert message in err and err.startswith("xlvin: error:") and len(err.splitlines()) == 1
    assert snapshot(existing_run) == before
    assert not (tmp_path / "new").exists()


def test_corrupt_executor_file(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    bad = tmp_path / "bad.safetensors"
    bad.write_bytes(b"\x00" * 64)
    code = main(["train", "--executor", str(bad), "--out", str(tmp_path / "run"), "--quiet"])
    err = capsys.readouterr().err.strip()
    assert code != 0 and "corrupt executor file" in err and len(err.splitlines()) == 1
    assert not (tmp_path / "run").exists()


@pytest.mark.parametrize(
    "content, message",
    [("{not json", "corrupt JSON"), ('{"train": {"agnet": "ppo"}}', "unknown field(s) agnet"),
     ('{"ppo": {"lr": "fast"}}', "field 'lr' must be float"), ('{"trian": {}}', "unknown section")],
)
def test_bad_config_file(tmp_path: Path, content: str, message: str, capsys: pytest.CaptureFixture) -> None:
    config = tmp_path / "config.json"
    config.write_text(content)
    code = main(["train", "--config", str(config), "--out", str(tmp_path / "run"), "--quiet"])
    err = capsys.readouterr().err.strip()
    assert code != 0 and message in err and len(err.splitlines()) == 1
    assert not (tmp_path / "run").exists()


def test_evaluate_rejects_a_folder_that_is_not_a_run(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    assert main(["evaluate", str(tmp_path)]) != 0
    assert "not a finished run directory" in capsys.readouterr().err


def test_evaluate_rejects_corrupt_weights(existing_run: Path, capsys: pytest.CaptureFixture) -> None:
    assert main(["evaluate", str(existing_run)]) != 0
    assert "corrupt weights file" in capsys.readouterr().err


def test_every_option_has_help(capsys: pytest.CaptureFixture) -> None:
    commands = ([], ["train"], ["evaluate"], ["pretrain-executor"], ["eval-executor"], ["quickstart"],
                ["reproduce", "classic"], ["sweep"])
    for command in commands:
        assert main([*command, "--help"]) == 0
        text = capsys.readouterr().out
        assert "usage:" in text
    assert main(["train", "--help"]) == 0
    text = capsys.readouterr().out
    for flag in ("--env", "--agent", "--depth", "--executor", "--lr", "--transe-episodes", "--low-data-rounds"):
        assert flag in text


@pytest.mark.parametrize("argv, message", [
    (["reproduce", "classic", "--first-seed", "4294967296", "--seeds", "1"],
     "training seeds must be <= 4294967295"),
    (["reproduce", "classic", "--seeds", "100000000000", "--finished-only"],
     "--seeds must be in [1, 10000]"),
    (["reproduce", "maze", "--deadline-minutes", "nan", "--seeds", "1"],
     "--deadline-minutes must be a finite number > 0"),
    (["reproduce", "atari", "--deadline-minutes", "inf", "--seeds", "1"],
     "--deadline-minutes must be a finite number > 0"),
    (["reproduce", "classic", "--agents", "ppo,ppo", "--seeds", "1"],
     "agent ppo given more than once"),
    (["reproduce", "atari", "--games", "Freeway,Freeway", "--seeds", "1"],
     "game Freeway given more than once"),
])
def test_reproduce_refuses_out_of_range_numbers_before_making_anything(
    argv: list[str], message: str, tmp_path: Path, capsys: pytest.CaptureFixture
) -> None:
    code = main([*argv, "--runs", str(tmp_path / "runs"), "--results", str(tmp_path / "out")])
    err = capsys.readouterr().err.strip()
    assert code == 2 and message in err and "\n" not in err
    assert not (tmp_path / "runs").exists() and not (tmp_path / "out").exists()


def test_an_endless_config_file_is_refused_unread(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    code = main(["train", "--config", "/dev/zero", "--out", str(tmp_path / "run")])
    err = capsys.readouterr().err.strip()
    assert code == 2 and "/dev/zero is a character device, not a regular file" in err
    assert not (tmp_path / "run").exists()


def test_version(capsys: pytest.CaptureFixture) -> None:
    from xlvin import __version__

    assert main(["--version"]) == 0
    assert capsys.readouterr().out.strip() == f"xlvin {__version__}"


def test_train_help_lists_the_common_options_first(capsys: pytest.CaptureFixture) -> None:
    assert main(["train", "--help"]) == 0
    text = capsys.readouterr().out
    common = text[text.index("\ncommon options:"):text.index("\nTrainConfig options:")]
    for flag in ("--env", "--agent", "--total-steps", "--seed", "--depth", "--executor"):
        assert f"\n  {flag} " in common
    assert "--clip-coef" not in common and "--clip-coef" in text


def test_version_answers_without_importing_torch() -> None:
    """`xlvin --version` in well under a second: nothing heavy is imported for it."""
    code = ("import sys; from xlvin.cli import main; assert main(['--version']) == 0; "
            "assert 'torch' not in sys.modules and 'gymnasium' not in sys.modules, 'imported'")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("xlvin ")


def test_train_help_answers_at_once_without_importing_torch() -> None:
    """`xlvin train --help` builds the train command's parser only, from the torch-free config
    schema: no torch, no gymnasium, and under a second of CPU (it took 3.2 s with torch)."""
    code = ("import sys; from xlvin.cli import main; assert main(['train', '--help']) == 0; "
            "heavy = {'torch', 'gymnasium'} & set(sys.modules); assert not heavy, heavy")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    assert "--total-steps" in done.stdout
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    timed = subprocess.run([sys.executable, "-m", "xlvin.cli", "train", "--help"],
                           capture_output=True, text=True)
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    assert timed.returncode == 0 and timed.stdout == done.stdout
    assert cpu < 1.0, f"xlvin train --help took {cpu:.2f} s of CPU"


def test_each_command_alone_has_the_parser_it_has_among_all() -> None:
    """`COMMANDS` names every command, and a command line naming one builds its module's
    commands only, with the options they have in the whole parser."""
    from xlvin.cli import COMMANDS, _command_parser, _command_words, build_parser

    whole = build_parser()
    assert _command_words(whole) == set(COMMANDS)
    for word, module in COMMANDS.items():
        alone = build_parser([word])
        assert set(_command_words(alone)) == {w for w, m in COMMANDS.items() if m == module}
        assert (_command_parser(alone, [word]).format_help()
                == _command_parser(whole, [word]).format_help())


@pytest.mark.parametrize("argv, guess", [
    (["train", "--out", "r", "--total-timesteps", "100"], "did you mean --total-steps?"),
    (["reproduce", "classic", "--seedz", "3"], "did you mean --seeds?"),
    (["train", "--out", "r", "--zzzzzz"], None),
])
def test_an_unknown_option_names_the_closest_known_one(
    argv: list[str], guess: str | None, tmp_path: Path, capsys: pytest.CaptureFixture,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Did-you-mean from the options of the command given (not of another command)."""
    monkeypatch.chdir(tmp_path)
    assert main(argv) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("xlvin: error:") and len(err.splitlines()) == 1
    assert (guess in err) if guess else ("did you mean" not in err)
    assert not (tmp_path / "r").exists()


@pytest.mark.parametrize("env, hint", [
    ("Taxi-v3", "Please use `Taxi-v4` instead"),
    ("Cartpole-v1", "Did you mean: `CartPole`?"),
    ("xlvin_never_imported:Env-v0", "not in gymnasium's registry"),
])
def test_an_unknown_env_gets_gymnasiums_own_hint_in_one_line(
    env: str, hint: str, tmp_path: Path, capsys: pytest.CaptureFixture
) -> None:
    assert main(["train", "--env", env, "--out", str(tmp_path / "r")]) == 2
    err = capsys.readouterr().err.strip()
    assert hint in err and len(err.splitlines()) == 1
    assert ("module:Env" in err) == (":" in env)  # that hint only where the id names a module
    assert not (tmp_path / "r").exists()


@pytest.mark.parametrize("argv, message", [
    (["trian"], "argument COMMAND: invalid choice: 'trian' (choose from "),
    (["reproduce", "clasic"], "argument EXPERIMENT: invalid choice: 'clasic'"),
    (["evaluate", "r", "extra"], "unrecognized arguments: extra (see xlvin evaluate --help)"),
])
def test_a_mistyped_command_gets_a_suggestion_and_the_prefix_once(
    argv: list[str], message: str, capsys: pytest.CaptureFixture
) -> None:
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"xlvin: error: {message}") and err.count("xlvin:") == 1
    assert err.count("\n") == 1
    if "invalid choice" in message:
        assert f"; did you mean {'train' if argv == ['trian'] else 'classic'}?" in err


@pytest.mark.parametrize("argv, said", [
    (["--agent", "ppo", "--total-steps", str(10**29)], "FLOPs per forward pass, at"),
    (["--agent", "xlvin", "--depth", "12", "--total-steps", str(10**10)],
     "8,191 latent states per observation"),
])
def test_a_run_that_cannot_finish_is_refused_before_anything_is_built(
    tmp_path: Path, capsys: pytest.CaptureFixture, argv: list[str], said: str
) -> None:
    """Time and memory bound what a run may ask for: one line with the estimate, nothing made."""
    code = main(["train", "--env", "CartPole-v1", *argv, "--out", str(tmp_path / "run")])
    err = capsys.readouterr().err.strip()
    assert code == 2 and "\n" not in err and "would take at least" in err and said in err, err
    assert not (tmp_path / "run").exists()


def test_a_big_tree_that_fits_is_said_in_one_line_with_its_cost() -> None:
    """`XLVIN(depth=12)` on CartPole fits in memory, but its 8,191 latent states a minibatch
    observation cost gigabytes and minutes: the estimate says so; a default tree says nothing."""
    from xlvin import XLVIN
    from xlvin.run.checks import big_tree_notice

    deep = XLVIN("CartPole-v1", depth=12)
    notice = big_tree_notice(deep.config, deep.spaces, deep.architecture)
    assert notice is not None and "\n" not in notice
    assert notice.startswith("xlvin: --depth 12 builds 8,191 latent states per observation")
    assert "about 2.6 GiB for a minibatch of 128" in notice
    assert re.search(r"at least \d+h\d\dm of training", notice), notice  # 500,000 steps
    default = XLVIN("CartPole-v1")
    assert big_tree_notice(default.config, default.spaces, default.architecture) is None


def test_the_big_tree_line_comes_before_training(
    tmp_path: Path, capsys: pytest.CaptureFixture, monkeypatch: pytest.MonkeyPatch,
    executor_path: Path,
) -> None:
    """Printed by `train` before the run directory exists (here a small tree, with the
    threshold lowered so that it counts as big)."""
    from xlvin.run import checks, training as run

    seen = []
    monkeypatch.setattr(checks, "BIG_TREE_BYTES", 1)
    monkeypatch.setattr(run, "check_new_run_dir", lambda out: seen.append(
        (out.exists(), capsys.readouterr().err)))
    assert main(["train", "--env", "CartPole-v1", "--agent", "xlvin", "--depth", "2",
                 "--executor", str(executor_path), "--num-envs", "2", "--num-steps", "16",
                 "--pretrain-transe", "false", "--total-steps", "32", "--quiet",
                 "--out", str(tmp_path / "run")]) == 0
    existed, err = seen[0]
    assert not existed and "xlvin: --depth 2 builds 7 latent states per observation" in err


def test_a_field_error_names_its_fields_in_each_readers_terms() -> None:
    """Flags on the command line, keywords in Python (a number, a quoted string or a path joined
    with `=`, a word apart), the same error through a worker's pickle."""
    import pickle

    from xlvin.errors import FieldError

    err = FieldError("{depth=} with {:,} actions; {agent=} needs {env_wrappers}, {out=}", 12345,
                     depth=9, agent="vin", out="/tmp/run")
    assert err.field == "depth"
    assert str(err) == ("--depth 9 with 12,345 actions; --agent vin needs --env-wrapper, "
                        "--out /tmp/run")
    python = err.in_python()
    assert str(python) == "depth=9 with 12,345 actions; agent vin needs env_wrappers, out=/tmp/run"
    assert python.command_line_message == str(err)
    again = pickle.loads(pickle.dumps(python))
    assert (str(again), again.command_line_message, again.field) == (str(python), str(err), "depth")


@pytest.mark.parametrize("seeds", [[], ["--seeds", "0,3"]])
def test_a_target_kl_that_would_do_nothing_is_refused_as_in_python(
    seeds: list[str], tmp_path: Path, capsys: pytest.CaptureFixture
) -> None:
    """--target-kl acts between a low-data round's updates; on an online run (one update a
    round) it is one line before anything is made, as `target_kl=` is in Python; on a low-data
    run it is taken."""
    code = main(["train", "--env", "CartPole-v1", "--agent", "ppo", "--target-kl", "0.01",
                 *seeds, "--out", str(tmp_path / "run")])
    err = capsys.readouterr().err.strip()
    assert code == 2 and err.startswith("xlvin: error: --target-kl 0.01 skips the updates left")
    assert "a run of protocol online makes one update a round" in err and "\n" not in err
    assert not (tmp_path / "run").exists()
    with pytest.raises(UserError, match="^target_kl=0.01 skips the updates left"):
        PPO("CartPole-v1", target_kl=0.01)
    assert PPO("CartPole-v1", target_kl=0.01, protocol="low_data").config.ppo.target_kl == 0.01
