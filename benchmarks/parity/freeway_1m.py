"""Our PPO on Freeway at 1M transitions on fresh seeds, beside SB3's (issue 56, part 2).

    python -m benchmarks.parity.freeway_1m            # rewrite results/parity/freeway-1m/

Reads committed records only, trains nothing: our PPO's fresh seeds 3-7 (`FRESH`, written by
`xlvin reproduce atari --games Freeway --agents ppo --seeds 5 --first-seed 3 --finished-only
--results results/atari-1m-fresh`), our earlier seeds 0-2 (`EARLIER`, results/atari-1m) and
SB3 2.9.2's three seeds at the same settings (`SB3`, the "sb3" records of `benchmarks.parity.atari`'s
report). The comparison was fixed before the fresh seeds ran: seeds that learned (last training
window above `LEARNED_SCORE` a game), fresh seeds against SB3's, by Fisher's exact test, and
P(SB3's AUC > ours) with its 95 % bootstrap interval; seeds 0-2 were seen before the question
was asked, so their pooling with the fresh ones is reported second. A fresh seed stopped short of
the budget (at a session's deadline; it resumes exactly) is in no statistic: it is listed, and
drawn dashed, at its last evaluation.
"""

import argparse
import json
from pathlib import Path
from typing import Any

from benchmarks.parity.atari import (
    BUDGET,
    GAME,
    LEARNED_SCORE,
    ROOT,
    compare,
    library_rows,
    ppo_cells,
    plot,
    rows_table,
    seeds_table,
)

FRESH = ROOT / "results" / "atari-1m-fresh" / "atari.json"
EARLIER = ROOT / "results" / "atari-1m" / "atari.json"
SB3 = ROOT / "results" / "parity" / "atari.json"
OUT = ROOT / "results" / "parity" / "freeway-1m"
FRESH_SEEDS = tuple(range(3, 8))
LIBS = ("xlvin PPO, fresh seeds 3-7", "xlvin PPO, seeds 0-2", "SB3 PPO")


def comparison_text(name: str, c: dict[str, Any]) -> str:
    """One sentence of `compare(SB3, ours)`."""
    from xlvin.stats import improvement_text

    la, na, lb, nb = c["learned"]
    if nb == 0:
        return f"SB3 against {name}: none of ours has trained the whole budget yet."
    p = "-" if c["fisher_p"] is None else f"{c['fisher_p']:.3f}"
    return (f"SB3 against {name}: learned on {la} of {na} against {lb} of {nb} (Fisher's exact "
            f"p = {p}, two-sided); P(SB3's AUC > ours) over pairs of seeds: "
            f"{improvement_text(c['auc_over'])}.")


def write(out: Path, fresh_path: Path = FRESH, earlier_path: Path = EARLIER,
          sb3_path: Path = SB3) -> dict[str, Any]:
    """OUT/freeway-1m.{json,md,png}; returns the JSON."""
    fresh_cells = ppo_cells(fresh_path, BUDGET)
    fresh = [c for c in fresh_cells if c["finished"]]
    running = [c for c in fresh_cells if not c["finished"]]
    earlier = [c for c in ppo_cells(earlier_path, BUDGET) if c["finished"]]
    sb3 = json.loads(sb3_path.read_text())["sb3"]
    libs = dict(zip(LIBS, (fresh, earlier, sb3)))
    rows = library_rows(libs)
    summary = {"game": GAME, "transitions": BUDGET, "learned_score": LEARNED_SCORE,
               "fresh_seeds_planned": list(FRESH_SEEDS),
               "sources": {name: str(p.relative_to(ROOT) if p.is_relative_to(ROOT) else p)
                           for name, p in zip(LIBS, (fresh_path, earlier_path, sb3_path))},
               "rows": rows, "sb3_vs_fresh": compare(sb3, fresh),
               "sb3_vs_all_ours": compare(sb3, fresh + earlier),
               "still_training": [{k: c[k] for k in ("seed", "transitions_reached",
                                                     "first_score_at")} |
                                  {"last_window": c["curve"][-1][1] if c["curve"] else None}
                                  for c in running]}
    lines = [f"# Our PPO on {GAME} at {BUDGET:,} transitions, fresh seeds, beside SB3's", "",
             "The same settings, envs and evaluator as `results/parity/atari.md`; AUC: the mean "
             "unclipped score of the training games over the transitions trained; greedy: the "
             "final policy on the 10 evaluation games; IQM over seeds [95 % bootstrap interval]. "
             "The fresh seeds 3-7 were chosen before they ran; seeds 0-2 are those whose result "
             "raised the question.", "", *rows_table(rows), "",
             comparison_text("our fresh seeds", summary["sb3_vs_fresh"]), "",
             comparison_text("all our finished seeds (of 0-7)", summary["sb3_vs_all_ours"]), "",
             *seeds_table(libs)]
    if running or len(fresh) < len(FRESH_SEEDS):
        lines += ["", f"**Unfinished:** {len(fresh)} of the {len(FRESH_SEEDS)} fresh seeds have "
                  f"trained the whole budget."]
    if running:
        lines += ["", "Stopped at a session's deadline, resumable (in no statistic above; drawn "
                  "dashed):", "", "| seed | transitions so far | first training game with a point "
                  "| last training window, points a game |", "|---|---|---|---|"]
        for r in summary["still_training"]:
            first = "not yet" if r["first_score_at"] is None else f"{r['first_score_at']:,}"
            last = "-" if r["last_window"] is None else f"{r['last_window']:.1f}"
            lines.append(f"| {r['seed']} | {r['transitions_reached']:,} | {first} | {last} |")
    lines += ["", "Sources: " + "; ".join(f"{name}: `{p}`" for name, p in
                                         summary["sources"].items()) + ".", "",
              "Command: `python -m benchmarks.parity.freeway_1m`", ""]
    out.mkdir(parents=True, exist_ok=True)
    (out / "freeway-1m.json").write_text(json.dumps(summary, indent=1) + "\n")
    (out / "freeway-1m.md").write_text("\n".join(lines))
    plot(libs, running, out / "freeway-1m.png", running_lib=LIBS[0])
    return summary


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--out", type=Path, default=OUT)
    write(parser.parse_args().out)


if __name__ == "__main__":
    main()
