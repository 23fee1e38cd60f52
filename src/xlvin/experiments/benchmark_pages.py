"""The result blocks that come from the benchmarks' committed JSON rather than an experiment's
report: our PPO against Stable-Baselines3 on Box actions (results/parity/*.json) and on Freeway
(results/parity/atari.json, freeway-*/), and the CPU speed figures (results/bench.json). The
benchmarks package is not installed with xlvin, so the blocks read its files directly; the
population benchmark prints its table with `population_table` (results/population/*.json)."""

import math
from pathlib import Path

from xlvin.io.files import read_json
from xlvin.stats import improvement_over, improvement_text
from xlvin.wording import compare


def _parity_compare(run: dict, label: str) -> str:
    """`compare` of our PPO's final returns with SB3's in one parity file."""
    ours, sb3 = (run["libraries"][lib] for lib in ("xlvin", "sb3"))
    finals = [[r["final_return"] for r in lib["runs"]] for lib in (ours, sb3)]
    return compare("ours", "SB3", protocol=f"{label}, {run['steps']:,} steps",
                   seeds=f"{len(finals[0])} seeds each, final return",
                   iqms=(ours["final_return"]["iqm"], sb3["final_return"]["iqm"]),
                   improvement=improvement_over(*finals), counts=(len(finals[0]), len(finals[1])))


def _load(run: dict) -> str:
    loads = [x for lib in run["libraries"].values() for r in lib["runs"]
             for x in (r["load_before"], r["load_after"])]
    return f"{min(loads):.1f}-{max(loads):.1f}"


def _rate(run: dict, lib: str, key: str) -> str:
    return f"{run['libraries'][lib][key]:,.0f}"


def _ci(summary: dict) -> str:
    """'IQM [low, high]', thousands separated."""
    return "{:,.1f} [{:,.1f}, {:,.1f}]".format(*(summary[k] for k in ("iqm", "iqm_low",
                                                                          "iqm_high")))


