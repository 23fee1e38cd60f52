"""One pre-training step of the VI executor (forward, MSE loss, backward and Adam) written by
hand in NumPy: an accelerator of `VIExecutor.forward` with torch autograd and torch.optim.Adam
for the common case of `xlvin.accel.dense_executor`'s folded message (ReLU messages, no
LayerNorm, one in-edge per node, e.g. random deterministic MDPs).

At XLVIN-R's sizes a step is a few dozen small ops, where torch's per-op and autograd overhead
(10-40 us each) outweighs the arithmetic; NumPy's is a few microseconds. The function is
`dense_forward`'s (eqs. 3-4 with the encoders composed into one [H, 10] message matrix W'):

    m_a = W' z_a                    z_a = [V_t(j), R(j), 1, V_t(i), R(i), 1, P, gamma, 1, 1]
    top = max(max_a m_a, max_a x_a) x_a = W_node[:, 1] R(s, a) + b_node (the floor)
    h = top + W_node[:, 0] V_t(s)
    out = w_dec h + b_dec,  loss = mean (out - target)^2

and its backward follows amax's: the gradient at a max is split evenly between tied entries
(the floor counting as one more entry, itself a max over actions). Equal to torch autograd on
the readable path up to float rounding (tests/test_numpy_executor.py); timings in
benchmarks/notes.md.
"""

import math
from dataclasses import dataclass

import numpy as np
import torch

from xlvin.accel.dense_executor import InEdges
from xlvin.nn.executor import VIExecutor

F32 = np.float32


def applies(executor: VIExecutor, edges: list[InEdges]) -> bool:
    """Whether the hand-written step computes this executor on these graphs: ReLU messages, no
    LayerNorm, every node with exactly one in-edge (then max and sum aggregates agree)."""
    processor = executor.processor
    return (processor.norm is None and processor.messages == "relu"
            and all(e.inputs.shape[2] == 1 and e.mask is None and e.has_edge is None
                    for e in edges))


@dataclass(frozen=True)
class NumpyEdges:
    """`InEdges` of one-in-edge graphs as arrays, laid out [A, S]: sender [A, S] (the state of
    each node's sender), inputs [A, 1, S, 10] (the message's inputs, V_t's columns 0 and 3 left
    at 0), rewards [A, S, 1]."""

    sender: np.ndarray
    inputs: np.ndarray
    rewards: np.ndarray

    @classmethod
    def from_in_edges(cls, edges: InEdges) -> "NumpyEdges":
        static = edges.inputs[:, :, 0].numpy()  # [A, S, 8]
        inputs = np.zeros((*static.shape[:2], 10), F32)
        inputs[..., [1, 2, 4, 5, 6, 7, 8, 9]] = static
        return cls(edges.sender_states[:, :, 0].numpy(), inputs[:, None],
                   edges.node_inputs[:, 0, :, :1].numpy())


