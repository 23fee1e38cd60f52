"""results/bench.md from results/bench.json (see benchmarks/suite/run.py), with the maze
curricula's and the population benchmark's figures from their own results files; the profiles
and the before / after of each change are benchmarks/notes.md, linked at its end.

    python -m benchmarks.suite.report    # re-render results/bench.md without measuring anything

results/bench.md renders byte for byte from its JSON (tests/test_committed_results.py).
"""

import json
import math
import statistics
from pathlib import Path
from typing import Any

from xlvin.experiments.benchmark_pages import population_blocks
from xlvin.nn.tree import node_count


PLANNING_TARGETS = {"Freeway": 0.7}  # XLVIN-R / PPO on Freeway; every other case with K <= 2: 0.5


def _mean(xs: list[float]) -> float:
    return statistics.fmean(xs) if xs else float("nan")


def _f(x: Any, nd: int = 0) -> str:
    if x is None or (isinstance(x, float) and math.isnan(x)):
        return "-"
    return f"{x:,.{nd}f}"


def _load(p: dict[str, Any]) -> str:
    where = f"on {p['cpu']}" if "cpu" in p else "machine not recorded"
    return (f"measured {p.get('started', '?')} to {p.get('finished', '?')} ({where}), load average "
            f"{p.get('loadavg_start')} at the start, {p.get('loadavg_end')} at the end"
            + (" (quick run)" if p.get("quick") else ""))


def _ppo_section(title: str, p: dict[str, Any], target: str, ratio_target: float) -> list[str]:
    runs = p["runs"]
    sides = {s: [r for r in runs if r["side"] == s and "sps" in r] for s in ("ours", "sb3", "ours_baseline", "ours_ale")}
    lines = [f"## {title}", "", _load(p) + ".", "",
             f"{p['env']}, {p['steps']:,} steps per run, hyperparameters on both sides: "
             + ", ".join(f"{k} {v}" for k, v in p["hyperparameters"].items())
             + f"; network: {p['encoder']}; one torch thread on both sides. "
             "Final return: greedy, evaluated by the same function (xlvin.train.evaluation."
             "evaluate_policy) on the same episodes (seeds 1,000,000+).", "",
             "| run | side | steps/s | steps per CPU second | final return (greedy) | training return "
             "(last 20 episodes) |",
             "|---|---|---|---|---|---|"]
    for r in runs:
        if "error" in r:
            lines.append(f"| {r['repeat']} | {r['side']} | error: {r['error']} | | | |")
            continue
        lines.append(f"| {r['repeat']} | {r['side']} | {_f(r['sps'])} | {_f(r.get('cpu_sps'))} | "
                     f"{_f(r['final_return'], 1)} +- {_f(r['final_return_std'], 1)} | "
                     f"{_f(r.get('train_return_last20'), 1)} |")
    ours, sb3 = _mean([r["sps"] for r in sides["ours"]]), _mean([r["sps"] for r in sides["sb3"]])
    ratio = ours / sb3 if sb3 else float("nan")
    lines += ["", (f"Mean steps/s: ours **{_f(ours)}**, SB3 **{_f(sb3)}**, ratio **{ratio:.2f}x** "
              f"(target: {target}; {'met' if ratio >= ratio_target else 'NOT met'}). "
              f"Final greedy return: ours {_f(_mean([r['final_return'] for r in sides['ours']]), 1)}, "
              f"SB3 {_f(_mean([r['final_return'] for r in sides['sb3']]), 1)}.")]
    if sides["ours_ale"] and all("cpu_sps" in r for s in ("ours", "sb3", "ours_ale")
                                  for r in sides[s]):
        cpu = {s: _mean([r["cpu_sps"] for r in sides[s]]) for s in ("ours", "sb3", "ours_ale")}
        lines.append(f"Per CPU second: ours {_f(cpu['ours'])} ({cpu['ours'] / cpu['sb3']:.2f}x SB3), "
                     f"ours on ale-py's vector env (`--atari-vector ale`) {_f(cpu['ours_ale'])} "
                     f"({cpu['ours_ale'] / cpu['sb3']:.2f}x SB3), SB3 {_f(cpu['sb3'])}.")
    if sides["ours_baseline"]:
        before = _mean([r["sps"] for r in sides["ours_baseline"]])
        lines.append(f"Before this issue's changes (same run, code of the baseline revision): "
                     f"{_f(before)} steps/s ({ours / before:.2f}x now).")
    return lines + [""]


