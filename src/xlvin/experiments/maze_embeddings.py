"""Paper figure 5 (section 4.1, "Qualitative results"): how the encoder organises the states of
one held-out 8x8 maze, before any PPO training and as a curriculum XLVIN passes levels.

Every free cell of the maze that can reach the goal becomes a state: the maze's observation with
the agent on that cell (the goal's own cell too: the goal's embedding h_goal). Each model embeds
them with its encoder, h_s = z(s); the figure shows the 3D PCA projection of the h_s, coloured by
BFS distance to the goal, with the *edges of the transition model*: for each state but the goal
and each move onto a free cell, the segment from h_s to the prediction h_s + T(h_s, a). Each
panel's number is Spearman's rank correlation between ||h_s - h_goal|| and the BFS distance over
the states but the goal: 1 when embedding distance to the goal orders the states as the maze
does.

The models: "TransE only", an encoder and transition model of the run's architecture trained by
the TransE loss alone on random-policy transitions of the training mazes (the run's own TransE
pre-training settings unless changed; `shared_transe_file`, cached by everything that determines
it), and the run's policy after each requested level (`load_run(run, level=d)`). A requested
level the run never passed is not drawn: the last passed level not already shown takes its
place, labelled with its real number, and the figure and JSON say so.
"""

import dataclasses
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import torch
from torch import nn

from xlvin.envs.maze_data import MOVES, MazeSet, bfs_distances
from xlvin.errors import UserError
from xlvin.experiments.figures import pyplot
from xlvin.experiments.value_predictability import maze_observations
from xlvin.io.files import atomic_savefig, read_json
from xlvin.io.run_dir import CONFIG, check_creatable, read_json_object, write_json
from xlvin.io.weights import load_state, load_weights
from xlvin.nn.transition import TransitionModel
from xlvin.process import set_threads
from xlvin.pretrain.transe import TransEConfig
from xlvin.run.agents import transe_pair
from xlvin.run.training import LEVELS_DIR, level_weights_file, load_run, shared_transe_file
from xlvin.run.config import RunConfig, on_cpu
from xlvin.run.protocols import protocol_of
from xlvin.run.checks import check_run

#: The default maze is drawn (seeded) from the held-out mazes whose longest optimal path, over
#: the cells that reach the goal, has at least this many moves (56 of the 833 8x8 test mazes).
LONG_PATH = 6
#: The paper's figure: after levels 1, 2 and 9.
PAPER_LEVELS = (1, 2, 9)


@dataclass(frozen=True)
class CellStates:
    """The states of one maze: every free cell that reaches the goal, row-major.

    cells [N, 2] (row, col); distances [N] (BFS moves to the goal, 0 at the goal); obs
    [N, 3, H, W] (the agent on the cell); goal_index: the goal's row; edges [E, 3] (state,
    action, next state) of every move from a state but the goal onto a free cell; unreachable:
    free cells left out (walled off from the goal).
    """

    walls: np.ndarray
    goal: tuple[int, int]
    cells: np.ndarray
    distances: np.ndarray
    obs: np.ndarray
    goal_index: int
    edges: np.ndarray
    unreachable: int


def cell_states(walls: np.ndarray, goal: tuple[int, int]) -> CellStates:
    """The states of the maze walls [H, W] (True = wall) with goal cell `goal` (`CellStates`)."""
    walls = np.asarray(walls, dtype=bool)
    h, w = walls.shape
    dist = bfs_distances(walls[None], np.array([goal]))[0]  # [H, W], -1: wall or walled off
    cells = np.argwhere(dist >= 0)  # [N, 2] row-major
    index = np.full((h, w), -1)
    index[cells[:, 0], cells[:, 1]] = np.arange(len(cells))
    obs = maze_observations(walls, goal, cells)
    goal_index = int(index[goal[0], goal[1]])
    edges = []
    for s, (r, c) in enumerate(cells):
        if s == goal_index:  # an episode ends on the goal
            continue
        for a, (dr, dc) in enumerate(MOVES):
            tr, tc = r + dr, c + dc
            if 0 <= tr < h and 0 <= tc < w and index[tr, tc] >= 0:
                edges.append((s, a, int(index[tr, tc])))
    return CellStates(walls, (int(goal[0]), int(goal[1])), cells, dist[cells[:, 0], cells[:, 1]],
                      obs, goal_index, np.array(edges, dtype=np.int64).reshape(-1, 3),
                      int((~walls).sum()) - len(cells))


