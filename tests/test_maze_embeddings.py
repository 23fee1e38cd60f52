"""Paper figure 5, `xlvin maze embeddings`: the states of a maze, Spearman's rho, the PCA, and the
figure and JSON of a curriculum XLVIN run, with its refusals."""

import json
from collections import deque
from pathlib import Path

import numpy as np
import pytest
import torch

from xlvin.cli import main
from xlvin.envs.maze import AGENT, MAZE_ID
from xlvin.envs.maze_data import MOVES, bfs_distances, maze_split
from xlvin.experiments.maze_embeddings import (
    goal_rho_over_mazes,
    long_mazes,
    average_ranks,
    cell_states,
    pca,
    plan_levels,
    project,
    rank_correlation,
)
from xlvin.io.run_dir import CONFIG, write_json
from xlvin.ppo.maze_evaluation import maze_observations
from xlvin.ppo.update import PPOConfig
from xlvin.pretrain.transe import TransEConfig
from xlvin.pretrain.files import load_executor_processor
from xlvin.run.training import level_weights_saver
from xlvin.run.config import RunConfig, TrainConfig
from xlvin.run.architecture import agent_of
from xlvin.envs.spaces import Spaces


def test_rank_correlation_hand_cases() -> None:
    x = np.array([1.0, 2.0, 3.0, 4.0])
    assert rank_correlation(x, 10 * x**3) == pytest.approx(1.0)  # any increasing map
    assert rank_correlation(x, -x) == pytest.approx(-1.0)
    assert average_ranks(np.array([3, 1, 3, 2])).tolist() == [3.5, 1.0, 3.5, 2.0]
    # ties: ranks [1, 2.5, 2.5, 4] against [1, 2, 3, 4]: 4.5 / sqrt(4.5 * 5)
    assert rank_correlation(np.array([1, 2, 2, 3]), x) == pytest.approx(4.5 / np.sqrt(22.5))
    assert np.isnan(rank_correlation(np.ones(4), x))


def independent_bfs(walls: np.ndarray, goal: tuple[int, int]) -> dict[tuple[int, int], int]:
    """{free cell: moves to the goal} of the cells that reach it, by a plain queue."""
    dist, queue = {goal: 0}, deque([goal])
    while queue:
        r, c = queue.popleft()
        for dr, dc in MOVES:
            n = (r + dr, c + dc)
            inside = 0 <= n[0] < walls.shape[0] and 0 <= n[1] < walls.shape[1]
            if inside and not walls[n] and n not in dist:
                dist[n] = dist[(r, c)] + 1
                queue.append(n)
    return dist


def test_states_are_the_free_cells_that_reach_the_goal() -> None:
    #   0 1 2 3 4 5 6
    # 0 # # # # # # #
    # 1 # . . # # . #     (1, 5) is walled off from the goal
    # 2 # # . G # # #
    # 3 # # # # # # #
    walls = np.ones((4, 7), dtype=bool)
    walls[1, 1] = walls[1, 2] = walls[1, 5] = walls[2, 2] = walls[2, 3] = False
    states = cell_states(walls, (2, 3))
    assert [tuple(c) for c in states.cells] == [(1, 1), (1, 2), (2, 2), (2, 3)]
    assert states.distances.tolist() == [2, 1, 1, 0]
    assert (states.goal_index, states.unreachable) == (3, 1)
    # (state, action, next state) of every move between two of them, none from the goal
    moves = {(s, a, t) for s, a, t in states.edges.tolist()}
    assert moves == {(0, 2, 1), (0, 6, 2), (1, 1, 2), (1, 3, 0), (1, 6, 3), (2, 0, 1), (2, 2, 3),
                     (2, 5, 0)}

    mazes = maze_split(8, "test")
    for m in (0, 1, 2, 674):
        goal = tuple(int(g) for g in mazes.goals[m])
        states = cell_states(mazes.walls[m], goal)
        expected = independent_bfs(mazes.walls[m], goal)
        assert {tuple(c): int(d) for c, d in zip(states.cells, states.distances)} == expected
        assert states.unreachable == int((~mazes.walls[m]).sum()) - len(expected)
        # the observations are the environment's (the evaluation's builder of them)
        env_obs = maze_observations(mazes, np.full(len(states.cells), m), states.cells)
        assert np.array_equal(states.obs, env_obs)
        for s, a, t in states.edges:
            assert tuple(states.cells[s] + MOVES[a]) == tuple(states.cells[t])