def parity_blocks(results: Path) -> dict[str, str]:
    """Our PPO against Stable-Baselines3 on Box actions (`benchmarks.parity.run`'s files under
    results/parity/): returns worded by `compare`, speeds as the files measured them."""
    run = {name: read_json(results / f"parity/{name}.json") for name in (
        "pendulum", "pendulum-speed-quiet", "halfcheetah-smoke", "halfcheetah-200k",
        "halfcheetah-speed-quiet")}
    pend, pq, smoke, cheetah, cq = run.values()
    link = "[`{}`](../results/parity/{}.md)"

    def flags(r: dict) -> str:
        return link.format(r["command"].split(f"--env {r['env']} ")[1], next(
            n for n, v in run.items() if v is r))

    def per_seed(r: dict, lib: str) -> str:
        return ", ".join(f"{x['final_return']:,.1f}" for x in r["libraries"][lib]["runs"])

    quiet = sorted(r["sps_ratio"] for r in (pq, cq))
    return {
        "readme-parity": (
            "`PPO` and `ATreeC` work the same; `PPO` and `XLVIN` also train Box (XLVIN in bins) "
            "and MultiDiscrete actions ([PPO vs SB3](docs/benchmarks.md#box-actions-parity-with-"
            "stable-baselines3), at " + f"{quiet[0]:.1f}-{quiet[1]:.1f}x its speed, idle): "
            "on Pendulum " + _parity_compare(pend, "Pendulum-v1")
            + "; on HalfCheetah " + _parity_compare(cheetah, "HalfCheetah-v5") + "."),
        "parity-pendulum": (
            f"[Pendulum-v1](../results/parity/pendulum.md), "
            f"{len(pend['libraries']['xlvin']['runs'])} seeds each, {pend['steps'] // 1000}k "
            f"steps ({pend['machine']}, shared with other runs, load {_load(pend)}): final return "
            f"IQM **{_ci(pend['libraries']['xlvin']['final_return'])}** for ours against SB3's "
            f"{_ci(pend['libraries']['sb3']['final_return'])} (per seed: ours "
            f"{per_seed(pend, 'xlvin')}; SB3 {per_seed(pend, 'sb3')}): "
            + _parity_compare(pend, "Pendulum-v1")
            + f"; whole-process speed **{pend['sps_cpu_ratio']:.2f} times SB3's steps per CPU "
            f"second** ({_rate(pend, 'xlvin', 'sps_cpu_mean')} vs "
            f"{_rate(pend, 'sb3', 'sps_cpu_mean')}) and {pend['sps_ratio']:.2f}x per wall-clock "
            f"second (one process at a time, so the wall figure carries each run's load). On an "
            f"idle machine (the other jobs stopped; {flags(pq)}, {pq['machine']}, load "
            f"{_load(pq)}) ours ran **{pq['sps_ratio']:.2f} times SB3's whole-process steps per "
            f"wall-clock second** ({_rate(pq, 'xlvin', 'sps_mean')} against "
            f"{_rate(pq, 'sb3', 'sps_mean')}) and {pq['sps_cpu_ratio']:.2f}x per CPU second."),
        "parity-halfcheetah": (
            f"A HalfCheetah-v5 [smoke run](../results/parity/halfcheetah-smoke.md) of "
            f"{smoke['steps']:,} steps a library (separate 256-wide ReLU networks on both sides, "
            f"the two runs side by side at load {_load(smoke)}) checks that the harness runs it: "
            f"ours {_rate(smoke, 'xlvin', 'sps_cpu_mean')} steps per CPU second, SB3 "
            f"{_rate(smoke, 'sb3', 'sps_cpu_mean')}. The 5-seed comparison at the Zoo's "
            f"{cheetah['zoo']['n_timesteps']:,} steps has not been run. At "
            f"{cheetah['steps']:,} steps a run ({flags(cheetah)}, the budget chosen for this "
            f"2-core machine), all {len(cheetah['libraries']['xlvin']['runs'])} seeds of each "
            f"have finished: final return IQM "
            f"{_ci(cheetah['libraries']['xlvin']['final_return'])} for ours (per seed "
            f"{per_seed(cheetah, 'xlvin')}) against SB3's "
            f"{_ci(cheetah['libraries']['sb3']['final_return'])} ({per_seed(cheetah, 'sb3')}): "
            + _parity_compare(cheetah, "HalfCheetah-v5")
            + f". Ours ran {cheetah['sps_cpu_ratio']:.2f} times as many steps per CPU second "
            f"({_rate(cheetah, 'xlvin', 'sps_cpu_mean')} against "
            f"{_rate(cheetah, 'sb3', 'sps_cpu_mean')}, means over the runs, beside other jobs) "
            f"and {cheetah['sps_ratio']:.2f} times per wall-clock second, where each run's wall "
            f"time carries the load it met. On an idle machine, one process at a time and "
            f"nothing beside them ({flags(cq)}, load {_load(cq)}; {cq['machine']}, another VM "
            f"than the {cheetah['steps'] // 1000}k runs'), ours ran **{cq['sps_ratio']:.2f} "
            f"times SB3's whole-process steps per wall-clock second** "
            f"({_rate(cq, 'xlvin', 'sps_mean')} against {_rate(cq, 'sb3', 'sps_mean')}) and "
            f"{cq['sps_cpu_ratio']:.2f}x per CPU second ({_rate(cq, 'xlvin', 'sps_cpu_mean')} "
            f"against {_rate(cq, 'sb3', 'sps_cpu_mean')}). Per CPU second both sides ran "
            + " and ".join(f"{cq['libraries'][lib]['sps_cpu_mean'] / cpu_200k:.1f}"
                           for lib in ("xlvin", "sb3")
                           for cpu_200k in [cheetah["libraries"][lib]["sps_cpu_mean"]])
            + f" times the {cheetah['steps'] // 1000}k runs' rates; how much of that is the load "
            f"those runs met and how much the other CPU, these runs do not separate."),
    }


#: The speed targets docs/benchmarks.md holds the figures to (those of `benchmarks.suite`).
SPEED_TARGETS = {"ppo_sb3": 2.0, "atari": 1.5, "Freeway": 0.7, "planning": 0.5}


def _mean(values: list[float]) -> float:
    return sum(values) / len(values)