def long_mazes(mazes: MazeSet, long_path: int = LONG_PATH) -> np.ndarray:
    """The indices of the mazes whose longest optimal path has >= `long_path` moves (the longest
    mazes when none has)."""
    longest = bfs_distances(mazes.walls, mazes.goals).reshape(len(mazes.walls), -1).max(1)  # [M]
    return np.flatnonzero(longest >= min(long_path, longest.max()))


def choose_maze(mazes: MazeSet, seed: int, long_path: int = LONG_PATH) -> int:
    """A seeded choice among `long_mazes`."""
    return int(np.random.default_rng(seed).choice(long_mazes(mazes, long_path)))


def average_ranks(values: np.ndarray) -> np.ndarray:
    """Ranks 1..n of `values` [n], tied values sharing the mean of their ranks."""
    values = np.asarray(values, dtype=float)
    order = np.argsort(values, kind="stable")
    ranks = np.empty(len(values))
    ranks[order] = np.arange(1, len(values) + 1)
    _, group, counts = np.unique(values, return_inverse=True, return_counts=True)
    sums = np.bincount(group, weights=ranks)  # rank sum of each distinct value
    return sums[group] / counts[group]


def rank_correlation(x: np.ndarray, y: np.ndarray) -> float:
    """Spearman's rho: the Pearson correlation of the average ranks of x [n] and y [n]; NaN when
    either is constant."""
    rx, ry = average_ranks(x) - (len(x) + 1) / 2, average_ranks(y) - (len(y) + 1) / 2
    norm = np.sqrt((rx**2).sum() * (ry**2).sum())
    return float((rx * ry).sum() / norm) if norm > 0 else float("nan")


def pca(points: np.ndarray, dims: int = 3) -> tuple[np.ndarray, np.ndarray]:
    """(mean [k], components [dims, k]) of points [N, k]: the `dims` principal directions (rows of
    zeros past the points' rank, so any input projects to `dims` coordinates)."""
    mean = points.mean(0)
    _, _, vt = np.linalg.svd(points - mean, full_matrices=False)  # vt [min(N, k), k]
    components = np.zeros((dims, points.shape[1]))
    components[: min(dims, len(vt))] = vt[:dims]
    return mean, components


def project(points: np.ndarray, mean: np.ndarray, components: np.ndarray) -> np.ndarray:
    """points [N, k] -> their PCA coordinates [N, dims]."""
    return (points - mean) @ components.T


@torch.no_grad()
def encode(encoder: nn.Module, obs: np.ndarray) -> np.ndarray:
    """h [N, k] of observations [N, 3, H, W], in evaluation mode (BatchNorm's running
    statistics: how the policy acts)."""
    encoder.eval()
    return encoder(torch.from_numpy(obs)).numpy().astype(np.float64)


@torch.no_grad()
def embed(
    encoder: nn.Module, transition: TransitionModel, states: CellStates
) -> tuple[np.ndarray, np.ndarray]:
    """(h [N, k] of every state, predictions h_s + T(h_s, a) [E, k] of every edge), in
    evaluation mode."""
    h = encode(encoder, states.obs)
    transition.eval()
    sources, actions = torch.from_numpy(states.edges[:, 0]), torch.from_numpy(states.edges[:, 1])
    predicted = transition.next_embedding(torch.from_numpy(h).float()[sources], actions)  # [E, k]
    return h, predicted.numpy().astype(np.float64)


def goal_rho(h: np.ndarray, states: CellStates) -> float:
    """Figure 5's number: Spearman's rho of ||h_s - h_goal|| against the BFS distance, over the
    states but the goal."""
    others = np.arange(len(h)) != states.goal_index
    to_goal = np.linalg.norm(h - h[states.goal_index], axis=1)  # [N]
    return rank_correlation(to_goal[others], states.distances[others])


def goal_rho_over_mazes(encoder: nn.Module, mazes: MazeSet, indices: np.ndarray) -> np.ndarray:
    """`goal_rho` of the encoder's embeddings on each maze of `indices` [M]: [M] (NaN where a
    maze's distances or embedding distances are all equal)."""
    rhos = []
    for i in indices:
        states = cell_states(mazes.walls[i], tuple(mazes.goals[i]))
        rhos.append(goal_rho(encode(encoder, states.obs), states))
    return np.array(rhos)


