"""What the executor contributes (beyond the paper): Table 1's low-data setting with the planner
taken apart, under both protocols of `xlvin.experiments.table1`.

Arms, each a Table-1 agent with a `--variant` (cells are shared with `xlvin reproduce classic`
where they coincide):

- PPO without and with the TransE term (the `paper` protocol's PPO has it; `ours` has not);
- XLVIN-R with its executor frozen at its *initial* weights (no value-iteration pre-training);
- XLVIN-R with zeros in place of the executor's output chi (the heads see no planning);
- XLVIN-R as the protocol runs it;
- XLVIN-R at depth K = 1 and K = 2 (one of them is the protocol's own XLVIN-R).

Each arm runs under an initialisation of encoder and heads (`--inits`): the protocol's own
(`paper`: PyTorch's defaults, as the authors' code; `ours`: orthogonal, the convention of the PPO
code the paper cites) or the other one, through the `orthogonal-init` / `pytorch-init` variant.

Per (protocol, init, environment, arm): the final policy's and the max-over-evaluations' IQM with its
95 % bootstrap interval and P(arm > PPO) on each (PPO: the protocol's own PPO arm under the same
init), from the seeds every arm of it has finished; RESULTS/executor.{md,json,png}, the figure with one point per seed.
"""

import textwrap
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

from xlvin.experiments import table1
from xlvin.experiments.figures import pyplot
from xlvin.experiments.final_eval import is_finished
from xlvin.experiments.results import kept, others, write_files
from xlvin.experiments.shapes import IMPROVEMENT, Holds, Optional, interval, one_of
from xlvin.experiments.table1 import PROTOCOL_LABELS, Cell
from xlvin.io.files import atomic_savefig, read_json
from xlvin.stats import improvement_over, improvement_text, iqm_text, summarize
from xlvin.wording import compare, separated

#: arm -> protocol -> (Table-1 agent, variant).
ARMS: dict[str, dict[str, tuple[str, str]]] = {
    "PPO (no TransE term)": {"paper": ("ppo", "no-ppo-transe"), "ours": ("ppo", "")},
    "PPO + TransE term": {"paper": ("ppo", ""), "ours": ("ppo", "ppo-transe")},
    "XLVIN-R, untrained executor": {p: ("xlvin-r", "untrained-executor") for p in table1.PROTOCOLS},
    "XLVIN-R, chi = 0": {p: ("xlvin-r", "zero-chi") for p in table1.PROTOCOLS},
    "XLVIN-R": {p: ("xlvin-r", "") for p in table1.PROTOCOLS},
    "XLVIN-R, K = 1": {"paper": ("xlvin-r", ""), "ours": ("xlvin-r", "depth-1")},
    "XLVIN-R, K = 2": {"paper": ("xlvin-r", "depth-2"), "ours": ("xlvin-r", "")},
}
#: The arm every other is compared with: the protocol's own PPO.
BASELINE = {"paper": "PPO + TransE term", "ours": "PPO (no TransE term)"}
STATISTICS = {"final": "final_return", "max_eval": "max_eval_return"}
#: The initialisations of encoder and heads, and each protocol's own.
INITS = ("pytorch", "orthogonal")
PROTOCOL_INIT = {"paper": "pytorch", "ours": "orthogonal"}


def arm_variant(protocol: str, init: str, arm: str) -> tuple[str, str]:
    """(Table-1 agent, variant) of `arm` under `protocol` with `init`: the arm's own variant,
    after the init's where it is not the protocol's own (`orthogonal-init+untrained-executor`)."""
    agent, variant = ARMS[arm][protocol]
    parts = [] if init == PROTOCOL_INIT[protocol] else [f"{init}-init"]
    return agent, "+".join(parts + ([variant] if variant else []))


