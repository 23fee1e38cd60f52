"""Every committed results table and figure renders byte-identically from its committed JSON
(an invariant of any restructuring), through the project's own writers: each case below
re-renders the files of one committed JSON into a temporary folder and compares their bytes
with the committed ones.

- Figures (PNG) are compared where the installed matplotlib is the one that drew the committed
  figure (the version its `Software` tag records): another matplotlib draws other pixels, and
  such figures skip. The Agg backend is byte-stable otherwise (no date in the PNG).
- `STALE`: committed files that an earlier version of the code rendered (the reason says what
  has changed since). Their rendering is pinned instead by its SHA-256 in
  tests/fixtures/committed-renders.json, and the test checks that they are still stale: re-render
  the committed file (its experiment's `--finished-only` / report command) and drop it here.
  `XLVIN_RECORD_FIXTURES=1` re-records those digests.
- `NOT_RENDERED`: committed tables and figures whose JSON does not hold what they are drawn
  from, with the reason; every other .md and .png under results/ must be rendered by a case
  (`test_every_committed_table_and_figure_is_rendered_or_says_why_not`).
"""

import hashlib
import json
import os
import re
import shutil
import subprocess
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from xlvin.experiments import (
    atari,
    atari_report,
    atari_vae_report,
    continuous,
    executor_ablation,
    executor_latent_trees_report,
    executor_probes_report,
    executor_true_trees_report,
    maze_ablation_report,
    maze_report,
    oracle_report,
    table1,
    table1_report,
)
from xlvin.run.agents import resolve_agent

ROOT = Path(__file__).parent.parent
RESULTS = ROOT / "results"
FIXTURE = Path(__file__).parent / "fixtures" / "committed-renders.json"
RECORD = os.environ.get("XLVIN_RECORD_FIXTURES") == "1"

#: A case renders into a folder of its own and returns {committed path under results/: bytes}.
Render = Callable[[Path], dict[str, bytes]]
#: name -> (render, the committed paths it renders).
CASES: dict[str, tuple[Render, tuple[str, ...]]] = {}


def case(name: str, *paths: str) -> Callable[[Render], Render]:
    def register(render: Render) -> Render:
        CASES[name] = (render, paths)
        return render
    return register


def committed(path: str) -> Any:
    return json.loads((RESULTS / path).read_text())


def outputs(folder: Path, prefix: str = "",
            names: dict[str, str] | None = None) -> dict[str, bytes]:
    """{committed path: bytes} of the tables and figures a writer wrote to `folder`: each
    file's name under `prefix`, or as `names` {file name: committed path} maps it."""
    names = names or {}
    return {names.get(p.name, prefix + p.name): p.read_bytes()
            for p in sorted(folder.iterdir()) if p.suffix in (".md", ".png")}


def with_json(folder: Path, source: str, name: str) -> Path:
    """`folder` holding a copy of the committed JSON `source` as `name`, as a writer finds it."""
    folder.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(RESULTS / source, folder / name)
    return folder


# Table 1 (xlvin.experiments.table1): each protocol's (and variant's) table and figure from its
# runs, through the writer, whatever the committed file's name; then the combined table.
TABLE1 = ["table1-paper", "table1-ours", "ablation/table1-paper-epochs-4x4+orthogonal-init",
          "ablation/table1-paper-no-layernorm", "ablation/table1-paper-orthogonal-init",
          "ablation/table1-paper-relu-messages", "authors-code/ours-paper-seeds0-9",
          "authors-code/ours-paper-seeds400-409",
          "authors-code/ours-paper-their-executor-seeds0-9", "beyond/heldout/table1-ours",
          "beyond/table1-ours-swa-20", "beyond/table1-ours-swa-50", "beyond/table1-paper-kl-0.01",
          "beyond/table1-paper-kl-0.03", "beyond/table1-paper-swa-20",
          "beyond/table1-paper-swa-50", "replicate/table1-paper-seeds300-309"]


def _table1(stem: str) -> Render:
    def render(folder: Path) -> dict[str, bytes]:
        data = committed(f"{stem}.json")
        table1_report.write_results(data["runs"], folder, data["wall_seconds"])
        (md,) = folder.glob("*.md")
        return outputs(folder, names={md.name: f"{stem}.md",
                                      md.with_suffix(".png").name: f"{stem}.png"})
    return render


