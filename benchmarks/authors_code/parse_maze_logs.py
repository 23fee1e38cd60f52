"""Our statistics over the logs of the authors' maze runs (`run.sh --maze` writes them).

    .venv/bin/python -m benchmarks.authors_code.parse_maze_logs LOGS [--results DIR] \
        [--cpu-budget S] [--note TEXT]

Run it from the repository's root with this project's .venv (`bash scripts/setup.sh` or `bash
scripts/test.sh` sets it up): it imports `xlvin.stats`. RESULTS (default: `results/` beside LOGS,
outside the repository's committed results) gets maze.json and maze.md.

Their `training/maze.py` trains one level at a time (levels 1, 2, ... of their level files);
per rollout it prints `Gathered rollout R: #passes=.., #failed=..` (15 envs x 2048 steps by
default), then a test on 100 stochastic episodes of that level's *training* mazes (`Rollout R :
percentage passed P`); a level is passed when P > 95 % (`Level L, rollout R : percentage passed
...`), and then (with `--save_model`) the deterministic policy is evaluated on the held-out
mazes of every level: `#test# Overall percentage passed for paths of length L is: X` and
`#test# Overall percentage passed is: Y`, the share of evaluated held-out mazes whose episode
reached the goal (any number of moves; about every other maze is evaluated, see README.md).
After 1000 rollouts without a pass it moves on to the next level anyway.

Per run this reads: the levels passed and the rollouts (and so environment steps) each took;
the last complete held-out evaluation (overall and per level, as their code logs it); the
harness's lines (`harness: ...`, `wrapper: ...`, `wall_s`): agent, seed, flags, the CPU budget,
how the run ended (their curriculum finished, the CPU budget, or still running: a `.part` log)
and, when it was stopped, whether inside a held-out evaluation. Per agent, over the runs that
ended (finished or at their budget): IQM with its 95 % bootstrap interval (`xlvin.stats`) of
levels passed, environment steps and the last held-out success.
"""

import re
import sys
from pathlib import Path

from benchmarks.authors_code.harness_log import (arguments, default_results, ended,
                                                 harness_fields, read_harness_line, run_line,
                                                 run_logs, run_status, write_results)
from xlvin.stats import summarize

LOG_NAME = re.compile(r"^maze-(ppo|xlvin)-seed(\d+)\.txt(\.part)?$")
LEVEL = re.compile(r"^Training on maze level:\s+(\d+)")
GATHERED = re.compile(r"^Gathered rollout (\d+): #passes=(\d+), #failed=(\d+)")
TEST = re.compile(r"^Rollout (\d+) : percentage passed (\S+) from total episodes")
PASSED = re.compile(r"^Level (\d+), rollout (\d+) : percentage passed (\S+)")
HELD_LEVEL = re.compile(r"^#test# Overall percentage passed for paths of length (\d+) is: (\S+)")
HELD_ALL = re.compile(r"^#test# Overall percentage passed is: (\S+)")
AGENTS = {"xlvin": "XLVIN (--include_executor=True)", "ppo": "PPO"}
#: Their maze defaults (cnap/arguments.py with --env=maze).
DEFAULT_STEPS, DEFAULT_PROCESSES = 2048, 15
STATISTICS = {"levels_passed": "levels passed", "env_steps": "environment steps",
              "held_out": "held-out success, last evaluation (%)"}


def parse_log(path: Path) -> dict:
    """One run's progress and, if it ended, how."""
    run: dict = {"log": path.name, "levels_passed": [], "rollouts_to_pass": {}, "rollouts": 0,
                 "level": None, "held_out": None, "held_out_by_level": None,
                 "held_out_evaluations": 0, "held_out_cuts": 0, "in_held_out": False,
                 **harness_fields(), "last_train_test": None, "stopped": False}
    rollouts_this_level = 0
    by_level: dict[int, float] = {}
    for line in path.read_text(errors="replace").splitlines():
        if read_harness_line(run, line):
            continue
        if line.startswith("harness: stopped"):  # run_maze.sh's trap: stopped by hand
            run["stopped"] = True
        elif m := LEVEL.match(line):
            run["level"] = int(m.group(1))
            rollouts_this_level = 0
        elif GATHERED.match(line):
            run["rollouts"] += 1
            rollouts_this_level += 1
        elif m := TEST.match(line):
            run["last_train_test"] = float(m.group(2))
        elif m := PASSED.match(line):
            level = int(m.group(1))
            run["levels_passed"].append(level)
            run["rollouts_to_pass"][level] = rollouts_this_level
        elif line.startswith("wrapper: held-out evaluation started"):
            run["in_held_out"] = True
            by_level = {}
        elif m := HELD_LEVEL.match(line):
            by_level[int(m.group(1))] = float(m.group(2))
        elif m := HELD_ALL.match(line):
            run["held_out"] = float(m.group(1))
            run["held_out_by_level"] = by_level
            run["held_out_evaluations"] += 1
            run["held_out_after_level"] = run["levels_passed"][-1] if run["levels_passed"] else None
        elif line.startswith("wrapper: held-out evaluation finished"):
            run["in_held_out"] = False
        elif line.startswith("wrapper: held-out maze cut"):
            run["held_out_cuts"] += 1
    steps = int(run["flags"].get("num_train_steps", DEFAULT_STEPS))
    processes = int(run["flags"].get("num_processes", DEFAULT_PROCESSES))
    run["steps_per_rollout"] = steps * processes
    run["env_steps"] = run["rollouts"] * steps * processes
    stopped = run["stopped"] and path.name.endswith(".part")
    run["status"] = "stopped" if stopped else run_status(path, run)
    return run


