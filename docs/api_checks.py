"""Checks on the API reference beyond numpydoc's: each public name documented in api/ (a
class or a function, not a method) shows an Examples section, which the test suite runs as a
doctest (tests/test_docstring_examples.py)."""
import inspect

from sphinx.util import logging

logger = logging.getLogger(__name__)


def check_examples(app, what, name, obj, options, lines):
    """autodoc-process-docstring: warn (an error under -W) when a public class or function has no
    Examples section."""
    if what not in ("class", "function") or not name.startswith("ppack."):
        return
    if not any(line.strip() in ("Examples", ".. rubric:: Examples") for line in lines):
        source = inspect.getsourcefile(obj) if inspect.isfunction(obj) or inspect.isclass(obj) else None
        logger.warning(f"{name}: the docstring has no Examples section ({source})", type="api_checks")


def setup(app):
    # numpydoc runs first (priority 500 by default): its output keeps the section heading lines
    app.connect("autodoc-process-docstring", check_examples, priority=900)
    return {"parallel_read_safe": True, "parallel_write_safe": True}
