"""Where an Atari PPO update spends its time, and how far it is from the compute floor:
`python -m benchmarks.suite.atari_floor [--game Freeway] [--agents ppo,xlvin-r] [--atari-vector ale]`
(prints Markdown).

One update at the paper's settings (8 envs x 128 steps, 4 epochs x 4 minibatches of 256), one
torch thread, CPU time of the process (best of a few repeats, so that other jobs disturb it less
than wall time; the process's, so that ale-py's vector env's thread counts), split into:
- the environments: stepping 8 `xlvin/<Game>Train-v4` envs (ALE and the frame preprocessing;
  gymnasium's wrappers, or ale-py's vector env with `--atari-vector ale`) with fixed actions,
  per transition;
- acting: `collect_rollout` minus the environments (the policy's forward on each step);
- learning: `ppo_update` on that rollout (forward, losses, backward, Adam).

The floor: the Nature CNN's multiply-adds per frame, counted from its layers, times the frames a
transition costs (one forward when acting; per epoch a forward and a backward, about twice the
forward, for each encoded frame: the observation, and for XLVIN the next observation of the
TransE term too), divided by the rate this thread reaches on the network's largest matrix
product. It is the time the convolutions and the linear layer alone would take at that rate.
"""

import argparse
import time

import numpy as np
import torch
from torch import nn

from xlvin.envs.atari import atari_train_id
from xlvin.experiments.atari import ATARI_PPO, DEPTH
from xlvin.run.agents import agent_fields
from xlvin.ppo.collect import collect_rollout, make_vector_env, reset_envs
from xlvin.ppo.update import PPOConfig, make_optimizer, ppo_update
from xlvin.pretrain.files import executor_file, load_executor_processor
from xlvin.run.config import RunConfig, TrainConfig
from xlvin.run.architecture import agent_of
from xlvin.run.checks import check_run


def _best(fn, reps: int = 3) -> float:
    """Least process CPU seconds of one call of `fn` over `reps` calls (after one warm-up)."""
    fn()
    best = float("inf")
    for _ in range(reps):
        start = time.process_time()
        fn()
        best = min(best, time.process_time() - start)
    return best


def encoder_macs(encoder: nn.Module, obs: torch.Tensor) -> int:
    """Multiply-adds of one frame through the encoder's convolutions and linear layers."""
    total = 0

    def count(module: nn.Module, _inputs, output: torch.Tensor) -> None:
        nonlocal total
        if isinstance(module, nn.Conv2d):
            per_output = module.in_channels // module.groups * module.kernel_size[0] * module.kernel_size[1]
            total += output[0].numel() * per_output
        elif isinstance(module, nn.Linear):
            total += module.in_features * module.out_features

    hooks = [m.register_forward_hook(count) for m in encoder.modules()
             if isinstance(m, (nn.Conv2d, nn.Linear))]
    with torch.no_grad():
        encoder(obs[:1])
    for hook in hooks:
        hook.remove()
    return total


def gemm_rate(m: int, k: int, n: int) -> float:
    """FLOP/s of this thread on an [m, k] x [k, n] float32 product."""
    a, b = torch.randn(m, k), torch.randn(k, n)
    seconds = _best(lambda: [torch.mm(a, b) for _ in range(20)], reps=5) / 20
    return 2 * m * k * n / seconds


def profile(game: str, agent_name: str, vector: str = "gym") -> dict[str, float]:
    torch.manual_seed(0)
    env = atari_train_id(game)
    train = TrainConfig(env=env, depth=DEPTH[game], pretrain_transe=False, **agent_fields(agent_name))
    cfg = RunConfig(train=train, ppo=PPOConfig(**ATARI_PPO))
    spaces, _ = check_run(cfg)
    processor = None
    if train.agent == "xlvin":
        processor, _ = load_executor_processor(executor_file(train.executor, train))
    agent = agent_of(cfg, spaces, processor)
    num_envs, num_steps = ATARI_PPO["num_envs"], ATARI_PPO["num_steps"]
    transitions = num_envs * num_steps

    envs = make_vector_env(env, num_envs, vectorization="ale" if vector == "ale" else "sync")
    state = reset_envs(envs, 0)
    actions = np.zeros(num_envs, dtype=np.int64)
    env_s = _best(lambda: [envs.step(actions) for _ in range(num_steps)])
    generator = torch.Generator().manual_seed(0)
    collect_s = _best(lambda: collect_rollout(envs, agent, num_steps, state, generator))
    rollout = collect_rollout(envs, agent, num_steps, state, generator)
    optimizer = make_optimizer(agent, cfg.ppo)
    learn_s = _best(lambda: ppo_update(agent, optimizer, rollout, cfg.ppo, generator), reps=2)

    obs = torch.from_numpy(np.asarray(rollout.obs[0]))
    macs = encoder_macs(agent.encoder, obs)
    frames_learned = 2 if train.agent == "xlvin" else 1  # XLVIN's TransE term encodes s' too
    flops = 2 * macs * (1 + ATARI_PPO["update_epochs"] * 3 * frames_learned)
    linear = next(m for m in agent.encoder.modules() if isinstance(m, nn.Linear))
    minibatch = transitions // ATARI_PPO["num_minibatches"]
    rate = gemm_rate(minibatch, linear.in_features, linear.out_features)
    return {
        "env_ms": 1e3 * env_s / transitions,
        "acting_ms": 1e3 * (collect_s - env_s) / transitions,
        "learning_ms": 1e3 * learn_s / transitions,
        "total_ms": 1e3 * (collect_s + learn_s) / transitions,
        "encoder_mflop": 2 * macs / 1e6,
        "gflops_per_s": rate / 1e9,
        "floor_ms": 1e3 * flops / rate,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--game", default="Freeway")
    parser.add_argument("--agents", default="ppo,xlvin-r")
    parser.add_argument("--atari-vector", default="gym", choices=("gym", "ale"))
    args = parser.parse_args()
    torch.set_num_threads(1)
    print("| agent | environments | acting | learning | total | steps/s | floor (compute) | "
          "floor steps/s | total / floor |")
    print("|---|---|---|---|---|---|---|---|---|")
    for name in args.agents.split(","):
        p = profile(args.game, name, args.atari_vector)
        print(f"| {name} | {p['env_ms']:.2f} ms | {p['acting_ms']:.2f} ms | "
              f"{p['learning_ms']:.2f} ms | {p['total_ms']:.2f} ms | {1e3 / p['total_ms']:.0f} | "
              f"{p['floor_ms']:.2f} ms | {1e3 / p['floor_ms']:.0f} | "
              f"{p['total_ms'] / p['floor_ms']:.1f}x |")
    print(f"\nper transition; encoder {p['encoder_mflop']:.1f} MFLOP a frame; this thread's "
          f"matrix product rate {p['gflops_per_s']:.1f} GFLOP/s")


if __name__ == "__main__":
    main()
