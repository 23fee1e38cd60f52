"""The README and docs/ stay honest: every relative link and anchor resolves, nothing points at
files a user of the repository does not have, the command-line reference is the parser's own
help, and the README stays a front page."""

import importlib.util
import re
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
README = ROOT / "README.md"
DOCS = ROOT / "docs"
README_MAX_LINES = 150

FENCE = re.compile(r"^ {0,3}(```|~~~).*?^ {0,3}\1[^\n]*$", re.MULTILINE | re.DOTALL)
INLINE_CODE = re.compile(r"(`+)(?:(?!\1).)+?\1", re.DOTALL)
#: [text](target) and ![alt](target); the target up to whitespace or ')', an optional title after.
LINK = re.compile(r"!?\[(?:[^\[\]]|\[[^\]]*\])*\]\(\s*<?([^\s)>]+)>?(?:\s+\"[^\"]*\")?\s*\)")
HEADING = re.compile(r"^ {0,3}(#{1,6})\s+(.*?)\s*#*\s*$", re.MULTILINE)
#: Things a user of the repository does not have: our working folders, notes and sources that are
#: not in it, absolute paths of the machines it was written on.
FORBIDDEN = ("../shared", "REFERENCE.md", "DESIGN.md", "xlvin.tex", "/work/", "/root/")
FORBIDDEN_IN_SRC = ("../shared", "REFERENCE.md", "DESIGN.md", "xlvin.tex")
ISSUE_NUMBER = re.compile(r"\bissues?\s*[-#]?\s*#?\s*\d+", re.IGNORECASE)


def pages() -> list[Path]:
    return [README, *sorted(DOCS.glob("*.md"))]


def without_fences(text: str) -> str:
    """The text with fenced code blocks blanked out (a `# comment` there is no heading)."""
    return FENCE.sub(lambda m: "\n" * m.group(0).count("\n"), text)


def without_code(text: str) -> str:
    """The text without code blocks and inline code (a link there is no link)."""
    return INLINE_CODE.sub("", without_fences(text))


def slug(heading: str) -> str:
    """GitHub's anchor for a heading: links reduced to their text, lowercase, every character
    other than a letter, digit, space, '-' or '_' dropped, each space a '-'."""
    text = re.sub(r"!?\[([^\]]*)\]\([^)]*\)", r"\1", heading)
    text = re.sub(r"[^\w\- ]", "", text.strip().lower())
    return text.replace(" ", "-")


def anchors(path: Path) -> set[str]:
    """The anchors of a Markdown file's headings; a repeated slug gets -1, -2, ... as on GitHub."""
    seen: dict[str, int] = {}
    out = set()
    for match in HEADING.finditer(without_fences(path.read_text())):
        base = slug(match.group(2))
        n = seen.get(base, 0)
        seen[base] = n + 1
        out.add(base if n == 0 else f"{base}-{n}")
    return out


def links(path: Path) -> list[str]:
    return [m.group(1) for m in LINK.finditer(without_code(path.read_text()))]


def broken_links(path: Path) -> list[str]:
    """The relative links of a Markdown file whose file or anchor does not exist."""
    bad = []
    for target in links(path):
        if re.match(r"[a-z][a-z0-9+.-]*:", target, re.IGNORECASE):  # http:, https:, mailto:
            continue
        file_part, _, anchor = target.partition("#")
        linked = (path.parent / file_part).resolve() if file_part else path
        if not linked.exists():
            bad.append(f"{target}: no such file")
        elif anchor and linked.suffix == ".md" and anchor not in anchors(linked):
            bad.append(f"{target}: no heading with anchor #{anchor} in {linked.name}")
        elif anchor and linked.suffix != ".md":
            bad.append(f"{target}: an anchor into a file that is not Markdown")
    return bad


def relative(path: Path) -> str:
    return str(path.relative_to(ROOT))


def test_docs_folder_has_the_pages() -> None:
    names = {p.name for p in DOCS.glob("*.md")}
    assert {"table1.md", "mazes.md", "atari.md", "architecture.md", "cli.md", "ray.md",
            "benchmarks.md", "determinism.md"} <= names


def test_slugs_are_githubs() -> None:
    assert slug("Table 1: low-data classic control") == "table-1-low-data-classic-control"
    assert slug("Protocol `paper`, 10 seeds (`results/table1-paper.md`)") == \
        "protocol-paper-10-seeds-resultstable1-papermd"
    assert slug("`xlvin reproduce maze`") == "xlvin-reproduce-maze"
    assert slug("A + B_c [link](x.md)") == "a--b_c-link"


def test_repeated_headings_get_numbered_anchors(tmp_path: Path) -> None:
    page = tmp_path / "page.md"
    page.write_text("# Notes\n\n## Notes\n\n```\n# not a heading\n```\n\n## Notes\n")
    assert anchors(page) == {"notes", "notes-1", "notes-2"}


@pytest.mark.parametrize("page", pages(), ids=relative)
def test_relative_links_resolve(page: Path) -> None:
    assert broken_links(page) == []


def test_a_broken_link_or_anchor_is_found(tmp_path: Path) -> None:
    (tmp_path / "other.md").write_text("# Other page\n")
    page = tmp_path / "page.md"
    page.write_text("# Top\n\n[ok](other.md#other-page) [ok](#top) `[code](missing.md)`\n"
                    "[file](missing.md) [anchor](other.md#nowhere) [self](#nowhere)\n")
    assert broken_links(page) == [
        "missing.md: no such file",
        "other.md#nowhere: no heading with anchor #nowhere in other.md",
        "#nowhere: no heading with anchor #nowhere in page.md",
    ]


