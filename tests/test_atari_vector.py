"""`--atari-vector ale`: ale-py's vector env against the gymnasium pipeline (frames and rewards),
the whole-game statistics of `AleGames`, the same seed giving the same run, and resume refused."""

import dataclasses
from pathlib import Path

import numpy as np
import pytest
import torch
from gymnasium.vector import VectorEnv
from safetensors.torch import load_file

from xlvin.envs.atari import AleGames, make_atari, require_ale
from xlvin.errors import UserError
from xlvin.io.run_dir import read_metrics
from xlvin.ppo.collect import make_vector_env, reset_envs
from xlvin.run.training import train_run
from tests.test_atari import tiny


def test_ale_frames_and_rewards_equal_the_gymnasium_pipeline() -> None:
    """Freeway with no no-ops and no sticky actions, 2 envs, the same 200 random actions (mostly
    UP, so that chickens cross and score): every
    observation (the reset's and each stack's first frames included) and reward equal."""
    require_ale()
    from ale_py.vector_env import AtariVectorEnv

    ale = AleGames(AtariVectorEnv("freeway", 2, num_threads=1, noop_max=0, use_fire_reset=False,
                                  reward_clipping=False), clip_rewards=False)
    pipeline = [make_atari("Freeway", noop_max=0, repeat_action_probability=0.0) for _ in range(2)]
    obs, _ = ale.reset(seed=3)
    np.testing.assert_array_equal(obs, np.stack([e.reset(seed=3 + i)[0]
                                                 for i, e in enumerate(pipeline)]))
    rng, scored = np.random.default_rng(0), 0.0
    for _ in range(200):
        actions = rng.choice(3, 2, p=[0.1, 0.8, 0.1])
        obs, rewards, terminated, truncated, _ = ale.step(actions)
        steps = [e.step(int(a)) for e, a in zip(pipeline, actions)]
        np.testing.assert_array_equal(obs, np.stack([s[0] for s in steps]))
        np.testing.assert_array_equal(rewards, [s[1] for s in steps])
        np.testing.assert_array_equal(terminated | truncated, [s[2] or s[3] for s in steps])
        scored += rewards.sum()
    assert scored > 0  # the chickens crossed: rewards were compared where they are not 0
    ale.close()


class Scripted(VectorEnv):
    """One env whose steps are given, (reward, terminated, lives), stacking frames as ALE does
    (zeros before an episode's first frame); frame t is the number t."""

    def __init__(self, steps: list[tuple[float, bool, int]]) -> None:
        self.num_envs, self.steps, self.t = 1, steps, 0
        self.stack, self.done = np.zeros((1, 4, 1, 1), dtype=np.uint8), False

    def reset(self, *, seed=None, options=None):  # noqa: ANN001, ANN202
        self.stack[:] = 0
        self.stack[0, -1] = 100
        return self.stack.copy(), {}

    def step(self, actions):  # noqa: ANN001, ANN202
        reward, terminated, lives = self.steps[self.t]
        self.t += 1
        if self.done:  # NEXT_STEP autoreset: this step starts an episode
            self.stack[:] = 0
        self.stack = np.roll(self.stack, -1, axis=1)
        self.stack[0, -1] = self.t
        self.done = terminated
        return (self.stack.copy(), np.array([reward]), np.array([terminated]), np.array([False]),
                {"lives": np.array([lives])})


def test_games_are_scored_over_lives_unclipped_and_stacks_padded() -> None:
    """Two lives then a game over, then a new game: episodes end at each life, the statistics
    report the whole game's unclipped score and length once (reset steps not counted), rewards
    are clipped, and a new episode's stack repeats its first frame."""
    steps = [(5, False, 2), (0, True, 1), (0, False, 1), (7, False, 1), (3, True, 0),
             (0, False, 3), (2, False, 3)]
    envs = AleGames(Scripted(steps), clip_rewards=True)
    obs, _ = envs.reset()
    assert (obs == 100).all()
    seen = []
    for t in range(len(steps)):
        obs, reward, _, _, info = envs.step(np.zeros(1, dtype=np.int64))
        seen.append((float(reward[0]), obs[0, :, 0, 0].tolist(),
                     (float(info["episode"]["r"][0]), int(info["episode"]["l"][0]))
                     if "episode" in info else None))
    assert [r for r, _, _ in seen] == [1, 0, 0, 1, 1, 0, 1]
    assert [s for _, _, s in seen] == [None, None, None, None, (15.0, 4), None, None]
    assert seen[2][1] == [3, 3, 3, 3]  # step 3 resets (after a life): padded with its frame
    assert seen[3][1] == [3, 3, 3, 4]
    assert seen[5][1] == [6, 6, 6, 6] and seen[6][1] == [6, 6, 6, 7]


def ale_run(updates: int) -> object:
    cfg = tiny("ppo", updates)
    return dataclasses.replace(cfg, ppo=dataclasses.replace(cfg.ppo, atari_vector="ale"))


def test_an_ale_run_repeats_with_its_seed_and_refuses_to_resume(tmp_path: Path) -> None:
    """Two runs of the same config (2 updates on ale-py's vector env): the same weights and
    metrics; continuing one to 4 updates is one UserError (its emulators were not saved)."""
    for name in ("a", "b"):
        train_run(ale_run(2), tmp_path / name, progress=False)
    weights = [load_file(str(tmp_path / n / "model.safetensors")) for n in ("a", "b")]
    assert all(torch.equal(weights[0][k], weights[1][k]) for k in weights[0])
    rows = [[{k: v for k, v in r.items() if k != "charts/sps"} for r in read_metrics(tmp_path / n)]
            for n in ("a", "b")]
    assert rows[0] == rows[1] and len(rows[0]) == 2
    with pytest.raises(UserError, match="cannot resume"):
        train_run(ale_run(4), tmp_path / "a", progress=False, resume=True)


def test_ale_vector_takes_atari_ids_only() -> None:
    with pytest.raises(UserError, match="xlvin/<Game>-v5 and xlvin/<Game>Train-v4 envs only"):
        make_vector_env("CartPole-v1", 2, vectorization="ale")
    envs = make_vector_env("xlvin/Freeway-v5", 2, vectorization="ale")
    assert reset_envs(envs, 0).obs.shape == (2, 4, 84, 84)
    envs.close()
