"""Same seed, same numbers (an invariant of any restructuring): a short `xlvin train` run of
every agent and planner path gives the metrics, summary numbers and weights recorded in
tests/fixtures/same-numbers.json, to the bit.

Each run is a command line (`RUNS`: the CLI's flags are public, so they survive the redesign),
trained in this process in reproducible mode (conftest) with executor files of its own
(tests/fixtures/executors) and an empty XLVIN_CACHE. What is compared: every metrics.jsonl row
and the summary's numbers with the wall-clock fields dropped (`WALL_CLOCK`), and the SHA-256
of the final weights' tensors (names, dtypes, shapes, bytes: a renamed parameter fails too).

Vendors. Reproducible mode promises these numbers on every x86-64 CPU with AVX2, so the
fixture holds one reference set (`reference`, the vendor recorded first) and, per other CPU
vendor (`vendor_id` of /proc/cpuinfo), only the runs whose numbers differ there, each with why
(`VENDOR_NOTES`). A run is compared with its vendor's own numbers where that vendor has them,
else with the reference: every other run is a check across vendors. On an AMD EPYC (family 25
model 1, AVX2) every run gave Intel's numbers but the readable path's (`xlvin-r-readable`: its
per-tensor Adam and its loss take `sqrt`, `exp` and `log` from MKL's vector maths, whose kernels
differ between vendors: docs/determinism.md). A difference on a new vendor fails with how to
record it:

    XLVIN_RECORD_FIXTURES=1 .venv/bin/python -m pytest tests/test_same_numbers.py -p no:xdist

(recording rewrites this vendor's numbers, and on a vendor other than the reference keeps only
the runs that differ from it: only do it for a change that is meant to move the numbers, or for
a difference the docs explain, and say so in the commit). Other library versions are other
kernels: the test skips, as tests/test_golden.py does.
"""

import fcntl
import json
import os
import tempfile
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path
from typing import Any

import pytest

from xlvin.cli import main
from xlvin.io.run_dir import read_metrics
from xlvin.pretrain import shipped

FIXTURE = Path(__file__).parent / "fixtures" / "same-numbers.json"
RECORD = os.environ.get("XLVIN_RECORD_FIXTURES") == "1"
LIBRARIES = ("torch", "numpy", "gymnasium", "ale-py", "minigrid")
#: Every run: this seed, no PPO bar, no checkpoints (the weights at the end are the model's).
COMMON = ["--seed", "1", "--quiet", "--checkpoint-every", "0"]
_SMALL = ["--num-envs", "2", "--num-steps", "16", "--total-steps", "96"]
_NO_TRANSE = ["--pretrain-transe", "false"]
_TINY_TRANSE = ["--transe-episodes", "10", "--transe-epochs", "1"]
_MAZE = ["--env", "xlvin/Maze-v0"]
#: The executors: copies of the shipped `random` (XLVIN-R's) and `maze` files as they were when
#: the numbers were recorded, so that re-made shipped files (their own digests are pinned by
#: tests/test_golden.py and the manifest) leave these numbers alone. `{fixtures}` is this
#: folder's fixtures/.
_XLVIN_R = ["--agent", "xlvin", "--executor", "{fixtures}/executors/random.safetensors"]
_MAZE_XLVIN = ["--agent", "xlvin", "--executor", "{fixtures}/executors/maze.safetensors"]
_FREEWAY = ["--env", "xlvin/FreewayTrain-v4", "--depth", "1", "--num-envs", "2",
            "--num-steps", "16", "--total-steps", "32", *_NO_TRANSE]
_PENDULUM = ["--env", "Pendulum-v1", "--num-envs", "2", "--num-steps", "128",
             "--total-steps", "512"]
