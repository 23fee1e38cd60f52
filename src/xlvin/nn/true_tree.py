"""XLVIN on the maze's true tree (ours, not the paper's): the oracle arm, whose
tree holds the encoder's embeddings of the true successor observations, z(s'), where XLVIN's
holds the transition model's h + T(h, a) (eq. 5). The rest is XLVIN's: the frozen executor runs
K times over the tree (section 3.2, step 4) and the heads read [h_s, chi_s] (step 5).

A maze observation [3, H, W] (`xlvin.envs.maze`: walls, agent, goal) holds the whole grid, so
the observation after any sequence of moves follows from it by the environment's own rules
(`MazeEnv.step`): a move onto a free cell moves the agent there, onto the goal too and the
episode ends; into a wall or off the grid the agent stays and the episode ends. An ended
episode is absorbing, as the maze MDP's terminal node (`xlvin.mdp.maze_graphs`): each of its
actions leads to itself. Every node of a root's tree is then the root's observation with the
agent on some cell at most K moves away, so the encoder runs once over the free cells of that
window (`maze_cells`; once per distinct maze and cell of a batch, the roots of one maze
sharing them), the tree's nodes gathered from those embeddings: the same embeddings as encoding
every node's observation. In training mode the maze encoder's BatchNorm normalises by the
statistics of that one pass, which holds the roots (h_s is gathered from it too).
"""

from dataclasses import dataclass

import torch
from torch import Tensor

from xlvin.envs.maze import AGENT, GOAL, WALLS
from xlvin.envs.maze_data import MOVES
from xlvin.nn.agent import XLVINAgent
from xlvin.nn.auxiliary import rollout_distillation
from xlvin.nn.planners import TreeParts
from xlvin.nn.policy import TransitionBatch
from xlvin.nn.tree import execute_levels


@dataclass(frozen=True)
class MazeCells:
    """The cells a depth-K tree can reach in each of B maze observations, as observations: one
    per distinct (maze, cell), shared by the roots in the same maze (the same walls, context
    and goal)."""

    observations: Tensor  # [M, 3, H, W]: a root's observation, its agent moved to one cell
    rows: Tensor  # [B, H W] (long): the row of (root, cell) in `observations`, -1 if none
    walls: Tensor  # [B, H, W] (bool)
    goal: Tensor  # [B] (long): the goal's cell, row * W + column
    agent: Tensor  # [B] (long): the agent's cell