for _stem in TABLE1:
    case(_stem, f"{_stem}.md", f"{_stem}.png")(_table1(_stem))


@case("table1", "table1.md", "table1.png")
def _table1_combined(folder: Path) -> dict[str, bytes]:
    """What `table1_report.write_results` writes once both protocols have results: the rows of
    table1.json, the runs of both protocols' files."""
    rows = committed("table1.json")["rows"]
    runs = [r for p in table1.PROTOCOLS for r in committed(f"table1-{p}.json")["runs"]]
    folder.mkdir(parents=True, exist_ok=True)
    table1_report.plot_combined(rows, runs, folder / "table1.png")
    return {"table1.md": table1_report.combined_markdown(rows).encode(),
            "table1.png": (folder / "table1.png").read_bytes()}


# The mazes (xlvin.experiments.maze, maze_ablation): one case, as the mazes they read (held-out
# splits, level counts) are generated once per process (seconds each).
_MAZE_FILES = ("maze.md", "maze_8x8.png", "maze_16x16.png", "maze_stats.png")
_MAZE_DIRS = ("", "maze-depth/", "maze-depth-k4/", "maze-width/")


@case("mazes", *(d + f for d in _MAZE_DIRS for f in _MAZE_FILES), "contextual_maze.png",
      "contextual_maze_16x16.png", "ablation/maze.md", "ablation/maze.png")
def _mazes(folder: Path) -> dict[str, bytes]:
    """Each maze.json through its writer, which (given no new records) renders its records."""
    rendered = {}
    for prefix in _MAZE_DIRS:
        out = with_json(folder / (prefix or "top"), f"{prefix}maze.json", "maze.json")
        # the invocation's wall time is an argument of the writer, not in maze.json: the
        # committed table's last line gives it
        wall = re.search(r"Wall time of this invocation: (\d+) s\.\n$",
                         (RESULTS / f"{prefix}maze.md").read_text())
        maze_report.write_results([], out, float(wall.group(1)) if wall else None)
        rendered.update(outputs(out, prefix))
    out = with_json(folder / "ablation", "ablation/maze.json", "maze.json")
    maze_ablation_report.write_results([], out)
    return {**rendered, **outputs(out, "ablation/")}


@case("ablation/executor", "ablation/executor.md", "ablation/executor.png")
def _executor_ablation(folder: Path) -> dict[str, bytes]:
    executor_ablation.write_results([], with_json(folder, "ablation/executor.json",
                                                 "executor.json"))
    return outputs(folder, "ablation/")


@case("why-executor/true-trees", "why-executor/true-trees.md", "why-executor/true-trees.png")
def _true_trees(folder: Path) -> dict[str, bytes]:
    """The executors on the mazes' true trees: the page and figure of its JSON."""
    data = committed("why-executor/true-trees.json")
    folder.mkdir(parents=True)
    executor_true_trees_report.plot(data, folder / "true-trees.png")
    return {"why-executor/true-trees.md": executor_true_trees_report.markdown(data).encode(),
            **outputs(folder, "why-executor/")}


@case("why-executor/latent-trees", "why-executor/latent-trees.md",
      "why-executor/latent-trees.png")
def _latent_trees(folder: Path) -> dict[str, bytes]:
    """The trained agents' latent trees: the records of its JSON through the writer (which
    keeps every cell it does not measure again)."""
    executor_latent_trees_report.write_results([], with_json(
        folder, "why-executor/latent-trees.json", "latent-trees.json"))
    return outputs(folder, "why-executor/")


@case("why-executor/probes", "why-executor/probes.md", "why-executor/probes.png")
def _probes(folder: Path) -> dict[str, bytes]:
    """The trained agents' probes: the records of its JSON through the writer."""
    executor_probes_report.write_results([], with_json(folder, "why-executor/probes.json",
                                                       "probes.json"))
    return outputs(folder, "why-executor/")


@case("oracle", "oracle/maze.md", "oracle/maze_8x8.png", "oracle/maze_stats.png",
      "oracle/oracle.md", "oracle/oracle.png")
