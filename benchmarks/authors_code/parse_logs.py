"""Our statistics over the logs of the authors' CartPole runs (`run.sh` writes them).

    .venv/bin/python -m benchmarks.authors_code.parse_logs LOGS [--results DIR] \
        [--ours results/table1-paper.json ...]
    .venv/bin/python -m benchmarks.authors_code.parse_logs --from-json OLD/table1.json \
        --results DIR [--ours ...]

Run it from the repository's root with this project's .venv (`bash scripts/setup.sh`, or `bash
scripts/test.sh`, sets it up): it imports `xlvin.stats`.

Their `training/classic_control.py` prints one line per update, after a greedy evaluation of at
least 100 episodes on 15 parallel envs (`Rollout 0 : Total rewards ... (Average: X)`), and at
the end `Largest average reward = M`, the statistic the paper reports. Per run this takes: the
maximum over the evaluations (theirs, checked against their own printed maximum), the last
evaluation (after the last update) and the mean of the last 10. Their code has no evaluation of
the final policy on fresh episodes; `--ours` adds the CartPole-v0 PPO and XLVIN-R rows of our
`xlvin reproduce classic` results (`table1-*.json`), labelled by file, on the same statistics
plus that one, the final policy on 100 fresh episodes (our headline). Per agent: IQM with its
95 % bootstrap interval, mean +- std, and P(XLVIN-R > PPO) on each statistic. Writes
RESULTS/table1.json and RESULTS/table1.md; RESULTS defaults to `results/` beside LOGS (the
`run.sh --out` folder), outside the repository's committed results. `--from-json` reads the
authors' runs from an earlier table1.json instead of logs (to rewrite a committed table).
"""

import json
import re
import sys
from pathlib import Path

import numpy as np

from benchmarks.authors_code.harness_log import (EVALUATION, LARGEST, arguments, checked_max,
                                                 default_results, harness_fields,
                                                 read_harness_line, write_results)
from xlvin.stats import improvement_over, improvement_text, interval_text, summarize

LOG_NAME = re.compile(r"^cartpole-(ppo|xlvin-r)-seed(\d+)\.txt$")
STATISTICS = {"max": "max over evaluations (the authors' statistic)",
              "last": "last evaluation (after the last update)",
              "last10": "mean of the last 10 evaluations",
              "final_fresh": "final policy (100 fresh episodes; ours only)"}
#: The paper's Table 1 (mean +- std over 5 seeds).
PAPER = {"ppo": "104.6 +- 48.5", "xlvin-r": "199.2 +- 1.6"}


def parse_log(path: Path) -> dict:
    """One run's evaluations and statistics; a log without its final line is an error."""
    evals, episodes, printed, harness = [], [], None, harness_fields()
    for line in path.read_text(errors="replace").splitlines():
        if read_harness_line(harness, line):
            continue
        if m := EVALUATION.match(line):
            episodes.append(int(m.group(2)))
            evals.append(float(m.group(3)))
        elif m := LARGEST.search(line):
            printed = float(m.group(1))
    if printed is None or not evals:
        raise ValueError(f"{path}: not a finished run (no evaluations or no final maximum)")
    return {"evaluations": evals, "episodes_per_evaluation": episodes,
            "max": checked_max(path, evals, printed), "last": evals[-1],
            "last10": float(np.mean(evals[-10:])), "wall_s": harness["wall_s"]}


def ours_runs(path: Path) -> dict[str, list[dict]]:
    """CartPole-v0 PPO and XLVIN-R runs of one of our table1 JSON files, as {agent: [run]}."""
    data = json.loads(path.read_text())
    out: dict[str, list[dict]] = {}
    for run in data["runs"]:
        if run["env"] == "CartPole-v0" and run["agent"] in PAPER:
            progress = [p["eval_return"] for p in run["progress"]]
            out.setdefault(run["agent"], []).append({
                "seed": run.get("seed"), "max": max(progress), "last": progress[-1],
                "last10": float(np.mean(progress[-10:])), "final_fresh": run["final_return"]})
    return out


