"""numba's on-disk cache (``ppack.jit``): a change to any ppack source renews the cached code of
every function that depends on it, and nothing recompiles when nothing changed."""
import inspect
import json
import shutil
import subprocess
import sys

import numba
import pytest
from numba.core import caching, config

import ppack.jit as jit
from ppack.jit import PACKAGE_ROOT, PackageStampedLocator, sources_digest

from helpers import clean_mpi_env

# data.sampler._feistel (cached, in sampler.py) inlines random_stream.fmix64 (another file):
# prints its permutation of [0, 64) and the dispatcher's cache hits and misses
CALLER = """import json
import numpy as np
from ppack.data.sampler import _feistel
keys = np.arange(4, dtype=np.uint64)
value = [int(_feistel(np.uint64(x), keys, 3, np.uint64(7))) for x in range(64)]
print(json.dumps({"value": value, "hits": sum(_feistel.stats.cache_hits.values()),
                  "misses": sum(_feistel.stats.cache_misses.values())}))
"""
CALLEE_LINE = "    return z ^ (z >> _S31)\n"  # fmix64's last line in random_stream.py


def run_caller(source_root, cache):
    env = clean_mpi_env()
    env["PYTHONPATH"] = str(source_root)
    env["NUMBA_CACHE_DIR"] = str(cache)
    out = subprocess.run([sys.executable, "-c", CALLER], env=env, capture_output=True, text=True, timeout=240,
                         cwd=source_root)
    assert out.returncode == 0, out.stderr
    return json.loads(out.stdout.splitlines()[-1])


def test_a_changed_callee_in_another_file_recompiles_its_cached_caller(tmp_path):
    source_root = tmp_path / "src"
    shutil.copytree(PACKAGE_ROOT, source_root / "ppack", ignore=shutil.ignore_patterns("__pycache__", "*.h5"))
    cache = tmp_path / "cache"
    first = run_caller(source_root, cache)
    assert (first["hits"], first["misses"]) == (0, 1)  # compiled, into the empty cache
    again = run_caller(source_root, cache)
    assert again == {**first, "hits": 1, "misses": 0}  # nothing changed: loaded, not compiled

    callee = source_root / "ppack" / "random_stream.py"
    text = callee.read_text()
    assert text.count(CALLEE_LINE) == 1, "fmix64 changed: update CALLEE_LINE"
    callee.write_text(text.replace(CALLEE_LINE, "    return z ^ (z >> _S30)\n"))
    edited = run_caller(source_root, cache)
    assert (edited["hits"], edited["misses"]) == (0, 1)  # the caller's file is unchanged, yet it recompiled
    assert edited["value"] != first["value"]  # and runs the callee's new code


def ppack_function():
    from ppack.random_stream import fmix64_array
    return fmix64_array.py_func


def test_the_cache_goes_where_numba_would_put_it_with_the_package_stamp(tmp_path, monkeypatch):
    func = ppack_function()
    path = inspect.getfile(func)
    monkeypatch.setattr(config, "CACHE_DIR", str(tmp_path / "numba-cache"))  # NUMBA_CACHE_DIR
    locator = PackageStampedLocator.from_function(func, path)
    assert isinstance(locator._inner, caching.UserProvidedCacheLocator)
    assert locator.get_cache_path().startswith(str(tmp_path / "numba-cache"))
    assert locator.get_source_stamp() == (locator._inner.get_source_stamp(), sources_digest())
    assert locator.get_disambiguator() == str(func.__code__.co_firstlineno)

    # an install whose folder cannot be written (no NUMBA_CACHE_DIR): the user's cache folder
    monkeypatch.setattr(config, "CACHE_DIR", "")

    def read_only(self):
        raise PermissionError(f"read-only: {self.get_cache_path()}")

    monkeypatch.setattr(caching.InTreeCacheLocator, "ensure_cache_path", read_only)
    locator = PackageStampedLocator.from_function(func, path)
    assert isinstance(locator._inner, caching.UserWideCacheLocator)
    assert locator.get_source_stamp()[1] == sources_digest()


def test_functions_outside_ppack_keep_numba_s_own_locators():
    assert PackageStampedLocator.from_function(test_functions_outside_ppack_keep_numba_s_own_locators,
                                               __file__) is None
    assert jit._CACHE_IMPL._locator_classes[0] is PackageStampedLocator


def test_the_digest_covers_every_source_file(tmp_path):
    root = tmp_path / "pkg"
    (root / "sub").mkdir(parents=True)
    (root / "a.py").write_text("A = 1\n")
    (root / "sub" / "b.py").write_text("B = 2\n")
    before = sources_digest.__wrapped__(root)
    (root / "sub" / "b.py").write_text("B = 3\n")
    assert sources_digest.__wrapped__(root) != before
    (root / "sub" / "b.py").write_text("B = 2\n")
    assert sources_digest.__wrapped__(root) == before  # contents, not times
    (root / "sub" / "b.py").rename(root / "b2.py")
    assert sources_digest.__wrapped__(root) != before  # and names


@pytest.mark.parametrize("unit", ["random_stream", "kernels", "data", "linear", "packsvm"])
def test_every_cached_ppack_function_is_stamped_with_the_package(unit):
    """A module that imported numba's njit directly would cache with numba's stamp alone."""
    import importlib
    import pkgutil

    unit_module = importlib.import_module(f"ppack.{unit}")
    names = [unit_module.__name__]
    if hasattr(unit_module, "__path__"):
        names += [info.name for info in pkgutil.iter_modules(unit_module.__path__, unit_module.__name__ + ".")]
    cached = 0
    for name in names:
        module = importlib.import_module(name)
        for value in vars(module).values():
            if isinstance(value, numba.core.dispatcher.Dispatcher) and value.__module__ == name and \
                    isinstance(value._cache, caching.FunctionCache):
                assert isinstance(value._cache._impl.locator, PackageStampedLocator), f"{name}.{value.__name__}"
                cached += 1
    assert cached > 0