def _oracle(folder: Path) -> dict[str, bytes]:
    """The oracle arm: its cells' curricula and its reading beside the study's XLVIN arms,
    through its writer (which reads the study's maze.json beside its own folder)."""
    with_json(folder / "ablation", "ablation/maze.json", "maze.json")
    out = with_json(folder / "oracle", "oracle/maze.json", "maze.json")
    oracle_report.write_results([], out)
    return outputs(out, "oracle/")


# Atari (xlvin.experiments.atari): the cells' records through the writer, their agents' older
# spellings (xlvin_r) read as every command reads them.
def _atari(where: str) -> Render:
    def render(folder: Path) -> dict[str, bytes]:
        prefix = f"{where}/" if where else ""
        cells = [{**r, "agent": resolve_agent(r["agent"], tuple(atari.AGENTS))}
                 for r in committed(f"{prefix}atari.json")["cells"]]
        atari_report.write_results(cells, folder)
        return outputs(folder, prefix)
    return render


_GAMES = ("atari_Alien.png", "atari_Enduro.png", "atari_Freeway.png")
case("atari", "atari.md", *_GAMES)(_atari(""))
case("atari-1m/atari", "atari-1m/atari.md", *(f"atari-1m/{g}" for g in _GAMES))(
    _atari("atari-1m"))
case("atari-freeway-seeds/atari", "atari-freeway-seeds/atari.md",
     "atari-freeway-seeds/atari_Freeway.png")(_atari("atari-freeway-seeds"))
case("atari-1m-fresh/atari", "atari-1m-fresh/atari.md",
     "atari-1m-fresh/atari_Freeway.png")(_atari("atari-1m-fresh"))


@case("atari_vae", "atari_vae.md")
def _atari_vae(folder: Path) -> dict[str, bytes]:
    """The table as `atari_vae_report.write_results` assembles it, from the JSON's rows, collapse test,
    reference (the committed study as it was then) and cells."""
    data = committed("atari_vae.json")
    text = atari_vae_report.markdown(data["rows"], data["collapse_test"],
                                     data["committed_reference"], data["cells"]) + f"\n\n{data['note']}"
    return {"atari_vae.md": (text + "\n").encode()}


@case("continuous", "continuous.md", "continuous.png")
def _continuous(folder: Path) -> dict[str, bytes]:
    """From the rows (the runs of other machines' cells are kept as rows only)."""
    rows = committed("continuous.json")["rows"]
    folder.mkdir(parents=True, exist_ok=True)
    continuous.plot(rows, folder / "continuous.png")
    return {"continuous.md": continuous.markdown(rows).encode(),
            "continuous.png": (folder / "continuous.png").read_bytes()}


@case("bench", "bench.md", "bench-cuda.md")
def _bench(folder: Path) -> dict[str, bytes]:
    from benchmarks.suite.report import render

    return {f"{name}.md": render(committed(f"{name}.json")).encode()
            for name in ("bench", "bench-cuda")}


@case("authors-code", "authors-code/table1.md", "authors-code/maze.md",
      "authors-code/continuous.md")
def _authors_code(folder: Path) -> dict[str, bytes]:
    """The authors' code's tables (benchmarks/authors_code); continuous.md ends with the
    paragraph its command's --note gave, which the JSON does not hold: it is taken from the
    committed file, one paragraph after the rendering."""
    from benchmarks.authors_code import parse_continuous_logs, parse_logs, parse_maze_logs

    t, m, c = (committed(f"authors-code/{n}.json") for n in ("table1", "maze", "continuous"))
    text = parse_continuous_logs.markdown(c["rows"], c["runs"])
    note = (RESULTS / "authors-code/continuous.md").read_text().removeprefix(text)
    assert re.fullmatch(r"\n[^\n]+\n", note), "continuous.md: more than the rendering and a note"
    return {"authors-code/table1.md": parse_logs.markdown(t["rows"], t["runs"]).encode(),
            "authors-code/maze.md": parse_maze_logs.markdown(m["rows"], m["runs"],
                                                             m["cpu_budget_s"]).encode(),
            "authors-code/continuous.md": (text + note).encode()}


