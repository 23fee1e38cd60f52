"""A NumPy snapshot of a policy for acting on CPU: an accelerator of `policy(obs)` under no_grad.

Collection and evaluation call the policy on a few observations at a time, where every torch
op's fixed dispatch cost outweighs its arithmetic. `make_actor(policy)` copies the weights once
(per rollout) into NumPy arrays, W^T contiguous, and returns a function that computes the same
logits and values in NumPy, op for op the structure of the torch modules (encoder MLP,
successors, executor steps over the tree, heads). Equal to the policy's forward up to float
rounding (tests/test_accel_actor.py); timings in benchmarks/notes.md.

Supported: `PPOAgent` and `XLVINAgent` with an `MLPEncoder` (for `PPOAgent` also behind a
`RunningNorm`, with Tanh activations, a separate critic encoder and a Gaussian head's log std,
gSDE's too), float32 weights (float64 normalisation
statistics) on the CPU (XLVIN at
any depth, either aggregation, ReLU or linear messages, with or without LayerNorm or the node
and chi projections, over every action or joint action; the full tree only, not `prune`, a
sampled `expansion` nor the `zero_chi` ablation). `make_actor`
returns None for any other policy; the caller then uses the policy itself.
"""

from typing import Protocol

import numpy as np
import torch
from torch import nn

from xlvin.nn.agent import XLVINAgent
from xlvin.nn.planners import FullTree
from xlvin.nn.baselines.ppo import PPOAgent
from xlvin.nn.encoders import MLPEncoder
from xlvin.nn.executor import MessagePassing
from xlvin.nn.heads import SDE_EPS
from xlvin.nn.normalization import RunningNorm
from xlvin.nn.transition import TransitionModel


class Actor(Protocol):
    """observations [B, *obs_shape] -> (logits [B, A] float32, values [B] float32)."""

    def __call__(self, obs: np.ndarray) -> tuple[np.ndarray, np.ndarray]: ...


@torch.no_grad()
def make_actor(policy: nn.Module) -> Actor | None:
    """A NumPy snapshot of `policy` (its weights copied now: later changes to the policy are not
    seen), or None where the policy is not supported (see the module docstring)."""
    norms = [m for m in policy.modules() if isinstance(m, RunningNorm)]
    stats = {id(t) for m in norms for t in m.buffers()}
    tensors = [*policy.parameters(), *(t for t in policy.buffers() if id(t) not in stats)]
    if any(t.device.type != "cpu" or t.dtype != torch.float32 for t in tensors) or any(
            t.device.type != "cpu" for m in norms for t in m.buffers()):
        return None
    if type(policy) is PPOAgent and _mlp(policy.encoder) and (
            policy.critic_encoder is None or _mlp(policy.critic_encoder)):
        return PPOActor(policy)
    if (type(policy) is XLVINAgent and type(policy.encoder) is MLPEncoder
            and type(policy.planner) is FullTree and not policy.zero_chi):  # a planner of
        # one's own (pruned, sampled, a user's) acts in torch: this copy plans the full tree
        return XLVINActor(policy)
    return None


def _mlp(encoder: nn.Module) -> bool:
    """Whether `encoder` is an MLPEncoder, or one behind a RunningNorm (what `Encoder` reads)."""
    return type(encoder) is MLPEncoder or (
        type(encoder) is nn.Sequential and len(encoder) == 2
        and type(encoder[0]) is RunningNorm and type(encoder[1]) is MLPEncoder)


def _copy(tensor: torch.Tensor) -> np.ndarray:
    return tensor.detach().numpy().copy()


class Linear:
    """nn.Linear: x [N, in] -> x W^T + b [N, out], with a contiguous copy of W^T."""

    def __init__(self, layer: nn.Linear) -> None:
        self.weight_t = layer.weight.detach().numpy().T.copy()  # [in, out], C-contiguous
        self.bias = None if layer.bias is None else _copy(layer.bias)

    def __call__(self, x: np.ndarray) -> np.ndarray:
        out = x @ self.weight_t
        if self.bias is not None:
            out += self.bias
        return out


