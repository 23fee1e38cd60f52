"""Breadth-first latent tree expansion and the executor run over it (paper section 3.2).

Level d of the tree is one tensor [B * A^d, k]. The children of row i of level d are rows
i * A .. i * A + A - 1 of level d + 1 (row index = b * A^d + (a_1 .. a_d read as a base-A number)),
so gathering a parent's children is a reshape, never a Python loop over nodes.
"""

import torch

from typing import Protocol

from xlvin.nn.executor import MessagePassing


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


def node_count(batch: int, num_actions: int, depth: int) -> int:
    """Number of latent states in a batch of trees: B * sum_{d=0}^{K} A^d."""
    return batch * sum(num_actions**d for d in range(depth + 1))


def executor_step(
    processor: MessagePassing, levels: list[torch.Tensor], edges: torch.Tensor
) -> list[torch.Tensor]:
    """One application of the processor X over the whole tree (paper eqs. 4-5).

    Messages flow from child h' to parent h along edge (h, h', a), as value iteration backs values
    up from successors. levels[d] [B * A^d, H]; edges [A, H] is the embedded edge feature of each
    action. Leaves have no incoming edge: their aggregate is 0.
    """
    num_actions = edges.shape[0]
    updated = []
    for d, x in enumerate(levels):
        if d + 1 < len(levels):
            children = levels[d + 1].view(x.shape[0], num_actions, -1)  # [N_d, A, H]
            receivers = x.unsqueeze(1).expand_as(children)
            messages = processor.message(children, receivers, edges.expand_as(children))
            aggregated = processor.aggregate_dense(messages)  # [N_d, H]
        else:
            aggregated = torch.zeros_like(x)
        updated.append(processor.update(x, aggregated))
    return updated


def execute_tree(
    processor: MessagePassing, levels: list[torch.Tensor], edges: torch.Tensor, steps: int
) -> torch.Tensor:
    """Run the executor `steps` times over the tree and read out the roots' chi [B, H].

    chi = X(nodes), then chi = X(chi + nodes) for the remaining steps (REFERENCE.md), so every
    step sees the tree's node embeddings as well as the previous step's output. With steps = 0
    there is no tree to plan over and chi is the root embedding itself.
    """
    if steps == 0:
        return levels[0]
    chi = executor_step(processor, levels, edges)
    for _ in range(steps - 1):
        chi = executor_step(processor, [c + x for c, x in zip(chi, levels)], edges)
    return chi[0]
