"""The oracle arm (`xlvin.nn.true_tree`): XLVIN whose tree holds the encoder's embeddings of the
maze's true successor observations. Its successors are the environment's, its tree is the
encoder applied to the observations the environment would show, and `--agent xlvin-oracle`
trains on the maze, as do the maze experiment's oracle arms."""

import copy
from pathlib import Path

import gymnasium as gym
import pytest
import torch

from xlvin.cli import main
from xlvin.envs.maze import AGENT, MAZE_ID, WALLS, register_maze_envs
from xlvin.envs.spaces import Spaces
from xlvin.experiments.maze import Cell
from xlvin.nn.policy import TransitionBatch
from xlvin.nn.tree import execute_tree
from xlvin.nn.true_tree import TrueTree, TrueTreeXLVIN, maze_cells, true_successors
from xlvin.pretrain.files import executor_file, load_executor_processor
from xlvin.run.architecture import agent_of
from xlvin.run.checks import check_run
from xlvin.run.config import RunConfig, TrainConfig

register_maze_envs()


def starts(count: int) -> list[gym.Env]:
    """`count` held-out maze episodes just reset (seeds 0 ..), as envs."""
    envs = []
    for seed in range(count):
        env = gym.make(MAZE_ID, split="test")
        env.reset(seed=seed)
        envs.append(env)
    return envs


def observation(env: gym.Env) -> torch.Tensor:
    return torch.as_tensor(env.unwrapped._obs.copy())


def oracle(depth: int, prune: int, zero_chi: bool = False) -> TrueTreeXLVIN:
    torch.manual_seed(0)
    cfg = RunConfig(train=TrainConfig(env=MAZE_ID, agent="xlvin-oracle", executor="maze",
                                      depth=depth, prune=prune, hidden=8, zero_chi=zero_chi))
    processor, _ = load_executor_processor(executor_file("maze"))
    agent = agent_of(cfg, Spaces((3, 8, 8), "maze", 8), processor)
    assert isinstance(agent, TrueTreeXLVIN) and agent.planner == TrueTree(depth, prune)
    return agent.eval()


def test_true_successors_are_the_environments() -> None:
    """Every action from 40 held-out starts: the cell the agent ends on and whether the episode
    ended, as `MazeEnv.step` says; a node whose episode has ended stays where it is."""
    envs = starts(40)
    cells = maze_cells(torch.stack([observation(e) for e in envs]), 1)
    roots = torch.arange(len(envs))
    actions = torch.arange(8).expand(len(envs), -1)
    cell, done = true_successors(cells, roots, cells.agent, torch.zeros(len(envs), dtype=bool),
                                 actions)
    for i, env in enumerate(envs):
        for a in range(8):
            moved = copy.deepcopy(env)
            obs, _, terminated, _, _ = moved.step(a)
            assert int(cell[i, a]) == int(obs[AGENT].argmax()) and bool(done[i, a]) == terminated
    again, still = true_successors(cells, roots, cells.agent, torch.ones(len(envs), dtype=bool),
                                   actions)
    assert (again == cells.agent[:, None]).all() and still.all()