def _parity_atari(where: str) -> Render:
    def render(folder: Path) -> dict[str, bytes]:
        from benchmarks.parity import atari as parity

        data = committed(f"{where}/atari.json")
        parity.report(data["sb3"], folder, data["command"], data["seeds_planned"],
                      data["transitions"], data["sb3_running"], data["ours_unclipped"])
        return outputs(folder, f"{where}/")
    return render


for _where in ("parity", "parity/freeway-100k"):
    case(f"{_where}/atari", f"{_where}/atari.md", f"{_where}/atari.png")(_parity_atari(_where))

@case("parity/freeway-factorial", "parity/freeway-factorial/factorial.md",
      "parity/freeway-factorial/factorial.png")
def _freeway_factorial(folder: Path) -> dict[str, bytes]:
    """From the branches' records committed beside it."""
    from benchmarks.parity import freeway_factorial

    freeway_factorial.report(RESULTS / "parity/freeway-factorial/branches", folder)
    return outputs(folder, "parity/freeway-factorial/")


@case("parity/freeway-1m", "parity/freeway-1m/freeway-1m.md",
      "parity/freeway-1m/freeway-1m.png")
def _freeway_1m(folder: Path) -> dict[str, bytes]:
    """From the committed records it reads: results/atari-1m-fresh, atari-1m, parity/atari."""
    from benchmarks.parity import freeway_1m

    freeway_1m.write(folder)
    return outputs(folder, "parity/freeway-1m/")


PARITY_RUNS = ["parity/pendulum", "parity/pendulum-speed-quiet", "parity/halfcheetah-200k",
               "parity/halfcheetah-smoke", "parity/halfcheetah-speed-quiet"]


def _parity_run(stem: str) -> Render:
    def render(folder: Path) -> dict[str, bytes]:
        """benchmarks/parity/run.py's report of the JSON's runs, on the machine the JSON names
        (the report writes the machine it runs on)."""
        from benchmarks.parity import run as parity

        data = committed(f"{stem}.json")
        folder.mkdir(parents=True, exist_ok=True)
        arch, cpus, rest = data["machine"].split(", ", 2)
        cpu, torch_version = rest.rsplit(", torch ", 1)
        patch = pytest.MonkeyPatch()
        patch.setattr(parity.platform, "machine", lambda: arch)
        patch.setattr(parity.os, "cpu_count", lambda: int(cpus.split()[0]))
        patch.setattr(parity, "cpu_model", lambda: cpu)
        patch.setattr(parity, "torch_version", lambda: torch_version)
        try:
            runs = [r for lib in data["libraries"].values() for r in lib["runs"]]
            name = stem.split("/")[-1]
            parity.report(data["env"], data["steps"], runs, folder, data["command"], name,
                          data["seeds_planned"])
        finally:
            patch.undo()
        return outputs(folder, "parity/")
    return render


for _stem in PARITY_RUNS:
    case(_stem, f"{_stem}.md", f"{_stem}.png")(_parity_run(_stem))

#: Committed files that older code rendered: path -> what changed since.
STALE = {
    **{f"ablation/table1-paper-{v}.md": "rendered before the table's note began 'Run under "
       "protocol paper (the authors' public code, point by point)' (it began 'Protocol: paper')"
       for v in ("epochs-4x4+orthogonal-init", "no-layernorm", "orthogonal-init",
                 "relu-messages")},
    "maze.md": "rendered before the canonical agent names: vin_mean and vin_max, now vin-mean "
               "and vin-max",
    "maze_8x8.png": "drawn before the canonical agent names (legend: vin_mean, vin_max)",
    "maze_16x16.png": "drawn before the canonical agent names (legend: vin_mean, vin_max)",
    "maze-width/maze.md": "rendered before the table of what each level cost",
    "maze-width/maze_8x8.png": "drawn before the legend named the settings that are ours",
    "maze-width/maze_16x16.png": "drawn before the legend named the settings that are ours",
    "bench-cuda.md": "rendered before the machine line named 'the latest run' and each "
                     "section its own CPU",
}
#: Committed tables and figures no case renders: path (or glob) -> why.
NOT_RENDERED = {
    "atari_vae.png": "its reconstructions are read from the VAE cells' run directories, not "
                     "from atari_vae.json",
    "maze_embeddings*.png": "drawn from the encoders' embeddings of a maze, which the JSON "
                            "does not keep (its panels hold their statistics only)",
    "atari-expansion/expansion.md": "benchmarks/studies/atari_expansion.py's report reads the cells' "
                                    "record.json files; expansion.json keeps their summaries",
    "parity/freeway-branches/*/branches.md": "benchmarks/parity/atari_branch.py's report reads "
                                             "each branch's file, which branches.json merges "
                                             "without the branch numbers",
}


