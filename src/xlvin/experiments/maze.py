"""The paper's mazes (section 4.1, figures 2, 7 and 9): the continual maze on 8x8 VIN gridworlds,
evaluated after every passed level on held-out 8x8 mazes and on 16x16 mazes (out of
distribution), and the contextual maze (appendix F).

Every cell (experiment, agent, seed) is one curriculum run (`xlvin.ppo.curriculum`) in
ROOT/EXPERIMENT/AGENT/seedS (vin-mean and vin-max in vin_mean and vin_max, their first spelling:
`DIR_NAMES`); a finished cell (summary.json present) is never re-run, an
interrupted one resumes from its checkpoint. Each agent is trained by the library's one PPO
with the same settings (`MAZE_PPO`): the comparison is fair.

Settings that are ours, not the paper's (it does not give them): PPO with 32 envs x 32 steps a
rollout (1,024 steps an update; maze episodes last a few steps, and 32 envs act in one forward
where 8 x 128 took 1.9x longer per step for VIN here), 4 epochs x 4 minibatches, GAE, Adam lr
1e-3 held constant (a curriculum has no known end to anneal to; the authors' later code also
uses 1e-3). Held-out evaluations play at most
`eval_per_level` starts of each level (seeded, the same for every agent); a figure's "all levels"
success weights each level by its share of the whole held-out split, as if every start were
played.
"""

import argparse
import dataclasses
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from xlvin.config import add_options, from_args
from xlvin.envs.maze import CONTEXTUAL_MAZE_ID, MAZE_ID
from xlvin.errors import UserError
from xlvin.ppo.session import has_passed
from xlvin.io.checkpoint import CHECKPOINT, read_loop_state
from xlvin.io.digests import read_sealed
from xlvin.io.run_dir import CONFIG, SUMMARY, claim_run_dir, reading_results
from xlvin.process import quiet_known_warnings
from xlvin.run.agents import resolve_agent, resolve_agents
from xlvin.ppo.curriculum import CurriculumConfig
from xlvin.ppo.update import PPOConfig
from xlvin.run.saved import CELL_IDENTITY, check_holds_run, fields_apart
from xlvin.run.training import prepare_executors, train_run
from xlvin.run.config import RunConfig, TrainConfig
from xlvin.run.checks import check_device

#: Experiments: name -> (env id, default agents).
EXPERIMENTS = {
    "maze": (MAZE_ID, ("xlvin", "vin", "vin-mean", "vin-max", "gvin", "ppo")),
    "contextual-maze": (CONTEXTUAL_MAZE_ID, ("xlvin", "vin", "ppo")),
}
#: Agents: name -> TrainConfig overrides. `ppo` is the paper's maze encoder (128 channels);
#: `ppo-32` our declared CPU preset of it (32 channels), the same network otherwise. `xlvin` is
#: the paper's maze XLVIN (section 4.1): that encoder (k = 10), transition hidden 128, the maze
#: executor (H = 10, LayerNorm, pre-trained on the training mazes' graphs), the full tree of
#: depth K = 4 over the 8 actions, TransE weight 0.001; `xlvin-k1` and `xlvin-k2` the same at
#: K = 1 and 2 (the authors' later code defaults to K = 1); `xlvin-b2` ours, not the paper's:
#: K = 4 with only the 2 actions a distilled rollout policy ranks highest expanded below depth 1.
#: `xlvin-32*`: the same agents with the CPU preset's 32-wide encoder and transition, as `ppo-32`
#: (here `xlvin-32-b2` trains at ~5x the steps/s of `xlvin-b2`, the full `xlvin-32` at ~1/9 of
#: `xlvin-32-b2`'s). The executor ablation (`xlvin.experiments.maze_ablation`) takes
#: `xlvin-32-b2` apart: its executor untrained (`-untrained`), pre-trained on XLVIN-R's random
#: graphs instead of mazes (`-random`), or its output chi replaced by zeros (`-zero-chi`); and
#: `ppo-32-transe`, PPO-32 with the TransE term (a transition model trained by it alone, no tree).
#: `xlvin-32-b2-oracle*`: `xlvin-32-b2` (and its untrained and chi = 0 arms) with the tree built
#: from the encoder's embeddings of the true successor observations (`xlvin.nn.true_tree`), no
#: transition model in it: the oracle arm.
_XLVIN = {"agent": "xlvin", "executor": "maze"}
_ORACLE = {"agent": "xlvin-oracle", "executor": "maze", "depth": 4, "prune": 2, "hidden": 32}
AGENTS: dict[str, dict[str, Any]] = {
    "vin": {"agent": "vin"},
    "vin-mean": {"agent": "vin-mean"},
    "vin-max": {"agent": "vin-max"},
    "gvin": {"agent": "gvin"},
    "ppo": {"agent": "ppo"},
    "ppo-32": {"agent": "ppo", "hidden": 32},
    "xlvin": {**_XLVIN, "depth": 4},
    "xlvin-k1": {**_XLVIN, "depth": 1},
    "xlvin-k2": {**_XLVIN, "depth": 2},
    "xlvin-b2": {**_XLVIN, "depth": 4, "prune": 2},
    "xlvin-32": {**_XLVIN, "depth": 4, "hidden": 32},
    "xlvin-32-k1": {**_XLVIN, "depth": 1, "hidden": 32},
    "xlvin-32-k2": {**_XLVIN, "depth": 2, "hidden": 32},
    "xlvin-32-b2": {**_XLVIN, "depth": 4, "prune": 2, "hidden": 32},
    "xlvin-32-b2-untrained": {**_XLVIN, "depth": 4, "prune": 2, "hidden": 32,
                              "executor": "maze-untrained"},
    "xlvin-32-b2-random": {**_XLVIN, "depth": 4, "prune": 2, "hidden": 32,
                           "executor": "maze-random"},
    "xlvin-32-b2-zero-chi": {**_XLVIN, "depth": 4, "prune": 2, "hidden": 32, "zero_chi": True},
    "ppo-32-transe": {"agent": "ppo", "hidden": 32, "ppo_transe": True},
    "xlvin-32-b2-oracle": _ORACLE,
    "xlvin-32-b2-oracle-untrained": {**_ORACLE, "executor": "maze-untrained"},
    "xlvin-32-b2-oracle-zero-chi": {**_ORACLE, "zero_chi": True},
}


