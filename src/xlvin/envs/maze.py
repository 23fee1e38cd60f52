"""The continual maze (paper section 4.1, appendix B) and the contextual maze (appendix F) as
gymnasium environments: `xlvin/Maze-v0` and `xlvin/ContextualMaze-v0`.

An episode is one start of a `MazeSet` (`xlvin.envs.maze_data`) drawn uniformly from those of
the chosen level (all levels when `level` is None). Observation: float32 [3, H, W], channels
`WALLS` (1 at walls, the border included), `AGENT` (1 at the agent's cell), `GOAL` (1 at the goal).
Actions: the 8 `MOVES` (N, S, E, W, NE, NW, SE, SW). Rewards (paper appendix B):

| the move ends                   | reward   | episode      |
|---------------------------------|----------|--------------|
| on a wall (or off the grid)     | -1       | terminates   |
| on the goal                     | +1       | terminates   |
| on a free cell                  | -0.01    | goes on      |
| on a free cell, step `max_steps`| -0.01    | truncated    |

The time limit `max_steps` (default H * W: 64 on 8x8, 256 on 16x16, more than any shortest path)
is the environment's own, not a wrapper's. The agent stays on its cell when it hits a wall (the
episode is over anyway). `info` holds `level` (the start's BFS distance to the goal) and, when
an episode ends, `reached_goal` and `success`: the goal reached within 2 x level moves (VIN's
success criterion). `set_level(level)` (or `reset(options={"level": d})`) changes the level of
the following episodes, for a curriculum acting through a vector env (`envs.call("set_level",
d)`).

Contextual maze: on reset a, b ~ U(0, 1) are drawn; the wall channel's left border column shows
a and its top border row b (the top-left corner shows b), the other walls stay 1. If a + b > 1
the reward model is inverted: the goal gives -1 and a wall +1 (both still end the episode);
`success` is then "hit a wall within 2 x level moves", i.e. the positive terminal reward.
"""

from typing import Any, ClassVar

import gymnasium as gym
import numpy as np

from xlvin.envs.maze_data import MOVES, MazeSet, maze_split
from xlvin.errors import UserError

WALLS, AGENT, GOAL = 0, 1, 2
MOVE_REWARD, WALL_REWARD, GOAL_REWARD = -0.01, -1.0, 1.0
MAZE_ID, CONTEXTUAL_MAZE_ID = "xlvin/Maze-v0", "xlvin/ContextualMaze-v0"
#: Pixels per cell of `render()`.
CELL_PIXELS = 16


