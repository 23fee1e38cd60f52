"""Run directories: everything needed to evaluate or plot a run, in one folder.

    DIR/config.json        the full configuration (JSON)
    DIR/model.safetensors  the final policy weights, with the config in the header
    DIR/metrics.jsonl      one JSON object per PPO update ({"step": ..., "losses/...": ...})
    DIR/summary.json       pre-training statistics, data counts and wall times
    DIR/tb/                TensorBoard events (same tags as metrics.jsonl)
    DIR/checkpoint.safetensors  the latest checkpoint while training (xlvin.io.checkpoint)
"""

import json
import math
from pathlib import Path
from typing import Any

from torch.utils.tensorboard import SummaryWriter

from xlvin.errors import UserError
from xlvin.io.weights import atomic_write_bytes

CONFIG = "config.json"
MODEL = "model.safetensors"
METRICS = "metrics.jsonl"
SUMMARY = "summary.json"


def write_json(path: Path, data: dict[str, Any]) -> None:
    atomic_write_bytes(Path(path), (json.dumps(data, indent=2, sort_keys=True) + "\n").encode())


def create_run_dir(path: Path, config: dict[str, Any]) -> Path:
    """Create `path` for a new run and write its config; refuse to touch a folder that holds files."""
    path = Path(path)
    if path.exists() and not path.is_dir():
        raise UserError(f"--out {path} exists and is not a directory")
    if path.is_dir() and any(path.iterdir()):
        what = "a run" if (path / CONFIG).exists() else "files"
        raise UserError(f"--out {path} already holds {what}; choose a new directory (or --resume an unfinished run)")
    path.mkdir(parents=True, exist_ok=True)
    write_json(path / CONFIG, config)
    return path


def require_run_dir(path: Path) -> Path:
    """Check that `path` is a finished run directory (config and model present)."""
    path = Path(path)
    for name in (CONFIG, MODEL):
        if not (path / name).is_file():
            raise UserError(f"{path} is not a finished run directory: {name} is missing")
    return path


def open_run_dir(path: Path, config: dict[str, Any]) -> Path:
    """The unfinished run in `path` to resume: it must have been started with `config`."""
    path = Path(path)
    if not (path / CONFIG).is_file():
        raise UserError(f"--resume: {path} holds no run to resume ({CONFIG} is missing)")
    saved = json.loads((path / CONFIG).read_text())
    if saved != config:
        diff = sorted(
            f"{section}.{key}"
            for section in set(saved) | set(config)
            for key in set(saved.get(section, {})) | set(config.get(section, {}))
            if saved.get(section, {}).get(key) != config.get(section, {}).get(key)
        )
        raise UserError(f"{path} holds a different run ({', '.join(diff)} differ); not resuming")
    if (path / SUMMARY).is_file():
        raise UserError(f"{path} holds a finished run; nothing to resume")
    return path


class MetricsLogger:
    """Appends metrics to DIR/metrics.jsonl and to TensorBoard (DIR/tb) at once.

    `rewind_to` (when resuming from a checkpoint taken at that step): rows logged after it by the
    interrupted process are dropped from metrics.jsonl and purged from TensorBoard, so the
    resumed run's log reads as if it had never stopped.
    """

    def __init__(self, run_dir: Path, rewind_to: int | None = None) -> None:
        metrics = Path(run_dir) / METRICS
        if rewind_to is not None and metrics.is_file():
            kept = [row for row in _complete_rows(metrics) if row["step"] <= rewind_to]
            atomic_write_bytes(metrics, "".join(json.dumps(r, sort_keys=True) + "\n" for r in kept).encode())
        self.file = open(metrics, "a")
        purge = None if rewind_to is None else rewind_to + 1
        self.writer = SummaryWriter(log_dir=str(Path(run_dir) / "tb"), purge_step=purge)

    def __call__(self, step: int, metrics: dict[str, float]) -> None:
        clean = {k: float(v) for k, v in metrics.items() if math.isfinite(float(v))}
        self.file.write(json.dumps({"step": step, **clean}, sort_keys=True) + "\n")
        self.file.flush()
        for key, value in clean.items():
            self.writer.add_scalar(key, value, step)

    def close(self) -> None:
        self.file.close()
        self.writer.close()


def read_metrics(run_dir: Path) -> list[dict[str, float]]:
    """All rows of DIR/metrics.jsonl."""
    with open(Path(run_dir) / METRICS) as f:
        return [json.loads(line) for line in f if line.strip()]


def _complete_rows(path: Path) -> list[dict[str, float]]:
    """Rows of a metrics file whose writer may have been killed mid-line (that line is dropped)."""
    rows = []
    for line in path.read_text().splitlines():
        try:
            rows.append(json.loads(line))
        except json.JSONDecodeError:
            continue
    return rows
