"""Environments the library adds to gymnasium's registry.

Importing `xlvin.envs` (done by `xlvin.ppo.collect`) registers, for each Atari game in
`ATARI_GAMES`, the id `xlvin/<Game>-v5`: ALE's `ALE/<Game>-v5` with the standard DQN / Nature
preprocessing, and the paper's training and evaluation environments `xlvin/<Game>Train-v4` and
`xlvin/<Game>Eval-v4` (see `xlvin.envs.atari`). Registration needs nothing installed; making one of these
environments needs the `atari` extra (`pip install -e .[atari]`: ale-py, whose wheel ships the
ROMs) and fails with a one-line error without it. ALE's own ids (`ALE/<Game>-v5`) and MiniGrid's
(`MiniGrid-DoorKey-5x5-v0`, the `minigrid` extra) are registered on first use (`ensure_registered`).

It also registers the VIN gridworld mazes `xlvin/Maze-v0` and `xlvin/ContextualMaze-v0`
(`xlvin.envs.maze`; mazes from `xlvin.envs.maze_data`).
"""

from xlvin.envs.atari import ATARI_GAMES, atari_env_id, register_atari_envs
from xlvin.envs.maze import CONTEXTUAL_MAZE_ID, MAZE_ID, is_maze_env, register_maze_envs
from xlvin.envs.packages import ensure_registered

register_atari_envs()
register_maze_envs()

__all__ = [
    "ATARI_GAMES", "CONTEXTUAL_MAZE_ID", "MAZE_ID", "atari_env_id", "ensure_registered",
    "is_maze_env", "register_atari_envs", "register_maze_envs",
]
