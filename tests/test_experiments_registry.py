"""The one experiment registry: every entry builds its `xlvin reproduce` parser, `xlvin
reproduce` and `xlvin sweep` both read `registry.EXPERIMENTS`, and a --results that is a file,
or that holds a corrupt results file the report would keep cells from, is refused before any
cell trains."""

import argparse
import dataclasses
import os
from pathlib import Path

import pytest

from xlvin.cli import build_parser, main
from xlvin.experiments import maze, registry


def subcommands(parser: argparse.ArgumentParser) -> dict[str, argparse.ArgumentParser]:
    (action,) = [a for a in parser._actions if isinstance(a, argparse._SubParsersAction)]
    return action.choices


def choices(parser: argparse.ArgumentParser, command: str) -> list[str]:
    """The names `xlvin COMMAND` takes (`reproduce`: its EXPERIMENTs)."""
    return list(subcommands(subcommands(parser)[command]))


@pytest.mark.parametrize("name", list(registry.EXPERIMENTS))
def test_every_entry_builds_its_parser(name: str, capsys: pytest.CaptureFixture) -> None:
    experiment = registry.EXPERIMENTS[name]
    assert main(["reproduce", name, "--help"]) == 0
    assert "--results" in capsys.readouterr().out
    args = build_parser().parse_args(["reproduce", name])
    assert (args.seeds, args.first_seed) == (experiment.seeds, experiment.first_seed)
    assert (args.runs, args.results) == (experiment.runs, experiment.results)
    assert args.finished_only is False and args.include_running is False
    assert experiment.report is not None


def test_reproduce_and_sweep_read_the_one_registry(monkeypatch: pytest.MonkeyPatch) -> None:
    parser = build_parser()
    assert choices(parser, "reproduce") == list(registry.EXPERIMENTS)
    assert choices(parser, "sweep") == ["table1", "atari", "maze", "contextual-maze"]
    assert all(any(e is entry for entry in registry.EXPERIMENTS.values())
               for e in registry.on_ray().values())
    assert registry.on_ray()["table1"] is registry.EXPERIMENTS["classic"]
    # an entry added to the registry is a subcommand of both
    extra = dataclasses.replace(registry.CLASSIC, sweep_name="extra", sweep_help="extra")
    monkeypatch.setitem(registry.EXPERIMENTS, "extra", extra)
    parser = build_parser()
    assert "extra" in choices(parser, "reproduce") and "extra" in choices(parser, "sweep")


def test_results_that_is_a_file_is_refused_before_any_cell(
    tmp_path: Path, capsys: pytest.CaptureFixture
) -> None:
    results = tmp_path / "results"
    results.write_text("not a folder")
    code = main(["reproduce", "classic", "--envs", "CartPole-v0", "--agents", "ppo", "--seeds",
                 "1", "--runs", str(tmp_path / "runs"), "--results", str(results)])
    err = capsys.readouterr().err
    assert code == 2 and err == (f"xlvin: error: --results {results}: {results} is a file, not "
                                 "a folder\n")
    assert not (tmp_path / "runs").exists() and results.read_text() == "not a folder"


#: The results file whose other cells each experiment's report keeps (`read_earlier`).
EARLIER = {"classic": "table1-paper.json", "executor-ablation": "executor.json",
           "maze-ablation": "maze.json", "atari": "atari.json", "continuous": "continuous.json",
           "executor-latent-trees": "latent-trees.json", "executor-probes": "probes.json",
           "executor-oracle": "maze.json",
           **{name: "maze.json" for name in maze.EXPERIMENTS}}


@pytest.mark.parametrize("name", list(registry.EXPERIMENTS))
def test_a_corrupt_earlier_results_file_is_refused_before_any_cell(
    name: str, tmp_path: Path, capsys: pytest.CaptureFixture
) -> None:
    """Found after hours of training, a truncated results file would lose them: it is one line
    before anything is made, and the file is left as it was."""
    if name not in EARLIER:
        assert registry.EXPERIMENTS[name].read_earlier(tmp_path) is None  # keeps nothing
        return
    results = tmp_path / "results"
    results.mkdir()
    (results / EARLIER[name]).write_text('{"rows": [')
    code = main(["reproduce", name, "--seeds", "1", "--runs", str(tmp_path / "runs"),
                 "--results", str(results)])
    err = capsys.readouterr().err
    assert code == 2 and err.count("\n") == 1, err
    assert err.startswith(f"xlvin: error: corrupt results in {results / EARLIER[name]}")
    assert not (tmp_path / "runs").exists() and os.listdir(results) == [EARLIER[name]]
    assert (results / EARLIER[name]).read_text() == '{"rows": ['
    sweep_name = registry.EXPERIMENTS[name].sweep_name
    if sweep_name:  # `xlvin sweep` too, before Ray starts
        code = main(["sweep", sweep_name, "--seeds", "1", "--runs", str(tmp_path / "runs"),
                     "--results", str(results)])
        err = capsys.readouterr().err
        assert code == 2 and err.startswith("xlvin: error: corrupt results in"), err
        assert not (tmp_path / "runs").exists()


def worked_example() -> str:
    """The experiment module of docs/architecture.md's "How to add an experiment"."""
    page = (Path(__file__).resolve().parents[1] / "docs" / "architecture.md").read_text()
    section = page.split("#### How to add an experiment: a worked example", 1)[1]
    return section.split("```python\n", 1)[1].split("```\n", 1)[0]


def test_the_worked_example_runs_as_written(
    tmp_path: Path, capsys: pytest.CaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Under 150 lines; entered in the registry, `xlvin reproduce cartpole-online` trains its
    cells, a second call with --finished-only tables them again, and `xlvin sweep` offers it."""
    code = worked_example()
    assert len(code.splitlines()) < 150
    (tmp_path / "cartpole_online.py").write_text(code)
    monkeypatch.syspath_prepend(str(tmp_path))
    import cartpole_online

    monkeypatch.setitem(registry.EXPERIMENTS, "cartpole-online", cartpole_online.EXPERIMENT)
    runs, results = tmp_path / "runs", tmp_path / "results"
    options = ["--agents", "ppo", "--seeds", "2", "--steps", "32", "--jobs", "1",
               "--runs", str(runs), "--results", str(results)]
    assert main(["reproduce", "cartpole-online", *options]) == 0
    out = capsys.readouterr().out
    md = (results / "cartpole_online.md").read_text()
    assert md.startswith("| agent | final return") and "| ppo | " in md and md in out + "\n"
    assert out.endswith(f"wrote {results}/cartpole_online.md, .json; runs under {runs}\n")
    assert main(["reproduce", "cartpole-online", *options, "--finished-only"]) == 0
    assert (results / "cartpole_online.md").read_text() == md
    assert "cartpole-online" in choices(build_parser(), "sweep")
