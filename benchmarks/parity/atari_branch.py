"""Branches from one SB3 Freeway checkpoint: where our PPO and SB3's part after the first points.

    python -m benchmarks.parity.atari_branch start --seed 1 --points 2 --start START.zip
    python -m benchmarks.parity.atari_branch run --start START.zip --branches 8 --updates 30
    python -m benchmarks.parity.atari_branch report --out results/parity/freeway-branches/sb3-seed1
    python -m benchmarks.parity.atari_branch clipping --seed 1 --updates 8

`clipping` checks the premise below on our own run from scratch: it makes each update twice from
one state, with the value loss clipped and unclipped, and compares the weights.

Before Freeway's first point the two updates are the same (every reward is 0); the seeds part
after it. This experiment starts three learners from the same state just after the first points
and trains each for `--updates` more updates on fresh games, `--branches` times with other env and
sampling seeds (branch B: seed 10,000 + 1,000 B for every learner: the same games at reset; our two
learners also draw the same sampling noise, SB3 its own). `start` makes that
state: SB3's PPO trained from scratch with the 1M run's settings until the first update that
learned from `--points` points, saved with its weights AND Adam moments:

- `sb3`: SB3's PPO continuing (its own loss: value loss unclipped);
- `ours`: our Atari PPO (`xlvin.experiments.atari.ATARI_PPO`, the value loss clipped around the old
  values) on SB3's weights and Adam moments copied into our network and FlatAdam;
- `ours-unclipped`: the same with the value loss unclipped, SB3's.

Every learner keeps the 1M run's learning-rate schedule (lr (1 - u / N) at update u of N = 976)
and plays the same training env (`xlvin/FreewayTrain-v4`, env i reset with seed + i). What each
update records: the rollout's reward (points scored by the 8 envs in its 1,024 transitions: a
policy that crosses scores ~11 per rollout), the entropy and value loss of the update.
RUNS/<learner>/branch<B>.json per branch (a finished branch is not rerun); OUT/branches.{json,md}.
Requires the `bench` extra (stable-baselines3); the copy of SB3's state into ours is tested in
tests/test_sb3_update.py (skipped without SB3, as in CI).
"""

import argparse
import json
from pathlib import Path
from typing import Any

import numpy as np
import torch

from benchmarks.parity.atari import (
    BUDGET,
    ROOT,
    atari_ppo,
    load_model,
    make_envs,
    new_model,
    our_network,
    ours_from_sb3,
    rollout_size,
)

LEARNERS = ("sb3", "ours", "ours-unclipped")
#: Updates of the 1M-transition run whose learning-rate schedule every branch keeps (976).
BUDGET_UPDATES = BUDGET // rollout_size()


def branch_seed(branch: int) -> int:
    return 10_000 + 1_000 * branch


def load_sb3(start: Path, seed: int) -> Any:
    """SB3's model at the checkpoint, on fresh envs seeded with `seed`, with the 1M schedule."""
    from stable_baselines3.common.utils import set_random_seed

    envs = make_envs(seed)
    model = load_model(start, BUDGET_UPDATES, envs)
    set_random_seed(seed)
    envs.seed(seed)
    return model


def sb3_losses(model: Any) -> dict[str, float]:
    """Entropy and value loss (ours: 1/2 MSE) of SB3's last update, from its logger."""
    values = model.logger.name_to_value
    return {"entropy": -float(values["train/entropy_loss"]),
            "value_loss": float(values["train/value_loss"]) / 2}


def run_sb3(start: Path, seed: int, updates: int) -> list[dict[str, float]]:
    """SB3 continuing for `updates` updates; per update: reward of its rollout, entropy, value loss."""
    from stable_baselines3.common.callbacks import BaseCallback

    model = load_sb3(start, seed)
    rows: list[dict[str, float]] = []

    class Record(BaseCallback):
        def _on_step(self) -> bool:
            return len(rows) < updates  # stops at the first step after the last update

        def _on_rollout_start(self) -> None:
            if rows:  # the update that followed rows[-1]
                rows[-1].update(sb3_losses(self.model))

        def _on_rollout_end(self) -> None:
            rows.append({"reward": float(self.model.rollout_buffer.rewards.sum())})

    model.learn(BUDGET_UPDATES * rollout_size() - model.num_timesteps, callback=Record(),
                reset_num_timesteps=False)
    if "entropy" not in rows[-1]:  # the budget ended first: no rollout started after the update
        rows[-1].update(sb3_losses(model))
    return rows


