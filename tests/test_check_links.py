"""docs/check_links.py, the CI's internal link and anchor checker of the built site."""
import importlib.util
from pathlib import Path

SCRIPT = Path(__file__).resolve().parents[1] / "docs" / "check_links.py"
spec = importlib.util.spec_from_file_location("check_links", SCRIPT)
check_links = importlib.util.module_from_spec(spec)
spec.loader.exec_module(check_links)


def test_finds_missing_pages_and_anchors_and_ignores_external_links(tmp_path):
    (tmp_path / "api").mkdir()
    (tmp_path / "index.html").write_text(
        '<a href="api/fit.html#ppack.PackSVC.fit">ok</a> <a href="#top">ok</a> <p id="top"></p>'
        '<a href="api/fit.html#nowhere">bad anchor</a> <a href="missing.html">bad page</a>'
        '<a href="https://example.org/x.html#y">external</a> <a href="api/">folder</a>'
        '<img src="api/figure.png">')
    (tmp_path / "api" / "fit.html").write_text('<dt id="ppack.PackSVC.fit"></dt><a href="../index.html#top">up</a>')
    (tmp_path / "api" / "index.html").write_text("<p>api</p>")
    problems, pages = check_links.broken_links(tmp_path)
    assert sorted((str(page), link) for page, link, _ in problems) == [
        ("index.html", "api/figure.png"), ("index.html", "api/fit.html#nowhere"), ("index.html", "missing.html")]
    assert pages == 3
    assert check_links.main([str(tmp_path)]) == 1
    (tmp_path / "index.html").write_text('<a href="api/fit.html#ppack.PackSVC.fit">ok</a> <p id="top"></p>')
    assert check_links.main([str(tmp_path)]) == 0
