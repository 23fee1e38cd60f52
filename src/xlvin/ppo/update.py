"""One PPO (clipped surrogate, Schulman et al. 2017) shared by every agent: its hyperparameters
and its update.

Agents differ only in their `ActorCritic` network and its auxiliary losses (e.g. XLVIN's TransE
term), which `ppo_update` adds to the PPO loss on the minibatch's real transitions; it gets both
from `ActorCritic.forward_with_aux`. Collecting the data is `xlvin.ppo.collect`, the loop that
alternates the two for every protocol is `xlvin.ppo.loop`.

With `accelerate` (the default) the update uses, on CPU, the fused loss of
`xlvin.accel.fused_ppo_loss` (Discrete actions; other action spaces take the readable loss) and
the flat Adam of `xlvin.accel.flat_adam`; both compute what the readable `ppo_loss` and
`torch.optim.Adam` compute (tests/test_ppo_loss.py), and each proves it the first time it is
used in a process (`xlvin.accel.proof`), the readable code running instead where it differs.
"""

import torch

from xlvin.accel.flat_adam import FlatAdam
from xlvin.accel.fused_ppo_loss import fused_ppo_loss
from xlvin.accel.image_layout import channels_last
from xlvin.accel.proof import flat_adam_proven, loss_proven
from xlvin.errors import TrainingDiverged
from xlvin.nn.distributions import Categorical
from xlvin.nn.policy import ActorCritic
from xlvin.nn.ppo_loss import ppo_loss
from xlvin.ppo.advantages import compute_gae, monte_carlo_returns
from xlvin.ppo.config import PPOConfig
from xlvin.ppo.storage import Minibatch, Rollout

#: |log pi_new - log pi_old| is clamped to this before exponentiating (see ppo_loss).
LOGRATIO_LIMIT = 20.0

Optimizer = torch.optim.Adam | FlatAdam


def uses_accelerators(policy: ActorCritic, cfg: PPOConfig) -> bool:
    """Whether the update takes the fused loss, flat Adam and channels-last frames: asked for, and on CPU (the fused
    loss computes in NumPy, which on a GPU would sync the device every minibatch)."""
    param = next(policy.parameters(), None)
    return cfg.accelerate and (param is None or param.device.type == "cpu")


def make_optimizer(policy: ActorCritic, cfg: PPOConfig) -> Optimizer:
    """Adam(lr, eps) on the trainable parameters (a frozen executor is left out)."""
    params = [p for p in policy.parameters() if p.requires_grad]
    if uses_accelerators(policy, cfg) and flat_adam_proven(cfg.lr, cfg.adam_eps,
                                                           cfg.max_grad_norm):
        return FlatAdam(params, lr=cfg.lr, eps=cfg.adam_eps)
    return torch.optim.Adam(params, lr=cfg.lr, eps=cfg.adam_eps)


def set_learning_rate(optimizer: Optimizer, lr: float) -> None:
    for group in optimizer.param_groups:
        group["lr"] = lr


def clip_gradients(optimizer: Optimizer, max_norm: float) -> None:
    """Scale the gradient of the optimizer's parameters to global L2 norm <= max_norm."""
    if isinstance(optimizer, FlatAdam):
        optimizer.clip_grad_norm_(max_norm)
    else:
        params = [p for group in optimizer.param_groups for p in group["params"]]
        torch.nn.utils.clip_grad_norm_(params, max_norm)


def ppo_update(
    policy: ActorCritic,
    optimizer: Optimizer,
    rollout: Rollout,
    cfg: PPOConfig,
    generator: torch.Generator | None = None,
) -> dict[str, float]:
    """`cfg.update_epochs` epochs of minibatch PPO on the real transitions of `rollout`.

    Advantages are GAE or Monte Carlo (`cfg.advantages`) over the whole rollout (autoreset steps
    get none and are left out of every minibatch), normalised per minibatch or once over the
    batch. Each epoch permutes the real transitions with `generator` and cuts them into
    `cfg.num_minibatches` minibatches, or into minibatches of `cfg.minibatch_size` with the last
    partial one dropped (`Rollout.minibatches`). The loss of a minibatch is the PPO loss
    (`ppo_loss`: clipped surrogate, entropy bonus, clipped value loss) plus the agent's auxiliary
    terms on the same transitions.

    Returns means over minibatches under `losses/<name>`: policy_loss, value_loss, entropy,
    approx_kl, clipfrac, each auxiliary loss term (weighted, as the agent returns it), and
    explained_variance of the old values. Empty dict when the rollout has no real transition.
    """
    advantages, returns = estimate_advantages(rollout, cfg)
    if cfg.norm_adv and cfg.norm_adv_batch:
        advantages = normalise_over_batch(advantages, rollout.valid)
    device = next(policy.parameters()).device
    logged: list[torch.Tensor] = []  # per minibatch: the detached loss terms, then aux terms
    aux_names: list[str] = []
    for _ in range(cfg.update_epochs):
        minibatches = rollout.minibatches(
            advantages, returns, cfg.num_minibatches, generator, device, cfg.minibatch_size
        )
        for mb in minibatches:
            terms, aux_names = minibatch_step(policy, optimizer, mb, cfg)
            logged.append(terms)
    if not logged:
        return {}
    names = ["policy_loss", "value_loss", "entropy", "approx_kl", "clipfrac", *aux_names]
    means = torch.stack(logged).double().mean(0).tolist()  # one host sync for all the metrics
    metrics = {f"losses/{name}": value for name, value in zip(names, means)}
    metrics["losses/explained_variance"] = explained_variance(
        returns[rollout.valid], rollout.old_values()
    )
    return metrics