class NumpyExecutorTrainer:
    """The executor's weights in one flat float32 buffer, trained by hand-written steps with
    Adam (torch.optim.Adam's update, no weight decay) at the learning rate each step is given."""

    def __init__(self, executor: VIExecutor, betas: tuple[float, float] = (0.9, 0.999),
                 eps: float = 1e-8) -> None:
        self.params = list(executor.parameters())
        self.flat = np.concatenate([p.detach().numpy().ravel() for p in self.params]).astype(F32)
        self.grad = np.zeros_like(self.flat)
        self.exp_avg, self.exp_avg_sq = np.zeros_like(self.flat), np.zeros_like(self.flat)
        self.scratch = np.zeros_like(self.flat)
        self.steps = 0
        self.betas, self.eps = betas, eps
        offset, self.views, self.grad_views = 0, [], []
        for p in self.params:  # node W, b; edge W, b; message W, b; decoder W, b
            n = p.numel()
            self.views.append(self.flat[offset : offset + n].reshape(p.shape))
            self.grad_views.append(self.grad[offset : offset + n].reshape(p.shape))
            offset += n

    def loss_and_grad(self, edges: NumpyEdges, values: np.ndarray, target: np.ndarray) -> float:
        """The MSE of the predicted V_{t+1} - V_t [K, S] against `target`; its gradient with
        respect to every weight is written into `self.grad`."""
        wn, bn, we, be, wm, bm, wd, bd = self.views
        gwn, gbn, gwe, gbe, gwm, gbm, gwd, gbd = self.grad_views
        hidden = len(bn)
        num_actions, num_states = edges.sender.shape
        k = len(values)
        node = np.concatenate([wn, bn[:, None]], axis=1)  # [H, 3]: on [V_t, R, 1]
        edge = np.concatenate([we, be[:, None]], axis=1)
        w_send, w_recv, w_edge = wm[:, :hidden], wm[:, hidden : 2 * hidden], wm[:, 2 * hidden :]
        weight = np.empty((hidden, 10), F32)
        weight[:, 0:3] = w_send @ node
        weight[:, 3:6] = w_recv @ node
        weight[:, 6:9] = w_edge @ edge
        weight[:, 9] = bm
        weight[:, 4:6] += node[:, 1:]  # the per-action node features folded into the message
        z = np.repeat(edges.inputs, k, axis=1)  # [A, K, S, 10]
        z[..., 0] = values[:, edges.sender].transpose(1, 0, 2)
        z[..., 3] = values
        z2 = z.reshape(-1, 10)
        m = (z2 @ weight.T).reshape(num_actions, k, num_states, hidden)
        per_action = edges.rewards * wn[:, 1] + bn  # [A, S, H]
        floor = per_action.max(axis=0)
        top = np.maximum(m.max(axis=0), floor)  # [K, S, H]
        h = top + values[..., None] * wn[:, 0]
        diff = h @ wd[0] + (bd[0] - target)
        loss = float(np.dot(diff.ravel(), diff.ravel())) / diff.size
        g_out = diff * F32(2 / diff.size)  # [K, S]
        gwd[0] = g_out.ravel() @ h.reshape(-1, hidden)
        gbd[0] = g_out.sum()
        g_h = g_out[..., None] * wd[0]  # [K, S, H]
        ties = m == top
        floor_ties = floor == top
        count = ties.sum(axis=0, dtype=F32)
        count += floor_ties
        share = g_h / count
        g_m = ties * share
        g_floor = (floor_ties * share).sum(axis=0)  # [S, H]
        g_weight = g_m.reshape(-1, hidden).T @ z2  # [H, 10]
        action_ties = per_action == floor
        g_per_action = action_ties * (g_floor / action_ties.sum(axis=0, dtype=F32))
        g_node = w_send.T @ g_weight[:, 0:3] + w_recv.T @ g_weight[:, 3:6]
        g_node[:, 1:] += g_weight[:, 4:6]
        g_node[:, 0] += values.ravel() @ g_h.reshape(-1, hidden)
        g_node[:, 1] += edges.rewards.ravel() @ g_per_action.reshape(-1, hidden)
        g_node[:, 2] += g_per_action.sum(axis=(0, 1))
        gwn[:] = g_node[:, :2]
        gbn[:] = g_node[:, 2]
        g_edge = w_edge.T @ g_weight[:, 6:9]
        gwe[:] = g_edge[:, :2]
        gbe[:] = g_edge[:, 2]
        gwm[:, :hidden] = g_weight[:, 0:3] @ node.T
        gwm[:, hidden : 2 * hidden] = g_weight[:, 3:6] @ node.T
        gwm[:, 2 * hidden :] = g_weight[:, 6:9] @ edge.T
        gbm[:] = g_weight[:, 9]
        return loss

    def adam_step(self, lr: float) -> None:
        """torch.optim.Adam's update of the flat buffer by `self.grad` at learning rate `lr`."""
        self.steps += 1
        beta1, beta2 = self.betas
        g, scratch = self.grad, self.scratch
        self.exp_avg *= beta1
        self.exp_avg += F32(1 - beta1) * g
        self.exp_avg_sq *= beta2
        np.multiply(g, g, out=scratch)
        scratch *= F32(1 - beta2)
        self.exp_avg_sq += scratch
        np.sqrt(self.exp_avg_sq, out=scratch)
        scratch *= F32(1 / math.sqrt(1 - beta2 ** self.steps))
        scratch += F32(self.eps)
        np.divide(self.exp_avg, scratch, out=scratch)
        scratch *= F32(lr / (1 - beta1 ** self.steps))
        self.flat -= scratch

    def step(self, edges: NumpyEdges, values: np.ndarray, target: np.ndarray, lr: float
             ) -> float:
        """One training step on a block: the loss (before the update), then Adam at `lr`."""
        loss = self.loss_and_grad(edges, values, target)
        self.adam_step(lr)
        return loss

    def write_back(self) -> None:
        """Copy the trained weights into the executor's parameters."""
        for p, view in zip(self.params, self.views):
            p.data.copy_(torch.from_numpy(view))

