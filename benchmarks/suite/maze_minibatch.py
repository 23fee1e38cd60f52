"""What one PPO minibatch costs the maze agents (issue 16): forward + backward of
`forward_with_aux` (policy, value and the TransE term) at batch B, and the acting forward at
batch 8, for PPO (the paper's 128-channel maze CNN) and XLVIN at the paper's widths (k = 10,
transition hidden 128, maze executor H = 10) at K = 1, 2, 4 (full tree) and K = 4 pruned
(ours, b = 2, 3); with `--bf16`, also under CPU autocast to bfloat16 (AMX matrix units where
the processor has them; not used by the library's training).

    python -m benchmarks.suite.maze_minibatch [--device cpu|cuda] [--batch 256] [--bf16]

On CPU the figure is the thread's CPU time (best of 3), which a busy machine disturbs less than
wall time; on CUDA, wall time between synchronisations (mean of 5). Not part of the test suite.
"""

import argparse
import os
import time

import torch

from benchmarks.suite.maze_sps import AGENTS
from xlvin.nn.policy import TransitionBatch
from xlvin.process import prepare_process

NAMES = ("ppo128", "xlvin_k1", "xlvin_k2", "xlvin_k4_b2", "xlvin_k4_b3", "xlvin_k4")


def timed(fn, device: str, repeats: int) -> float:
    """Seconds per call of fn: best CPU thread time on CPU, mean wall time on CUDA."""
    fn()
    if device == "cpu":
        times = []
        for _ in range(repeats):
            start = time.thread_time()
            fn()
            times.append(time.thread_time() - start)
        return min(times)
    torch.cuda.synchronize()
    start = time.perf_counter()
    for _ in range(repeats):
        fn()
    torch.cuda.synchronize()
    return (time.perf_counter() - start) / repeats


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--batch", type=int, default=256)
    parser.add_argument("--bf16", action="store_true")
    args = parser.parse_args()
    prepare_process()
    torch.set_num_threads(1)
    dev = args.device
    print(f"device {dev}, batch {args.batch}, one torch thread, load average "
          f"{os.getloadavg()[0]:.1f}")
    print("| agent | precision | forward+backward, batch B (ms) | acting forward, batch 8 (ms) |")
    print("|---|---|---|---|")
    obs, next_obs = torch.rand(2, args.batch, 3, 8, 8, device=dev)
    batch = TransitionBatch(obs, torch.randint(8, (args.batch,), device=dev), next_obs)
    for name in NAMES:
        label, make = AGENTS[name]
        torch.manual_seed(0)
        agent = make().to(dev)
        for precision in ("fp32", "bf16") if args.bf16 else ("fp32",):
            autocast = torch.autocast(dev, dtype=torch.bfloat16, enabled=precision == "bf16")

            def update(agent: torch.nn.Module = agent, autocast: torch.autocast = autocast) -> None:
                agent.train()
                with autocast:
                    logits, values, aux = agent.forward_with_aux(batch)
                    loss = logits.logsumexp(-1).mean() + values.mean() + sum(aux.values())
                loss.backward()

            @torch.no_grad()
            def act(agent: torch.nn.Module = agent, autocast: torch.autocast = autocast) -> None:
                agent.eval()
                with autocast:
                    agent(obs[:8])

            print(f"| {label} | {precision} | {1e3 * timed(update, dev, 3):,.1f} | "
                  f"{1e3 * timed(act, dev, 5):,.2f} |", flush=True)
    print(f"load average at the end {os.getloadavg()[0]:.1f}")


if __name__ == "__main__":
    main()