def bench_blocks(results: Path) -> dict[str, str]:
    """docs/benchmarks.md's CPU figures, rendered from results/bench.json (`python -m
    benchmarks.suite.run`): our PPO against SB3, XLVIN against our PPO, end-to-end wall times."""
    parts = read_json(results / "bench.json")["parts"]

    def side(part: dict, name: str, key: str = "sps") -> list[float]:
        return [r[key] for r in part["runs"] if r["side"] == name]

    def met(ratio: float, goal: float) -> str:
        return f">= {goal:g}x" + ("" if ratio >= goal else ": not met")

    cp, atari, cases = parts["ppo_sb3"], parts["atari"], parts["planning"]["cases"]
    cp_ratio = _mean(side(cp, "ours")) / _mean(side(cp, "sb3"))
    cpu = {n: _mean(side(atari, n, "cpu_sps")) for n in ("ours", "ours_ale", "sb3")}
    each = ", ".join(f"{o / b:.2f}" for o, b in zip(side(atari, "ours", "cpu_sps"),
                                                      side(atari, "sb3", "cpu_sps")))

    def planning(name: str, code: str = "current", key: str = "sps") -> float:
        def of(agent: str) -> list[float]:
            return [r[key] if key == "sps" else r["collection_ms_per_rollout"]
                    + r["update_ms_per_rollout"] for r in cases[name]["runs"]
                    if (r["agent"], r["code"]) == (agent, code)]
        xl, ppo = of("xlvin"), of("ppo")
        if not xl or not ppo:
            return float("nan")
        ratio = _mean(xl) / _mean(ppo)
        return ratio if key == "sps" else 1 / ratio

    games = ("freeway", "enduro", "alien")
    labels = ", ".join(f"{cases[g]['case']['label']} ({cases[g]['case']['A']}, "
                       f"{cases[g]['case']['K']})" for g in games)
    atari_day = f"{atari['started'][:10]}, {atari['cpu'].split(' Processor')[0]}"
    now = [planning(g) for g in games]
    before = ", ".join("-" if math.isnan(planning(g, "baseline"))
                       else f"{planning(g, 'baseline'):.2f}x" for g in games)
    cp_xl = {c: _mean([r["sps"] for r in cases["cartpole"]["runs"]
                       if (r["agent"], r["code"]) == ("xlvin", c)])
             for c in ("current", "baseline")}
    e2e = parts["end_to_end"]
    table = "\n".join([
        "| figure | now | before the readable core | target |", "|---|---|---|---|",
        f"| our PPO / SB3 PPO, CartPole-v1 | **{cp_ratio:.2f}x** ({_mean(side(cp, 'ours')):,.0f} "
        f"vs {_mean(side(cp, 'sb3')):,.0f} steps/s, {cp['repeats']} repeats) | "
        f"{_mean(side(cp, 'ours_baseline')):,.0f} steps/s (ours) | "
        f"{met(cp_ratio, SPEED_TARGETS['ppo_sb3'])} |",
        f"| our PPO / SB3 PPO, Freeway (Nature CNN) | **{cpu['ours'] / cpu['sb3']:.2f}x** per CPU "
        f"second ({cpu['ours']:,.0f} vs {cpu['sb3']:,.0f}; per repeat {each}); "
        f"{cpu['ours_ale'] / cpu['sb3']:.2f}x with `--atari-vector ale` ({atari_day}) | - | "
        f"{met(cpu['ours'] / cpu['sb3'], SPEED_TARGETS['atari'])} (see notes) |",
        f"| XLVIN / PPO: {labels} | {now[0]:.2f}x over a whole "
        f"{cases['freeway']['steps']:,}-step run, {planning('freeway', key='ms'):.2f}x per "
        f"rollout ({cases['freeway']['measured']['started'][:10]}), "
        + ", ".join(f"{r:.2f}x" for r in now[1:]) + f" | {before} | Freeway "
        f"{met(now[0], SPEED_TARGETS['Freeway'])}; others "
        f">= {SPEED_TARGETS['planning']:g}x |",
        f"| XLVIN / PPO: CartPole (2, 2) | {planning('cartpole'):.2f}x (XLVIN "
        f"{cp_xl['current']:,.0f} steps/s) | XLVIN {cp_xl['baseline']:,.0f} steps/s | "
        f"{met(planning('cartpole'), SPEED_TARGETS['planning'])} (blocked, see notes) |"])
    return {
        "bench-cpu-table": table,
        "bench-cpu-prose": (
            f"On Freeway our PPO runs "
            f"{cpu['ours'] / cpu['sb3']:.2f} times as many steps per CPU second as SB3 "
            f"({cpu['ours_ale'] / cpu['sb3']:.2f} times on ale-py's vector env), and XLVIN-R "
            f"{now[0]:.2f}x of our PPO over a whole short run "
            f"({planning('freeway', key='ms'):.2f}x per rollout once set-up is left out)."),
        "bench-end-to-end": (
            f"The end-to-end wall times last measured (`python -m benchmarks.suite.run --only "
            f"end_to_end`, {e2e['started'][:10]}, an earlier round's code; load average "
            f"{e2e['loadavg_start'][0]} at the "
            f"start, {e2e['loadavg_end'][0]} at the end): executor pre-training "
            f"{e2e['pretrain_executor']['wall_s']:.0f} s, `xlvin quickstart` with an empty cache "
            f"{e2e['quickstart_cold_cache']['wall_s']:.0f} s and with everything cached "
            f"{e2e['quickstart_warm_cache']['wall_s']:.0f} s, `xlvin reproduce classic` with its "
            f"default seeds {e2e['reproduce_classic']['wall_s']:,.0f} s."),
    }


