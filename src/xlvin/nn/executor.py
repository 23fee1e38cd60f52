"""The message-passing executor X (paper section 3.1, "Executor"; Deac et al. 2020).

`MessagePassing` is one step of the paper's eqs. (3)-(4):

    m_i = aggregate_{j -> i} M(h_j, h_i, e_ji),    h_i <- U(h_i, m_i) = h_i + m_i (+ LayerNorm),

with M = ReLU(Linear(3H -> H)) on [h_j, h_i, e_ji] and the aggregate a sum or a max (0 for a node
without in-edge). `VIExecutor` wraps it for pre-training on value iteration: it predicts the
change V_{t+1} - V_t of one Bellman backup (eq. 1) from V_t, R, P and gamma. The XLVIN agent
reuses only `VIExecutor.processor`, frozen, over its latent tree (`xlvin.nn.tree.execute_tree`).
"""

import warnings

import torch
from torch import Tensor, nn
from torch.nn import functional as F

from xlvin.errors import UserError
from xlvin.mdp.executor_graph import MDPGraph
from xlvin.nn.names import AGGREGATIONS, MESSAGES


class MessagePassing(nn.Module):
    """The processor X: one message-passing step over a directed graph (eqs. 3-4).

    The message function is Linear(3H -> H), then ReLU (`messages="relu"`, our default) or
    nothing (`"linear"`, as the authors' public code runs it). Without the ReLU the message is
    affine (a sum aggregate could then only form affine mixtures, never P(s'|s, a) V(s')), and it
    also trains worse: on random deterministic (20, 8) MDPs, 3000 Adam steps reached 90.2 % policy
    accuracy without the ReLU against 96.8 % with it.
    """

    def __init__(
        self, hidden: int, aggregation: str = "max", layer_norm: bool = False,
        messages: str = "relu",
    ) -> None:
        super().__init__()
        if aggregation not in AGGREGATIONS:
            raise UserError(
                f"aggregation must be one of {', '.join(AGGREGATIONS)}, got {aggregation!r}"
            )
        if messages not in MESSAGES:
            raise UserError(f"messages must be one of {', '.join(MESSAGES)}, got {messages!r}")
        self.hidden = hidden
        self.aggregation = aggregation
        self.messages = messages
        self.message_fn = nn.Linear(3 * hidden, hidden)
        self.norm = nn.LayerNorm(hidden) if layer_norm else None

    @property
    def layer_norm(self) -> bool:
        return self.norm is not None

    def message(self, sender: Tensor, receiver: Tensor, edge: Tensor) -> Tensor:
        """M(h_j, h_i, e_ji) = ReLU(W [h_j; h_i; e_ji] + b) (eq. 3; without the ReLU for linear
        messages): [..., H] x3 -> [..., H].

        W's three column blocks are applied to their inputs apart and summed (the same affine
        map as the Linear on the concatenation), so the inputs may broadcast against each
        other: the tree passes children [P, A, H], parents [P, 1, H] and edges [A, H], and each
        block runs once per distinct input.
        """
        w_sender, w_receiver, w_edge = self.message_fn.weight.split(self.hidden, dim=1)
        message = (
            F.linear(sender, w_sender)
            + F.linear(receiver, w_receiver)
            + F.linear(edge, w_edge, self.message_fn.bias)
        )
        return torch.relu(message) if self.messages == "relu" else message

    def aggregate(self, messages: Tensor) -> Tensor:
        """The aggregate of eq. 3 for messages laid out densely, one row of senders per
        receiver: [P, A, H] -> [P, H] (the latent tree, where every parent receives from exactly
        its A children). The max sends each gradient to its argmax."""
        if self.aggregation == "sum":
            return messages.sum(dim=1)
        return messages.max(dim=1).values

    def update(self, x: Tensor, aggregated: Tensor) -> Tensor:
        """U(h_i, m_i) = h_i + m_i, then LayerNorm if enabled (eq. 4): [N, H] x2 -> [N, H]."""
        out = x + aggregated
        return self.norm(out) if self.norm is not None else out

    def forward(self, x: Tensor, senders: Tensor, receivers: Tensor, edge: Tensor) -> Tensor:
        """One step on nodes x [N, H] (or [K, N, H]: K feature sets on one graph) with edges
        senders[e] -> receivers[e] (LongTensor [E]) and edge features edge [E, H]: the message
        of every edge, summed or max-pooled (0 where no edge arrives) at its receiver, then the
        update."""
        messages = self.message(  # [(K,) E, H]
            x.index_select(-2, senders), x.index_select(-2, receivers), edge
        )
        aggregated = torch.zeros_like(x)
        if self.aggregation == "sum":
            aggregated = aggregated.index_add(-2, receivers, messages)
        else:
            with warnings.catch_warnings():  # index_reduce works (with autograd) but warns "beta"
                warnings.filterwarnings("ignore", message=r"index_reduce\(\) is in beta")
                aggregated = aggregated.index_reduce(
                    -2, receivers, messages, "amax", include_self=False
                )
        return self.update(x, aggregated)


class VIExecutor(nn.Module):
    """Pre-training wrapper around the processor: one predicted Bellman backup per call.

    node encoder Linear(2 -> H) on [V_t(s), R(s, a)] for every (state, action) copy; edge
    encoder Linear(2 -> H) on [P(s'|s, a), gamma]; one processor step with messages from (s', a)
    to (s, a); max over the action copies of each state (the max of eq. 1); decoder
    Linear(H -> 1) predicting V_{t+1}(s) - V_t(s).
    """

    def __init__(
        self, hidden: int, aggregation: str = "max", layer_norm: bool = False,
        messages: str = "relu",
    ) -> None:
        super().__init__()
        self.node_encoder = nn.Linear(2, hidden)
        self.edge_encoder = nn.Linear(2, hidden)
        self.processor = MessagePassing(hidden, aggregation, layer_norm, messages)
        self.decoder = nn.Linear(hidden, 1)

    @property
    def hidden(self) -> int:
        return self.processor.hidden

    def encode(self, values: Tensor, rewards: Tensor, num_actions: int) -> Tensor:
        """Node features x [K, N, H] from V_t [K, S] and R [N] (node s*A+a gets [V_t(s), R(s, a)])."""
        v_nodes = values.repeat_interleave(num_actions, dim=1)
        return self.node_encoder(torch.stack([v_nodes, rewards.expand(len(values), -1)], dim=-1))

    def decode(self, h: Tensor, num_actions: int) -> Tensor:
        """V_{t+1} - V_t [K, S] from processed node features h [K, S*A, H]: the max over each
        state's action copies, then the decoder."""
        per_state = h.unflatten(1, (-1, num_actions)).amax(dim=2)
        return self.decoder(per_state).squeeze(-1)

    def forward(self, graph: MDPGraph, values: Tensor) -> Tensor:
        """Predicted V_{t+1} - V_t for value vectors V_t of shape [K, S_total] (K value vectors
        on the same graph, e.g. several VI steps at once) -> [K, S_total].
        """
        x = self.encode(values, graph.rewards, graph.num_actions)
        edge = self.edge_encoder(graph.edge_features)
        h = self.processor(x, graph.senders, graph.receivers, edge)
        return self.decode(h, graph.num_actions)
