"""The VIN gridworld mazes (Tamar et al. 2016) the paper's continual maze is built on: a seeded
generator, BFS difficulty levels, the VIN/XLVIN npz format, held-out splits that never overlap.

A *maze* is a wall map [H, W] (True = wall; the border is always wall) and a goal cell. A *start*
is a maze and a free cell; its *level* (the paper's difficulty) is the BFS shortest-path length
from the start to the goal with the 8 moves of `MOVES`. As in VIN's data, the starts of a maze are
the states of expert trajectories: a few random free cells, each followed along a shortest path
to the goal, every state of the path (the goal excepted) a start with its optimal action. So a
maze contributes starts of every level up to its longest trajectory, and the level histogram
falls off like a power law (paper appendix E).

The generator is VIN's as ported to PyTorch by kentsommer/pytorch-value-iteration-networks,
the port whose data set the paper used (`gridworld_8x8.npz`): a random goal off the border, then
a fixed number of obstacle attempts, each a rectangle of height and width ceil(U * size_max)
anchored at (ceil(U * (H - 1)), ceil(U * (W - 1))), rejected when it covers the goal, then the
border. VIN's MATLAB script differs (randi(maxObs) attempts, circles too, size_max 0 for 8x8:
single cells, which walls 7.4 of the 36 interior cells on average); the port reads size_max 0 as
side / 4 = 2 and draws rectangles only, which walls 23.9 (sd 3.0), as the paper's set does
(23.8, sd 3.0). `MAZE_SETTINGS` holds the settings; the level histograms are compared in the
docs/mazes.md.
"""

import functools
import zipfile
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from xlvin.errors import UserError

#: The 8 actions of VIN's gridworld, (row change, column change): N, S, E, W, NE, NW, SE, SW
#: (the order of the npz's action labels; row 0 is the top).
MOVES = np.array([(-1, 0), (1, 0), (0, 1), (0, -1), (-1, 1), (-1, -1), (1, 1), (1, -1)])
SPLITS = ("train", "test")


@dataclass(frozen=True)
class MazeSettings:
    """How the mazes of one side length are generated (VIN's settings, see the module docstring)."""

    size: int  #: side H = W, border included
    obstacle_attempts: int  #: rectangles tried per maze (each rejected if it covers the goal)
    obstacle_size_max: int  #: a rectangle's height and width: ceil(U * size_max)
    trajectories: int  #: expert trajectories (random free start cells) per maze (VIN: 7)
    train_mazes: int  #: mazes of the training split (VIN: 5000)
    test_mazes: int  #: mazes of the held-out split (VIN: 5000 / 6)


#: 8x8 as the paper's data set (30 attempts, size_max 0 read as 8 / 4); 16x16 with VIN's 16x16
#: settings (40 attempts, size_max 1: single cells).
MAZE_SETTINGS = {
    8: MazeSettings(8, obstacle_attempts=30, obstacle_size_max=2, trajectories=7,
                    train_mazes=5000, test_mazes=833),
    16: MazeSettings(16, obstacle_attempts=40, obstacle_size_max=1, trajectories=7,
                     train_mazes=5000, test_mazes=833),
}


@dataclass(frozen=True)
class MazeSet:
    """Mazes and the starts in them (one episode starts at one start).

    walls [M, H, W] bool, goals [M, 2] (row, col); per start: maze [N] (index into walls),
    cells [N, 2] (row, col), levels [N] (BFS distance to the goal, >= 1), actions [N] (an optimal
    action: the expert label).
    """

    walls: np.ndarray
    goals: np.ndarray
    maze: np.ndarray
    cells: np.ndarray
    levels: np.ndarray
    actions: np.ndarray

    def __post_init__(self) -> None:
        by_level: dict[int | None, np.ndarray] = {None: np.arange(len(self.maze))}
        by_level.update({int(d): np.flatnonzero(self.levels == d) for d in np.unique(self.levels)})
        object.__setattr__(self, "_starts_by_level", by_level)  # an index of a frozen set

    @property
    def size(self) -> int:
        return int(self.walls.shape[1])

    def __len__(self) -> int:
        return len(self.maze)

    def level_counts(self) -> dict[int, int]:
        """Starts per level, {level: count}, levels ascending."""
        levels, counts = np.unique(self.levels, return_counts=True)
        return {int(d): int(n) for d, n in zip(levels, counts)}

    def starts_of_level(self, level: int | None) -> np.ndarray:
        """Indices of the starts of `level` (all starts for None); a UserError when none."""
        index = self._starts_by_level.get(level)
        if index is None:
            raise UserError(
                f"no {self.size}x{self.size} maze start of level {level}; levels here: "
                f"{min(self.level_counts())}..{max(self.level_counts())}"
            )
        return index

    def maze_keys(self) -> set[bytes]:
        """One key per distinct maze (walls and goal): what "the same maze" means for splits."""
        return {maze_key(w, g) for w, g in zip(self.walls, self.goals)}