def population_table(data: dict) -> str:
    """The population benchmark's run (`--json`): a line saying what ran where, then one row a
    (kind, seeds), the round with the best aggregate wall rate: seed-steps per wall second,
    over the best solo figure (one process, or two at once), steps per CPU second, over one
    solo process's."""
    best, solo, solo_cpu = _best_runs(data)
    loads = [load for run in data["runs"] for load in run["load"]]
    lines = [f"{data['agent']}, {data['env']}, {data['steps']:,} env steps a seed, the best of "
             f"{data['rounds']} round{'s' * (data['rounds'] > 1)}; {data['cpu']}, load average "
             f"{min(loads):.1f} to {max(loads):.1f}; code {data['commit']}", "",
             "| run | seeds | seed-steps/s | over the best solo | steps per CPU second | "
             "over one solo, per CPU second | peak memory |", "|---|---|---|---|---|---|---|"]
    for (kind, seeds), run in best.items():
        memory = f"{run['max_rss_mib']:,.0f} MiB" if "max_rss_mib" in run else ""
        wall, cpu = _per_second(run, "wall_s"), _per_second(run, "cpu_s")
        lines.append(f"| {kind} | {seeds} | {wall:,.0f} | {wall / solo:.2f}x | {cpu:,.0f} | "
                     f"{cpu / solo_cpu:.2f}x | {memory} |")
    return "\n".join(lines)


def _best_runs(data: dict) -> tuple[dict[tuple[str, int], dict], float, float]:
    """Each (kind, seeds)'s run with the best aggregate wall rate; the best solo wall rate (one
    process, or two at once) and one solo process's rate per CPU second."""
    best: dict[tuple[str, int], dict] = {}
    for run in data["runs"]:
        key = (run["kind"], run["seeds"])
        if key not in best or _per_second(run, "wall_s") > _per_second(best[key], "wall_s"):
            best[key] = run
    solo = max(_per_second(best[("alone", 1)], "wall_s"),
               _per_second(best[("alone x2", 2)], "wall_s"))
    return best, solo, _per_second(best[("alone", 1)], "cpu_s")


def _per_second(run: dict, seconds: str) -> float:
    """Seed-steps per wall (`wall_s`) or CPU (`cpu_s`) second of a measurement."""
    return run["seeds"] * run["steps"] / run[seconds]


def grouped_conv_table(data: dict) -> str:
    """`python -m benchmarks.suite.grouped_conv`'s cases: S seeds' maze convolutions as one
    grouped call against each seed's own, bits and CPU time."""
    lines = [f"{data['cpu']}, torch {data['torch']}, one thread; code {data['commit']}", "",
             "| seeds | rows | input channels | seeds whose output / weight gradient / input "
             "gradient differ | alone, forward + backward | grouped | grouped / alone |",
             "|---|---|---|---|---|---|---|"]
    for c in data["cases"]:
        lines.append(f"| {c['seeds']} | {c['rows']} | {c['c_in']} | {c['output_differs']} / "
                     f"{c['weight_grad_differs']} / {c['input_grad_differs']} of {c['seeds']} | "
                     f"{c['alone_ms']:.1f} ms | {c['grouped_ms']:.1f} ms | "
                     f"{c['grouped_ms'] / c['alone_ms']:.2f}x |")
    return "\n".join(lines)


def population_blocks(results: Path) -> dict[str, str]:
    """benchmarks/notes.md's population tables, `population-STEM` of each
    results/population/STEM.json the population benchmark wrote (`--json`), and the grouped
    convolutions' (`population-grouped-conv`)."""
    blocks, runs = {}, {}
    for path in sorted((results / "population").glob("*.json")):
        runs[path.stem] = data = read_json(path)
        table = grouped_conv_table if path.stem == "grouped-conv" else population_table
        blocks[f"population-{path.stem}"] = table(data)
    if "ppo" in runs and "xlvin-r" in runs:
        blocks["population-targets"] = _population_targets(runs["ppo"], runs["xlvin-r"],
                                                           runs.get("xlvin-maze"))
    return blocks