def collect(logs: Path) -> dict[str, list[dict]]:
    runs: dict[str, list[dict]] = {}
    for m, path in run_logs(logs, LOG_NAME):
        agent, seed = m.group(1), int(m.group(2))
        runs.setdefault(agent, []).append({"agent": agent, "seed": seed, **parse_log(path)})
    for agent_runs in runs.values():
        agent_runs.sort(key=lambda r: r["seed"])
    return runs


def rows_for(runs: dict[str, list[dict]]) -> list[dict]:
    rows = []
    for agent in AGENTS:
        done = [r for r in runs.get(agent, []) if ended(r)]
        row: dict = {"agent": agent, "label": AGENTS[agent], "ended": len(done),
                     "seeds": [r["seed"] for r in done],
                     "unfinished": [r["seed"] for r in runs.get(agent, []) if not ended(r)]}
        if done:
            row["levels_passed"] = summarize([len(r["levels_passed"]) for r in done])
            row["env_steps"] = summarize([r["env_steps"] for r in done])
            held = [r["held_out"] for r in done if r["held_out"] is not None]
            row["held_out_runs"] = len(held)
            if held:
                row["held_out"] = summarize(held)
        rows.append(row)
    return rows


def fmt(summary: dict | None, digits: int) -> str:
    if summary is None:
        return "-"
    return (f"{summary['iqm']:,.{digits}f} [{summary['iqm_low']:,.{digits}f}, "
            f"{summary['iqm_high']:,.{digits}f}]")


def run_text(run: dict) -> str:
    passed = ", ".join(f"{lv} ({run['rollouts_to_pass'][lv]} rollouts)"
                       for lv in run["levels_passed"]) or "none"
    parts = [f"levels passed: {passed}",
             f"{run['rollouts']} rollouts, {run['env_steps']:,} env steps",
             f"on level {run['level']}" if run["level"] is not None else "no level started"]
    if run["held_out"] is not None:
        per = ", ".join(f"{lv}: {v:.1f}" for lv, v in sorted(run["held_out_by_level"].items()))
        parts.append(f"last held-out evaluation (after level {run['held_out_after_level']}): "
                     f"{run['held_out']:.1f} % ({per})")
    if run["in_held_out"]:
        parts.append("stopped inside a held-out evaluation")
    if run["held_out_cuts"]:
        parts.append(f"{run['held_out_cuts']} held-out mazes cut at 1,000 moves")
    return run_line(run, "their curriculum finished", parts)


def markdown(rows: list[dict], runs: dict[str, list[dict]], budget: float | None) -> str:
    lines = ["# The authors' maze code: XLVIN and PPO (dransyhe/CNAP e303fc5)", ""]
    lines.append(
        "Their `training/maze.py` (entry point `maze`, started through "
        "`benchmarks/authors_code/maze_main.py`; `run.sh --maze`), every setting theirs: 15 envs "
        "x 2048 steps a rollout, 4 PPO epochs x 32 minibatches, Adam at lr 1e-3, a level passed "
        "at > 95 % of 100 stochastic episodes on its training mazes, at most 1,000 rollouts a "
        "level; XLVIN with `--include_executor=True` (depth 1, their Erdos-Renyi executor "
        "pre-trained at hidden size 10), PPO without. "
        + (f"**Budget: at most {budget:,.0f} s of CPU time in each run's main process** "
           "(RLIMIT_CPU; their own limits are days of CPU), one run at a time at the priority "
           "`run.sh --nice` gave (default 19, the lowest), beside other jobs on the machine's "
           "2 cores. " if budget else "")
        + "Held-out success as their code logs it: the share of evaluated held-out mazes reached "
        "by the deterministic policy, any number of moves (their evaluation plays about every "
        "other held-out maze; a maze still going after 1,000 moves is counted as failed by the "
        "harness, where their loop would never end). IQM [95 % bootstrap CI] over the runs that "
        "ended (finished or at their budget).")
    lines += ["", "| agent | runs ended (seeds) | unfinished seeds | levels passed | "
              "environment steps | held-out success, last evaluation (%) |",
              "|---|---|---|---|---|---|"]
    for row in rows:
        held = fmt(row.get("held_out"), 1)
        if row.get("ended") and row.get("held_out_runs", 0) < row["ended"]:
            held += f" ({row.get('held_out_runs', 0)} of {row['ended']} runs evaluated)"
        lines.append(
            f"| {row['label']} | {row['ended']} ({', '.join(map(str, row['seeds'])) or '-'}) | "
            f"{', '.join(map(str, row['unfinished'])) or '-'} | "
            f"{fmt(row.get('levels_passed'), 1)} | {fmt(row.get('env_steps'), 0)} | {held} |")
    lines += ["", "Per run:", ""]
    for agent in AGENTS:
        for run in runs.get(agent, []):
            lines.append(f"{run_text(run)} ({AGENTS[agent]})")
    if not any(runs.values()):
        lines.append("- no run has started")
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = arguments(__doc__, "maze", "run.sh --maze")
    parser.add_argument("--cpu-budget", type=float, help="the CPU budget of each run, seconds")
    parser.add_argument("--note", default="", help="a paragraph appended to maze.md")
    args = parser.parse_args(argv)
    results = args.results or default_results(args.logs)
    runs = collect(args.logs)
    budgets = {r["cpu_budget_s"] for rs in runs.values() for r in rs if r["cpu_budget_s"]}
    budget = args.cpu_budget or (budgets.pop() if len(budgets) == 1 else None)
    rows = rows_for(runs)
    write_results(results, "maze",
                  {"rows": rows, "runs": runs, "statistics": STATISTICS, "cpu_budget_s": budget},
                  markdown(rows, runs, budget), args.note)
    return 0


if __name__ == "__main__":
    sys.exit(main())
