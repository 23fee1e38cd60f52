"""The maze baselines: MazeCNN (PPO), VIN, VIN-mean, VIN-max, GVIN; greedy maze evaluation; the
supervised VIN check and PPO training through `xlvin train` on the maze."""

import math
from pathlib import Path

import numpy as np
import pytest
import torch

from xlvin.envs.maze import AGENT, GOAL, WALLS
from xlvin.envs.maze_data import MOVES, MazeSet, bfs_distances, generated_split
from xlvin.errors import UserError
from xlvin.nn.baselines.ppo import PPOAgent
from xlvin.nn.encoders import MazeCNN
from xlvin.nn.baselines.gvin import DirectionalGraphConv, GVINAgent
from xlvin.nn.policy import ActorCritic
from xlvin.nn.baselines.vin import ValueIteration, VINAgent, paper_iterations
from xlvin.ppo.collect import make_actor
from xlvin.ppo.maze_evaluation import greedy_success, maze_observations
from xlvin.ppo.update import PPOConfig
from xlvin.run.training import train_run
from xlvin.run.config import RunConfig, TrainConfig


def observations(size: int, count: int, level: int | None = None) -> torch.Tensor:
    mazes = generated_split(size, "test")
    index = np.flatnonzero(mazes.levels == level)[:count] if level else np.arange(count)
    return torch.from_numpy(maze_observations(mazes, mazes.maze[index], mazes.cells[index]))


def test_vin_q_map_shapes_and_readouts_on_8x8_and_16x16() -> None:
    torch.manual_seed(0)
    assert (paper_iterations(8), paper_iterations(16)) == (10, 20)
    vin = VINAgent(8)
    for size in (8, 16):
        obs = observations(size, 5)
        q = vin.planner(obs[:, [WALLS, GOAL]], paper_iterations(size))
        assert q.shape == (5, 10, size, size)
        cell = obs[:, AGENT].flatten(1).argmax(1)
        sliced = q.flatten(2)[torch.arange(5), :, cell]  # [5, 10]: Q at the agent's cell
        logits, values = vin(obs)
        assert logits.shape == (5, 8) and values.shape == (5,)
        torch.testing.assert_close(logits, vin.heads.actor(sliced))
        for readout, pool in (("mean", lambda q: q.mean((2, 3))), ("max", lambda q: q.amax((2, 3)))):
            pooled = VINAgent(8, readout)  # reads the agent channel too: it has no slice
            q = pooled.planner(obs, paper_iterations(size))
            torch.testing.assert_close(pooled(obs)[0], pooled.heads.actor(pool(q)))
            moved = obs.clone()
            moved[:, AGENT] = moved[:, AGENT].roll(1, dims=-1)
            assert not torch.allclose(pooled(moved)[0], pooled(obs)[0])  # it sees the agent


def test_value_iteration_runs_k_steps_of_the_shared_convolutions() -> None:
    torch.manual_seed(0)
    planner = ValueIteration()
    image = observations(8, 3)[:, [WALLS, GOAL]]
    reward_q = planner.q_reward(planner.r(planner.h(image)))
    q = reward_q
    for _ in range(3):
        q = reward_q + planner.q_value(q.amax(1, keepdim=True))
    torch.testing.assert_close(planner(image, 3), q)


def test_gvin_kernel_is_directional_and_ignores_walls() -> None:
    torch.manual_seed(0)
    conv = DirectionalGraphConv(4)
    # t = 100 makes the kernel nearly a permutation: each move's direction is one reference
    # direction l, and its weight is w_l + w_0
    permutation = conv.kernel.round()
    assert torch.equal(permutation.sum(0), torch.ones(8)) and torch.equal(permutation.sum(1), torch.ones(8))
    torch.testing.assert_close(conv.kernel, permutation, atol=1e-5, rtol=0)
    torch.testing.assert_close(conv.direction_weights(), conv.w @ permutation + conv.w0)
    north = int(permutation[:, 0].argmax())  # MOVES[0] = N, at 90 degrees: reference 2
    assert north == 2
    agent = GVINAgent(8)
    for size in (8, 16):
        obs = observations(size, 4)
        q = agent.plan(obs)
        assert q.shape == (4, 10, size, size)
        assert (q.permute(1, 0, 2, 3)[:, obs[:, WALLS] > 0] == 0).all()
        logits, values = agent(obs)
        assert logits.shape == (4, 8) and values.shape == (4,)


