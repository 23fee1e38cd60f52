"""Reproducible mode: the same seed gives the same numbers on any x86-64 CPU with AVX2.

Each numerical library picks its kernels for the CPU it runs on, and kernels of different
vector widths add in different orders: the same seed trains another model on an AVX-512 CPU
than on an AVX2 one, on an AMD EPYC than on an Intel Xeon. Reproducible mode pins every library
xlvin computes with to one kernel path that every x86-64 CPU with AVX2 runs:

- torch's matrix products (Intel MKL): `MKL_CBWR=COMPATIBLE`, MKL's conditional numerical
  reproducibility branch. MKL honours its ISA branches (AVX2, ...) on Intel processors only; on
  others it falls back to its automatic choice, so COMPATIBLE is the one branch that both run
  (Intel's oneMKL developer guide, "Specifying Code Branches"). It does not pin MKL's vector
  maths, which torch uses for `sqrt` (`exp`, `log`, `tanh`, ...) of float tensors: COMPATIBLE's
  `sqrt` kernel starts from the approximate `rsqrtps`, whose results differ between vendors, so
  reproducible code takes no square root from it (executor pre-training runs torch's fused Adam:
  docs/determinism.md).
- torch's own vectorised kernels (element-wise maths, reductions): `ATEN_CPU_CAPABILITY=avx2`.
- torch's convolutions (oneDNN, the pixel encoders): `ONEDNN_MAX_CPU_ISA=AVX2`.
- NumPy's matrix products (OpenBLAS, the NumPy actor): `OPENBLAS_CORETYPE=Haswell`, OpenBLAS's
  AVX2 kernels with their fixed block sizes.
- NumPy's own SIMD loops: its AVX-512 groups disabled (`NPY_DISABLE_CPU_FEATURES`).
- OpenCV (the Atari frame resize): its AVX-512 loops disabled (`OPENCV_CPU_DISABLE`, on CPUs
  that have them: OpenCV warns about disabling what a CPU lacks).

The libraries read these variables when they load, so the mode is set before NumPy or torch is
imported: the `xlvin` command does it first thing (`pin`). A Python program starts under them:

    env $(python -m xlvin.kernels) python train.py

What the mode cannot pin, and the cost in steps per second, are measured in
benchmarks/notes.md. Nothing here imports NumPy or torch.
"""

import argparse
import functools
import os
import sys
from importlib.metadata import PackageNotFoundError, version

from xlvin.errors import UserError

#: The libraries whose kernels the variables choose: loaded after `pin`, never before.
LIBRARIES = ("numpy", "torch", "cv2")
#: Commands reproducible by default: their tables are what users check on their own machine,
#: and the shared TransE pre-trainings are shipped as reproducible mode makes them.
DEFAULT_ON = ("reproduce", "quickstart", "pretrain-transe")


def _numpy_avx512() -> str:
    """NumPy's names for its AVX-512 dispatch groups (they changed in NumPy 2.4)."""
    try:
        major, minor = (int(part) for part in version("numpy").split(".")[:2])
    except (PackageNotFoundError, ValueError):
        major, minor = 2, 4
    if (major, minor) >= (2, 4):
        return "X86_V4,AVX512_ICL,AVX512_SPR"
    return "AVX512F,AVX512CD,AVX512_KNL,AVX512_KNM,AVX512_SKX,AVX512_CLX,AVX512_CNL,AVX512_ICL"


@functools.cache
def pins() -> dict[str, str]:
    """The environment variables of reproducible mode, name -> value (read once: the CPU's
    flags and NumPy's version do not change while a process runs; do not modify)."""
    return {
        "MKL_CBWR": "COMPATIBLE",
        "ATEN_CPU_CAPABILITY": "avx2",
        "ONEDNN_MAX_CPU_ISA": "AVX2",
        "OPENBLAS_CORETYPE": "Haswell",
        "NPY_DISABLE_CPU_FEATURES": _numpy_avx512(),
    } | ({"OPENCV_CPU_DISABLE": "AVX512-SKX"} if "avx512f" in cpu_info("flags").split() else {})


def pinned() -> bool:
    """Whether this process's environment holds every variable of reproducible mode."""
    return all(os.environ.get(name) == value for name, value in pins().items())


def wanted(argv: list[str]) -> bool:
    """Whether a command line asks for reproducible mode: `--reproducible` or
    `--no-reproducible` where given (the last wins), else whether it verifies shipped files
    (`--verify`: they were made in reproducible mode) or its command is one of DEFAULT_ON."""
    flags = [word for word in argv if word in ("--reproducible", "--no-reproducible")]
    if flags:
        return flags[-1] == "--reproducible"
    if "--verify" in argv:
        return True
    command = next((word for word in argv if not word.startswith("-")), None)
    return command in DEFAULT_ON


def add_option(parser: argparse.ArgumentParser, default: bool) -> None:
    """`--reproducible` / `--no-reproducible` on a command (`wanted` reads it first)."""
    parser.add_argument(
        "--reproducible", action=argparse.BooleanOptionalAction, default=default,
        help="pin the numerical kernels, so that a seed gives the same numbers on any x86-64 CPU "
        "with AVX2 (a little slower; docs/determinism.md; default: "
        f"{'on' if default else 'off'} for this command)",
    )


def pin() -> None:
    """Put reproducible mode into this process's environment (and so its workers').

    The libraries read it when they load: in a process that has already imported one of them
    without the mode, it would not take effect, so that is refused."""
    if pinned():
        return
    loaded = [name for name in LIBRARIES if name in sys.modules]
    if loaded:
        raise UserError(
            f"reproducible mode must be set before {', '.join(loaded)} is imported: run the xlvin "
            "command, start Python under `env $(python -m xlvin.kernels)`, or pass "
            "--no-reproducible"
        )
    os.environ.update(pins())


def in_effect() -> dict[str, str]:
    """What a run records about its kernels: the mode, and the CPU it ran on."""
    return {"mode": "reproducible" if pinned() else "cpu-default", "cpu": cpu_name()}


def check_one_mode(modes: dict[str, str | None]) -> None:
    """Refuse to put results trained under another kernel mode than this process's into one
    table (`modes`: each result's name -> the mode its summary recorded; None: recorded before
    modes were, accepted as it is): one UserError saying how to proceed."""
    mode = in_effect()["mode"]
    other = {name: m for name, m in modes.items() if m is not None and m != mode}
    if other:
        name, theirs = next(iter(other.items()))
        flag = "--no-reproducible" if mode == "reproducible" else "--reproducible"
        raise UserError(
            f"{len(other)} of {len(modes)} cells were trained with {theirs} kernels (first: "
            f"{name}), this table is {mode}: pass {flag} to table them under their mode, or move "
            "them away to retrain them under this one")


def cpu_name() -> str:
    """The CPU's model name (Linux), else the platform's processor string."""
    import platform

    return cpu_info("model name") or platform.processor() or "unknown"


def cpu_info(field: str) -> str:
    """A field of the first processor in /proc/cpuinfo ('' where there is none)."""
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as info:
            for line in info:
                if line.split(":", 1)[0].strip() == field:
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return ""


if __name__ == "__main__":
    print(" ".join(f"{name}={value}" for name, value in pins().items()))