def matplotlib_of(png: bytes) -> str | None:
    """The matplotlib version a PNG's Software tag names (None: no such tag)."""
    found = re.search(rb"Matplotlib version([0-9][0-9A-Za-z.+]*)", png)
    return found.group(1).decode() if found else None


def sha256(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def record_stale(digests: dict[str, str]) -> None:
    import matplotlib

    data = json.loads(FIXTURE.read_text()) if FIXTURE.exists() else {
        "what": "tests/test_committed_results.py: SHA-256 of the current rendering of the "
                "committed results files that older code rendered (STALE)",
        "how_to_record": "XLVIN_RECORD_FIXTURES=1 .venv/bin/python -m pytest "
                         "tests/test_committed_results.py -p no:xdist"}
    data["matplotlib"] = matplotlib.__version__
    data["sha256"] = dict(sorted({**data.get("sha256", {}), **digests}.items()))
    FIXTURE.write_text(json.dumps(data, indent=1) + "\n")


@pytest.mark.parametrize("name", list(CASES))
def test_a_committed_result_renders_byte_identically_from_its_json(
    name: str, tmp_path: Path
) -> None:
    import matplotlib

    render, paths = CASES[name]
    rendered = render(tmp_path / "out")
    assert sorted(rendered) == sorted(paths), f"{name} rendered other files than it names"
    pinned = json.loads(FIXTURE.read_text()) if FIXTURE.exists() else {"sha256": {}}
    differ, skipped, stale = [], [], {}
    for path, data in rendered.items():
        want = (RESULTS / path).read_bytes()
        if path.endswith(".png") and matplotlib_of(want) != matplotlib.__version__:
            skipped.append(f"{path} (drawn by matplotlib {matplotlib_of(want)})")
            continue
        if path in STALE:
            stale[path] = sha256(data)
            assert data != want, f"{path} renders as committed now: remove it from STALE"
            if path.endswith(".png") and pinned.get("matplotlib") != matplotlib.__version__:
                skipped.append(f"{path} (its digest was pinned under matplotlib "
                               f"{pinned.get('matplotlib')})")
            elif not RECORD and pinned["sha256"].get(path) != stale[path]:
                differ.append(f"{path} (stale: {STALE[path]}; its rendering changed from the "
                              "digest pinned in tests/fixtures/committed-renders.json)")
        elif data != want:
            differ.append(path)
    if RECORD and stale:
        record_stale(stale)
    assert not differ, f"{name}: these render otherwise than committed: {differ}"
    if skipped:
        pytest.skip(f"not compared under matplotlib {matplotlib.__version__}: {skipped}")


def tracked_results() -> list[str]:
    """The files under results/ that git tracks (all of them outside a git checkout), relative
    to results/."""
    try:
        listed = subprocess.run(["git", "ls-files", "-z", "results"], cwd=ROOT, check=True,
                                capture_output=True, text=True).stdout
    except (OSError, subprocess.CalledProcessError):
        return [str(p.relative_to(RESULTS)) for p in RESULTS.rglob("*") if p.is_file()]
    return [str(Path(p).relative_to("results")) for p in listed.split("\0") if p]


def test_every_committed_table_and_figure_is_rendered_or_says_why_not() -> None:
    rendered = {path for _, paths in CASES.values() for path in paths}
    committed_files = {p for p in tracked_results() if Path(p).suffix in (".md", ".png")}
    left_out = {p for p in committed_files
                if not any(Path(p).match(pattern) for pattern in NOT_RENDERED)}
    assert sorted(left_out - rendered) == [], "render these in a case, or say why not"
    assert sorted(rendered - committed_files) == [], "cases of files that are not committed"
    assert set(STALE) <= rendered
