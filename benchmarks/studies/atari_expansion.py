"""What sampled tree expansion costs and gives on Atari's 18 actions (Alien):
`python -m benchmarks.studies.atari_expansion [cost|learn|report]`.

XLVIN-R expands every action at every tree node in the paper (K = 1 on Alien: 1 + 18 latent
states an observation). Expanding all 18 at depth 2 is 1 + 18 + 324 = 343 states, at depth 3
6,175; expanding N = 4 drawn actions (`--expansion uniform` or `policy`) is 1 + 4 + 16 = 21 at
depth 2 and 85 at depth 3, whatever the action count.

- `cost`: each configuration of `CONFIGS` (and PPO) trains `--updates` updates of `xlvin reproduce
  atari`'s Alien cell (8 envs x 128 steps, 4 epochs x 4 minibatches, one torch thread) in a
  fresh process; prints the process CPU seconds per 1,000 transitions of the updates after the
  first, the peak RSS and the latent states per observation.
- `learn`: each configuration trains `--transitions` on `--seeds` seeds (run directories under
  `--runs`, resumable: a finished seed is kept, an unfinished one resumes), and is evaluated by the
  Atari experiment's evaluator (10 games, seeds 1,000,000 on).
- `report`: OUT/expansion.{json,md} from the finished seeds of `learn` and the last `cost` run:
  the area under the training curve and the greedy score, IQM [95 % CI] over seeds, and P(> the
  paper's K = 1 expansion).

Not part of the test suite (each cell is minutes of CPU).
"""

import argparse
import json
import os
import resource
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
GAME = "Alien"
#: name -> (agent, depth K, expansion, N): the paper's K = 1 tree, the full K = 2 and K = 3 trees,
#: and the same depths over 4 drawn actions a node, uniformly or from the distilled rollout policy.
CONFIGS = {
    "ppo": ("ppo", 1, "all", 0),
    "xlvin-r K=1 all": ("xlvin-r", 1, "all", 0),
    "xlvin-r K=2 all": ("xlvin-r", 2, "all", 0),
    "xlvin-r K=2 uniform-4": ("xlvin-r", 2, "uniform", 4),
    "xlvin-r K=2 policy-4": ("xlvin-r", 2, "policy", 4),
    "xlvin-r K=3 all": ("xlvin-r", 3, "all", 0),
    "xlvin-r K=3 uniform-4": ("xlvin-r", 3, "uniform", 4),
}


def cell(name: str, seed: int, transitions: int):
    """The Alien cell of `xlvin reproduce atari` with this configuration's tree, in
    RUNS/<configuration>/seed<S>."""
    from benchmarks.studies.atari_cells import VariantCell

    agent, depth, method, samples = CONFIGS[name]
    tree = () if agent == "ppo" else (("depth", depth), ("expansion", method), ("expand", samples))
    return VariantCell(GAME, agent, seed, transitions, name=slug(name), train=tree)


def states_per_observation(name: str) -> int:
    """Latent states one observation's tree holds (1 for PPO: the root's embedding)."""
    agent, depth, _, samples = CONFIGS[name]
    width = samples or 18
    return 1 if agent == "ppo" else sum(width ** level for level in range(depth + 1))


def slug(name: str) -> str:
    return name.replace(" ", "_").replace("=", "")


class UpdateClock:
    """Training hooks that note the process's CPU time at the end of every update."""

    def __init__(self) -> None:
        self.ends: list[float] = []

    def on_rollout(self, policy, result) -> bool:
        return True

    def on_update(self, policy, result, metrics) -> bool:
        self.ends.append(time.process_time())
        return True

    def on_evaluation(self, policy, result, evaluation) -> bool:
        return True

    def recorded(self) -> dict:
        return {}


def cost_worker(name: str, updates: int) -> dict:
    """Train `updates` (>= 2) updates in this process; CPU seconds per 1,000 transitions of the
    updates after the first (collection and learning: no start-up, executor or first-call cost)."""
    from tempfile import TemporaryDirectory

    import torch

    from xlvin.errors import UserError
    from xlvin.process import quiet_known_warnings
    from xlvin.run.training import train_run

    torch.set_num_threads(1)
    quiet_known_warnings()
    clock = UpdateClock()
    with TemporaryDirectory() as tmp:
        try:
            train_run(cell(name, 0, updates * 1024).config(), Path(tmp) / "run",
                      progress=False, hooks=clock)
        except UserError as refused:  # a tree that cannot fit this machine's memory
            return {"config": name, "refused": str(refused),
                    "states_per_observation": states_per_observation(name)}
    seconds = clock.ends[-1] - clock.ends[0]
    transitions = (len(clock.ends) - 1) * 1024
    return {"config": name, "transitions": transitions, "cpu_seconds": seconds,
            "cpu_s_per_1000": 1000 * seconds / transitions,
            "peak_rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
            "states_per_observation": states_per_observation(name)}


def learn_worker(name: str, seed: int, transitions: int, runs: Path) -> None:
    """Train (or resume) one seed and evaluate its final policy (`run_cell`'s record)."""
    from xlvin.experiments.atari import run_cell

    study = cell(name, seed, transitions)
    record = run_cell(study, runs)
    (study.run_dir(runs) / "record.json").write_text(json.dumps(record))


def fresh_process(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "benchmarks.studies.atari_expansion", *args],
                          capture_output=True, text=True, check=True, cwd=ROOT)


