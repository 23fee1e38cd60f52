"""Every results number of README.md and docs/*.md is rendered from the committed JSON: each
result block between `<!-- xlvin:begin NAME -->` and `<!-- xlvin:end NAME -->` is exactly what
its report code renders (`xlvin.experiments.pages`), so a number changed by hand, or a JSON
changed without `xlvin reproduce` re-writing the pages, fails here."""

import re
from pathlib import Path

import pytest

from xlvin.experiments import pages

ROOT = Path(__file__).resolve().parents[1]
RENDERED = pages.rendered(ROOT / "results")


def stale(text: str) -> list[str]:
    """The blocks of a page that differ from their rendering (or that nothing renders)."""
    return [name for name, body in pages.blocks_of(text).items() if RENDERED.get(name) != body]


@pytest.mark.parametrize("page", pages.pages(ROOT), ids=lambda p: p.name)
def test_every_result_block_is_its_rendering(page: Path) -> None:
    assert stale(page.read_text(encoding="utf-8")) == [], \
        "re-write the pages: python -c 'from pathlib import Path; from xlvin.experiments " \
        "import pages; pages.rewrite(Path.cwd())'"


def test_the_pages_hold_blocks_and_every_block_is_placed() -> None:
    placed = {n for p in pages.pages(ROOT) for n in pages.blocks_of(p.read_text(encoding="utf-8"))}
    in_readme_table = {n for row in pages.README_ROWS
                       for n in ((row[2],) if isinstance(row[2], str) else row[2])}
    assert "readme-results" in placed
    assert sorted(set(RENDERED) - placed - in_readme_table) == []


def test_a_number_changed_by_hand_fails() -> None:
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    body = pages.blocks_of(text)["readme-results"]
    changed = body.replace("19.1", "19.2", 1)
    assert changed != body
    assert stale(text.replace(body, changed)) == ["readme-results"]


def test_rewrite_puts_the_rendering_back(tmp_path: Path) -> None:
    (tmp_path / "docs").mkdir()
    (tmp_path / "results").symlink_to(ROOT / "results")
    page = tmp_path / "docs" / "page.md"
    page.write_text("before\n<!-- xlvin:begin table1-ours-level -->\n99.9 by hand\n"
                    "<!-- xlvin:end table1-ours-level -->\nafter\n")
    assert pages.rewrite(tmp_path) == ["table1-ours-level"]
    assert stale(page.read_text()) == []
    assert page.read_text().startswith("before\n") and page.read_text().endswith("\nafter\n")


def test_no_blocks_no_rewrite(tmp_path: Path) -> None:
    (tmp_path / "README.md").write_text("# mine\n")
    assert pages.rewrite(tmp_path) == []


#: Code (fenced or inline), links' targets and HTML comments: no prose number is in them.
NOT_PROSE = re.compile(r"^ {0,3}(```|~~~).*?^ {0,3}\1[^\n]*$|(`+)(?:(?!\2).)+?\2|\]\([^)]*\)"
                       r"|<!--.*?-->", re.MULTILINE | re.DOTALL)
#: A number as a reader sees one: 19.1, 1,000,000, -500, 95 (not the 5 of "v5" or "x86").
NUMBER = re.compile(r"(?<![\w.])-?\d[\d,]*(?:\.\d+)?(?![\w])")


def number_counts(text: str) -> tuple[int, int]:
    """(numbers inside result blocks, numbers outside them) of a page's prose: how much of what
    the page says is rendered from the committed JSON, and how much is still typed."""
    spans = [m.span("body") for m in pages.BLOCK.finditer(text)]

    def count(part: str) -> int:
        return len(NUMBER.findall(NOT_PROSE.sub(" ", part)))
    inside = sum(count(text[a:b]) for a, b in spans)
    return inside, count(pages.BLOCK.sub(" ", text))


def test_numbers_are_counted_inside_and_outside_blocks() -> None:
    text = ("Seeds 0-9 took 1,103 s (`--seeds 10`, [v5](a-1.md)) on x86.\n"
            "<!-- xlvin:begin b -->\nIQM 19.1 [12.1, -33.2]\n<!-- xlvin:end b -->\n")
    assert number_counts(text) == (3, 3)


if __name__ == "__main__":  # python tests/test_pages.py: the counts, page by page
    totals = [0, 0]
    for page in pages.pages(ROOT):
        inside, outside = number_counts(page.read_text(encoding="utf-8"))
        totals[0], totals[1] = totals[0] + inside, totals[1] + outside
        print(f"{page.relative_to(ROOT)}: {inside} rendered, {outside} in prose")
    print(f"all pages: {totals[0]} rendered, {totals[1]} in prose")


def test_reproduce_rewrites_the_pages_beside_the_results_it_wrote(tmp_path: Path,
                                                                  monkeypatch) -> None:
    """The pages `xlvin reproduce` re-writes are those beside the results/ folder holding
    --results, wherever the command runs from; results written elsewhere touch no page."""
    from xlvin.commands.reproduce import pages_root

    assert pages_root(tmp_path / "results") == tmp_path.resolve()
    assert pages_root(tmp_path / "results" / "ablation") == tmp_path.resolve()
    assert pages_root(tmp_path / "out") is None
    monkeypatch.chdir(tmp_path)
    assert pages_root(Path("results/why-executor")) == tmp_path.resolve()
