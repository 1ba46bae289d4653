"""The suite needs only the repository: no file under tests/ names a data folder beside it, and
every real data file the tests read is in tests/data with its entry in tests/data/README.md."""
import re
from pathlib import Path

from helpers import TEST_DATA

TESTS = Path(__file__).resolve().parent
# A path to the data folder beside a checkout: up one level and into it, a path that starts with
# it, or its name quoted as a path part. The name is spelt \x73hared here so that this file,
# which the check scans too, does not name it.
FOLDER = "\x73hared"
NAMES_SHARED_FOLDER = re.compile(rf"""\.\.[/\\]{FOLDER}\b|\b{FOLDER}[/\\]|["']{FOLDER}["']""")


def text_files(folder):
    """(path, text) of every file under ``folder`` that reads as UTF-8 text."""
    for path in sorted(folder.rglob("*")):
        if path.is_file() and "__pycache__" not in path.parts:
            try:
                yield path, path.read_text(encoding="utf-8")
            except UnicodeDecodeError:
                continue  # compressed data


def references_to_shared(folder):
    return [f"{path.relative_to(folder)}:{text[:m.start()].count(chr(10)) + 1}: {m.group(0)}"
            for path, text in text_files(folder) for m in NAMES_SHARED_FOLDER.finditer(text)]


def test_no_test_file_names_the_shared_folder():
    found = references_to_shared(TESTS)
    assert not found, f"tests must read only what the repository holds (tests/data), found: {found}"


def test_the_check_finds_each_way_of_naming_the_folder(tmp_path):
    (tmp_path / "clean.py").write_text(f'"""a {FOLDER} stream, {FOLDER} memory, {FOLDER}_fixtures."""\n')
    assert references_to_shared(tmp_path) == []
    planted = [f'DATA = Path(__file__).parents[2] / "{FOLDER}" / "data"', f"# see ../{FOLDER}/data/a9a",
               f"path = '{FOLDER}/data/mnist'"]
    for k, line in enumerate(planted):
        (tmp_path / f"planted{k}.py").write_text(f"import os\n{line}\n")
    assert len(references_to_shared(tmp_path)) == 3


def test_every_data_file_is_described():
    described = (TEST_DATA / "README.md").read_text()
    files = [p for p in TEST_DATA.rglob("*") if p.is_file() and p.name != "README.md"]
    assert len(files) >= 11
    for path in files:
        assert f"`{path.relative_to(TEST_DATA).as_posix()}`" in described, path