def our_state(start: Path) -> tuple[dict[str, torch.Tensor], dict[str, Any], int]:
    """SB3's weights (our names), Adam state (our FlatAdam's layout) and update count."""
    model = load_model(start, BUDGET_UPDATES)  # no envs: only its state is read
    policy = model.policy
    weights = ours_from_sb3(policy.state_dict())
    names = {id(p): n for n, p in policy.named_parameters()}
    sb3_state = policy.optimizer.state_dict()["state"]
    by_name = {names[id(p)]: sb3_state[i] for i, p in enumerate(policy.parameters())}
    moments = {}
    for key in ("exp_avg", "exp_avg_sq"):
        theirs = ours_from_sb3({n: s[key] for n, s in by_name.items()})
        moments[key] = torch.cat([theirs[n].reshape(-1) for n in weights])  # FlatAdam's order
    step = next(iter(by_name.values()))["step"]
    adam = {"state": {0: {"step": torch.as_tensor(step, dtype=torch.float32), **moments}},
            "param_groups": [{"lr": atari_ppo()["lr"], "betas": (0.9, 0.999),
                              "eps": atari_ppo()["adam_eps"], "params": [0]}]}
    return weights, adam, model.num_timesteps // rollout_size()


def our_learner(clip_value_loss: bool) -> tuple[Any, torch.nn.Module, Any]:
    """Our Atari PPO's config (the 1M budget), fresh network (`our_network`) and optimizer."""
    from xlvin.ppo.update import PPOConfig, make_optimizer

    cfg = PPOConfig(total_steps=BUDGET, clip_value_loss=clip_value_loss, **atari_ppo())
    agent = our_network()
    return cfg, agent, make_optimizer(agent, cfg)


def our_lr(cfg: Any, update: int) -> float:
    """The 1M run's learning rate at `update`: lr (1 - u / N)."""
    return cfg.lr * (1.0 - update / BUDGET_UPDATES)


def our_envs(seed: int) -> tuple[Any, Any]:
    """Our 8 training envs of Freeway, reset with seed + i, and their state."""
    from xlvin.envs.atari import atari_train_id
    from xlvin.ppo.collect import make_vector_env, reset_envs

    envs = make_vector_env(atari_train_id("Freeway"), atari_ppo()["num_envs"])
    return envs, reset_envs(envs, seed)


def run_ours(start: Path, seed: int, updates: int, clip_value_loss: bool) -> list[dict[str, float]]:
    """Our PPO update from SB3's state for `updates` updates (production path: accelerated)."""
    from xlvin.ppo.collect import collect_rollout
    from xlvin.ppo.update import ppo_update, set_learning_rate

    weights, adam, done = our_state(start)
    cfg, agent, optimizer = our_learner(clip_value_loss)
    agent.load_state_dict(weights)
    optimizer.load_state_dict(adam)
    envs, state = our_envs(seed)
    generator = torch.Generator().manual_seed(seed)
    rows = []
    try:
        for u in range(done, done + updates):
            set_learning_rate(optimizer, our_lr(cfg, u))
            rollout = collect_rollout(envs, agent, cfg.num_steps, state, generator, cfg.accelerate)
            metrics = ppo_update(agent, optimizer, rollout, cfg, generator)
            rows.append({"reward": float(rollout.rewards.sum()),
                         "entropy": metrics["losses/entropy"],
                         "value_loss": metrics["losses/value_loss"]})
    finally:
        envs.close()
    return rows


