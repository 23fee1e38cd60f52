"""Reproducible mode (`xlvin.kernels`): the same seed trains the same model whatever kernel
path the CPU would pick, tested by emulating other CPUs on this one."""

import json
import os
import subprocess
import sys
from importlib.metadata import version
from pathlib import Path

import pytest

from xlvin.cli import _commands, build_parser
from xlvin.errors import UserError
from xlvin.kernels import DEFAULT_ON, in_effect, pin, pinned, pins, wanted

#: What another CPU's libraries would choose, set through the same variables: an AVX2 CPU (no
#: AVX-512 anywhere), and an AMD Zen's OpenBLAS kernels.
AVX512 = "avx512f" in Path("/proc/cpuinfo").read_text() if Path("/proc/cpuinfo").exists() else False
EMULATED_CPUS = {
    "this CPU": {},
    "an AVX2 CPU": {"ATEN_CPU_CAPABILITY": "avx2", "OPENBLAS_CORETYPE": "Haswell",
                    "MKL_ENABLE_INSTRUCTIONS": "AVX2", "ONEDNN_MAX_CPU_ISA": "AVX2",
                    "NPY_DISABLE_CPU_FEATURES": pins()["NPY_DISABLE_CPU_FEATURES"]},
    "a Zen CPU": {"OPENBLAS_CORETYPE": "Zen"},
}
#: Trains a tiny PPO (NumPy acting: OpenBLAS and NumPy's SIMD) and a tiny XLVIN (torch: MKL
#: and ATen) on CartPole with the Python API; prints a digest of both models' weights and the
#: kernel mode their summaries recorded.
TRAIN_BOTH = """
import hashlib, json, sys
from xlvin import PPO, XLVIN
digest, modes = hashlib.sha256(), set()
for cls, options, steps in ((PPO, {}, 2048), (XLVIN, {"executor": sys.argv[1], "transe_epochs": 1}, 512)):
    model = cls("CartPole-v1", seed=3, num_envs=2, num_steps=32, **options)
    model.learn(total_steps=steps, progress=False)
    for name, value in sorted(model.policy.state_dict().items()):
        digest.update(name.encode() + value.numpy().tobytes())
    modes.add(model.summary["kernels"]["mode"])
print(json.dumps({"digest": digest.hexdigest(), "modes": sorted(modes)}))
"""


#: The reproducible digest as another CPU computed it, with the library versions it holds for.
GOLDEN = Path(__file__).parent / "fixtures" / "kernels" / "reproducible.json"
LIBRARIES = ("torch", "numpy", "gymnasium")


def _train(executor: Path, env: dict[str, str]) -> dict:
    done = subprocess.run([sys.executable, "-c", TRAIN_BOTH, str(executor)], env=env,
                          capture_output=True, text=True, check=True)
    return json.loads(done.stdout.splitlines()[-1])


def _environment(cpu: dict[str, str], reproducible: bool) -> dict[str, str]:
    """This process's environment without the mode (conftest sets it), then the emulated
    CPU's choices, then (reproducible) the mode's pins over them."""
    env = {k: v for k, v in os.environ.items() if k not in pins()}
    env.update(cpu)
    if reproducible:
        env.update(pins())
    return env


@pytest.mark.slow
def test_reproducible_mode_trains_the_same_model_on_every_emulated_cpu(
    executor_path: Path,
) -> None:
    free = {cpu: _train(executor_path, _environment(env, False)) for cpu, env in EMULATED_CPUS.items()}
    fixed = {cpu: _train(executor_path, _environment(env, True)) for cpu, env in EMULATED_CPUS.items()}
    assert {r["digest"] for r in fixed.values()} == {fixed["this CPU"]["digest"]}
    assert all(r["modes"] == ["reproducible"] for r in fixed.values())
    assert all(r["modes"] == ["cpu-default"] for r in free.values())
    if AVX512:  # this CPU's default path (AVX-512) is not an AVX2 CPU's: the floats move
        assert free["this CPU"]["digest"] != free["an AVX2 CPU"]["digest"]
        assert fixed["this CPU"]["digest"] not in {r["digest"] for r in free.values()}
    golden = json.loads(GOLDEN.read_text())
    versions = {name: version(name) for name in LIBRARIES}
    if versions != golden["versions"]:
        pytest.skip(f"the recorded digest holds for {golden['versions']}, not {versions}")
    assert fixed["this CPU"]["digest"] == golden["digest"], f"recorded on {golden['cpu']}"


def test_the_command_decides_the_mode_before_parsing() -> None:
    assert wanted(["reproduce", "classic", "--seeds", "2"])
    assert wanted(["quickstart"])
    assert not wanted(["train", "--env", "CartPole-v1"])
    assert wanted(["train", "--env", "CartPole-v1", "--reproducible"])
    assert not wanted(["reproduce", "atari", "--no-reproducible"])
    assert wanted(["reproduce", "atari", "--no-reproducible", "--reproducible"])  # the last wins