def maze_key(walls: np.ndarray, goal: np.ndarray) -> bytes:
    return np.packbits(walls).tobytes() + np.asarray(goal, dtype=np.int16).tobytes()


def bfs_distances(walls: np.ndarray, goals: np.ndarray) -> np.ndarray:
    """Shortest-path lengths to the goal with the 8 `MOVES`, of every cell of every maze.

    walls [M, H, W] bool, goals [M, 2] -> distances [M, H, W] int64 (0 at the goal, -1 at walls
    and cells that cannot reach it). Breadth-first, all mazes at once: the cells at distance d are
    the free, unvisited 8-neighbours of those at d - 1 (the moves are symmetric).
    """
    M, H, W = walls.shape
    dist = np.full((M, H, W), -1, dtype=np.int64)
    dist[np.arange(M), goals[:, 0], goals[:, 1]] = 0
    free = ~walls
    padded = np.zeros((M, H + 2, W + 2), dtype=bool)  # the frontier, with a margin of one cell
    padded[:, 1:-1, 1:-1] = dist == 0
    d = 0
    while True:
        near = np.zeros_like(free)
        for dr, dc in MOVES:
            near |= padded[:, 1 + dr : 1 + dr + H, 1 + dc : 1 + dc + W]
        frontier = near & free & (dist < 0)
        if not frontier.any():
            return dist
        d += 1
        dist[frontier] = d
        padded[:, 1:-1, 1:-1] = frontier


def random_walls(rng: np.random.Generator, settings: MazeSettings) -> tuple[np.ndarray, np.ndarray]:
    """One maze of VIN's generator: (walls [H, W] bool, goal [2]); module docstring. The attempts
    are independent (each is kept unless it covers the goal), so they are drawn and tested at
    once."""
    n, attempts = settings.size, settings.obstacle_attempts
    goal = rng.integers(1, n - 1, size=2)  # VIN rejects a goal on the border
    extent = np.ceil(rng.random((attempts, 2)) * settings.obstacle_size_max)  # height, width
    anchor = np.ceil(rng.random((attempts, 2)) * (n - 1))  # top-left row, column
    offset = np.indices((n, n))[None] - anchor[:, :, None, None]  # [A, 2, H, W]
    obstacles = ((offset >= 0) & (offset < extent[:, :, None, None])).all(axis=1)  # [A, H, W]
    kept = ~obstacles[:, goal[0], goal[1]]
    walls = obstacles[kept].any(axis=0)
    walls[[0, -1], :] = True
    walls[:, [0, -1]] = True
    return walls, goal


def expert_starts(
    rng: np.random.Generator, walls: np.ndarray, distances: np.ndarray, trajectories: int
) -> list[tuple[int, int, int, int]]:
    """The states of `trajectories` expert trajectories in one maze: [(row, col, level, action)].

    walls [H, W], distances [H, W] (`bfs_distances` of the maze). Start cells are distinct free
    cells drawn at random (VIN's sample_trajectory); a start that cannot reach the goal, or is
    the goal, gives none. Each trajectory follows a shortest path, breaking ties between optimal moves at random.
    """
    free = np.argwhere(~walls)
    picks = rng.permutation(len(free))[:trajectories]
    padded = np.pad(distances, 1, constant_values=-1)  # moves off the grid reach "no cell"
    states = []
    for row, col in free[picks]:
        while distances[row, col] > 0:
            d = distances[row, col]
            reached = padded[row + 1 + MOVES[:, 0], col + 1 + MOVES[:, 1]]  # [8]
            optimal = np.flatnonzero(reached == d - 1)
            action = optimal[rng.integers(len(optimal))]
            states.append((int(row), int(col), int(d), int(action)))
            row, col = row + MOVES[action][0], col + MOVES[action][1]
    return states


