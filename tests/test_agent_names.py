"""One canonical name per agent (`xlvin.run.agents.AGENT_NAMES`), accepted wherever an agent
is named (`xlvin train --agent`, every `--agents` of `xlvin reproduce` and `xlvin sweep`, the
Python API) with the older spellings as aliases; run directories of runs made before keep their
names; an unknown name is one line with the closest name."""

import sys
from pathlib import Path

import pytest

from xlvin import Model, UserError, register_agent
from xlvin.cli import build_parser, main
from xlvin.commands.train import run_config
from xlvin.experiments import atari, maze, table1
from xlvin.experiments.figures import pyplot
from xlvin.run.agents import AGENT_ALIASES, AGENT_NAMES, agent_fields, agent_name, resolve_agent
from xlvin.run.saved import saved_config
from xlvin.run.config import RunConfig, TrainConfig

CANONICAL = ["ppo", "xlvin-r", "xlvin-cp", "atreec", "vin", "vin-mean", "vin-max", "gvin"]
#: Older spellings and other cases -> the canonical name they stand for.
SPELLINGS = {
    **AGENT_ALIASES,
    "XLVIN-R": "xlvin-r", "XLVIN_CP": "xlvin-cp", "ATreeC": "atreec", "PPO": "ppo",
    "VIN-mean": "vin-mean", "VIN": "vin", "GVIN": "gvin",
}


def test_every_built_in_agent_has_one_lowercase_hyphenated_name() -> None:
    assert list(AGENT_NAMES) == CANONICAL
    assert all(name == name.lower() and "_" not in name for name in AGENT_NAMES)
    assert AGENT_ALIASES == {"xlvin_r": "xlvin-r", "xlvin_cp": "xlvin-cp",
                             "vin_mean": "vin-mean", "vin_max": "vin-max"}


@pytest.mark.parametrize("spelling", SPELLINGS)
def test_each_alias_resolves_to_its_canonical_name(spelling: str) -> None:
    assert resolve_agent(spelling) == SPELLINGS[spelling]
    assert agent_fields(spelling) == AGENT_NAMES[SPELLINGS[spelling]]


def test_xlvin_alone_is_xlvin_with_the_executor_of_executor() -> None:
    """`--agent xlvin` keeps its meaning: XLVIN, the executor of --executor (default random,
    which is xlvin-r); in a list of agents without an `xlvin` of its own it is xlvin-r."""
    assert resolve_agent("xlvin") == "xlvin"
    assert agent_fields("xlvin") == {"agent": "xlvin"}
    assert resolve_agent("xlvin", table1.AGENTS) == "xlvin-r"
    assert resolve_agent("xlvin", tuple(maze.AGENTS)) == "xlvin"  # the maze's own XLVIN
    assert (agent_name("xlvin", "random"), agent_name("xlvin", "cartpole")) == ("xlvin-r", "xlvin-cp")
    assert agent_name("xlvin", "maze") == "xlvin" and agent_name("vin-mean", "random") == "vin-mean"


def train_fields(*flags: str) -> tuple[str, str]:
    """(agent, executor) of the config `xlvin train FLAGS` would train (parsed, not trained)."""
    args = build_parser().parse_args(["train", "--out", "unused", *flags])
    t = run_config(args).train
    return t.agent, t.executor


@pytest.mark.parametrize("name", [*CANONICAL, *SPELLINGS])
def test_train_agent_takes_every_name(name: str) -> None:
    fields = AGENT_NAMES[SPELLINGS.get(name, name)]
    assert train_fields("--agent", name) == (fields["agent"], fields.get("executor", "random"))


def test_train_agent_and_executor_agree_or_are_refused(capsys: pytest.CaptureFixture) -> None:
    assert train_fields("--agent", "xlvin", "--executor", "random") == ("xlvin", "random")
    assert train_fields("--agent", "xlvin", "--executor", "cartpole") == ("xlvin", "cartpole")
    assert train_fields("--agent", "xlvin-cp", "--executor", "cartpole") == ("xlvin", "cartpole")
    assert train_fields("--agent", "xlvin", "--executor", "maze") == ("xlvin", "maze")
    assert main(["train", "--agent", "xlvin-cp", "--executor", "random", "--out", "unused"]) == 2
    err = capsys.readouterr().err.strip()
    assert err == ("xlvin: error: --agent xlvin-cp runs the 'cartpole' executor, not --executor "
                   "random: use --agent xlvin-r")


def test_the_python_api_and_config_files_take_every_name(tmp_path: Path) -> None:
    model = Model("CartPole-v1", agent="XLVIN_CP")
    assert (model.config.train.agent, model.config.train.executor) == ("xlvin", "cartpole")
    assert TrainConfig(agent="xlvin-cp").executor == "cartpole"  # the default gives way
    assert TrainConfig(agent="vin_mean").agent == "vin-mean"
    with pytest.raises(UserError, match="runs the 'random' executor, not --executor maze"):
        TrainConfig(agent="xlvin-r", executor="maze")
    with pytest.raises(UserError, match="use --agent xlvin-r"):
        RunConfig.from_json({"train": {"agent": "xlvin-cp", "executor": "random"}}, "file")
    with pytest.raises(UserError, match="built-in agent xlvin-r"):
        register_agent("xlvin_r", lambda arch, spaces, processor: None)


