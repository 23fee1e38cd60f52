"""The VI executor's pre-training config (paper appendix "Pre-training"): `ExecutorConfig` and
its checks, the default executors' configs (`DEFAULT_EXECUTORS`) and the key that names an
executor's file (`executor_key`)."""

import dataclasses
from dataclasses import dataclass
from typing import Any

from xlvin.config import option, to_dict
from xlvin.errors import UserError
from xlvin.io.executor_file import FORMAT
from xlvin.mdp.graphs import FAMILIES
from xlvin.mdp.maze_graphs import MAZE_FAMILY
from xlvin.nn.executor import AGGREGATIONS, MESSAGES

#: Every graph family the executor can be trained and evaluated on: the synthetic families and
#: the mazes of `xlvin/Maze-v0`.
GRAPH_FAMILIES = (*FAMILIES, MAZE_FAMILY)
LR_SCHEDULES = ("cosine", "constant")
#: The maze sides that have generated mazes.
MAZE_SIZES = (8, 16)


@dataclass
class ExecutorConfig:
    """Pre-training of the VI executor (defaults: the paper's XLVIN-R executor)."""

    family: str = option("random_deterministic", "graph family", GRAPH_FAMILIES)
    states: int = option(20, "states per training MDP (cartpole_tree and maze fix their own)")
    actions: int = option(8, "actions per training MDP (cartpole_tree and maze fix their own)")
    maze_size: int = option(8, "maze family: side of the training mazes", MAZE_SIZES)
    train_graphs: int = option(200, "number of training MDPs (the paper uses 100-500)")
    hidden: int = option(50, "executor width H; must match the agent's latent size")
    aggregation: str = option(
        "max", "message aggregation; max beat sum on held-out Erdos-Renyi graphs, where sum "
        "diverged on larger, denser graphs than it was trained on",
        AGGREGATIONS,
    )
    layer_norm: bool = option(
        False, "LayerNorm after every message-passing step (the authors' code: on)"
    )
    messages: str = option(
        "relu", "message function: Linear then ReLU, or linear (no activation: the authors' code)",
        MESSAGES,
    )
    epochs: int = option(10, "passes over all (MDP, VI step) pairs (0: the initial weights)")
    batch_graphs: int = option(4, "MDPs per minibatch")
    batch_steps: int = option(8, "VI steps per MDP per minibatch")
    lr: float = option(
        2e-3, "initial Adam learning rate, cosine-annealed to 0 (the authors use 5e-3, constant)"
    )
    lr_schedule: str = option(
        "cosine", "learning rate over training: cosine-annealed to 0, or constant (the authors')",
        LR_SCHEDULES,
    )
    gamma: float = option(0.9, "discount factor of the synthetic MDPs")
    tol: float = option(1e-4, "VI stops when max |V_{t+1} - V_t| < tol")
    seed: int = option(0, "seed of the training graphs and the initial weights")


def check_executor_config(cfg: ExecutorConfig) -> None:
    """A `UserError` naming every option of `cfg` out of its range."""
    positive = ("states", "actions", "train_graphs", "hidden", "batch_graphs", "batch_steps",
                "lr", "tol")
    bad = [name for name in positive if getattr(cfg, name) <= 0]
    if bad:
        raise UserError(f"executor config: {', '.join(bad)} must be positive")
    if cfg.epochs < 0:
        raise UserError(f"executor config: epochs must be >= 0 (0: untrained), got {cfg.epochs}")
    if not 0.0 <= cfg.gamma < 1.0:
        raise UserError(f"executor config: gamma must lie in [0, 1), got {cfg.gamma}")
    if cfg.seed < 0:
        raise UserError(f"executor config: seed must be >= 0, got {cfg.seed}")
    if cfg.family not in GRAPH_FAMILIES:
        raise UserError(f"executor config: unknown graph family {cfg.family!r}; valid: "
                        f"{', '.join(GRAPH_FAMILIES)}")
    if cfg.lr_schedule not in LR_SCHEDULES:
        raise UserError(f"executor config: lr_schedule must be one of {', '.join(LR_SCHEDULES)}")
    if cfg.maze_size not in MAZE_SIZES:
        raise UserError(f"executor config: maze_size must be one of {MAZE_SIZES}, got {cfg.maze_size}")