def _population_targets(ppo: dict, xlvin: dict, maze: dict | None, seeds: int = 64) -> str:
    """The targets at 64 seeds (5x for PPO, 3x for XLVIN-R, per CPU second) against what the
    runs measured there; the maze's XLVIN, which trains seed by seed, beside them."""
    def at(data: dict) -> tuple[float, float]:  # (per CPU second over one solo, wall over best)
        best, solo, solo_cpu = _best_runs(data)
        run = best[("together", seeds)]
        return _per_second(run, "cpu_s") / solo_cpu, _per_second(run, "wall_s") / solo

    (ppo_cpu, ppo_wall), (xl_cpu, xl_wall) = at(ppo), at(xlvin)
    met = {True: "met", False: "not met"}
    text = (f"At {seeds} seeds, against targets of 5x for PPO ({met[ppo_cpu >= 5]}) and 3x for "
            f"XLVIN-R ({met[xl_cpu >= 3]}) per CPU second: PPO's population "
            f"runs {ppo_cpu:.2f} times a solo process's steps per CPU second and XLVIN-R's "
            f"{xl_cpu:.2f} times; on the machine's two cores, against two solo processes at "
            f"once, PPO's population runs {ppo_wall:.2f} times their seed-steps per second and "
            f"XLVIN-R's {xl_wall:.2f} times (one core against two).")
    if maze is None:
        return text
    maze_cpu, maze_wall = at(maze)
    where = "" if maze["cpu"] == ppo["cpu"] else f" (measured on an {maze['cpu'].split(',')[0]})"
    return (f"{text} The maze's XLVIN, which trains seed by seed, runs {maze_cpu:.2f} times a "
            f"solo process's steps per CPU second at {seeds} seeds, and {maze_wall:.2f} times two "
            f"solo processes' seed-steps per second{where}.")


def _wilson(k: int, n: int) -> str:
    """'k/n [low, high]': the rate's Wilson 95 % interval."""
    z, p = 1.959963984540054, k / n
    mid, half = p + z * z / (2 * n), z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n))
    return f"{k}/{n} [{(mid - half) / (1 + z * z / n):.2f}, {(mid + half) / (1 + z * z / n):.2f}]"


def _iqm2(summary: dict) -> str:
    return "{:.2f} [{:.2f}, {:.2f}]".format(*(summary[k] for k in ("iqm", "iqm_low", "iqm_high")))


def _first(run: dict) -> str:
    return "never" if run["first_score_at"] is None else f"{run['first_score_at']:,}"


def _learned(run: dict, score: float) -> bool:
    return bool(run["curve"]) and run["curve"][-1][1] > score


