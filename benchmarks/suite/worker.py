"""One measurement per process: `python -m benchmarks.suite.worker '{"task": ..., ...}'`.

Prints one JSON line (the result) last. Every task sets one torch thread unless told otherwise,
so our code and Stable-Baselines3 run under the same settings, and nothing warms the other.
"""

import importlib
import json
import os
import resource
import sys
import time
import warnings
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import numpy as np
import torch

warnings.filterwarnings("ignore")


def _threads(n: int) -> None:
    """One-time set-up every task does before anything is timed.

    Besides the thread count: the first torch optimizer a process builds imports torch._dynamo
    (~2.5 s here). SB3 builds its optimizer in its constructor, outside the timed `learn()`, while
    `train_ppo` builds ours inside the timed call; importing it here keeps that one-off import
    out of both sides' timings.
    """
    torch.set_num_threads(n)
    importlib.import_module("torch._dynamo")


def _device(a: dict[str, Any]) -> torch.device:
    """The task's torch device ("cpu" unless the suite runs with --device)."""
    return torch.device(a.get("device", "cpu"))


def _sync(device: torch.device) -> None:
    """Wait for queued GPU work, so that a wall-clock reading covers it."""
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def _lib(*candidates: str) -> Any:
    """The first of "module:name" that the code on the path has: the current layout first, then
    the older ones (the `--baseline` revision runs this same worker on its own code)."""
    for candidate in candidates:
        module, name = candidate.split(":")
        try:
            return getattr(importlib.import_module(module), name)
        except (ImportError, AttributeError):
            continue
    raise ImportError(" or ".join(candidates))


def _train_ppo() -> Any:
    return _lib("xlvin.ppo.loop:train_ppo", "xlvin.train.loop:train_ppo", "xlvin.train.ppo:train_ppo")


def _seed_everything() -> Any:
    return _lib("xlvin.process:seed_everything", "xlvin.seeding:seed_everything")


def _evaluate_policy() -> Any:
    return _lib("xlvin.ppo.evaluation:evaluate_policy", "xlvin.train.evaluation:evaluate_policy",
                "xlvin.train.rollout:evaluate_policy")


def _steps_and_updates(result: Any) -> tuple[int, int]:
    """(env steps, updates) of a training result on either code layout."""
    if hasattr(result, "env_steps"):
        return result.env_steps, result.updates
    return result.global_step, result.num_updates


def _maxrss_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0


# --------------------------------------------------------------------------- PPO vs SB3


def _env_dims(env_id: str) -> tuple[tuple[int, ...], int]:
    import gymnasium as gym

    import xlvin.envs  # noqa: F401

    env = gym.make(env_id)
    shape, n = env.observation_space.shape, int(env.action_space.n)
    env.close()
    return shape, n


def _encoder(spec: dict[str, Any], obs_shape: tuple[int, ...]) -> tuple[torch.nn.Module, int]:
    from xlvin.nn.encoders import MLPEncoder

    if spec["kind"] == "mlp":
        return MLPEncoder(int(np.prod(obs_shape)), spec["hidden"], spec["k"]), spec["k"]
    from xlvin.nn.encoders import NatureCNN  # (not in the baseline code)

    return NatureCNN(obs_shape[0], spec["k"]), spec["k"]


def ppo_ours(a: dict[str, Any]) -> dict[str, Any]:
    from xlvin.nn.baselines.ppo import PPOAgent
    PPOConfig = _lib("xlvin.ppo.update:PPOConfig", "xlvin.train.ppo:PPOConfig")

    seed_everything, evaluate_policy, train_ppo = _seed_everything(), _evaluate_policy(), _train_ppo()

    _threads(a["threads"])
    obs_shape, num_actions = _env_dims(a["env"])
    seed_everything(a["seed"])
    encoder, k = _encoder(a["encoder"], obs_shape)
    agent = PPOAgent(encoder, k, num_actions).to(_device(a))
    h = a["hp"]
    cfg = PPOConfig(
        num_envs=h["n_envs"], num_steps=h["n_steps"], total_steps=a["steps"], lr=h["lr"],
        update_epochs=h["epochs"], num_minibatches=h["minibatches"], clip_coef=h["clip"],
        ent_coef=h["ent_coef"], vf_coef=h["vf_coef"], max_grad_norm=h["max_grad_norm"],
        gamma=h["gamma"], gae_lambda=h["gae_lambda"], torch_threads=a["threads"],
        atari_vector=a.get("atari_vector", "gym"),
    )
    start, cpu = time.perf_counter(), time.process_time()
    result = train_ppo(agent, a["env"], cfg, seed=a["seed"], progress=False)
    wall, cpu = time.perf_counter() - start, time.process_time() - cpu
    ev = evaluate_policy(agent, a["env"], episodes=a["eval_episodes"], seed=a["eval_seed"])
    return {
        "steps": _steps_and_updates(result)[0], "wall_s": wall, "cpu_s": cpu,
        "sps": _steps_and_updates(result)[0] / wall, "cpu_sps": _steps_and_updates(result)[0] / cpu, "final_return": ev["mean"], "final_return_std": ev["std"],
        "train_return_last20": float(np.mean(result.episode_returns[-20:])) if result.episode_returns else None,
    }


