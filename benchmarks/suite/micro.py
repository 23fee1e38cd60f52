"""Per-optimisation micro-benchmarks, current code vs a baseline revision, side by side:
`python -m benchmarks.suite.micro [--baseline REV]` (prints a Markdown table; CPU time of one thread,
best of several repeats, so that other jobs on the machine disturb it less than wall time).

Each measurement runs in its own process on each code version, alternating.
"""

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]

PROBES = {
    "episode statistics: 4 x CartPole-v1 vector env step": "env_step",
    "PPO agent forward, batch 4 (collection)": "ppo_forward",
    "XLVIN-R CartPole forward, batch 4 (collection)": "xlvin_forward",
    "XLVIN-R CartPole forward+backward, batch 128 (network only)": "xlvin_fb",
    "XLVIN-R CartPole forward + TransE term + backward, batch 128 (one minibatch, no loss or optimiser)": "xlvin_minibatch",
    "XLVIN-R Acrobot-v1 greedy evaluation, 100 episodes (final evaluation of a Table 1 cell)": "xlvin_eval",
    "PPO agent, collection of one rollout (CartPole-v1, 4 envs x 128 steps)": "ppo_collect",
    "PPO agent, update on one rollout (4 epochs x 4 minibatches of 128)": "ppo_update",
    "XLVIN-R CartPole, collection of one rollout (4 envs x 128 steps)": "xlvin_collect",
    "XLVIN-R CartPole, update on one rollout (4 epochs x 4 minibatches of 128)": "xlvin_update",
}


def _lib(name: str):
    """`name` from the library as laid out on each code version (new module first, then old)."""
    import importlib

    for module in {
        "make_vector_env": ("xlvin.ppo.collect", "xlvin.train.rollout"),
        "reset_envs": ("xlvin.ppo.collect", "xlvin.train.rollout"),
        "collect_rollout": ("xlvin.ppo.collect", "xlvin.train.rollout"),
        "evaluate_policy": ("xlvin.ppo.evaluation", "xlvin.train.rollout"),
    }[name]:
        try:
            return getattr(importlib.import_module(module), name)
        except (ImportError, AttributeError):
            continue
    raise ImportError(name)


def _collection_forward(agent, obs):
    """One forward as collection runs it on each code version: NumPy observations in, NumPy
    logits and values out (`xlvin.ppo.collect.make_actor`, or the older `rollout.act` inside
    `acting()`, or the plain forward)."""
    import torch

    try:
        from xlvin.ppo.collect import make_actor

        actor = make_actor(agent)
        return lambda: actor(obs)
    except ImportError:
        pass
    try:
        from xlvin.nn.functional import acting
        from xlvin.train.rollout import act

        def forward_in_block():
            with acting():
                return act(agent, obs, torch.device("cpu"))

        return forward_in_block
    except ImportError:
        @torch.no_grad()
        def forward():
            logits, values = agent(torch.from_numpy(obs))
            return logits.numpy(), values.numpy()

        return forward


def _build(cfg, obs_dim: int, actions: int, processor):
    """The agent of TrainConfig `cfg`: from the derived architecture and spaces (current), or
    `build_agent` with the observation shape or size (older code)."""
    try:
        from xlvin.run.config import RunConfig
        from xlvin.run.architecture import agent_of
        from xlvin.envs.spaces import Spaces

        return agent_of(RunConfig(train=cfg), Spaces((obs_dim,), "flat", actions), processor)
    except ImportError:
        from xlvin.run.training import build_agent
    try:
        return build_agent(cfg, (obs_dim,), actions, processor)
    except TypeError:
        return build_agent(cfg, obs_dim, actions, processor)


def _best(fn, n: int, reps: int = 5) -> float:
    for _ in range(min(n, 20)):
        fn()
    best = float("inf")
    for _ in range(reps):
        t = time.thread_time()
        for _ in range(n):
            fn()
        best = min(best, (time.thread_time() - t) / n)
    return best