class LayerNorm:
    """nn.LayerNorm over the last dimension: (x - mean) / sqrt(var + eps) * w + b (biased var)."""

    def __init__(self, norm: nn.LayerNorm) -> None:
        self.eps = norm.eps
        self.weight = None if norm.weight is None else _copy(norm.weight)
        self.bias = None if norm.bias is None else _copy(norm.bias)

    def __call__(self, x: np.ndarray) -> np.ndarray:
        x = x - x.mean(axis=-1, keepdims=True)
        x /= np.sqrt((x * x).mean(axis=-1, keepdims=True) + self.eps)
        if self.weight is not None:
            x *= self.weight
        if self.bias is not None:
            x += self.bias
        return x


def relu_(x: np.ndarray) -> np.ndarray:
    """ReLU in place (on a fresh array nothing else reads)."""
    return np.maximum(x, 0, out=x)


class Norm:
    """RunningNorm with its statistics frozen: clip((x - mean) / sqrt(var + eps)), in float64."""

    def __init__(self, norm: RunningNorm) -> None:
        self.mean, self.scale = _copy(norm.mean), _copy(norm.scale())
        self.clip = norm.clip

    def __call__(self, obs: np.ndarray) -> np.ndarray:
        z = (obs.astype(np.float64) - self.mean) * self.scale
        return np.clip(z, -self.clip, self.clip).astype(np.float32)


class Encoder:
    """MLPEncoder: obs [B, ...] -> h_s [B, k] (Linear, ReLU or Tanh, Linear, ReLU or Tanh,
    Linear), or Sequential(RunningNorm, MLPEncoder): the same after the normalisation."""

    def __init__(self, encoder: MLPEncoder | nn.Sequential) -> None:
        self.norm = None
        if isinstance(encoder, nn.Sequential):
            self.norm, encoder = Norm(encoder[0]), encoder[1]
        first, act, second, _, third = encoder.net
        self.layers = Linear(first), Linear(second), Linear(third)
        self.act = np.tanh if isinstance(act, nn.Tanh) else relu_

    def __call__(self, obs: np.ndarray) -> np.ndarray:
        first, second, third = self.layers
        if self.norm is not None:
            obs = self.norm(obs)
        x = obs.reshape(obs.shape[0], -1).astype(np.float32, copy=False)
        return third(self.act(second(self.act(first(x)))))


class Transition:
    """TransitionModel.successors: h [N, k] -> h + T(h, a) for every action, [N, A, k]."""

    def __init__(self, transition: TransitionModel) -> None:
        with torch.no_grad():
            w_state, w_action = transition.action_weights()  # [F, k], [A, F]
        self.state_t, self.action = w_state.numpy().T.copy(), w_action.numpy().copy()
        self.bias = _copy(transition.first.bias)
        _, second, norm, _, third = transition.rest
        self.second, self.norm, self.third = Linear(second), LayerNorm(norm), Linear(third)

    def __call__(self, h: np.ndarray) -> np.ndarray:
        n, k = h.shape
        state = h @ self.state_t
        state += self.bias
        x = relu_((state[:, None] + self.action).reshape(n * len(self.action), -1))  # [N A, F]
        x = relu_(self.norm(self.second(x)))
        return h[:, None] + self.third(x).reshape(n, -1, k)


class Processor:
    """MessagePassing on the tree: children [P, A, H] send to their parents [P, H] along the
    embedded edges of their actions (message, aggregate and update of eqs. 3-4)."""

    def __init__(self, processor: MessagePassing, edges: np.ndarray) -> None:
        hidden = processor.hidden
        message_t = processor.message_fn.weight.detach().numpy().T  # [3H, H]
        self.sender_t = message_t[:hidden].copy()
        self.receiver_t = message_t[hidden : 2 * hidden].copy()
        # the edge block with the bias, once per action: [A, H]
        self.edge_part = edges @ message_t[2 * hidden :] + _copy(processor.message_fn.bias)
        self.sum = processor.aggregation == "sum"
        self.relu = processor.messages == "relu"
        self.norm = None if processor.norm is None else LayerNorm(processor.norm)

    def step(self, parents: np.ndarray, children: np.ndarray) -> np.ndarray:
        """The update of parents [P, H] from their children [P * A, H]."""
        messages = children.reshape(len(parents), len(self.edge_part), -1) @ self.sender_t
        messages += (parents @ self.receiver_t)[:, None]
        messages += self.edge_part  # [P, A, H]
        if self.relu:
            relu_(messages)
        out = parents + (messages.sum(axis=1) if self.sum else messages.max(axis=1))
        return out if self.norm is None else self.norm(out)


