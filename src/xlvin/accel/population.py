"""S seeds of one policy as one network: their weights stacked, their forwards, backwards and
Adam steps as batched calls, each seed computing exactly what it computes alone.

A CartPole-sized network costs more in per-call overhead than in arithmetic, so S seeds that
each call every op pay S times the overhead; stacked, an op is one call for all of them. Each
seed must still get the bits of a run of its own (`xlvin.ppo.population`), so every kernel here
was measured against the one-seed computation it replaces, on an AMD EPYC (torch 2.13 with MKL,
NumPy 2.4 with OpenBLAS), with MKL's default kernels and in reproducible mode
(`MKL_CBWR=COMPATIBLE`, `xlvin.kernels`); tests/test_population.py repeats the check:

- **stacked, exact**: `baddbmm` / `bmm` over seeds whose minibatches have the same number of
  rows B >= `MIN_STACKED_ROWS`, each seed's [B, n] block starting on a 64-byte boundary
  (`aligned`) and each seed's weights at their offsets in a FlatAdam of their own (rows of
  `ALIGN` floats): every output row, weight gradient and bias sum is the seed's `F.linear`,
  `mm` or `sum`; `np.matmul` over stacked [N, in] x [in, out] (acting); element-wise ops,
  NumPy's and torch's sums over a row of a [G, B] stack; torch's fused Adam over a list of
  tensors (it steps each alone).
- **measured different, hence the two conditions above**: padding every seed to the longest
  minibatch changed rows where B is not a multiple of 4 under COMPATIBLE (424 of 556 cases;
  MKL computes rows in blocks of 4 and the rest apart), weight gradients where the padding
  crossed a block of 128 rows (16 of 3,888) and bias sums over 50 columns (2,213 of 3,888);
  blocks off a 64-byte boundary changed logits and the critic's values with the default
  kernels (97 and 89 of 435).
- **per seed**: the critic's one-column product (a seed's own call takes MKL's matrix-vector
  path) and the heads' weight gradients, products of a few rows (the critic's one row: 137 of
  435 differed stacked; the actor's three rows for three actions: every minibatch size, with
  MKL's own kernels); minibatches of fewer than `MIN_STACKED_ROWS` rows, which take the seed's
  own readable step. A gradient check over 12 networks (1 to 12 inputs, widths 8 to 128, 2 to
  7 actions), 2 to 16 seeds and 8 to 257 rows found no other difference, in either mode.

XLVIN (paper section 3.2) acts stacked (`StackedXLVINActor`: every op of the one-seed NumPy
actor with a seed axis in front, the frozen executor's products included; `np.matmul` over
stacked matrices calls the one-seed product per seed, so no seed's tree shares a product with
another's). The executor is the same for every seed, but not one product for all of them: a
seed's own actor takes a [A, H] x [H, H] product per parent (NumPy's 3-D product), and one
product over every seed's [S P A, H] rows differed from those (12 of 12 cases, 1 to 64 seeds,
OpenBLAS). XLVIN's update is stacked too where `stacks_updates` says
(`xlvin.accel.stacked_xlvin`: the one-seed forward with a seed axis, autograd's backward, the
same conditions as above); any other XLVIN updates seed by seed.

Supported (`unsupported` says why not): the PPO baseline and XLVIN, float32 on the CPU, on
Discrete, MultiDiscrete and Box actions (binned, or a diagonal Gaussian). Stacked where the
kernels above compute them: acting for the PPO baseline with one ReLU MLP encoder shared by
actor and critic (no observation normalisation; any of those actions) and for XLVIN with the
full tree over one (Discrete actions; no world model, chi not zeroed): `stacks_actor`; the
update where `stacks_updates` says. The rest runs seed by seed, each seed's readable code as in
a run of its own (any planner, chi = 0, a separate critic, a transition model, observation
normalisation, Tanh).
"""

import copy
from collections.abc import Callable

import numpy as np
import torch
from torch.optim.adam import adam

from xlvin.accel.flat_adam import FlatAdam
from xlvin.accel.numpy_actor import LayerNorm, Linear, XLVINActor, relu_
from xlvin.nn.agent import XLVINAgent
from xlvin.nn.auxiliary import TransE
from xlvin.nn.baselines.ppo import PPOAgent
from xlvin.nn.distributions import Categorical, StateDependentGaussian
from xlvin.nn.encoders import MLPEncoder
from xlvin.nn.planners import FullTree