def sb3_freeway_blocks(results: Path) -> dict[str, str]:
    """docs/atari.md's comparison of our PPO with SB3's on Freeway: the 1M and 100k runs
    (`benchmarks.parity.atari`), the branches from one state, the starts x learners factorial
    and our fresh 1M seeds; every comparison through `xlvin.wording.compare`."""
    big, small = (read_json(results / f) for f in ("parity/atari.json",
                                                   "parity/freeway-100k/atari.json"))
    fresh = read_json(results / "parity/freeway-1m/freeway-1m.json")
    cells = sorted(read_json(results / "atari-1m-fresh/atari.json")["cells"],
                   key=lambda r: r["seed"])
    factorial = read_json(results / "parity/freeway-factorial/factorial.json")

    def by_seed(runs: list[dict]) -> list[dict]:
        return sorted(runs, key=lambda r: r["seed"])

    def versus(data: dict, budget: str) -> str:
        rows, n = data["rows"], len(data["sb3"])
        auc = compare("SB3", "ours", protocol=f"Freeway, {budget} transitions",
                      seeds=f"{n} seeds each", measure="AUC IQM", digits=2,
                      iqms=(rows["SB3 PPO"]["auc"]["iqm"], rows["xlvin PPO"]["auc"]["iqm"]),
                      improvement=data["sb3_auc_over_ours"], counts=(n, len(data["ours"])))
        rate = compare("SB3", "ours", protocol=f"Freeway, {budget} transitions",
                       seeds="seeds that learned",
                       rates=(rows["SB3 PPO"]["seeds_learned"], n,
                              rows["xlvin PPO"]["seeds_learned"], len(data["ours"])))
        return f"{auc}; {rate}"

    score = big["learned_score"]
    one_m = "\n".join([
        f"At {big['transitions']:,} transitions, {len(big['sb3'])} seeds each "
        f"([`results/parity/atari.md`](../results/parity/atari.md)): {versus(big, '1,000,000')}."
        f" Greedy, SB3's seeds score "
        + ", ".join(f"{r['final_eval']['mean']:.1f}" for r in by_seed(big["sb3"]))
        + " a game, ours "
        + ", ".join(f"{r['final_eval']['mean']:.1f}" for r in by_seed(big["ours"]))
        + ". First points and areas, seed by seed:"]
        + [f"- {name} seed {r['seed']}: first point {_first(r)}, area {r['auc']:.2f}"
           f"{', learned' if _learned(r, score) else ''};"
           for name, runs in (("SB3", big["sb3"]), ("ours", big["ours"])) for r in by_seed(runs)])
    lanes = {"SB3": by_seed(small["sb3"]), "ours as committed": by_seed(small["ours"]),
             "ours, value loss unclipped": by_seed(small["ours_unclipped"])}
    table = ["| seed | " + " | ".join(f"{name}: first point, area" for name in lanes) + " |",
             "|---|" + "---|" * len(lanes)]
    for i, r in enumerate(lanes["SB3"]):
        table.append(f"| {r['seed']} | " + " | ".join(
            f"{_first(runs[i])}, {runs[i]['auc']:.2f}"
            + (" **learned**" if _learned(runs[i], score) else "") for runs in lanes.values())
            + " |")
    learned = {name: sum(_learned(r, score) for r in runs) for name, runs in lanes.items()}
    n = len(lanes["SB3"])
    hundred = "\n".join(table) + "\n\n" + (
        f"A seed learned when its last training window averaged more than {score:.0f} a game. "
        + versus(small, "100,000") + "; "
        + compare("ours, value loss unclipped", "ours as committed",
                  protocol="Freeway, 100,000 transitions", seeds="seeds that learned",
                  rates=(learned["ours, value loss unclipped"], n,
                         learned["ours as committed"], n))
        + ". Area IQMs: " + "; ".join(
            f"{name} {_iqm2(row['auc'])}" for name, row in zip(lanes, (
                small["rows"]["SB3 PPO"], small["rows"]["xlvin PPO"],
                small["rows"]["xlvin PPO, value loss unclipped"]))) + ".")
    branch_rows = ["| start | learner | branches | last 5 updates, IQM [95 % CI] | branches back "
                   "at 0 points | P(> ours as committed) |", "|---|---|---|---|---|---|"]
    names = {"sb3": "SB3", "ours": "ours as committed", "ours-unclipped": "ours, value loss "
             "unclipped"}
    zeros: dict[str, list[int]] = {}
    for start in ("sb3-seed1", "sb3-seed0"):
        data = read_json(results / f"parity/freeway-branches/{start}/branches.json")
        for k, (learner, row) in enumerate(data.items()):
            s = row["last5_over_branches"]
            zeros.setdefault(learner, []).append((row["branches_at_zero"], len(row["rows"])))
            branch_rows.append(
                f"| {'SB3 ' + start.split('-')[1].replace('seed', 'seed ') if k == 0 else ''} | "
                f"{names[learner]} | {len(row['rows'])} | {s['iqm']:.1f} [{s['iqm_low']:.1f}, "
                f"{s['iqm_high']:.1f}] | {row['branches_at_zero']} | "
                f"{improvement_text(row['p_over_ours']) if learner != 'ours' else '-'} |")
    branches = "\n".join(branch_rows) + "\n\n" + (
        "Branches that did not take off (back at 0 points in their last 5 updates): "
        + ", ".join(f"{names[learner]} {sum(z for z, _ in v)} of {sum(b for _, b in v)}"
                    for learner, v in zeros.items()) + ".")
    pooled = ["| learner | branches | first point by 16,384 | first point by 100k | learned by "
              "100k | area, IQM [95 % CI] |", "|---|---|---|---|---|---|"]
    for learner in ("sb3", "ours", "ours-unclipped"):
        row = factorial["table"][f"{learner}/both"]
        b = row["branches"]
        pooled.append(f"| {names[learner]} | {b} | {_wilson(row['first_point_by']['16384'], b)} | "
                      f"{_wilson(row['first_point_by']['100000'], b)} | "
                      f"{_wilson(row['learned'], b)} | {_iqm2(row['area'])} |")
    t = factorial["table"]
    fisher = factorial["fisher_learned"]
    ours_all = (learned["ours as committed"] + t["ours/both"]["learned"],
                n + t["ours/both"]["branches"])
    sb3_all = (learned["SB3"] + t["sb3/both"]["learned"], n + t["sb3/both"]["branches"])
    facts = "\n".join(pooled) + "\n\n" + (
        f"Learned by 100k, Fisher's p: SB3 against ours as committed {fisher['sb3 vs ours']:.2f}, "
        f"against the unclipped loss {fisher['sb3 vs ours-unclipped']:.2f}, the unclipped loss "
        f"against the clipped {fisher['ours-unclipped vs ours']:.2f}; the start family within "
        "each learner: " + ", ".join(f"{fisher[f'{k}: sb3 starts vs ours']:.2f}"
                                     for k in ("sb3", "ours", "ours-unclipped"))
        + ". Over the seven-seed study and the branches together (100,000 transitions, every run "
        "from a fresh network): "
        + compare("SB3", "ours", protocol="Freeway, 100,000 transitions",
                  seeds="runs that learned", rates=(*sb3_all, *ours_all))
        + f" (Wilson 95 %: ours {_wilson(*ours_all)}, SB3 {_wilson(*sb3_all)}).")
    rows = fresh["rows"]
    f_row = rows["xlvin PPO, fresh seeds 3-7"]
    all_learned = fresh["sb3_vs_all_ours"]["learned"]
    fresh_text = "\n".join(
        [f"- seed {r['seed']}: first point {_first(r)}, AUC {r['auc']:.2f}, greedy "
         f"{r['final_eval']['mean']:.1f}{', learned' if _learned(r, score) else ''};"
         for r in cells]
        + ["\n" + compare("SB3", "ours", protocol="Freeway, 1,000,000 transitions",
                   seeds=f"SB3's {len(rows['SB3 PPO']['seeds'])} seeds, our fresh "
                   f"{len(f_row['seeds'])}", measure="AUC IQM", digits=2,
                   iqms=(rows["SB3 PPO"]["auc"]["iqm"], f_row["auc"]["iqm"]),
                   improvement=fresh["sb3_vs_fresh"]["auc_over"],
                   counts=(len(rows["SB3 PPO"]["seeds"]), len(f_row["seeds"])))
           + "; " + compare("SB3", "ours", protocol="Freeway, 1,000,000 transitions",
                            seeds="seeds that learned, fresh seeds",
                            rates=tuple(fresh["sb3_vs_fresh"]["learned"]))
           + "; with seeds 0-2: " + compare("SB3", "ours", protocol="Freeway, 1,000,000 "
                                            "transitions", seeds="seeds that learned, all ours",
                                            rates=tuple(all_learned))
           + f" (ours: Wilson 95 % {_wilson(all_learned[2], all_learned[3])})."])
    return {"sb3-freeway-1m": one_m, "sb3-freeway-100k": hundred,
            "sb3-freeway-branches": branches, "sb3-freeway-factorial": facts,
            "sb3-freeway-fresh": fresh_text}