def cells(protocols: list[str], envs: list[str], seeds: list[int],
          inits: list[str] | None = None) -> list[Cell]:
    """Every distinct cell of the arms under each of `inits` (default: each protocol's own);
    arms that coincide share their cells."""
    unique = {Cell(protocol, env, agent, seed, variant=variant)
              for protocol in protocols for init in (inits or [PROTOCOL_INIT[protocol]])
              for env in envs for arm in ARMS
              for agent, variant in [arm_variant(protocol, init, arm)] for seed in seeds}
    return sorted(unique, key=lambda c: (c.protocol, c.env, c.agent, c.variant, c.seed))


def finished_seeds(root: Path, protocol: str, env: str, agent: str, variant: str) -> set[int]:
    """The seeds of the cell (protocol, env, agent, variant) that have finished under `root`."""
    seeds_dir = Cell(protocol, env, agent, 0, variant=variant).run_dir(root).parent
    return {int(d.name[4:]) for d in seeds_dir.glob("seed*")
            if d.name[4:].isdigit() and is_finished(d)}


def finished_records(root: Path, protocols: list[str], envs: list[str],
                     inits: list[str] | None = None) -> list[dict[str, Any]]:
    """The records of the arms under `root`, each labelled with its arm and init, on the seeds
    that every arm of its (protocol, init, env) has finished: every comparison is on the same
    seeds, whichever other seeds some cells (Table 1's own, say) have. `inits`: default, each
    protocol's own."""
    records = []
    for protocol in protocols:
        for init in inits or [PROTOCOL_INIT[protocol]]:
            for env in envs:
                arms = {arm: arm_variant(protocol, init, arm) for arm in ARMS}
                common = set.intersection(*(finished_seeds(root, protocol, env, *cell)
                                            for cell in arms.values()))
                for arm, (agent, variant) in arms.items():
                    for seed in sorted(common):
                        cell = Cell(protocol, env, agent, seed, variant=variant)
                        records.append({**table1.cell_record(cell, cell.run_dir(root)),
                                        "arm": arm, "init": init})
    return records


def _init(record: dict[str, Any]) -> str:
    """A record's init (records written before inits were an option: the protocol's own)."""
    return record.get("init") or PROTOCOL_INIT[record["protocol"]]


def aggregate(records: list[dict[str, Any]]) -> list[dict[str, Any]]:
    groups: dict[tuple[str, str, str, str], list[dict[str, Any]]] = {}
    for r in sorted(records, key=lambda r: r["seed"]):  # P's bootstrap reads them in order
        groups.setdefault((r["protocol"], _init(r), r["env"], r["arm"]), []).append(r)
    rows = []
    for (protocol, init, env, arm), group in sorted(
            groups.items(), key=lambda kv: (kv[0][0], kv[0][2], INITS.index(kv[0][1]),
                                            list(ARMS).index(kv[0][3]))):
        ppo = groups.get((protocol, init, env, BASELINE[protocol]))
        row: dict[str, Any] = {"protocol": protocol, "init": init, "env": env, "arm": arm,
                               "agent": group[0]["agent"], "variant": group[0]["variant"],
                               "seeds": [r["seed"] for r in group]}
        for name, field in STATISTICS.items():
            runs = [r[field] for r in group]
            row[name] = {**summarize(np.array(runs)), "per_seed": runs}
            if ppo and arm != BASELINE[protocol]:
                row[f"{name}_over_ppo"] = improvement_over(runs, [r[field] for r in ppo])
        rows.append(row)
    return rows


