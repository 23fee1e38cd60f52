"""Throughput of the paper's Atari experiment on this machine: `python -m benchmarks.suite.atari_agents`.

1. Vectorisers: agent steps/s of 8 envs with random actions, gymnasium's sync vector env over
   `xlvin/<Game>Train-v4` (what training uses) against ale-py's C++ `AtariVectorEnv` with the same
   preprocessing (no-op reset 30, frame skip 4 with max-pooling, episodic life, fire reset,
   84 x 84 grey, clipped rewards, 4 frames, no sticky actions).
2. Training: steps/s of `xlvin reproduce atari`'s cells (PPO, XLVIN-R, ATreeC; the paper's depth
   per game) over UPDATES updates of 8 envs x 128 steps, each in a fresh process (one torch
   thread), on --device.

Prints one JSON object (and a markdown table); not part of the test suite.
"""

import argparse
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

GAMES = ("Freeway", "Alien", "Enduro")
AGENTS = ("ppo", "xlvin_r", "atreec")
UPDATES = 3


def vectoriser_sps(game: str, kind: str, steps: int) -> float:
    """Agent steps/s of 8 envs stepped `steps` times with random actions."""
    if kind == "gymnasium":
        from xlvin.ppo.collect import make_vector_env
        envs = make_vector_env(f"xlvin/{game}Train-v4", 8)
    else:
        import ale_py.vector_env
        envs = ale_py.vector_env.AtariVectorEnv(
            game.lower(), 8, episodic_life=True, reward_clipping=True, use_fire_reset=True,
            repeat_action_probability=0.0, noop_max=30, stack_num=4, num_threads=1,
        )
    envs.reset(seed=0)
    rng = np.random.default_rng(0)
    actions = rng.integers(0, envs.single_action_space.n, (steps, 8))
    start = time.perf_counter()
    for a in actions:
        envs.step(a)
    elapsed = time.perf_counter() - start
    envs.close()
    return steps * 8 / elapsed


def training_sps(game: str, agent: str, device: str) -> dict[str, float]:
    """One cell trained for UPDATES updates in this process: steps/s over the whole run."""
    from xlvin.experiments.atari import Cell
    from xlvin.run.training import train_run

    cell = Cell(game, agent, seed=0, transitions=UPDATES * 1024, device=device)
    with tempfile.TemporaryDirectory() as tmp:
        _, summary = train_run(cell.config(), Path(tmp) / "run", progress=False)
    return {"sps": summary["ppo"]["sps"], "wall_s": summary["ppo"]["wall_time_s"]}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--steps", type=int, default=500, help="vector steps per vectoriser run")
    parser.add_argument("--worker", nargs=2, metavar=("GAME", "AGENT"), help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.worker:
        print(json.dumps(training_sps(*args.worker, args.device)))
        return
    out: dict = {"vectorisers": {}, "training": {}, "device": args.device}
    for game in GAMES:
        out["vectorisers"][game] = {k: vectoriser_sps(game, k, args.steps) for k in ("gymnasium", "ale_vector")}
    for game in GAMES:
        for agent in AGENTS:
            run = subprocess.run(
                [sys.executable, "-m", "benchmarks.suite.atari_agents", "--device", args.device,
                 "--worker", game, agent], capture_output=True, text=True, check=True,
            )
            out["training"][f"{game}/{agent}"] = json.loads(run.stdout.strip().splitlines()[-1])
            print(game, agent, out["training"][f"{game}/{agent}"], file=sys.stderr)
    print(json.dumps(out, indent=1))
    print("| game | gymnasium sync | ale-py AtariVectorEnv | PPO | XLVIN-R | ATreeC | XLVIN / PPO |")
    print("|---|---|---|---|---|---|---|")
    for game in GAMES:
        v, t = out["vectorisers"][game], {a: out["training"][f"{game}/{a}"]["sps"] for a in AGENTS}
        print(f"| {game} | {v['gymnasium']:,.0f} | {v['ale_vector']:,.0f} | {t['ppo']:,.0f} | "
              f"{t['xlvin_r']:,.0f} | {t['atreec']:,.0f} | {t['xlvin_r'] / t['ppo']:.2f}x |")


if __name__ == "__main__":
    main()
