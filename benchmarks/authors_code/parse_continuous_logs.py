"""Our statistics over the logs of the authors' continuous-action runs (`run.sh --continuous`
writes them).

    .venv/bin/python -m benchmarks.authors_code.parse_continuous_logs LOGS [--results DIR] \
        [--note TEXT]

Run it from the repository's root with this project's .venv (`bash scripts/setup.sh` or `bash
scripts/test.sh` sets it up): it imports `xlvin.stats`. RESULTS (default: `results/` beside LOGS,
outside the repository's committed results) gets continuous.json and continuous.md.

MountainCarContinuous (their `training/classic_control.py`): per round it prints `Number of
steps S` (steps of its 5 parallel envs until 5 episodes ended), then, after its PPO update, an
evaluation of the stochastic policy until at least `--num_test_episodes` episodes ended
(`Rollout R : Total rewards ... (Average: X)`), and at the end `Largest average reward = M`,
the maximum over the evaluations: their statistic. Per run this reads the env steps of
training, that maximum, and the last evaluation (the final policy).

HalfCheetah (their `training/mujoco.py`, no evaluation without `--evaluate`, which their README
does not pass): after each update of 2048 steps it prints `Updates U, num timesteps T` and the
mean of the last (up to) 100 training episodes of the stochastic policy: their statistic is the
last of these. The env's Monitor file (MONITOR/NAME/.../0.monitor.csv, beside LOGS) gives the
return of every training episode: the mean of the last 10 is read too.

Per (env, agent), over the runs that ended (finished, or stopped at their CPU budget): IQM with
its 95 % bootstrap interval (`xlvin.stats`) of each statistic, and P(XLVIN > PPO) on it.
"""

import csv
import re
import sys
from pathlib import Path

import numpy as np

from benchmarks.authors_code.harness_log import (EVALUATION, LARGEST, arguments, checked_max,
                                                 default_results, ended, harness_fields,
                                                 read_harness_line, run_line, run_logs,
                                                 run_status, write_results)
from xlvin.stats import improvement_over, improvement_text, interval_text, summarize

LOG_NAME = re.compile(r"^(mountaincar-continuous|halfcheetah)-(ppo|xlvin)-seed(\d+)\.txt(\.part)?$")
STEPS = re.compile(r"^Number of steps\s+(\d+)")
UPDATE = re.compile(r"^Updates (\d+), num timesteps (\d+)")
TRAINING = re.compile(r"^Last (\d+) training episodes: mean/median reward (\S+)/")
ENVS = {"mountaincar-continuous": "MountainCarContinuous-v0 (10 bins)",
        "halfcheetah": "HalfCheetah (11 bins per dimension; gymnasium's HalfCheetah-v5)"}
AGENTS = {"ppo": "PPO", "xlvin": "XLVIN"}
#: Per env: statistic -> label; the first is the authors' own.
STATISTICS = {
    "mountaincar-continuous": {
        "max": "max over evaluations (theirs)",
        "last": "last evaluation (the final policy)"},
    "halfcheetah": {
        "last100": "mean of the last (up to) 100 training episodes at the end (theirs)",
        "last10": "mean of the last 10 training episodes (Monitor)"},
}
#: classic_control's parallel envs for mountaincar-continuous (their --num_processes default).
CLASSIC_PROCESSES = 5


def monitor_returns(monitor: Path) -> list[float]:
    """Training-episode returns of a run's Monitor files (0.monitor.csv, ... under MONITOR),
    in the order they ended."""
    rows = []
    for path in sorted(monitor.glob("**/*.monitor.csv")):
        if path.parent.name.endswith("_eval"):
            continue
        lines = path.read_text().splitlines()[1:]  # a JSON header line, then r,l,t
        rows += [(float(r["t"]), float(r["r"])) for r in csv.DictReader(lines)]
    return [r for _, r in sorted(rows)]


def parse_log(path: Path, env: str) -> dict:
    run: dict = {"log": path.name, **harness_fields(), "env_steps": 0, "evaluations": [],
                 "printed_max": None, "updates": 0, "training_means": []}
    for line in path.read_text(errors="replace").splitlines():
        if read_harness_line(run, line):
            continue
        if m := STEPS.match(line):
            run["env_steps"] += int(m.group(1)) * CLASSIC_PROCESSES
        elif m := EVALUATION.match(line):
            run["evaluations"].append(float(m.group(3)))
        elif m := LARGEST.search(line):
            run["printed_max"] = float(m.group(1))
        elif m := UPDATE.match(line):
            run["updates"], run["env_steps"] = int(m.group(1)) + 1, int(m.group(2))
        elif m := TRAINING.match(line):
            run["training_means"].append(float(m.group(2)))
    run["status"] = run_status(path, run)
    if env == "mountaincar-continuous" and run["evaluations"]:
        run["max"] = checked_max(path, run["evaluations"], run["printed_max"])
        run["last"] = run["evaluations"][-1]
    if env == "halfcheetah":
        if run["training_means"]:
            run["last100"] = run["training_means"][-1]
        log_dir = run["flags"].get("log_dir")  # where this machine kept it: not recorded
        returns = monitor_returns(Path(log_dir)) if log_dir and Path(log_dir).exists() else []
        run["training_episodes"] = len(returns)
        if returns:
            run["last10"] = float(np.mean(returns[-10:]))
    run["flags"].pop("log_dir", None)
    return run