def clipping(seed: int, updates: int, out: Path) -> None:
    """Does the value loss's clipping change our update before Freeway's first point? From our
    fresh network, each of the first `updates` updates is made twice from the same weights, Adam
    state, rollout and minibatch order, once with the value loss clipped (ours) and once
    unclipped (SB3's), and the two results compared weight by weight; training goes on along the
    clipped one. OUT/clipping-seed<S>.json."""
    from xlvin.ppo.collect import collect_rollout
    from xlvin.ppo.update import ppo_update, set_learning_rate

    torch.set_num_threads(1)
    cfg, agent, optimizer = our_learner(clip_value_loss=True)
    unclipped_cfg, other, other_optimizer = our_learner(clip_value_loss=False)
    envs, state = our_envs(seed)
    generator = torch.Generator().manual_seed(seed)
    rows = []
    try:
        for u in range(updates):
            lr = our_lr(cfg, u)
            set_learning_rate(optimizer, lr)
            rollout = collect_rollout(envs, agent, cfg.num_steps, state, generator, cfg.accelerate)
            other.load_state_dict(agent.state_dict())
            other_optimizer.load_state_dict(optimizer.state_dict())
            set_learning_rate(other_optimizer, lr)
            other_generator = torch.Generator()
            other_generator.set_state(generator.get_state())
            metrics = ppo_update(agent, optimizer, rollout, cfg, generator)
            ppo_update(other, other_optimizer, rollout, unclipped_cfg, other_generator)
            apart = max(float((a - b).abs().max()) for a, b in
                        zip(agent.state_dict().values(), other.state_dict().values()))
            rows.append({"update": u, "reward": float(rollout.rewards.sum()),
                         "value_loss": metrics["losses/value_loss"],
                         "entropy": metrics["losses/entropy"], "max_weight_apart": apart})
            print(" ".join(f"{k} {v:.3g}" for k, v in rows[-1].items()), flush=True)
    finally:
        envs.close()
    out.mkdir(parents=True, exist_ok=True)
    (out / f"clipping-seed{seed}.json").write_text(json.dumps({"seed": seed, "rows": rows},
                                                              indent=1))


def make_start(seed: int, points: int, path: Path) -> None:
    """Train SB3's PPO from scratch (the 1M run's settings and schedule, `seed`) until the first
    update that learned from a rollout in which the training games' points so far reached
    `points`; save that model (weights and Adam state) to `path`."""
    from stable_baselines3.common.callbacks import BaseCallback

    torch.set_num_threads(1)
    model = new_model(seed, BUDGET_UPDATES)
    scored = []

    class UntilPoints(BaseCallback):
        def _on_step(self) -> bool:
            return sum(scored) < points

        def _on_rollout_end(self) -> None:
            scored.append(float(self.model.rollout_buffer.rewards.sum()))

    model.learn(BUDGET_UPDATES * rollout_size(), callback=UntilPoints())
    path.parent.mkdir(parents=True, exist_ok=True)
    model.save(path)
    print(f"start: seed {seed}, {model.num_timesteps:,} transitions, {len(scored)} updates, "
          f"points per rollout {scored}", flush=True)


def run(start: Path, branches: range, updates: int, runs: Path, learners: list[str]) -> None:
    torch.set_num_threads(1)
    for branch in branches:
        for learner in learners:
            path = runs / learner / f"branch{branch}.json"
            if path.is_file():
                continue
            seed = branch_seed(branch)
            rows = (run_sb3(start, seed, updates) if learner == "sb3"
                    else run_ours(start, seed, updates, clip_value_loss=learner == "ours"))
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(json.dumps({"learner": learner, "branch": branch, "seed": seed,
                                        "start": str(start), "rows": rows}))
            rewards = [r["reward"] for r in rows]
            print(f"{learner} branch {branch}: rewards per rollout {rewards}", flush=True)


