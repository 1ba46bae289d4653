"""numba's ``njit`` for ppack, with an on-disk cache that any change to ppack's sources renews.

numba stamps a cached function with the source of its own file only. A cached function that
calls (or inlines, or reads a constant from) another ppack module would therefore keep
running that module's old code after it changed: an editable install that pulls a new
version could train with stale kernels and no error. Importing this module puts
``PackageStampedLocator`` first among numba's cache locators: for a function defined in
ppack it finds the cache where numba would (``NUMBA_CACHE_DIR``, else ``__pycache__``
beside the module when writable, else the user's cache folder) and adds to numba's stamp a
digest of every ppack source file, so that one changed file renews every cache entry and an
unchanged package loads them all. Functions outside ppack are left to numba's own locators.

Every ppack module that compiles with numba imports ``njit`` from here, so that the locator
is in place before its first ``cache=True`` function is decorated.
"""
import hashlib
from functools import lru_cache
from pathlib import Path

from numba import njit
from numba.core import caching

__all__ = ["njit", "PackageStampedLocator", "sources_digest", "PACKAGE_ROOT"]

PACKAGE_ROOT = Path(__file__).resolve().parent
# the class whose list of locators numba tries in order (``_CacheImpl`` in older numba)
_CACHE_IMPL = getattr(caching, "CacheImpl", None) or caching._CacheImpl


@lru_cache(maxsize=None)
def sources_digest(root=PACKAGE_ROOT):
    """A SHA-256 hex digest of every ``*.py`` file under ``root`` (their paths relative to it
    and their bytes, in path order): what ppack's compiled code can depend on. Once per
    process."""
    digest = hashlib.sha256()
    for path in sorted(root.rglob("*.py")):
        digest.update(path.relative_to(root).as_posix().encode() + b"\0")
        digest.update(path.read_bytes())
        digest.update(b"\0")
    return digest.hexdigest()


class PackageStampedLocator(caching._CacheLocator):
    """A ppack function's cache where numba's own locator puts it (``inner``), its stamp
    numba's (of the function's file) plus ``sources_digest`` of the whole package."""

    def __init__(self, inner):
        self._inner = inner

    def ensure_cache_path(self):
        self._inner.ensure_cache_path()

    def get_cache_path(self):
        return self._inner.get_cache_path()

    def get_source_stamp(self):
        return self._inner.get_source_stamp(), sources_digest()

    def get_disambiguator(self):
        return self._inner.get_disambiguator()

    @classmethod
    def from_function(cls, py_func, py_file):
        """The locator of a function in ``py_file`` when that file is part of ppack, else None
        (numba tries its next locator)."""
        if not Path(py_file).resolve().is_relative_to(PACKAGE_ROOT):
            return None
        for other in _CACHE_IMPL._locator_classes:
            if other is not cls:
                inner = other.from_function(py_func, py_file)
                if inner is not None:
                    return cls(inner)
        return None


def _install():
    """Put ``PackageStampedLocator`` first among numba's cache locators (once)."""
    locators = _CACHE_IMPL._locator_classes
    if PackageStampedLocator not in locators:
        locators.insert(0, PackageStampedLocator)


_install()
