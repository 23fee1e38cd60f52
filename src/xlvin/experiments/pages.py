"""The result blocks of README.md and docs/*.md: every table and sentence of a page that carries
results numbers sits between `<!-- xlvin:begin NAME -->` and `<!-- xlvin:end NAME -->`, and is
the text that its experiment's report code renders from the committed JSON under results/
(`BLOCKS`). `xlvin reproduce` re-writes them (`rewrite`); tests/test_pages.py fails when a block
differs from its rendering, so no number on a page is typed by hand."""

import math
import re
import textwrap
from collections.abc import Callable
from pathlib import Path

from xlvin.experiments import (
    atari_report,
    atari_vae_report,
    continuous,
    executor_ablation,
    executor_true_trees_report,
    maze_ablation_report,
    maze_embeddings,
    maze_report,
    table1_report,
)
from xlvin.io.files import atomic_write_text, read_json
from xlvin.stats import improvement_over
from xlvin.wording import compare

BLOCK = re.compile(r"<!-- xlvin:begin (?P<name>[\w.-]+) -->\n(?P<body>.*?)\n?"
                   r"<!-- xlvin:end (?P=name) -->", re.DOTALL)

#: Each report module's blocks: results folder -> {block name: text}.
SOURCES: tuple[Callable[[Path], dict[str, str]], ...] = (
    table1_report.page_blocks, executor_ablation.page_blocks, maze_report.page_blocks,
    maze_report.contextual_blocks, maze_report.findings_blocks, maze_report.depth_blocks,
    maze_embeddings.page_blocks, maze_ablation_report.page_blocks, atari_report.page_blocks,
    atari_vae_report.page_blocks, continuous.page_blocks, executor_true_trees_report.page_blocks)

#: The README's results table: (experiment, command, page) around each report's headline.
README_ROWS = (
    ("Table 1: CartPole, Acrobot, MountainCar from 10 trajectories (PPO, XLVIN-R, XLVIN-CP, "
     "ATreeC)", "`xlvin reproduce classic --protocol paper` (or `ours`)", "table1-headline",
     "[table1.md](docs/table1.md)"),
    ("Does the executor matter? (beyond the paper)", "`xlvin reproduce executor-ablation`, "
     "`xlvin reproduce maze-ablation`", ("executor-headline", "maze-ablation-headline"),
     "[table1.md](docs/table1.md#does-the-planner-matter-an-executor-ablation-beyond-the-paper), "
     "[mazes.md](docs/mazes.md#does-the-executor-matter-on-mazes-an-ablation-beyond-the-paper)"),
    ("Figure 2 (and 7): the continual maze, held-out 8x8 and 16x16", "`xlvin reproduce maze`",
     "maze-headline", "[mazes.md](docs/mazes.md)"),
    ("Figure 9: the contextual maze", "`xlvin reproduce contextual-maze`",
     "contextual-maze-headline",
     "[mazes.md](docs/mazes.md#the-continual-maze-and-the-contextual-maze)"),
    ("Figure 5: latent state embeddings of a maze", "`xlvin maze embeddings --run DIR`",
     "embeddings-headline",
     "[mazes.md](docs/mazes.md#figure-5-the-state-embeddings-of-one-held-out-maze)"),
    ("Figures 4 and 6: Freeway, Alien, Enduro from pixels", "`xlvin reproduce atari`",
     "atari-headline", "[atari.md](docs/atari.md)"),
    ("Figure 10 (appendix): a VAE world model in place of TransE",
     "`xlvin reproduce atari-vae`", "atari-vae-headline",
     "[atari.md](docs/atari.md#the-vae-world-model-appendix-figure-10)"),
    ("Continuous actions (beyond the paper): MountainCarContinuous, Pendulum, HalfCheetah, "
     "Hopper; PPO vs XLVIN over 7 bins, 4 of them expanded a node (uniform, Gaussian, policy) "
     "or all", "`xlvin reproduce continuous` (`--envs HalfCheetah-v5,Hopper-v5`)",
     "continuous-headline", "[continuous.md](docs/continuous.md)"),
)