def report(runs: Path, out: Path) -> None:
    """OUT/branches.{json,md}: every branch's points per rollout in four blocks of updates, the
    mean over its last 5 updates, its entropy and value loss at the end; per learner the IQM of
    the last-5 means over its branches [95 % bootstrap CI], the branches that ended at 0, and
    P(learner's last-5 mean > ours') over pairs of branches."""
    from xlvin.stats import improvement_over, improvement_text, interval_text, summarize

    found = {learner: [json.loads(p.read_text())
                       for p in sorted((runs / learner).glob("branch*.json"))]
             for learner in LEARNERS}
    updates = max((len(b["rows"]) for bs in found.values() for b in bs), default=0)
    blocks = np.array_split(np.arange(1, updates + 1), 4)
    labels = " / ".join(f"{b[0]}-{b[-1]}" for b in blocks if len(b))
    lines = ["# Freeway: branches from one state just after the first points", "",
             "Each learner continues the same SB3 state (weights and Adam moments) on fresh games; "
             "branch B plays seed 10,000 + 1,000 B under every learner. Points: the 8 envs' "
             "points in a rollout of 1,024 transitions (a policy that crosses scores ~11). "
             "`benchmarks/parity/atari_branch.py` says how.", "",
             f"| learner | branch | points per rollout, updates {labels} | last 5 updates | "
             "entropy at the end | value loss at the end |", "|---|---|---|---|---|---|"]
    summary: dict[str, Any] = {}
    for learner, branches in found.items():
        last5 = []
        for b in branches:
            rewards = np.array([r["reward"] for r in b["rows"]])
            means = " / ".join(f"{x.mean():.1f}" for x in np.array_split(rewards, 4))
            last5.append(float(rewards[-5:].mean()))
            end = b["rows"][-1]
            lines.append(f"| {learner} | {b['branch']} | {means} | {last5[-1]:.1f} | "
                         f"{end['entropy']:.3f} | {end['value_loss']:.2e} |")
        if branches:
            summary[learner] = {"rows": [b["rows"] for b in branches], "last5": last5,
                                "last5_over_branches": summarize(last5),
                                "branches_at_zero": sum(x == 0 for x in last5)}
    lines.append("")
    for learner, v in summary.items():
        over = v["last5_over_branches"]
        ahead = (improvement_over(v["last5"], summary["ours"]["last5"])
                 if learner != "ours" and "ours" in summary else None)
        v["p_over_ours"] = ahead
        lines.append(
            f"- {learner}: points per rollout over the last 5 updates, IQM over {over['n']} "
            f"branches {interval_text(over['iqm'], over['iqm_low'], over['iqm_high'], 1)} "
            f"(mean {over['mean']:.1f}); {v['branches_at_zero']} branches at 0"
            + (f"; P(> ours) {improvement_text(ahead)}" if ahead else ""))
    out.mkdir(parents=True, exist_ok=True)
    (out / "branches.json").write_text(json.dumps(summary, indent=1))
    (out / "branches.md").write_text("\n".join(lines) + "\n")
    print("\n".join(lines))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("mode", choices=("start", "run", "report", "clipping"))
    parser.add_argument("--seed", type=int, default=1,
                        help="start: SB3's seed; clipping: our envs' and sampling seed")
    parser.add_argument("--points", type=int, default=2, help="start: points scored so far")
    parser.add_argument("--start", type=Path)
    parser.add_argument("--branches", type=int, default=3)
    parser.add_argument("--first-branch", type=int, default=0,
                        help="run: branches FIRST .. FIRST + BRANCHES - 1 (to split them over processes)")
    parser.add_argument("--updates", type=int, default=20)
    parser.add_argument("--learners", default=",".join(LEARNERS))
    parser.add_argument("--runs", type=Path, default=ROOT / "runs" / "freeway-branches")
    parser.add_argument("--out", type=Path, default=ROOT / "results" / "parity" / "freeway-branches")
    args = parser.parse_args()
    learners = args.learners.split(",")
    if not set(learners) <= set(LEARNERS):
        parser.error(f"--learners: each of {', '.join(LEARNERS)}, got {args.learners!r}")
    if args.mode == "start":
        make_start(args.seed, args.points, args.start)
    elif args.mode == "run":
        if args.start is None or not args.start.is_file():
            parser.error("run needs --start, an SB3 checkpoint of benchmarks.parity.atari")
        branches = range(args.first_branch, args.first_branch + args.branches)
        run(args.start, branches, args.updates, args.runs, learners)
    elif args.mode == "clipping":
        clipping(args.seed, args.updates, args.out)
    else:
        report(args.runs, args.out)


if __name__ == "__main__":
    main()