def markdown(rows: list[dict[str, Any]]) -> str:
    lines = []
    for protocol in table1.PROTOCOLS:
        part = [r for r in rows if r["protocol"] == protocol]
        if not part:
            continue
        lines += [f"### {PROTOCOL_LABELS[protocol]}", "",
                  ("| env | init | arm | seeds | final policy: IQM [95 % CI] | P(> PPO), final | "
                   "max over evaluations (authors'): IQM [95 % CI] | P(> PPO), max |"),
                  "|---|---|---|---|---|---|---|---|"]
        for r in part:
            final, best = r["final"], r["max_eval"]
            own = " (protocol's)" if r["init"] == PROTOCOL_INIT[protocol] else ""
            lines.append(
                f"| {r['env']} | {r['init']}{own} | {r['arm']} | {len(r['seeds'])} | "
                f"**{iqm_text(final, 1)}** | "
                f"{improvement_text(r.get('final_over_ppo'))} | "
                f"{iqm_text(best, 1)} | "
                f"{improvement_text(r.get('max_eval_over_ppo'))} |")
        lines.append("")
    lines.append(
        "Final policy: greedy, 100 fresh episodes (seeds 1,000,000+). Max over evaluations: the "
        "best of the 100-episode greedy evaluations after every update (the authors' statistic). "
        "IQM over training seeds with its 95 % stratified bootstrap interval; P(> PPO): "
        "probability that a run of the arm beats a run of the protocol's own PPO arm under the "
        "same init (`paper`: PPO with the TransE term, as the authors' code trains it; `ours`: "
        "without), with its bootstrap interval. Init: of encoder and heads, PyTorch's defaults "
        "(the `paper` protocol's, as the authors' code) or orthogonal (`ours`, the PPO "
        "convention). `xlvin reproduce executor-ablation`; see "
        "`xlvin.experiments.executor_ablation`.")
    return "\n".join(lines) + "\n"


def plot(rows: list[dict[str, Any]], path: Path) -> None:
    """One panel per (protocol, init, env) and statistic: every seed as a point per arm, the IQM
    as a bar with its interval."""
    plt = pyplot()

    panels = sorted({(r["protocol"], r["init"], r["env"]) for r in rows},
                    key=lambda k: (table1.PROTOCOLS.index(k[0]), table1.ENVS.index(k[2]),
                                   INITS.index(k[1])))
    fig, axes = plt.subplots(len(panels), 2, figsize=(13, 3.6 * len(panels)), squeeze=False)
    arms = list(ARMS)
    for (protocol, init, env), ax_row in zip(panels, axes):
        part = {r["arm"]: r for r in rows
                if (r["protocol"], r["init"], r["env"]) == (protocol, init, env)}
        for ax, (name, title) in zip(ax_row, (("final", "final policy"),
                                              ("max_eval", "max over evaluations"))):
            for i, arm in enumerate(arms):
                if arm not in part:
                    continue
                stat = part[arm][name]
                jitter = np.linspace(-0.2, 0.2, len(stat["per_seed"]))
                ax.scatter(i + jitter, stat["per_seed"], s=10, alpha=0.6)
                ax.errorbar(i, stat["iqm"], yerr=[[stat["iqm"] - stat["iqm_low"]],
                                                  [stat["iqm_high"] - stat["iqm"]]],
                            fmt="_", color="black", markersize=18, capsize=4)
            ax.set_xticks(range(len(arms)), [textwrap.fill(a, 14) for a in arms], fontsize=7)
            ax.set_title(f"{env}, protocol {protocol}, {init} init: {title}", fontsize=9)
            ax.grid(axis="y", alpha=0.3)
    fig.tight_layout()
    atomic_savefig(fig, path, dpi=110)
    plt.close(fig)


#: What the table and figure read of an arm's row (`aggregate`) kept from an earlier file.
_STATISTIC = interval({"per_seed": [float]})
def _one_value_a_seed(row: dict[str, Any]) -> None:
    """A check that each statistic holds one value for each of the row's seeds (a kept row's
    seeds are read back one by one: `kept_records`)."""
    for name in STATISTICS:
        if len(row[name]["per_seed"]) != len(row["seeds"]):
            raise ValueError(f"{name}: {len(row[name]['per_seed'])} values for "
                             f"{len(row['seeds'])} seeds")


ROW = Holds({"protocol": one_of(table1.PROTOCOLS), "init": one_of(INITS),
             "env": one_of(table1.ENVS), "arm": one_of(ARMS), "agent": str, "variant": str,
             "seeds": [int], **dict.fromkeys(STATISTICS, _STATISTIC),
             **{f"{name}_over_ppo": Optional(IMPROVEMENT) for name in STATISTICS}},
            _one_value_a_seed)


