"""Paper Table 1's results (`xlvin.experiments.table1`'s cells): over training seeds, each
statistic's interquartile mean with its 95 % stratified bootstrap interval, mean and std, and
P(agent > PPO) (rliable's definitions, `xlvin.stats`), beside the paper's numbers; one
protocol's table and figure, and once both protocols have results, the combined ones."""

import itertools
from pathlib import Path
from typing import Any

import numpy as np

from xlvin.errors import UserError
from xlvin.experiments.figures import pyplot
from xlvin.experiments.results import write_files
from xlvin.experiments.shapes import IMPROVEMENT, INTERVAL, Optional, check_entries, one_of
from xlvin.experiments.table1 import (
    AGENTS,
    ENVS,
    LAST,
    PAPER,
    PROGRESS_EPISODES,
    PROTOCOL_LABELS,
    PROTOCOLS,
)
from xlvin.io.files import atomic_savefig, read_json
from xlvin.io.run_dir import reading_results
from xlvin.kernels import check_one_mode
from xlvin.stats import improvement_over, improvement_text, iqm, iqm_text, summarize
from xlvin.wording import compare
STATISTICS = {
    "final": ("final_return", "final policy (100 fresh episodes)"),
    "max_eval": ("max_eval_return", "max over per-update evaluations (authors' statistic)"),
    "last_evals": ("last_evals_mean", f"mean of the last {LAST} per-update evaluations"),
}


def _key(r: dict[str, Any]) -> tuple[str, str, str, bool, str]:
    return r["protocol"], r["env"], r["agent"], r["strict"], r["variant"]


