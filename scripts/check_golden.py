"""Check `xlvin quickstart` against its golden fixture (tests/fixtures/quickstart-golden.json):
every per-seed number of both agents, their IQMs and the tensor digests of the two pre-trained
files, as the quickstart gave them with an empty cache in reproducible mode.

    python scripts/check_golden.py                                  # the whole check (~30 min)
    python scripts/check_golden.py --seeds 1 --pretrained shipped   # seed 0 on the shipped files

With an empty cache (a fresh XLVIN_CACHE), the `authors-random` executor and the CartPole-v0
TransE are pre-trained here by the commands the shipped files' manifest records, into the paths
the quickstart looks up first; `--pretrained shipped` uses the shipped files instead (the
training and evaluation path alone). Then `xlvin quickstart --seeds N` trains and evaluates PPO
and XLVIN-R on seeds 0..N-1. Prints a PASS or FAIL line per number and per digest, this CPU, the
library versions where they are not the fixture's (its numbers hold for its versions only) and
the wall time of each step; ends with PASS (exit status 0) or FAIL (1). The script runs in
reproducible mode (it restarts itself under the mode's variables when started without them).
"""

import argparse
import hashlib
import json
import os
import shlex
import subprocess
import sys
import tempfile
import time
from importlib.metadata import version
from pathlib import Path
from typing import Any

from xlvin.kernels import pinned, pins

FIXTURE = Path(__file__).resolve().parent.parent / "tests" / "fixtures" / "quickstart-golden.json"
#: The fixture's name of each pre-trained file -> its manifest entry's kind and name.
PRETRAINED = {"authors-random executor": ("executor", "authors-random"),
              "CartPole-v0 TransE": ("TransE", "CartPole-v0 (paper protocol)")}
#: The fixture's statistics -> the field of a table-1 record that holds them.
STATISTICS = {"final": "final_return", "max_eval": "max_eval_return"}


def _xlvin(*args: str) -> list[str]:
    return [sys.executable, "-m", "xlvin.cli", *args]


def _cpu() -> str:
    info = Path("/proc/cpuinfo")
    lines = info.read_text().splitlines() if info.exists() else []
    return next((line.split(":", 1)[1].strip() for line in lines if line.startswith("model name")),
                "unknown CPU")


def _minutes(seconds: float) -> str:
    return f"{int(seconds // 60)}m{seconds % 60:04.1f}s"


def fixture_digest(path: Path) -> str:
    """The fixture's digest of a weights file: the SHA-256 over its tensors in name order, each
    name followed by the tensor's raw bytes."""
    from xlvin.io.weights import load_weights

    tensors, _ = load_weights(path, what="pre-trained")
    digest = hashlib.sha256()
    for name in sorted(tensors):
        digest.update(name.encode() + tensors[name].contiguous().numpy().tobytes())
    return digest.hexdigest()


def pretrained_files() -> dict[str, tuple[Path, Path]]:
    """Per pre-trained file of the fixture: (where the quickstart looks it up in the cache, the
    file shipped with xlvin)."""
    from xlvin.experiments import table1
    from xlvin.pretrain import shipped
    from xlvin.pretrain.files import (
        cached_executor_path,
        executor_config,
        executors_dir,
        shared_transe_path,
    )
    from xlvin.run.transe import transe_key
    from xlvin.run.checks import check_run

    cfg = table1.Cell("paper", "CartPole-v0", "xlvin-r", 0).config()
    cached = {
        "authors-random executor": cached_executor_path(
            executor_config(cfg.train.executor, cfg.train), executors_dir()),
        "CartPole-v0 TransE": shared_transe_path(transe_key(cfg, *check_run(cfg)), cfg.train.env),
    }
    return {label: (cached[label], shipped.path(shipped.entries(kind, [name])[0]))
            for label, (kind, name) in PRETRAINED.items()}


def pretrain_afresh(label: str, target: Path) -> float:
    """Make the pre-trained file `label` at `target` by its manifest's command; its seconds."""
    from xlvin.pretrain import shipped

    kind, name = PRETRAINED[label]
    words = shlex.split(shipped.entries(kind, [name])[0]["command"])[1:]
    words[words.index("--out") + 1] = str(target)
    target.parent.mkdir(parents=True, exist_ok=True)
    start = time.perf_counter()
    subprocess.run(_xlvin(*words), check=True)
    return time.perf_counter() - start


