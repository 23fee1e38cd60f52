"""The quickstart's golden fixture (tests/fixtures/quickstart-golden.json) and a reduced run of
its XLVIN-R path in CI: the `authors-random` executor and the CartPole-v0 TransE pre-trained on
a few graphs and episodes, then XLVIN-R trained for 3 updates under protocol `paper`, all in
reproducible mode (conftest). Their tensor digests and evaluations are pinned in
tests/fixtures/kernels/quickstart-reduced.json with the CPU and library versions they were
recorded with, and the CPUs they have been seen to pass on (`passed_on`), as test_kernels.py
pins its digest: reproducible mode promises them on every x86-64 CPU with AVX2, so the test
runs on every vendor, never skipped by one. The whole quickstart is checked against the
fixture by scripts/check_golden.py (half an hour or more on 2 cores), whose comparison is
tested here."""

import dataclasses
import importlib.util
import json
from importlib.metadata import version
from pathlib import Path

import pytest

from xlvin.experiments import table1
from xlvin.pretrain import shipped
from xlvin.pretrain.executor_config import DEFAULT_EXECUTORS
from xlvin.pretrain.files import (
    cached_executor_path,
    executor_config,
    executors_dir,
    shared_transe_path,
)
from xlvin.run.training import train_run
from xlvin.run.transe import transe_key
from xlvin.run.checks import check_run

ROOT = Path(__file__).parent.parent
FIXTURES = ROOT / "tests" / "fixtures"
GOLDEN = json.loads((FIXTURES / "quickstart-golden.json").read_text())
REDUCED = FIXTURES / "kernels" / "quickstart-reduced.json"
LIBRARIES = ("torch", "numpy", "gymnasium")
_spec = importlib.util.spec_from_file_location("check_golden", ROOT / "scripts" / "check_golden.py")
check_golden = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(check_golden)


def test_the_shipped_files_are_the_golden_quickstarts(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """The quickstart uses the shipped executor and TransE: they are the files whose digests
    the fixture recorded, so a run of it on another CPU checks training and evaluation there.
    The script makes them afresh where the quickstart looks first: their cache paths."""
    monkeypatch.setenv("XLVIN_CACHE", str(tmp_path))
    for label, (cached, shipped_file) in check_golden.pretrained_files().items():
        assert cached.name == shipped_file.name and cached.is_relative_to(tmp_path), label
        digest = check_golden.fixture_digest(shipped_file)
        assert digest[:16] == GOLDEN["tensor_sha256_prefixes"][label], label
        (entry,) = [e for e in shipped.manifest() if e["file"] == shipped_file.name]
        assert entry["kernels"] == "reproducible"
        assert shipped.tensors_sha256(shipped_file) == entry["tensors_sha256"]
    assert set(GOLDEN["libraries"]) == set(LIBRARIES)


def test_the_script_compares_every_number_as_the_quickstart_prints_it() -> None:
    """Records with the fixture's per-seed numbers (within the quickstart's rounding) pass, one
    line each; one seed off by one is the one FAIL line; all seeds add the IQMs (of the
    unrounded numbers: the fixture's per-seed integers do not give them)."""
    records = [{"agent": agent, "seed": seed, "final_return": numbers["final"][seed] + 0.4,
                "max_eval_return": float(numbers["max_eval"][seed])}
               for agent, numbers in GOLDEN["agents"].items() for seed in GOLDEN["seeds"]]
    lines = check_golden.compare(GOLDEN, records, 2)
    assert len(lines) == 2 * 2 * 2 and all(line.startswith("PASS") for line in lines), lines
    records[1]["final_return"] += 1
    failed = [line for line in check_golden.compare(GOLDEN, records, 2) if line.startswith("FAIL")]
    assert failed == ["FAIL ppo seed 1 final: 43 (fixture 42)"]
    every_seed = check_golden.compare(GOLDEN, records, len(GOLDEN["seeds"]))
    assert sum(" IQM: " in line for line in every_seed) == 4 and len(every_seed) == 20


def reduced_run(root: Path) -> dict:
    """The quickstart's XLVIN-R seed 0, reduced: its executor's pre-training on 8 graphs, its
    TransE's on 100 random episodes for 1 epoch, 3 updates with 5-episode evaluations; the
    digests of the three sets of weights and the evaluations."""
    cfg = table1.Cell("paper", "CartPole-v0", "xlvin-r", 0).config()
    cfg = dataclasses.replace(
        cfg, transe=dataclasses.replace(cfg.transe, episodes=100, epochs=1),
        low_data=dataclasses.replace(cfg.low_data, updates=3, eval_points=3, eval_episodes=5))
    run_dir = root / "run"
    _, summary = train_run(cfg, run_dir, progress=False, pretrain_progress=False)
    files = {
        "executor": cached_executor_path(executor_config(cfg.train.executor, cfg.train),
                                         executors_dir()),
        "transe": shared_transe_path(transe_key(cfg, *check_run(cfg)), cfg.train.env),
        "policy": run_dir / "model.safetensors",
    }
    return {
        "tensors_sha256": {part: shipped.tensors_sha256(path) for part, path in files.items()},
        "eval_returns": [p["eval_return"] for p in summary["ppo"]["progress"]],
        "kernels": summary["kernels"]["mode"],
    }


@pytest.mark.slow
def test_a_reduced_quickstart_gives_the_pinned_weights(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setitem(DEFAULT_EXECUTORS, "authors-random", dataclasses.replace(
        DEFAULT_EXECUTORS["authors-random"], train_graphs=4, states=5, actions=2))
    monkeypatch.setenv("XLVIN_CACHE", str(tmp_path / "cache"))
    got = reduced_run(tmp_path)
    assert got["kernels"] == "reproducible" and len(got["eval_returns"]) == 3
    pinned = json.loads(REDUCED.read_text())
    versions = {name: version(name) for name in LIBRARIES}
    if versions != pinned["versions"]:
        pytest.skip(f"the pinned digests hold for {pinned['versions']}, not {versions}")
    seen = "; ".join(cpu["cpu"] for cpu in pinned["passed_on"] if cpu["how"] == "seen")
    for part, digest in pinned["tensors_sha256"].items():  # the first that differs says where
        assert got["tensors_sha256"][part] == digest, (
            f"{part}: recorded on {pinned['cpu']}, seen to pass on {seen} "
            f"(not yet: {pinned.get('not_yet', 'none')})")
    assert got["eval_returns"] == pinned["eval_returns"]
