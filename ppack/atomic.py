"""Output files appear whole or not at all: write beside the target, then rename over it.

(A file written by every rank together: ``collective_write``.)"""
import os
from pathlib import Path

import h5py


def atomic_write(path, write, mode="w"):
    """Call ``write(file)`` on a temporary file beside ``path``, then rename it into place.

    ``mode`` is "w" (text), "wb" (bytes) or "h5" (an h5py File). On any error the
    temporary file is removed, so no half-written output is left.
    """
    path = Path(path)
    tmp = temporary_path(path)
    try:
        if mode == "h5":
            with h5py.File(tmp, "w") as f:
                write(f)
        else:
            with open(tmp, mode) as f:
                write(f)
        os.replace(tmp, path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise


def atomic_h5_write(path, write):
    """``atomic_write`` for an HDF5 file: ``write`` receives the open h5py File."""
    atomic_write(path, write, mode="h5")


def temporary_path(path):
    """A hidden file name beside ``path`` for writing it before the rename."""
    return path.with_name(f".{path.name}.{os.getpid()}.tmp")
