"""Check the internal links of a built HTML site: every local href or src names a file that
exists, and every #anchor exists in its target page. External links are not followed.

    python docs/check_links.py docs/_build/html

Prints one line per broken link (page: link: what is wrong) and exits 1 if there is any.
"""
import sys
from html.parser import HTMLParser
from pathlib import Path
from urllib.parse import unquote, urlsplit

SKIPPED = ("_static", "_sources", "_images")  # the theme's template fragments, sources and files, not pages
LINK_ATTRIBUTES = {("a", "href"), ("link", "href"), ("img", "src"), ("script", "src"), ("iframe", "src")}


class Page(HTMLParser):
    """One HTML page's anchors (id and name attributes) and local links."""

    def __init__(self):
        super().__init__(convert_charrefs=True)
        self.anchors, self.links = set(), []

    def handle_starttag(self, tag, attrs):
        for name, value in attrs:
            if value is None:
                continue
            if name == "id" or (tag == "a" and name == "name"):
                self.anchors.add(value)
            elif (tag, name) in LINK_ATTRIBUTES:
                self.links.append(value)


def read(path, cache):
    if path not in cache:
        page = Page()
        page.feed(path.read_text(encoding="utf-8", errors="replace"))
        cache[path] = page
    return cache[path]


def broken_links(root):
    """(page, link, problem) for every broken internal link of the site under ``root``."""
    root = Path(root).resolve()
    cache, problems = {}, []
    for page_path in sorted(root.rglob("*.html")):
        if page_path.relative_to(root).parts[0] in SKIPPED:
            continue
        for link in read(page_path, cache).links:
            parts = urlsplit(link)
            if parts.scheme or parts.netloc:  # http:, mailto:, data:, //host/...: not ours to check
                continue
            target = page_path if not parts.path else (page_path.parent / unquote(parts.path)).resolve()
            if parts.path.endswith("/") or target.is_dir():
                target = target / "index.html"
            shown = page_path.relative_to(root)
            if not target.is_file():
                problems.append((shown, link, "no such file"))
            elif parts.fragment and target.suffix == ".html":
                if unquote(parts.fragment) not in read(target, cache).anchors:
                    problems.append((shown, link, f"no anchor #{parts.fragment} in {target.relative_to(root)}"))
    return problems, len(cache)


def main(argv=None):
    argv = sys.argv[1:] if argv is None else argv
    if len(argv) != 1 or not Path(argv[0]).is_dir():
        print("usage: python docs/check_links.py BUILT_HTML_FOLDER (an existing folder)", file=sys.stderr)
        return 2
    problems, pages = broken_links(argv[0])
    for page, link, problem in problems:
        print(f"{page}: {link}: {problem}")
    print(f"check_links: {pages} pages read, {len(problems)} broken internal links", file=sys.stderr)
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
