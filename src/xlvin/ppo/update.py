"""One PPO (clipped surrogate, Schulman et al. 2017) shared by every agent: its hyperparameters
and its update.

Agents differ only in their `ActorCritic` network and its auxiliary losses (e.g. XLVIN's TransE
term), which `ppo_update` adds to the PPO loss on the minibatch's real transitions; it gets both
from `ActorCritic.forward_with_aux`. Collecting the data is `xlvin.ppo.collect`, the loop that
alternates the two for every protocol is `xlvin.ppo.loop`.

With `accelerate` (the default) the update uses, on CPU, the fused loss of
`xlvin.accel.fused_ppo_loss` (Discrete actions; other action spaces take the readable loss) and
the flat Adam of `xlvin.accel.flat_adam`; both compute what the readable `ppo_loss` and
`torch.optim.Adam` compute (tests/test_ppo_loss.py).
"""

from dataclasses import dataclass

import torch

from xlvin.accel.flat_adam import FlatAdam
from xlvin.accel.fused_ppo_loss import fused_ppo_loss
from xlvin.accel.image_layout import channels_last
from xlvin.config import option
from xlvin.errors import TrainingDiverged, UserError
from xlvin.nn.distributions import Categorical
from xlvin.nn.policy import ActorCritic
from xlvin.nn.ppo_loss import ppo_loss
from xlvin.ppo.advantages import compute_gae, monte_carlo_returns
from xlvin.ppo.storage import Rollout

#: |log pi_new - log pi_old| is clamped to this before exponentiating (see ppo_loss).
LOGRATIO_LIMIT = 20.0

Optimizer = torch.optim.Adam | FlatAdam
#: The most parallel envs a run may have: a checkpoint's JSON header holds every env's state, and
#: safetensors refuses headers over 100 MB.
MAX_ENVS = 1024
#: The most CPU threads a run may ask for: far more than any machine's cores, and few enough to
#: start (100,000 crash torch's thread pool).
MAX_THREADS = 1024


