"""Atari with the standard DQN / Nature preprocessing (Mnih et al. 2015; Machado et al. 2018).

`xlvin/<Game>-v5` = `ALE/<Game>-v5` with frameskip 1 (ALE's own skipping off), then gymnasium's
`AtariPreprocessing` (up to 30 no-op actions after reset, frame skip 4 with the max over the last
two frames, 84 x 84 grayscale, uint8) and `FrameStackObservation` (the last 4 frames): observations
are uint8 [4, 84, 84], channels first, as `xlvin.nn.encoders.NatureCNN` and Stable-Baselines3's
CNN policy read them. ALE v5's sticky actions (repeat probability 0.25) are kept; ending episodes
on a life loss is optional (`terminal_on_life_loss=True` in `gym.make`, off by default).
"""

from typing import Any

import gymnasium as gym

from xlvin.errors import UserError

#: Games registered as xlvin/<Game>-v5 (those the benchmarks and the paper's Atari runs use).
ATARI_GAMES = ("Freeway", "Alien", "Enduro", "Pong", "Breakout", "MsPacman", "Seaquest")


def atari_env_id(game: str) -> str:
    return f"xlvin/{game}-v5"


def _require_ale() -> Any:
    try:
        import ale_py
    except ImportError:
        raise UserError(
            "Atari environments need ale-py: pip install -e '.[atari]' (the wheel ships the ROMs)"
        ) from None
    ale_py.ALEInterface.setLoggerMode(ale_py.LoggerMode.Warning)  # no banner on stderr
    gym.register_envs(ale_py)
    return ale_py


def make_atari(
    game: str,
    noop_max: int = 30,
    frame_skip: int = 4,
    screen_size: int = 84,
    stack: int = 4,
    terminal_on_life_loss: bool = False,
    repeat_action_probability: float = 0.25,
    render_mode: str | None = None,
) -> gym.Env:
    """The preprocessed environment of `game` (entry point of the xlvin/<Game>-v5 ids)."""
    _require_ale()
    env = gym.make(
        f"ALE/{game}-v5",
        frameskip=1,
        repeat_action_probability=repeat_action_probability,
        render_mode=render_mode,
    )
    env = gym.wrappers.AtariPreprocessing(
        env,
        noop_max=noop_max,
        frame_skip=frame_skip,
        screen_size=screen_size,
        terminal_on_life_loss=terminal_on_life_loss,
        grayscale_obs=True,
        scale_obs=False,
    )
    return gym.wrappers.FrameStackObservation(env, stack)


def ensure_registered(env_id: str) -> None:
    """Register ALE's environments and quiet its banner (with ale-py, or fail saying how to
    install it) when `env_id` is one of them (`ALE/...`); other ids are left alone."""
    if env_id.startswith("ALE/"):
        _require_ale()


def register_atari_envs() -> None:
    """Register xlvin/<Game>-v5 for every game of ATARI_GAMES (idempotent; needs no ale-py)."""
    for game in ATARI_GAMES:
        env_id = atari_env_id(game)
        if env_id not in gym.registry:
            gym.register(id=env_id, entry_point=make_atari, kwargs={"game": game})