def _peak_memory(r: dict[str, Any]) -> str:
    """A kernel row's peak memory: the GPU's allocator peak on a GPU, else the rise of max RSS."""
    if "peak_gpu_mb" in r:
        return f"{r['peak_gpu_mb']:,.0f} MB (GPU)"
    return f"{r['peak_rss_increase_mb']:,.0f} MB"


def _depth_section(p: dict[str, Any]) -> list[str]:
    """CartPole at tree depths 0, 1, 2: the time per rollout the tree adds, against the 0.5x
    budget of the planning target."""
    def rows(agent: str, depth: int | None) -> list[dict[str, Any]]:
        return [r for r in p["runs"] if r["agent"] == agent and r["depth"] == depth and "sps" in r]

    def per_rollout(runs: list[dict[str, Any]]) -> tuple[float, float, float]:
        collection = _mean([r["collection_ms_per_rollout"] for r in runs])
        update = _mean([r["update_ms_per_rollout"] for r in runs])
        return collection, update, collection + update

    ppo = rows("ppo", None)
    lines = ["## 2b. CartPole-v1: what the tree costs (XLVIN at depth K = 0, 1, 2)", "",
             _load(p) + ".", "",
             (f"{p['case']['label']}, {p['steps']:,} steps per run, the planning part's settings; "
             "XLVIN at K = 0 has the transition model (TransE term), the executor's width in the "
             "heads and no tree. Wall time per rollout of 4 envs x 128 steps, summed over the run "
             "and divided by the rollouts; means over interleaved repeats."), "",
             ("| agent | runs | steps/s | collection ms / rollout | update ms / rollout | "
             "total ms / rollout | steps/s over PPO |"), "|---|---|---|---|---|---|---|"]
    ppo_sps, (_, _, ppo_total) = _mean([r["sps"] for r in ppo]), per_rollout(ppo)
    totals = {}
    for agent, depth in [("ppo", None), ("xlvin", 0), ("xlvin", 1), ("xlvin", 2)]:
        runs = rows(agent, depth)
        if not runs:
            continue
        collection, update, totals[depth] = per_rollout(runs)
        sps = _mean([r["sps"] for r in runs])
        label = "PPO" if depth is None else f"XLVIN, K = {depth}"
        lines.append(f"| {label} | {len(runs)} | {_f(sps)} | {collection:.1f} | {update:.1f} | "
                     f"{totals[depth]:.1f} | {sps / ppo_sps:.2f}x |")
    if {0, 2} <= totals.keys() and ppo:
        added, tree, budget = totals[2] - ppo_total, totals[2] - totals[0], 2 * ppo_total - totals[0]
        need = f"{tree / budget:.1f}x less time" if budget > 0 else "no time at all (over budget)"
        lines += ["", (f"0.5x of PPO allows XLVIN at K = 2 {2 * ppo_total:.1f} ms per rollout: "
                  f"PPO's {ppo_total:.1f} ms plus as much again for everything XLVIN adds (the "
                  f"transition model and its TransE term, the tree, the executor, the wider heads). "
                  f"Those additions take {added:.1f} ms now, so the target needs them in "
                  f"{added / ppo_total:.1f}x less time. Without its tree (K = 0, where the TransE "
                  f"prediction runs its own transition pass) XLVIN takes {totals[0]:.1f} ms, which "
                  f"leaves the depth-2 tree {budget:.1f} ms of the {tree:.1f} ms it takes now "
                  f"({need}).")]
    return lines + [""]