def test_maze_cnn_acts_in_eval_mode_and_learns_in_train_mode() -> None:
    torch.manual_seed(0)
    agent = PPOAgent(MazeCNN(3, 16, 10), 10, 8)
    obs = observations(8, 6)
    bn = agent.encoder.convs[1]
    before = bn.running_mean.clone()
    act = make_actor(agent, accelerate=True)
    alone = act(obs[:1].numpy())[0]
    together = act(obs.numpy())[0][:1]
    np.testing.assert_allclose(alone, together, rtol=1e-5, atol=1e-6)  # no batch statistics
    assert torch.equal(bn.running_mean, before) and agent.training  # acting changed nothing
    agent(obs)  # a learning forward: batch statistics, running ones updated
    assert not torch.equal(bn.running_mean, before)
    assert agent.encoder(observations(16, 2)).shape == (2, 10)  # pooling: any maze size


class ShortestPath(ActorCritic):
    """An oracle: the action of a shortest path, read off BFS on the observation."""

    num_actions = 8

    def forward(self, obs: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        walls = obs[:, WALLS].numpy() > 0
        goals = np.argwhere(obs[:, GOAL].numpy() > 0)[:, 1:]
        cells = np.argwhere(obs[:, AGENT].numpy() > 0)[:, 1:]
        dist = bfs_distances(walls, goals)
        rows = np.arange(len(obs))
        nxt = cells[:, None] + MOVES[None]  # [B, 8, 2]
        d = dist[rows[:, None], nxt[..., 0], nxt[..., 1]].astype(float)
        d[d < 0] = np.inf
        return torch.from_numpy(-d).float(), torch.zeros(len(obs))


def test_greedy_success_of_an_oracle_and_of_a_wall_hugger() -> None:
    mazes = generated_split(8, "test")
    assert greedy_success(ShortestPath(), mazes).all()

    class North(ShortestPath):
        def forward(self, obs: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
            return torch.eye(8)[[0] * len(obs)], torch.zeros(len(obs))

    north = greedy_success(North(), mazes)
    goal_north = (mazes.goals[mazes.maze] == mazes.cells + MOVES[0]).all(1)
    straight_up = goal_north & (mazes.levels == 1)
    assert north[straight_up].all() and not north[~straight_up & (mazes.levels == 1)].any()


def tiny_set(mazes: MazeSet, level: int, count: int) -> MazeSet:
    keep = np.flatnonzero(mazes.levels == level)[:count]
    return MazeSet(mazes.walls, mazes.goals, mazes.maze[keep], mazes.cells[keep],
                   mazes.levels[keep], mazes.actions[keep])


def test_vin_learns_level_1_from_expert_actions() -> None:
    """Supervised as in the VIN paper, on 1,000 level-1 starts: held-out level-1 success rises
    from chance to most starts."""
    torch.manual_seed(0)
    train = tiny_set(generated_split(8, "train"), 1, 1000)
    test = tiny_set(generated_split(8, "test"), 1, 300)
    obs = torch.from_numpy(maze_observations(train, train.maze, train.cells))
    labels = torch.from_numpy(train.actions)
    vin = VINAgent(8)
    before = greedy_success(vin, test).mean()
    optimizer = torch.optim.RMSprop(vin.parameters(), lr=0.002, eps=1e-6)
    for _ in range(4):
        for batch in torch.randperm(len(labels)).split(64):
            loss = torch.nn.functional.cross_entropy(vin(obs[batch])[0], labels[batch])
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
    after = greedy_success(vin, test).mean()
    assert before < 0.3 and after > 0.8


@pytest.mark.parametrize("agent", ["vin", "vin-mean", "vin-max", "gvin", "ppo"])
def test_every_maze_agent_trains_with_the_librarys_ppo(agent: str, tmp_path: Path) -> None:
    cfg = RunConfig(
        train=TrainConfig(env="xlvin/Maze-v0", agent=agent, hidden=8, checkpoint_every=0),
        ppo=PPOConfig(num_envs=2, num_steps=16, total_steps=64),
    )
    policy, summary = train_run(cfg, tmp_path / agent, progress=False)
    assert summary["ppo"]["env_steps"] == 64 and math.isfinite(summary["ppo"]["last_metrics"]["losses/value_loss"])
    logits, _ = policy(observations(16, 2))  # the same network on 16x16
    assert logits.shape == (2, 8)


def test_planners_need_a_maze_env(tmp_path: Path) -> None:
    cfg = RunConfig(train=TrainConfig(env="CartPole-v1", agent="vin"))
    with pytest.raises(UserError, match="needs a maze env"):
        train_run(cfg, tmp_path / "run", progress=False)