def compare(fixture: dict[str, Any], records: list[dict[str, Any]], seeds: int) -> list[str]:
    """A PASS or FAIL line per per-seed number of the fixture among `seeds`, and per IQM when
    every seed of the fixture ran; numbers as the quickstart prints them (0 and 1 decimals)."""
    from xlvin.stats import summarize

    lines = []
    for agent, numbers in fixture["agents"].items():
        group = sorted((r for r in records if r["agent"] == agent), key=lambda r: r["seed"])
        for statistic, field in STATISTICS.items():
            for seed, wanted in zip(range(seeds), numbers[statistic]):
                got = f"{group[seed][field]:.0f}"
                lines.append(f"{'PASS' if got == str(wanted) else 'FAIL'} {agent} seed {seed} "
                             f"{statistic}: {got} (fixture {wanted})")
            if seeds == len(fixture["seeds"]):
                got = f"{summarize([r[field] for r in group])['iqm']:.1f}"
                wanted = f"{numbers[statistic + '_iqm']:.1f}"
                lines.append(f"{'PASS' if got == wanted else 'FAIL'} {agent} {statistic} IQM: "
                             f"{got} (fixture {wanted})")
    return lines


def check(args: argparse.Namespace, fixture: dict[str, Any], folder: Path) -> list[str]:
    """Run the check in `folder` (its cache and runs); the PASS and FAIL lines."""
    from xlvin.experiments import table1

    os.environ["XLVIN_CACHE"] = str(folder / "cache")
    files = pretrained_files()
    if args.pretrained == "afresh":
        for label, (cached, _) in files.items():
            print(f"pre-training the {label} afresh: {_minutes(pretrain_afresh(label, cached))}",
                  flush=True)
    start = time.perf_counter()
    out = folder / "quickstart"
    subprocess.run(_xlvin("quickstart", "--seeds", str(args.seeds), "--jobs", str(args.jobs),
                          "--out", str(out)), check=True)
    print(f"quickstart: {_minutes(time.perf_counter() - start)}")
    lines = []
    for label, (cached, shipped_file) in files.items():
        used = cached if cached.exists() else shipped_file
        got, wanted = fixture_digest(used)[:16], fixture["tensor_sha256_prefixes"][label]
        lines.append(f"{'PASS' if got == wanted else 'FAIL'} {label} ({used.name}, "
                     f"{'made here' if used == cached else 'shipped'}): {got} (fixture {wanted})")
    cells = [table1.Cell("paper", "CartPole-v0", agent, seed)
             for agent in fixture["agents"] for seed in range(args.seeds)]
    records = [table1.cell_record(cell, cell.run_dir(out)) for cell in cells]
    return lines + compare(fixture, records, args.seeds)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seeds", type=int, default=4, choices=range(1, 5), metavar="1..4",
                        help="seeds 0..N-1 (default 4, the fixture's; fewer: no IQM is compared)")
    parser.add_argument("--jobs", type=int, default=2, help="the quickstart's --jobs (default 2)")
    parser.add_argument("--pretrained", choices=("afresh", "shipped"), default="afresh",
                        help="pre-train both files here (default) or use the shipped ones")
    parser.add_argument("--keep", type=Path, metavar="DIR",
                        help="a new folder to keep the cache and runs in (default: removed)")
    args = parser.parse_args()
    if not pinned():  # the libraries read the mode's variables when they load: start under them
        os.execve(sys.executable, [sys.executable, *sys.argv], {**os.environ, **pins()})
    start = time.perf_counter()
    fixture = json.loads(FIXTURE.read_text())
    print(f"CPU: {_cpu()}; fixture recorded on {fixture['cpu']}")
    versions = {name: version(name) for name in fixture["libraries"]}
    if versions != fixture["libraries"]:
        print(f"note: libraries {versions}, the fixture's {fixture['libraries']}: its numbers "
              "hold for its versions only")
    if args.keep is not None:
        args.keep.mkdir(parents=True)
        lines = check(args, fixture, args.keep)
    else:
        with tempfile.TemporaryDirectory() as folder:
            lines = check(args, fixture, Path(folder))
    print("\n".join(lines))
    failed = sum(line.startswith("FAIL") for line in lines)
    verdict = f"FAIL: {failed} of {len(lines)} differ" if failed else f"PASS: {len(lines)} agree"
    print(f"{verdict} (wall time {_minutes(time.perf_counter() - start)})")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