def _note(overrides: dict[str, Any]) -> str:
    """The settings of an agent that are ours, not the paper's: the true tree, pruning, the CPU
    width and the ablations."""
    parts = ["true tree (oracle)"] if overrides.get("agent") == "xlvin-oracle" else []
    if overrides.get("prune"):
        parts.append(f"pruned b = {overrides['prune']} (ours)")
    if overrides.get("hidden"):
        parts.append(f"{overrides['hidden']} channels (CPU preset)")
    ablations = {"maze-untrained": "untrained executor", "maze-random": "executor of random graphs"}
    if overrides.get("executor") in ablations:
        parts.append(ablations[overrides["executor"]])
    if overrides.get("zero_chi"):
        parts.append("chi = 0")
    if overrides.get("ppo_transe"):
        parts.append("+ TransE term")
    return ", ".join(parts)


#: A cell's directory name where it is not the agent's name: the spelling of the runs made
#: before the canonical names (kept, so that they resume and are found).
DIR_NAMES = {"vin-mean": "vin_mean", "vin-max": "vin_max"}
#: What the figures add to an agent's name: the settings that are ours, not the paper's.
AGENT_NOTES = {name: _note(o) for name, o in AGENTS.items() if _note(o)}
#: The PPO every maze agent trains with (module docstring).
MAZE_PPO = PPOConfig(num_envs=32, num_steps=32, lr=1e-3, anneal_lr=False)
#: `--quick`: level 1 only, passed at 80 % of a window of 100 episodes, 20,000 episodes allowed,
#: 20 held-out starts per level: a minute or two on two cores, for trying the pipeline (and the
#: tests), not results.
QUICK = CurriculumConfig(last_level=1, window=100, threshold=0.8, budget=20_000, eval_per_level=20)


@dataclass(frozen=True)
class Cell:
    experiment: str
    agent: str
    seed: int
    curriculum: CurriculumConfig = field(default_factory=CurriculumConfig)
    device: str = "cpu"  # where it trains (part of its config: a run resumes on its device)

    def __post_init__(self) -> None:
        object.__setattr__(self, "agent", resolve_agent(self.agent, tuple(AGENTS)))

    def run_dir(self, root: Path) -> Path:
        agent = DIR_NAMES.get(self.agent, self.agent)
        return Path(root) / self.experiment / agent / f"seed{self.seed}"

    def config(self) -> RunConfig:
        env, _ = EXPERIMENTS[self.experiment]
        train = TrainConfig(env=env, seed=self.seed, protocol="curriculum", checkpoint_every=50,
                            device=self.device, **AGENTS[self.agent])
        return RunConfig(train=train, ppo=MAZE_PPO, curriculum=self.curriculum)


def make_cells(
    experiment: str, agents: list[str], seeds: int, first_seed: int, curriculum: CurriculumConfig,
    device: str = "cpu",
) -> list[Cell]:
    """The cells of seeds first_seed .. first_seed + seeds - 1 (checked before anything runs)."""
    if seeds < 1 or first_seed < 0:
        raise UserError("--seeds must be >= 1 and --first-seed >= 0")
    check_device(device)
    cells = [Cell(experiment, agent, seed, curriculum, device)
             for agent in agents for seed in range(first_seed, first_seed + seeds)]
    for cell in cells:
        cell.config().curriculum.levels()  # mazes with the levels asked for
    return cells