def test_maze_cells_move_the_agent_over_the_free_cells_of_its_mazes_windows() -> None:
    """Each root's observation with its agent on each free cell of its window; the roots of one
    maze (the last is the first's maze, its agent one move on) share their cells' rows."""
    envs = starts(6)
    moved = copy.deepcopy(envs[0])
    moved.step(int(next(a for a in range(8) if not copy.deepcopy(envs[0]).step(a)[2])))
    obs = torch.stack([observation(e) for e in [*envs, moved]])
    cells = maze_cells(obs, 2)
    agent = obs[:, AGENT].flatten(1).argmax(1)
    assert torch.equal(cells.observations[cells.rows[torch.arange(7), agent]], obs)
    assert torch.equal(cells.rows[0], cells.rows[6])
    assert len(cells.observations) == int((cells.rows[:6] >= 0).sum())  # 6 distinct mazes
    for b in range(7):
        for cell in range(64):
            row, free = int(cells.rows[b, cell]), bool(obs[b, WALLS].flatten()[cell] == 0)
            near = max(abs(cell // 8 - int(agent[b]) // 8), abs(cell % 8 - int(agent[b]) % 8)) <= 2
            assert (row >= 0) <= free and (near and free) <= (row >= 0)
            if row >= 0:
                seen = cells.observations[row]
                assert torch.equal(seen[[0, 2]], obs[b, [0, 2]]) and seen[AGENT].flatten()[cell] == 1
                assert seen[AGENT].sum() == 1


def simulated_levels(env: gym.Env, depth: int) -> list[list[torch.Tensor]]:
    """The observations of every node of the env's full tree, by stepping copies of the env
    (a node whose episode has ended keeps its observation): level d in `expand_tree`'s order."""
    levels = [[(env, False)]]
    for _ in range(depth):
        level = []
        for node, ended in levels[-1]:
            for a in range(8):
                if ended:
                    level.append((node, True))
                    continue
                child = copy.deepcopy(node)
                _, _, terminated, _, _ = child.step(a)
                level.append((child, terminated))
        levels.append(level)
    return [[observation(node) for node, _ in level] for level in levels]


def test_the_tree_is_the_encoder_on_the_observations_the_env_would_show() -> None:
    """chi_s of the full true tree is the executor run (`execute_tree`) over the encoder's
    embeddings of the observations that stepping the environment gives."""
    agent, envs = oracle(depth=2, prune=0), starts(3)
    obs = torch.stack([observation(e) for e in envs])
    per_root = [simulated_levels(env, 2) for env in envs]
    with torch.no_grad():
        levels = [agent.encoder(torch.stack([o for tree in per_root for o in tree[d]]))
                  for d in range(3)]  # [3 * 8^d, k], roots in order
        expected = execute_tree(agent.processor, levels, agent.edge_features(), 2)
        h, chi, _ = agent.embed(obs)
    torch.testing.assert_close(h, levels[0])
    torch.testing.assert_close(chi, expected)


def test_pruning_to_every_action_is_the_full_tree() -> None:
    full = oracle(depth=3, prune=0)
    obs = torch.stack([observation(e) for e in starts(4)])
    with torch.no_grad():
        chi = full.embed(obs)[1]
        ranked = copy.deepcopy(full)
        ranked.rollout_policy = torch.nn.Linear(ranked.encoder.embedding_dim, 8)
        ranked.planner = TrueTree(3, 8)  # every action of every node, in the ranked order
        torch.testing.assert_close(ranked.embed(obs)[1], chi)
        pruned = oracle(depth=3, prune=2)
        assert not torch.allclose(pruned.embed(obs)[1], chi)


def test_forward_with_aux_is_forward_with_transe_and_distillation() -> None:
    agent, envs = oracle(depth=3, prune=2), starts(5)
    obs = torch.stack([observation(e) for e in envs])
    actions = torch.tensor([0, 1, 2, 3, 4])
    next_obs = torch.stack([torch.as_tensor(copy.deepcopy(e).step(int(a))[0])
                            for e, a in zip(envs, actions)])
    logits, values, aux = agent.forward_with_aux(TransitionBatch(obs, actions, next_obs))
    torch.testing.assert_close((logits, values), agent(obs))
    assert set(aux) == {"transe", "distillation"} and all(v.isfinite() for v in aux.values())
    zero = oracle(depth=3, prune=2, zero_chi=True)
    h, chi, _ = zero.embed(obs)
    assert torch.equal(chi, torch.zeros_like(chi))
    torch.testing.assert_close(zero(obs), zero.heads(torch.cat([h, chi], -1)))


@pytest.mark.parametrize("name", ["xlvin-32-b2-oracle", "xlvin-32-b2-oracle-untrained",
                                  "xlvin-32-b2-oracle-zero-chi"])
def test_the_maze_experiments_oracle_arms_are_valid_runs(name: str) -> None:
    t = Cell("maze", name, seed=0).config().train
    assert (t.agent, t.depth, t.prune, t.hidden) == ("xlvin-oracle", 4, 2, 32)
    assert t.executor == ("maze-untrained" if name.endswith("untrained") else "maze")
    assert t.zero_chi == name.endswith("zero-chi")
    assert check_run(Cell("maze", name, seed=0).config())[0] == Spaces((3, 8, 8), "maze", 8)


def test_xlvin_oracle_trains_on_the_maze(tmp_path: Path) -> None:
    out = tmp_path / "run"
    assert main(["train", "--env", MAZE_ID, "--agent", "xlvin-oracle", "--executor", "maze",
                 "--depth", "2", "--prune", "2", "--hidden", "8", "--num-envs", "2",
                 "--num-steps", "16", "--total-steps", "64", "--pretrain-transe", "false",
                 "--quiet", "--out", str(out)]) == 0
    assert (out / "summary.json").is_file()
    assert main(["train", "--env", "CartPole-v1", "--agent", "xlvin-oracle", "--quiet",
                 "--out", str(tmp_path / "cp")]) == 2