#: The agents' default executors: XLVIN-R (random deterministic graphs, |S| = 20, |A| = 8) and
#: XLVIN-CP (CartPole trees; their training loss has converged after about 3 epochs), H = 50
#: like the classic-control latents; and the maze executor (paper section 4.1): the graphs of
#: 1,000 training 8x8 mazes, H = 10 like the maze latent (the authors' later code: executor
#: width 10), LayerNorm after every step. "untrained" is XLVIN-R's executor before any
#: pre-training (its initial weights, frozen like the others): an ablation of what the
#: pre-training on value iteration adds. "maze-untrained" and "maze-random" are the maze
#: executor's architecture (H = 10, LayerNorm) left at its initial weights, or pre-trained on
#: XLVIN-R's random graphs instead of mazes: ablations of the maze executor. "authors-random" is the executor of the authors' later
#: XLVIN-R code (dransyhe/CNAP, models/executor/train.py with its defaults): their Erdos-Renyi
#: MDPs, 500 of them, one Adam step at a constant 5e-3 per VI step, one pass, sum aggregation
#: (their policy then runs it with max: `--executor-aggregation`), LayerNorm, linear messages.
DEFAULT_EXECUTORS = {
    "random": ExecutorConfig(family="random_deterministic", states=20, actions=8),
    "untrained": ExecutorConfig(family="random_deterministic", states=20, actions=8, epochs=0),
    "authors-random": ExecutorConfig(
        family="erdos_renyi_weighted", states=20, actions=8, train_graphs=500, epochs=1,
        batch_graphs=1, batch_steps=1, lr=5e-3, lr_schedule="constant", aggregation="sum",
        layer_norm=True, messages="linear"),
    "cartpole": ExecutorConfig(family="cartpole_tree", epochs=5),
    "maze": ExecutorConfig(family=MAZE_FAMILY, train_graphs=1000, hidden=10, layer_norm=True),
    "maze-untrained": ExecutorConfig(family=MAZE_FAMILY, train_graphs=1000, hidden=10,
                                     layer_norm=True, epochs=0),
    "maze-random": ExecutorConfig(family="random_deterministic", states=20, actions=8, hidden=10,
                                  layer_norm=True),
}


def executor_command(cfg: ExecutorConfig, out: str, accelerate: bool = True) -> str:
    """The `xlvin pretrain-executor` command that trains the executor of `cfg` into `out` in
    reproducible mode on the accelerated path or not, every option spelled out."""
    flags = [f"--{name.replace('_', '-')} {str(value).lower() if isinstance(value, bool) else value}"
             for name, value in to_dict(cfg).items() if name != "family"]
    return (f"xlvin pretrain-executor --reproducible --graphs {cfg.family} {' '.join(flags)} "
            f"--accelerate {str(accelerate).lower()} --out {out}")


def default_executor_config(
    kind: str, seed: int = 0, layer_norm: bool = False, messages: str = "relu"
) -> ExecutorConfig:
    """The config of the default executor `kind` trained from `seed`. `layer_norm` True and
    `messages` "linear" (the authors' variants) override the kind's own; False and "relu", the
    options' defaults, keep it: the maze's and the authors' executors keep their LayerNorm, the
    authors' its linear messages."""
    if kind not in DEFAULT_EXECUTORS:
        raise UserError(f"unknown default executor {kind!r}; valid: {', '.join(DEFAULT_EXECUTORS)}")
    cfg = dataclasses.replace(DEFAULT_EXECUTORS[kind], seed=seed)
    if layer_norm:
        cfg = dataclasses.replace(cfg, layer_norm=True)
    if messages != "relu":
        cfg = dataclasses.replace(cfg, messages=messages)
    return cfg


def executor_key(cfg: ExecutorConfig) -> dict[str, Any]:
    """Everything that determines the executor of `cfg` but the kernel mode: its config and the
    file format (`xlvin.pretrain.files.cached_executor_path` names its file by their hash)."""
    key = {"format": FORMAT, **to_dict(cfg)}
    if cfg.family != MAZE_FAMILY:  # the field only matters to maze executors: others keep
        del key["maze_size"]  # the hashes they had before it existed
    if cfg.lr_schedule == "cosine":  # likewise for the default schedule
        del key["lr_schedule"]
    return key