def add_cell_options(parser: argparse.ArgumentParser, experiment: str) -> None:
    """The options that choose an experiment's cells besides --seeds (`xlvin reproduce
    EXPERIMENT`, `xlvin sweep EXPERIMENT`)."""
    _, agents = EXPERIMENTS[experiment]
    parser.add_argument("--agents", default="",
                        help=f"comma-separated agents of {', '.join(AGENTS)} "
                        f"(default {','.join(agents)}; older spellings such as vin_mean are "
                        "accepted)")
    parser.add_argument("--quick", action="store_true",
                        help="a small curriculum to try the pipeline in minutes (not results): "
                        "level 1 only, pass at 80 %% of 100 episodes, 20,000 episodes allowed")
    parser.add_argument("--device", default="cpu", help="torch device: cpu (default) or cuda[:N]")
    add_options(parser, CurriculumConfig)


def cells_from_options(
    experiment: str, seeds: int, args: argparse.Namespace, first_seed: int = 0
) -> list[Cell]:
    """The cells of `experiment` for the options of `add_cell_options`."""
    curriculum = from_args(CurriculumConfig, args, QUICK if args.quick else CurriculumConfig())
    _, default_agents = EXPERIMENTS[experiment]
    agents = resolve_agents(args.agents or ",".join(default_agents), tuple(AGENTS))
    return make_cells(experiment, agents, seeds, first_seed, curriculum, args.device)


def prepare(cells: list[Cell]) -> list[Path]:
    """The maze executor the XLVIN cells need, pre-trained once before their workers start
    (`prepare_executors`); its file (a sweep copies it to its nodes)."""
    return prepare_executors(c.config().train for c in cells)


def is_finished(run_dir: Path) -> bool:
    return (run_dir / SUMMARY).is_file()


def has_checkpoint(run_dir: Path) -> bool:
    return (run_dir / CHECKPOINT).is_file()


def run_cell(cell: Cell, root: Path, deadline: float | None = None) -> dict[str, Any] | None:
    """Train one cell's curriculum unless it has finished (resuming an interrupted one) until
    it ends or `deadline` (a `time.time()` value) passes; its record so far (`record_so_far`).
    A cell whose turn comes after the deadline is not started: None unless it already had a
    record. The cell is claimed while it trains: one running elsewhere is one UserError."""
    run_dir = cell.run_dir(root)
    if not has_passed(deadline):
        quiet_known_warnings()
        with claim_run_dir(run_dir):
            if not is_finished(run_dir):
                train_run(cell.config(), run_dir, progress=False,
                          resume=(run_dir / CONFIG).is_file(), deadline=deadline,
                          pretrain_progress=False)
    return record_so_far(cell, run_dir)


def record_so_far(cell: Cell, run_dir: Path) -> dict[str, Any] | None:
    """The cell's record if it has finished, its progress if it has a checkpoint, else None."""
    if is_finished(run_dir):
        return cell_record(cell, run_dir)
    return running_record(cell, run_dir) if has_checkpoint(run_dir) else None


def check_holds_cell(cell: Cell, run_dir: Path) -> None:
    """Refuse, in one line, a directory that holds another cell's run: another seed, env or
    agent (any setting in which the experiment's agents differ), copied or moved in."""
    others = [dataclasses.replace(cell, agent=agent).config() for agent in AGENTS]
    check_holds_run(run_dir, cell.config(), [*CELL_IDENTITY, *fields_apart(others)])


def cell_record(cell: Cell, run_dir: Path) -> dict[str, Any]:
    """What a cell's curriculum did: each level tried (passed or failed, episodes, steps,
    held-out success after a pass), its totals and wall time; a run of another cell is one
    UserError (`check_holds_cell`)."""
    check_holds_cell(cell, run_dir)
    with reading_results(run_dir):
        summary = read_sealed(run_dir / SUMMARY, run_dir)
        return _record(cell, summary["curriculum"], summary["ppo"], summary["wall_seconds"], None)


def running_record(cell: Cell, run_dir: Path) -> dict[str, Any]:
    """The record of a cell still training, from its last checkpoint: the levels it has passed
    so far, and the level it is on (`in_progress`: level, episodes, window success)."""
    loop = read_loop_state(run_dir / CHECKPOINT)
    state = loop["data"]["curriculum"]
    window = state["window"]
    current = {"level": state["levels"][state["index"]], "episodes": state["episodes"],
               "window_success": float(np.mean(window)) if window else 0.0}
    result = loop["result"]
    return _record(cell, state["history"], result, result["wall_time_s"], current)


def _record(cell: Cell, history: list[dict[str, Any]], ppo: dict[str, Any], wall: float,
            in_progress: dict[str, Any] | None) -> dict[str, Any]:
    failed = [h["level"] for h in history if not h["passed"]]
    return {
        "experiment": cell.experiment, "agent": cell.agent, "seed": cell.seed,
        "curriculum": dataclasses.asdict(cell.curriculum),
        "levels": history,
        "levels_passed": [h["level"] for h in history if h["passed"]],
        "failed_level": failed[0] if failed else None,
        "in_progress": in_progress,
        "env_steps": ppo["env_steps"],
        "steps_per_second": ppo["sps"] if in_progress is None else ppo["env_steps"] / max(wall, 1e-9),
        "episodes": ppo["episodes"],
        "wall_seconds": wall,
    }
