"""XLVIN's PPO minibatch step (paper section 3.3) for a group of seeds at once, each seed's
gradient bit for bit the one its own `xlvin.ppo.update.minibatch_step` takes.

The forward is `XLVINAgent.forward_with_aux` (encoder, full tree, executor, heads, TransE) op
for op with a seed axis in front, and autograd takes the backward: the graph has the one-seed
graph's shape, so a tensor used several times (h_s seven times, the transition's weights
three times) sums its gradients in the same order. Each op's kernel, forward and backward:

- products: `_Linear`, `baddbmm` with the bias inside (as `addmm`), each seed's operand
  starting where its one-seed operand starts modulo 64 bytes (`placed`: the tree's children
  and the leaves' gradient are views off a boundary), the weight gradient in autograd's
  orientation: `grad^T x`, but `(x^T grad)^T` for the state part of the transition's first
  layer (a view of stride k + A; the other orientation differed at 63 to 129 rows under
  MKL_CBWR=COMPATIBLE);
- per seed: the transition's LayerNorm (`_LayerNorm`: its weights are each seed's own; the
  normalisation stacked, then the affine map, differed for every minibatch size, in both
  modes), the products of a few rows or one column (the edge features, the critic, the
  heads' weight gradients: `_PerSeedLinear`, `_Heads`, as `StackedPPO`);
- stacked by autograd: element-wise ops, sums over a seed's rows, cat and slices, TransE's
  indexing (each seed's own negatives); the max over two children as the max kernel picks
  (`_MaxOfTwo`).

Checked by tests/test_population.py against each seed's `minibatch_step` (3 of 8 seeds, 8 to
129 rows, depths 1 to 3, both aggregates, both kinds of negatives) in both kernel modes; a
sweep over 88 cases (1 to 3 actions, widths 32 and 64, 8 to 129 rows) found no difference.
Speed: the products are 41 M multiply-adds per seed and CartPole minibatch of 128, about
1.1 ms at 37 GMAC/s stacked or alone, about half of the step (2.5 ms a seed stacked by 6,
3.2 ms alone, one thread); the rest is element-wise work over the tree, also per element.
"""

import numpy as np
import torch
from torch import Tensor
from torch.autograd import Function
from torch.nn import functional as F

from xlvin.accel.population import (ALIGN, StackedWeights, aligned, padded, stacked_bmm,
                                    stacked_ppo_loss)
from xlvin.nn.agent import XLVINAgent
from xlvin.nn.tree import level_offsets