#: name -> `xlvin train` flags. The seven agents the invariant names (xlvin-r, ppo, atreec,
#: vin, gvin, a maze XLVIN, a continuous XLVIN), then every other path of the model:
#: XLVIN's three planners (full tree, pruned, sampled expansion by each method), the projected
#: tree (pixels, a Dict observation), its two auxiliary losses (TransE, the VAE world model),
#: chi = 0, projections, the readable (unaccelerated) path and the three protocols.
RUNS: dict[str, list[str]] = {
    "xlvin-r": ["--env", "CartPole-v1", *_XLVIN_R, *_SMALL, *_TINY_TRANSE],
    "ppo": ["--env", "CartPole-v1", "--agent", "ppo", *_SMALL],
    "atreec": ["--env", "CartPole-v1", "--agent", "atreec", *_SMALL],
    "vin": [*_MAZE, "--agent", "vin", *_SMALL],
    "gvin": [*_MAZE, "--agent", "gvin", *_SMALL],
    "maze-xlvin": [*_MAZE, *_MAZE_XLVIN, "--depth", "2", *_SMALL,
                   *_NO_TRANSE],
    "pendulum-xlvin": [*_PENDULUM, *_XLVIN_R, "--action-bins", "5", *_TINY_TRANSE],
    # the other paths
    "xlvin-r-readable": ["--env", "CartPole-v1", *_XLVIN_R, "--accelerate", "false",
                         *_SMALL, *_NO_TRANSE],
    "xlvin-r-paper": ["--env", "CartPole-v0", *_XLVIN_R, "--protocol", "low_data",
                      "--low-data-episodes", "4", "--low-data-num-envs", "2",
                      "--low-data-updates", "2", "--low-data-eval-points", "2",
                      "--low-data-eval-episodes", "2", *_TINY_TRANSE],
    "xlvin-zero-chi": ["--env", "CartPole-v1", *_XLVIN_R, "--zero-chi", "true",
                       *_SMALL, *_NO_TRANSE],
    "xlvin-projections": ["--env", "Acrobot-v1", *_XLVIN_R,
                          "--executor-projections", "true", "--transe-negatives", "next_states",
                          *_SMALL, *_NO_TRANSE],
    "ppo-transe": ["--env", "CartPole-v1", "--agent", "ppo", "--ppo-transe", "true", *_SMALL,
                   *_NO_TRANSE],
    "maze-xlvin-pruned": [*_MAZE, *_MAZE_XLVIN, "--depth", "3",
                          "--prune", "2", *_SMALL, *_NO_TRANSE],
    "maze-vin-curriculum": [*_MAZE, "--agent", "vin", "--protocol", "curriculum",
                            "--anneal-lr", "false", "--curriculum-last-level", "2",
                            "--curriculum-window", "10", "--curriculum-threshold", "0.1",
                            "--curriculum-budget", "200", "--curriculum-eval-per-level", "4",
                            "--curriculum-ood-size", "0", "--num-envs", "4", "--num-steps", "16",
                            "--total-steps", "256"],
    "pendulum-ppo-sde": [*_PENDULUM, "--agent", "ppo", "--separate-critic", "true",
                         "--activation", "tanh", "--use-sde", "true", "--sde-sample-freq", "4",
                         "--gamma", "0.9"],
    "pendulum-xlvin-gaussian": [*_PENDULUM, *_XLVIN_R, "--action-bins", "7",
                                "--expansion", "gaussian", "--expand", "4", *_NO_TRANSE],
    "pendulum-xlvin-policy": [*_PENDULUM, *_XLVIN_R, "--expansion", "policy",
                              "--expand", "3", *_NO_TRANSE],
    "cartpole-xlvin-uniform": ["--env", "CartPole-v1", *_XLVIN_R, "--expansion",
                               "uniform", "--expand", "2", "--depth", "3", *_SMALL, *_NO_TRANSE],
    "minigrid-xlvin": ["--env", "MiniGrid-DoorKey-5x5-v0", *_XLVIN_R, *_SMALL,
                       *_NO_TRANSE],
    "freeway-xlvin": [*_FREEWAY, *_XLVIN_R],
    "freeway-xlvin-vae": [*_FREEWAY, *_XLVIN_R, "--transition-loss", "vae"],
}
#: Why a run's numbers differ on a vendor (recorded beside its numbers there).
VENDOR_NOTES = {"xlvin-r-readable": (
    "the readable path's per-tensor Adam and PPO loss take sqrt, exp and log from MKL's vector "
    "maths, whose kernels differ between vendors (docs/determinism.md)")}
#: Keys of wall-clock quantities (and of the digests over them), dropped wherever they appear.
WALL_CLOCK = {"charts/sps", "sps", "wall_time_s", "seconds", "sha256"}


def without_wall_clock(data: Any) -> Any:
    """`data` with every key of `WALL_CLOCK` or ending in _seconds dropped, at any depth."""
    if isinstance(data, dict):
        return {k: without_wall_clock(v) for k, v in data.items()
                if k not in WALL_CLOCK and not k.endswith("_seconds")}
    if isinstance(data, list):
        return [without_wall_clock(v) for v in data]
    return data


def cpu_field(field: str) -> str:
    """A field of the first processor in /proc/cpuinfo ('unknown' where there is none)."""
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.split(":", 1)[0].strip() == field:
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return "unknown"


def versions() -> dict[str, str]:
    found = {}
    for name in LIBRARIES:
        try:
            found[name] = version(name)
        except PackageNotFoundError:
            found[name] = "missing"
    return found


