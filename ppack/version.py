"""The package's version: the installed distribution's, else the sources' pyproject.toml's."""


def version():
    """The version string, looked up on each call (``ppack.__version__`` keeps the first), so
    that `import ppack` and the command line's start need no metadata look-up."""
    from importlib.metadata import PackageNotFoundError, version as installed

    try:
        return installed("ppack")
    except PackageNotFoundError:
        import re
        from pathlib import Path

        pyproject = Path(__file__).resolve().parents[1] / "pyproject.toml"
        found = re.search(r'^version = "([^"]+)"', pyproject.read_text() if pyproject.exists() else "", re.M)
        return found[1] if found else "unknown"
