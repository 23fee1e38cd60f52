"""examples/xlvin_single_file.py computes what the library computes. From seed 0 and the shipped
XLVIN-R executor, 3 PPO updates on CartPole (2 envs x 32 steps, TransE pre-trained on 5 random
episodes for 1 epoch; every other setting the default of `xlvin train --agent xlvin-r`) give the
library's logged numbers and final weights bit for bit on its readable path (`accelerate=False`).
The library's default CPU path is within a stated tolerance of them, and a change of one constant
in the example by 0.1% is seen, so the comparison can fail."""

import ast
import dataclasses
import json
import math
import runpy
from pathlib import Path
from typing import Any

import pytest
import torch

from xlvin import XLVIN

EXAMPLE = Path(__file__).resolve().parents[1] / "examples" / "xlvin_single_file.py"
TINY = {"total_steps": 3 * 2 * 32, "num_envs": 2, "num_steps": 32, "transe_episodes": 5,
        "transe_epochs": 1}
#: The default path (NumPy actor, fused PPO loss, flat Adam: the same maths in other orders of
#: float operations) against the readable one after these 3 updates, with 10x margin over the
#: distances measured (weights 6e-8, logged losses 1.4e-6: a value loss of 20-37).
WEIGHTS_ATOL, METRICS_ATOL = 1e-6, 1e-5

Run = tuple[list[dict[str, float]], dict[str, torch.Tensor]]


def library_run(accelerate: bool, folder: Path) -> Run:
    """The library's metrics per update and final weights, under the example's names (the
    heads' actor and critic at the top, the frozen message function as two buffers). An empty
    cache: the run takes the shipped executor, as the example does."""
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("XLVIN_CACHE", str(folder / "cache"))
        model = XLVIN("CartPole-v1", seed=0, accelerate=accelerate, **TINY)
        model.learn(out=folder / "run", progress=False)
    lines = (model.run_dir / "metrics.jsonl").read_text().splitlines()
    rename = {"heads.": "", "processor.message_fn.": "message_"}
    weights = {}
    for name, value in model.policy.state_dict().items():
        for old, new in rename.items():
            name = name.replace(old, new)
        weights[name] = value
    return [json.loads(line) for line in lines], weights


def example_run(example: dict[str, Any], **changes: Any) -> Run:
    agent, metrics = example["train"](example["Args"](**TINY, **changes))
    return metrics, agent.state_dict()


@pytest.fixture(scope="module")
def example() -> dict[str, Any]:
    return runpy.run_path(str(EXAMPLE))


@pytest.fixture(scope="module")
def ours(example: dict[str, Any]) -> Run:
    return example_run(example)


def differences(ours: Run, theirs: Run) -> tuple[float, float]:
    """The largest absolute differences of the logged numbers and of the weights; every metric
    the example logs must be the library's, and every weight name one of the library's."""
    (our_metrics, our_weights), (their_metrics, their_weights) = ours, theirs
    assert len(our_metrics) == len(their_metrics) == 3
    assert our_weights.keys() == their_weights.keys()
    metrics = max(abs(mine[key] - logged[key]) for mine, logged in zip(our_metrics, their_metrics)
                  for key in mine)
    weights = max((our_weights[k] - their_weights[k]).abs().max().item() for k in our_weights)
    return metrics, weights


def test_the_example_gives_the_readable_paths_numbers_bit_for_bit(
    ours: Run, tmp_path: Path
) -> None:
    metrics, weights = library_run(accelerate=False, folder=tmp_path)
    assert ours[0][0].keys() == {
        "losses/policy_loss", "losses/value_loss", "losses/entropy", "losses/approx_kl",
        "losses/clipfrac", "losses/transe", "losses/explained_variance", "charts/learning_rate",
        "charts/episodic_return"}
    for mine, logged in zip(ours[0], metrics):
        assert all(math.isfinite(value) for value in mine.values())
        assert mine == {key: logged[key] for key in mine}
    assert differences(ours, (metrics, weights)) == (0.0, 0.0)
    assert all(torch.equal(ours[1][name], weights[name]) for name in weights)


def test_the_default_path_is_within_its_rounding(ours: Run, tmp_path: Path) -> None:
    metrics, weights = differences(ours, library_run(accelerate=True, folder=tmp_path))
    assert metrics <= METRICS_ATOL and weights <= WEIGHTS_ATOL


def test_the_comparison_sees_a_change_of_one_constant_by_a_thousandth(
    example: dict[str, Any], ours: Run
) -> None:
    changed = example_run(example, transe_weight=1.001e-3)
    metrics, weights = differences(changed, ours)
    assert metrics > 0 and weights > 0


def test_the_example_imports_nothing_of_xlvin() -> None:
    imported = set()
    for node in ast.walk(ast.parse(EXAMPLE.read_text())):
        if isinstance(node, ast.Import):
            imported |= {alias.name.split(".")[0] for alias in node.names}
        elif isinstance(node, ast.ImportFrom):
            imported.add(node.module.split(".")[0])
    assert imported - {"argparse", "dataclasses", "importlib", "json", "math", "time",
                       "pathlib"} == {"gymnasium", "numpy", "torch", "safetensors"}
    assert len(EXAMPLE.read_text().splitlines()) <= 500
