"""The result blocks of README.md and docs/*.md: every table and sentence of a page that carries
results numbers sits between `<!-- xlvin:begin NAME -->` and `<!-- xlvin:end NAME -->`, and is
the text that its experiment's report code renders from the committed JSON under results/
(`BLOCKS`). `xlvin reproduce` re-writes them (`rewrite`); tests/test_pages.py fails when a block
differs from its rendering, so no number on a page is typed by hand."""

import re
import textwrap
from collections.abc import Callable
from pathlib import Path

from xlvin.experiments import (
    atari_report,
    atari_vae_report,
    benchmark_pages,
    continuous,
    executor_ablation,
    executor_latent_trees_report,
    executor_probes_report,
    executor_true_trees_report,
    executor_why_report,
    maze_ablation_report,
    maze_embeddings,
    maze_report,
    oracle_report,
    table1_report,
)
from xlvin.io.files import atomic_write_text

BLOCK = re.compile(r"<!-- xlvin:begin (?P<name>[\w.-]+) -->\n(?P<body>.*?)\n?"
                   r"<!-- xlvin:end (?P=name) -->", re.DOTALL)

#: Each report module's blocks: results folder -> {block name: text}.
SOURCES: tuple[Callable[[Path], dict[str, str]], ...] = (
    table1_report.page_blocks, executor_ablation.page_blocks, maze_report.page_blocks,
    maze_report.contextual_blocks, maze_report.findings_blocks, maze_report.depth_blocks,
    maze_embeddings.page_blocks, maze_ablation_report.page_blocks,
    maze_ablation_report.geometry_blocks, maze_ablation_report.cell_blocks,
    atari_report.page_blocks,
    atari_vae_report.page_blocks, continuous.page_blocks, continuous.mujoco_blocks,
    executor_true_trees_report.page_blocks, executor_latent_trees_report.page_blocks,
    executor_probes_report.page_blocks, executor_why_report.page_blocks,
    oracle_report.page_blocks,
    benchmark_pages.page_blocks)

#: The README's results table: (experiment, command, page) around each report's headline.
README_ROWS = (
    ("Table 1: CartPole, Acrobot, MountainCar from 10 trajectories (PPO, XLVIN-R, XLVIN-CP, "
     "ATreeC)", "`xlvin reproduce classic --protocol paper` (or `ours`)", "table1-headline",
     "[table1.md](docs/table1.md)"),
    ("Does the executor matter? (beyond the paper)", "`xlvin reproduce executor-ablation`, "
     "`xlvin reproduce maze-ablation`", ("executor-headline", "maze-ablation-headline"),
     "[table1.md](docs/table1.md#does-the-planner-matter-an-executor-ablation-beyond-the-paper), "
     "[mazes.md](docs/mazes.md#does-the-executor-matter-on-mazes-an-ablation-beyond-the-paper)"),
    ("Why the executor does not help on the maze (beyond the paper)", "`xlvin reproduce "
     "executor-true-trees`, `executor-latent-trees`, `executor-probes`, `executor-oracle`",
     ("why-true-trees-headline", "why-latent-trees-headline", "why-probes-headline",
      "why-oracle-headline", "why-verdict-headline"),
     "[mazes.md](docs/mazes.md#why-the-executor-does-not-help-and-where-it-might)"),
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
    blocks = {name: _wrapped(text) for name, text in blocks.items()}
    blocks["readme-results"] = _readme_table(blocks)
    return blocks


def pages(root: Path) -> list[Path]:
    """The pages that may hold result blocks: README.md, docs/*.md and benchmarks/notes.md
    (whose result blocks docs/benchmarks.md shares) under `root`."""
    return [p for p in [root / "README.md", *sorted((root / "docs").glob("*.md")),
                        root / "benchmarks" / "notes.md"] if p.is_file()]


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