def aggregate(records: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """One row per (protocol, env, agent, TransE data, variant): every statistic's IQM with its
    95 % bootstrap interval, mean and std over seeds; P(agent > PPO) on the final policy (against
    the PPO cells of the same protocol, env and variant); data counts."""
    groups: dict[tuple[str, str, str, bool, str], list[dict[str, Any]]] = {}
    for r in records:
        groups.setdefault(_key(r), []).append(r)
    rows = []
    for key in sorted(groups, key=lambda k: (PROTOCOLS.index(k[0]), ENVS.index(k[1]),
                                             list(AGENTS).index(k[2]), k[3], k[4])):
        protocol, env, agent, strict, variant = key
        group = sorted(groups[key], key=lambda r: r["seed"])
        paper = PAPER.get((env, agent), (float("nan"), float("nan")))
        row: dict[str, Any] = {
            "protocol": protocol, "env": env, "agent": agent, "strict": strict,
            "variant": variant, "seeds": [r["seed"] for r in group],
            "paper_mean": paper[0], "paper_std": paper[1],
            "episodes_mean": float(np.mean([r["episodes"] for r in group])),
            "transitions_mean": float(np.mean([r["transitions"] for r in group])),
            "transe_transitions_mean": float(np.mean([r["transe_transitions"] for r in group])),
            "wall_seconds_total": float(sum(r["wall_seconds"] for r in group)),
        }
        for name, (field, _) in STATISTICS.items():
            row[name] = summarize(np.array([r[field] for r in group]))
        if env == "MountainCar-v0":  # the flag: an episode shorter than the 200-step limit
            row["flag_episodes_per_seed"] = [sum(x > -200 for x in r["training_returns"])
                                             for r in group]
        ppo = groups.get((protocol, env, "ppo", False, variant))
        if agent != "ppo" and ppo:
            row["p_better_than_ppo"] = {
                **improvement_over([r["final_return"] for r in group],
                                   [r["final_return"] for r in ppo]),
                "ppo_seeds": len(ppo)}
        rows.append(row)
    return rows


def _ci(s: dict[str, float]) -> str:
    return iqm_text(s, 1)


def _stat(row: dict[str, Any] | None, name: str) -> str:
    """A row's statistic as IQM [CI], or - where the row is missing."""
    return "-" if row is None else _ci(row[name])


def _pm(mean: float, std: float) -> str:
    return "-" if np.isnan(mean) else (f"{mean:.1f}" if np.isnan(std) else f"{mean:.1f} +- {std:.1f}")


def _label(r: dict[str, Any]) -> str:
    label = r["agent"]
    if r["strict"]:
        label += " (strict TransE)"
    if r["variant"]:
        label += f" [{r['variant']}]"
    return label


def markdown(rows: list[dict[str, Any]], wall_seconds: float | None) -> str:
    """One protocol's table: every statistic of every cell."""
    header = (
        "| env | agent | paper (mean +- std, 5 seeds) | final policy: IQM [95 % CI] | final: mean "
        "+- std | max over evaluations (authors'): IQM [95 % CI] | last 10 evaluations: IQM "
        "[95 % CI] | P(> PPO), final [95 % CI] | episodes | transitions | TransE random "
        "transitions | seeds |"
    )
    lines = [header, "|---|---|---|---|---|---|---|---|---|---|---|---|"]
    for r in rows:
        better = improvement_text(r.get("p_better_than_ppo"))
        lines.append(
            f"| {r['env']} | {_label(r)} | {_pm(r['paper_mean'], r['paper_std'])} | "
            f"**{_ci(r['final'])}** | {r['final']['mean']:.1f} +- {r['final']['std']:.1f} | "
            f"{_ci(r['max_eval'])} | {_ci(r['last_evals'])} | {better} | "
            f"{r['episodes_mean']:.1f} | {r['transitions_mean']:.0f} | "
            f"{r['transe_transitions_mean']:.0f} | {len(r['seeds'])} |"
        )
    protocols = sorted({r["protocol"] for r in rows})
    about = (
        f"Run under {'; '.join(PROTOCOL_LABELS[p] for p in protocols)} (`xlvin reproduce "
        f"classic --protocol {'|'.join(protocols)}`; see `xlvin.experiments.table1`). Final "
        "policy: greedy, 100 episodes with seeds 1,000,000+, never used in training: our "
        "headline. Max over "
        f"evaluations: the best of the {PROGRESS_EPISODES}-episode greedy evaluations after "
        "every update (fresh episodes each time), the statistic the authors' script prints; "
        f"last 10: the mean of the last {LAST} of them. IQM: interquartile mean over training "
        "seeds, 95 % stratified bootstrap interval (2,000 resamples); P(> PPO): probability that "
        "a run of the agent beats a run of PPO on the final policy, with its bootstrap interval. "
        "Episodes and transitions: what PPO learned from (protocol paper: every step of all envs, "
        "unfinished episodes included); TransE random transitions: the random-policy data of "
        "its pre-training (protocol paper: one shared pre-training per environment)."
    )
    notes = ["", about]
    for r in rows:
        if "flag_episodes_per_seed" in r:
            notes.append(
                f"{r['env']} {_label(r)}: training episodes that reached the flag, per seed: "
                f"{', '.join(map(str, r['flag_episodes_per_seed']))} (of "
                f"{r['episodes_mean']:.0f} a seed on average)."
            )
    cells = sum(len(r["seeds"]) for r in rows)
    train = sum(r["wall_seconds_total"] for r in rows)
    notes.append(
        f"{cells} cells; their training (pre-training included, final evaluation excluded) took "
        f"{train:.0f} s of worker time in all."
    )
    if wall_seconds is not None:
        notes.append(
            f"Wall time of this invocation: {wall_seconds:.0f} s (cells finished earlier are "
            "skipped, so a resumed invocation is shorter than a full run)."
        )
    return "\n".join(lines + notes) + "\n"


def combined_markdown(rows: list[dict[str, Any]]) -> str:
    """The paper's number beside ours under both protocols and both statistics (standard TransE
    data, no variant)."""
    by = {(r["protocol"], r["env"], r["agent"]): r for r in rows
          if not r["strict"] and not r["variant"]}
    header = (
        "| env | agent | paper | protocol paper: authors' statistic (max over evaluations) | "
        "protocol paper: final policy | protocol ours: authors' statistic | protocol ours: "
        "final policy | P(> PPO), final, paper protocol | P(> PPO), final, ours |"
    )
    lines = [header, "|---|---|---|---|---|---|---|---|---|"]
    for env in ENVS:
        for agent in AGENTS:
            paper, ours = by.get(("paper", env, agent)), by.get(("ours", env, agent))
            if paper is None and ours is None:
                continue
            ref = PAPER.get((env, agent), (float("nan"), float("nan")))
            lines.append(
                f"| {env} | {agent} | {_pm(*ref)} | {_stat(paper, 'max_eval')} | "
                f"**{_stat(paper, 'final')}** | {_stat(ours, 'max_eval')} | "
                f"**{_stat(ours, 'final')}** | {improvement_text(paper and paper.get('p_better_than_ppo'))} | "
                f"{improvement_text(ours and ours.get('p_better_than_ppo'))} |"
            )
    return "\n".join(lines) + (
        "\n\nIQM over training seeds [95 % stratified bootstrap CI]; the final policy (bold) is "
        "our headline. The paper reports mean +- std over 5 seeds of the maximum over "
        f"evaluations. The {PROTOCOL_LABELS['ours']}.\n"
    )


def results_stem(protocol: str, variant: str = "") -> str:
    """The file name (without suffix) of a protocol's (and variant's) results."""
    return f"table1-{protocol}" + (f"-{variant}" if variant else "")


def write_results(records: list[dict[str, Any]], results: Path, wall_seconds: float | None) -> str:
    """Aggregate one protocol's records (of one variant) into RESULTS/table1-PROTOCOL.{md,json,png}
    (table1-PROTOCOL-VARIANT.* for a variant); when both protocols have results without variant,
    also RESULTS/table1.{md,json,png} (the combined table and plot). Returns the markdown."""
    kinds = {(r["protocol"], r["variant"]) for r in records}
    if len(kinds) != 1:
        raise UserError(f"write_results takes one protocol's and variant's records, got {sorted(kinds)}")
    ((protocol, variant),) = kinds
    check_one_mode({f"{r['env']} {r['agent']} seed {r['seed']}": r.get("kernels") for r in records})
    rows = aggregate(records)
    md = markdown(rows, wall_seconds)
    stem = results_stem(protocol, variant)  # may hold dots (kl-0.01): append, never with_suffix
    write_files(results, stem, md, {"protocol": protocol, "rows": rows, "runs": records,
                                    "wall_seconds": wall_seconds})
    plot(rows, records, results / f"{stem}.png")
    both = read_earlier(results)
    if len(both) == len(PROTOCOLS):
        rows = [row for table in both for row in table["rows"]]
        write_files(results, "table1", combined_markdown(rows),
                    {"protocols": list(PROTOCOLS), "rows": rows})
        plot_combined(rows, [run for table in both for run in table["runs"]],
                      results / "table1.png")
    return md


#: What the combined table and figure read of a protocol's table: its rows (`aggregate`) and
#: runs (the records), each of a cell of Table 1.
_CELL = {"protocol": one_of(PROTOCOLS), "env": str, "agent": str, "strict": bool, "variant": str}
ROW = {**_CELL, "final": INTERVAL, "max_eval": INTERVAL, "p_better_than_ppo": Optional(IMPROVEMENT)}
RUN = {**_CELL, "final_return": float, "max_eval_return": float}


def read_earlier(results: Path) -> list[dict[str, list[Any]]]:
    """The rows and runs of each protocol's RESULTS/table1-PROTOCOL.json there is (the combined
    table is made of them); one that is not the JSON the code wrote (`ROW`, `RUN`) is one
    UserError."""
    tables = []
    for p in PROTOCOLS:
        if (results / f"table1-{p}.json").is_file():
            with reading_results(results / f"table1-{p}.json"):
                table = read_json(results / f"table1-{p}.json")
                tables.append({"rows": check_entries(table, "rows", ROW),
                               "runs": check_entries(table, "runs", RUN)})
    return tables


def plot(rows: list[dict[str, Any]], records: list[dict[str, Any]], path: Path) -> None:
    """Top: every seed's final policy (filled) and max over evaluations (hollow) per agent, with
    the IQM and its 95 % interval, and the paper's number (star). Bottom: the per-update greedy
    evaluations, IQM over seeds with a band from the 25th to the 75th percentile."""
    plt = pyplot()

    envs = [e for e in ENVS if any(r["env"] == e for r in rows)]
    fig, axes = plt.subplots(2, len(envs), figsize=(5.5 * len(envs), 8), squeeze=False)
    rng = np.random.default_rng(0)
    for column, env in enumerate(envs):
        top, bottom = axes[0, column], axes[1, column]
        env_rows = [r for r in rows if r["env"] == env]
        for i, row in enumerate(env_rows):
            group = [r for r in records if _key(r) == _key(row)]
            color = f"C{i}"
            for offset, (name, marker) in ((-0.15, ("final", "o")), (0.15, ("max_eval", "o"))):
                field = STATISTICS[name][0]
                values = [r[field] for r in group]
                x = i + offset + rng.uniform(-0.05, 0.05, len(values))
                top.scatter(x, values, s=14, marker=marker, alpha=0.7,
                            facecolors=color if name == "final" else "none", edgecolors=color)
                s = row[name]
                top.errorbar(i + offset, s["iqm"], yerr=[[s["iqm"] - s["iqm_low"]],
                             [s["iqm_high"] - s["iqm"]]], fmt="_", color="k", capsize=4, ms=14)
            if not np.isnan(row["paper_mean"]):
                top.scatter(i, row["paper_mean"], marker="*", s=120, color="gold",
                            edgecolors="k", zorder=5)
            curves = [[p["eval_return"] for p in r["progress"]] for r in group]
            length = min(len(c) for c in curves) if curves else 0
            if length:
                y = np.array([c[:length] for c in curves])  # [seeds, evaluations]
                x = [p["updates"] for p in group[0]["progress"][:length]]
                iqm_curve = [iqm(y[:, j]) for j in range(length)]
                bottom.plot(x, iqm_curve, color=color, label=_label(row))
                bottom.fill_between(x, np.percentile(y, 25, 0), np.percentile(y, 75, 0),
                                    color=color, alpha=0.15)
        top.set_xticks(range(len(env_rows)), [_label(r) for r in env_rows], rotation=20,
                       fontsize=8)
        top.set_title(f"{env}: filled final policy, hollow max over evaluations, * paper")
        top.title.set_fontsize(9)
        top.set_ylabel("return (IQM, 95 % CI)")
        top.grid(alpha=0.3)
        bottom.set_xlabel("PPO updates")
        bottom.set_ylabel(f"greedy return ({PROGRESS_EPISODES} episodes), IQM over seeds")
        bottom.grid(alpha=0.3)
        if bottom.lines:
            bottom.legend(fontsize=7)
        else:  # records written before learning curves were kept
            bottom.text(0.5, 0.5, "no evaluations during training recorded", ha="center",
                        va="center", transform=bottom.transAxes, fontsize=8)
    protocol = rows[0]["protocol"] if rows else ""
    fig.suptitle(f"Table 1, protocol {protocol}: {len(rows[0]['seeds']) if rows else 0} seeds")
    fig.tight_layout()
    atomic_savefig(fig, path, dpi=110)
    plt.close(fig)


def plot_combined(rows: list[dict[str, Any]], records: list[dict[str, Any]], path: Path) -> None:
    """One panel per environment; per agent, every seed as a point with the IQM and its 95 %
    interval: protocol paper's final policy, its max over evaluations (the authors' statistic),
    and protocol ours' final policy; the paper's number as a star."""
    plt = pyplot()

    by = {(r["protocol"], r["env"], r["agent"]): r for r in rows
          if not r["strict"] and not r["variant"]}
    shown = (("paper", "final", "o", "full", "paper: final policy"),
             ("paper", "max_eval", "o", "none", "paper: max over evaluations (authors')"),
             ("ours", "final", "s", "full", "ours (our variant): final policy"))
    envs = [e for e in ENVS if any(k[1] == e for k in by)]
    fig, axes = plt.subplots(1, len(envs), figsize=(5.5 * len(envs), 4.5), squeeze=False)
    rng = np.random.default_rng(0)
    for ax, env in zip(axes[0], envs, strict=True):
        agents = [a for a in AGENTS if any((p, env, a) in by for p in PROTOCOLS)]
        for i, agent in enumerate(agents):
            for j, (protocol, name, marker, fill, label) in enumerate(shown):
                row = by.get((protocol, env, agent))
                if row is None:
                    continue
                x0 = i + (j - 1) * 0.25
                values = [r[STATISTICS[name][0]] for r in records if _key(r) == _key(row)]
                color = f"C{j}"
                ax.scatter(x0 + rng.uniform(-0.05, 0.05, len(values)), values, s=14,
                           marker=marker, alpha=0.7, edgecolors=color,
                           facecolors=color if fill == "full" else "none",
                           label=label if i == 0 else None)
                s = row[name]
                ax.errorbar(x0, s["iqm"], yerr=[[s["iqm"] - s["iqm_low"]],
                            [s["iqm_high"] - s["iqm"]]], fmt="_", color="k", capsize=4, ms=12)
            paper_mean = PAPER.get((env, agent), (float("nan"),))[0]
            if not np.isnan(paper_mean):
                ax.scatter(i, paper_mean, marker="*", s=130, color="gold", edgecolors="k",
                           zorder=5, label="paper (max over evaluations)" if i == 0 else None)
        ax.set_xticks(range(len(agents)), agents)
        ax.set_title(env)
        ax.set_ylabel("return: seeds, IQM and 95 % CI")
        ax.grid(alpha=0.3)
    handles, labels = axes[0, 0].get_legend_handles_labels()
    fig.legend(handles, labels, loc="lower center", ncol=len(labels), fontsize=8)
    fig.suptitle("Table 1: both protocols, both statistics")
    fig.tight_layout(rect=(0, 0.07, 1, 1))
    atomic_savefig(fig, path, dpi=110)
    plt.close(fig)


def _row(path: Path, env: str, agent: str, variant: str = "") -> dict[str, Any]:
    """The row of one (env, agent, variant) in a committed table's JSON."""
    return next(r for r in read_json(path)["rows"]
                if (r["env"], r["agent"], r["variant"]) == (env, agent, variant))


def _final_returns(path: Path, env: str, agent: str) -> list[float]:
    """Every seed's final return of one (env, agent) in a committed table's JSON, by seed."""
    runs = [r for r in read_json(path)["runs"] if (r["env"], r["agent"]) == (env, agent)]
    return [r["final_return"] for r in sorted(runs, key=lambda r: r["seed"])]


def _over_ppo(x: str, row: dict[str, Any], ppo: dict[str, Any], protocol: str) -> str:
    """`xlvin.wording.compare` of a row's final policy with its protocol's PPO."""
    return compare(x, "PPO", protocol=f"protocol `{protocol}`",
                   seeds=f"{len(row['seeds'])} seeds each, final policy",
                   iqms=(row["final"]["iqm"], ppo["final"]["iqm"]),
                   improvement=row["p_better_than_ppo"],
                   counts=(len(row["seeds"]), len(ppo["seeds"])))


def _tables(md: str) -> str:
    """The first table of a rendered results file."""
    return "\n".join(itertools.takewhile(lambda line: line.startswith("|"), md.splitlines()))


def _span(values: list[float]) -> str:
    """'v' where every value is v, else 'low to high' (whole numbers)."""
    low, high = min(values), max(values)
    return f"{low:.0f}" if low == high else f"{low:.0f} to {high:.0f}"


def _runs(path: Path, env: str, agent: str) -> list[dict[str, Any]]:
    """The runs of one (env, agent) in a committed table's JSON, by seed."""
    return sorted((r for r in read_json(path)["runs"] if (r["env"], r["agent"]) == (env, agent)),
                  key=lambda r: r["seed"])


def _flags(path: Path) -> str:
    """Which agents' MountainCar training episodes reached the flag (a return above -200)."""
    said, none = [], []
    for agent in AGENTS:
        runs = _runs(path, "MountainCar-v0", agent)
        hits = {r["seed"]: sum(t > -200 for t in r["training_returns"]) for r in runs}
        total = sum(len(r["training_returns"]) for r in runs)
        if sum(hits.values()):
            seeds = " and ".join(str(s) for s, n in hits.items() if n)
            said.append(f"{_NAMES[agent]} reached the flag in {sum(hits.values())} of "
                        f"{total:,} (seeds {seeds})")
        else:
            none.append((_NAMES[agent], total))
    if not said:
        return (f"no training episode of any agent's seeds reaches the flag (0 of "
                f"{none[0][1]:,} per agent)")
    return ", ".join(said) + ", the others in none"


#: The agents as the pages name them.
_NAMES = {"ppo": "PPO", "xlvin-r": "XLVIN-R", "xlvin-cp": "XLVIN-CP", "atreec": "ATreeC"}


def _cell_seconds(path: Path) -> str:
    """Each (env, agent group)'s worker seconds a cell, as 'CartPole PPO 2-6 s a cell, ...'."""
    parts = []
    for env in ENVS:
        groups = [("PPO", ["ppo"]), ("XLVIN", ["xlvin-r", "xlvin-cp"]), ("ATreeC", ["atreec"])]
        spans = [f"{name} {_span([r['wall_seconds'] for a in agents for r in _runs(path, env, a)])}"
                 " s" for name, agents in groups]
        parts.append(f"{env.split('-')[0]} " + ", ".join(spans))
    return "; ".join(parts)


def _worker_seconds(path: Path) -> float:
    return sum(r["wall_seconds"] for r in read_json(path)["runs"])


def _authors_blocks(results: Path) -> dict[str, str]:
    """docs/table1.md's comparison with the authors' code (`results/authors-code/`): the table,
    what it says, and their pre-trained executor in our pipeline."""
    data = read_json(results / "authors-code/table1.json")
    rows = {(r["source"].split(" (")[0].split(",")[0], r["agent"], r["source"]): r
            for r in data["rows"]}
    theirs = {a: r for (code, a, _), r in rows.items() if code == "authors' code"}
    seeds = [run["seed"] for run in data["runs"]["xlvin-r"]]
    table = ["| code | agent | max over evaluations (paper's statistic) | max: mean +- std | "
             "last evaluation (after the last update) | final policy (100 fresh episodes) |",
             "|---|---|---|---|---|---|"]
    table += [f"| paper (5 seeds) | {_NAMES[a]} | - | {theirs[a]['paper']} | - | - |"
              for a in ("ppo", "xlvin-r")]
    for (code, agent, source), r in rows.items():
        label = (f"the authors' code, seeds {min(seeds)}-{max(seeds)}" if code == "authors' code"
                 else source.replace("ours, `paper` protocol,", "ours (`paper`),"))
        bold = "**" if agent == "xlvin-r" else ""
        final = _ci(r["final_fresh"]) if "final_fresh" in r else "- (not in their code)"
        table.append(f"| {label} | {_NAMES[agent]} | {bold}{_ci(r['max'])}{bold} | "
                     f"{_pm(r['max']['mean'], r['max']['std'])} | {_ci(r['last'])} | {final} |")
    top = [run["max"] for run in data["runs"]["xlvin-r"]]
    reached = [v for v in top if v >= 200]
    rest = [v for v in top if v < 200]
    ours = [r["max_over_ppo"] for (code, a, _), r in rows.items() if code == "ours"
            and a == "xlvin-r"]
    ppo = theirs["ppo"]["max"]
    prose = (
        f"The authors' code reproduces the paper's PPO ({_pm(ppo['mean'], ppo['std'])} against "
        f"{theirs['ppo']['paper']}) but not its XLVIN-R: {len(reached)} of its {len(top)} seeds "
        f"reach 200, the other {len(rest)} end at {min(rest):.1f}-{max(rest):.1f} (a greedy "
        f"policy pushing one way). Ours under the `paper` protocol behaves the same way, and "
        f"P(XLVIN-R > PPO) on the paper's statistic is "
        f"{improvement_text(theirs['xlvin-r']['max_over_ppo'])} in their code and "
        + " / ".join(improvement_text(i) for i in ours) + " in ours.")
    own, their = (results / f"authors-code/ours-paper-{n}seeds0-9.json"
                  for n in ("", "their-executor-"))
    mine, other = (_row(own, "CartPole-v0", "xlvin-r"),
                   _row(their, "CartPole-v0", "xlvin-r", "their-executor"))
    executor = (
        "Their pre-trained executor in our pipeline, against ours: "
        + compare("their executor", "ours", protocol="protocol `paper`, XLVIN-R",
                  seeds=f"{len(other['seeds'])} seeds each (0-9), final policy",
                  iqms=(other["final"]["iqm"], mine["final"]["iqm"]),
                  improvement=improvement_over(_final_returns(their, "CartPole-v0", "xlvin-r"),
                                               _final_returns(own, "CartPole-v0", "xlvin-r")))
        + ".")
    return {"table1-authors-table": "\n".join(table), "table1-authors-prose": prose,
            "table1-their-executor": executor}


def page_blocks(results: Path) -> dict[str, str]:
    """The result blocks of README.md and docs/table1.md (`xlvin.experiments.pages`)."""
    paper, ours = results / "table1-paper.json", results / "table1-ours.json"
    held, rep = results / "beyond/heldout/table1-ours.json", \
        results / "replicate/table1-paper-seeds300-309.json"
    cp = {(p, a): _row(results / f"table1-{p}.json", "CartPole-v0", a)
          for p in PROTOCOLS for a in ("ppo", "xlvin-r")}
    xr = cp["paper", "xlvin-r"]
    acro = {a: _row(paper, "Acrobot-v1", a) for a in ("ppo", "xlvin-r", "xlvin-cp")}
    rep_acro = {a: _row(rep, "Acrobot-v1", a) for a in ("xlvin-r", "xlvin-cp")}
    held_rows = {a: _row(held, "CartPole-v0", a) for a in ("ppo", "xlvin-r")}
    per_seed = {a: _final_returns(ours, "CartPole-v0", a) for a in ("ppo", "xlvin-r", "xlvin-cp")}
    top = [v for v in per_seed["xlvin-r"] if v >= 197]
    variants = ["relu-messages", "no-layernorm", "orthogonal-init", "epochs-4x4+orthogonal-init"]
    beyond = [("paper", v) for v in ("swa-20", "swa-50", "kl-0.01", "kl-0.03")] + \
        [("ours", v) for v in ("swa-20", "swa-50")]
    both = [r for p in PROTOCOLS for r in read_json(results / f"table1-{p}.json")["rows"]]
    mc = {a: _row(paper, "MountainCar-v0", a) for a in ("xlvin-r", "xlvin-cp")}
    mc_flat = [r["final_return"] for a in ("ppo", "atreec")
               for r in _runs(paper, "MountainCar-v0", a)]
    ours_acro = {a: _row(ours, "Acrobot-v1", a) for a in AGENTS}
    cp_left = [r for r in _runs(ours, "Acrobot-v1", "xlvin-cp") if r["final_return"] > -500]
    ours_mc = [r["final_return"] for a in AGENTS for r in _runs(ours, "MountainCar-v0", a)]
    return _authors_blocks(results) | {
        "table1-headline": (
            f"**Not reproduced**, not even by the authors' code: on CartPole-v0 XLVIN-R's final "
            f"policy is {_ci(xr['final'])} (the paper's statistic {xr['max_eval']['iqm']:.1f}; "
            f"the paper: {xr['paper_mean']:.1f}, PPO {cp['paper', 'ppo']['paper_mean']:.1f}); "
            + _over_ppo("XLVIN-R", xr, cp["paper", "ppo"], "paper")),
        "table1-ours-level": (
            f"Under our own protocol (`ours`: 4 x 4 minibatches per update, GAE, log pi_old "
            f"recomputed every update, the same 10 episodes) XLVIN-R's final policy reaches "
            f"{_ci(cp['ours', 'xlvin-r']['final'])} on seeds 0-9 but "
            f"{_ci(held_rows['xlvin-r']['final'])} on seeds 100-109, where "
            + _over_ppo("XLVIN-R", held_rows["xlvin-r"], held_rows["ppo"], "ours") + "."),
        "table1-both": _tables(combined_markdown(both)),
        "table1-paper": _tables(markdown(read_json(paper)["rows"], None)),
        "table1-ours": _tables(markdown(read_json(ours)["rows"], None)),
        "table1-acrobot": (
            f"- **Acrobot-v1**: XLVIN-R's final policy is {_ci(acro['xlvin-r']['final'])} "
            f"(paper {_pm(acro['xlvin-r']['paper_mean'], acro['xlvin-r']['paper_std'])}) and "
            f"its authors' statistic {_ci(acro['xlvin-r']['max_eval'])}; XLVIN-CP "
            f"{_ci(acro['xlvin-cp']['final'])} (max {acro['xlvin-cp']['max_eval']['iqm']:.1f}); "
            f"PPO and ATreeC stay at -500, as in the paper. "
            + _over_ppo("XLVIN-R", acro["xlvin-r"], acro["ppo"], "paper") + "."),
        "table1-replicate": (
            f"- **A second set of seeds.** The timing run above is an independent replicate "
            f"(`results/replicate/table1-paper-seeds300-309.md`): CartPole's final policies "
            f"agree (XLVIN-R {_ci(_row(rep, 'CartPole-v0', 'xlvin-r')['final'])}, PPO "
            f"{_ci(_row(rep, 'CartPole-v0', 'ppo')['final'])}, ATreeC "
            f"{_row(rep, 'CartPole-v0', 'atreec')['final']['iqm']:.1f}) and so does MountainCar "
            f"(-200). Acrobot's XLVIN-R ends at {_ci(rep_acro['xlvin-r']['final'])} on seeds "
            f"300-309 (authors' statistic {_ci(rep_acro['xlvin-r']['max_eval'])}), as on seeds "
            f"0-9 ({_ci(acro['xlvin-r']['final'])}): on neither set near the paper's "
            f"{acro['xlvin-r']['paper_mean']:.1f}; XLVIN-CP {_ci(rep_acro['xlvin-cp']['final'])}."),
        "table1-ours-cartpole": (
            f"- **CartPole-v0**: {len(top)} of {len(per_seed['xlvin-r'])} XLVIN-R seeds end at "
            f"{min(top):.1f}-{max(top):.1f} (per seed "
            f"{', '.join(f'{v:.1f}' for v in per_seed['xlvin-r'])}); XLVIN-CP's seeds end at "
            f"{min(per_seed['xlvin-cp']):.1f}-{max(per_seed['xlvin-cp']):.1f}, PPO's at "
            f"{min(per_seed['ppo']):.1f}-{max(per_seed['ppo']):.1f}."),
        "table1-variants": "\n".join(
            ["| variant | final policy | max over evaluations (authors') | last 10 evaluations |",
             "|---|---|---|---|"]
            + [f"| `{v}` | **{_ci(r['final'])}** | {_ci(r['max_eval'])} | {_ci(r['last_evals'])} |"
               for v in variants
               for r in [_row(results / f"ablation/table1-paper-{v}.json", "CartPole-v0",
                              "xlvin-r", v)]]),
        "table1-beyond": "\n".join(
            ["| protocol | variant | final policy, seeds 0-9: IQM [95 % CI] |", "|---|---|---|",
             "| paper | - | not committed (run before the fixes; after them "
             f"{_ci(xr['final'])}) |"]
            + [f"| {p} | `{v}` | {_ci(_row(results / f'beyond/table1-{p}-{v}.json', 'CartPole-v0', 'xlvin-r', v)['final'])} |"  # noqa: E501
               for p, v in beyond[:4]]
            + [f"| ours | - | **{_ci(cp['ours', 'xlvin-r']['final'])}** (selected) |"]
            + [f"| {p} | `{v}` | {_ci(_row(results / f'beyond/table1-{p}-{v}.json', 'CartPole-v0', 'xlvin-r', v)['final'])} |"  # noqa: E501
               for p, v in beyond[4:]]),
        "table1-heldout": (
            f"The selected setting, reported once on training seeds 100-109 that no selection saw "
            f"(`xlvin reproduce classic --protocol ours --seeds 10 --first-seed 100 --envs "
            f"CartPole-v0 --agents ppo,xlvin-r`; `results/beyond/heldout/`): XLVIN-R "
            f"**{_ci(held_rows['xlvin-r']['final'])}** (mean "
            f"{_pm(held_rows['xlvin-r']['final']['mean'], held_rows['xlvin-r']['final']['std'])}"
            f"; per seed {', '.join(f'{v:.0f}' for v in _final_returns(held, 'CartPole-v0', 'xlvin-r'))})"
            f" against PPO's **{_ci(held_rows['ppo']['final'])}** (mean "
            f"{_pm(held_rows['ppo']['final']['mean'], held_rows['ppo']['final']['std'])}): "
            + _over_ppo("XLVIN-R", held_rows["xlvin-r"], held_rows["ppo"], "ours")
            + f"; the authors' statistic on the same runs: XLVIN-R "
            f"{_ci(held_rows['xlvin-r']['max_eval'])}, PPO {_ci(held_rows['ppo']['max_eval'])}. "
            f"So the target is missed by far, and the selection seeds flattered the setting: the "
            f"same protocol's XLVIN-R moved from {cp['ours', 'xlvin-r']['final']['iqm']:.1f} on "
            f"seeds 0-9 to {held_rows['xlvin-r']['final']['iqm']:.1f} on seeds 100-109 with the "
            f"same code."),
        "table1-both-note": (
            f"Written by `xlvin reproduce classic` once both protocols have results; 10 training "
            f"seeds per cell (0-9). The `paper` columns were re-run after the fixes above (AMD "
            f"EPYC, {_worker_seconds(paper):,.0f} s of worker time for the "
            f"{len(read_json(paper)['runs'])} cells); the `ours` columns are the earlier run "
            f"(Intel Xeon)."),
        "table1-mountaincar": (
            f"- **MountainCar-v0: not reproduced.** Final policies: XLVIN-R "
            f"{_ci(mc['xlvin-r']['final'])} (mean "
            f"{_pm(mc['xlvin-r']['final']['mean'], mc['xlvin-r']['final']['std'])}; paper "
            f"{mc['xlvin-r']['paper_mean']:.1f}), XLVIN-CP {_ci(mc['xlvin-cp']['final'])} (paper "
            f"{mc['xlvin-cp']['paper_mean']:.1f}), PPO and ATreeC {_span(mc_flat)} on every "
            f"seed. Of the 100 training episodes a seed collects, {_flags(paper)}."),
        "table1-wall": (
            f"- **Wall time.** A fresh 10-seed table (all "
            f"{len(read_json(rep)['runs'])} cells into an empty `--runs`, training seeds 300-309, "
            f"two workers, nothing else running on this 2-core VM) took "
            f"**{read_json(rep)['wall_seconds'] / 60:.1f} min wall** "
            f"({read_json(rep)['wall_seconds']:,.0f} s; {_worker_seconds(rep):,.0f} s of worker "
            f"time, a cell: {_cell_seconds(rep)}), within the 45-minute target. Not included: "
            f"the one-time shared pre-trainings that every later run reads from the cache (TransE "
            f"for the three environments, and each default executor)."),
        "table1-ours-acrobot": (
            f"- **Acrobot-v1**: every agent's final policy is "
            f"{_span([r['final']['iqm'] for r in ours_acro.values()])} at the IQM; XLVIN-CP's "
            f"seeds {' and '.join(str(r['seed']) for r in cp_left)} end at "
            f"{' and '.join(str(round(r['final_return'])) for r in cp_left)}, the "
            f"others at -500; the authors' statistic is {_ci(ours_acro['xlvin-r']['max_eval'])} "
            f"for XLVIN-R. Under `ours` TransE is pre-trained per run on the library's default "
            f"data (1,000 random episodes capped at 25,000 transitions) instead of the authors' "
            f"shared 4,000 episodes, one of the differences that may matter here."),
        "table1-ours-mountaincar": (
            f"- **MountainCar-v0: not reproduced** either: {_span(ours_mc)} for every agent and "
            f"seed; {_flags(ours)}."),
        "table1-ours-wall": (
            f"- **Wall time**: {len(read_json(ours)['runs'])} cells, "
            f"{_worker_seconds(ours):,.0f} s of worker time (a cell: {_cell_seconds(ours)})."),
    }
