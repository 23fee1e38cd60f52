"""Greedy success on held-out mazes (VIN's metric): every start of a `MazeSet` played at once.

A start succeeds when the greedy policy (argmax of its logits) reaches the goal within 2 x its
level moves (Tamar et al. 2016). The rules are `xlvin.envs.maze.MazeEnv`'s (a move onto a wall
ends the episode, a failure); the episodes are stepped here as arrays, all starts in one batch,
instead of through gymnasium, so that thousands of starts take one forward per move.
"""

import numpy as np
import torch

from xlvin.envs.maze import AGENT, GOAL, WALLS
from xlvin.envs.maze_data import MOVES, MazeSet
from xlvin.nn.policy import ActorCritic
from xlvin.ppo.collect import policy_device

#: Observations per forward pass (bounds the memory of VIN's 150-channel maps on 16x16).
BATCH = 1024


def maze_observations(
    mazes: MazeSet, maze: np.ndarray, cells: np.ndarray, contexts: np.ndarray | None = None
) -> np.ndarray:
    """The observations [N, 3, H, W] float32 (`xlvin.envs.maze` channels) of the agent at `cells`
    [N, 2] in the mazes `maze` [N]; with `contexts` [N, 2] (a, b), the contextual maze's: the
    wall channel's left border column shows a, its top border row b."""
    n = len(maze)
    obs = np.zeros((n, 3, mazes.size, mazes.size), dtype=np.float32)
    obs[:, WALLS] = mazes.walls[maze]
    if contexts is not None:
        obs[:, WALLS, :, 0] = contexts[:, :1]
        obs[:, WALLS, 0, :] = contexts[:, 1:]
    rows = np.arange(n)
    obs[rows, GOAL, mazes.goals[maze, 0], mazes.goals[maze, 1]] = 1.0
    obs[rows, AGENT, cells[:, 0], cells[:, 1]] = 1.0
    return obs


def evaluation_starts(mazes: MazeSet, per_level: int, seed: int = 0) -> np.ndarray:
    """Indices of the starts an evaluation plays: every start of a level with at most
    `per_level` of them, else `per_level` drawn without replacement (seeded: every agent and
    every evaluation plays the same ones); `per_level` 0: every start. Sorted."""
    if per_level == 0:
        return np.arange(len(mazes))
    rng = np.random.default_rng(seed)
    chosen = [
        starts if len(starts) <= per_level else rng.choice(starts, per_level, replace=False)
        for starts in (mazes.starts_of_level(d) for d in sorted(mazes.level_counts()))
    ]
    return np.sort(np.concatenate(chosen))


def evaluation_contexts(count: int, seed: int = 0) -> np.ndarray:
    """The contextual maze's (a, b) ~ U(0, 1)^2 for `count` evaluation starts [count, 2]
    (seeded: every agent plays the same contexts)."""
    return np.random.default_rng(seed).random((count, 2))


@torch.no_grad()
def greedy_success(
    policy: ActorCritic, mazes: MazeSet, starts: np.ndarray | None = None,
    contexts: np.ndarray | None = None,
) -> np.ndarray:
    """Whether the greedy policy solves each start (indices `starts`, default all): bool [N].
    The policy runs in evaluation mode, `BATCH` observations at a time.

    Solving = the positive terminal reward within 2 x level moves: the goal, or, in a contextual
    maze (`contexts` [N, 2]: a, b per start) whose a + b > 1, a wall."""
    starts = np.arange(len(mazes)) if starts is None else starts
    maze, cells = mazes.maze[starts], mazes.cells[starts].copy()
    limit = 2 * mazes.levels[starts]
    goals = mazes.goals[maze]
    inverted = np.zeros(len(starts), dtype=bool) if contexts is None else contexts.sum(1) > 1.0
    playing = np.ones(len(starts), dtype=bool)
    success = np.zeros(len(starts), dtype=bool)
    training = policy.training
    policy.eval()
    device = policy_device(policy)
    try:
        for move in range(1, int(limit.max(initial=0)) + 1):
            idx = np.flatnonzero(playing)
            if len(idx) == 0:
                break
            actions = np.concatenate([
                policy(torch.from_numpy(maze_observations(
                    mazes, maze[i], cells[i], None if contexts is None else contexts[i]
                )).to(device))[0].argmax(dim=-1).cpu().numpy()
                for i in np.array_split(idx, -(-len(idx) // BATCH))
            ])
            target = cells[idx] + MOVES[actions]
            hit_wall = mazes.walls[maze[idx], target[:, 0], target[:, 1]]
            cells[idx] = np.where(hit_wall[:, None], cells[idx], target)
            at_goal = ~hit_wall & (target == goals[idx]).all(axis=1)
            success[idx] = np.where(inverted[idx], hit_wall, at_goal)
            playing[idx] = ~hit_wall & ~at_goal & (move < limit[idx])
    finally:
        policy.train(training)
    return success


def success_by_level(
    policy: ActorCritic, mazes: MazeSet, starts: np.ndarray | None = None,
    contexts: np.ndarray | None = None,
) -> dict[int, float]:
    """{level: fraction of that level's starts (of `starts`, default all) the greedy policy
    solves}, and -1: all of them."""
    starts = np.arange(len(mazes)) if starts is None else starts
    solved = greedy_success(policy, mazes, starts, contexts)
    levels = mazes.levels[starts]
    rates = {int(d): float(solved[levels == d].mean()) for d in np.unique(levels)}
    rates[-1] = float(solved.mean())
    return rates