def collect(logs: Path) -> dict[str, dict[str, list[dict]]]:
    """{env: {agent: [run]}}; a .part beside its finished log is stale and skipped."""
    runs: dict[str, dict[str, list[dict]]] = {}
    for m, path in run_logs(logs, LOG_NAME):
        env, agent, seed = m.group(1), m.group(2), int(m.group(3))
        runs.setdefault(env, {}).setdefault(agent, []).append(
            {"env": env, "agent": agent, "seed": seed, **parse_log(path, env)})
    for by_agent in runs.values():
        for agent_runs in by_agent.values():
            agent_runs.sort(key=lambda r: r["seed"])
    return runs


def rows_for(runs: dict[str, dict[str, list[dict]]]) -> list[dict]:
    rows = []
    for env in ENVS:
        by_agent = runs.get(env, {})
        done = {a: [r for r in by_agent.get(a, []) if ended(r)] for a in AGENTS}
        for agent in AGENTS:
            row: dict = {"env": env, "agent": agent, "seeds": [r["seed"] for r in done[agent]],
                         "unfinished": [r["seed"] for r in by_agent.get(agent, []) if not ended(r)]}
            for stat in STATISTICS[env]:
                values = [r[stat] for r in done[agent] if stat in r]
                if values and len(values) == len(done[agent]):
                    row[stat] = summarize(values)
                    base = [r[stat] for r in done["ppo"] if stat in r]
                    if agent != "ppo" and base:
                        row[f"{stat}_over_ppo"] = improvement_over(values, base)
            if done[agent]:
                row["env_steps"] = summarize([r["env_steps"] for r in done[agent]])
            rows.append(row)
    return rows


def run_text(run: dict) -> str:
    parts = [f"{run['env_steps']:,} env steps"]
    if run["evaluations"]:
        parts.append("evaluations " + ", ".join(f"{v:.1f}" for v in run["evaluations"]))
    if run["training_means"]:
        parts.append(f"{run['updates']} updates, last-100 training mean {run['training_means'][-1]:.1f}")
    if run.get("last10") is not None:
        parts.append(f"last 10 training episodes {run['last10']:.1f}")
    return run_line(run, "finished", parts)


def markdown(rows: list[dict], runs: dict[str, dict[str, list[dict]]]) -> str:
    lines = ["# The authors' continuous-action code: XLVIN and PPO (dransyhe/CNAP e303fc5)", "",
             "Their own code (`run.sh --continuous`; README.md beside it says what runs and "
             "what was changed to make it run). IQM [95 % bootstrap CI] over the runs that ended "
             "(`xlvin.stats`); P(XLVIN > PPO) with its interval. The statistic marked *theirs* "
             "is the one their code reports.", ""]
    for env, label in ENVS.items():
        stats = STATISTICS[env]
        lines += [f"## {label}", "",
                  "| agent | runs ended (seeds) | unfinished seeds | env steps | "
                  + " | ".join(f"{s}: IQM [95 % CI]" for s in stats.values())
                  + " | " + " | ".join(f"P(XLVIN > PPO), {s}" for s in stats) + " |",
                  "|" + "---|" * (4 + 2 * len(stats))]
        for row in (r for r in rows if r["env"] == env):
            steps = row.get("env_steps")
            cells = [AGENTS[row["agent"]], f"{len(row['seeds'])} ({', '.join(map(str, row['seeds'])) or '-'})",
                     ", ".join(map(str, row["unfinished"])) or "-",
                     f"{steps['iqm']:,.0f}" if steps else "-"]
            cells += [interval_text(row[s]["iqm"], row[s]["iqm_low"], row[s]["iqm_high"], 1)
                      if s in row else "-" for s in stats]
            cells += [improvement_text(row.get(f"{s}_over_ppo")) if row["agent"] != "ppo" else "-"
                      for s in stats]
            lines.append("| " + " | ".join(cells) + " |")
        lines += ["", "Per run:", ""]
        for agent in AGENTS:
            for run in runs.get(env, {}).get(agent, []):
                lines.append(f"{run_text(run)} ({AGENTS[agent]})")
        if not runs.get(env):
            lines.append("- no run has started")
        lines.append("")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = arguments(__doc__, "continuous", "run.sh --continuous")
    parser.add_argument("--note", default="", help="a paragraph appended to continuous.md")
    args = parser.parse_args(argv)
    results = args.results or default_results(args.logs)
    runs = collect(args.logs)
    rows = rows_for(runs)
    write_results(results, "continuous", {"rows": rows, "runs": runs, "statistics": STATISTICS},
                  markdown(rows, runs), args.note)
    return 0


if __name__ == "__main__":
    sys.exit(main())