def rows_for(source: str, runs: dict[str, list[dict]]) -> list[dict]:
    rows = []
    for agent in ("ppo", "xlvin-r"):
        if agent not in runs:
            continue
        row = {"source": source, "agent": agent, "seeds": len(runs[agent]),
               "paper": PAPER[agent]}
        for stat in STATISTICS:
            if not all(stat in r for r in runs[agent]):
                continue  # their code has no final evaluation on fresh episodes
            row[stat] = summarize([r[stat] for r in runs[agent]])
            if agent != "ppo" and "ppo" in runs:
                row[f"{stat}_over_ppo"] = improvement_over([r[stat] for r in runs[agent]],
                                                           [r[stat] for r in runs["ppo"]])
        rows.append(row)
    return rows


def markdown(rows: list[dict], theirs: dict[str, list[dict]]) -> str:
    head = ("| code | agent | seeds | paper (mean +- std) | "
            + " | ".join(f"{label}: IQM [95 % CI]" for label in STATISTICS.values())
            + " | max: mean +- std | P(XLVIN-R > PPO), max | P(XLVIN-R > PPO), last"
            + " | P(XLVIN-R > PPO), final policy |")
    lines = [head, "|" + "---|" * (head.count("|") - 1)]
    for row in rows:
        cells = [row["source"], row["agent"], str(row["seeds"]), row["paper"]]
        cells += [interval_text(row[s]["iqm"], row[s]["iqm_low"], row[s]["iqm_high"], 1)
                  if s in row else "-" for s in STATISTICS]
        cells.append(f"{row['max']['mean']:.1f} +- {row['max']['std']:.1f}")
        cells += [improvement_text(row.get(f"{s}_over_ppo"))
                  for s in ("max", "last", "final_fresh")]
        lines.append("| " + " | ".join(cells) + " |")
    lines.append("")
    lines.append("Per seed (the authors' code): max over evaluations / last evaluation.")
    lines.append("")
    for agent, runs in theirs.items():
        per_seed = ", ".join(f"{r['seed']}: {r['max']:.1f} / {r['last']:.1f}" for r in runs)
        lines.append(f"- {agent}: {per_seed}")
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = arguments(__doc__, "table1", "run.sh", logs_nargs="?")
    parser.add_argument("--from-json", type=Path,
                        help="the authors' runs from an earlier table1.json instead of LOGS")
    parser.add_argument("--ours", type=Path, nargs="*", default=[])
    args = parser.parse_args(argv)
    if (args.logs is None) == (args.from_json is None):
        parser.error("give LOGS or --from-json, not both")
    if args.results is None:
        if args.logs is None:
            parser.error("--from-json needs --results")
        args.results = default_results(args.logs)
    theirs: dict[str, list[dict]] = {}
    if args.from_json is not None:
        theirs = json.loads(args.from_json.read_text())["runs"]
    else:
        for path in sorted(args.logs.glob("cartpole-*-seed*.txt"),
                           key=lambda p: int(LOG_NAME.match(p.name).group(2))):
            agent, seed = LOG_NAME.match(path.name).groups()
            theirs.setdefault(agent, []).append({"seed": int(seed), **parse_log(path)})
    if not theirs:
        print(f"parse_logs: no finished run logs in {args.logs}", file=sys.stderr)
        return 1
    rows = rows_for("authors' code (dransyhe/CNAP)", theirs)
    for path in args.ours:
        runs = ours_runs(path)
        seeds = sorted(r["seed"] for agent_runs in runs.values() for r in agent_runs)
        rows += rows_for(f"ours, `paper` protocol, seeds {seeds[0]}-{seeds[-1]}", runs)
    write_results(args.results, "table1", {"rows": rows, "runs": theirs, "statistics": STATISTICS},
                  markdown(rows, theirs))
    return 0


if __name__ == "__main__":
    sys.exit(main())
