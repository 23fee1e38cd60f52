"""Every results number of README.md and docs/*.md is rendered from the committed JSON: each
result block between `<!-- xlvin:begin NAME -->` and `<!-- xlvin:end NAME -->` is exactly what
its report code renders (`xlvin.experiments.pages`), so a number changed by hand, or a JSON
changed without `xlvin reproduce` re-writing the pages, fails here."""

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
