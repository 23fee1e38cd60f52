"""The continual maze (paper section 4.1): one level at a time, advancing on success, never
returning, evaluated on held-out mazes after every passed level.

    level d = first_level
    loop:                                             # one round = one rollout + one PPO update
        rollout of T steps of N envs on training mazes of level d
        window <- the successes of the last `window` episodes of level d
        if the window is full and its mean >= threshold:      # paper: 95 % of the last 1,000
            evaluate the greedy policy on held-out mazes of every level (8x8, and 16x16: OOD)
            keep the policy of level d; d <- d + 1 (the envs are reset on the new level)
        elif level d has used `budget` episodes:               # paper: 1,000,000 trajectories
            level d is failed; the curriculum ends

The check runs after each rollout, so a level passes at the first rollout end at which its last
`window` episodes reach the threshold. Success is the maze env's: the goal within 2 x level moves
(`xlvin.envs.maze`). Everything the curriculum knows (level, window, counts, evaluations so far)
is in its checkpoint state, so an interrupted curriculum resumes exactly.
"""

import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch

from xlvin.envs.maze import CONTEXTUAL_MAZE_ID, MAZE_ID
from xlvin.envs.maze_data import MazeSet
from xlvin.errors import UserError
from xlvin.nn.policy import ActorCritic
from xlvin.ppo.collect import reset_envs
from xlvin.ppo.loop import DataSource, OnlineData
from xlvin.ppo.maze_evaluation import evaluation_contexts, evaluation_starts, success_by_level
from xlvin.ppo.config import CurriculumConfig, PPOConfig
from xlvin.ppo.storage import Rollout

#: Called with (level, policy) when a level is passed, before the curriculum moves on.
OnLevelPassed = Callable[[int, ActorCritic], None]
#: Seed of the held-out starts and contexts every evaluation plays (the same for every agent).
EVAL_SEED = 0


@dataclass
class HeldOut:
    """The held-out starts one evaluation plays: mazes, which starts, their contexts (contextual
    maze only)."""

    mazes: MazeSet
    starts: np.ndarray
    contexts: np.ndarray | None

    def success(self, policy: ActorCritic) -> dict[int, float]:
        """{level: greedy success} and -1: over every start played."""
        return success_by_level(policy, self.mazes, self.starts, self.contexts)


def held_out_sets(cfg: CurriculumConfig, contextual: bool) -> dict[int, HeldOut]:
    """{maze side: the held-out starts an evaluation plays} (`CurriculumConfig.held_out_splits`)."""
    sets = {}
    for size, mazes in cfg.held_out_splits().items():
        starts = evaluation_starts(mazes, cfg.eval_per_level, EVAL_SEED)
        contexts = evaluation_contexts(len(starts), EVAL_SEED) if contextual else None
        sets[size] = HeldOut(mazes, starts, contexts)
    return sets