def panel(model: str, label: str, level: int | None, h: np.ndarray, predicted: np.ndarray,
          states: CellStates) -> dict[str, Any]:
    """One panel's numbers and PCA coordinates: Spearman's rho of ||h_s - h_goal|| against BFS
    distance (the goal left out), and transition hits@1 (the fraction of edges whose prediction
    is nearer to the true successor's h than to any other state's)."""
    nearest = np.linalg.norm(predicted[:, None] - h[None], axis=2).argmin(1)  # [E]
    mean, components = pca(h)
    return {
        "model": model,
        "label": label,
        "level": level,
        "spearman_rho": goal_rho(h, states),
        "states": len(h),
        "edges": len(predicted),
        "transition_hits_at_1": float((nearest == states.edges[:, 2]).mean()),
        "points": project(h, mean, components),  # [N, 3]
        "predicted": project(predicted, mean, components),  # [E, 3]
    }


def parse_levels(text: str) -> list[int]:
    """The levels of `--levels 1,2,9`: positive integers, each once, in the given order."""
    levels: list[int] = []
    for item in (x.strip() for x in text.split(",")):
        if not item.isdecimal() or int(item) < 1:
            raise UserError(f"--levels {text!r}: {item!r} is not a positive integer "
                            "(e.g. --levels 1,2,9)")
        if int(item) not in levels:
            levels.append(int(item))
    return levels


def passed_levels(run_dir: Path) -> list[int]:
    """The levels whose policy a curriculum run kept (DIR/levels/level-DD.safetensors)."""
    files = (run_dir / LEVELS_DIR).glob("level-*.safetensors")
    stems = [p.stem.removeprefix("level-") for p in files]
    found = {int(stem) for stem in stems if stem.isdecimal()}
    return sorted(d for d in found if level_weights_file(run_dir, d).is_file())


def plan_levels(requested: list[int], passed: list[int]) -> tuple[list[int], list[str]]:
    """The levels to draw for `requested` (`passed`: ascending, not empty) and notes on those
    replaced or dropped: a level the run did not pass gives way to the run's last passed level,
    unless that one is drawn already."""
    shown = [d for d in requested if d in passed]
    notes = []
    for d in (d for d in requested if d not in passed):
        if passed[-1] not in shown:
            shown.append(passed[-1])
            notes.append(f"level {d} not reached by this run; last passed level {passed[-1]} shown")
        else:
            notes.append(f"level {d} not reached by this run (last passed: {passed[-1]})")
    return shown, notes


def check_xlvin_run(run_dir: Path) -> RunConfig:
    """The config of a curriculum XLVIN run directory with at least one passed level, else one
    UserError saying what it is instead."""
    config = run_dir / CONFIG
    if not config.is_file():
        raise UserError(f"--run {run_dir}: not a run directory ({CONFIG} is missing)")
    cfg = RunConfig.from_saved(read_json_object(config), str(config))
    if cfg.train.agent != "xlvin":
        raise UserError(f"--run {run_dir}: a {cfg.train.agent} run has no encoder and transition "
                        "model to plot; need an XLVIN run")
    if not protocol_of(cfg).saves_levels:
        raise UserError(f"--run {run_dir}: a {cfg.train.protocol} run has no per-level policies; "
                        "need a curriculum run (--protocol curriculum)")
    if not passed_levels(run_dir):
        raise UserError(f"--run {run_dir}: the curriculum passed no level yet (no "
                        f"{LEVELS_DIR}/level-DD.safetensors)")
    return cfg


def transe_only(
    cfg: RunConfig, progress: bool
) -> tuple[nn.Module, TransitionModel, dict[str, Any]]:
    """The encoder and transition model of the run's architecture trained by TransE alone on
    `cfg.transe` (cached: `shared_transe_file`), and the file's description."""
    spaces, arch = check_run(cfg)
    path = shared_transe_file(cfg, spaces, arch, progress)
    pair = transe_pair(arch, spaces)
    tensors, meta = load_weights(path, what="TransE weights")
    load_state(pair, tensors, path)
    return pair["encoder"], pair["transition"], {"file": str(path), **meta}


