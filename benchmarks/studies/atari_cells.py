"""Cells of `xlvin reproduce atari` with some settings changed, for the benchmarks' studies.

A `VariantCell` trains and is evaluated by the experiment's own `run_cell` (resumable, the same
evaluation games), with TrainConfig / PPOConfig fields overridden and its run directory named
after the study: ROOT/<name>/seed<S>.
"""

import dataclasses
from pathlib import Path
from typing import Any

from xlvin.experiments.atari import Cell
from xlvin.run.config import RunConfig


@dataclasses.dataclass(frozen=True)
class VariantCell(Cell):
    """`Cell` with `train` and `ppo` field overrides ((name, value) pairs), in ROOT/name/seedS."""

    name: str = ""
    train: tuple[tuple[str, Any], ...] = ()
    ppo: tuple[tuple[str, Any], ...] = ()

    def config(self) -> RunConfig:
        base = super().config()
        return dataclasses.replace(base, train=dataclasses.replace(base.train, **dict(self.train)),
                                   ppo=dataclasses.replace(base.ppo, **dict(self.ppo)))

    def run_dir(self, root: Path) -> Path:
        return Path(root) / self.name / f"seed{self.seed}"