def probe(name: str) -> float:
    """Seconds per call of one probe on the code importable as `xlvin`."""
    import numpy as np
    import torch

    torch.set_num_threads(1)
    try:
        from xlvin.run.config import TrainConfig
    except ImportError:
        from xlvin.run.training import TrainConfig

    if name == "env_step":
        envs = _lib("make_vector_env")("CartPole-v1", 4)
        envs.reset(seed=0)
        actions = [np.zeros(4, dtype=np.int64), np.ones(4, dtype=np.int64)]
        i = [0]

        def step() -> None:
            i[0] += 1
            envs.step(actions[i[0] % 2])

        return _best(step, 2000)
    torch.manual_seed(0)
    if name.startswith("ppo_"):
        agent = _build(TrainConfig(env="CartPole-v1", agent="ppo"), 4, 2, None)
        if name == "ppo_forward":
            obs = torch.randn(4, 4).numpy()
            return _best(_collection_forward(agent, obs), 2000)
        return _rollout_probe(agent, name.removeprefix("ppo_"))
    from xlvin.nn.executor import MessagePassing

    env, obs_dim, actions = ("Acrobot-v1", 6, 3) if name == "xlvin_eval" else ("CartPole-v1", 4, 2)
    agent = _build(TrainConfig(env=env, agent="xlvin"), obs_dim, actions, MessagePassing(50, "max"))
    if name == "xlvin_forward":
        obs = torch.randn(4, obs_dim).numpy()
        return _best(_collection_forward(agent, obs), 500)
    if name in ("xlvin_collect", "xlvin_update"):
        return _rollout_probe(agent, name.removeprefix("xlvin_"))
    if name == "xlvin_minibatch":
        from xlvin.nn import policy

        batch_type = getattr(policy, "TransitionBatch", None) or policy.Transitions  # older name
        batch = batch_type(torch.randn(128, obs_dim), torch.randint(0, actions, (128,)),
                           torch.randn(128, obs_dim))

        forward_with_aux = getattr(agent, "forward_with_aux", getattr(agent, "evaluate", None))

        def minibatch() -> None:
            if forward_with_aux is not None:
                logits, values, aux = forward_with_aux(batch)
            else:  # the old code: forward, then the auxiliary term reusing its z(s)
                logits, values = agent(batch.obs)
                aux = agent.auxiliary_losses(batch)
            (logits.sum() + values.sum() + aux["transe"]).backward()

        return _best(minibatch, 50)
    if name == "xlvin_fb":
        obs = torch.randn(128, obs_dim)

        def fb() -> None:
            logits, values = agent(obs)
            (logits.sum() + values.sum()).backward()

        return _best(fb, 50)
    t = time.thread_time()
    _lib("evaluate_policy")(agent, env, episodes=100, seed=1_000_000)
    return time.thread_time() - t


def _rollout_probe(agent, what: str) -> float:
    """Seconds of one `collect_rollout` (128 steps, 4 CartPole-v1 envs) or one `ppo_update` on it."""
    import torch

    from xlvin.ppo.update import PPOConfig, make_optimizer, ppo_update

    collect_rollout = _lib("collect_rollout")
    envs = _lib("make_vector_env")("CartPole-v1", 4)
    state = _lib("reset_envs")(envs, 0)
    generator = torch.Generator().manual_seed(0)
    if what == "collect":
        return _best(lambda: collect_rollout(envs, agent, 128, state, generator), 3)
    rollout = collect_rollout(envs, agent, 128, state, generator)
    cfg = PPOConfig()
    optimizer = make_optimizer(agent, cfg)
    return _best(lambda: ppo_update(agent, optimizer, rollout, cfg, generator), 2)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--baseline", default="368992e~1")
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--probe", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.probe:
        print(json.dumps(probe(args.probe)))
        return
    tmp = Path(tempfile.mkdtemp(prefix="xlvin-baseline-"))
    archive = subprocess.run(["git", "archive", args.baseline, "src"], cwd=ROOT, check=True,
                             capture_output=True).stdout
    subprocess.run(["tar", "-x", "-C", str(tmp)], input=archive, check=True)
    paths = {"before": str(tmp / "src") + os.pathsep + str(ROOT), "after": str(ROOT)}
    print(f"load average at start: {os.getloadavg()}", file=sys.stderr)
    print("| probe | before | after | speed-up |\n|---|---|---|---|")
    for label, name in PROBES.items():
        best = {"before": float("inf"), "after": float("inf")}
        for _ in range(args.rounds):
            for code in ("before", "after"):
                env = dict(os.environ, PYTHONPATH=paths[code])
                out = subprocess.run([sys.executable, "-m", "benchmarks.suite.micro", "--probe", name],
                                     cwd=ROOT, env=env, capture_output=True, text=True, check=True)
                best[code] = min(best[code], json.loads(out.stdout.strip().splitlines()[-1]))
        unit, scale = ("s", 1) if best["before"] > 0.5 else ("us", 1e6)
        print(f"| {label} | {best['before'] * scale:,.1f} {unit} | {best['after'] * scale:,.1f} {unit} "
              f"| {best['before'] / best['after']:.2f}x |", flush=True)
    print(f"load average at end: {os.getloadavg()}", file=sys.stderr)


if __name__ == "__main__":
    main()