def reproduce_args(*argv: str):
    return build_parser().parse_args(["reproduce", *argv])


def test_reproduce_and_sweep_agents_take_canonical_names_and_aliases(tmp_path: Path) -> None:
    args = reproduce_args("classic", "--agents", "XLVIN-R,xlvin_cp,ppo", "--envs", "cartpole-v0")
    cells = table1.cells_from_options(1, args)
    assert [(c.env, c.agent) for c in cells] == [
        ("CartPole-v0", "xlvin-r"), ("CartPole-v0", "xlvin-cp"), ("CartPole-v0", "ppo")]
    assert cells[0].run_dir(tmp_path) == tmp_path / "paper/standard/CartPole-v0/xlvin-r/seed0"
    assert cells[1].config().train.executor == "cartpole"

    args = reproduce_args("atari", "--agents", "xlvin-r,xlvin_cp", "--games", "freeway")
    cells = atari.cells_from_options(1, args)
    assert [c.agent for c in cells] == ["xlvin-r", "xlvin-cp"]
    # the directories the runs made before the canonical names are in: they resume
    assert [c.run_dir(tmp_path).parent.name for c in cells] == ["xlvin_r", "xlvin_cp"]
    assert [c.config().train.executor for c in cells] == ["random", "cartpole"]

    sweep = build_parser().parse_args(["sweep", "atari", "--agents", "xlvin_r", "--games", "Alien"])
    assert [c.agent for c in atari.cells_from_options(1, sweep)] == ["xlvin-r"]
    with pytest.raises(UserError, match="agent xlvin-r given more than once"):
        table1.cells_from_options(1, reproduce_args("classic", "--agents", "xlvin-r,xlvin_r"))


def test_maze_agents_keep_their_run_directories(tmp_path: Path) -> None:
    """vin-mean and vin-max train in the vin_mean and vin_max folders of the runs made before,
    and a config.json saved with the old name reads as the same config: such a run resumes."""
    args = build_parser().parse_args(
        ["reproduce", "maze", "--agents", "vin_mean,vin-max,xlvin", "--quick"])
    cells = maze.cells_from_options("maze", 1, args)
    assert [c.agent for c in cells] == ["vin-mean", "vin-max", "xlvin"]
    assert [c.run_dir(tmp_path) for c in cells] == [
        tmp_path / "maze/vin_mean/seed0", tmp_path / "maze/vin_max/seed0", tmp_path / "maze/xlvin/seed0"]
    config = cells[0].config().to_json()
    assert config["train"]["agent"] == "vin-mean"
    old = {**config, "train": {**config["train"], "agent": "vin_mean"}}  # as saved before
    assert saved_config(old) == config


@pytest.mark.parametrize("argv, message", [
    (["train", "--agent", "xlvn-r"], "unknown agent 'xlvn-r'; did you mean xlvin-r?"),
    (["train", "--agent", "vin_men"], "unknown agent 'vin_men'; did you mean vin-mean?"),
    (["reproduce", "classic", "--agents", "ppo,xlvin-rr"],
     "unknown agent 'xlvin-rr'; did you mean xlvin-r? (choose from ppo, xlvin-r, xlvin-cp, atreec)"),
    (["reproduce", "atari", "--agents", "xlvin_cpp"], "did you mean xlvin-cp?"),
    (["reproduce", "maze", "--agents", "vin_maxx"], "did you mean vin-max?"),
    (["reproduce", "atari", "--games", "Freewya"], "unknown game 'Freewya'; did you mean Freeway?"),
    (["reproduce", "classic", "--envs", "Acrobot-v2"], "did you mean Acrobot-v1?"),
])
def test_a_misspelt_name_gets_the_closest_one_in_one_line(
    argv: list[str], message: str, tmp_path: Path, capsys: pytest.CaptureFixture
) -> None:
    assert main([*argv, "--out" if argv[0] == "train" else "--runs", str(tmp_path / "r")]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("xlvin: error:") and message in err and len(err.splitlines()) == 1
    assert not (tmp_path / "r").exists()


def test_without_matplotlib_figures_name_the_plots_extra(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture
) -> None:
    """Training needs no matplotlib; a command that ends in figures says, before it trains
    anything, which extra brings it."""
    monkeypatch.setitem(sys.modules, "matplotlib", None)  # `import matplotlib` raises ImportError
    with pytest.raises(UserError, match=r"pip install 'xlvin\[plots\]'"):
        pyplot()
    assert main(["reproduce", "classic", "--seeds", "1", "--runs", str(tmp_path / "runs")]) == 2
    err = capsys.readouterr().err
    assert err == ("xlvin: error: figures need matplotlib, which is not installed: pip install "
                   "'xlvin[plots]'\n")
    assert not (tmp_path / "runs").exists()