def _maze_set(walls: list[np.ndarray], goals: list[np.ndarray], starts: list[list[tuple]]) -> MazeSet:
    maze = np.concatenate([np.full(len(s), i) for i, s in enumerate(starts)]).astype(np.int64)
    rows = np.array([s for per_maze in starts for s in per_maze], dtype=np.int64).reshape(-1, 4)
    return MazeSet(
        walls=np.stack(walls), goals=np.stack(goals).astype(np.int64), maze=maze,
        cells=rows[:, :2].copy(), levels=rows[:, 2].copy(), actions=rows[:, 3].copy(),
    )


GENERATION_CHUNK = 256


def generated_split(size: int, split: str, seed: int = 0) -> MazeSet:
    """The `split` ("train" or "test") of the mazes generated for side `size` from `seed`.

    Both splits come from one stream of distinct mazes (a maze already drawn is skipped, as is a
    maze none of whose trajectories reaches the goal): the first `train_mazes` are the training
    split, the next `test_mazes` the held-out one, so no maze is in both. Cached per process
    (every env of a vector env shares one copy); 8x8 takes about a second.
    """
    if size not in MAZE_SETTINGS:
        raise UserError(f"maze size {size} has no generator settings; choose one of {sorted(MAZE_SETTINGS)}")
    if split not in SPLITS:
        raise UserError(f"maze split {split!r}: choose one of {', '.join(SPLITS)}")
    return _generated_splits(size, seed)[SPLITS.index(split)]


@functools.lru_cache(maxsize=4)
def _generated_splits(size: int, seed: int) -> tuple[MazeSet, MazeSet]:
    settings = MAZE_SETTINGS[size]
    rng = np.random.default_rng([seed, size])
    wanted = settings.train_mazes + settings.test_mazes
    seen: set[bytes] = set()
    walls: list[np.ndarray] = []
    goals: list[np.ndarray] = []
    starts: list[list[tuple]] = []
    while len(walls) < wanted:
        # mazes are drawn GENERATION_CHUNK at a time so that one BFS serves them all
        chunk = [random_walls(rng, settings) for _ in range(GENERATION_CHUNK)]
        distances = bfs_distances(np.stack([w for w, _ in chunk]), np.stack([g for _, g in chunk]))
        for (w, g), dist in zip(chunk, distances):
            key = maze_key(w, g)
            if key in seen or len(walls) == wanted:
                continue
            seen.add(key)
            states = expert_starts(rng, w, dist, settings.trajectories)
            if states:
                walls.append(w)
                goals.append(g)
                starts.append(states)
    cut = settings.train_mazes
    return (_maze_set(walls[:cut], goals[:cut], starts[:cut]),
            _maze_set(walls[cut:], goals[cut:], starts[cut:]))


#: The arrays of one split in the VIN / XLVIN npz: images (N, 2, H, W) [walls (1 = wall),
#: goal (10 at the goal)], start row, start column, action label.
NPZ_ARRAYS = {"train": ("arr_0", "arr_1", "arr_2", "arr_3"), "test": ("arr_4", "arr_5", "arr_6", "arr_7")}
#: The most bytes a maze npz may hold once decompressed (the 8x8 set: ~40 MB); a larger archive
#: (a zip bomb, say) is refused before anything is decompressed.
MAX_NPZ_BYTES = 1 << 30


