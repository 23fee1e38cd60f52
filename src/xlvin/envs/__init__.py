"""Environments the library adds to gymnasium's registry.

Importing `xlvin.envs` (done by `xlvin.train.rollout`) registers, for each Atari game in
`ATARI_GAMES`, the id `xlvin/<Game>-v5`: ALE's `ALE/<Game>-v5` with the standard DQN / Nature
preprocessing (see `xlvin.envs.atari`). Registration needs nothing installed; making one of these
environments needs the `atari` extra (`pip install -e .[atari]`: ale-py, whose wheel ships the
ROMs) and fails with a one-line error without it.
"""

from xlvin.envs.atari import ATARI_GAMES, atari_env_id, register_atari_envs

register_atari_envs()

__all__ = ["ATARI_GAMES", "atari_env_id", "register_atari_envs"]
