"""`VIExecutor`'s forward over a padded in-edge layout, with the linear maps composed: an
accelerator of `xlvin.nn.executor.VIExecutor.forward` for pre-training.

The readable forward encodes every node to H features, gathers them per edge, applies the
message's three H x H blocks per edge and max-pools at the receivers with `index_reduce`, whose
backward (and the per-edge gathers and scatters) costs most of a pre-training step. The same
function, rewritten exactly:

- The node and edge encoders are affine maps of two numbers ([V_t(s), R(s, a)] and [P, gamma]),
  so the message of eq. 3 for edge j -> i, W_s x_j + W_r x_i + W_e e_ji + b with x = W_node
  [V_t; R] + b_node and e = W_edge [P; gamma] + b_edge, is one [H, 10] matrix ([W, b] times
  the block-diagonal of the three encoders with their biases and 1, one product) on
  [V_t(j), R(j), 1, V_t(i), R(i), 1, P, gamma, 1, 1]. No H x H product runs per edge, and the
  message's product has no bias term (whose addition and gradient cost full passes).
- The node features' V_t term is the same for every action copy of a state, so without
  LayerNorm it is added after the max over actions (max_a (c + y_a) = c + max_a y_a): per call
  only R(s, a) W_node[:, 1] + b_node is laid out per action copy.
- Every node's in-edges sit in one row of a dense [N, D] layout (D the largest in-degree, padding
  masked), so the aggregate is a max (or sum) over a dense axis, whose backward is element-wise.
- With ReLU messages, a max aggregate (or at most one in-edge per node) and no LayerNorm, the per-action node features x join the
  message's product: max_d ReLU(m_d) + x = max(max_d (m_d + x), x), so h = max(max_{a, d}
  (m_{a,d} + x_a), max_a x_a) needs no ReLU and no addition over [A, K, S, H], and the max
  over actions takes max_a x_a as a floor (a node without in-edges, all padding, gets x_a).

Equal to the readable forward up to float rounding, gradients included
(tests/test_accel_executor.py); timings in benchmarks/notes.md. The rounding differs, so
pre-training on this path makes other weights bit-wise than on the readable one.
"""

from dataclasses import dataclass

import torch
from torch import Tensor
from torch.nn import functional as F

from xlvin.mdp.executor_graph import MDPGraph
from xlvin.nn.executor import VIExecutor


@dataclass(frozen=True)
class InEdges:
    """An `MDPGraph`'s edges laid out by receiver, action copies outermost: row (a, s) holds the
    in-edges of node s*A+a, padded to the largest in-degree D.

    sender_states [A, S, D]: the state of each in-edge's sender (0 at padding); inputs
    [A, S, D, 8]: [R of the sender, 1, R of the receiver, 1, P, gamma, 1, 1] per in-edge (0 at
    padding), the message's inputs but V_t (see `dense_forward`); node_inputs [A, 1, S, 2]:
    [R(s, a), 1]; mask [A, S, D]: real in-edges, None when no row is padded;
    has_edge [A, S, 1]: nodes with an in-edge, None when all have.
    """

    graph: MDPGraph
    sender_states: Tensor
    inputs: Tensor
    node_inputs: Tensor
    mask: Tensor | None
    has_edge: Tensor | None

    @classmethod
    def from_graph(cls, graph: MDPGraph) -> "InEdges":
        num_nodes, num_actions = graph.rewards.numel(), graph.num_actions
        order = torch.argsort(graph.receivers, stable=True)
        receivers, senders = graph.receivers[order], graph.senders[order]
        degree = torch.bincount(receivers, minlength=num_nodes)
        first = torch.cumsum(degree, 0) - degree
        slot = torch.arange(len(receivers)) - first[receivers]
        width = max(int(degree.max()), 1) if num_nodes else 1
        ones = torch.ones(len(receivers), 1)
        per_edge = torch.cat([graph.rewards[senders, None], ones, graph.rewards[receivers, None],
                              ones, graph.edge_features[order], ones, ones], dim=1)
        inputs = torch.zeros(num_nodes, width, per_edge.shape[1])
        inputs[receivers, slot] = per_edge
        sender_states = torch.zeros(num_nodes, width, dtype=torch.long)
        sender_states[receivers, slot] = senders // num_actions
        mask = torch.arange(width) < degree[:, None]

        def by_action(t: Tensor) -> Tensor:  # node s*A+a -> [a, s]
            return t.unflatten(0, (-1, num_actions)).transpose(0, 1).contiguous()

        return cls(graph, by_action(sender_states), by_action(inputs),
                   by_action(torch.stack([graph.rewards, torch.ones(num_nodes)], dim=1))[:, None],
                   None if bool(mask.all()) else by_action(mask),
                   None if bool((degree > 0).all()) else by_action(degree > 0)[..., None])