#: The Alien expansion study's trees as docs/continuous.md names them, in its order.
EXPANSION_LABELS = {
    "ppo": "PPO (no tree)", "xlvin-r K=1 all": "XLVIN-R, K = 1, all 18 (the paper's Alien)",
    "xlvin-r K=2 all": "K = 2, all 18", "xlvin-r K=2 uniform-4": "K = 2, 4 drawn uniformly",
    "xlvin-r K=2 policy-4": "K = 2, 4 drawn from the rollout policy",
    "xlvin-r K=3 all": "K = 3, all 18", "xlvin-r K=3 uniform-4": "K = 3, 4 drawn uniformly"}


def expansion_blocks(results: Path) -> dict[str, str]:
    """docs/continuous.md's trees on Alien (`benchmarks.studies.atari_expansion`,
    results/atari-expansion/expansion.json): what each costs a 1,000 transitions, and what the
    sampled ones learned against the paper's K = 1 tree, through `xlvin.wording.compare`."""
    data = read_json(results / "atari-expansion/expansion.json")
    cost, learning = data["cost"]["configs"], data["learning"]
    ppo = cost["ppo"]["cpu_s_per_1000"]
    rows = ["| tree | latent states an observation | CPU s per 1,000 transitions | x PPO's |",
            "|---|---|---|---|"]
    for key, label in EXPANSION_LABELS.items():
        c = cost[key]
        rows.append(f"| {label} | {c['states_per_observation']:,} | " + (
            f"refused: it {c['refused'].split(' actions ')[-1]} | - |" if "refused" in c else
            f"{c['cpu_s_per_1000']:.1f} | {c['cpu_s_per_1000'] / ppo:.2f} |"))
    full, drawn, deep = (cost[k] for k in ("xlvin-r K=2 all", "xlvin-r K=2 uniform-4",
                                           "xlvin-r K=3 uniform-4"))
    costs = "\n".join(rows) + "\n\n" + (
        f"What it costs: at K = 2 the full tree is affordable on pixels, because the Nature CNN, "
        f"not the tree, dominates an update; drawing 4 actions saves "
        f"{100 * (1 - drawn['cpu_s_per_1000'] / full['cpu_s_per_1000']):.0f} % of the CPU there. "
        f"The full tree cannot go deeper: at K = 3 the library refuses it before building "
        f"anything ({cost['xlvin-r K=3 all']['states_per_observation']:,} states an "
        f"observation), while 4 drawn actions a node reach K = 3 at "
        f"{deep['cpu_s_per_1000'] / ppo:.2f}x PPO's cost.")
    rows = ["| tree | area (mean training game score), IQM [95 % CI] | final greedy score | "
            "P(area > K = 1, all 18) |", "|---|---|---|---|"]
    for key, row in learning.items():
        rows.append(f"| {EXPANSION_LABELS[key]} | {_ci(row['auc'])} | {_ci(row['greedy'])} | "
                    f"{improvement_text(row.get('auc_over_k1'))} |")
    k1 = learning["xlvin-r K=1 all"]

    def short(key: str) -> str:
        return "PPO" if key == "ppo" else key.removeprefix("xlvin-r ").replace("K=", "K = ")

    verdicts = [compare(short(key), "K = 1 all",
                        protocol=f"{data['game']}, {data['transitions']:,} transitions",
                        seeds=f"{len(row['seeds'])} seeds each", measure="area IQM",
                        iqms=(row["auc"]["iqm"], k1["auc"]["iqm"]),
                        improvement=row["auc_over_k1"],
                        counts=(len(row["seeds"]), len(k1["seeds"])))
                for key, row in learning.items() if key != "xlvin-r K=1 all"]
    learned = "\n".join(rows) + "\n\n" + "; ".join(verdicts) + "."
    return {"expansion-cost": costs, "expansion-learning": learned}