class Heads:
    """ActorCriticHeads: actor and critic as one matrix, features [B, in] -> [B, A + 1], or with
    a `separate_critic` two, the critic reading its own features; with a Gaussian head, its log
    std appended to the means, and for gSDE the state-dependent log std and the matrix z sigma
    (sigma and sigma^2 taken once, with the weights)."""

    def __init__(self, policy: PPOAgent | XLVINAgent, separate_critic: bool = False) -> None:
        heads = policy.heads
        self.actor, self.critic = Linear(heads.actor), Linear(heads.critic)
        if not separate_critic:
            self.weight_t = np.concatenate([self.actor.weight_t, self.critic.weight_t], 1)
            self.bias = np.concatenate([self.actor.bias, self.critic.bias])
        self.separate_critic = separate_critic
        self.log_std = None if heads.log_std is None else _copy(heads.log_std)
        self.sde = heads.sde
        if self.log_std is not None and self.sde:
            self.std = np.exp(self.log_std)  # [in, A]
            self.variance = np.square(self.std)

    def __call__(
        self, features: np.ndarray, critic_features: np.ndarray | None = None
    ) -> tuple[np.ndarray, np.ndarray]:
        if self.separate_critic:
            params, values = self.actor(features), self.critic(critic_features)[:, 0]
        else:
            out = features @ self.weight_t
            out += self.bias
            params, values = out[:, :-1], out[:, -1]
        if self.log_std is not None and self.sde:
            log_std = 0.5 * np.log(np.square(features) @ self.variance + SDE_EPS)
            scaled = (features[:, :, None] * self.std).reshape(len(features), -1)
            params = np.concatenate([params, log_std, scaled], 1, dtype=np.float32)
        elif self.log_std is not None:
            params = np.concatenate([params, np.broadcast_to(self.log_std, params.shape)], 1)
        return params, values


class PPOActor:
    """PPOAgent.forward: heads(encoder(obs)), the critic's own encoder where it has one."""

    def __init__(self, policy: PPOAgent) -> None:
        self.encoder = Encoder(policy.encoder)
        self.critic = None if policy.critic_encoder is None else Encoder(policy.critic_encoder)
        self.heads = Heads(policy, separate_critic=self.critic is not None)

    def __call__(self, obs: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        critic = None if self.critic is None else self.critic(obs)
        return self.heads(self.encoder(obs), critic)


class XLVINActor:
    """XLVINAgent.forward: heads([h, chi]) with chi the roots of the executed tree.

    The tree is expanded level by level in the embedding space (then projected, if the agent has
    a node projection) and executed level by level, each of the K steps on the levels whose
    output is still read (as `xlvin.nn.tree.execute_tree` prunes: step s on levels 0 .. K - s,
    so the leaves, which receive no message, are never updated).
    """

    def __init__(self, policy: XLVINAgent) -> None:
        self.encoder = Encoder(policy.encoder)
        self.transition = Transition(policy.transition)
        self.processor = Processor(policy.processor, policy.edge_features().numpy())
        projection = policy.node_projection
        self.projection = None if projection is None else Linear(projection)
        chi_projection = policy.chi_projection
        self.chi_projection = None if chi_projection is None else Linear(chi_projection)
        self.depth = policy.depth
        self.heads = Heads(policy)

    def __call__(self, obs: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        h = self.encoder(obs)
        return self.heads(np.concatenate([h, self.plan(h)], axis=1))

    def plan(self, h: np.ndarray) -> np.ndarray:
        """chi [B, H] from h [B, k]."""
        levels = [h]
        for _ in range(self.depth):
            levels.append(self.transition(levels[-1]).reshape(-1, h.shape[1]))
        if self.projection is not None:
            levels = [self.projection(level) for level in levels]  # [B A^d, H]
        chi = levels  # steps = 0: chi is the root itself
        for step in range(1, self.depth + 1):
            x = levels if step == 1 else [c + level for c, level in zip(chi, levels)]
            top = self.depth - step  # this step's output is read on levels 0 .. top
            chi = [self.processor.step(x[d], x[d + 1]) for d in range(top + 1)]
        return chi[0] if self.chi_projection is None else self.chi_projection(chi[0])