def placed(x: Tensor, shift: int = 0) -> Tensor:
    """x [G, N, W] with every seed's [N, W] block row-major and starting `shift` floats past a
    64-byte boundary (the address class of the one-seed operand it stands for): x where it
    already is, else a copy."""
    count, rows, width = x.shape
    if (x.stride(2) == 1 and (x.stride(1) == width or rows == 1) and x.stride(0) % ALIGN == 0
            and (x.data_ptr() // 4 - shift) % ALIGN == 0 and x.data_ptr() % 4 == 0):
        return x
    block = padded(rows * width)
    out = torch.empty(count * block + ALIGN).as_strided((count, rows, width), (block, width, 1),
                                                         shift)
    return out.copy_(x)


class _Linear(Function):
    """F.linear of every seed: x [G, N, in], weight [G, out, in] (a seed's own, or a frozen
    one expanded), bias [G, out] or None -> [G, N, out]. `shift` and `grad_shift`: the address
    class (`placed`) of the one-seed input and output gradient."""

    @staticmethod
    def forward(  # type: ignore[override]
        ctx, x: Tensor, weight: Tensor, bias: Tensor | None, shift: int, grad_shift: int,
    ) -> Tensor:
        x = placed(x, shift)
        out = aligned(x.shape[0], x.shape[1], weight.shape[1])
        if bias is None:
            torch.baddbmm(out, x, weight.transpose(1, 2), beta=0.0, out=out)
        else:
            out.copy_(bias.unsqueeze(1).expand_as(out))
            torch.baddbmm(out, x, weight.transpose(1, 2), out=out)
        ctx.save_for_backward(x, weight)
        ctx.grad_shift, ctx.bias = grad_shift, bias is not None  # type: ignore[attr-defined]
        return out

    @staticmethod
    def backward(ctx, grad: Tensor) -> tuple[Tensor | None, ...]:  # type: ignore[override]
        x, weight = ctx.saved_tensors
        grad = placed(grad, ctx.grad_shift)  # type: ignore[attr-defined]
        grad_x = grad_w = grad_b = None
        if ctx.needs_input_grad[0]:  # autograd's mm_mat1_backward: grad W
            grad_x = stacked_bmm(grad, weight)
        if ctx.needs_input_grad[1]:  # mm_mat2_backward of W^T: grad^T x where W^T is
            # column-major (W contiguous), else x^T grad, transposed
            if weight.stride(1) == weight.shape[2] and weight.stride(2) == 1:
                grad_w = torch.bmm(grad.transpose(1, 2), x)
            else:
                grad_w = torch.bmm(x.transpose(1, 2), grad).transpose(1, 2)
        if ctx.bias and ctx.needs_input_grad[2]:  # type: ignore[attr-defined]
            grad_b = grad.sum(1)
        return grad_x, grad_w, grad_b, None, None


def linear(x: Tensor, weight: Tensor, bias: Tensor | None, shift: int = 0,
           grad_shift: int = 0) -> Tensor:
    """`_Linear` (F.linear of every seed)."""
    return _Linear.apply(x, weight, bias, shift, grad_shift)


class _PerSeedLinear(Function):
    """F.linear seed by seed (products of a few rows, which MKL computes otherwise stacked):
    x [G, N, in], weight [G, out, in], bias [G, out] -> [G, N, out]; the backward is
    autograd's `addmm` backward, seed by seed."""

    @staticmethod
    def forward(ctx, x: Tensor, weight: Tensor, bias: Tensor) -> Tensor:  # type: ignore[override]
        x = placed(x)
        out = torch.stack([F.linear(x[k], weight[k], bias[k]) for k in range(len(x))])
        ctx.save_for_backward(x, weight)
        return out

    @staticmethod
    def backward(ctx, grad: Tensor) -> tuple[Tensor | None, ...]:  # type: ignore[override]
        x, weight = ctx.saved_tensors
        seeds = range(len(x))
        grads = placed(grad)
        grad_x = grad_w = grad_b = None
        if ctx.needs_input_grad[0]:
            grad_x = torch.stack([grads[k].mm(weight[k]) for k in seeds])
        if ctx.needs_input_grad[1]:
            grad_w = torch.stack([grads[k].t().mm(x[k]) for k in seeds])
        if ctx.needs_input_grad[2]:
            grad_b = torch.stack([grads[k].sum(0) for k in seeds])
        return grad_x, grad_w, grad_b


class _LayerNorm(Function):
    """nn.LayerNorm seed by seed, each with its own weight and bias: x [G, N, F], weight and
    bias [G, F] (`F.layer_norm` takes one [F] weight; its kernels, forward and backward)."""

    @staticmethod
    def forward(  # type: ignore[override]
        ctx, x: Tensor, weight: Tensor, bias: Tensor, eps: float,
    ) -> Tensor:
        width = x.shape[2]
        outs, means, rstds = [], [], []
        for k in range(len(x)):
            out, mean, rstd = torch.native_layer_norm(x[k], (width,), weight[k], bias[k], eps)
            outs.append(out)
            means.append(mean)
            rstds.append(rstd)
        ctx.save_for_backward(x, weight, bias, *means, *rstds)
        return torch.stack(outs)

    @staticmethod
    def backward(ctx, grad: Tensor) -> tuple[Tensor | None, ...]:  # type: ignore[override]
        x, weight, bias, *saved = ctx.saved_tensors
        count, width = len(x), x.shape[2]
        parts = [torch.ops.aten.native_layer_norm_backward(
            grad[k], x[k], (width,), saved[k], saved[count + k], weight[k], bias[k],
            [True, True, True]) for k in range(count)]
        return (torch.stack([p[0] for p in parts]), torch.stack([p[1] for p in parts]),
                torch.stack([p[2] for p in parts]), None)


class _Heads(Function):
    """The actor and critic heads of every seed: features [G, B, in] -> logits [G, B, A],
    values [G, B]. The logits stacked; the critic's one-column product and both heads' weight
    gradients (products of a few rows) seed by seed; the features' gradient as
    `StackedPPO.gradients` takes it."""

    @staticmethod
    def forward(ctx, features: Tensor, actor_w: Tensor, actor_b: Tensor,  # type: ignore[override]
                critic_w: Tensor, critic_b: Tensor) -> tuple[Tensor, Tensor]:
        features = placed(features)
        count, rows, _ = features.shape
        logits = aligned(count, rows, actor_w.shape[1])
        logits.copy_(actor_b.unsqueeze(1).expand_as(logits))
        torch.baddbmm(logits, features, actor_w.transpose(1, 2), out=logits)
        values = torch.empty(count, rows, 1)
        for k in range(count):
            torch.addmm(critic_b[k], features[k], critic_w[k].t(), out=values[k])
        ctx.save_for_backward(features, actor_w, critic_w)
        return logits, values.squeeze(-1)

    @staticmethod
    def backward(ctx, grad_logits: Tensor, grad_values: Tensor  # type: ignore[override]
                 ) -> tuple[Tensor | None, ...]:
        features, actor_w, critic_w = ctx.saved_tensors
        count = len(features)
        grad_out = placed(grad_logits)
        grad_v = placed(grad_values.unsqueeze(-1))
        grad_features = stacked_bmm(grad_out, actor_w)
        grad_features += grad_v * critic_w  # a product over one column: each entry one product
        weights = [torch.stack([grad[k].t().mm(features[k]) for k in range(count)])
                   for grad in (grad_out, grad_v)]
        return grad_features, weights[0], grad_out.sum(1), weights[1], grad_v.sum(1)


class _Loss(Function):
    """The PPO loss of every seed (`stacked_ppo_loss`, the fused loss's NumPy): logits
    [G, B, A], values [G, B] -> loss [G]; the terms (loss, policy, value, entropy, approx KL,
    clip fraction) [G, 6] into `out`."""

    @staticmethod
    def forward(  # type: ignore[override]
        ctx, logits: Tensor, values: Tensor, data: tuple[np.ndarray, ...], options: dict,
        out: list[np.ndarray],
    ) -> Tensor:
        grad_logits, grad_values, terms = stacked_ppo_loss(
            logits.detach().numpy(), values.detach().numpy(), *data, **options)
        ctx.grads = (  # type: ignore[attr-defined]
            torch.from_numpy(grad_logits.astype(np.float32, copy=False)),
            torch.from_numpy(grad_values))
        out.append(terms)
        return torch.from_numpy(terms[:, 0].copy())

    @staticmethod
    def backward(ctx, grad_loss: Tensor) -> tuple[Tensor | None, ...]:  # type: ignore[override]
        grad_logits, grad_values = ctx.grads  # type: ignore[attr-defined]
        return (grad_logits * grad_loss[:, None, None], grad_values * grad_loss[:, None],
                None, None, None)


class _MaxOfTwo(Function):
    """`x.max(dim=2).values` of x [G, P, 2, H] and its backward, as autograd computes them:
    the element max's CPU kernel picks (the second where `!(x1 <= x0)` and x0 is not NaN:
    the first of equals, the first NaN), taken with `gather` (the max kernel over a dim of two
    took 3.4 times as long, 724 against 215 us on [6, 384, 2, 50]); the gradient scattered
    to it (`value_selecting_reduction_backward`)."""

    @staticmethod
    def forward(ctx, x: Tensor) -> Tensor:  # type: ignore[override]
        first, second = x[:, :, 0], x[:, :, 1]
        index = (~(second <= first) & (first == first)).long().unsqueeze(2)
        ctx.save_for_backward(index)
        ctx.shape = x.shape  # type: ignore[attr-defined]
        return x.gather(2, index).squeeze(2)

    @staticmethod
    def backward(ctx, grad: Tensor) -> Tensor:  # type: ignore[override]
        (index,) = ctx.saved_tensors
        return torch.ops.aten.value_selecting_reduction_backward(
            grad, 2, index.squeeze(2), ctx.shape, False)  # type: ignore[attr-defined]


def shared_executor(policies: list[XLVINAgent]) -> bool:
    """Whether every policy holds the same frozen executor (weights and settings) and edge
    input as the first, which `StackedXLVIN` computes every seed's tree with."""
    first = policies[0]

    def settings(p: XLVINAgent) -> tuple:
        return p.processor.aggregation, p.processor.messages, p.processor.hidden

    return all(settings(p) == settings(first) and torch.equal(p.edge_input, first.edge_input)
               and all(torch.equal(a, b) for a, b in zip(p.processor.parameters(),
                                                         first.processor.parameters()))
               for p in policies[1:])


class StackedXLVIN:
    """A PPO minibatch step of XLVIN agents (`stacks_updates`) for a group of seeds whose
    minibatches have the same number of rows: forward, loss, backward and clipping into each
    seed's flat gradient. `policy`: any seed's agent (the architecture and the frozen executor
    every seed shares)."""

    def __init__(self, weights: StackedWeights, policy: XLVINAgent) -> None:
        self.weights = weights
        trainable = {id(p): i for i, p in enumerate(weights.optimizers[0].params)}
        self.index = {name: trainable[id(p)] for name, p in policy.named_parameters()
                      if p.requires_grad}
        self.policy = policy
        processor = policy.processor
        self.hidden = processor.hidden
        self.num_actions = policy.transition.num_actions
        self.depth = policy.planner.depth  # type: ignore[attr-defined]
        self.norm_eps = policy.transition.rest[2].eps

    def gradients(
        self, seeds: list[int], obs: Tensor, next_obs: Tensor | None, actions: Tensor,
        negatives: Tensor | None, old_logprobs: np.ndarray, advantages: np.ndarray,
        returns: np.ndarray, old_values: np.ndarray, clip: float, clip_value_loss: bool,
        ent_coef: float, vf_coef: float, logratio_limit: float, max_norm: float,
    ) -> np.ndarray:
        """Seeds `seeds` (rows of the stack, [G]) on their minibatches (observations and next
        observations [G, B, *obs_shape], actions [G, B], TransE's negatives [G, B]: each
        seed's draw, the other columns [G, B] as the loss reads them): their clipped gradients
        written to their rows of the flat gradient; their terms [G, 7] (loss, policy, value,
        entropy, approx KL, clip fraction, the TransE term), the caller refusing a seed whose
        loss is not finite (its gradient is then not taken)."""
        weights = self.weights
        flat = weights.flat[seeds]
        leaves = [view.detach().requires_grad_() for view in weights.layer_views(flat)]
        w = {name: leaves[i] for name, i in self.index.items()}
        terms: list[np.ndarray] = []
        with torch.enable_grad():
            logits, values, transe = self.forward(w, obs, next_obs, actions, negatives)
            loss = _Loss.apply(logits, values, (
                actions.numpy(), old_logprobs, advantages, returns, old_values), dict(
                clip=clip, clip_value_loss=clip_value_loss, ent_coef=ent_coef, vf_coef=vf_coef,
                logratio_limit=logratio_limit), terms)
            total = loss if transe is None else loss + transe
            extra = [] if transe is None else [transe.detach().numpy()[:, None]]
            out = np.concatenate([terms[0], *extra], axis=1)
            out[:, 0] = total.detach().numpy()
            if not np.isfinite(out[:, 0]).all():
                return out
            total.backward(torch.ones_like(total))
        grads = torch.zeros_like(flat)
        for view, leaf in zip(weights.layer_views(grads), leaves):
            if leaf.grad is not None:
                view.add_(leaf.grad)
        grads[:, : weights.size].mul_(
            (max_norm / (torch.linalg.vector_norm(grads[:, : weights.size], dim=1) + 1e-6))
            .clamp_(max=1.0).unsqueeze(1))
        weights.grad[seeds] = grads
        return out

    def forward(self, w: dict[str, Tensor], obs: Tensor, next_obs: Tensor | None,
                actions: Tensor, negatives: Tensor | None
                ) -> tuple[Tensor, Tensor, Tensor | None]:
        """`forward_with_aux` of every seed: logits [G, B, A], values [G, B], the TransE term
        [G] (None at weight 0)."""
        policy = self.policy
        transe = negatives is not None and next_obs is not None
        x = torch.cat([obs, next_obs], 1) if transe else obs
        x = x.flatten(2).float()
        for i in (0, 2, 4):
            x = linear(x, w[f"encoder.net.{i}.weight"], w[f"encoder.net.{i}.bias"])
            if i < 4:
                x = torch.relu(x)
        h, h_next = x.chunk(2, dim=1) if transe else (x, None)
        levels = [h]
        for _ in range(self.depth):
            levels.append(self.successors(w, levels[-1], len(levels) == self.depth
                                          ).reshape(len(h), -1, h.shape[2]))
        edges = _PerSeedLinear.apply(policy.edge_input.expand(len(h), *policy.edge_input.shape),
                                     w["edge_projection.weight"], w["edge_projection.bias"])
        chi = self.execute_tree(levels, edges)
        logits, values = _Heads.apply(torch.cat([h, chi], dim=-1), w["heads.actor.weight"],
                                      w["heads.actor.bias"], w["heads.critic.weight"],
                                      w["heads.critic.bias"])
        if not transe:
            return logits, values, None
        assert h_next is not None and negatives is not None
        one_hot = F.one_hot(actions, self.num_actions).to(h.dtype)
        predicted = h + self.rest(w, self.first(w, torch.cat([h, one_hot], dim=-1)))
        source = h if policy.transe_negatives == "states" else h_next
        sampled = source[torch.arange(len(h))[:, None], negatives]
        positive = _energy(predicted, h_next)
        negative = torch.clamp(1.0 - _energy(sampled, h_next), min=0.0)
        return logits, values, policy.transe_weight * (positive + negative).mean(1)

    def first(self, w: dict[str, Tensor], x: Tensor) -> Tensor:
        return linear(x, w["transition.first.weight"], w["transition.first.bias"])

    def rest(self, w: dict[str, Tensor], x: Tensor, grad_shift: int = 0) -> Tensor:
        """The transition's ReLU, Linear, LayerNorm, ReLU, Linear (`TransitionModel.rest`);
        `grad_shift`: the address class of the last layer's gradient."""
        x = torch.relu(x)
        x = linear(x, w["transition.rest.1.weight"], w["transition.rest.1.bias"])
        x = _LayerNorm.apply(x, w["transition.rest.2.weight"], w["transition.rest.2.bias"],
                             self.norm_eps)
        x = torch.relu(x)
        return linear(x, w["transition.rest.4.weight"], w["transition.rest.4.bias"],
                      grad_shift=grad_shift)

    def successors(self, w: dict[str, Tensor], h: Tensor, leaves: bool) -> Tensor:
        """`TransitionModel.successors` of every seed: h [G, n, k] -> [G, n, A, k]. The
        leaves' gradient reaches the last layer as a view into the tree's (`execute_tree`'s
        cat): its address class is that view's."""
        count, n, k = h.shape
        w_state, w_action = w["transition.first.weight"].split([k, self.num_actions], dim=2)
        w_action = w_action.transpose(1, 2)  # [G, A, F]
        first = (linear(h, w_state, w["transition.first.bias"])[:, :, None]
                 + w_action[:, None])  # [G, n, A, F]
        grad_shift = 0
        if leaves:
            offset = level_offsets(n // self.num_actions ** (self.depth - 1),
                                   self.num_actions, self.depth)[self.depth]
            grad_shift = offset * k % ALIGN
        translations = self.rest(w, first.reshape(count, n * self.num_actions, -1), grad_shift)
        return h[:, :, None] + translations.view(count, n, self.num_actions, k)

    def execute_tree(self, levels: list[Tensor], edges: Tensor) -> Tensor:
        """`xlvin.nn.tree.execute_tree` of every seed: levels [G, B A^d, H], edges [G, A, H]
        -> chi [G, B, H]."""
        steps = self.depth
        count, batch, hidden = levels[0].shape
        num_actions, depth = self.num_actions, len(levels) - 1
        offsets = level_offsets(batch, num_actions, depth)
        nodes = torch.cat(levels, 1)
        x = nodes
        for step in range(1, steps + 1):
            top = min(steps - step, depth)
            internal = min(top, depth - 1)
            parents = x[:, : offsets[internal + 1]]
            children = x[:, batch : offsets[internal + 2]]
            messages = self.message(
                children.reshape(count, parents.shape[1], num_actions, hidden),
                parents[:, :, None], edges, batch * hidden % ALIGN)
            chi = self.update(parents, self.aggregate(messages))
            if top == depth:
                leaves = x[:, offsets[depth] :]
                chi = torch.cat([chi, self.update(leaves, torch.zeros_like(leaves))], 1)
            x = chi + nodes[:, : chi.shape[1]]
        return chi[:, :batch]

    def message(self, sender: Tensor, receiver: Tensor, edge: Tensor, shift: int) -> Tensor:
        """`MessagePassing.message` of every seed: sender [G, P, A, H] (`shift`: its address
        class), receiver [G, P, 1, H], edge [G, A, H] -> [G, P, A, H]."""
        processor = self.policy.processor
        count, parents, num_actions, hidden = sender.shape
        w_sender, w_receiver, w_edge = processor.message_fn.weight.split(hidden, dim=1)
        message = (
            linear(sender.reshape(count, -1, hidden), w_sender.expand(count, -1, -1), None,
                   shift).view(sender.shape)
            + linear(receiver.reshape(count, parents, hidden), w_receiver.expand(count, -1, -1),
                     None).view(receiver.shape)
            + _PerSeedLinear.apply(edge, w_edge.expand(count, -1, -1),
                                   processor.message_fn.bias.expand(count, -1))[:, None]
        )
        return torch.relu(message) if processor.messages == "relu" else message

    def aggregate(self, messages: Tensor) -> Tensor:
        if self.policy.processor.aggregation == "sum":
            return messages.sum(dim=2)
        if messages.shape[2] == 2:
            return _MaxOfTwo.apply(messages)
        return messages.max(dim=2).values

    def update(self, x: Tensor, aggregated: Tensor) -> Tensor:
        return x + aggregated


def _energy(x: Tensor, y: Tensor, sigma: float = 0.5) -> Tensor:
    """`xlvin.nn.transe.energy` of every seed: [G, B, k] x2 -> [G, B]."""
    return (x - y).pow(2).sum(-1) / (2 * sigma**2)