def test_every_command_takes_the_option_with_its_default() -> None:
    commands = _commands(build_parser())
    assert len(commands) >= 10
    for path, parser in commands:
        default = next(a.default for a in parser._actions if a.dest == "reproducible")
        assert default == (path[0] in DEFAULT_ON), path
        assert wanted(list(path)) == default


def test_pinning_after_numpy_loaded_is_refused(monkeypatch: pytest.MonkeyPatch) -> None:
    assert pinned()  # the suite runs in the mode (conftest)
    monkeypatch.delenv("OPENBLAS_CORETYPE")
    assert not pinned() and in_effect()["mode"] == "cpu-default"
    with pytest.raises(UserError, match="before numpy, torch"):
        pin()
    assert "OPENBLAS_CORETYPE" not in os.environ  # nothing half-set


def test_python_can_start_under_the_modes_variables() -> None:
    printed = subprocess.run([sys.executable, "-m", "xlvin.kernels"], capture_output=True,
                             text=True, check=True).stdout.split()
    assert dict(pair.split("=", 1) for pair in printed) == pins()


def test_pretrained_files_of_the_two_modes_are_cached_apart(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """An executor pre-trained on the CPU's own kernels is not the reproducible one: the
    cache never hands one to a run of the other mode."""
    from xlvin.pretrain.executor_config import DEFAULT_EXECUTORS
    from xlvin.pretrain.files import cached_executor_path

    executor = DEFAULT_EXECUTORS["random"]
    reproducible = cached_executor_path(executor, tmp_path)
    monkeypatch.delenv("MKL_CBWR")
    assert cached_executor_path(executor, tmp_path) != reproducible


#: A few Adam steps of executor pre-training's readable path (`_optimiser`, accelerate off) on
#: seeded gradients of every size from 1e-20 to 10 (no forward pass: no matrix product), and
#: torch.sqrt of their squares; prints both digests.
ADAM_STEPS = """
import hashlib, json, torch
from xlvin.nn.executor import VIExecutor
from xlvin.pretrain.executor import _optimiser
from xlvin.pretrain.executor_config import DEFAULT_EXECUTORS
cfg = DEFAULT_EXECUTORS["authors-random"]
torch.manual_seed(0)
executor = VIExecutor(cfg.hidden, cfg.aggregation, cfg.layer_norm, cfg.messages)
optimiser = _optimiser(executor, cfg, 10, accelerate=False)
generator, squares = torch.Generator().manual_seed(1), []
for _ in range(5):
    optimiser.zero_grad()
    for p in executor.parameters():
        p.grad = torch.randn(p.shape, generator=generator) * 10.0 ** torch.randint(
            -20, 2, p.shape, generator=generator)
        squares.append(p.grad.square())
    optimiser.step()
weights, roots = hashlib.sha256(), hashlib.sha256()
for name, value in sorted(executor.state_dict().items()):
    weights.update(name.encode() + value.numpy().tobytes())
roots.update(torch.cat([s.flatten() for s in squares]).sqrt().numpy().tobytes())
print(json.dumps({"weights": weights.hexdigest(), "sqrt": roots.hexdigest()}))
"""


def test_executor_pretraining_adam_does_not_follow_mkls_vector_maths_kernel() -> None:
    """torch.sqrt on float tensors is MKL's vector maths (VML), which picks its kernel for the
    CPU: in reproducible mode (`MKL_CBWR=COMPATIBLE`) an SSE2 one that starts from the
    approximate `rsqrtps`, whose results differ between Intel and AMD. The default per-tensor
    torch.optim.Adam took its `exp_avg_sq.sqrt()` from it, so executor pre-training gave other
    weights on an AMD EPYC than on an Intel Xeon (issue 55). Other MKL branches pick other VML
    kernels on an Intel CPU (`COMPATIBLE`: SSE2 with rsqrtps, `AVX2`, `AUTO`: AVX-512): the
    readable path's Adam steps must give the same weights under each. (On another vendor MKL
    may run one kernel for all three, and the test checks less: test_golden.py's digests are
    that check.)"""
    runs = {
        branch: json.loads(subprocess.run(
            [sys.executable, "-c", ADAM_STEPS],
            env={k: v for k, v in os.environ.items() if k not in pins()} | pins()
            | {"MKL_CBWR": branch}, capture_output=True, text=True, check=True,
        ).stdout.splitlines()[-1])
        for branch in ("COMPATIBLE", "AVX2", "AUTO")
    }
    assert len({r["weights"] for r in runs.values()}) == 1, runs
    if "GenuineIntel" in _cpuinfo():  # the branches reach different kernels: the test has teeth
        assert len({r["sqrt"] for r in runs.values()}) > 1, runs


def _cpuinfo() -> str:
    path = Path("/proc/cpuinfo")
    return path.read_text() if path.exists() else ""
