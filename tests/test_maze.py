"""The VIN gridworld mazes: generator and levels, the npz loader, splits, the gymnasium envs."""

import os
from pathlib import Path

import gymnasium as gym
import numpy as np
import pytest
from gymnasium.utils.env_checker import check_env

import xlvin.envs  # noqa: F401  (registers the maze ids)
from xlvin.envs.maze import AGENT, GOAL, WALLS, MazeEnv
from xlvin.envs.maze_data import (
    MOVES,
    bfs_distances,
    generated_split,
    load_npz,
    maze_split,
)
from xlvin.errors import UserError

#: The 8x8 set the paper used, where this machine has it ($XLVIN_MAZE_NPZ, or a data folder beside
#: the checkout); the tests that read it are skipped without it.
PAPER_NPZ = Path(os.environ.get(
    "XLVIN_MAZE_NPZ", Path(__file__).resolve().parents[2] / "shared" / "data" / "gridworld_8x8.npz"
))


def open_maze(size: int = 5) -> np.ndarray:
    walls = np.zeros((size, size), dtype=bool)
    walls[[0, -1], :] = walls[:, [0, -1]] = True
    return walls


def test_bfs_levels_use_the_eight_moves_and_walls() -> None:
    walls = open_maze(6)  # interior rows/cols 1..4
    walls[2, 1:4] = True  # a wall across row 2, open at column 4
    dist = bfs_distances(walls[None], np.array([[1, 1]]))[0]
    assert dist[1, 1] == 0 and dist[1, 4] == 3 and dist[2, 4] == 3  # (1,3) -> (2,4) diagonally
    assert dist[3, 3] == 4 and dist[3, 4] == 4  # around the wall through (2,4)
    assert dist[3, 1] == 6 and dist[4, 1] == 6 and dist[4, 4] == 5
    assert (dist[walls] == -1).all()
    walls[1:, 3] = True  # seal column 3 below row 0: the right side is cut off from the goal
    walls[2, 4] = True
    assert bfs_distances(walls[None], np.array([[1, 1]]))[0][3, 4] == -1


def test_generated_splits_are_seeded_distinct_and_never_overlap() -> None:
    train, test = generated_split(8, "train"), generated_split(8, "test")
    assert len(train.walls) == 5000 and len(test.walls) == 833
    assert not train.maze_keys() & test.maze_keys()
    assert len(train.maze_keys()) == len(train.walls)  # no maze twice
    assert train.walls[:, [0, -1], :].all() and train.walls[:, :, [0, -1]].all()  # the border
    # levels are the BFS distances, and every expert action moves one step closer
    dist = bfs_distances(train.walls[train.maze], train.goals[train.maze])
    rows = np.arange(len(train))
    assert np.array_equal(dist[rows, train.cells[:, 0], train.cells[:, 1]], train.levels)
    nxt = train.cells + MOVES[train.actions]
    assert np.array_equal(dist[rows, nxt[:, 0], nxt[:, 1]], train.levels - 1)
    # a power-law-like level histogram, as the paper's set (appendix E): about half at level 1
    counts = train.level_counts()
    assert 0.4 < counts[1] / len(train) < 0.55 and counts[1] > counts[2] > counts[3] > counts[4]


def test_generator_is_deterministic_per_seed() -> None:
    from xlvin.envs.maze_data import _generated_splits

    cached = generated_split(8, "test", seed=0)
    fresh = _generated_splits.__wrapped__(8, 0)[1]  # generated again, without the cache
    assert np.array_equal(cached.walls, fresh.walls) and np.array_equal(cached.cells, fresh.cells)
    other = generated_split(16, "test", seed=0)
    assert other.walls.shape[1:] == (16, 16) and not other.maze_keys() & generated_split(16, "train").maze_keys()


@pytest.mark.skipif(not PAPER_NPZ.exists(), reason="the paper's npz is not on this machine")
def test_npz_loader_reads_the_papers_levels() -> None:
    train, test = load_npz(str(PAPER_NPZ), "train"), load_npz(str(PAPER_NPZ), "test")
    assert len(train) == 34944 and len(test) == 6034
    assert [train.level_counts()[d] for d in range(1, 11)] == [
        16451, 9449, 5075, 2451, 1007, 339, 117, 42, 12, 1]  # the authors' npz
    assert not train.maze_keys() & test.maze_keys()
    with pytest.raises(UserError, match="not 16x16"):
        maze_split(16, "test", str(PAPER_NPZ))


def test_bad_dataset_level_and_split_are_user_errors(tmp_path: Path) -> None:
    bad = tmp_path / "bad.npz"
    bad.write_bytes(b"not a zip")
    with pytest.raises(UserError, match="not a VIN maze npz"):
        load_npz(str(bad), "train")
    with pytest.raises(UserError, match="no 8x8 maze start of level 40"):
        MazeEnv(level=40)
    with pytest.raises(UserError, match="split"):
        MazeEnv(split="valid")


def step_to(env: MazeEnv, obs: np.ndarray, want: str) -> int:
    """An action whose move ends on a wall, on the goal or on a free non-goal cell."""
    cell = np.argwhere(obs[AGENT] == 1)[0]
    goal = np.argwhere(obs[GOAL] == 1)[0]
    for a, move in enumerate(MOVES):
        r, c = cell + move
        kind = "wall" if obs[WALLS, r, c] > 0 else "goal" if (r, c) == tuple(goal) else "free"
        if kind == want:
            return a
    pytest.skip(f"no {want} move from this start")


