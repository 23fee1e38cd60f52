"""Property-based fuzzing of every results reader (`Experiment.read_earlier`: the earlier
results file a report keeps entries of): Table 1's other protocol, the executor ablation, the
mazes, the maze ablation, Atari and continuous actions. Each starts from entries of the
committed results, then drops fields, puts any JSON in their place, copies entries many times,
or replaces whole sections. Whatever the file holds, reading it is one UserError line that
writes nothing, or it is kept and the report is then written from it without another exception.

The figures are drawn but not rendered (`atomic_savefig` stubbed), the maze statistics'
histograms of the data sets skipped and the maze ablation's bootstraps made short: what is
fuzzed is what the reports read of each entry, not matplotlib's rasteriser or the statistics."""

import copy
import functools
import json
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from xlvin.errors import UserError
from xlvin.experiments import (
    atari_report,
    continuous,
    executor_ablation,
    maze_ablation,
    maze_ablation_report,
    maze_report,
    table1_report,
)
from xlvin.stats import summarize

RESULTS = Path(__file__).resolve().parents[1] / "results"
FUZZ = settings(max_examples=25, deadline=None, database=None,
                suppress_health_check=[HealthCheck.too_slow,
                                       HealthCheck.function_scoped_fixture])

scalars = (st.none() | st.booleans() | st.integers(-5, 2**40) | st.integers(-(2**80), 2**80)
           | st.floats(allow_nan=True, allow_infinity=True) | st.text(max_size=8)
           | st.sampled_from(["ppo", "paper", "ours", "CartPole-v0", "Freeway", "maze", "8",
                              "xlvin-r", "pytorch", "Pendulum-v1"]))
json_values = st.recursive(
    scalars, lambda inner: st.lists(inner, max_size=3) | st.dictionaries(
        st.text(max_size=6) | st.sampled_from(["iqm", "8", "16", "1", "level", "mean"]), inner,
        max_size=3), max_leaves=8)


def committed(path: str) -> dict[str, Any]:
    return json.loads((RESULTS / path).read_text())


@dataclass
class Reader:
    """A results reader: its file, a small valid file to start from, and the report that keeps
    the file's entries (`write`, into the results folder, with fresh records of other cells)."""

    name: str
    seed: dict[str, Any]
    read_earlier: Callable[[Path], Any]
    write: Callable[[Path], Any]


def _table1() -> Reader:
    ours, paper = committed("table1-ours.json"), committed("table1-paper.json")
    runs = [{k: v for k, v in r.items() if k not in ("progress", "training_returns")}
            for r in ours["runs"] if r["env"] == "CartPole-v0" and r["seed"] < 3]
    fresh = [r for r in paper["runs"] if r["env"] == "CartPole-v0" and r["agent"] == "ppo"]
    return Reader("table1-ours.json", {"rows": ours["rows"][:4], "runs": runs},
                  table1_report.read_earlier,
                  lambda results: table1_report.write_results(fresh, results, None))


def _executor_ablation() -> Reader:
    rows = committed("ablation/executor.json")["rows"]
    apart = ("ours", "orthogonal", "CartPole-v0")  # the key the fresh records bring
    fresh = [{"protocol": r["protocol"], "init": r["init"], "env": r["env"], "arm": r["arm"],
              "agent": r["agent"], "variant": r["variant"], "seed": seed,
              "final_return": final, "max_eval_return": best}
             for r in rows if (r["protocol"], r["init"], r["env"]) == apart
             for seed, final, best in zip(r["seeds"], r["final"]["per_seed"],
                                          r["max_eval"]["per_seed"])]
    kept = [r for r in rows if (r["protocol"], r["init"], r["env"]) != apart][:3]
    return Reader("executor.json", {"rows": kept}, executor_ablation.read_earlier,
                  lambda results: executor_ablation.write_results(fresh, results))


def _maze() -> Reader:
    runs = committed("maze.json")["runs"]
    fresh = [maze_report._canonical(runs[2])]
    return Reader("maze.json", {"runs": runs[:2]}, maze_report.read_earlier,
                  lambda results: maze_report.write_results(fresh, results, None))


def _maze_ablation() -> Reader:
    data = committed("ablation/maze.json")
    return Reader("maze.json", {"runs": data["runs"][:3], "geometry": data["geometry"]},
                  maze_ablation_report.read_earlier,
                  lambda results: maze_ablation_report.write_results(data["runs"][3:5], results))


def _atari() -> Reader:
    cells = committed("atari.json")["cells"]
    fresh = [atari_report._canonical(cells[2])]
    return Reader("atari.json", {"cells": cells[:2]}, atari_report.read_earlier,
                  lambda results: atari_report.write_results(fresh, results))


def _continuous() -> Reader:
    data = committed("continuous.json")
    envs = list(dict.fromkeys(r["env"] for r in data["runs"]))
    kept_runs = [r for r in data["runs"] if r["env"] == envs[0]][:3]
    fresh = [r for r in data["runs"] if r["env"] == envs[1]][:3]
    rows = [r for r in data["rows"] if r["env"] not in envs[:2]][:2]

    def write(results: Path) -> None:
        # the cells of the kept runs, unfinished here (no run directories): their kept records
        cells = [continuous.Cell.of(r) for r in kept_runs]
        records = fresh + continuous.kept_runs(results, cells)
        continuous.write_results(records, results)

    return Reader("continuous.json", {"rows": rows, "runs": kept_runs}, continuous.read_earlier,
                  write)


READERS = {reader.__name__.strip("_"): reader for reader in (
    _table1, _executor_ablation, _maze, _maze_ablation, _atari, _continuous)}