#: Floats per seed row of the stacked buffers are a multiple of this (64 bytes).
ALIGN = 16
#: The most seeds one stacked call takes. Per seed, products of 16 or more seeds' CartPole
#: minibatches cost about 1.8 times those of up to 8 (their matrices leave the L2 cache), but
#: each call has its fixed cost too: a population update of 64 seeds took 5.5-6.0 ms per seed
#: with 8 at most, 4.8-5.7 ms with 16, 5.1-5.4 ms with no bound (one thread, this CPU).
MAX_STACK = 16
#: Minibatches of fewer rows take MKL's small-matrix paths (measured: 1 to 3 rows differed
#: stacked, and 4 or 5 where the layers are 16 or 32 wide, with MKL's own kernels): a seed
#: with one takes that step alone.
MIN_STACKED_ROWS = 8


def unsupported(policy: torch.nn.Module) -> str | None:
    """Why a population cannot train `policy` (its seeds' weights in the rows of one
    `StackedWeights`), or None where it can: the parts its stacked kernels do not compute
    (`stacks_actor`, `stacks_updates`) run seed by seed, each seed's own readable code."""
    if type(policy) not in (PPOAgent, XLVINAgent):
        return (f"agent {type(policy).__name__} (the population trains the PPO baseline and "
                "XLVIN)")
    if type(policy.action_distribution()) is StateDependentGaussian:
        return "gSDE's actions (--use-sde)"
    if any(p.device.type != "cpu" or p.dtype != torch.float32 for p in policy.parameters()) or \
            any(b.device.type != "cpu" for b in policy.buffers()):
        return "weights other than float32 on the CPU"
    return None


def _relu_mlp(policy: torch.nn.Module) -> bool:
    """Whether `policy` reads flat observations through one ReLU MLP encoder, shared by actor
    and critic (no observation normalisation), and acts on Discrete actions."""
    return (type(policy.encoder) is MLPEncoder
            and isinstance(policy.encoder.net[1], torch.nn.ReLU)
            and getattr(policy, "critic_encoder", None) is None
            and type(policy.action_distribution()) is Categorical)


def _full_tree(policy: torch.nn.Module) -> bool:
    """Whether `policy` is XLVIN planning the full tree into its heads (no world model)."""
    return (type(policy) is XLVINAgent and type(policy.planner) is FullTree
            and not policy.zero_chi and policy.world_model is None)


def stacks_actor(policy: torch.nn.Module) -> bool:
    """Whether the seeds of `policy` (an agent `unsupported` accepts) act as one stacked NumPy
    actor (`StackedActor`: the PPO baseline's ReLU MLP on Discrete, MultiDiscrete or Box
    actions; `StackedXLVINActor`: XLVIN's full tree over one on Discrete actions); the others
    act seed by seed, each as alone (`xlvin.ppo.collect.make_actor`)."""
    if type(policy) is PPOAgent:
        return (type(policy.encoder) is MLPEncoder
                and isinstance(policy.encoder.net[1], torch.nn.ReLU)
                and policy.critic_encoder is None)
    return _full_tree(policy) and _relu_mlp(policy)


def stacks_updates(policy: torch.nn.Module) -> bool:
    """Whether the update of `policy` (an agent `unsupported` accepts) is stacked: the PPO
    baseline's over a ReLU MLP on Discrete actions, with no transition model (`StackedPPO`),
    and XLVIN's full tree over one (`xlvin.accel.stacked_xlvin.StackedXLVIN`) without node or
    chi projection, executor LayerNorm or rollout policy, with TransE; any other updates seed
    by seed (`xlvin.ppo.update.minibatch_step`)."""
    if type(policy) is PPOAgent:
        return _relu_mlp(policy) and policy.transition is None
    return (_full_tree(policy) and _relu_mlp(policy) and policy.node_projection is None
            and policy.chi_projection is None and policy.rollout_policy is None
            and policy.processor.norm is None and not policy.transition.nvec
            and isinstance(policy.auxiliary, TransE)
            and policy.auxiliary.negatives in ("states", "next_states"))