def read_earlier(results: Path) -> None:
    """Read what RESULTS/executor.json keeps (one UserError if it is corrupt)."""
    kept_records(results, [])


def _cell(record: dict[str, Any]) -> tuple[str, str, str, str, int]:
    return record["protocol"], _init(record), record["env"], record["arm"], record["seed"]


def kept_records(results: Path, records: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The cells of an earlier RESULTS/executor.json that `records` do not bring (run on another
    machine, whose run directories are not here), seed by seed: each row's seeds as records of
    what the table reads (their statistics, arm, init, agent and variant), so that the seeds of
    one (protocol, init, env) trained on several machines add up (rows written before inits
    were an option: the protocol's own)."""
    rows = kept(results / "executor.json", "rows", [], lambda r: (), ROW,
                lambda r: {**r, "init": _init(r)})
    earlier = [{"protocol": r["protocol"], "init": r["init"], "env": r["env"], "arm": r["arm"],
                "agent": r["agent"], "variant": r["variant"], "seed": seed,
                **{field: r[name]["per_seed"][i] for name, field in STATISTICS.items()}}
               for r in rows for i, seed in enumerate(r["seeds"])]
    return others(earlier, records, _cell)


def recorded(results: Path) -> Callable[[Cell], bool]:
    """Whether RESULTS/executor.json already holds a cell (`kept_records`: any arm it is)."""
    held = {Cell(r["protocol"], r["env"], r["agent"], r["seed"], variant=r["variant"])
            for r in kept_records(results, [])}
    return lambda cell: cell in held


def write_results(records: list[dict[str, Any]], results: Path) -> str:
    """RESULTS/executor.{md,json,png} of `records` and of the cells of an earlier executor.json
    that they do not bring (`kept_records`)."""
    rows = aggregate(records + kept_records(results, records))
    rows = sorted(rows, key=lambda r: (
        table1.PROTOCOLS.index(r["protocol"]), r["env"], INITS.index(r["init"]),
        list(ARMS).index(r["arm"])))
    md = markdown(rows)
    write_files(results, "executor", md, {"arms": ARMS, "protocol_init": PROTOCOL_INIT,
                                          "rows": rows})
    plot(rows, results / "executor.png")
    return md


#: Each protocol's name on the pages, with the init its runs had.
_UNDER = {("paper", "pytorch"): "protocol `paper`, PyTorch's default init",
          ("paper", "orthogonal"): "protocol `paper`, orthogonal init",
          ("ours", "orthogonal"): "protocol `ours`"}


def _pair(rows: list[dict[str, Any]], under: tuple[str, str], x: str, y: str, stat: str,
          env: str) -> tuple[dict[str, Any], dict[str, Any], dict[str, float]]:
    """Arms `x` and `y`'s rows and P(x > y) on one statistic, over their seeds."""
    a, b = (next(r for r in rows if (r["protocol"], r["init"], r["env"], r["arm"])
                 == (*under, env, arm)) for arm in (x, y))
    return a, b, improvement_over(a[stat]["per_seed"], b[stat]["per_seed"])


def _vs(rows: list[dict[str, Any]], under: tuple[str, str], x: str, y: str,
        stat: str = "final", env: str = "CartPole-v0", names: tuple[str, str] = ("", "")) -> str:
    """`xlvin.wording.compare` of arm `x` with arm `y` on one statistic, over their seeds."""
    a, b, improvement = _pair(rows, under, x, y, stat, env)
    what = "final policy" if stat == "final" else "max over evaluations"
    return compare(names[0] or x, names[1] or y, protocol=_UNDER[under],
                   seeds=f"{len(a['seeds'])} seeds, {what}",
                   iqms=(a[stat]["iqm"], b[stat]["iqm"]), improvement=improvement,
                   counts=(len(a["seeds"]), len(b["seeds"])))


def _separated(rows: list[dict[str, Any]], under: tuple[str, str], x: str, y: str,
               stat: str = "final", env: str = "CartPole-v0") -> bool | None:
    """`xlvin.wording.separated` of `_vs`'s comparison: True where x is ahead of y."""
    return separated(_pair(rows, under, x, y, stat, env)[2])


def _arm_table(rows: list[dict[str, Any]], columns: list[tuple[str, str, str]],
               arms: list[tuple[str, dict[str, str]]]) -> str:
    """A table of CartPole arms: one column per (protocol, init, statistic or its P(> PPO))."""
    cell = {(r["protocol"], r["init"], r["arm"]): r for r in rows if r["env"] == "CartPole-v0"}
    lines = ["| arm | " + " | ".join(c[0] for c in columns) + " |",
             "|---" * (len(columns) + 1) + "|"]
    for label, by_protocol in arms:
        values = []
        for _, key, stat in columns:
            protocol, init = key.split("/")
            r = cell[protocol, init, by_protocol.get(protocol, by_protocol.get("*"))]
            values.append(improvement_text(r.get(f"{stat[:-9]}_over_ppo"))
                          if stat.endswith("_over_ppo") else
                          iqm_text(r[stat], 1))
        lines.append(f"| {label} | " + " | ".join(values) + " |")
    return "\n".join(lines)


def page_blocks(results: Path) -> dict[str, str]:
    """The result blocks of README.md and docs/table1.md (`xlvin.experiments.pages`)."""
    rows = read_json(results / "ablation/executor.json")["rows"]
    pt, po, ours = ("paper", "pytorch"), ("paper", "orthogonal"), ("ours", "orthogonal")
    full = {"paper": "XLVIN-R, K = 1", "ours": "XLVIN-R, K = 2"}
    xl = "XLVIN-R"
    untrained, zero = "XLVIN-R, untrained executor", "XLVIN-R, chi = 0"
    short = (xl, "untrained executor")
    zeroed = (xl, "chi = 0")
    acro = [r for r in rows if r["env"] == "Acrobot-v1"]
    # What the prose may conclude, from the verdicts (`xlvin.wording.separated`):
    quiet = all(_separated(rows, under, xl, arm) is None
                for under in (pt, ours) for arm in (untrained, zero))
    by_loop = (_separated(rows, pt, xl, "PPO + TransE term") is not None
               and _separated(rows, ours, xl, "PPO (no TransE term)") is None)
    zero_only_po = (_separated(rows, po, xl, zero) is True
                    and _separated(rows, pt, xl, zero) is None
                    and _separated(rows, ours, xl, zero) is None)
    pretraining_quiet = all(_separated(rows, under, xl, untrained, stat) is None
                            for under in (pt, po, ours) for stat in ("final", "max_eval"))
    pretrained = " pre-training the executor on value iteration adds nothing we can measure"
    return {
        "executor-headline": (
            f"On CartPole (final policy) against an executor frozen untrained: "
            f"{_vs(rows, po, xl, untrained, names=short)}; {_vs(rows, ours, xl, untrained, names=short)}. "
            f"Against chi = 0 (the executor's output zeroed): {_vs(rows, po, xl, zero, names=zeroed)}; "
            f"{_vs(rows, ours, xl, zero, names=zeroed)}."),
        "executor-table": _arm_table(rows, [
            ("`paper` protocol", "paper/pytorch", "final"),
            ("`ours` protocol", "ours/orthogonal", "final"),
            ("P(> PPO), `ours`", "ours/orthogonal", "final_over_ppo")], [
            ("PPO (no TransE term)", {"*": "PPO (no TransE term)"}),
            ("PPO + TransE term", {"*": "PPO + TransE term"}),
            ("XLVIN-R, executor frozen untrained", {"*": untrained}),
            ("XLVIN-R, chi replaced by zeros", {"*": zero}),
            ("XLVIN-R (K = 1 under `paper`, K = 2 under `ours`)", {"*": xl}),
            ("XLVIN-R, the other depth (K = 2 / K = 1)",
             {"paper": "XLVIN-R, K = 2", "ours": "XLVIN-R, K = 1"})]),
        "executor-prose": (
            f"On CartPole{pretrained if pretraining_quiet else ''}: against an executor "
            f"that never saw value iteration, {_vs(rows, pt, xl, untrained, names=short)}; "
            f"{_vs(rows, ours, xl, untrained, names=short)}; against no executor output at all, "
            f"{_vs(rows, pt, xl, zero, names=zeroed)}; {_vs(rows, ours, xl, zero, names=zeroed)}. "
            + ("What separates the XLVIN arms from PPO is the rest of the network (the "
               "TransE-pre-trained encoder and transition), and only under the authors' loop (one "
               "epoch of two minibatches per update from PyTorch's default initialisation): "
               if quiet and by_loop else "Against PPO: ")
            + f"{_vs(rows, pt, xl, 'PPO + TransE term', names=(xl, 'PPO'))}; under ours, "
            f"{_vs(rows, ours, xl, 'PPO (no TransE term)', names=(xl, 'PPO'))}. On Acrobot-v1 "
            f"(seeds 0-9) no arm's final policy leaves -500 (IQM "
            f"{min(r['final']['iqm'] for r in acro):.1f} to "
            f"{max(r['final']['iqm'] for r in acro):.1f} under both protocols); on the authors' "
            f"statistic, the maximum over evaluations, under the `paper` protocol: "
            f"{_vs(rows, pt, xl, 'PPO + TransE term', 'max_eval', 'Acrobot-v1', (xl, 'PPO'))}; "
            f"{_vs(rows, pt, untrained, 'PPO + TransE term', 'max_eval', 'Acrobot-v1', ('XLVIN-R with an untrained executor', 'PPO'))}; "  # noqa: E501
            f"{_vs(rows, pt, xl, untrained, 'max_eval', 'Acrobot-v1', short)}"
            + (": again nothing that pre-training the executor on value iteration adds."
               if _separated(rows, pt, xl, untrained, "max_eval", "Acrobot-v1") is None
               else ".")),
        "executor-init-table": _arm_table(rows, [
            ("PyTorch's default init", "paper/pytorch", "final"),
            ("orthogonal init", "paper/orthogonal", "final"),
            ("P(> PPO), orthogonal", "paper/orthogonal", "final_over_ppo"),
            ("max over evaluations, orthogonal", "paper/orthogonal", "max_eval")], [
            ("PPO (no TransE term)", {"*": "PPO (no TransE term)"}),
            ("PPO + TransE term", {"*": "PPO + TransE term"}),
            ("XLVIN-R, executor frozen untrained", {"*": untrained}),
            ("XLVIN-R, chi replaced by zeros", {"*": zero}),
            ("XLVIN-R (K = 1)", {"*": full["paper"]}),
            ("XLVIN-R, K = 2", {"*": "XLVIN-R, K = 2"})]),
        "executor-init-prose": (
            f"Under orthogonal initialisation XLVIN-R leaves the floor it sits on under "
            f"PyTorch's defaults: {_vs(rows, po, xl, 'PPO + TransE term', names=(xl, 'PPO'))}. "
            + ("The initialisation changes one answer, under the `paper` protocol only: "
               if zero_only_po else "Against chi = 0 under the `paper` protocol: ")
            + f"{_vs(rows, po, xl, zero, names=zeroed)}, where under PyTorch's defaults "
            f"{_vs(rows, pt, xl, zero, names=zeroed)} and under our protocol "
            f"{_vs(rows, ours, xl, zero, names=zeroed)}; and "
            f"{_vs(rows, po, zero, 'PPO + TransE term', names=('chi = 0', 'PPO'))}. "
            + ("It does not change the other: " if pretraining_quiet else
               "Against the untrained executor under orthogonal initialisation: ")
            + f"{_vs(rows, po, xl, untrained, names=short)} "
            f"({_vs(rows, po, xl, untrained, 'max_eval', names=short)})."
            + (" So on CartPole a second, executed view of the root embedding makes a "
               "difference only under the `paper` protocol with orthogonal initialisation, and "
               "training that view to imitate value iteration adds nothing we can measure."
               if zero_only_po and pretraining_quiet else "")),
    }