class _MaxSplittingTies(torch.autograd.Function):
    """The max over dim 0 of x and (when given) of a floor broadcast against x[0], with amax's
    gradient (split evenly between tied entries, the floor counting as one more entry), its tie
    masks written as floats: a comparison's bool output and its conversion cost several float
    passes on CPU."""

    @staticmethod
    def forward(ctx: torch.autograd.function.FunctionCtx, x: Tensor, floor: Tensor | None = None  # type: ignore[override]
                ) -> Tensor:
        top = x.amax(dim=0)
        if floor is not None:
            top = torch.maximum(top, floor)
        ties = torch.eq(x, top, out=torch.empty_like(x))  # 1.0 where x is the max, else 0.0
        count = ties.sum(dim=0)
        if floor is None:
            ctx.save_for_backward(ties, count)
            return top
        floor_ties = torch.eq(floor, top, out=torch.empty_like(top))
        ctx.save_for_backward(ties, count.add_(floor_ties), floor_ties)
        ctx.floor_shape = floor.shape  # type: ignore[attr-defined]
        return top

    @staticmethod
    def backward(ctx: torch.autograd.function.FunctionCtx, grad: Tensor  # type: ignore[override]
                 ) -> tuple[Tensor, Tensor | None]:
        ties, count, *floor_ties = ctx.saved_tensors  # type: ignore[attr-defined]
        share = grad / count
        if not floor_ties:
            return ties * share, None
        return ties * share, (floor_ties[0] * share).sum_to_size(ctx.floor_shape)  # type: ignore[attr-defined]


def dense_forward(executor: VIExecutor, edges: InEdges, values: Tensor) -> Tensor:
    """`executor(edges.graph, values)` computed over the in-edge layout: V_t [K, S] -> predicted
    V_{t+1} - V_t [K, S] (eqs. 3-4 with the encoders composed into the message, see above).
    Tensors are laid out [A, K, S, (D,) H] so that the max over actions is over the outer axis."""
    processor = executor.processor
    num_actions, k = edges.graph.num_actions, len(values)
    node = torch.cat([executor.node_encoder.weight, executor.node_encoder.bias[:, None]], dim=1)
    edge = torch.cat([executor.edge_encoder.weight, executor.edge_encoder.bias[:, None]], dim=1)
    # the message's weights on [V_t(sender), R(sender), 1, V_t(receiver), R(receiver), 1, P,
    # gamma, 1, 1]: W times the encoders, b times 1
    message_fn = torch.cat([processor.message_fn.weight, processor.message_fn.bias[:, None]], dim=1)
    weight = message_fn @ torch.block_diag(node, node, edge, torch.ones(1, 1))  # [H, 10]
    width = edges.inputs.shape[2]
    v_states = values.t()  # [S, K]
    v_send = v_states[edges.sender_states].permute(0, 3, 1, 2)  # [A, K, S, D]
    v_recv = values[..., None, None].expand(num_actions, -1, -1, width, 1)  # [A, K, S, D, 1]
    static = edges.inputs[:, None].expand(-1, k, -1, -1, -1)
    inputs = torch.cat([v_send[..., None], static[..., :2], v_recv, static[..., 2:]], dim=-1)
    # node features W_node [V_t; R] + b_node, split into the part per action copy [A, 1, S, H]
    # and V_t's [K, S, H]
    per_action = F.linear(edges.node_inputs, node[:, 1:])
    per_state = F.linear(values[..., None], node[:, :1])
    mask = None if edges.mask is None else edges.mask[:, None, :, :, None]
    if processor.norm is None and processor.messages == "relu" and (
            processor.aggregation == "max" or width == 1):
        # max_d ReLU(m_d) + x = max(max_d (m_d + x), x) (see above): the per-action node
        # features join the message's product (its R(receiver) and 1 columns)
        with_nodes = F.linear(inputs, weight + F.pad(node[:, 1:], (4, 4)))  # [A, K, S, D, H]
        if width == 1 and mask is None:
            with_nodes = with_nodes.squeeze(3)
        else:
            with_nodes = (with_nodes if mask is None else with_nodes.masked_fill(~mask, -torch.inf)
                          ).amax(dim=3)
        h = _MaxSplittingTies.apply(with_nodes, per_action.amax(dim=0)) + per_state
        return executor.decoder(h).squeeze(-1)
    messages = F.linear(inputs, weight)  # [A, K, S, D, H]
    if processor.messages == "relu":
        messages = torch.relu(messages)
    if processor.aggregation == "sum":
        aggregated = (messages if mask is None else messages * mask).sum(dim=3)
    elif width == 1:
        aggregated = messages.squeeze(3)
    else:
        aggregated = (messages if mask is None else messages.masked_fill(~mask, -torch.inf)
                      ).amax(dim=3)
    if edges.has_edge is not None:
        aggregated = torch.where(edges.has_edge[:, None], aggregated, 0.0)
    if processor.norm is not None:
        h = _MaxSplittingTies.apply(processor.update(per_action + per_state, aggregated))
    else:
        h = _MaxSplittingTies.apply(processor.update(per_action, aggregated)) + per_state
    return executor.decoder(h).squeeze(-1)