def report(runs: Path, out: Path, seeds: int, transitions: int) -> None:
    """OUT/expansion.{json,md}: the cost table and the learning table over finished seeds."""
    from xlvin.stats import improvement_over, improvement_text, interval_text, summarize

    cost_file = out / "expansion-cost.json"
    costs = json.loads(cost_file.read_text()) if cost_file.is_file() else {}
    rows, aucs = {}, {}
    for name in CONFIGS:
        records = [json.loads(p.read_text()) for s in range(seeds)
                   if (p := runs / slug(name) / f"seed{s}" / "record.json").is_file()]
        if records:
            aucs[name] = [r["auc"] for r in records]
            rows[name] = {"seeds": [r["seed"] for r in records], "auc": summarize(aucs[name]),
                          "greedy": summarize([r["final_eval"]["mean"] for r in records])}
    base = "xlvin-r K=1 all"
    for name, row in rows.items():
        if name != base and base in aucs and min(len(aucs[name]), len(aucs[base])) >= 2:
            row["auc_over_k1"] = improvement_over(aucs[name], aucs[base])
    (out / "expansion.json").write_text(json.dumps(
        {"game": GAME, "transitions": transitions, "configs": CONFIGS, "cost": costs,
         "learning": rows}, indent=1) + "\n")
    lines = [f"# Sampled expansion on {GAME}'s 18 actions", "",
             "| configuration | latent states per observation | CPU s per 1,000 transitions "
             "| x PPO's | peak RSS (MB) | updates timed | load average at the start |",
             "|---|---|---|---|---|---|---|"]
    measured = {name: costs["configs"][name] for name in CONFIGS if name in costs.get("configs", {})}
    ppo = measured.get("ppo", {}).get("cpu_s_per_1000")
    for name, c in measured.items():
        if "refused" in c:
            lines.append(f"| {name} | {c['states_per_observation']:,} | refused: {c['refused']} "
                         f"| - | - | - | {c['load']:.1f} |")
            continue
        ratio = f"{c['cpu_s_per_1000'] / ppo:.2f}" if ppo else "-"
        lines.append(f"| {name} | {c['states_per_observation']:,} | {c['cpu_s_per_1000']:.1f} | "
                     f"{ratio} | {c['peak_rss_mb']:,.0f} | {c['updates'] - 1} | {c['load']:.1f} |")
    if measured:
        machines = sorted({c["machine"] for c in measured.values()})
        lines += ["", "Cost: process CPU time of the updates after the first (collection and "
                  f"learning), in a fresh process, one torch thread, on {'; '.join(machines)}."]
    lines += ["", f"Learning at {transitions:,} transitions (lr decaying over that budget): "
              "AUC, the mean training game score; greedy, the final policy on 10 evaluation "
              "games; IQM [95 % CI] over seeds; P(AUC > K = 1 all).", "",
              "| configuration | seeds | AUC | greedy | P(> K = 1 all) |", "|---|---|---|---|---|"]
    for name, row in rows.items():
        auc, greedy = row["auc"], row["greedy"]
        lines.append(f"| {name} | {len(row['seeds'])} | "
                     f"{interval_text(auc['iqm'], auc['iqm_low'], auc['iqm_high'], 1)} | "
                     f"{interval_text(greedy['iqm'], greedy['iqm_low'], greedy['iqm_high'], 1)} | "
                     f"{improvement_text(row.get('auc_over_k1'))} |")
    (out / "expansion.md").write_text("\n".join(lines) + "\n")
    print("\n".join(lines))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("mode", choices=("cost", "learn", "report"))
    parser.add_argument("--configs", default=",".join(CONFIGS),
                        help="comma-separated names of CONFIGS")
    parser.add_argument("--updates", type=int, default=4,
                        help="cost: updates of 1,024 transitions (timed: all but the first)")
    parser.add_argument("--seeds", type=int, default=3, help="learn: seeds 0 .. N-1")
    parser.add_argument("--transitions", type=int, default=50_000)
    parser.add_argument("--runs", type=Path, default=ROOT / "runs" / "atari-expansion")
    parser.add_argument("--out", type=Path, default=ROOT / "results" / "atari-expansion")
    parser.add_argument("--worker", nargs="+", help=argparse.SUPPRESS)
    args = parser.parse_args()
    names = args.configs.split(",")
    if unknown := [n for n in names if n not in CONFIGS]:
        parser.error(f"unknown configs {unknown}; choose from {list(CONFIGS)}")
    if args.updates < 2:
        parser.error("--updates must be >= 2 (the first update's cost is left out)")
    if args.worker:
        if args.mode == "cost":
            print(json.dumps(cost_worker(args.worker[0], args.updates)))
        else:
            learn_worker(args.worker[0], int(args.worker[1]), args.transitions, args.runs)
        return
    args.out.mkdir(parents=True, exist_ok=True)
    if args.mode == "cost":
        from xlvin.kernels import cpu_name

        path = args.out / "expansion-cost.json"
        costs = json.loads(path.read_text()) if path.is_file() else {"configs": {}}
        for name in names:  # each measured anew; the others on file are kept
            load = os.getloadavg()[0]
            run = fresh_process("cost", "--updates", str(args.updates), "--worker", name)
            costs["configs"][name] = {**json.loads(run.stdout.strip().splitlines()[-1]),
                                      "updates": args.updates, "load": load,
                                      "machine": f"{cpu_name()}, {os.cpu_count()} cores"}
            print(name, costs["configs"][name], flush=True)
            path.write_text(json.dumps(costs, indent=1) + "\n")
    elif args.mode == "learn":
        for seed in range(args.seeds):
            for name in names:
                if not (args.runs / slug(name) / f"seed{seed}" / "record.json").is_file():
                    fresh_process("learn", "--transitions", str(args.transitions), "--runs",
                                  str(args.runs), "--worker", name, str(seed))
                    print(name, seed, "done", flush=True)
    report(args.runs, args.out, args.seeds, args.transitions)


if __name__ == "__main__":
    main()
