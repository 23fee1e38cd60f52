"""Breadth-first latent tree expansion and the executor run over it (paper section 3.2).

Level d of the tree is one tensor [B * A^d, D]. The children of row i of level d are rows
i * A .. i * A + A - 1 of level d + 1 (row index = b * A^d + (a_1 .. a_d read as a base-A number)),
so gathering a parent's children is a reshape, never a Python loop over nodes.

Flat layout. Concatenating the levels (`torch.cat(levels)`, level-major) gives one [N, D] tensor
in which level d starts at row off_d = B (A^d - 1) / (A - 1) and the children of *any* internal
row p are rows B + p * A .. B + p * A + A - 1 (because off_{d+1} = A off_d + B). So the children of
all internal nodes of the first L levels are one contiguous block, rows B .. off_{L+1} - 1, and one
executor step over the whole tree is one call of the processor's message, aggregate and update,
whatever the depth (`execute_tree`).
"""

from typing import Protocol

import torch
from torch import nn
from torch.nn import functional as F

from xlvin.nn.executor import MessagePassing
from xlvin.nn.transition import TransitionModel


class LatentModel(Protocol):
    """Anything that maps embeddings [N, k] to the embeddings of all their successors [N, A, k]."""

    def successors(self, h: torch.Tensor) -> torch.Tensor: ...


def expand_tree(h: torch.Tensor, model: LatentModel, depth: int) -> list[torch.Tensor]:
    """Grow the latent tree from the roots h [B, k] over all actions to `depth` (paper 3.2, step 3).

    Returns levels S^0 .. S^depth, level d of shape [B * A^d, k]; child of row i via action a is
    row i * A + a of the next level; for XLVIN's transition it is parent_i + T(parent_i, a).
    """
    levels = [h]
    for _ in range(depth):
        levels.append(model.successors(levels[-1]).reshape(-1, h.shape[-1]))  # [N * A, k]
    return levels


def expand_projected_tree(
    h: torch.Tensor, transition: TransitionModel, projection: nn.Linear, depth: int
) -> list[torch.Tensor]:
    """`[projection(level) for level in expand_tree(h, transition, depth)]`, computed without the
    k-dimensional embeddings of any node below the roots (equal in exact arithmetic).

    Both the transition's first layer (on the state) and `projection` are affine in the node
    embedding, and a child differs from its parent by the translation T = W3 r + b3, with r the
    transition's last hidden layer. So with s(h) = W1_h h + b1 (the first layer's state part,
    [F]) and p(h) = P h + b_P ([H]):

        s(h + T) = s(h) + (W1_h W3) r + W1_h b3,    p(h + T) = p(h) + (P W3) r + P b3,

    so each node costs an [F, F] and an [H, F] product (a leaf only the second) instead of the
    F x k output layer, the k x F first layer and the k x H projection (~8x fewer multiply-adds
    for a pixel embedding, k = 512, F = 64, H = 50). Returns levels [B * A^d, H] in the
    `expand_tree` layout.
    """
    num_actions = transition.num_actions
    w_state, w_action = transition.action_weights()  # [F, k], [A, F]
    *hidden_layers, out_layer = transition.rest  # T = out_layer(r), r the last hidden layer
    # s and p of a translation T = W3 r + b3, as affine maps of r: [F, F] and [H, F]
    state_weight, state_bias = w_state @ out_layer.weight, w_state @ out_layer.bias
    proj_weight = projection.weight @ out_layer.weight
    proj_bias = projection.weight @ out_layer.bias

    state = F.linear(h, w_state, transition.first.bias)  # s(h) [B, F]
    levels = [projection(h)]  # p(h) [B, H]
    for d in range(depth):
        n = state.shape[0]
        r = (state[:, None] + w_action).flatten(0, 1)  # first layer of every child [n A, F]
        for layer in hidden_layers:  # ReLU, Linear, LayerNorm, ReLU
            r = layer(r)
        proj_delta = F.linear(r, proj_weight, proj_bias).view(n, num_actions, -1)  # [n, A, H]
        levels.append((levels[-1][:, None] + proj_delta).flatten(0, 1))  # [n A, H]
        if d + 1 < depth:  # the leaves need no state part
            state_delta = F.linear(r, state_weight, state_bias).view(n, num_actions, -1)
            state = (state[:, None] + state_delta).flatten(0, 1)  # [n A, F]
    return levels


def node_count(batch: int, num_actions: int, depth: int) -> int:
    """Number of latent states in a batch of trees: B * sum_{d=0}^{K} A^d."""
    return batch * sum(num_actions**d for d in range(depth + 1))


def level_offsets(batch: int, num_actions: int, depth: int) -> list[int]:
    """First row of every level in the flat layout, and the total:
    [off_0 = 0, .., off_{K+1} = N]."""
    offsets = [0]
    for d in range(depth + 1):
        offsets.append(offsets[-1] + batch * num_actions**d)
    return offsets