def maze_embeddings(
    run_dir: Path, levels: list[int], out: Path, maze: int | None = None, seed: int = 0,
    transe: TransEConfig | None = None, progress: bool = True,
) -> dict[str, Any]:
    """Figure 5 of the curriculum XLVIN run `run_dir` to `out` (PNG) and its numbers beside it
    (`out` with .json); return the numbers. Everything is checked before anything is trained or
    written. `transe`: the TransE-only model's settings (default: the run's)."""
    run_dir = Path(run_dir).expanduser()
    cfg = check_xlvin_run(run_dir)
    passed = passed_levels(run_dir)
    shown, notes = plan_levels(levels, passed)
    if seed < 0:
        raise UserError(f"--seed must be >= 0, got {seed}")
    if out.is_dir():
        raise UserError(f"--out {out} is a directory; give the figure's file name")
    check_creatable(out)
    curriculum = cfg.curriculum
    mazes = curriculum.held_out_splits()[curriculum.size]
    if maze is not None and not 0 <= maze < len(mazes.walls):
        side = f"{curriculum.size}x{curriculum.size}"
        raise UserError(f"--maze {maze}: the held-out {side} split has mazes "
                        f"0..{len(mazes.walls) - 1}")
    index = choose_maze(mazes, seed) if maze is None else maze
    states = cell_states(mazes.walls[index], tuple(mazes.goals[index]))
    local = dataclasses.replace(on_cpu(cfg), transe=transe or cfg.transe)
    set_threads(cfg.ppo.torch_threads)
    encoder, transition, transe_meta = transe_only(local, progress)
    transe_cfg = transe_meta["key"]["transe"]
    label = (f"TransE only ({transe_meta['transitions']:,} random-policy transitions, "
             f"{transe_cfg['epochs']} epochs)")
    panels = [panel("transe_only", label, None, *embed(encoder, transition, states), states)]
    for level in shown:
        agent, _ = load_run(run_dir, level=level)
        label = f"XLVIN after level {level}" + ("" if level in levels else " (last passed)")
        h, predicted = embed(agent.encoder, agent.transition, states)
        panels.append(panel("xlvin", label, level, h, predicted, states))
    out.parent.mkdir(parents=True, exist_ok=True)
    plot(panels, states, index, notes, out)
    summary = {
        "run": str(run_dir),
        "config": cfg.to_json(),
        "maze": {"split": "test", "size": curriculum.size, "dataset": curriculum.dataset,
                 "dataset_seed": curriculum.dataset_seed, "index": index,
                 "chosen": "--maze" if maze is not None else f"seeded (seed {seed}) among "
                 f"mazes with a longest optimal path >= {LONG_PATH}",
                 "goal": list(states.goal), "longest_path": int(states.distances.max()),
                 "states": len(states.cells), "unreachable_free_cells": states.unreachable},
        "levels_requested": levels,
        "levels_passed_by_run": passed,
        "levels_shown": shown,
        "notes": notes,
        "transe_only": {"settings": transe_cfg, "transitions": transe_meta["transitions"],
                        "pretraining": transe_meta["transe"],
                        "cache_file": Path(transe_meta["file"]).name},
        "panels": [{k: v for k, v in p.items() if k not in ("points", "predicted")}
                   for p in panels],
    }
    write_json(out.with_suffix(".json"), summary)
    return summary


