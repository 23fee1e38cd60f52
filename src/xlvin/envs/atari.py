"""Atari with the standard DQN / Nature preprocessing (Mnih et al. 2015; Machado et al. 2018).

Two families of ids are registered for every game of ATARI_GAMES:

`xlvin/<Game>-v5` = `ALE/<Game>-v5` with frameskip 1 (ALE's own skipping off), then gymnasium's
`AtariPreprocessing` (up to 30 no-op actions after reset, frame skip 4 with the max over the last
two frames, 84 x 84 grayscale, uint8) and `FrameStackObservation` (the last 4 frames): observations
are uint8 [4, 84, 84], channels first, as `xlvin.nn.encoders.NatureCNN` and Stable-Baselines3's
CNN policy read them. ALE v5's sticky actions (repeat probability 0.25) are kept; ending episodes
on a life loss is optional (`terminal_on_life_loss=True` in `gym.make`, off by default). The
throughput benchmarks use these.

`xlvin/<Game>Train-v4` and `xlvin/<Game>Eval-v4`: the environments of the PPO code the paper
names (ikostrikov's `<Game>NoFrameskip-v4` with the baselines wrappers), used by the paper's Atari
experiment (`xlvin.experiments.atari`). No sticky actions; no-op reset 30, frame skip 4 with
max-pooling, fire on reset where the game has a FIRE action, 84 x 84 grey, 4-frame stack.

- Train: episodic life (a lost life ends the episode; the next reset continues the same game) and
  rewards clipped to their sign. The unclipped score of every whole game is reported the way
  gymnasium's `RecordEpisodeStatistics` reports an episode (`info["episode"]["r" | "l"]` at the
  step the game ends), recorded below the episodic-life and clipping wrappers: the training curve
  is the score of whole games, as the PPO code's Monitor reports it.
- Eval: one episode = one whole game, unclipped rewards, at most EVAL_MAX_STEPS agent steps (a
  greedy policy that stops playing cannot hang an evaluation).

`make_ale_vector_env` builds the same `xlvin/<Game>-v5` and `xlvin/<Game>Train-v4` batches with
ale-py's own vector env (C++ emulators and preprocessing, `ale_py.vector_env.AtariVectorEnv`)
in place of gymnasium's wrappers (`--atari-vector ale`; see its docstring for what differs).
"""

import re
from typing import Any

import gymnasium as gym
import numpy as np

from gymnasium.vector import AutoresetMode, VectorEnv, VectorWrapper

from xlvin.errors import FieldError, UserError

#: Games registered as xlvin/<Game>-v5 (those the benchmarks and the paper's Atari runs use).
ATARI_GAMES = ("Freeway", "Alien", "Enduro", "Pong", "Breakout", "MsPacman", "Seaquest")
#: Agent steps an evaluation game may last: 18,000 frames, 5 minutes of play at 60 frames/s.
EVAL_MAX_STEPS = 4_500


def atari_env_id(game: str) -> str:
    return f"xlvin/{game}-v5"


def atari_train_id(game: str) -> str:
    """The paper's training environment of `game` (module docstring)."""
    return f"xlvin/{game}Train-v4"


def atari_eval_id(game: str) -> str:
    """The paper's evaluation environment of `game`: whole games, unclipped scores."""
    return f"xlvin/{game}Eval-v4"


def require_ale() -> Any:
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
    require_ale()
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


class EpisodicLife(gym.Wrapper):
    """A lost life ends the episode (terminated); the reset that follows continues the same game
    with one no-op step, and only a game over resets the emulator (baselines' EpisodicLifeEnv)."""

    def __init__(self, env: gym.Env) -> None:
        super().__init__(env)
        self.lives = 0
        self.was_real_done = True

    def step(self, action: Any) -> Any:
        obs, reward, terminated, truncated, info = self.env.step(action)
        self.was_real_done = terminated or truncated
        lives = self.env.unwrapped.ale.lives()
        if 0 < lives < self.lives:
            terminated = True
        self.lives = lives
        return obs, reward, terminated, truncated, info

    def reset(self, **kwargs: Any) -> Any:
        if self.was_real_done:
            obs, info = self.env.reset(**kwargs)
        else:  # the game goes on: one no-op step from where the life was lost
            obs, _, _, _, info = self.env.step(0)
        self.lives = self.env.unwrapped.ale.lives()
        return obs, info