def maze_cells(obs: Tensor, radius: int) -> MazeCells:
    """The free cells at most `radius` moves (rows and columns apart) from the agent of each
    maze observation obs [B, 3, H, W], the agent placed on each of them: each distinct maze's
    once, over the union of its roots' windows."""
    batch, _, height, width = obs.shape
    walls = obs[:, WALLS] > 0  # contextual borders show values in (0, 1): walls too
    agent = obs[:, AGENT].flatten(1).argmax(1)  # [B]
    scenes, maze = torch.unique(obs[:, [WALLS, GOAL]].flatten(1), dim=0, return_inverse=True)
    rows = torch.arange(height, device=obs.device)[:, None] - (agent // width)[:, None, None]
    cols = torch.arange(width, device=obs.device)[None] - (agent % width)[:, None, None]
    near = ((rows.abs() <= radius) & (cols.abs() <= radius) & ~walls).flatten(1)  # [B, H W]
    keep = torch.zeros(len(scenes), height * width, device=obs.device)
    keep = keep.index_add_(0, maze, near.float()) > 0  # [G, H W]: any root's window
    scene, cell = keep.nonzero(as_tuple=True)  # [M] each
    observations = obs.new_zeros(len(scene), 3, height * width)
    observations[:, [WALLS, GOAL]] = scenes[scene].view(len(scene), 2, -1)
    observations[torch.arange(len(scene), device=obs.device), AGENT, cell] = 1.0
    index = torch.full((len(scenes), height * width), -1, dtype=torch.long, device=obs.device)
    index[scene, cell] = torch.arange(len(scene), device=obs.device)
    return MazeCells(observations.view(-1, 3, height, width), index[maze], walls,
                     obs[:, GOAL].flatten(1).argmax(1), agent)


def true_successors(
    cells: MazeCells, root: Tensor, cell: Tensor, done: Tensor, actions: Tensor
) -> tuple[Tensor, Tensor]:
    """The environment's successors (module docstring) of n nodes, each in maze root[n] on
    cell[n] (long) with its episode ended or not (done [n], bool), under actions [n, c]:
    their cells and whether their episodes have ended, [n, c] each."""
    height, width = cells.walls.shape[1:]
    move = torch.as_tensor(MOVES, device=cell.device)[actions]  # [n, c, 2]
    row, col = (cell // width)[:, None] + move[..., 0], (cell % width)[:, None] + move[..., 1]
    inside = (row >= 0) & (row < height) & (col >= 0) & (col < width)
    wall = cells.walls[root[:, None], row.clamp(0, height - 1), col.clamp(0, width - 1)]
    blocked = ~inside | wall
    stays = done[:, None] | blocked
    target = torch.where(stays, cell[:, None], row * width + col)  # [n, c]
    return target, stays | (target == cells.goal[root][:, None])


@dataclass(frozen=True)
class TrueTree:
    """The true tree of depth K over the embeddings of `maze_cells` (module docstring): every
    action of every node (`branching` 0: the paper's full tree), or the roots every action and
    deeper nodes the `branching` actions the rollout policy ranks highest on their embeddings
    (as `xlvin.nn.planners.PrunedTree`); the executor runs over it as in XLVIN
    (`execute_levels`)."""

    depth: int
    branching: int

    def plan(self, parts: TreeParts, cells: MazeCells, table: Tensor) -> Tensor:
        """chi_s [B, H] from the embeddings table [M, k] of `cells`."""
        num_actions = len(MOVES)
        root = torch.arange(len(cells.agent), device=table.device)  # the root of each node
        cell, done = cells.agent, torch.zeros_like(cells.agent, dtype=torch.bool)
        levels, actions = [table[cells.rows[root, cell]]], []  # [n_d, k], [n_d]
        for d in range(self.depth):
            if d and self.branching:
                assert parts.rollout_policy is not None
                chosen = parts.rollout_policy(levels[-1].detach()).topk(self.branching).indices
            else:
                chosen = torch.arange(num_actions, device=table.device).expand(len(cell), -1)
            cell, done = (x.flatten() for x in true_successors(cells, root, cell, done, chosen))
            root = root.repeat_interleave(chosen.shape[1])  # child j of node i: row i c + j
            levels.append(table[cells.rows[root, cell]])
            actions.append(chosen.flatten())
        if parts.node_projection is not None:
            levels = [parts.node_projection(level) for level in levels]  # [n_d, H]
        edges = parts.edge_features()  # [A, H]
        return execute_levels(parts.processor, levels, [edges[a] for a in actions], self.depth)


class TrueTreeXLVIN(XLVINAgent):
    """`XLVINAgent` whose tree is the maze's true one (module docstring), built by `TrueTree`
    (its `planner`) from the observations themselves:

        z(s_c) for the free cells c within K moves     [M, k]   one encoder pass
        h_s = z(s) (the agent's own cell)               [B, k]   step 1
        chi_s = executor over the true tree             [B, H]   steps 3-4
        pi(.|s), V(s) = A(h_s, chi_s), V(h_s, chi_s)    [B, A], [B]   step 5

    The transition model is no part of the tree; the TransE term (weight `transe_weight`) still
    trains it with the encoder, as in XLVIN, so that the encoder gets the same auxiliary loss and
    the arm differs from XLVIN in its tree alone. `zero_chi` gives the heads zeros for chi_s."""

    def plan(self, cells: MazeCells, table: Tensor) -> Tensor:
        """chi_s [B, H] of the true trees over `cells` embedded as table [M, k] (then
        `chi_projection`, if any); zeros with `zero_chi`."""
        if self.zero_chi:
            return table.new_zeros(len(cells.agent), self.edge_projection.out_features)
        chi = self.planner.plan(self, cells, table)
        return chi if self.chi_projection is None else self.chi_projection(chi)

    def embed(self, obs: Tensor, next_obs: Tensor | None = None) -> tuple[Tensor, ...]:
        """h_s [B, k], chi_s [B, H] and, given next_obs [B, ...], z(s') [B, k] (else None),
        from one encoder pass over the cells' observations and next_obs."""
        cells = maze_cells(obs, self.depth)
        inputs = cells.observations if next_obs is None else torch.cat([cells.observations,
                                                                       next_obs])
        z = self.encoder(inputs)  # [M (+ B), k]
        table = z[: len(cells.observations)]  # [M, k]
        h = table[cells.rows[torch.arange(len(obs), device=obs.device), cells.agent]]  # [B, k]
        return h, self.plan(cells, table), None if next_obs is None else z[len(table) :]

    def forward(self, obs: Tensor) -> tuple[Tensor, Tensor]:
        """obs [B, 3, H, W] -> logits [B, A], values [B] of A(h_s, chi_s), V(h_s, chi_s)."""
        h, chi, _ = self.embed(obs)
        return self.heads(torch.cat([h, chi], dim=-1))

    def forward_with_aux(
        self, batch: TransitionBatch
    ) -> tuple[Tensor, Tensor, dict[str, Tensor]]:
        """`forward(batch.obs)`, the TransE term (on z(s') from the same encoder pass) and the
        rollout policy's distillation."""
        h, chi, h_next = self.embed(batch.obs, batch.next_obs if self.transe_weight else None)
        logits, values = self.heads(torch.cat([h, chi], dim=-1))  # [B, A], [B]
        return logits, values, {**self.auxiliary.losses(self, h, h_next, batch),
                                **rollout_distillation(self.rollout_policy, self.factors, h,
                                                       logits)}