def execute_tree(
    processor: MessagePassing, levels: list[torch.Tensor], edges: torch.Tensor, steps: int
) -> torch.Tensor:
    """Run the executor `steps` times over the tree and read out the roots' chi [B, H]
    (paper section 3.2, step 4).

    levels[d] [B * A^d, H] are the nodes; edges [A, H] is the embedded edge feature of each
    action. Messages flow from child h' to parent h along edge (h, h', a), as value iteration
    backs values up from successors; leaves receive none (aggregate 0). chi = X(nodes), then
    chi = X(chi + nodes) for the remaining steps (the authors' code, dransyhe/CNAP), so every step sees the tree's
    node embeddings as well as the previous step's output. With steps = 0 there is no planning
    and chi is the root embedding itself.

    Each step computes only what the roots need. Information climbs one level per step, so
    step s's output is read on levels 0 .. steps - s only (the leaves' own update is never
    read when steps <= depth, and the last step updates only the roots); in the flat layout
    (module docstring) the parents of those levels and their children are two row ranges.
    """
    if steps == 0:
        return levels[0]
    batch, num_actions, hidden = levels[0].shape[0], *edges.shape
    depth = len(levels) - 1
    offsets = level_offsets(batch, num_actions, depth)
    nodes = torch.cat(levels)  # [N, H], the flat layout
    x = nodes  # the first step's input
    for step in range(1, steps + 1):
        top = min(steps - step, depth)  # this step's output is read on levels 0 .. top
        internal = min(top, depth - 1)  # the deepest of them with children (-1: none)
        parents = x[: offsets[internal + 1]]  # [P, H]
        children = x[batch : offsets[internal + 2]]  # [P * A, H], child a of p is row p * A + a
        messages = processor.message(  # [P, A, H]
            children.view(len(parents), num_actions, hidden), parents[:, None], edges
        )
        chi = processor.update(parents, processor.aggregate(messages))  # [P, H]
        if top == depth:  # more steps left than levels below: the leaves' update is read too
            leaves = x[offsets[depth] :]
            chi = torch.cat([chi, processor.update(leaves, torch.zeros_like(leaves))])
        x = chi + nodes[: len(chi)]  # the next step's input
    return chi[:batch]


def expand_pruned_tree(
    h: torch.Tensor, transition: TransitionModel, rollout_policy: nn.Module, depth: int,
    branching: int,
) -> tuple[list[torch.Tensor], list[torch.Tensor]]:
    """A pruned latent tree (ours, not the paper's: the paper names rollout-policy pruning as
    future work, section 3.2 "Discussion"): the roots expand all A actions, as in
    `expand_tree`; every deeper node expands only the `branching` actions to which
    `rollout_policy` (embeddings [N, k] -> logits [N, A]) gives the highest logits.

    Returns the levels [n_d, k] (n_0 = B, n_1 = B A, n_d = B A b^(d-1)) and the action of every
    node below the roots, actions[d - 1] [n_d] (long); the children of row i of level d are rows
    i c .. i c + c - 1 of level d + 1, with c = n_{d+1} / n_d. Which actions are expanded is a
    choice, not a differentiable function: gradients reach the chosen children only.
    """
    levels, actions = [h], []
    if depth >= 1:  # the roots: every action
        levels.append(transition.successors(h).flatten(0, 1))  # [B A, k]
        actions.append(torch.arange(transition.num_actions, device=h.device).repeat(h.shape[0]))
    for _ in range(depth - 1):
        parents = levels[-1]
        chosen = rollout_policy(parents.detach()).topk(branching, dim=-1).indices  # [n, b]
        chosen = chosen.flatten()  # [n b], child j of parent i is row i b + j
        levels.append(transition.next_embedding(parents.repeat_interleave(branching, 0), chosen))
        actions.append(chosen)
    return levels, actions


def execute_levels(
    processor: MessagePassing, levels: list[torch.Tensor], edges: list[torch.Tensor], steps: int
) -> torch.Tensor:
    """`execute_tree` for a tree whose branching may differ from level to level (the pruned
    tree), level by level: levels[d] [n_d, H] (children of row i of level d: rows
    i c_d .. i c_d + c_d - 1 of level d + 1, c_d = n_{d+1} / n_d), edges[d] [n_{d+1}, H] the
    embedded edge feature of every node of level d + 1 (that of the action leading to it).

    The same computation as `execute_tree` (paper section 3.2, step 4): messages from child to
    parent, chi = X(nodes), then chi = X(chi + nodes); step s updates levels 0 .. steps - s only.
    Returns the roots' chi [B, H].
    """
    if steps == 0:
        return levels[0]
    depth = len(levels) - 1
    x = levels
    for step in range(1, steps + 1):
        top = min(steps - step, depth)  # this step's output is read on levels 0 .. top
        chi = []
        for d in range(top + 1):
            parents = x[d]  # [n, H]
            if d == depth:  # leaves receive no message
                chi.append(processor.update(parents, torch.zeros_like(parents)))
                continue
            n, hidden = parents.shape
            children = x[d + 1].view(n, -1, hidden)  # [n, c, H]
            messages = processor.message(children, parents[:, None], edges[d].view(n, -1, hidden))
            chi.append(processor.update(parents, processor.aggregate(messages)))
        x = [c + node for c, node in zip(chi, levels)]  # the next step's input
    return chi[0]
