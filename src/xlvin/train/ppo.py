"""One PPO (clipped surrogate, Schulman et al. 2017) shared by every agent.

Agents differ only in their `ActorCritic` network and its `auxiliary_losses` (e.g. XLVIN's TransE
term), which `ppo_update` adds to the PPO loss on the minibatch's real transitions; it gets both
from `ActorCritic.evaluate`, where an agent may share work between them. Collection
(`xlvin.train.rollout`) and update are separate functions, so the online loop (`train_ppo`) and
a low-data protocol (collect a fixed set of episodes once, update many times) share both.
"""

import time
from collections.abc import Callable
from dataclasses import dataclass, field

import torch
from tqdm import tqdm

from xlvin.config import option
from xlvin.errors import UserError
from xlvin.io.checkpoint import Checkpointer
from xlvin.nn.policy import ActorCritic, TransitionBatch
from xlvin.seeding import seed_everything
from xlvin.train.env_state import env_state, restorable, restore_env_state
from xlvin.train.optim import FlatAdam
from xlvin.train.ppo_loss import ppo_loss
from xlvin.train.rollout import (
    Rollout,
    RolloutState,
    collect_episodes,
    collect_rollout,
    compute_gae,
    evaluate_policy,
    make_vector_env,
    reset_envs,
)

LogFn = Callable[[int, dict[str, float]], None]
#: |log pi_new - log pi_old| is clamped to this before exponentiating (see ppo_update).
LOGRATIO_LIMIT = 20.0


class TrainingDiverged(UserError):
    """A loss became NaN or infinite: training stops before the weights are touched."""


