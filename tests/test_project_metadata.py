"""The project's files agree: pyproject.toml's version and license are CITATION.cff's, the
LICENSE file is the license pyproject names, and the changelog has a section for the work
not yet released."""
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def field(text, name):
    """The first top-level ``name = "value"`` (TOML) or ``name: value`` (YAML) of ``text``."""
    found = re.search(rf'^{re.escape(name)}\s*[=:]\s*"?([^"\n]+)"?\s*$', text, re.M)
    assert found, name
    return found[1]


def test_version_and_license_agree_across_the_project_files():
    pyproject = (ROOT / "pyproject.toml").read_text()
    citation = (ROOT / "CITATION.cff").read_text()
    assert field(citation, "version") == field(pyproject, "version")
    assert field(citation, "license") == field(pyproject, "license") == "BSD-3-Clause"
    assert re.search(r'^license-files = \["LICENSE"\]$', pyproject, re.M)
    assert (ROOT / "LICENSE").read_text().startswith("BSD 3-Clause License\n")
    assert "P-packSVM: Parallel Primal grAdient desCent Kernel SVM" in citation


def test_the_changelog_has_an_unreleased_section():
    assert re.search(r"^## Unreleased$", (ROOT / "CHANGELOG.md").read_text(), re.M)