def numbers(name: str, root: Path) -> dict[str, Any]:
    """What run `name` gives: its metrics rows, its summary's numbers (both without wall-clock
    fields) and the digest of its final weights."""
    run = root / name
    fixtures = str(FIXTURE.parent)
    argv = [word.replace("{fixtures}", fixtures) for word in RUNS[name]]
    assert main(["train", *argv, *COMMON, "--out", str(run)]) == 0
    summary = json.loads((run / "summary.json").read_text())
    kept = {k: v for k, v in summary.items() if k not in ("kernels", "executor", "resumed")}
    return {"metrics": without_wall_clock(read_metrics(run)),
            "summary": without_wall_clock(kept),
            "weights_sha256": shipped.tensors_sha256(run / "model.safetensors")}


def cpu_name() -> str:
    """The first processor's model name with its family and model numbers."""
    return (f"{cpu_field('model name')} (family {cpu_field('cpu family')} "
            f"model {cpu_field('model')})")


def record(name: str, got: dict[str, Any]) -> None:
    """Write run `name`'s numbers into this vendor's entry of the fixture, or, on a vendor other
    than the reference, drop them from it where they are the reference's (under a lock: the
    recording processes of pytest-xdist share the file)."""
    vendor = cpu_field("vendor_id")
    with open(Path(tempfile.gettempdir()) / "xlvin-same-numbers.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        data = json.loads(FIXTURE.read_text()) if FIXTURE.exists() else {}
        data.setdefault("what", "tests/test_same_numbers.py: metrics, summary numbers and "
                        "weights of short `xlvin train` runs: the reference vendor's, and per "
                        "other vendor the runs that differ there")
        data.setdefault("how_to_record", "XLVIN_RECORD_FIXTURES=1 .venv/bin/python -m pytest "
                        "tests/test_same_numbers.py -p no:xdist")
        data["versions"] = versions()
        reference = data.setdefault("reference", vendor)
        entry = data.setdefault("vendors", {}).setdefault(vendor, {"runs": {}})
        entry["cpu"] = cpu_name()
        same = data["vendors"][reference]["runs"].get(name, {})
        if vendor != reference and not first_difference(
                {k: same.get(k) for k in got}, got):
            entry["runs"].pop(name, None)
        else:
            entry["runs"][name] = {"argv": [*RUNS[name], *COMMON],
                                   "why_this_vendor": VENDOR_NOTES.get(name), **got}
        entry["runs"] = dict(sorted(entry["runs"].items()))
        FIXTURE.write_text(json.dumps(data, indent=1, sort_keys=False) + "\n")


def first_difference(want: Any, got: Any, where: str = "") -> str:
    """Where `got` first differs from `want` (a path and both values), '' if nowhere."""
    if isinstance(want, dict) and isinstance(got, dict):
        for key in sorted(set(want) | set(got)):
            if key not in want or key not in got:
                return f"{where}/{key}: only in the {'fixture' if key in want else 'run'}"
            found = first_difference(want[key], got[key], f"{where}/{key}")
            if found:
                return found
        return ""
    if isinstance(want, list) and isinstance(got, list):
        if len(want) != len(got):
            return f"{where}: {len(want)} items in the fixture, {len(got)} in the run"
        for i, (a, b) in enumerate(zip(want, got)):
            found = first_difference(a, b, f"{where}[{i}]")
            if found:
                return found
        return ""
    return "" if want == got else f"{where}: fixture {want!r}, run {got!r}"


@pytest.mark.parametrize("name", list(RUNS))
def test_a_short_run_gives_the_recorded_numbers(
    name: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("XLVIN_CACHE", str(tmp_path / "cache"))  # nothing pre-trained
    got = numbers(name, tmp_path)
    if RECORD:
        record(name, got)
        return
    data = json.loads(FIXTURE.read_text())
    if versions() != data["versions"]:
        pytest.skip(f"the numbers were recorded with {data['versions']}, not {versions()}")
    vendor = cpu_field("vendor_id")
    own = data["vendors"].get(vendor, {"runs": {}})
    recorded_on = vendor if name in own["runs"] else data["reference"]
    entry = data["vendors"][recorded_on]
    assert name in entry["runs"], (
        f"{name} has no numbers recorded on {recorded_on}: record them "
        f"({data['how_to_record']})")
    want = entry["runs"][name]
    assert want["argv"] == [*RUNS[name], *COMMON], f"{name}'s flags changed since recorded"
    diff = first_difference({k: want[k] for k in got}, got)
    if recorded_on != vendor:
        assert not diff, (
            f"{name}: {diff}. These numbers were recorded on {recorded_on} ({entry['cpu']}), "
            f"and this CPU is {vendor} ({cpu_name()}): reproducible mode is meant to give the "
            f"same numbers across vendors (docs/determinism.md). If the code is unchanged and "
            f"the docs explain the difference, record this vendor's numbers beside them, with "
            f"why in VENDOR_NOTES: {data['how_to_record']}")
    assert not diff, (f"{name}: {diff} (recorded on {entry['cpu']}; a change meant to move the "
                      f"numbers records them again on each vendor: {data['how_to_record']})")