@pytest.mark.parametrize("page", pages(), ids=relative)
def test_no_files_outside_the_repository(page: Path) -> None:
    text = page.read_text()
    assert [s for s in FORBIDDEN if s in text] == []


def test_no_files_outside_the_repository_in_the_sources() -> None:
    found = [f"{relative(p)}: {s}" for p in sorted((ROOT / "src").rglob("*.py"))
             for s in FORBIDDEN_IN_SRC if s in p.read_text()]
    assert found == []


@pytest.mark.parametrize("page", pages(), ids=relative)
def test_no_internal_issue_numbers(page: Path) -> None:
    assert ISSUE_NUMBER.findall(page.read_text()) == []


def test_issue_numbers_are_recognised() -> None:
    for text in ("issue 16", "Issue #16", "issues 12", "the issue-15 run", "ISSUE#3"):
        assert ISSUE_NUMBER.search(text), text
    assert not ISSUE_NUMBER.search("issues with 16 seeds")


def test_readme_is_a_front_page() -> None:
    lines = README.read_text().splitlines()
    assert len(lines) <= README_MAX_LINES, f"README.md has {len(lines)} lines"
    assert lines[2:6] == [
        "```bash",
        "bash scripts/main.sh    # set up .venv (Python 3.11) and run the main job: XLVIN vs PPO on CartPole-v0",
        "bash scripts/test.sh    # set up .venv and run the test suite (what CI runs, via .ci/run)",
        "```",
    ]


def test_every_docs_page_is_linked_from_the_readme() -> None:
    linked = {(ROOT / t.partition("#")[0]).resolve() for t in links(README)}
    assert [relative(p) for p in sorted(DOCS.glob("*.md")) if p.resolve() not in linked] == []


def cli_reference():
    spec = importlib.util.spec_from_file_location("cli_reference", ROOT / "scripts" / "cli_reference.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_cli_reference_is_the_parsers_help(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("COLUMNS", "37")  # the terminal's width must not matter
    expected = cli_reference().render()
    committed = (DOCS / "cli.md").read_text()
    if committed != expected and sys.version_info[:2] != (3, 11):
        pytest.skip("docs/cli.md is generated under Python 3.11; argparse lays help out "
                    "differently in other versions")
    assert committed == expected, "docs/cli.md is stale: run python scripts/cli_reference.py"


def test_cli_reference_covers_every_command() -> None:
    text = (DOCS / "cli.md").read_text()
    for command in ("train", "evaluate", "quickstart", "reproduce classic", "reproduce atari",
                    "sweep table1", "maze embeddings", "pretrain-executor", "eval-executor"):
        assert f"## `xlvin {command}`" in text, command


def test_the_speed_against_sb3_is_the_tables_everywhere() -> None:
    """Every "N x SB3" figure of the docs is the one the benchmarks table gives."""
    table = re.search(r"our PPO / SB3 PPO, CartPole-v1 \| \*\*([\d.]+)x\*\*",
                      (DOCS / "benchmarks.md").read_text(encoding="utf-8"))
    assert table is not None
    for page in pages():
        for figure in re.findall(r"([\d.]+)x SB3\b", page.read_text(encoding="utf-8")):
            assert figure == table[1], f"{page.name}: {figure}x SB3, the table: {table[1]}x"


#: Words a user cannot act on: our internal machinery's ("sessions", machines "lent").
INTERNAL = re.compile(r"\b(lent|sessions?)\b", re.IGNORECASE)
#: Words of a comparison, which only `xlvin.wording.compare` writes (inside result blocks).
VERDICT = re.compile(r"\b(ahead|beats?|beating|helps|hurts?|better|worse|outperform(?:s|ed)?)\b",
                     re.IGNORECASE)
BLOCK = re.compile(r"<!-- xlvin:begin ([\w.-]+) -->.*?<!-- xlvin:end \1 -->", re.DOTALL)
QUOTED = re.compile(r"\"[^\"]*\"")


def prose(text: str) -> str:
    """The text without code, result blocks or quotations (of the paper)."""
    return QUOTED.sub("", BLOCK.sub("", without_code(text)))


@pytest.mark.parametrize("page", [*pages(), ROOT / "CHANGELOG.md"], ids=relative)
def test_no_internal_words_or_issue_numbers(page: Path) -> None:
    text = without_code(page.read_text(encoding="utf-8"))
    assert INTERNAL.findall(text) == [] and ISSUE_NUMBER.findall(text) == []


@pytest.mark.parametrize("page", pages(), ids=relative)
def test_comparisons_are_worded_only_by_the_wording_rule(page: Path) -> None:
    assert VERDICT.findall(prose(page.read_text(encoding="utf-8"))) == []


def test_a_forbidden_word_is_found() -> None:
    assert INTERNAL.search("trained over two sessions on a lent machine")
    assert VERDICT.findall(prose('XLVIN is ahead. "ahead from the start" `helps` '
                                 "<!-- xlvin:begin x -->X is ahead<!-- xlvin:end x -->")) == ["ahead"]
    assert VERDICT.findall("PPO does better, XLVIN worse; it outperforms") == \
        ["better", "worse", "outperforms"]