def _read_npz_split(path: Path, split: str) -> tuple[np.ndarray, ...]:
    """(images, rows, cols, labels) of `split`, each checked for the layout of a VIN npz:
    images [N, 2, S, S], the others [N, >= 1] integers (start row, column, action label)."""
    try:
        with zipfile.ZipFile(path) as archive:
            unpacked = sum(info.file_size for info in archive.infolist())
    except (OSError, zipfile.BadZipFile) as err:
        raise UserError(f"{path}: not a VIN maze npz (not a zip archive: {err})") from None
    if unpacked > MAX_NPZ_BYTES:
        raise UserError(f"{path}: {unpacked} bytes once decompressed, more than the "
                        f"{MAX_NPZ_BYTES} a maze npz may hold")
    try:
        with np.load(path, allow_pickle=False) as data:
            images, rows, cols, labels = (data[name] for name in NPZ_ARRAYS[split])
    except (OSError, KeyError, ValueError, zipfile.BadZipFile) as err:
        raise UserError(f"{path}: not a VIN maze npz ({err})") from None
    n = len(images) if images.ndim == 4 else -1
    if images.ndim != 4 or images.shape[1] != 2 or images.shape[2] != images.shape[3] or n == 0:
        raise UserError(f"{path}: {split} images must be [N, 2, S, S], got {list(images.shape)}")
    for name, array in (("start rows", rows), ("start columns", cols), ("labels", labels)):
        if array.ndim != 2 or len(array) != n or array.shape[1] < 1 or array.dtype.kind not in "iuf":
            raise UserError(f"{path}: {split} {name} must be [{n}, >= 1] numbers, got "
                            f"{list(array.shape)} {array.dtype}")
    side = images.shape[2]
    for name, array, high in (("start rows", rows, side), ("start columns", cols, side),
                              ("labels", labels, len(MOVES))):
        if (array[:, 0] < 0).any() or (array[:, 0] >= high).any():
            raise UserError(f"{path}: {split} {name} must lie in [0, {high}), got "
                            f"{array[:, 0].min()}..{array[:, 0].max()}")
    return images, rows.astype(np.int64), cols.astype(np.int64), labels.astype(np.int64)


@functools.lru_cache(maxsize=8)
def load_npz(path: str, split: str) -> MazeSet:
    """A split of a VIN / XLVIN npz data set (`NPZ_ARRAYS`) as a MazeSet, levels by BFS.

    Samples of the same maze (walls and goal) share one maze entry. The action labels are kept
    as the expert actions (they are optimal: every label moves one step closer to the goal).
    """
    if split not in SPLITS:
        raise UserError(f"maze split {split!r}: choose one of {', '.join(SPLITS)}")
    images, rows, cols, labels = _read_npz_split(Path(path), split)
    walls_all = images[:, 0] > 0.5
    goals_all = np.argwhere(images[:, 1] > 0)[:, 1:]
    if len(goals_all) != len(images):
        raise UserError(f"{path}: every {split} image needs exactly one goal cell")
    index: dict[bytes, int] = {}
    walls, goals, starts = [], [], []
    for w, g, r, c, a in zip(walls_all, goals_all, rows[:, 0], cols[:, 0], labels[:, 0]):
        key = maze_key(w, g)
        if key not in index:
            index[key] = len(walls)
            walls.append(w)
            goals.append(g)
            starts.append([])
        starts[index[key]].append((r, c, 0, a))
    maze_set = _maze_set(walls, goals, starts)
    border = maze_set.walls.copy()
    border[:, 1:-1, 1:-1] = True
    if not border.all():
        raise UserError(f"{path}: a {split} maze has a gap in its border wall")
    distances = bfs_distances(maze_set.walls, maze_set.goals)
    levels = distances[maze_set.maze, maze_set.cells[:, 0], maze_set.cells[:, 1]]
    if (levels < 1).any():
        raise UserError(f"{path}: {int((levels < 1).sum())} {split} starts cannot reach their goal")
    return MazeSet(maze_set.walls, maze_set.goals, maze_set.maze, maze_set.cells, levels, maze_set.actions)


def maze_split(size: int, split: str, dataset: str = "generated", seed: int = 0) -> MazeSet:
    """The mazes an environment draws from: `dataset` "generated" (`generated_split`) or the path
    of a VIN npz (`load_npz`), whose side must be `size`."""
    if dataset == "generated":
        return generated_split(size, split, seed)
    mazes = load_npz(dataset, split)
    if mazes.size != size:
        raise UserError(f"{dataset} holds {mazes.size}x{mazes.size} mazes, not {size}x{size}")
    return mazes