class FireReset(gym.Wrapper):
    """Press FIRE after every reset, for games that wait for it to start (baselines'
    FireResetEnv: FIRE, then action 2; a reset again if either ends the game)."""

    def reset(self, **kwargs: Any) -> Any:
        self.env.reset(**kwargs)
        for action in (1, 2):
            obs, _, terminated, truncated, info = self.env.step(action)
            if terminated or truncated:
                obs, info = self.env.reset()  # no seed: the game's own stream goes on
        return obs, info


def make_paper_atari(game: str, training: bool) -> gym.Env:
    """The paper's Atari environment of `game` (module docstring): the training form (episodic
    life, clipped rewards, whole-game scores in `info["episode"]`) or the evaluation form."""
    require_ale()
    env = gym.make(f"ALE/{game}-v5", frameskip=1, repeat_action_probability=0.0)
    env = gym.wrappers.AtariPreprocessing(
        env, noop_max=30, frame_skip=4, screen_size=84, grayscale_obs=True, scale_obs=False
    )
    if training:
        env = gym.wrappers.RecordEpisodeStatistics(env)  # whole games, unclipped
        env = EpisodicLife(env)
    if "FIRE" in env.unwrapped.get_action_meanings():
        env = FireReset(env)
    if training:
        env = gym.wrappers.TransformReward(env, np.sign)
    return gym.wrappers.FrameStackObservation(env, 4)


def register_atari_envs() -> None:
    """Register xlvin/<Game>-v5, xlvin/<Game>Train-v4 and xlvin/<Game>Eval-v4 for every game of
    ATARI_GAMES (idempotent; needs no ale-py)."""
    for game in ATARI_GAMES:
        if atari_env_id(game) not in gym.registry:
            gym.register(id=atari_env_id(game), entry_point=make_atari, kwargs={"game": game})
        if atari_train_id(game) not in gym.registry:
            gym.register(id=atari_train_id(game), entry_point=make_paper_atari,
                         kwargs={"game": game, "training": True})
        if atari_eval_id(game) not in gym.registry:
            gym.register(id=atari_eval_id(game), entry_point=make_paper_atari,
                         kwargs={"game": game, "training": False},
                         max_episode_steps=EVAL_MAX_STEPS)


def make_ale_vector_env(env_id: str, num_envs: int) -> VectorEnv:
    """`num_envs` envs of `env_id` (`xlvin/<Game>-v5` or `xlvin/<Game>Train-v4`) stepped by
    ale-py's vector env on one thread, with the settings of the gymnasium pipeline above (no-op
    reset 30, frame skip 4 with max-pooling, 84 x 84 grey, 4 frames; v5: sticky actions 0.25;
    Train: no sticky actions, episodic life, fire reset, clipped rewards), behind `AleGames`.

    Frames and rewards equal the gymnasium pipeline's for the same emulator actions (Freeway,
    tests/test_atari_vector.py) once `AleGames` pads a new episode's stack as gymnasium does.
    What differs: the no-op count at reset is drawn from ALE's generator, not gymnasium's, so the
    same seed plays other games; on games with lives and FIRE (Train), continuing after a lost
    life and pressing FIRE follow ALE's implementation, not baselines' wrappers (not compared);
    and the emulators' states cannot be saved, so a run on these envs cannot resume."""
    game, training = ale_vector_game(env_id)
    require_ale()
    from ale_py.vector_env import AtariVectorEnv

    envs = AtariVectorEnv(
        re.sub(r"(?<!^)(?=[A-Z])", "_", game).lower(),  # the ROM's name: MsPacman -> ms_pacman
        num_envs,
        num_threads=1,
        repeat_action_probability=0.0 if training else 0.25,
        autoreset_mode=AutoresetMode.NEXT_STEP,
        img_height=84, img_width=84, grayscale=True, stack_num=4, frameskip=4, maxpool=True,
        noop_max=30,
        episodic_life=training,
        use_fire_reset=training,
        reward_clipping=False,
    )
    return AleGames(envs, clip_rewards=training)


