"""Breadth-first latent tree expansion and the executor run over it (paper section 3.2).

Level d of the tree is one tensor [B * A^d, k]. The children of row i of level d are rows
i * A .. i * A + A - 1 of level d + 1 (row index = b * A^d + (a_1 .. a_d read as a base-A number)),
so gathering a parent's children is a reshape, never a Python loop over nodes.

Flat layout. Concatenating the levels (`torch.cat(levels)`, level-major) gives one [N, k] tensor
in which level d starts at row off_d = B (A^d - 1) / (A - 1) and the children of *any* internal
row p are rows B + p * A .. B + p * A + A - 1 (because off_{d+1} = A off_d + B). So the children of
all internal nodes of the first L levels are one contiguous block, rows B .. off_{L+1} - 1, and one
executor step over the whole tree is a handful of tensor ops whatever the depth (`execute_tree`).
"""

from typing import Protocol

import torch
from torch import nn

from xlvin.nn.executor import MessagePassing
from xlvin.nn.functional import (
    Array,
    affine,
    cat,
    linear,
    parameter,
    per_block,
    relu_,
    transposed,
    zeros_like,
)
from xlvin.nn.transition import TransitionModel


class LatentModel(Protocol):
    """Anything that maps embeddings [N, k] to the embeddings of all their successors [N, A, k]."""

    def successors(self, h: Array) -> Array: ...


def expand_tree(h: Array, model: LatentModel, depth: int) -> list[Array]:
    """Grow the latent tree from the roots h [B, k] over all actions to `depth` (paper 3.2, step 3).

    Returns levels S^0 .. S^depth, level d of shape [B * A^d, k]; child of row i via action a is
    row i * A + a of the next level; for XLVIN's transition it is parent_i + T(parent_i, a).
    """
    levels = [h]
    for _ in range(depth):
        levels.append(model.successors(levels[-1]).reshape(-1, h.shape[-1]))  # [N * A, k]
    return levels


def expand_projected_tree(
    h: Array, transition: TransitionModel, projection: nn.Linear, depth: int
) -> list[Array]:
    """`[projection(level) for level in expand_tree(h, transition, depth)]`, computed without the
    k-dimensional embeddings of any node below the roots (equal in exact arithmetic).

    Both the transition's first layer (on the state) and `projection` are affine in the node
    embedding, and a child differs from its parent by the translation T = W3 r + b3, with r the
    transition's last hidden layer. So with s(h) = W1_s h + b1 (the first layer's state part,
    [F]) and p(h) = P h + b_P ([H]):

        s(h + T) = s(h) + (W1_s W3) r + W1_s b3,    p(h + T) = p(h) + (P W3) r + P b3,

    and each level costs one [F + H, F] product per node instead of the F x k output layer, the
    k x F first layer and the k x H projection: ~8x fewer multiply-adds for a 512-wide pixel
    embedding (k = 512, F = 64, H = 50). Returns levels [B * A^d, H] in the `expand_tree` layout.
    """
    if depth == 0:
        return [linear(h, projection)]
    k = transition.embedding_dim
    first_t = transposed(transition.first.weight, like=h)  # [k + A, F]
    state_t, action_part = first_t[:k], first_t[k:]  # [k, F], [A, F]
    out_layer = transition.rest[-1]

    def readout() -> tuple[Array, Array, Array]:
        # [k, F + H]: the state part and the projection, both applied to a change of embedding
        readout_t = cat([state_t, transposed(projection.weight, like=h)], dim=1)
        # [F, F + H] = (W3^T)(W1_s^T | P^T) and [F + H]
        delta_t = transposed(out_layer.weight, like=h) @ readout_t
        return readout_t, delta_t, parameter(out_layer.bias, h) @ readout_t

    key = (id(projection), id(transition), "readout", type(h))
    readout_t, delta_t, delta_b = per_block(projection, key, readout)  # weights only
    width, hidden = state_t.shape[1], projection.weight.shape[0]
    state = affine(h, state_t, transition.first.bias)  # [B, F]
    levels = [affine(h, readout_t[:, width:], projection.bias)]  # [B, H]
    num_actions = action_part.shape[0]
    for d in range(depth):
        r = transition.hidden(state[:, None] + action_part)  # [N A, F]
        last = d == depth - 1
        cols = slice(width, None) if last else slice(None)  # leaves need no state part
        delta = affine(r, delta_t[:, cols], delta_b[cols]).reshape(state.shape[0], num_actions, -1)
        levels.append((levels[-1][:, None] + delta[..., -hidden:]).reshape(-1, hidden))
        if not last:
            state = (state[:, None] + delta[..., :width]).reshape(-1, width)
    return levels