#: The authors' continuous runs' envs and statistics as docs/continuous-authors.md names them.
AUTHORS_CONTINUOUS = (("mountaincar-continuous", "MountainCarContinuous-v0", ("max", "last")),
                      ("halfcheetah", "HalfCheetah", ("last100", "last10")))


def authors_continuous_blocks(results: Path) -> dict[str, str]:
    """docs/continuous-authors.md's table of the authors' code on continuous actions
    (results/authors-code/continuous.json), and each HalfCheetah run's last-100 return and CPU
    seconds."""
    data = read_json(results / "authors-code/continuous.json")
    rows = {(r["env"], r["agent"]): r for r in data["rows"]}
    table = ["| env | statistic | PPO | XLVIN | P(XLVIN > PPO) |", "|---|---|---|---|---|"]
    for env, name, stats in AUTHORS_CONTINUOUS:
        ppo, xlvin = rows[env, "ppo"], rows[env, "xlvin"]
        table += [f"| {name} | {data['statistics'][env][k]} | {_ci(ppo[k])} | {_ci(xlvin[k])} | "
                  f"{improvement_text(xlvin[f'{k}_over_ppo'])} |" for k in stats]
    runs = data["runs"]["halfcheetah"]
    last = [r["last100"] for agent in runs.values() for r in agent]
    cpu = {agent: [r["cpu_s"] for r in rs] for agent, rs in runs.items()}
    names = {"ppo": "PPO", "xlvin": "XLVIN"}
    prose = (
        f"On HalfCheetah every run's mean return over its last 100 training episodes lies between "
        f"{min(last):.0f} and {max(last):.0f}. A HalfCheetah run used "
        + " and ".join(f"{min(v):.0f}-{max(v):.0f} CPU seconds for {names[a]}"
                       for a, v in cpu.items())
        + " (their code, on a 2-core Intel Xeon).")
    return {"authors-continuous-table": "\n".join(table), "authors-continuous-prose": prose}


def page_blocks(results: Path) -> dict[str, str]:
    """Every block of this module (`xlvin.experiments.pages`)."""
    return (parity_blocks(results) | bench_blocks(results) | sb3_freeway_blocks(results)
            | expansion_blocks(results) | authors_continuous_blocks(results)
            | population_blocks(results))
