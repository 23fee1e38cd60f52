"""What the parsers of the authors' logs share (`parse_logs`, `parse_maze_logs`,
`parse_continuous_logs`): the lines our harness writes into a run's log (`harness.sh`, used by
`run.sh`, `run_maze.sh` and `run_continuous.sh`), the evaluation lines of their
`training/classic_control.py`, how a run ended, the run logs of a folder, the per-run lines and
the results files.
"""

import argparse
import json
import re
from pathlib import Path

#: Their classic_control.py after each update: rollout, episodes evaluated, their mean return.
EVALUATION = re.compile(
    r"^Rollout (\d+) : Total rewards \S+ from total episodes (\d+) \(Average: (\S+)\)")
#: ... and at the end, the maximum over those evaluations (their statistic).
LARGEST = re.compile(r"Largest average reward =\s+(\S+)")
FLAG = re.compile(r"--(\w+)=(\S*)")


def harness_fields() -> dict:
    """A run's fields that the harness's lines fill: the flags of their command, the CPU budget,
    the CPU time (user + system, s), the wall time (s), the exit status, and whether `time`
    reported SIGXCPU (signal 24: the CPU budget spent)."""
    return {"flags": {}, "cpu_budget_s": None, "cpu_s": None, "wall_s": None, "exit": None,
            "cpu_signal": False}


def read_harness_line(run: dict, line: str) -> bool:
    """Reads LINE into RUN's `harness_fields` when the harness wrote it; False for any other."""
    if line.startswith("harness: flags"):
        run["flags"] = dict(FLAG.findall(line))
    elif line.startswith("harness: cpu_budget_s"):
        run["cpu_budget_s"] = float(line.split()[2])
    elif line.startswith("harness: cpu_s"):
        user, system = re.findall(r"([\d.]+) (?:user|system)", line)
        run["cpu_s"] = float(user) + float(system)
    elif line.startswith("harness: exit"):
        run["exit"] = int(line.split()[2])
    elif "Command terminated by signal 24" in line:
        run["cpu_signal"] = True
    elif line.startswith("wall_s "):
        run["wall_s"] = float(line.split()[1])
    else:
        return False
    return True


def checked_max(path: Path, evaluations: list[float], printed: float | None) -> float:
    """The maximum of a run's evaluations, checked against the one their code printed
    (`Largest average reward`; None when the run ended before printing it)."""
    top = max(evaluations)
    if printed is not None and abs(top - printed) > 1e-3 * max(1.0, abs(printed)):
        raise ValueError(f"{path}: the maximum of the evaluations {top} differs from the "
                         f"printed one {printed}")
    return top


def run_status(path: Path, run: dict) -> str:
    """How the run of the log at PATH ended: "running" (a `.part` log, no exit status yet),
    "finished" (exit 0), "cpu budget" (SIGXCPU: exit 152, or `time`'s report of signal 24) or
    "failed"."""
    if path.name.endswith(".part"):
        return "running" if run["exit"] is None else "failed"
    if run["exit"] == 0:
        return "finished"
    if run["cpu_signal"] or run["exit"] == 152:
        return "cpu budget"
    return "failed"


def ended(run: dict) -> bool:
    """Whether a run counts in the statistics: finished, or stopped at its CPU budget."""
    return run["status"] in ("finished", "cpu budget")


def run_logs(logs: Path, name: re.Pattern) -> list[tuple[re.Match, Path]]:
    """The run logs in LOGS whose file name NAME matches, with the match, in name order; a
    `.part` log beside its finished log is stale and left out."""
    found = []
    for path in sorted(logs.glob("*.txt*")):
        m = name.match(path.name)
        if m and not (path.name.endswith(".part") and path.with_suffix("").exists()):
            found.append((m, path))
    return found


def run_line(run: dict, finished: str, details: list[str]) -> str:
    """A run's line in the per-run list: its seed, how it ended (FINISHED: what a finished run
    did), DETAILS, its CPU and wall time."""
    status = {"finished": finished, "cpu budget": "stopped at its CPU budget",
              "running": "unfinished (still running when this was written)",
              "stopped": "unfinished (stopped by hand before its budget was spent)",
              "failed": f"failed (exit {run['exit']})"}[run["status"]]
    parts = [f"seed {run['seed']}: {status}", *details]
    if run["cpu_s"] is not None:
        parts.append(f"CPU {run['cpu_s']:,.0f} s")
    if run["wall_s"] is not None:
        parts.append(f"wall {run['wall_s']:,.0f} s")
    return "- " + "; ".join(parts)


def arguments(doc: str, name: str, command: str, logs_nargs: str | None = None
              ) -> argparse.ArgumentParser:
    """A parser's command line: LOGS (COMMAND's OUT/logs) and --results (where NAME.{md,json}
    go); the parser adds its own options."""
    parser = argparse.ArgumentParser(description=doc.splitlines()[0])
    parser.add_argument("logs", type=Path, nargs=logs_nargs, help=f"{command}'s OUT/logs")
    parser.add_argument("--results", type=Path,
                        help=f"where {name}.{{md,json}} go (default: results/ beside LOGS)")
    return parser


def default_results(logs: Path) -> Path:
    """Where results go without --results: `results/` beside LOGS (the run's OUT folder), outside
    the repository's committed results."""
    return logs.resolve().parent / "results"


def write_results(results: Path, name: str, data: dict, text: str, note: str = "") -> None:
    """RESULTS/NAME.json (DATA) and RESULTS/NAME.md (TEXT, then the paragraph NOTE if any); the
    latter on stdout too."""
    text += f"\n{note}\n" if note else ""
    results.mkdir(parents=True, exist_ok=True)
    (results / f"{name}.json").write_text(json.dumps(data, indent=1, default=float) + "\n")
    (results / f"{name}.md").write_text(text)
    print(text)