def _maze_section(results: Path) -> list[str]:
    """Training steps/s of each maze agent in the curricula of `xlvin reproduce maze`
    (results/maze.json) and of the paper's maze XLVIN on the GPU (results/maze_xlvin_h100.json)."""
    runs = []
    if (results / "maze.json").exists():
        runs = [r for r in json.loads((results / "maze.json").read_text())["runs"]
                if r["experiment"] == "maze" and r.get("in_progress") is None]
    if not runs:
        return []
    out = ["## 5. Maze curricula: training steps/s per agent", "",
           ("From the finished curricula (`results/maze.json`, written by `xlvin reproduce maze`): "
           "env steps over wall time of the whole run (collection, PPO updates and the held-out "
           "evaluations after each passed level), one torch thread a process, two to six "
           "curricula at once on this 2-core VM beside other jobs (load average 2-13), so the "
           "spread is mostly load. PPO: 32 envs x 32 steps, 4 epochs x 4 minibatches "
           "(`MAZE_PPO`)."), "",
           "| agent | machine | seeds | steps/s, mean | min - max | env steps a run, mean |",
           "|---|---|---|---|---|---|"]
    for agent in sorted({r["agent"] for r in runs}):
        mine = [r for r in runs if r["agent"] == agent]
        sps = [r["steps_per_second"] for r in mine]
        out.append(f"| {agent} | this CPU | {len(mine)} | {_mean(sps):,.0f} | "
                   f"{min(sps):,.0f} - {max(sps):,.0f} | "
                   f"{_mean([r['env_steps'] for r in mine]):,.0f} |")
    gpu = results / "maze_xlvin_h100.json"
    if gpu.exists():
        g = json.loads(gpu.read_text())
        r = g["record"]
        out.append(f"| {r['agent']} (K = 4, the paper's) | {g['machine']} | 1 | "
                   f"{r['steps_per_second']:,.0f} | - | {r['env_steps']:,} |")
    return out + [""]