class _SB3AsActorCritic(torch.nn.Module):
    """An SB3 policy seen as our ActorCritic, so both are evaluated by the same function."""

    def __init__(self, policy: Any, num_actions: int) -> None:
        super().__init__()
        self.policy, self.num_actions = policy, num_actions

    def action_distribution(self) -> Any:
        """A categorical over the logits (what `evaluate_policy` reads the forward with)."""
        from xlvin.nn.distributions import Categorical

        return Categorical(self.num_actions)

    def forward(self, obs: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        dist = self.policy.get_distribution(obs)
        return dist.distribution.logits, self.policy.predict_values(obs).squeeze(-1)


def ppo_sb3(a: dict[str, Any]) -> dict[str, Any]:
    from stable_baselines3 import PPO
    from stable_baselines3.common.env_util import make_vec_env
    from stable_baselines3.common.torch_layers import BaseFeaturesExtractor

    import xlvin.envs  # noqa: F401  (the same env ids, so the same preprocessing)
    from xlvin.nn.encoders import MLPEncoder

    evaluate_policy = _evaluate_policy()

    _threads(a["threads"])
    _, num_actions = _env_dims(a["env"])
    h = a["hp"]
    enc = a["encoder"]

    class OurMLP(BaseFeaturesExtractor):
        """Our MLPEncoder as SB3's shared features extractor (SB3's ortho_init re-initialises it
        exactly as ours: orthogonal, gain sqrt(2), zero bias)."""

        def __init__(self, observation_space: Any, hidden: int, k: int) -> None:
            super().__init__(observation_space, k)
            self.net = MLPEncoder(int(np.prod(observation_space.shape)), hidden, k)

        def forward(self, obs: torch.Tensor) -> torch.Tensor:
            return self.net(obs)

    if enc["kind"] == "mlp":
        policy = "MlpPolicy"
        policy_kwargs = {
            "features_extractor_class": OurMLP,
            "features_extractor_kwargs": {"hidden": enc["hidden"], "k": enc["k"]},
            "net_arch": {"pi": [], "vf": []},
        }
    else:  # SB3's NatureCNN (the same layers as ours), features_dim k, linear heads
        policy = "CnnPolicy"
        policy_kwargs = {"features_extractor_kwargs": {"features_dim": enc["k"]}, "net_arch": []}
    envs = make_vec_env(a["env"], n_envs=h["n_envs"], seed=a["seed"])
    lr = h["lr"]
    model = PPO(
        policy, envs, learning_rate=lambda progress: lr * progress, n_steps=h["n_steps"],
        batch_size=h["n_envs"] * h["n_steps"] // h["minibatches"], n_epochs=h["epochs"],
        gamma=h["gamma"], gae_lambda=h["gae_lambda"], clip_range=h["clip"],
        clip_range_vf=h["clip"], ent_coef=h["ent_coef"], vf_coef=h["vf_coef"],
        max_grad_norm=h["max_grad_norm"], normalize_advantage=True, policy_kwargs=policy_kwargs,
        seed=a["seed"], device=str(_device(a)), verbose=0,
    )
    start, cpu = time.perf_counter(), time.process_time()
    model.learn(total_timesteps=a["steps"])
    wall, cpu = time.perf_counter() - start, time.process_time() - cpu
    steps = int(model.num_timesteps)
    envs.close()
    model.policy.set_training_mode(False)
    ev = evaluate_policy(
        _SB3AsActorCritic(model.policy, num_actions), a["env"], episodes=a["eval_episodes"],
        seed=a["eval_seed"],
    )
    returns = [info["r"] for info in model.ep_info_buffer]
    return {
        "steps": steps, "wall_s": wall, "cpu_s": cpu, "sps": steps / wall, "cpu_sps": steps / cpu,
        "final_return": ev["mean"], "final_return_std": ev["std"],
        "train_return_last20": float(np.mean(returns[-20:])) if returns else None,
    }


# --------------------------------------------------------------------------- planning overhead


def _register_synthetic(obs_shape: tuple[int, ...], num_actions: int, length: int) -> str:
    import gymnasium as gym

    env_id = f"xlvin-bench/Synthetic-{'x'.join(map(str, obs_shape))}-A{num_actions}-v0"
    if env_id not in gym.registry:
        gym.register(
            id=env_id, entry_point="benchmarks.suite.worker:SyntheticEnv",
            kwargs={"obs_shape": obs_shape, "num_actions": num_actions, "length": length},
        )
    return env_id


import gymnasium as _gym


class SyntheticEnv(_gym.Env):
    """Random observations of a given shape, `num_actions` actions, fixed-length episodes: the
    shapes of an environment the library does not build yet (the maze), at no simulation cost."""

    def __init__(self, obs_shape: tuple[int, ...], num_actions: int, length: int) -> None:
        self.observation_space = _gym.spaces.Box(0.0, 1.0, tuple(obs_shape), np.float32)
        self.action_space = _gym.spaces.Discrete(num_actions)
        self.length, self.t = length, 0

    def reset(self, *, seed: int | None = None, options: Any = None) -> Any:
        super().reset(seed=seed)
        self.t = 0
        return self.observation_space.sample().astype(np.float32), {}

    def step(self, action: Any) -> Any:
        self.t += 1
        obs = self.np_random.random(self.observation_space.shape, dtype=np.float32)
        return obs, 0.0, False, self.t >= self.length, {}


def planning(a: dict[str, Any]) -> dict[str, Any]:
    from xlvin.nn.agent import XLVINAgent
    from xlvin.nn.baselines.ppo import PPOAgent
    from xlvin.nn.executor import MessagePassing
    PPOConfig = _lib("xlvin.ppo.update:PPOConfig", "xlvin.train.ppo:PPOConfig")

    seed_everything, train_ppo = _seed_everything(), _train_ppo()
    TransitionModel = _lib("xlvin.nn.transition:TransitionModel", "xlvin.nn.transition:Transition")

    _threads(a["threads"])
    c = a["case"]
    env_id = c["env"]
    if env_id.startswith("synthetic:"):
        env_id = _register_synthetic(tuple(c["obs_shape"]), c["A"], 200)
    obs_shape, num_actions = _env_dims(env_id)
    assert num_actions == c["A"], (env_id, num_actions, c["A"])
    seed_everything(0)
    encoder, k = _encoder(c["encoder"], obs_shape)
    if a["agent"] == "ppo":
        agent: Any = PPOAgent(encoder, k, num_actions)
    else:
        if c.get("executor") == "default":
            executor_file = _lib("xlvin.pretrain.files:executor_file",
                                 "xlvin.train.pretrained:executor_file",
                                 "xlvin.train.run:executor_file")
            load_processor = _lib("xlvin.pretrain.files:load_executor_processor",
                                  "xlvin.train.pretrained:load_executor_processor",
                                  "xlvin.train.run:load_executor_processor")
            processor = load_processor(executor_file("random"))[0]
        else:
            processor = MessagePassing(50, "max")
        depth = a.get("depth", c["K"])  # the tree's depth (the case's K unless told)
        agent = XLVINAgent(
            encoder, k, num_actions, TransitionModel(k, num_actions, c["F"]), processor, depth=depth
        )
    agent.to(_device(a))
    cfg = PPOConfig(
        num_envs=c["n_envs"], num_steps=c["n_steps"], total_steps=a["steps"],
        torch_threads=a["threads"],
    )
    with _phase_timer() as phases:
        start = time.perf_counter()
        result = train_ppo(agent, env_id, cfg, seed=0, progress=False)
        wall = time.perf_counter() - start
    steps, updates = _steps_and_updates(result)
    per_rollout = {f"{name}_ms_per_rollout": 1e3 * seconds / updates
                   for name, seconds in phases.items()}
    return {"steps": steps, "wall_s": wall, "sps": steps / wall,
            "peak_rss_mb": _maxrss_mb(), **per_rollout}


@contextmanager
def _phase_timer() -> Iterator[dict[str, float]]:
    """Wall seconds `train_ppo` spends in `collect_rollout` ("collection") and `ppo_update`
    ("update"), summed over the run: the two names are wrapped in `xlvin.ppo.loop`'s namespace
    (where the loop and its online data source look them up; `xlvin.train.loop` or
    `xlvin.train.ppo` on older code)
    for the block's duration."""
    try:
        from xlvin.ppo import loop
    except ImportError:
        try:
            from xlvin.train import loop
        except ImportError:
            from xlvin.train import ppo as loop

    phases = {"collection": 0.0, "update": 0.0}
    originals = {"collection": loop.collect_rollout, "update": loop.ppo_update}

    def timed(name: str) -> Any:
        def call(*args: Any, **kwargs: Any) -> Any:
            start = time.perf_counter()
            try:
                return originals[name](*args, **kwargs)
            finally:
                phases[name] += time.perf_counter() - start

        return call

    loop.collect_rollout, loop.ppo_update = timed("collection"), timed("update")
    try:
        yield phases
    finally:
        loop.collect_rollout, loop.ppo_update = originals["collection"], originals["update"]


# --------------------------------------------------------------------------- tree kernel


def kernel_macs(batch: int, A: int, K: int, k: int, F: int, H: int) -> dict[str, int]:
    """Multiply-adds the tree needs (the pruned algorithm of xlvin.nn.tree.execute_tree).

    Expansion: every internal node's first transition layer on its state (k F, the action part
    is a column of the weight), every non-root node's two other layers (F F + F k). Executor step
    s (of K) updates levels 0..K-s: one H x H projection per child (sender) and per parent
    (receiver). Backward: 2x for the trainable transition (input and weight gradients), 1x for
    the frozen executor (input gradients only).
    """
    level = [batch * A**d for d in range(K + 1)]
    expansion = sum(level[:K]) * k * F + sum(level[1:]) * (F * F + F * k)
    executor = 0
    for s in range(1, K + 1):
        top = K - s
        executor += sum(level[: top + 1]) * H * H + sum(level[1 : top + 2]) * H * H
    return {"expansion": expansion, "executor": executor, "forward": expansion + executor,
            "forward_backward": 3 * expansion + 2 * executor}


def matmul_rate(a: dict[str, Any]) -> dict[str, Any]:
    """Multiply-adds per second of torch.mm: a large square GEMM and the tree's tall-skinny shape."""
    _threads(a["threads"])
    out = {}
    for name, (m, kk, n) in {"square_1024": (1024, 1024, 1024), "tree_64": (65536, 64, 64),
                             "tree_50": (65536, 50, 50)}.items():
        device = _device(a)
        x, w = torch.randn(m, kk, device=device), torch.randn(kk, n, device=device)
        y = torch.empty(m, n, device=device)
        for _ in range(3):
            torch.mm(x, w, out=y)
        best = 1e9
        for _ in range(a.get("reps", 7)):
            _sync(device)
            t = time.perf_counter()
            torch.mm(x, w, out=y)
            _sync(device)
            best = min(best, time.perf_counter() - t)
        out[name] = m * kk * n / best
    return out


def kernel(a: dict[str, Any]) -> dict[str, Any]:
    from xlvin.nn.executor import MessagePassing
    from xlvin.nn.transition import TransitionModel
    from xlvin.nn.tree import execute_tree, expand_tree

    _threads(a["threads"])
    if a.get("retain_memory"):
        from xlvin.accel.allocator import retain_freed_memory

        assert retain_freed_memory()
    c = a["case"]
    B, A, K, F, k = a["batch"], c["A"], c["K"], c["F"], 50
    torch.manual_seed(0)
    transition = TransitionModel(k, A, F)
    processor = MessagePassing(k, "max").requires_grad_(False)
    device = _device(a)
    transition.to(device)
    processor.to(device)
    edges = torch.randn(A, k, device=device)
    h = torch.randn(B, k, device=device, requires_grad=True)
    execute = execute_tree  # the current kernel, or the old one when run on the baseline code

    def forward() -> torch.Tensor:
        return execute(processor, expand_tree(h, transition, K), edges, K)

    def forward_backward() -> None:
        forward().sum().backward()
        h.grad = None
        transition.zero_grad(set_to_none=True)

    fn = forward_backward if a["mode"] == "forward_backward" else forward
    ctx = torch.no_grad() if a["mode"] == "forward" else torch.enable_grad()
    base = _maxrss_mb()
    with ctx:
        fn()  # warm-up (allocations, one-time dispatch)
        times = []
        deadline = time.perf_counter() + a.get("budget_s", 10.0)
        while len(times) < a.get("reps", 5) and (not times or time.perf_counter() < deadline):
            _sync(device)
            t = time.perf_counter()
            fn()
            _sync(device)
            times.append(time.perf_counter() - t)
    return {"best_s": min(times), "median_s": float(np.median(times)), "reps": len(times),
            "peak_rss_increase_mb": _maxrss_mb() - base, "macs": kernel_macs(B, A, K, k, F, k),
            **({"peak_gpu_mb": torch.cuda.max_memory_allocated(device) / 2**20}
               if device.type == "cuda" else {})}


# --------------------------------------------------------------------------- end to end


def command(a: dict[str, Any]) -> dict[str, Any]:
    import subprocess

    env = dict(os.environ, **a.get("env", {}))
    start = time.perf_counter()
    proc = subprocess.run(a["argv"], env=env, capture_output=True, text=True, check=False)
    wall = time.perf_counter() - start
    return {"wall_s": wall, "rc": proc.returncode, "tail": (proc.stdout + proc.stderr)[-1500:]}


TASKS = {"ppo_ours": ppo_ours, "ppo_sb3": ppo_sb3, "planning": planning, "kernel": kernel,
         "matmul_rate": matmul_rate, "command": command}


def main() -> None:
    args = json.loads(sys.argv[1])
    result = TASKS[args["task"]](args)
    print(json.dumps(result))


if __name__ == "__main__":
    main()