@dataclass
class PPOConfig:
    """PPO hyperparameters (defaults: CleanRL / ikostrikov's PPO, clip 0.2 as in the authors'
    classic-control runs)."""

    num_envs: int = option(4, "parallel environments (sync vector env)")
    num_steps: int = option(128, "steps per env per rollout")
    total_steps: int = option(
        500_000, "total env steps of online training (all envs); a new run rounds it up to whole "
        "rollouts of num_envs x num_steps"
    )
    lr: float = option(2.5e-4, "Adam learning rate")
    adam_eps: float = option(1e-5, "Adam epsilon")
    anneal_lr: bool = option(True, "decay the learning rate linearly to 0 over training")
    gamma: float = option(0.99, "discount factor")
    advantages: str = option(
        "gae", "advantage estimator: 'gae' (GAE(lambda)), or 'monte_carlo' (discounted returns "
        "bootstrapped from V at the end of the data, advantage = return - V_old: the authors' "
        "code, ikostrikov's use_gae=False)", choices=("gae", "monte_carlo"),
    )
    gae_lambda: float = option(0.95, "GAE lambda")
    time_limit_terminal: bool = option(
        False, "treat a time limit (truncation) as a termination: no bootstrap from V(final "
        "observation) (the authors' code, ikostrikov's use_proper_time_limits=False)"
    )
    num_minibatches: int = option(4, "minibatches per epoch (of the rollout's real transitions)")
    minibatch_size: int = option(
        0, "0: cut each epoch into num_minibatches; N > 0: minibatches of N real transitions, "
        "the last partial one dropped (the authors' code: 128, drop_last=True)"
    )
    update_epochs: int = option(4, "passes over each rollout")
    clip_coef: float = option(0.2, "surrogate (and value) clipping coefficient")
    clip_value_loss: bool = option(True, "clip the value loss around the old values")
    ent_coef: float = option(0.01, "entropy bonus coefficient")
    vf_coef: float = option(0.5, "value loss coefficient")
    max_grad_norm: float = option(0.5, "global gradient norm clip")
    target_kl: float = option(
        0.0, "stop a round's remaining updates once an update's mean approx KL to the collecting "
        "policy exceeds this (0: never; SB3's / CleanRL's early stopping, on the round's data)"
    )
    norm_adv: bool = option(True, "normalise advantages (per minibatch, or see norm_adv_batch)")
    norm_adv_batch: bool = option(
        False, "normalise advantages once over all the update's real transitions, "
        "(A - mean) / (std + 1e-5), instead of per minibatch (the authors' code)"
    )
    torch_threads: int = option(
        1, "CPU threads of a training process for torch and NumPy's BLAS (1 is fastest for small "
        "nets; 0 keeps the libraries' defaults)"
    )
    norm_obs: bool | None = option(
        None, "normalise observations by their running mean and std, clipped to +-clip_obs (the "
        "statistics are saved with the model and frozen outside training); unset: on for Box "
        "actions with flat observations (SB3's / CleanRL's MuJoCo presets), off otherwise"
    )
    norm_reward: bool | None = option(
        None, "scale rewards by the running std of the discounted return, clipped to "
        "+-clip_reward; unset: on for Box actions (SB3's / CleanRL's MuJoCo presets)"
    )
    clip_obs: float = option(10.0, "bound of the normalised observations")
    clip_reward: float = option(10.0, "bound of the scaled rewards")
    log_std_init: float = option(
        0.0, "Box actions: initial log standard deviation of the Gaussian policy"
    )
    use_sde: bool = option(
        False, "Box actions: explore with generalized state-dependent exploration (gSDE, Raffin "
        "et al. 2022: noise = the actor's features times a noise matrix held for "
        "sde_sample_freq steps) in place of independent Gaussian noise at every step"
    )
    sde_sample_freq: int = option(
        -1, "gSDE: draw each env's noise matrix anew every N steps (-1: once per rollout)"
    )
    atari_vector: str = option(
        "gym", "how Atari envs (xlvin/<Game>-v5, xlvin/<Game>Train-v4) are stepped: 'gym' "
        "(gymnasium's wrappers, resumable) or 'ale' (ale-py's C++ vector env: faster, the same "
        "frames but other no-op draws at reset; a run cannot resume)", choices=("gym", "ale"),
    )
    accelerate: bool = option(
        True, "on CPU, act with the NumPy weight snapshot and update with the fused loss and flat "
        "Adam of xlvin.accel (same results up to float rounding; false: the readable code only)"
    )

    def __post_init__(self) -> None:
        checks = [
            (1 <= self.num_envs <= MAX_ENVS, f"num_envs must be in [1, {MAX_ENVS}]"),
            (self.num_steps >= 1, "num_steps must be >= 1"),
            (self.total_steps >= 1, "total_steps must be >= 1"),
            (self.lr > 0, "lr must be > 0"),
            (self.adam_eps > 0, "adam_eps must be > 0"),
            (0 <= self.gamma <= 1, "gamma must be in [0, 1]"),
            (0 <= self.gae_lambda <= 1, "gae_lambda must be in [0, 1]"),
            (self.num_minibatches >= 1, "num_minibatches must be >= 1"),
            (self.minibatch_size >= 0, "minibatch_size must be >= 0"),
            (self.advantages in ("gae", "monte_carlo"), "advantages must be gae or monte_carlo"),
            (self.atari_vector in ("gym", "ale"), "atari_vector must be gym or ale"),
            (self.update_epochs >= 1, "update_epochs must be >= 1"),
            (self.clip_coef > 0, "clip_coef must be > 0"),
            (self.ent_coef >= 0, "ent_coef must be >= 0"),
            (self.vf_coef >= 0, "vf_coef must be >= 0"),
            (self.max_grad_norm > 0, "max_grad_norm must be > 0"),
            (self.target_kl >= 0, "target_kl must be >= 0"),
            (0 <= self.torch_threads <= MAX_THREADS,
             f"torch_threads must be in [0, {MAX_THREADS}]"),
            (self.clip_obs > 0 and self.clip_reward > 0, "clip_obs and clip_reward must be > 0"),
            (self.sde_sample_freq == -1 or self.sde_sample_freq >= 1,
             "sde_sample_freq must be -1 (once per rollout) or >= 1"),
        ]
        for ok, message in checks:
            if not ok:
                raise UserError(f"PPO config: {message}")

    def normalises(self, box_actions: bool) -> tuple[bool, bool]:
        """(norm_obs, norm_reward) as set, or where unset, on for Box actions."""
        return (box_actions if self.norm_obs is None else self.norm_obs,
                box_actions if self.norm_reward is None else self.norm_reward)

    @property
    def batch_size(self) -> int:
        """Env steps per rollout (all envs)."""
        return self.num_envs * self.num_steps

    @property
    def num_updates(self) -> int:
        """Rollout + update iterations of `train_ppo`: total_steps // batch_size (at least 1)."""
        return max(1, self.total_steps // self.batch_size)


def uses_accelerators(policy: ActorCritic, cfg: PPOConfig) -> bool:
    """Whether the update takes the fused loss, flat Adam and channels-last frames: asked for, and on CPU (the fused
    loss computes in NumPy, which on a GPU would sync the device every minibatch)."""
    param = next(policy.parameters(), None)
    return cfg.accelerate and (param is None or param.device.type == "cpu")


def make_optimizer(policy: ActorCritic, cfg: PPOConfig) -> Optimizer:
    """Adam(lr, eps) on the trainable parameters (a frozen executor is left out)."""
    params = [p for p in policy.parameters() if p.requires_grad]
    if uses_accelerators(policy, cfg):
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
    accelerated = isinstance(optimizer, FlatAdam)  # `uses_accelerators`
    distribution = policy.action_distribution()
    fused = accelerated and isinstance(distribution, Categorical)  # the fused loss's only one
    device = next(policy.parameters()).device
    logged: list[torch.Tensor] = []  # per minibatch: the detached loss terms, then aux terms
    aux_names: list[str] = []
    for _ in range(cfg.update_epochs):
        minibatches = rollout.minibatches(
            advantages, returns, cfg.num_minibatches, generator, device, cfg.minibatch_size
        )
        for mb in minibatches:
            adv = mb.advantages
            if cfg.norm_adv and not cfg.norm_adv_batch and adv.numel() > 1:
                adv = (adv - adv.mean()) / (adv.std() + 1e-8)
            batch = channels_last(mb.transitions()) if accelerated else mb.transitions()
            logits, new_values, aux = policy.forward_with_aux(batch)
            args = (logits, new_values, mb.actions, mb.logprobs, adv, mb.returns, mb.values)
            kwargs = dict(clip=cfg.clip_coef, clip_value_loss=cfg.clip_value_loss,
                          ent_coef=cfg.ent_coef, vf_coef=cfg.vf_coef, logratio_limit=LOGRATIO_LIMIT)
            if fused:
                loss, terms = fused_ppo_loss(*args, **kwargs)
            else:
                loss, terms = ppo_loss(*args, **kwargs, distribution=distribution)
            for term in aux.values():
                loss = loss + term
            if not torch.isfinite(loss):
                raise TrainingDiverged(
                    f"non-finite PPO loss (policy {terms.policy_loss.item():.3g}, value "
                    f"{terms.value_loss.item():.3g}, aux {[t.item() for t in aux.values()]}); "
                    "weights left at their last finite values"
                )
            optimizer.zero_grad()
            loss.backward()
            clip_gradients(optimizer, cfg.max_grad_norm)
            optimizer.step()
            aux_names = list(aux)
            logged.append(torch.stack([
                terms.policy_loss, terms.value_loss, terms.entropy, terms.approx_kl,
                terms.clipfrac, *(t.detach() for t in aux.values()),
            ]))
    if not logged:
        return {}
    names = ["policy_loss", "value_loss", "entropy", "approx_kl", "clipfrac", *aux_names]
    means = torch.stack(logged).double().mean(0).tolist()  # one host sync for all the metrics
    metrics = {f"losses/{name}": value for name, value in zip(names, means)}
    metrics["losses/explained_variance"] = explained_variance(
        returns[rollout.valid], rollout.old_values()
    )
    return metrics


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