def render(data: dict[str, Any]) -> str:
    m = data.get("machine", {})
    parts = data.get("parts", {})
    out = ["# Benchmarks", "",
           ("Written by `python -m benchmarks.suite.run` (see `benchmarks/suite/run.py`; not part "
           "of CI). "
           "Every figure comes from its own fresh process; figures compared with each other are "
           "measured side by side in one invocation, interleaved. The machine is shared with other "
           "jobs: the load average of each part is given, and figures from a busier period are "
           "lower."), "",
           (f"Machine of the latest run: {m.get('cpu')}, {m.get('cores')} cores, torch {m.get('torch')} "
           f"({m.get('torch_threads_used')} torch thread in every measurement), Python "
           f"{m.get('python')}, Stable-Baselines3 {m.get('stable_baselines3')}; torch device of "
           f"every measurement: {m.get('device', 'cpu')}. Each section names the CPU it was "
           "measured on (sections measured before the CPU was recorded say so).")]
    if "baseline" in data:
        out += ["", (f"\"Before\" figures: the code at `{data['baseline']['revision']}` "
                f"(commit {data['baseline']['commit']}, before this issue's optimisations), run in "
                "the same invocation.")]
    out.append("")
    if "ppo_sb3" in parts:
        out += _ppo_section("1. PPO vs Stable-Baselines3: CartPole-v1", parts["ppo_sb3"],
                            "ours >= 2x SB3", 2.0)
    if "atari" in parts:
        out += _ppo_section("1b. PPO vs Stable-Baselines3: Atari Freeway (Nature CNN)", parts["atari"],
                            "ours >= 1.5x SB3", 1.5)
        out += [("Same preprocessing on both sides: both make the gymnasium id `xlvin/Freeway-v5` "
                "(ALE v5, frameskip 1 + AtariPreprocessing: 30 no-ops, skip 4, 84x84 gray; 4 stacked "
                "frames; sticky actions 0.25); SB3 through `make_vec_env` (DummyVecEnv), ours "
                "through a sync gymnasium vector env. Both use the Nature CNN (512 features) with "
                "linear actor and critic heads."), ""]
    if "planning" in parts:
        p = parts["planning"]
        out += ["## 2. Planning overhead: training steps/s of XLVIN over PPO", "", _load(p) + ".", "",
                ("Online PPO (`train_ppo`) with the same encoder for both agents; XLVIN adds the "
                "transition model, the tree of depth K over all A actions and the frozen executor "
                "(H = 50; on Atari a Linear(512 -> 50) node projection). Atari cases on the real "
                "`xlvin/<Game>-v5` envs; the maze on synthetic (3, 8, 8) observations (no maze "
                "environment in the library yet) with an MLP encoder. With several repeats (runs "
                "interleaved: PPO, XLVIN, PPO, ...), steps/s are the mean over repeats and each "
                "repeat's own ratio is listed."), "",
                "| case | (A, K) | env steps | repeats | PPO steps/s | XLVIN steps/s | XLVIN / PPO | per repeat | target | XLVIN before (baseline code) | XLVIN / PPO before (baseline code) |",
                "|---|---|---|---|---|---|---|---|---|---|---|"]
        for c in p["cases"].values():
            case = c["case"]

            def sps(agent: str, code: str = "current", runs: list = c["runs"]) -> list[float]:
                return [r["sps"] for r in runs if r["agent"] == agent and r["code"] == code and "sps" in r]

            ppo, xl, before = sps("ppo"), sps("xlvin"), sps("xlvin", "baseline")
            ppo_before = sps("ppo", "baseline")
            ratio = _mean(xl) / _mean(ppo) if ppo and xl else float("nan")
            ratio_before = f"{_mean(before) / _mean(ppo_before):.2f}x" if before and ppo_before else "-"
            each = ", ".join(f"{x / q:.2f}" for q, x in zip(ppo, xl))
            goal = PLANNING_TARGETS.get(case["label"], 0.5) if case["K"] <= 2 else None
            target = f">= {goal}x" if goal else "report"
            verdict = "" if goal is None else (" (met)" if ratio >= goal else " (NOT met)")
            out.append(f"| {case['label']} | ({case['A']}, {case['K']}) | {c['steps']:,} | {len(xl)} | "
                       f"{_f(_mean(ppo), 1)} | {_f(_mean(xl), 1)} | {ratio:.2f}x{verdict} | {each} | "
                       f"{target} | {_f(_mean(before), 1) if before else '-'} | {ratio_before} |")
        stamps = {name: c["measured"] for name, c in p["cases"].items() if "measured" in c}
        if len({json.dumps(m, sort_keys=True) for m in stamps.values()}) > 1:
            out += [""] + [f"- {p['cases'][name]['case']['label']}: {_load(m)}." for name, m in stamps.items()]
        out.append("")
    if "depth" in parts:
        out += _depth_section(parts["depth"])
    if "kernel" in parts:
        p = parts["kernel"]
        rate = p["matmul_rate"]
        peak = max(v for v in rate.values() if isinstance(v, float))
        out += ["## 3. Tree + executor kernel (batch 256)", "", _load(p) + ".", "",
                ("Expansion (transition on every node, k = 50) + K executor steps (H = 50, max "
                "aggregation), roots [256, 50] to chi [256, 50]. Forward: under no_grad; "
                "forward+backward: gradients to the roots and the transition (the executor is "
                "frozen). Floor = the multiply-adds the tree needs (the pruned tree: see "
                "`benchmarks/suite/worker.py:kernel_macs`; backward counted 2x for the transition, 1x "
                "for the frozen executor) / the best matrix-multiply rate torch reaches here, "
                f"measured in the same run: {peak / 1e9:.1f} GMAC/s (1024^3 GEMM; "
                f"{rate.get('tree_64', 0) / 1e9:.1f} GMAC/s on the tree's [65536, 64] x [64, 64] shape). "
                "Peak memory = the rise of the process's max RSS during the measurement. "
                "\"retain memory\": with `xlvin.accel.allocator.retain_freed_memory()` (glibc keeps freed "
                "memory instead of unmapping every tensor over 32 MiB); every `xlvin` command "
                "sets it, so \"yes\" is what `xlvin train` runs."), "",
                "| case | (A, K) | nodes | code | retain memory | mode | best time | floor | fraction of floor | peak memory |",
                "|---|---|---|---|---|---|---|---|---|---|"]
        for name, c in p["cases"].items():
            case = c["case"]
            nodes = node_count(256, case["A"], case["K"])
            for r in c["runs"]:
                if "skipped" in r or "error" in r:
                    out.append(f"| {name} | ({case['A']}, {case['K']}) | {nodes:,} | {r['code']} | "
                               f"{'yes' if r['retain_memory'] else 'no'} | {r['mode']} | "
                               f"{r.get('skipped') or r.get('error')} | | | |")
                    continue
                floor = r["macs"][r["mode"]] / peak
                out.append(
                    f"| {name} | ({case['A']}, {case['K']}) | {nodes:,} | {r['code']} | "
                    f"{'yes' if r['retain_memory'] else 'no'} | {r['mode'].replace('_', '+')} | "
                    f"{r['best_s'] * 1e3:,.1f} ms | {floor * 1e3:,.2f} ms | "
                    f"{100 * floor / r['best_s']:.1f} % | {_peak_memory(r)} |")
        out += ["", ("Target: >= 30 % of the floor for the largest case (the maze, (8, 4))."
                " The small cases are bound by per-op overhead, not arithmetic."), ""]
    if "end_to_end" in parts:
        p = parts["end_to_end"]
        out += ["## 4. End to end", "", _load(p) + ".", "", "| job | wall time | exit |", "|---|---|---|"]
        for name, r in p.items():
            if isinstance(r, dict) and "wall_s" in r:
                out.append(f"| {name} | {r['wall_s'] / 60:.1f} min | {r['rc']} |")
        out.append("")
    else:
        out += ["## 4. End to end", "",
                ("Not measured in this invocation: `python -m benchmarks.suite.run --only end_to_end` "
                "(~40 min; executor pre-training, `xlvin quickstart` with a cold and a warm cache, "
                "`xlvin reproduce classic` with its default seeds)."), ""]
    results = Path(__file__).parents[2] / "results"
    out += _maze_section(results)
    if data["machine"].get("device", "cpu") == "cpu":
        out += _population_section(results)
    out += ["## Notes", "", "The profiles, the arithmetic floors, what each change bought and "
            "what was tried and dropped: [benchmarks/notes.md](../benchmarks/notes.md)."]
    return "\n".join(out) + "\n"


