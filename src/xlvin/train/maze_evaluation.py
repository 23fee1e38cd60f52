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
from xlvin.train.collect import policy_device

#: Observations per forward pass (bounds the memory of VIN's 150-channel maps on 16x16).
BATCH = 1024


def maze_observations(mazes: MazeSet, maze: np.ndarray, cells: np.ndarray) -> np.ndarray:
    """The observations [N, 3, H, W] float32 (`xlvin.envs.maze` channels) of the agent at `cells`
    [N, 2] in the mazes `maze` [N]."""
    n = len(maze)
    obs = np.zeros((n, 3, mazes.size, mazes.size), dtype=np.float32)
    obs[:, WALLS] = mazes.walls[maze]
    rows = np.arange(n)
    obs[rows, GOAL, mazes.goals[maze, 0], mazes.goals[maze, 1]] = 1.0
    obs[rows, AGENT, cells[:, 0], cells[:, 1]] = 1.0
    return obs


@torch.no_grad()
def greedy_success(policy: ActorCritic, mazes: MazeSet, starts: np.ndarray | None = None) -> np.ndarray:
    """Whether the greedy policy solves each start (indices `starts`, default all): bool [N].
    The policy runs in evaluation mode, `BATCH` observations at a time."""
    starts = np.arange(len(mazes)) if starts is None else starts
    maze, cells = mazes.maze[starts], mazes.cells[starts].copy()
    limit = 2 * mazes.levels[starts]
    goals = mazes.goals[maze]
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
                policy(torch.from_numpy(maze_observations(mazes, maze[i], cells[i])).to(device))[0]
                .argmax(dim=-1).cpu().numpy()
                for i in np.array_split(idx, -(-len(idx) // BATCH))
            ])
            target = cells[idx] + MOVES[actions]
            hit_wall = mazes.walls[maze[idx], target[:, 0], target[:, 1]]
            cells[idx] = np.where(hit_wall[:, None], cells[idx], target)
            at_goal = ~hit_wall & (target == goals[idx]).all(axis=1)
            success[idx] = at_goal
            playing[idx] = ~hit_wall & ~at_goal & (move < limit[idx])
    finally:
        policy.train(training)
    return success


def success_by_level(policy: ActorCritic, mazes: MazeSet) -> dict[int, float]:
    """{level: fraction of that level's starts the greedy policy solves}, and -1: all starts."""
    solved = greedy_success(policy, mazes)
    rates = {d: float(solved[mazes.levels == d].mean()) for d in mazes.level_counts()}
    rates[-1] = float(solved.mean())
    return rates