def _readme_table(blocks: dict[str, str]) -> str:
    """The README's table of experiments, each row's headline its report's."""
    lines = ["| experiment | command | our headline | page |", "|---|---|---|---|"]
    for experiment, command, names, page in README_ROWS:
        names = (names,) if isinstance(names, str) else names
        headline = " ".join(blocks[n] for n in names).replace("\n", " ")
        lines.append(f"| {experiment} | {command} | {headline} | {page} |")
    return "\n".join(lines)


def _parity_compare(run: dict, label: str) -> str:
    """`compare` of our PPO's final returns with SB3's in one parity file."""
    ours, sb3 = (run["libraries"][lib] for lib in ("xlvin", "sb3"))
    finals = [[r["final_return"] for r in lib["runs"]] for lib in (ours, sb3)]
    return compare("ours", "SB3", protocol=f"{label}, {run['steps']:,} steps",
                   seeds=f"{len(finals[0])} seeds each, final return",
                   iqms=(ours["final_return"]["iqm"], sb3["final_return"]["iqm"]),
                   improvement=improvement_over(*finals))


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


def _parity_blocks(results: Path) -> dict[str, str]:
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


def _bench_blocks(results: Path) -> dict[str, str]:
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


#: The width the pages' prose is wrapped to.
WIDTH = 100


def _wrapped(text: str) -> str:
    """A block's prose lines and list items wrapped to `WIDTH`; table rows kept whole."""
    def wrap(line: str) -> str:
        if line.startswith("|") or len(line) <= WIDTH:
            return line
        indent = "  " if line.startswith("- ") else ""
        return textwrap.fill(line, WIDTH, subsequent_indent=indent, break_long_words=False,
                             break_on_hyphens=False)
    return "\n".join(wrap(line) for line in text.split("\n"))


def rendered(results: Path) -> dict[str, str]:
    """{block name: its text} rendered from the JSON under `results`, prose wrapped."""
    blocks: dict[str, str] = {}
    for source in SOURCES:
        blocks.update(source(results))
    blocks.update(_parity_blocks(results) | _bench_blocks(results))
    blocks = {name: _wrapped(text) for name, text in blocks.items()}
    blocks["readme-results"] = _readme_table(blocks)
    return blocks


def pages(root: Path) -> list[Path]:
    """The pages that may hold result blocks: README.md and docs/*.md under `root`."""
    return [p for p in [root / "README.md", *sorted((root / "docs").glob("*.md"))] if p.is_file()]


def blocks_of(text: str) -> dict[str, str]:
    """{name: text between its markers} of a page."""
    return {m["name"]: m["body"] for m in BLOCK.finditer(text)}


def with_blocks(text: str, blocks: dict[str, str]) -> str:
    """`text` with every block whose name `blocks` has re-written to that text."""
    def one(match: re.Match) -> str:
        name = match["name"]
        body = blocks.get(name, match["body"])
        return f"<!-- xlvin:begin {name} -->\n{body}\n<!-- xlvin:end {name} -->"
    return BLOCK.sub(one, text)


def rewrite(root: Path) -> list[str]:
    """Re-write the result blocks of the pages under `root` from `root`/results; the names of
    the blocks that changed. Nothing where no page has a block (not our repository)."""
    marked = [p for p in pages(root) if blocks_of(p.read_text(encoding="utf-8"))]
    if not marked or not (root / "results").is_dir():
        return []
    blocks, changed = rendered(root / "results"), []
    for page in marked:
        text = page.read_text(encoding="utf-8")
        new = with_blocks(text, blocks)
        if new != text:
            changed += [n for n, b in blocks_of(text).items() if blocks_of(new)[n] != b]
            atomic_write_text(page, new)
    return changed