def node_count(batch: int, num_actions: int, depth: int) -> int:
    """Number of latent states in a batch of trees: B * sum_{d=0}^{K} A^d."""
    return batch * sum(num_actions**d for d in range(depth + 1))


def level_offsets(batch: int, num_actions: int, depth: int) -> list[int]:
    """First row of every level in the flat layout, plus the total: [off_0 = 0, .., off_{K+1} = N]."""
    offsets = [0]
    for d in range(depth + 1):
        offsets.append(offsets[-1] + batch * num_actions**d)
    return offsets


def executor_step(
    processor: MessagePassing, levels: list[torch.Tensor], edges: torch.Tensor
) -> list[torch.Tensor]:
    """One application of the processor X over the whole tree (paper eqs. 4-5), level by level.

    Messages flow from child h' to parent h along edge (h, h', a), as value iteration backs values
    up from successors. levels[d] [B * A^d, H]; edges [A, H] is the embedded edge feature of each
    action. Leaves have no incoming edge: their aggregate is 0.

    The readable reference of the step; `execute_tree` computes the same roots with the fused,
    pruned kernel (tests/test_agent.py checks both against the generic processor).
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


def execute_tree_reference(
    processor: MessagePassing, levels: list[torch.Tensor], edges: torch.Tensor, steps: int
) -> torch.Tensor:
    """`execute_tree` written level by level over the whole tree at every step (for tests)."""
    if steps == 0:
        return levels[0]
    chi = executor_step(processor, levels, edges)
    for _ in range(steps - 1):
        chi = executor_step(processor, [c + x for c, x in zip(chi, levels)], edges)
    return chi[0]


def execute_tree(
    processor: MessagePassing, levels: list[Array], edges: Array, steps: int
) -> Array:
    """Run the executor `steps` times over the tree and read out the roots' chi [B, H].

    chi = X(nodes), then chi = X(chi + nodes) for the remaining steps (REFERENCE.md), so every
    step sees the tree's node embeddings as well as the previous step's output. With steps = 0
    there is no tree to plan over and chi is the root embedding itself.

    The kernel computes exactly what the roots need, in a few tensor ops per step:

    - pruning: information climbs one level per step, so step s's output is read only on levels
      0 .. steps - s (the leaves' own update is never read when steps <= depth, and the last step
      only updates the roots);
    - the message Linear(3H -> H) on [h_child, h_parent, e_a] is split into its three blocks:
      h_child W_s^T once per child, h_parent W_r^T once per parent (not A times) and e_a W_e^T + b
      once per action: 3x fewer multiply-adds than the Linear on the concatenation;
    - the flat layout (module docstring): the children of every updated node are one contiguous
      block, so each step is one matmul per block and a few element-wise ops on the whole pruned
      tree, whatever its depth (no Python loop over levels or nodes). The first, largest step
      reads its parents and children as two concatenations of the levels (their backward is a
      free split), the later, smaller ones as slices of the previous step's output.

    Equal to `execute_tree_reference` up to float rounding (the blocked matmul sums in another
    order than the Linear on the concatenated input).
    """
    if steps == 0:
        return levels[0]
    batch = levels[0].shape[0]
    num_actions, hidden = edges.shape
    depth = len(levels) - 1
    if depth == 0:  # a tree without edges: every step is the update with aggregate 0
        chi = processor.update(levels[0], zeros_like(levels[0]))
        for _ in range(steps - 1):
            chi = processor.update(chi + levels[0], zeros_like(levels[0]))
        return chi
    offsets = level_offsets(batch, num_actions, depth)
    # W^T of the message Linear(3H -> H), [3H, H]: its row blocks act on sender, receiver, edge.
    message_t = transposed(processor.message_fn.weight, like=edges)
    sender_t, receiver_t, edge_t = (message_t[i * hidden : (i + 1) * hidden] for i in range(3))
    edge_part = per_block(  # [A, H], weights only
        edges, (id(edges), id(processor), "edge part"),
        lambda: affine(edges, edge_t, processor.message_fn.bias),
    )
    chi: Array | None = None
    for s in range(1, steps + 1):
        # Step s's output is read (by later steps or as the result) on levels 0 .. top only;
        # computing it needs the step's input on levels 0 .. top + 1.
        top = min(steps - s, depth)
        internal = min(top, depth - 1)  # deepest level that receives messages
        read = min(top + 1, depth)  # deepest level read
        if chi is None:  # first step: the input is the tree itself
            parents = cat(levels[: internal + 1])
            children = cat(levels[1 : internal + 2])
            rest = cat(levels[internal + 1 : read + 1]) if top == depth else None
        else:
            x = chi + cat(levels[: read + 1])  # chi holds levels 0 .. read of the last step
            parents, children = x[: offsets[internal + 1]], x[batch : offsets[internal + 2]]
            rest = x[offsets[depth] :] if top == depth else None
        chi = _step(processor, parents, children, num_actions, sender_t, receiver_t, edge_part)
        if rest is not None:  # more steps than levels: the leaves' update (aggregate 0) is read
            chi = cat([chi, processor.update(rest, zeros_like(rest))])
    assert chi is not None
    return chi[:batch]


def _step(
    processor: MessagePassing,
    parents: Array,
    children: Array,
    num_actions: int,
    sender_t: Array,
    receiver_t: Array,
    edge_part: Array,
) -> Array:
    """One processor step: parents [P, H] receive from their children [P * A, H] (child a of
    parent p is row p * A + a); returns the parents' update [P, H]."""
    rows, hidden = parents.shape
    # In place on the fresh matmul output (autograd keeps only the matmul's inputs and the ReLU's
    # output), so the largest tensor of the step is allocated once. The matmul takes the children
    # as [P, A, H] so that its output is no view: in-place ops on a view would make autograd
    # rebuild the whole base gradient in the backward (CopySlices, ~0.1 ms per op on small trees).
    messages = children.reshape(rows, num_actions, hidden) @ sender_t
    messages += (parents @ receiver_t)[:, None]
    messages += edge_part  # actions (and the bias)
    relu_(messages)
    return processor.update(parents, processor.aggregate_dense(messages))


def retain_freed_memory() -> bool:
    """Process-wide (glibc only): serve large tensors from the malloc heap and keep freed memory
    there instead of returning it to the OS. Returns whether the setting was applied. Every
    `xlvin` command calls it; a library user opts in by calling it.

    glibc hands every allocation above 32 MiB to mmap and unmaps it on free, so every forward of a
    big tree re-faults its activations page by page (the kernel zeroes each page). On the (8, 4)
    maze tree with batch 256 this was half of the forward time (4.35 s -> 2.19 s with it) and a
    third of forward + backward. The price: the process keeps its peak memory mapped. It is what
    MALLOC_MMAP_MAX_=0 MALLOC_TRIM_THRESHOLD_=<large> do when set before the process starts.
    """
    import ctypes
    import sys

    if not sys.platform.startswith("linux"):
        return False
    try:
        libc = ctypes.CDLL("libc.so.6")
        m_trim_threshold, m_mmap_max = -1, -4
        # mallopt's int -1 is size_t's max as a trim threshold: never trim
        return bool(libc.mallopt(m_mmap_max, 0)) and bool(libc.mallopt(m_trim_threshold, -1))
    except (OSError, AttributeError):
        return False
