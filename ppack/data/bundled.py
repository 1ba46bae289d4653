"""The data set shipped with ppack: a9a (UCI Adult), train and test splits.

The files are in the ppack HDF5 layout (csr, float32, gzip); see
bundled/README.md for their source and how they were made.
"""

from __future__ import annotations

import os
from importlib import resources
from pathlib import Path

from ..errors import InputError, PPackError

DEFAULT_TRAIN = "a9a"
DEFAULT_TEST = "a9a.t"


def _folder():
    return resources.files("ppack.data") / "bundled"


def bundled_names():
    """Names of the bundled data sets, sorted (e.g. ["a9a", "a9a.t"])."""
    return sorted(item.name[:-3] for item in _folder().iterdir() if item.name.endswith(".h5"))


def bundled_path(name: str) -> Path:
    """Path of the installed HDF5 file of a bundled data set.

    Parameters
    ----------
    name : str
        The data set: "a9a" (UCI Adult, 32,561 rows) or "a9a.t" (its 16,281 test rows); a
        trailing ".h5" is allowed.

    Returns
    -------
    pathlib.Path
        The file, in the ppack HDF5 layout.

    Raises
    ------
    InputError
        When there is no such bundled set (the message lists those there are).

    Examples
    --------
    >>> from ppack.data.bundled import bundled_path
    >>> bundled_path("a9a").name
    'a9a.h5'
    """
    name = name[:-3] if name.endswith(".h5") else name
    item = _folder() / f"{name}.h5"
    if not item.is_file():
        raise InputError(f"no bundled data set '{name}' (available: "
                         f"{', '.join(bundled_names()) or 'none'})")
    try:
        return Path(os.fspath(item))
    except TypeError:
        raise PPackError("ppack is installed in a form (e.g. a zip) whose bundled "
                         "data files have no path on disk; reinstall it unpacked") from None