@dataclass
class PPOConfig:
    """PPO hyperparameters (defaults: CleanRL / ikostrikov's PPO, clip 0.2 as in the authors'
    classic-control runs)."""

    num_envs: int = option(4, "parallel environments (sync vector env)")
    num_steps: int = option(128, "steps per env per rollout")
    total_steps: int = option(500_000, "total env steps of online training (all envs)")
    lr: float = option(2.5e-4, "Adam learning rate (Adam eps 1e-5)")
    anneal_lr: bool = option(True, "decay the learning rate linearly to 0 over training")
    gamma: float = option(0.99, "discount factor")
    gae_lambda: float = option(0.95, "GAE lambda")
    num_minibatches: int = option(4, "minibatches per epoch (of the rollout's real transitions)")
    update_epochs: int = option(4, "passes over each rollout")
    clip_coef: float = option(0.2, "surrogate (and value) clipping coefficient")
    clip_value_loss: bool = option(True, "clip the value loss around the old values")
    ent_coef: float = option(0.01, "entropy bonus coefficient")
    vf_coef: float = option(0.5, "value loss coefficient")
    max_grad_norm: float = option(0.5, "global gradient norm clip")
    norm_adv: bool = option(True, "normalise advantages per minibatch")
    torch_threads: int = option(
        1, "torch CPU threads set by train_ppo (1 is fastest for small nets; 0 keeps torch's)"
    )

    def __post_init__(self) -> None:
        checks = [
            (self.num_envs >= 1, "num_envs must be >= 1"),
            (self.num_steps >= 1, "num_steps must be >= 1"),
            (self.total_steps >= 1, "total_steps must be >= 1"),
            (self.lr > 0, "lr must be > 0"),
            (0 <= self.gamma <= 1, "gamma must be in [0, 1]"),
            (0 <= self.gae_lambda <= 1, "gae_lambda must be in [0, 1]"),
            (self.num_minibatches >= 1, "num_minibatches must be >= 1"),
            (self.update_epochs >= 1, "update_epochs must be >= 1"),
            (self.clip_coef > 0, "clip_coef must be > 0"),
            (self.ent_coef >= 0, "ent_coef must be >= 0"),
            (self.vf_coef >= 0, "vf_coef must be >= 0"),
            (self.max_grad_norm > 0, "max_grad_norm must be > 0"),
            (self.torch_threads >= 0, "torch_threads must be >= 0"),
        ]
        for ok, message in checks:
            if not ok:
                raise UserError(f"PPO config: {message}")

    @property
    def batch_size(self) -> int:
        """Env steps per rollout (all envs)."""
        return self.num_envs * self.num_steps

    @property
    def num_updates(self) -> int:
        """Rollout + update iterations of `train_ppo`: total_steps // batch_size (at least 1)."""
        return max(1, self.total_steps // self.batch_size)


def make_optimizer(policy: ActorCritic, cfg: PPOConfig) -> FlatAdam:
    """Adam(lr, eps 1e-5) on the trainable parameters (a frozen executor is left out), laid out
    in one flat buffer (`xlvin.train.optim.FlatAdam`): zeroing, clipping and the Adam step are
    then one op each, not one per tensor, at 16 optimizer steps per rollout."""
    return FlatAdam(policy.parameters(), lr=cfg.lr, eps=1e-5)


#: The per-transition tensors a minibatch is cut from, in the order `ppo_update` gathers them.
_MINIBATCH_FIELDS = ("actions", "rewards", "logprobs", "values", "advantages", "returns")


def ppo_update(
    policy: ActorCritic,
    optimizer: FlatAdam,
    rollout: Rollout,
    cfg: PPOConfig,
    generator: torch.Generator | None = None,
) -> dict[str, float]:
    """`cfg.update_epochs` epochs of minibatch PPO on the real transitions of `rollout`.

    Each epoch permutes the real transitions with `generator` and cuts the permutation into
    `cfg.num_minibatches` consecutive minibatches (gathered once per epoch: every minibatch is
    then a view). The loss of a minibatch is `xlvin.train.ppo_loss.ppo_loss` (clipped surrogate,
    entropy bonus, clipped value loss, advantages normalised per minibatch) plus the agent's
    auxiliary terms on the same real transitions.

    Returns means over minibatches under `losses/<name>`: policy_loss, value_loss, entropy,
    approx_kl, clipfrac, each auxiliary loss term (weighted, as the agent returns it), and
    explained_variance of the old values. Empty dict when the rollout has no real transition.
    """
    # GAE on the whole rollout, then keep the real transitions only: autoreset steps are no
    # (s, a, s') of the MDP and must not enter any loss or the advantage statistics.
    advantages, returns = compute_gae(rollout, cfg.gamma, cfg.gae_lambda)
    valid = rollout.valid
    # Observations are gathered straight from the rollout, once per epoch: row r of the flattened
    # obs [(T + 1) N, ...] is step r // N of env r % N, and its next observation is row r + N.
    # (`rollout.transitions()` would copy every observation twice more; pixels make that count.)
    real_rows = valid.flatten().nonzero().squeeze(1)  # [n], in `rollout.transitions()` order
    data = {
        "actions": rollout.actions[valid], "rewards": rollout.rewards[valid],
        "logprobs": rollout.logprobs[valid], "values": rollout.values[:-1][valid],
        "advantages": advantages[valid], "returns": returns[valid],
    }
    n = real_rows.shape[0]
    if n == 0:
        return {}
    device = next(policy.parameters()).device
    data = {name: tensor.to(device) for name, tensor in data.items()}
    flat_obs = rollout.obs.flatten(0, 1).to(device)
    real_rows, step = real_rows.to(device), rollout.num_envs

    terms_per_minibatch: list[torch.Tensor] = []  # the detached loss terms, then aux terms
    aux_names: list[str] = []
    sizes = [len(part) for part in torch.tensor_split(torch.arange(n), cfg.num_minibatches)]
    for _ in range(cfg.update_epochs):
        order = torch.randperm(n, generator=generator).to(device)
        rows_in_order = real_rows[order]
        epoch = [flat_obs[rows_in_order].split(sizes), flat_obs[rows_in_order + step].split(sizes)]
        epoch += [data[name][order].split(sizes) for name in _MINIBATCH_FIELDS]
        for minibatch in zip(*epoch):
            obs, next_obs, actions, rewards, old_logprobs, old_values, mb_adv, mb_returns = minibatch
            if actions.numel() == 0:
                continue
            if cfg.norm_adv and actions.numel() > 1:
                mb_adv = (mb_adv - mb_adv.mean()) / (mb_adv.std() + 1e-8)
            # The agent's forward and its auxiliary terms (already weighted), on real transitions.
            logits, new_values, aux = policy.forward_with_aux(TransitionBatch(obs, actions, next_obs, rewards))
            loss, terms = ppo_loss(
                logits, new_values, actions, old_logprobs, mb_adv, mb_returns, old_values,
                clip=cfg.clip_coef, clip_value_loss=cfg.clip_value_loss, ent_coef=cfg.ent_coef,
                vf_coef=cfg.vf_coef, logratio_limit=LOGRATIO_LIMIT,
            )
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
            optimizer.clip_grad_norm_(cfg.max_grad_norm)
            optimizer.step()
            aux_names = list(aux)
            terms_per_minibatch.append(torch.stack([
                terms.policy_loss, terms.value_loss, terms.entropy, terms.approx_kl,
                terms.clipfrac, *(t.detach() for t in aux.values()),
            ]))

    names = ["policy_loss", "value_loss", "entropy", "approx_kl", "clipfrac", *aux_names]
    means = torch.stack(terms_per_minibatch).double().mean(0).tolist()  # one host sync for all the metrics
    metrics = {f"losses/{name}": value for name, value in zip(names, means)}
    b_returns, b_values = data["returns"], data["values"]
    var_returns = b_returns.var().item() if n > 1 else 0.0
    metrics["losses/explained_variance"] = (
        1.0 - (b_returns - b_values).var().item() / var_returns if var_returns > 0 else float("nan")
    )
    return metrics


@dataclass
class TrainResult:
    """What `train_ppo` reports at the end."""

    global_step: int
    num_updates: int
    wall_time_s: float
    sps: float  # env steps per second over the whole run
    episode_returns: list[float] = field(default_factory=list)  # every finished episode, in order
    last_metrics: dict[str, float] = field(default_factory=dict)  # metrics of the last update


def train_ppo(
    policy: ActorCritic,
    env_id: str,
    cfg: PPOConfig,
    seed: int,
    log: LogFn | None = None,
    progress: bool = True,
    checkpoint: Checkpointer | None = None,
) -> TrainResult:
    """Online PPO: `cfg.num_updates` times, collect a rollout of `cfg.batch_size` steps, update.

    Seeding: global RNGs via `seed_everything(seed)` (for auxiliary losses that draw from them),
    a dedicated torch.Generator(seed) for action sampling and minibatch order, env i reset with
    seed `seed + i`, the action space with `seed`. With `cfg.torch_threads` fixed, the same seed
    on the same machine gives identical metrics (except the wall-clock `charts/sps`).
    The policy's initial weights are the caller's: seed before building it.

    `log(global_step, metrics)` is called after every update with `losses/...` (see ppo_update),
    `charts/learning_rate`, `charts/sps` and, when episodes finished in that rollout,
    `charts/episodic_return` / `charts/episodic_length` (their means).

    `checkpoint`: saved before the first update and every `checkpoint.every` updates; when its
    file exists the loop continues from it, and the run ends exactly as an uninterrupted one
    for envs whose state `xlvin.train.env_state` restores (classic control); other envs are
    reset with seed `seed + update` instead.
    """
    if cfg.torch_threads > 0:
        torch.set_num_threads(cfg.torch_threads)
    seed_everything(seed)
    generator = torch.Generator().manual_seed(seed)
    envs = make_vector_env(env_id, cfg.num_envs)
    optimizer = make_optimizer(policy, cfg)
    num_updates = cfg.num_updates
    exact_envs = restorable(envs)

    first_update, global_step, elapsed, resumed_at = 0, 0, 0.0, -1
    episode_returns: list[float] = []
    metrics: dict[str, float] = {}
    bar = tqdm(total=num_updates * cfg.batch_size, disable=not progress, unit="step", desc=env_id)
    try:
        state = reset_envs(envs, seed)
        if checkpoint is not None and checkpoint.exists():
            resumed = checkpoint.restore(policy, optimizer, generator)
            loop = resumed.loop
            first_update, global_step, elapsed = loop["update"], loop["global_step"], loop["elapsed"]
            resumed_at = first_update
            episode_returns, metrics = loop["episode_returns"], loop["metrics"]
            if loop["envs"] is not None:
                restore_env_state(envs, loop["envs"])
                obs, autoreset = resumed.tensors["obs"].numpy(), resumed.tensors["autoreset"].numpy()
                state = RolloutState(obs=obs.copy(), autoreset=autoreset.copy())
            else:
                state = reset_envs(envs, seed + first_update)
            bar.update(global_step)
        start = time.perf_counter() - elapsed
        for update in range(first_update, num_updates):
            if checkpoint is not None and checkpoint.due(update) and update != resumed_at:
                loop = {
                    "update": update, "global_step": global_step, "log_step": global_step,
                    "elapsed": time.perf_counter() - start, "episode_returns": episode_returns,
                    "metrics": metrics, "envs": env_state(envs) if exact_envs else None,
                }
                tensors = {"obs": torch.from_numpy(state.obs), "autoreset": torch.from_numpy(state.autoreset)}
                checkpoint.save(policy, optimizer, generator, loop, tensors)

            lr = cfg.lr * (1.0 - update / num_updates) if cfg.anneal_lr else cfg.lr
            for group in optimizer.param_groups:
                group["lr"] = lr

            rollout = collect_rollout(envs, policy, cfg.num_steps, state, generator)
            global_step += cfg.batch_size
            metrics = ppo_update(policy, optimizer, rollout, cfg, generator)

            metrics["charts/learning_rate"] = lr
            if rollout.episode_returns:
                episode_returns += rollout.episode_returns
                metrics["charts/episodic_return"] = _mean(rollout.episode_returns)
                metrics["charts/episodic_length"] = _mean(rollout.episode_lengths)
            metrics["charts/sps"] = global_step / (time.perf_counter() - start)
            if log is not None:
                log(global_step, metrics)
            bar.update(cfg.batch_size)
            if episode_returns:
                bar.set_postfix(ret=f"{_mean(episode_returns[-20:]):.1f}", refresh=False)
    finally:
        bar.close()
        envs.close()
    wall = time.perf_counter() - start
    return TrainResult(
        global_step=global_step,
        num_updates=num_updates,
        wall_time_s=wall,
        sps=global_step / wall if wall > 0 else 0.0,
        episode_returns=episode_returns,
        last_metrics=metrics,
    )


def _mean(values: list[float] | list[int]) -> float:
    return float(sum(values)) / len(values)


__all__ = [
    "LogFn",
    "PPOConfig",
    "TrainResult",
    "collect_episodes",
    "evaluate_policy",
    "ppo_update",
    "train_ppo",
]
