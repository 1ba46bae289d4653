"""The README and the documentation site do not repeat each other: no paragraph of the README
of three lines or more stands in docs/ too (nor in the files the site's pages include, nor in
the gallery's examples/). The README keeps what ppack is, how to install it, the two commands,
the docs command and links; the site keeps the rest."""
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
DOCS = ROOT / "docs"
BUILD_OUTPUTS = {"_build", "auto_examples", "generated"}  # written by the build, not pages
PAGE_SUFFIXES = {".md", ".rst", ".txt", ".py"}
INCLUDE = re.compile(r"^```\{(?:include|literalinclude)\}\s+(\S+)", re.M)


def long_paragraphs(text, min_lines=3):
    """The text's paragraphs (blocks between blank lines) of at least min_lines lines, each with
    its whitespace collapsed, so that a paragraph wrapped at other widths still matches."""
    blocks = re.split(r"\n[ \t]*\n", text)
    return [" ".join(block.split()) for block in blocks if len(block.strip().splitlines()) >= min_lines]


def site_sources():
    """The files whose text the site shows: docs/ (less the build's outputs), the files its pages
    include, and the gallery's examples/."""
    pages = [p for p in DOCS.rglob("*") if p.is_file() and p.suffix in PAGE_SUFFIXES
             and not BUILD_OUTPUTS & set(p.relative_to(DOCS).parts)]
    included = {(page.parent / target).resolve() for page in pages if page.suffix == ".md"
                for target in INCLUDE.findall(page.read_text())}
    examples = [p for p in (ROOT / "examples").rglob("*") if p.is_file() and p.suffix in PAGE_SUFFIXES]
    return pages + sorted(included) + examples


def repeated(readme_text, site_texts):
    """The README's long paragraphs that stand, whitespace aside, in one of site_texts."""
    site = [" ".join(text.split()) for text in site_texts]
    return [par for par in long_paragraphs(readme_text) if any(par in text for text in site)]


def test_the_check_finds_a_paragraph_rewrapped_in_a_page():
    readme = "# title\n\nline one of it\nline two of it\nline three of it\n\nshort\nline\n"
    page = "intro\n\nline one of it line two\nof it line three of it\n"
    assert long_paragraphs(readme) == ["line one of it line two of it line three of it"]
    assert repeated(readme, [page]) == ["line one of it line two of it line three of it"]
    assert repeated(readme, ["line one of it line two of it"]) == []  # a part is not the paragraph


def test_no_readme_paragraph_of_three_lines_or_more_stands_in_the_docs():
    readme = (ROOT / "README.md").read_text()
    assert long_paragraphs(readme), "the README has no paragraph of three lines: the check checks nothing"
    sources = site_sources()
    assert any(p.parent.name == "guide" for p in sources), "no user guide pages found under docs/guide"
    found = repeated(readme, [p.read_text() for p in sources])
    assert found == [], f"README paragraphs that docs/ repeats (keep each in one place): {found}"
