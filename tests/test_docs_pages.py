"""What a reader of the guide's sources meets: every link has its text (a plain Markdown view
shows `[](page.md)` as nothing), and no page names a commit (the pages are manuals, the
history is git's)."""
import re
from pathlib import Path

from test_readme_not_in_docs import site_sources

ROOT = Path(__file__).resolve().parents[1]
EMPTY_LINK = re.compile(r"\[\]\(([^)]*)\)")
# a word of 7 to 40 hex digits with both a digit and a letter in it: how a commit is named
COMMIT = re.compile(r"\b(?=[0-9a-f]*[a-f])(?=[0-9a-f]*[0-9])[0-9a-f]{7,40}\b")


def pages():
    return [p for p in site_sources() if p.suffix == ".md"] + [ROOT / "README.md", ROOT / "bench" / "README.md"]


def test_the_checks_find_what_they_look_for():
    assert EMPTY_LINK.findall("see [](clusters.md) and [the guide](index.md)") == ["clusters.md"]
    assert COMMIT.findall("measured at 3f9c2a1, not at 1234567 or abcdefa") == ["3f9c2a1"]


def test_every_link_has_its_text():
    found = [f"{p.relative_to(ROOT)}: [](" + target + ")" for p in pages() for target in EMPTY_LINK.findall(p.read_text())]
    assert found == [], f"links without text (write [Title](page.md)): {found}"


def test_no_page_names_a_commit():
    found = [f"{p.relative_to(ROOT)}: {word}" for p in pages() for word in COMMIT.findall(p.read_text())]
    assert found == [], f"pages naming commits (git history keeps them): {found}"