def minibatch_step(
    policy: ActorCritic, optimizer: Optimizer, mb: Minibatch, cfg: PPOConfig
) -> tuple[torch.Tensor, list[str]]:
    """One optimiser step on one minibatch (see `ppo_update`): the detached loss terms
    [policy_loss, value_loss, entropy, approx_kl, clipfrac, *aux terms] and the aux terms' names."""
    accelerated = isinstance(optimizer, FlatAdam)  # `uses_accelerators`
    distribution = policy.action_distribution()
    fused = accelerated and isinstance(distribution, Categorical)  # the fused loss's only one
    adv = mb.advantages
    if cfg.norm_adv and not cfg.norm_adv_batch and adv.numel() > 1:
        adv = (adv - adv.mean()) / (adv.std() + 1e-8)
    batch = channels_last(mb.transitions()) if accelerated else mb.transitions()
    logits, new_values, aux = policy.forward_with_aux(batch)
    args = (logits, new_values, mb.actions, mb.logprobs, adv, mb.returns, mb.values)
    kwargs = dict(clip=cfg.clip_coef, clip_value_loss=cfg.clip_value_loss,
                  ent_coef=cfg.ent_coef, vf_coef=cfg.vf_coef, logratio_limit=LOGRATIO_LIMIT)
    if fused:  # proved against the readable loss on the first minibatch a process meets
        fused = loss_proven(fused_ppo_loss, ppo_loss, distribution, args, kwargs)
    if fused:
        loss, terms = fused_ppo_loss(*args, **kwargs)
    else:
        loss, terms = ppo_loss(*args, **kwargs, distribution=distribution)
    for term in aux.values():
        loss = loss + term
    if not torch.isfinite(loss):
        raise diverged(terms.policy_loss.item(), terms.value_loss.item(),
                       [t.item() for t in aux.values()])
    optimizer.zero_grad()
    loss.backward()
    clip_gradients(optimizer, cfg.max_grad_norm)
    optimizer.step()
    return torch.stack([
        terms.policy_loss, terms.value_loss, terms.entropy, terms.approx_kl,
        terms.clipfrac, *(t.detach() for t in aux.values()),
    ]), list(aux)


def diverged(policy_loss: float, value_loss: float, aux: list[float]) -> TrainingDiverged:
    """The error of a minibatch whose loss is not finite."""
    return TrainingDiverged(
        f"non-finite PPO loss (policy {policy_loss:.3g}, value {value_loss:.3g}, aux {aux}); "
        "weights left at their last finite values"
    )


def estimate_advantages(rollout: Rollout, cfg: PPOConfig) -> tuple[torch.Tensor, torch.Tensor]:
    """(advantages, returns) [T, N] of `rollout` by `cfg.advantages`."""
    if cfg.advantages == "monte_carlo":
        return monte_carlo_returns(rollout, cfg.gamma, cfg.time_limit_terminal)
    return compute_gae(rollout, cfg.gamma, cfg.gae_lambda, cfg.time_limit_terminal)


def normalise_over_batch(advantages: torch.Tensor, valid: torch.Tensor) -> torch.Tensor:
    """(A - mean) / (std + 1e-5) over the real transitions (invalid steps stay 0)."""
    real = advantages[valid]
    if real.numel() < 2:
        return advantages
    return torch.where(valid, (advantages - real.mean()) / (real.std() + 1e-5), 0.0)


def explained_variance(returns: torch.Tensor, values: torch.Tensor) -> float:
    """1 - Var(R - V) / Var(R) over the real transitions (NaN when Var(R) is 0)."""
    var_returns = returns.var().item() if len(returns) > 1 else 0.0
    if var_returns <= 0:
        return float("nan")
    return 1.0 - (returns - values).var().item() / var_returns