def ale_vector_game(env_id: str) -> tuple[str, bool]:
    """(game, whether it is the training form) of an id `make_ale_vector_env` makes; a UserError
    for any other id."""
    kinds = {atari_env_id(g): (g, False) for g in ATARI_GAMES}
    kinds.update({atari_train_id(g): (g, True) for g in ATARI_GAMES})
    if env_id not in kinds:
        raise FieldError("{atari_vector} ale makes xlvin/<Game>-v5 and xlvin/<Game>Train-v4 envs "
                         "only, not {!r}", env_id)
    return kinds[env_id]


class AleGames(VectorWrapper):
    """ale-py's vector env as the gymnasium pipeline's: a new episode's frame stack padded with
    its first frame (ALE pads with zeros, `FrameStackObservation` repeats the reset frame), the
    score of every whole game in `info["episode"]["r" | "l"]` where `info["_episode"]` (unclipped,
    over every life: as `RecordEpisodeStatistics` below `EpisodicLife`), then rewards clipped to
    their sign where `clip_rewards`. NEXT_STEP autoreset: the step after a done is a reset step
    (no transition: it adds nothing to the statistics)."""

    def __init__(self, env: VectorEnv, clip_rewards: bool) -> None:
        super().__init__(env)
        self.clip_rewards = clip_rewards
        self.since_reset = np.zeros(self.num_envs, dtype=int)  # frames of the episode in the stack - 1
        self.game_returns = np.zeros(self.num_envs)
        self.game_lengths = np.zeros(self.num_envs, dtype=int)
        self.prev_dones = np.zeros(self.num_envs, dtype=bool)
        self.game_over = np.ones(self.num_envs, dtype=bool)

    def reset(self, *, seed: Any = None, options: dict[str, Any] | None = None) -> Any:
        if options is not None:
            raise FieldError("ale-py's vector env ({atari_vector} ale) resets all envs at once "
                             "here")
        obs, info = self.env.reset(seed=seed)
        self.since_reset[:] = 0
        self.game_returns[:] = 0.0
        self.game_lengths[:] = 0
        self.prev_dones[:] = False
        self.game_over[:] = False
        return self._pad(obs), info

    def step(self, actions: Any) -> Any:
        obs, rewards, terminated, truncated, info = self.env.step(actions)
        rewards = rewards.astype(np.float64)
        new_game = self.prev_dones & self.game_over  # this step reset the emulator
        self.since_reset = np.where(self.prev_dones, 0, self.since_reset + 1)
        self.game_returns = np.where(new_game, 0.0, self.game_returns)
        self.game_lengths = np.where(new_game, 0, self.game_lengths)
        moved = ~self.prev_dones  # reset steps are not transitions
        self.game_returns[moved] += rewards[moved]
        self.game_lengths[moved] += 1
        dones = terminated | truncated
        # a game is over at a done with no life left (games without lives always have 0)
        self.game_over = np.where(dones, truncated | (info["lives"] == 0), self.game_over)
        self.prev_dones = dones
        finished = dones & self.game_over
        if finished.any():
            info["episode"] = {"r": np.where(finished, self.game_returns, 0.0),
                               "l": np.where(finished, self.game_lengths, 0)}
            info["_episode"] = finished
        if self.clip_rewards:
            rewards = np.sign(rewards)
        return self._pad(obs), rewards, terminated, truncated, info

    def _pad(self, obs: np.ndarray) -> np.ndarray:
        """Stack slots from before the episode's first frame hold that frame (in place)."""
        stack = obs.shape[1]
        for i in np.flatnonzero(self.since_reset < stack - 1):
            first = stack - 1 - self.since_reset[i]
            obs[i, :first] = obs[i, first]
        return obs