def padded(n: int, multiple: int = ALIGN) -> int:
    """n rounded up to a multiple."""
    return -(-n // multiple) * multiple


class StackedWeights:
    """The trainable parameters of S policies of one architecture, each trained by its own
    `FlatAdam`, moved into the rows of [S, P'] buffers: weights, gradients and Adam's moments.

    Every FlatAdam keeps working as before on its row (its flat tensors become views into it),
    so a seed's policy, checkpoints and a seed's own update are unchanged; `layer(i)` is the
    [S, *shape] view of parameter i of every seed, and `step` one Adam step of many seeds.
    """

    def __init__(self, optimizers: list[FlatAdam]) -> None:
        self.optimizers = optimizers
        size = optimizers[0].flat.numel()
        self.size, self.row = size, padded(size)
        self.shapes = [tuple(p.shape) for p in optimizers[0].params]
        self.strides = [torch.empty(shape).stride() for shape in self.shapes]  # contiguous
        self.offsets = np.cumsum([0] + [p.numel() for p in optimizers[0].params])[:-1].tolist()
        count = len(optimizers)
        self.flat, self.grad, self.exp_avg, self.exp_avg_sq = (
            torch.zeros(count, self.row) for _ in range(4))
        for s, opt in enumerate(optimizers):
            if opt.flat.numel() != size or [tuple(p.shape) for p in opt.params] != self.shapes:
                raise ValueError("the population's policies differ in their parameters")
            self.flat[s, :size] = opt.flat.detach()
            self.exp_avg[s, :size] = opt.exp_avg
            self.exp_avg_sq[s, :size] = opt.exp_avg_sq
            _rebind(opt, self.flat[s, :size], self.grad[s, :size], self.exp_avg[s, :size],
                    self.exp_avg_sq[s, :size])

    def layer(self, i: int) -> torch.Tensor:
        """Parameter i of every seed, [S, *shape] (a view)."""
        return self.layer_views(self.flat)[i]

    def layer_views(self, rows: torch.Tensor) -> list[torch.Tensor]:
        """Each parameter [G, *shape] of rows [G, P'] laid out as `flat`'s (views)."""
        count, start = len(rows), rows.storage_offset()
        return [rows.as_strided((count, *shape), (self.row, *strides), start + offset)
                for shape, strides, offset in zip(self.shapes, self.strides, self.offsets)]

    @torch.no_grad()
    def step(self, seeds: list[int]) -> None:
        """One Adam step of these seeds' FlatAdams (`FlatAdam.step` of each, as one call of
        torch's fused kernel over their list: it steps each tensor on its own)."""
        by_lr: dict[tuple[float, float, float, float], list[FlatAdam]] = {}
        for s in seeds:
            group = self.optimizers[s].param_groups[0]
            by_lr.setdefault((group["lr"], *group["betas"], group["eps"]), []).append(
                self.optimizers[s])
        for (lr, beta1, beta2, eps), opts in by_lr.items():
            adam([o.flat for o in opts], [o.flat.grad for o in opts], [o.exp_avg for o in opts],
                 [o.exp_avg_sq for o in opts], [], [o.step_t for o in opts], fused=True,
                 amsgrad=False, beta1=beta1, beta2=beta2, lr=lr, weight_decay=0.0, eps=eps,
                 maximize=False)


def _rebind(opt: FlatAdam, flat: torch.Tensor, grad: torch.Tensor, exp_avg: torch.Tensor,
            exp_avg_sq: torch.Tensor) -> None:
    """Make `opt` keep its parameters, gradient and moments in the given views (holding its
    values): FlatAdam's layout, moved."""
    opt.flat.data = flat
    opt.flat.grad = grad
    offset = 0
    opt.grad_views = []
    for p in opt.params:
        n = p.numel()
        p.data = flat[offset : offset + n].view_as(p)
        opt.grad_views.append(grad[offset : offset + n].view_as(p))
        offset += n
    opt.exp_avg, opt.exp_avg_sq = exp_avg, exp_avg_sq
    opt.zero_grad()


class StackedActor:
    """`xlvin.accel.numpy_actor.PPOActor` of seeds `seeds` (rows of `weights`, the trainable
    parameters of `policy`'s architecture) at once: observations [S, N, in] -> (logits
    [S, N, P], values [S, N]), a NumPy snapshot of the weights now (W^T per seed, stacked; actor
    and critic as one matrix, as PPOActor; a Gaussian's means followed by its log std)."""

    def __init__(self, weights: StackedWeights, seeds: list[int], policy: PPOAgent) -> None:
        index = {name: i for i, name in enumerate(
            name for name, p in policy.named_parameters() if p.requires_grad)}

        def rows(name: str) -> np.ndarray:  # [S, *shape]
            return weights.layer(index[name]).detach().numpy()[seeds]

        def t(name: str) -> np.ndarray:  # [S, in, out]
            return rows(f"{name}.weight").transpose(0, 2, 1).copy()

        def b(name: str) -> np.ndarray:  # [S, 1, out]
            return rows(f"{name}.bias")[:, None, :].copy()

        self.layers = [(t(f"encoder.net.{k}"), b(f"encoder.net.{k}")) for k in (0, 2, 4)]
        self.heads = (np.concatenate([t("heads.actor"), t("heads.critic")], 2),
                      np.concatenate([b("heads.actor"), b("heads.critic")], 2))
        self.log_std = rows("heads.log_std")[:, None, :].copy() if "heads.log_std" in index \
            else None  # [S, 1, d]

    def __call__(self, obs: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        x = obs.reshape(*obs.shape[:2], -1).astype(np.float32, copy=False)
        for k, (weight_t, bias) in enumerate(self.layers):
            x = np.matmul(x, weight_t)
            x += bias
            if k < 2:
                np.maximum(x, 0, out=x)
        out = np.matmul(x, self.heads[0])
        out += self.heads[1]
        params = out[..., :-1]
        if self.log_std is not None:
            params = np.concatenate([params, np.broadcast_to(self.log_std, params.shape)], 2)
        return params, out[..., -1]


class StackedXLVINActor:
    """`xlvin.accel.numpy_actor.XLVINActor` of S XLVIN agents at once: observations
    [S, N, in] -> (logits [S, N, A], values [S, N]). Each seed's snapshot is its own
    `XLVINActor` (its W^T copies, its edges' messages), stacked on a seed axis; every op is the
    one-seed op with that axis in front (`np.matmul` over stacked matrices: per seed, the
    product the seed's own actor takes)."""

    @torch.no_grad()
    def __init__(self, policies: list[XLVINAgent]) -> None:
        actors = [XLVINActor(policy) for policy in policies]

        def stack(get: Callable[[XLVINActor], np.ndarray]) -> np.ndarray:  # [S, ...]
            return np.stack([get(actor) for actor in actors])

        def linear(get: Callable[[XLVINActor], Linear]) -> tuple[np.ndarray, np.ndarray]:
            return stack(lambda a: get(a).weight_t), stack(lambda a: get(a).bias)[:, None]

        first = actors[0]
        self.encoder = [linear(lambda a, i=i: a.encoder.layers[i]) for i in range(3)]
        self.state_t = stack(lambda a: a.transition.state_t)  # [S, k, F]
        self.state_bias = stack(lambda a: a.transition.bias)[:, None]  # [S, 1, F]
        self.action = stack(lambda a: a.transition.action)[:, None]  # [S, 1, A, F]
        self.second = linear(lambda a: a.transition.second)
        self.norm = _norm([a.transition.norm for a in actors])
        self.third = linear(lambda a: a.transition.third)
        processor = first.processor
        self.sender_t = stack(lambda a: a.processor.sender_t)[:, None]  # [S, 1, H, H]
        self.receiver_t = stack(lambda a: a.processor.receiver_t)  # [S, H, H]
        self.edge_part = stack(lambda a: a.processor.edge_part)[:, None]  # [S, 1, A, H]
        self.sum, self.relu = processor.sum, processor.relu
        self.processor_norm = (None if processor.norm is None
                               else _norm([a.processor.norm for a in actors]))
        self.projection = None if first.projection is None else linear(lambda a: a.projection)
        self.chi_projection = (None if first.chi_projection is None
                               else linear(lambda a: a.chi_projection))
        self.depth = first.depth
        self.heads = stack(lambda a: a.heads.weight_t), stack(lambda a: a.heads.bias)[:, None]

    def __call__(self, obs: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        x = obs.reshape(*obs.shape[:2], -1).astype(np.float32, copy=False)
        for k, layer in enumerate(self.encoder):
            x = _numpy_linear(x, layer)
            if k < 2:
                relu_(x)
        out = _numpy_linear(np.concatenate([x, self.plan(x)], axis=2), self.heads)
        return out[..., :-1], out[..., -1]

    def plan(self, h: np.ndarray) -> np.ndarray:
        """chi [S, B, H] from h [S, B, k] (`XLVINActor.plan`)."""
        levels = [h]
        for _ in range(self.depth):
            levels.append(self.successors(levels[-1]).reshape(len(h), -1, h.shape[2]))
        if self.projection is not None:
            levels = [_numpy_linear(level, self.projection) for level in levels]  # [S, n, H]
        chi = levels
        for step in range(1, self.depth + 1):
            x = levels if step == 1 else [c + level for c, level in zip(chi, levels)]
            chi = [self.step(x[d], x[d + 1]) for d in range(self.depth - step + 1)]
        return chi[0] if self.chi_projection is None else _numpy_linear(chi[0],
                                                                        self.chi_projection)

    def successors(self, h: np.ndarray) -> np.ndarray:
        """h + T(h, a) of every action: [S, n, k] -> [S, n, A, k] (`Transition`)."""
        count, n, k = h.shape
        state = np.matmul(h, self.state_t)
        state += self.state_bias
        x = relu_((state[:, :, None] + self.action).reshape(count, n * self.action.shape[2], -1))
        x = relu_(self.norm(_numpy_linear(x, self.second)))
        return h[:, :, None] + _numpy_linear(x, self.third).reshape(count, n, -1, k)

    def step(self, parents: np.ndarray, children: np.ndarray) -> np.ndarray:
        """The update of parents [S, P, H] from their children [S, P A, H] (`Processor.step`)."""
        count, n, hidden = parents.shape
        messages = np.matmul(children.reshape(count, n, -1, hidden), self.sender_t)
        messages += np.matmul(parents, self.receiver_t)[:, :, None]
        messages += self.edge_part  # [S, P, A, H]
        if self.relu:
            relu_(messages)
        out = parents + (messages.sum(axis=2) if self.sum else messages.max(axis=2))
        return out if self.processor_norm is None else self.processor_norm(out)


def _numpy_linear(x: np.ndarray, layer: tuple[np.ndarray, np.ndarray]) -> np.ndarray:
    """`numpy_actor.Linear` of stacked seeds: x [S, N, in] @ W^T [S, in, out] + b [S, 1, out]."""
    out = np.matmul(x, layer[0])
    out += layer[1]
    return out


def _norm(norms: list[LayerNorm]) -> LayerNorm:
    """`numpy_actor.LayerNorm` of stacked seeds (inputs [S, N, F]): their weights [S, 1, F]."""
    stacked = copy.copy(norms[0])
    for name in ("weight", "bias"):
        if getattr(stacked, name) is not None:
            setattr(stacked, name, np.stack([getattr(n, name) for n in norms])[:, None])
    return stacked


def aligned(count: int, rows: int, width: int) -> torch.Tensor:
    """An uninitialised [count, rows, width] whose [rows, width] blocks, one per seed, each
    start on a 64-byte boundary, the address class of a tensor of its own: contiguous where a
    block is a multiple of 64 bytes, else a view with a padded batch stride."""
    block = padded(rows * width)
    if block == rows * width:
        return torch.empty(count, rows, width)
    return torch.empty(count * block).as_strided((count, rows, width), (block, width, 1))


class StackedPPO:
    """A PPO minibatch step of the MLP PPO agent for a group of seeds whose minibatches have
    the same number of rows: forward, the fused PPO loss (`stacked_ppo_loss`), backward and
    gradient clipping, into each seed's flat gradient (see the module docstring for what is
    stacked and what is per seed)."""

    def __init__(self, weights: StackedWeights) -> None:
        self.weights = weights

    def gradients(
        self, seeds: list[int], obs: torch.Tensor, actions: np.ndarray, old_logprobs: np.ndarray,
        advantages: np.ndarray, returns: np.ndarray, old_values: np.ndarray, clip: float,
        clip_value_loss: bool, ent_coef: float, vf_coef: float, logratio_limit: float,
        max_norm: float,
    ) -> np.ndarray:
        """Seeds `seeds` (rows of the stack, [G]) on their minibatches: observations
        [G, B, *obs_shape], the other columns [G, B] (advantages as the loss reads them): their
        gradients, clipped to global norm `max_norm` as `FlatAdam.clip_grad_norm_` clips,
        written to their rows of the flat gradient; their loss terms [G, 6] (loss, policy,
        value, entropy, approx KL, clip fraction). B must be at least `MIN_STACKED_ROWS`."""
        count, rows = obs.shape[:2]
        weights = self.weights
        flat = weights.flat[seeds]  # [G, P']: each seed's parameters at their own offsets
        w = weights.layer_views(flat)
        x = aligned(count, rows, int(np.prod(obs.shape[2:])))
        x.copy_(obs.flatten(2))
        h1 = torch.relu_(_linear(x, w[0], w[1]))
        h2 = torch.relu_(_linear(h1, w[2], w[3]))
        features = _linear(h2, w[4], w[5])
        logits = _linear(features, w[6], w[7])
        values = torch.empty(count, rows, 1)
        for k in range(count):  # the one-column product, seed by seed
            torch.addmm(w[9][k], features[k], w[8][k].t(), out=values[k])
        grad_logits, grad_values, terms = stacked_ppo_loss(
            logits.numpy(), values.squeeze(-1).numpy(), actions, old_logprobs, advantages,
            returns, old_values, clip=clip, clip_value_loss=clip_value_loss, ent_coef=ent_coef,
            vf_coef=vf_coef, logratio_limit=logratio_limit)
        if not np.isfinite(terms[:, 0]).all():
            return terms  # the caller refuses it before any gradient is taken
        grad_out = aligned(count, rows, grad_logits.shape[2])
        grad_out.copy_(torch.from_numpy(grad_logits))
        grad_v = aligned(count, rows, 1)
        grad_v.copy_(torch.from_numpy(grad_values).unsqueeze(-1))
        grads = torch.zeros_like(flat)
        g = weights.layer_views(grads)
        grad_features = stacked_bmm(grad_out, w[6])
        grad_features += grad_v * w[8]  # a product over one column: each entry one product
        grad_h2 = _relu_backward(stacked_bmm(grad_features, w[4]), h2)
        grad_h1 = _relu_backward(stacked_bmm(grad_h2, w[2]), h1)
        # the heads' weight gradients (a few rows: the actions', the critic's) seed by seed
        heads = [torch.stack([grad[k].t().mm(features[k]) for k in range(count)])
                 for grad in (grad_out, grad_v)]
        # each gradient added to a zeroed one, as autograd accumulates it into .grad
        for grad, inputs, i in ((grad_features, h2, 4), (grad_h2, h1, 2), (grad_h1, x, 0)):
            g[i].add_(torch.bmm(grad.transpose(1, 2), inputs))
            g[i + 1].add_(grad.sum(1))
        for grad, weight, i in ((grad_out, heads[0], 6), (grad_v, heads[1], 8)):
            g[i].add_(weight)
            g[i + 1].add_(grad.sum(1))
        grads[:, : weights.size].mul_(
            (max_norm / (torch.linalg.vector_norm(grads[:, : weights.size], dim=1) + 1e-6))
            .clamp_(max=1.0).unsqueeze(1))
        weights.grad[seeds] = grads
        return terms


def _linear(x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor) -> torch.Tensor:
    """x [G, B, in] -> x W^T + b [G, B, out] in an `aligned` buffer (F.linear of each seed:
    the bias copied in, the product added)."""
    out = aligned(x.shape[0], x.shape[1], weight.shape[1])
    out.copy_(bias.unsqueeze(1).expand_as(out))
    return torch.baddbmm(out, x, weight.transpose(1, 2), out=out)


def stacked_bmm(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    """a [G, B, k] @ b [G, k, n] in an `aligned` buffer (as `baddbmm` with beta 0: `bmm` into
    a given buffer took twice as long)."""
    out = aligned(a.shape[0], a.shape[1], b.shape[2])
    return torch.baddbmm(out, a, b, beta=0.0, out=out)


def _relu_backward(grad: torch.Tensor, output: torch.Tensor) -> torch.Tensor:
    """ReLU's backward in place: `grad` zero where the ReLU's `output` is (autograd's
    `threshold_backward`)."""
    return torch.ops.aten.threshold_backward.grad_input(grad, output, 0, grad_input=grad)


@np.errstate(over="ignore", invalid="ignore")  # a diverged loss: inf or NaN, checked after
def stacked_ppo_loss(
    logits: np.ndarray,  # [S, B, A]
    values: np.ndarray,  # [S, B]
    actions: np.ndarray,  # [S, B] int64
    old_logprobs: np.ndarray,  # [S, B]
    advantages: np.ndarray,  # [S, B]
    returns: np.ndarray,  # [S, B]
    old_values: np.ndarray,  # [S, B]
    clip: float,
    clip_value_loss: bool,
    ent_coef: float,
    vf_coef: float,
    logratio_limit: float,
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """`xlvin.accel.fused_ppo_loss` of S seeds' minibatches of B rows each, op for op on the
    stack (NumPy's sums over a row's B values add as over a seed's own [B]): the gradient wrt
    logits [S, B, A] and wrt values [S, B]; terms [S, 6]: loss, policy loss, value loss,
    entropy, approx KL, clip fraction, float32."""
    x, v, adv, ret, v_old = logits, values, advantages, returns, old_values
    n = x.shape[1]
    shifted = x - x.max(axis=-1, keepdims=True)
    logp = shifted - np.log(np.exp(shifted).sum(axis=-1, keepdims=True))
    probs = np.exp(logp)
    entropy = -(probs * logp).sum(axis=-1)  # [S, B]
    taken = (np.arange(actions.size), actions.ravel())  # logp[s, b, a_sb], flat
    raw_logratio = logp.reshape(-1, logp.shape[-1])[taken].reshape(actions.shape) - old_logprobs
    logratio = np.minimum(np.maximum(raw_logratio, -logratio_limit), logratio_limit)
    ratio = np.exp(logratio)
    gain = adv * ratio
    gain_clipped = adv * np.minimum(np.maximum(ratio, 1 - clip), 1 + clip)
    surrogate = np.minimum(gain, gain_clipped)
    error = v - ret
    sq_error = np.square(error)
    if clip_value_loss:
        delta = v - v_old
        delta_clipped = np.minimum(np.maximum(delta, -clip), clip)
        clipped_error = v_old + delta_clipped - ret
        sq_clipped = np.square(clipped_error)
        value_terms = np.maximum(sq_error, sq_clipped)
    else:
        value_terms = sq_error
    ratio_minus_1 = ratio - 1
    kl_terms = ratio_minus_1 - logratio
    clipped = np.abs(ratio_minus_1) > clip
    policy_loss = -surrogate.sum(axis=1) / n
    value_loss = 0.5 * value_terms.sum(axis=1) / n
    mean_entropy = entropy.sum(axis=1) / n
    loss = policy_loss - ent_coef * mean_entropy + vf_coef * value_loss
    terms = np.stack([loss, policy_loss, value_loss, mean_entropy, kl_terms.sum(axis=1) / n,
                      np.count_nonzero(clipped, axis=1) / n], axis=1).astype(x.dtype)
    through_ratio = (gain <= gain_clipped) & (logratio == raw_logratio)
    grad_logprob = np.where(through_ratio, gain, 0.0) * (-1.0 / n)
    if clip_value_loss:
        from_clipped = np.where(delta_clipped == delta, clipped_error, 0.0)
        grad_values = np.where(
            sq_error > sq_clipped, error,
            np.where(sq_error < sq_clipped, from_clipped, 0.5 * (error + from_clipped)),
        )
    else:
        grad_values = error
    grad_logits = probs * ((ent_coef / n) * (logp + entropy[..., None]) - grad_logprob[..., None])
    grad_logits.reshape(-1, grad_logits.shape[-1])[taken] += grad_logprob.ravel()
    return grad_logits, (grad_values * (vf_coef / n)).astype(x.dtype, copy=False), terms
