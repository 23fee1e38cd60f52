"""Seeds trained together against seeds trained alone: `python -m benchmarks.suite.population
[--sizes 1 8 32 64 128] [--steps N] [--rounds R] [--agent ppo|xlvin-r|xlvin-maze]`.

PPO or XLVIN-R on CartPole-v1 with the default configuration (4 envs x 128 steps, 4 epochs of 4
minibatches, a checkpoint every 10 updates, metrics and TensorBoard; XLVIN-R: a tree of depth 2,
TransE pre-trained in every run, 1,540 steps, and learned during PPO: what `xlvin train` runs);
or `xlvin-maze`, the maze study's XLVIN (`xlvin-32-b2` of `xlvin.experiments.maze`: its CNN
encoder, pruned depth-4 tree, the shipped maze executor, PPO 32 envs x 32 steps) on the 8x8 maze
at its first level, trained online rather than by curriculum so that every seed takes the same
steps. `--steps` env steps per seed. Measured, each in a fresh process started with the `xlvin`
command's process set-up, rounds interleaved:

- alone: one process training one seed (`train_run`), and two such processes at once (the
  machine's two cores); the better aggregate is "the best of solo processes";
- together: one process training S seeds (`train_population`), for every S of `--sizes`.

Aggregate seed-steps/s = seeds x steps / wall seconds of the slowest process; also the steps per
CPU second of the processes (less sensitive to what else the machine runs). The load average is
taken before and after each round. Prints a Markdown table (best of the rounds) and the JSON of
every measurement; `--json PATH` also writes them all, with the machine, for
`xlvin.experiments.benchmark_pages` to render (results/population/AGENT.json). Not part of the
test suite.
"""

import argparse
import json
import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any


#: --agent -> the environment it trains on.
ENVS = {"ppo": "CartPole-v1", "xlvin-r": "CartPole-v1", "xlvin-maze": "xlvin/Maze-v0"}


def config(agent: str, steps: int) -> Any:
    """The run configuration `agent` trains under (module docstring), `steps` env steps a seed."""
    import dataclasses

    from xlvin.experiments import maze
    from xlvin.ppo.config import PPOConfig
    from xlvin.run.config import RunConfig, TrainConfig

    if agent != "xlvin-maze":
        return RunConfig(train=TrainConfig(env=ENVS[agent], agent=agent),
                         ppo=PPOConfig(total_steps=steps))
    cell = maze.Cell("maze", "xlvin-32-b2", 0)
    maze.prepare([cell])  # the shipped executor's file, before any clock starts
    cfg = cell.config()
    return dataclasses.replace(cfg, train=dataclasses.replace(cfg.train, protocol="online"),
                               ppo=dataclasses.replace(cfg.ppo, total_steps=steps))


def worker(kind: str, seeds: list[int], steps: int, agent: str, out: Path) -> dict[str, Any]:
    """One measurement in this process: `kind` alone (one seed) or together (the seeds)."""
    from xlvin.process import prepare_process, set_threads

    prepare_process()
    set_threads(1)
    import torch._dynamo  # noqa: F401  (the first optimizer imports it: not a cost of either)

    from xlvin.run.population import train_population, with_seed
    from xlvin.run.training import train_run

    cfg = config(agent, steps)
    start, cpu = time.perf_counter(), time.process_time()
    if kind == "alone":
        (seed,) = seeds
        train_run(with_seed(cfg, seed), out / f"seed-{seed}", progress=False,
                  pretrain_progress=False)
    else:
        train_population(cfg, seeds, out, progress=False)
    wall, cpu = time.perf_counter() - start, time.process_time() - cpu
    return {"kind": kind, "seeds": len(seeds), "steps": steps, "wall_s": wall, "cpu_s": cpu,
            "max_rss_mib": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024}


def measure(kind: str, seeds: list[int], steps: int, agent: str) -> dict[str, Any]:
    """`worker` in a fresh process."""
    with tempfile.TemporaryDirectory() as out:
        args = [sys.executable, "-m", "benchmarks.suite.population", "--worker", kind,
                ",".join(map(str, seeds)), str(steps), agent, out]
        done = subprocess.run(args, capture_output=True, text=True, check=True)
    return json.loads(done.stdout.strip().splitlines()[-1])


def alone_in_parallel(steps: int, agent: str) -> dict[str, Any]:
    """Two processes of one seed each, at once: their aggregate."""
    with tempfile.TemporaryDirectory() as out:
        procs = [subprocess.Popen([sys.executable, "-m", "benchmarks.suite.population",
                                   "--worker", "alone", str(seed), str(steps), agent,
                                   f"{out}/{seed}"], stdout=subprocess.PIPE, text=True)
                 for seed in (0, 1)]
        results = [json.loads(p.communicate()[0].strip().splitlines()[-1]) for p in procs]
    return {"kind": "alone x2", "seeds": 2, "steps": steps,
            "wall_s": max(r["wall_s"] for r in results),
            "cpu_s": sum(r["cpu_s"] for r in results)}


def machine() -> str:
    """This CPU with its family and model, and its cores."""
    from xlvin.kernels import cpu_info

    return (f"{cpu_info('model name')} (family {cpu_info('cpu family')} model "
            f"{cpu_info('model')}), {os.cpu_count()} cores")


def commit() -> str:
    """The code's commit, short."""
    return subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True,
                          text=True).stdout.strip()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[1, 8, 32, 64, 128])
    parser.add_argument("--steps", type=int, default=20_480, help="env steps per seed")
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--agent", default="ppo", choices=sorted(ENVS))
    parser.add_argument("--json", type=Path, help="also write every measurement here")
    parser.add_argument("--worker", nargs=5, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.worker:
        kind, seeds, steps, agent, out = args.worker
        print(json.dumps(worker(kind, [int(s) for s in seeds.split(",")], int(steps), agent,
                                Path(out))))
        return
    runs: list[dict[str, Any]] = []
    for r in range(args.rounds):
        load = os.getloadavg()[0]
        runs.append(measure("alone", [0], args.steps, args.agent))
        runs.append(alone_in_parallel(args.steps, args.agent))
        for size in args.sizes:
            runs.append(measure("together", list(range(size)), args.steps, args.agent))
        for run in runs[-2 - len(args.sizes):]:
            run.update(round=r, load=[round(load, 2), round(os.getloadavg()[0], 2)])
            print(json.dumps(run), file=sys.stderr)
    from xlvin.experiments.benchmark_pages import population_table
    from xlvin.io.files import write_json

    data = {"agent": args.agent, "env": ENVS[args.agent], "steps": args.steps,
            "rounds": args.rounds, "cpu": machine(), "commit": commit(), "runs": runs}
    if args.json:
        write_json(args.json, data)
    print(population_table(data))


if __name__ == "__main__":
    main()