def plot(panels: list[dict[str, Any]], states: CellStates, index: int, notes: list[str],
         path: Path) -> None:
    """Top row: the maze coloured by BFS distance (goal green) and the TransE-only panel; below,
    one panel per level: 3D PCA of the states, the transition model's edges in grey."""
    plt = pyplot()
    from mpl_toolkits.mplot3d.art3d import Line3DCollection

    cmap, vmax = plt.get_cmap("plasma"), max(int(states.distances.max()), 1)
    levels = panels[1:]
    cols = max(2, len(levels))
    fig = plt.figure(figsize=(4.2 * cols, 8.4))
    ax = fig.add_subplot(2, cols, 1)
    grid = np.full(states.walls.shape, np.nan)
    grid[states.cells[:, 0], states.cells[:, 1]] = states.distances
    image = ax.imshow(np.ma.masked_invalid(grid), cmap=cmap, vmin=0, vmax=vmax)
    ax.imshow(np.ma.masked_where(~states.walls, states.walls), cmap="Greys", vmin=0, vmax=1)
    for (r, c), d in zip(states.cells, states.distances):
        ax.text(c, r, str(d), ha="center", va="center", fontsize=8,
                color="white" if d < vmax / 2 else "black")
    ax.add_patch(plt.Rectangle((states.goal[1] - 0.5, states.goal[0] - 0.5), 1, 1, fill=False,
                               edgecolor="limegreen", linewidth=3))
    ax.set_xticks([])
    ax.set_yticks([])
    ax.set_title(f"held-out {len(states.walls)}x{len(states.walls)} maze #{index}\nBFS distance "
                 "to the goal (green)", fontsize=9)
    fig.colorbar(image, ax=ax, fraction=0.046, shrink=0.8, label="BFS distance to the goal")
    positions = [2] + [cols + 1 + i for i in range(len(levels))]
    for where, p in zip(positions, panels):
        ax3 = fig.add_subplot(2, cols, where, projection="3d")
        sources = p["points"][states.edges[:, 0]]  # [E, 3]
        ax3.add_collection3d(Line3DCollection(np.stack([sources, p["predicted"]], 1),
                                              colors="grey", linewidths=0.6, alpha=0.5))
        both = np.concatenate([p["points"], p["predicted"]])  # the edges' ends too
        for set_lim, lo, hi in zip((ax3.set_xlim, ax3.set_ylim, ax3.set_zlim), both.min(0),
                                   both.max(0)):
            set_lim(lo, hi)
        others = np.arange(len(p["points"])) != states.goal_index
        ax3.scatter(*p["points"][others].T, c=states.distances[others], cmap=cmap, vmin=0,
                    vmax=vmax, s=25, depthshade=False)
        ax3.scatter(*p["points"][states.goal_index], color="limegreen", marker="*", s=250,
                    edgecolor="black", depthshade=False)
        ax3.set_title(f"{p['label']}\nSpearman rho (||h - h_goal||, BFS) = {p['spearman_rho']:.2f}"
                      f"; transition hits@1 {p['transition_hits_at_1']:.2f}", fontsize=8)
        ax3.tick_params(labelsize=6)
    fig.suptitle("3D PCA of the encoder's state embeddings, with the transition model's edges "
                 "h -> h + T(h, a)" + "".join(f"\n{n}" for n in notes), fontsize=10)
    fig.tight_layout()
    atomic_savefig(fig, path, dpi=120)
    plt.close(fig)


#: The committed embedding studies: three seeds of the CPU preset and the paper's configuration.
STUDIES = ("maze_embeddings.json", "maze_embeddings_seed1.json", "maze_embeddings_seed2.json",
           "maze_embeddings_h100.json")


def _span(values: list[float]) -> str:
    """'a' or 'a-b' (two decimals)."""
    low, high = f"{min(values):.2f}", f"{max(values):.2f}"
    return low if low == high else f"{low}-{high}"

def page_blocks(results: Path) -> dict[str, str]:
    """The README's and docs/mazes.md's blocks (`xlvin.experiments.pages`): the range of XLVIN's
    rho over every committed study and level, each study's rho per panel, and how often the
    TransE-only edges hit the right successor."""
    rhos = [p["spearman_rho"] for name in STUDIES
            for p in read_json(results / name)["panels"] if p["model"] == "xlvin"]
    sign = "every seed and level" if max(rhos) < 0 else "not on every seed and level"
    studies = [read_json(results / name) for name in STUDIES]
    rows = ["| panel | rho, seed 0 (the figure) | seed 1 | seed 2 | paper's configuration (H100, "
            "one run) |", "|---|---|---|---|---|"]
    for i, panel in enumerate(studies[0]["panels"]):
        cells = []
        for study in studies:
            other = study["panels"][i]
            shown = "" if other["level"] == panel["level"] else f" (level {other['level']})"
            cells.append(f"{other['spearman_rho']:.2f}{shown}")
        name = "TransE only" if panel["model"] == "transe_only" else panel["label"]
        rows.append(f"| {name} | " + " | ".join(cells) + " |")
    within = [q["transition_hits_at_1"] for st in studies for q in st["panels"]
              if q["model"] == "transe_only"]
    batches = [st["transe_only"]["pretraining"]["after/hits_at_1"] for st in studies[:3]]
    return {"embeddings-headline": (
        f"**Not reproduced**: XLVIN's embedding distance to the goal falls as the path to it "
        f"grows (rho {max(rhos):.2f} to {min(rhos):.2f}, {sign})"),
        "embeddings-table": "\n".join(rows),
        "embeddings-transe": (
            f"The TransE-only edges of this maze rarely end at the right successor (hits@1 "
            f"{_span(within)} within the maze, against {_span(batches)} over held-out batches "
            f"drawn from many mazes, "
            f"the CPU runs' pre-training).")}