class Curriculum(DataSource):
    """The continual maze as a data source of the training loop (module docstring): open-ended,
    one rollout of `ppo.num_steps` steps of `ppo.num_envs` envs and one PPO update per round.

    `history` lists each level tried: level, passed, episodes and env steps it used, the seconds
    it trained (`seconds`: acting and learning, resumes included, held-out evaluations not), and
    after a pass the held-out success {side: {level: rate, -1: all}}.
    """

    rounds = None
    updates_per_round = 1
    log_by_env_steps = True

    def __init__(
        self, env_id: str, ppo: PPOConfig, cfg: CurriculumConfig, seed: int,
        on_level_passed: OnLevelPassed | None = None,
    ) -> None:
        if env_id not in (MAZE_ID, CONTEXTUAL_MAZE_ID):
            raise UserError(f"the curriculum runs on {MAZE_ID} or {CONTEXTUAL_MAZE_ID}, not {env_id}")
        self.env_id, self.cfg, self.seed = env_id, cfg, seed
        self.env_kwargs: dict[str, Any] = {}  # each level sets the maze's options itself
        self.levels = cfg.levels()
        self.held_out = held_out_sets(cfg, env_id == CONTEXTUAL_MAZE_ID)
        self.on_level_passed = on_level_passed
        self.online = OnlineData(env_id, ppo, seed, cfg.train_env_kwargs(self.levels[0]))
        self.index = 0  # into self.levels
        self.window: deque[bool] = deque(maxlen=cfg.window)
        self.episodes = 0  # of the current level
        self.env_steps = 0  # of the current level
        self.seconds = 0.0  # of the current level, before `self.clock`
        self.clock = time.perf_counter()  # since when the current level's time runs
        self.history: list[dict[str, Any]] = []
        self.done = False

    @property
    def level(self) -> int:
        return self.levels[self.index]

    def collect(
        self, policy: ActorCritic, round: int, generator: torch.Generator, accelerate: bool
    ) -> Rollout:
        rollout = self.online.collect(policy, round, generator, accelerate)
        self.window.extend(rollout.episode_successes)
        self.episodes += len(rollout.episode_successes)
        self.env_steps += rollout.num_steps * rollout.num_envs
        if len(self.window) == self.cfg.window and np.mean(self.window) >= self.cfg.threshold:
            self._pass(policy)
        elif self.episodes >= self.cfg.budget:
            self._record(passed=False, seconds=self.level_seconds())
            self.done = True
        return rollout

    def level_seconds(self) -> float:
        """The seconds the current level has trained so far (resumes included)."""
        return self.seconds + time.perf_counter() - self.clock

    def _record(self, passed: bool, seconds: float, **more: Any) -> None:
        self.history.append({"level": self.level, "passed": passed, "episodes": self.episodes,
                             "env_steps": self.env_steps, "seconds": seconds, **more})

    def _pass(self, policy: ActorCritic) -> None:
        """Evaluate on the held-out mazes, keep the policy, move to the next level (fresh envs)."""
        seconds = self.level_seconds()
        test = {str(size): {str(d): rate for d, rate in held.success(policy).items()}
                for size, held in self.held_out.items()}
        self._record(passed=True, seconds=seconds, held_out=test)
        if self.on_level_passed is not None:
            self.on_level_passed(self.level, policy)
        if self.index + 1 == len(self.levels):
            self.done = True
            return
        self.index += 1
        self.window.clear()
        self.episodes = self.env_steps = 0
        self.seconds, self.clock = 0.0, time.perf_counter()
        envs = self.online.envs
        envs.unwrapped.call("set_level", self.level)
        self.online.state = reset_envs(envs, self.seed + 1000 * self.index)

    def finished(self) -> bool:
        return self.done

    def metrics(self) -> dict[str, float]:
        window = float(np.mean(self.window)) if self.window else 0.0
        return {"curriculum/level": self.level, "curriculum/window_success": window,
                "curriculum/level_episodes": self.episodes,
                "curriculum/levels_passed": sum(h["passed"] for h in self.history)}

    def state_dict(self) -> tuple[dict[str, Any], dict[str, torch.Tensor]]:
        state, tensors = self.online.state_dict()
        state["curriculum"] = {
            "index": self.index, "window": [bool(s) for s in self.window],
            "episodes": self.episodes, "env_steps": self.env_steps, "history": self.history,
            "seconds": self.level_seconds(),
            "done": self.done, "levels": self.levels,
        }
        return state, tensors

    def load_state_dict(self, state: dict[str, Any], tensors: dict[str, torch.Tensor]) -> None:
        mine = state["curriculum"]
        if mine["levels"] != self.levels:
            raise ValueError(f"the checkpoint's levels {mine['levels']} are not {self.levels}")
        self.index, self.done = mine["index"], mine["done"]
        self.episodes, self.env_steps = mine["episodes"], mine["env_steps"]
        # checkpoints written before levels were timed: their level's time so far is unknown
        self.seconds, self.clock = mine.get("seconds", 0.0), time.perf_counter()
        self.window = deque((bool(s) for s in mine["window"]), maxlen=self.cfg.window)
        self.history = mine["history"]
        self.online.envs.unwrapped.call("set_level", self.level)
        self.online.load_state_dict(state, tensors)

    def close(self) -> None:
        self.online.close()