@pytest.fixture(autouse=True)
def quick_reports(monkeypatch: pytest.MonkeyPatch) -> None:
    for module in (table1_report, executor_ablation, maze_report, maze_ablation_report,
                   atari_report, continuous):
        monkeypatch.setattr(module, "atomic_savefig", lambda fig, path, **kwargs: None)
    monkeypatch.setattr(maze_report, "plot_stats", lambda curriculum, path: None)
    monkeypatch.setattr(maze_ablation, "summarize", functools.partial(summarize, reps=10))
    monkeypatch.setattr(maze_ablation, "improvement_over",
                        lambda x, y, family=1: {"p": 0.5, "low": 0.0, "high": 1.0,
                                                "family_low": 0.0, "family_high": 1.0})


@functools.cache
def reader(name: str) -> Reader:
    return READERS[name]()


def _paths(node: Any) -> list[tuple[Any, Any]]:
    """(container, key) of every value under `node`."""
    found = []
    items = node.items() if isinstance(node, dict) else enumerate(node) if isinstance(
        node, list) else ()
    for key, value in items:
        found.append((node, key))
        found += _paths(value)
    return found


@st.composite
def mutated(draw: st.DrawFn, seed: dict[str, Any]) -> dict[str, Any]:
    """`seed` with one to three fields dropped, replaced by any JSON, or (in a list) copied."""
    data = copy.deepcopy(seed)
    for _ in range(draw(st.integers(1, 3))):
        paths = _paths(data)
        if not paths:
            break
        container, key = draw(st.sampled_from(paths))
        how = draw(st.sampled_from(["drop", "replace", "replace", "copies"]))
        if how == "drop":
            del container[key]
        elif how == "replace":
            container[key] = draw(json_values)
        elif isinstance(container, list):
            container[key:key + 1] = [container[key]] * draw(st.integers(2, 40))
    return data


def read_then_write(name: str, data: Any, results: Path) -> None:
    """The file holding `data` is one UserError line that writes nothing, or kept: the report
    is then written from it."""
    results.mkdir(exist_ok=True)
    for old in results.iterdir():
        old.unlink()
    path = results / reader(name).name
    path.write_text(json.dumps(data))
    try:
        reader(name).read_earlier(results)
    except UserError as err:
        assert str(err) and "\n" not in str(err)
        assert sorted(p.name for p in results.iterdir()) == [path.name]
        return
    try:
        reader(name).write(results)
    except UserError as err:  # the fresh records', or the report's own refusal
        assert str(err) and "\n" not in str(err)


@pytest.mark.parametrize("name", READERS)
def test_the_committed_entries_are_kept(name: str, tmp_path: Path) -> None:
    read_then_write(name, reader(name).seed, tmp_path)
    assert len(list(tmp_path.iterdir())) > 1


@pytest.mark.parametrize("name", READERS)
@FUZZ
@given(data=st.data())
def test_any_results_file_is_kept_or_one_line(name: str, data: st.DataObject,
                                              tmp_path: Path) -> None:
    read_then_write(name, data.draw(mutated(reader(name).seed)), tmp_path)


@pytest.mark.parametrize("name", READERS)
@pytest.mark.parametrize("case", ["empty records", "a million empty records", "not a list",
                                  "not an object", "every field null"])
def test_odd_files_are_one_line_at_once(name: str, case: str, tmp_path: Path) -> None:
    seed = reader(name).seed
    section = next(k for k, v in seed.items() if isinstance(v, list) and v)
    data: Any = {**seed}
    if case == "empty records":
        data[section] = [{}]
    elif case == "a million empty records":
        data[section] = [{}] * 10**6
    elif case == "not a list":
        data[section] = {"0": seed[section][0]}
    elif case == "not an object":
        data = [seed]
    else:
        data[section] = [dict.fromkeys(seed[section][0])]
    start = time.perf_counter()
    with pytest.raises(UserError) as err:
        (tmp_path / reader(name).name).write_text(json.dumps(data))
        reader(name).read_earlier(tmp_path)
    assert time.perf_counter() - start < 10
    assert str(tmp_path / reader(name).name) in str(err.value) and "\n" not in str(err.value)


#: The readers that keep a row's IQM and interval as written (the others keep per-seed values
#: and compute their intervals again).
KEEP_INTERVALS = ("table1", "executor_ablation", "continuous")


@pytest.mark.parametrize("name", KEEP_INTERVALS)
def test_an_interval_out_of_order_is_one_line(name: str, tmp_path: Path) -> None:
    """An IQM above its interval's top (found by the fuzzing above: the plot's error bar was
    negative and matplotlib raised) is refused when the file is read, naming the field."""
    data = copy.deepcopy(reader(name).seed)
    container, key = next((c, k) for c, k in _paths(data)
                          if isinstance(c[k], dict) and {"iqm", "iqm_high"} <= set(c[k]))
    container[key]["iqm_high"] = container[key]["iqm"] - 1
    (tmp_path / reader(name).name).write_text(json.dumps(data))
    with pytest.raises(UserError, match="is not between iqm_low"):
        reader(name).read_earlier(tmp_path)


def test_a_null_where_a_number_may_be_missing_is_one_line(tmp_path: Path) -> None:
    """A maze level's `seconds` may be missing (runs from before levels were timed), never null
    (found by the fuzzing above: the report added None to a float). `Optional` allows a field
    to be missing; only `Nullable` allows null."""
    data = copy.deepcopy(reader("maze_ablation").seed)
    data["runs"][0]["levels"][0]["seconds"] = None
    (tmp_path / "maze.json").write_text(json.dumps(data))
    with pytest.raises(UserError, match=r"levels\[0\]\.seconds: expected a number, got null"):
        reader("maze_ablation").read_earlier(tmp_path)