class MazeEnv(gym.Env[np.ndarray, np.int64]):
    """One VIN gridworld maze per episode (module docstring).

    :param size: side of the mazes, border included (8 or 16 when generated).
    :param level: the level (BFS distance start-goal) of every episode; None: any level.
    :param split: "train" or "test" (held-out mazes, never in "train").
    :param dataset: "generated" (the library's seeded generator) or the path of a VIN npz.
    :param dataset_seed: the generator's seed (the same seed gives the same mazes).
    :param max_steps: time limit in moves; 0: H * W.
    :param contextual: the contextual maze of appendix F.
    """

    metadata: ClassVar[dict[str, Any]] = {"render_modes": ["rgb_array"], "render_fps": 4}

    def __init__(
        self,
        size: int = 8,
        level: int | None = None,
        split: str = "train",
        dataset: str = "generated",
        dataset_seed: int = 0,
        max_steps: int = 0,
        contextual: bool = False,
        render_mode: str | None = None,
    ) -> None:
        if render_mode not in (None, "rgb_array"):
            raise UserError(f"maze render_mode {render_mode!r}: only 'rgb_array' is supported")
        if max_steps < 0:
            raise UserError(f"maze max_steps must be >= 0, got {max_steps}")
        self.mazes: MazeSet = maze_split(size, split, dataset, dataset_seed)
        self.size = size
        self.contextual = contextual
        self.max_steps = max_steps or size * size
        self.render_mode = render_mode
        self.observation_space = gym.spaces.Box(0.0, 1.0, (3, size, size), np.float32)
        self.action_space = gym.spaces.Discrete(len(MOVES))
        self.set_level(level)
        self._start = 0
        self._cell = np.zeros(2, dtype=np.int64)
        self._moves = 0
        self._inverted = False
        self._obs = np.zeros((3, size, size), dtype=np.float32)

    def set_level(self, level: int | None) -> None:
        """Draw the following episodes from the starts of `level` (None: every level)."""
        self.mazes.starts_of_level(level)  # a UserError if the set has no start of that level
        self.level = level

    def reset(
        self, *, seed: int | None = None, options: dict[str, Any] | None = None
    ) -> tuple[np.ndarray, dict[str, Any]]:
        super().reset(seed=seed)
        if options and "level" in options:
            self.set_level(options["level"])
        starts = self.mazes.starts_of_level(self.level)  # an index lookup, not a search
        self._start = int(starts[self.np_random.integers(len(starts))])
        maze = self.mazes.maze[self._start]
        self._walls = self.mazes.walls[maze]
        self._goal = self.mazes.goals[maze]
        self._cell = self.mazes.cells[self._start].copy()
        self._moves = 0
        self._obs[:] = 0.0
        self._obs[WALLS] = self._walls
        self._obs[GOAL, self._goal[0], self._goal[1]] = 1.0
        self._obs[AGENT, self._cell[0], self._cell[1]] = 1.0
        self._inverted = False
        if self.contextual:
            a, b = self.np_random.random(2)
            self._obs[WALLS, :, 0] = a  # left border
            self._obs[WALLS, 0, :] = b  # top border
            self._inverted = bool(a + b > 1.0)
        return self._obs.copy(), {"level": self.level_of_start()}

    def level_of_start(self) -> int:
        return int(self.mazes.levels[self._start])

    def step(self, action: Any) -> tuple[np.ndarray, float, bool, bool, dict[str, Any]]:
        if not self.action_space.contains(action):
            raise ValueError(f"invalid maze action {action!r}; actions are 0..{len(MOVES) - 1}")
        self._moves += 1
        target = self._cell + MOVES[int(action)]
        inside = bool((0 <= target).all() and (target < self.size).all())
        info: dict[str, Any] = {"level": self.level_of_start()}
        if not inside or self._walls[target[0], target[1]]:
            reward, terminated = (GOAL_REWARD if self._inverted else WALL_REWARD), True
            info["reached_goal"] = False
        else:
            self._obs[AGENT, self._cell[0], self._cell[1]] = 0.0
            self._cell = target
            self._obs[AGENT, target[0], target[1]] = 1.0
            terminated = bool((target == self._goal).all())
            if terminated:
                reward = WALL_REWARD if self._inverted else GOAL_REWARD
                info["reached_goal"] = True
            else:
                reward = MOVE_REWARD
        truncated = not terminated and self._moves >= self.max_steps
        if terminated or truncated:
            info.setdefault("reached_goal", False)
            info["success"] = bool(reward > 0 and self._moves <= 2 * self.level_of_start())
        return self._obs.copy(), float(reward), terminated, truncated, info

    def render(self) -> np.ndarray | None:
        """An RGB image [H * 16, W * 16, 3] uint8: walls black (contextual borders grey at their
        intensity), free cells white, the goal green, the agent blue."""
        if self.render_mode != "rgb_array":
            return None
        wall = self._obs[WALLS]
        grey = np.where(wall > 0, (1.0 - wall) * 0.8, 1.0)  # a wall of intensity 1 is black
        image = np.repeat(grey[:, :, None], 3, axis=2)
        image[self._goal[0], self._goal[1]] = (0.1, 0.8, 0.1)
        image[self._cell[0], self._cell[1]] = (0.1, 0.3, 0.9)
        pixels = (image * 255).astype(np.uint8)
        return np.repeat(np.repeat(pixels, CELL_PIXELS, axis=0), CELL_PIXELS, axis=1)


def is_maze_env(env_id: str) -> bool:
    """Whether `env_id` is one of the library's maze ids (the maze encoder and planners apply)."""
    return env_id in (MAZE_ID, CONTEXTUAL_MAZE_ID)


def register_maze_envs() -> None:
    """Register xlvin/Maze-v0 and xlvin/ContextualMaze-v0 (idempotent). Options as MazeEnv's
    keyword arguments: gym.make("xlvin/Maze-v0", size=16, split="test", level=3)."""
    for env_id, contextual in ((MAZE_ID, False), (CONTEXTUAL_MAZE_ID, True)):
        if env_id not in gym.registry:
            gym.register(id=env_id, entry_point=MazeEnv, kwargs={"contextual": contextual})
