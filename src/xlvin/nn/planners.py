"""XLVIN's planners (paper section 3.2, steps 2-4): from the roots' embeddings h_s [B, k], grow a
latent tree with the transition model, h' = h + T(h, a) (eq. 5), and run the frozen executor X
over it K times, messages from children to parents (eq. 3) and node updates (eq. 4), giving the
roots' executed embeddings chi_s [B, H].

One interface, `Planner.plan(parts, h) -> chi_s`. The planners differ only in which actions a
node of the tree expands:

- `FullTree`, the paper's: every action of every node, B A^d nodes at depth d, the executor run
  over the tree's flat layout in one kernel per step (`xlvin.nn.tree.execute_tree`);
- `PrunedTree`, ours: the roots expand every action, deeper nodes only the `branching` actions
  that a rollout policy ranks highest (the paper's section 3.2 "Discussion" names such a
  policy as the way to deeper trees);
- `SampledTree`, ours: every node, the roots included, expands N joint actions drawn as
  `xlvin.nn.expansion` says (large or continuous action spaces).

A planner holds no weights: what it plans with (`TreeParts`: the transition model, the frozen
processor, the projection of the nodes into the executor's width, the edge embedding, the rollout
policy) are the agent's modules, so that a run's weights keep their names whichever planner it
uses.
"""

from dataclasses import dataclass
from typing import Protocol

import torch
from torch import nn

from xlvin.nn.executor import MessagePassing
from xlvin.nn.expansion import Expansion, expand_sampled_tree
from xlvin.nn.transition import TransitionModel
from xlvin.nn.tree import (
    execute_levels,
    execute_tree,
    expand_projected_tree,
    expand_pruned_tree,
    expand_tree,
)


class TreeParts(Protocol):
    """The modules a planner plans with (`xlvin.nn.agent.XLVINAgent` has them)."""

    transition: TransitionModel  # T: [N, k], actions [N] -> [N, k]
    processor: MessagePassing  # X, frozen: message (eq. 3) and update (eq. 4) in width H
    node_projection: nn.Module | None  # nodes [N, k] -> [N, H] where k != H (or asked for)
    rollout_policy: nn.Module | None  # embeddings [N, k] -> logits [N, sum(nvec)]

    def edge_features(self) -> torch.Tensor:
        """e_a of every action [A, H]."""
        ...

    def embed_actions(self, actions: torch.Tensor, dtype: torch.dtype) -> torch.Tensor:
        """e_a of joint actions [N, d] (long) -> [N, H]."""
        ...


class Planner(Protocol):
    depth: int  # K: the tree's depth and the executor's steps

    def plan(self, parts: TreeParts, h: torch.Tensor) -> torch.Tensor:
        """chi_s [B, H] from h_s [B, k]."""
        ...


@dataclass(frozen=True)
class FullTree:
    """The paper's tree: level d holds B A^d nodes, every action expanded at every node
    (section 3.2, step 3); the executor runs K times over it (step 4). Where a node projection
    maps the nodes into the executor's width, the tree is grown directly in that width
    (`expand_projected_tree`: the same values in exact arithmetic, fewer multiply-adds)."""

    depth: int

    def plan(self, parts: TreeParts, h: torch.Tensor) -> torch.Tensor:
        if parts.node_projection is None:
            levels = expand_tree(h, parts.transition, self.depth)  # [B A^d, k] each
        else:
            levels = expand_projected_tree(h, parts.transition, parts.node_projection,
                                           self.depth)  # [B A^d, H] each
        return execute_tree(parts.processor, levels, parts.edge_features(), self.depth)


@dataclass(frozen=True)
class PrunedTree:
    """Ours, not the paper's: the roots expand all A actions, every deeper node the `branching`
    actions the rollout policy ranks highest (`expand_pruned_tree`), so level d holds
    B A b^(d-1) nodes; the executor runs level by level (`execute_levels`)."""

    depth: int
    branching: int

    def plan(self, parts: TreeParts, h: torch.Tensor) -> torch.Tensor:
        assert parts.rollout_policy is not None
        levels, actions = expand_pruned_tree(h, parts.transition, parts.rollout_policy,
                                             self.depth, self.branching)  # [n_d, k], [n_d]
        if parts.node_projection is not None:
            levels = [parts.node_projection(level) for level in levels]  # [n_d, H]
        edges = parts.edge_features()  # [A, H]
        return execute_levels(parts.processor, levels, [edges[a] for a in actions], self.depth)


@dataclass(frozen=True)
class SampledTree:
    """Ours: every node, the roots included, expands the N joint actions `expansion` draws
    (`xlvin.nn.expansion`), so level d holds B N^d nodes; each edge is embedded from its joint
    action's one-hots and gamma."""

    depth: int
    expansion: Expansion

    def plan(self, parts: TreeParts, h: torch.Tensor) -> torch.Tensor:
        levels, actions = expand_sampled_tree(h, parts.transition, self.expansion,
                                              parts.rollout_policy, self.depth)
        if parts.node_projection is not None:
            levels = [parts.node_projection(level) for level in levels]  # [B N^d, H]
        edges = [parts.embed_actions(a, h.dtype) for a in actions]  # [B N^d, H], d >= 1
        return execute_levels(parts.processor, levels, edges, self.depth)


def planner(depth: int, prune: int = 0, expansion: Expansion | None = None) -> Planner:
    """The planner of an agent's settings: a sampled expansion, else a pruned tree (`prune` >
    0), else the full tree."""
    if expansion is not None:
        return SampledTree(depth, expansion)
    if prune:
        return PrunedTree(depth, prune)
    return FullTree(depth)