def test_pca_keeps_the_geometry_of_a_rank_3_input() -> None:
    rng = np.random.default_rng(0)
    points = rng.normal(size=(12, 3)) @ rng.normal(size=(3, 10)) + rng.normal(size=10)  # [12, 10]
    mean, components = pca(points)
    projected = project(points, mean, components)
    assert projected.shape == (12, 3) and components.shape == (3, 10)
    before = np.linalg.norm(points[:, None] - points[None], axis=2)[np.triu_indices(12, 1)]
    after = np.linalg.norm(projected[:, None] - projected[None], axis=2)[np.triu_indices(12, 1)]
    np.testing.assert_allclose(after, before, rtol=1e-9)
    assert np.array_equal(np.argsort(after), np.argsort(before))  # the same pairwise order
    flat = points[:, :1] @ np.ones((1, 10))  # rank 1: still 3 coordinates, the last two 0
    np.testing.assert_allclose(project(flat, *pca(flat))[:, 1:], 0.0, atol=1e-9)


def test_missing_levels_give_way_to_the_last_passed_one() -> None:
    assert plan_levels([1, 2, 9], [1, 2, 3, 4]) == (
        [1, 2, 4], ["level 9 not reached by this run; last passed level 4 shown"])
    assert plan_levels([1, 4], [1, 2, 3, 4]) == ([1, 4], [])
    assert plan_levels([4, 9], [1, 2, 3, 4])[0] == [4]


def tiny_run(
    root: Path, executor_path: Path, agent: str = "xlvin", levels: tuple[int, ...] = (1, 2)
) -> Path:
    """A curriculum run directory holding only its config and per-level policies (untrained)."""
    cfg = RunConfig(
        train=TrainConfig(env=MAZE_ID, agent=agent, hidden=8, depth=1, executor=str(executor_path),
                          protocol="curriculum", device="cuda"),  # as the H100 run: loads on CPU
        ppo=PPOConfig(anneal_lr=False),
        transe=TransEConfig(episodes=40, epochs=1),
    )
    root.mkdir()
    write_json(root / CONFIG, cfg.to_json())
    processor, meta = load_executor_processor(executor_path)
    spaces = Spaces((3, 8, 8), "maze", 8)
    save = level_weights_saver(root, cfg, meta, spaces)
    for level in levels:
        save(level, agent_of(cfg, spaces, processor))
    return root


def test_embeddings_figure_of_a_tiny_run(tmp_path: Path, executor_path: Path, monkeypatch,
                                         capsys: pytest.CaptureFixture) -> None:
    monkeypatch.setenv("XLVIN_CACHE", str(tmp_path / "cache"))
    run = tiny_run(tmp_path / "run", executor_path)
    out = tmp_path / "figs" / "emb.png"
    args = ["maze", "embeddings", "--run", str(run), "--levels", "1,9", "--out", str(out),
            "--quiet", "--transe-epochs", "2"]
    assert main(args) == 0
    printed = capsys.readouterr().out
    assert "level 9 not reached by this run; last passed level 2 shown" in printed
    assert out.stat().st_size > 10_000
    summary = json.loads(out.with_suffix(".json").read_text())
    assert [(p["model"], p["level"]) for p in summary["panels"]] == [
        ("transe_only", None), ("xlvin", 1), ("xlvin", 2)]
    assert summary["panels"][2]["label"] == "XLVIN after level 2 (last passed)"
    assert summary["levels_shown"] == [1, 2] and summary["levels_passed_by_run"] == [1, 2]
    assert summary["transe_only"]["settings"]["episodes"] == 40  # the run's TransE settings...
    assert summary["transe_only"]["settings"]["epochs"] == 2  # ... but for the option given
    states = summary["maze"]["states"]
    for p in summary["panels"]:
        assert -1 <= p["spearman_rho"] <= 1 and p["states"] == states
    assert summary["maze"]["longest_path"] >= 6 and summary["config"]["train"]["agent"] == "xlvin"
    cached = list((tmp_path / "cache" / "transe").glob("*.safetensors"))
    assert len(cached) == 1  # a second figure reuses it
    assert main([*args, "--maze", "3", "--out", str(tmp_path / "figs" / "m3.png")]) == 0
    assert json.loads((tmp_path / "figs" / "m3.json").read_text())["maze"]["index"] == 3
    assert list((tmp_path / "cache" / "transe").glob("*.safetensors")) == cached