@pytest.mark.parametrize(
    ("target", "reward", "terminated", "success"),
    [("wall", -1.0, True, False), ("goal", 1.0, True, True), ("free", -0.01, False, None)],
)
def test_rewards_and_termination(target: str, reward: float, terminated: bool, success: bool | None) -> None:
    env = MazeEnv(level=1)
    for seed in range(50):  # a level-1 start with a move of the wanted kind
        obs, info = env.reset(seed=seed)
        assert info["level"] == 1
        try:
            action = step_to(env, obs, target)
        except pytest.skip.Exception:
            continue
        obs2, r, term, trunc, info = env.step(action)
        assert (r, term, trunc) == (reward, terminated, False)
        assert info.get("success") == success
        moved = target != "wall"
        assert (np.argwhere(obs2[AGENT] == 1)[0] == np.argwhere(obs[AGENT] == 1)[0] + MOVES[action]).all() == moved
        return
    pytest.fail(f"no start with a {target} move")


def test_time_limit_truncates() -> None:
    env = MazeEnv(level=3, max_steps=1)
    obs, _ = env.reset(seed=0)
    _, reward, terminated, truncated, info = env.step(step_to(env, obs, "free"))
    assert (reward, terminated, truncated) == (-0.01, False, True)
    assert info["success"] is False and info["reached_goal"] is False
    assert MazeEnv().max_steps == 64 and MazeEnv(size=16, split="test").max_steps == 256


def test_contextual_maze_shows_a_b_and_inverts_rewards() -> None:
    env = MazeEnv(contextual=True, level=1)
    seen = set()
    for seed in range(40):
        obs, _ = env.reset(seed=seed)
        a, b = obs[WALLS, 1:, 0], obs[WALLS, 0, :]
        assert np.allclose(a, a[0]) and np.allclose(b, b[0]) and 0 <= a[0] <= 1
        inverted = a[0] + b[0] > 1
        interior = obs[WALLS, 1:-1, 1:-1]
        assert set(np.unique(interior)) <= {0.0, 1.0}
        _, reward, terminated, _, info = env.step(step_to(env, obs, "wall"))
        assert terminated and reward == (1.0 if inverted else -1.0) and info["success"] == inverted
        seen.add(bool(inverted))
    assert seen == {True, False}


@pytest.mark.parametrize(
    ("env_id", "kwargs"),
    [("xlvin/Maze-v0", {}), ("xlvin/ContextualMaze-v0", {}),
     ("xlvin/Maze-v0", {"size": 16, "split": "test", "level": 7})],
)
def test_envs_pass_gymnasiums_checker_render_and_vectorise(env_id: str, kwargs: dict) -> None:
    env = gym.make(env_id, render_mode="rgb_array", **kwargs)
    check_env(env.unwrapped, skip_render_check=False)
    obs, _ = env.reset(seed=0)
    size = obs.shape[-1]
    assert obs.shape == (3, size, size) and obs.dtype == np.float32
    assert env.render().shape == (size * 16, size * 16, 3)
    envs = gym.make_vec(env_id, 3, vectorization_mode="sync", **kwargs)
    obs, _ = envs.reset(seed=0)
    assert obs.shape == (3, 3, size, size)
    envs.call("set_level", 2)
    assert all(lv == 2 for lv in envs.reset(seed=1)[1]["level"])
    envs.close()


def test_vector_maze_state_restores_exactly_and_stays_small() -> None:
    """A checkpoint's env state (xlvin.envs.env_state) continues a contextual maze run exactly."""
    import json

    from xlvin.ppo.collect import make_vector_env, reset_envs
    from xlvin.envs.env_state import env_state, restorable, restore_env_state

    rng = np.random.default_rng(0)
    envs = make_vector_env("xlvin/ContextualMaze-v0", 3)
    reset_envs(envs, 0)
    envs.unwrapped.call("set_level", 2)  # the SyncVectorEnv under the statistics wrapper
    for _ in range(7):
        envs.step(rng.integers(8, size=3))
    assert restorable(envs)
    saved = json.dumps(env_state(envs))
    assert len(saved) < 50_000  # the env holds its level, not its level's list of starts
    fresh = make_vector_env("xlvin/ContextualMaze-v0", 3)
    reset_envs(fresh, 99)
    restore_env_state(fresh, json.loads(saved))
    for _ in range(30):
        actions = rng.integers(8, size=3)
        a, b = envs.step(actions), fresh.step(actions)
        for x, y in zip(a[:4], b[:4]):
            assert np.array_equal(x, y)


def test_maze_commands_print_levels_and_refuse_bad_input(
    capsys: pytest.CaptureFixture, tmp_path: Path
) -> None:
    from xlvin.cli import main

    assert main(["maze", "levels", "--size", "8"]) == 0
    table = capsys.readouterr().out
    assert "| 1 | " in table and "5000 mazes" in table and "833 mazes" in table
    assert main(["maze", "levels", "--size", "12"]) == 2
    assert "maze size 12 has no generator settings" in capsys.readouterr().err
    assert main(["maze", "vin-check", "--epochs", "0"]) == 2
    assert main(["train", "--env", "CartPole-v1", "--agent", "gvin", "--out", str(tmp_path / "run")]) == 2
    assert "needs a maze env" in capsys.readouterr().err and not (tmp_path / "run").exists()
