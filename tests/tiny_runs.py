"""Runs and table-1 cells that the tests of run files share: a PPO run of 4 updates on one env
with a checkpoint after each (about a second), one stopped after its last checkpoint, a finished
cell written by hand, and the `xlvin reproduce` command that reads cells back."""

import dataclasses
import json
from pathlib import Path

from xlvin.cli import main
from xlvin.experiments import table1


def tiny(env: str = "CartPole-v1") -> list[str]:
    """`xlvin train` flags of a PPO run of 4 updates on `env`, a checkpoint after each."""
    return ["--env", env, "--agent", "ppo", "--num-envs", "1", "--num-steps", "16",
            "--total-steps", "64", "--checkpoint-every", "1", "--quiet"]


TINY = tiny()
#: The table-1 cell the finished cells are written as (`xlvin reproduce` reads it back).
CELL = table1.Cell("paper", "CartPole-v0", "ppo", 0)
SUMMARY = {"ppo": {"progress": [{"updates": 1, "episodes": 10, "transitions": 300,
                                 "eval_return": 50.0}], "episode_returns": [20.0]},
           "ppo_episodes": 10, "ppo_transitions": 300, "transe_transitions": 0,
           "wall_seconds": 1.0}
EVAL = {"mean": 40.0, "std": 0.0}


def unfinished_run(root: Path, env: str = "CartPole-v1") -> Path:
    """A run stopped after its last checkpoint (its model and summary removed): resumable with
    `tiny(env)`."""
    run = root / "run"
    assert main(["train", *tiny(env), "--out", str(run)]) == 0
    (run / "summary.json").unlink()
    (run / "model.safetensors").unlink()
    return run


def finished_cell(root: Path) -> Path:
    """CELL's run directory under `root` with SUMMARY and EVAL (no weights, no digests)."""
    run_dir = CELL.run_dir(root)
    run_dir.mkdir(parents=True)
    (run_dir / "summary.json").write_text(json.dumps(SUMMARY))
    (run_dir / table1.EVAL_FILE).write_text(json.dumps(EVAL))
    return run_dir


def reproduce(root: Path, results: Path, *more: str) -> int:
    """`xlvin reproduce` of CELL's finished run under `root`, results into `results`, with the
    flags `more`."""
    return main(["reproduce", "classic", "--protocol", "paper", "--envs", "CartPole-v0",
                 "--agents", "ppo", "--seeds", "1", "--finished-only", "--runs", str(root),
                 "--results", str(results), *more])


def tiny_cell_config(real):
    """Cell.config made tiny (2 PPO updates, one 2-episode progress evaluation): the config a
    cell is trained with, and what its tabling checks the run against."""

    def config(cell: table1.Cell):
        cfg = real(cell)
        return dataclasses.replace(cfg, low_data=dataclasses.replace(
            cfg.low_data, updates=2, eval_points=1, eval_episodes=2))

    return config



def tiny_maze_runs(root: Path, executor: Path) -> Path:
    """Two tiny curricula of level 1 (passed at 20 % over 20 episodes, a few PPO updates each,
    seconds) where `xlvin reproduce maze-ablation` keeps its cells under `root`: an XLVIN run
    (8 wide, K = 2 pruned to 2 actions, the executor file `executor`) as the xlvin-32-b2 cell of
    seed 100 and a PPO run with the TransE term as ppo-32-transe's; and seed 101 of xlvin-32-b2,
    a copy of seed 100 stopped after its level (no summary, no final model). Returns `root`."""
    common = ["--env", "xlvin/Maze-v0", "--hidden", "8", "--protocol", "curriculum",
              "--anneal-lr", "false", "--lr", "3e-3", "--num-envs", "4", "--num-steps", "32",
              "--curriculum-last-level", "1", "--curriculum-window", "20",
              "--curriculum-threshold", "0.2", "--curriculum-budget", "1000",
              "--curriculum-eval-per-level", "5", "--curriculum-ood-size", "0", "--quiet",
              "--seed", "100"]
    agents = {"xlvin-32-b2": ["--agent", "xlvin", "--executor", str(executor), "--depth", "2",
                              "--prune", "2", "--transe-episodes", "40", "--transe-epochs", "1"],
              "ppo-32-transe": ["--agent", "ppo", "--ppo-transe", "true"]}
    for agent, flags in agents.items():
        out = root / "maze" / agent / "seed100"
        assert main(["train", *common, *flags, "--out", str(out)]) == 0
    finished, stopped = (root / "maze" / "xlvin-32-b2" / f"seed{s}" for s in (100, 101))
    (stopped / "levels").mkdir(parents=True)
    for name in ("config.json", "levels/level-01.safetensors"):
        (stopped / name).write_bytes((finished / name).read_bytes())
    return root