def _population_section(results: Path) -> list[str]:
    """Many seeds in one process (`python -m benchmarks.suite.population`): its targets and
    every run results/population/*.json holds, as docs/benchmarks.md renders them."""
    blocks = population_blocks(results)
    if not blocks:
        return []
    out = ["## 6. Many seeds in one process: S seeds together against solo processes", "",
           "`python -m benchmarks.suite.population` (`--agent`, `--sizes`, `--json`): every seed "
           "of a population trains bit for bit as alone (tests/test_population.py).", ""]
    if "population-targets" in blocks:
        out += [blocks.pop("population-targets"), ""]
    stems = [name.removeprefix("population-") for name in blocks]
    for stem in [*(s for s in POPULATION_TITLES if s in stems),
                 *(s for s in stems if s not in POPULATION_TITLES)]:
        title = POPULATION_TITLES.get(stem, stem)
        out += [f"### {title} (`results/population/{stem}.json`)", "",
                blocks[f"population-{stem}"], ""]
    return out


#: The population benchmark's results files (results/population/STEM.json) -> their heading.
POPULATION_TITLES = {
    "ppo": "PPO on CartPole-v1",
    "xlvin-r": "XLVIN-R on CartPole-v1, its update stacked",
    "xlvin-r-per-seed-update": "XLVIN-R on CartPole-v1, its update seed by seed (the code before)",
    "xlvin-maze": "XLVIN on the 8x8 maze (the maze study's `xlvin-32-b2`), seed by seed",
    "grouped-conv": "The maze CNN's convolutions grouped over seeds, against each seed's own call",
}


if __name__ == "__main__":
    results = Path(__file__).parents[2] / "results"
    (results / "bench.md").write_text(render(json.loads((results / "bench.json").read_text())))
    print(f"wrote {results / 'bench.md'}")