@pytest.mark.parametrize("case, message", [
    ("vin", "a vin run has no encoder and transition model"),
    ("empty", "not a run directory"),
    ("no-levels", "passed no level yet"),
    ("bad-level", "'x' is not a positive integer"),
    ("zero-level", "'0' is not a positive integer"),
    ("bad-maze", "--maze 5000"),
    ("bad-seed", "--seed must be >= 0"),
])
def test_refusals_are_one_line_and_create_nothing(
    case: str, message: str, tmp_path: Path, executor_path: Path, capsys: pytest.CaptureFixture,
    monkeypatch,
) -> None:
    monkeypatch.setenv("XLVIN_CACHE", str(tmp_path / "cache"))
    run = tmp_path / "run"
    extra = {"bad-level": ["--levels", "1,x"], "zero-level": ["--levels", "0,2"],
             "bad-maze": ["--maze", "5000"], "bad-seed": ["--seed", "-1"]}.get(case, [])
    if case == "vin":
        tiny_run(run, executor_path, agent="vin", levels=())
    elif case == "no-levels":
        tiny_run(run, executor_path, levels=())
    elif case != "empty":
        tiny_run(run, executor_path)
    else:
        run.mkdir()
    out = tmp_path / "figs" / "emb.png"
    assert main(["maze", "embeddings", "--run", str(run), "--out", str(out), *extra]) != 0
    err = capsys.readouterr().err.strip()
    assert message in err and len(err.splitlines()) == 1, err
    assert not out.parent.exists() and not (tmp_path / "cache").exists()


class DistanceTable(torch.nn.Module):
    """An encoder that embeds a state of one maze as 1 / (1 + `table`[agent's cell]) (walls,
    -1 in a BFS table, never hold the agent)."""

    def __init__(self, table: np.ndarray) -> None:
        super().__init__()
        self.table = torch.as_tensor(1.0 / (1.0 + np.maximum(table, 0)), dtype=torch.float32)

    def forward(self, obs: torch.Tensor) -> torch.Tensor:
        return (obs[:, AGENT] * self.table).sum((1, 2))[:, None]  # [B, 1]


def test_goal_rho_is_one_for_an_encoder_that_orders_states_by_their_path() -> None:
    mazes = maze_split(8, "test")
    indices = long_mazes(mazes)
    assert len(indices) == 56 and np.array_equal(indices, long_mazes(mazes))
    i = int(indices[0])
    distances = bfs_distances(mazes.walls[i : i + 1], mazes.goals[i : i + 1])[0].astype(float)
    assert goal_rho_over_mazes(DistanceTable(distances), mazes, [i])[0] == pytest.approx(1.0)
    shuffled = np.random.default_rng(0).permutation(distances.ravel()).reshape(distances.shape)
    assert abs(goal_rho_over_mazes(DistanceTable(shuffled), mazes, [i])[0]) < 0.9
    # one maze's embeddings do not order another maze's states
    other = goal_rho_over_mazes(DistanceTable(distances), mazes, indices[1:4])
    assert np.all(np.isnan(other) | (other < 0.999))
