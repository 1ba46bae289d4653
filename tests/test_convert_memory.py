"""Streaming convert's memory does not grow with the file (second tier: a 1 GB text file)."""
import subprocess
import sys

import numpy as np
import pytest

from ppack.data.libsvm import CHUNK_BYTES

from helpers import clean_mpi_env

pytestmark = pytest.mark.second_tier  # writes and converts 1 GB: the CI's second tier

# the convert process may hold its interpreter and libraries (about 150 MB) and a few chunks of
# text and their parsed rows, but not the file: the file is more than twice this bound
PEAK_BOUND = 450 * 2**20  # measured: 232 MB for 600 MB of text
FILE_BYTES = 1000 * 2**20


def block_of_rows(rng, rows=20000, features=40):
    """LIBSVM text of ``rows`` rows, each with ``features`` of 100 features, about 5 MB."""
    lines = []
    for label, cols, vals in zip(rng.choice([-1, 1], rows), rng.random((rows, 100)).argsort(axis=1)[:, :features],
                                 rng.random((rows, features))):
        lines.append(f"{label} " + " ".join(f"{c + 1}:{v:.4f}" for c, v in zip(np.sort(cols), vals)) + "\n")
    return "".join(lines).encode()


def test_converting_a_file_many_chunks_long_keeps_memory_bounded(tmp_path):
    """A text file 250 chunks of parsing long converts with the process's peak resident memory
    under PEAK_BOUND, less than half the file, and writes every row."""
    block = block_of_rows(np.random.default_rng(0))
    copies = -(-FILE_BYTES // len(block))
    src, dst = tmp_path / "big.txt", tmp_path / "big.h5"
    with open(src, "wb") as out:
        for _ in range(copies):
            out.write(block)
    assert src.stat().st_size >= FILE_BYTES >= 100 * CHUNK_BYTES
    script = ("import resource, runpy, sys; sys.argv = ['ppack', 'convert', sys.argv[1], sys.argv[2], "
              "'--compression', 'none', '--quiet']\n"
              "try:\n    runpy.run_module('ppack', run_name='__main__')\n"
              "finally:\n    print('PEAK', resource.getrusage(resource.RUSAGE_SELF).ru_maxrss)")
    done = subprocess.run([sys.executable, "-c", script, str(src), str(dst)], env=clean_mpi_env(),
                          capture_output=True, text=True, timeout=900)
    assert done.returncode == 0, done.stderr
    peak = int(done.stdout.split("PEAK")[-1]) * (1 if sys.platform == "darwin" else 1024)  # Linux: KiB
    assert peak < PEAK_BOUND < src.stat().st_size / 2
    import h5py
    with h5py.File(dst, "r") as f:
        assert f.attrs["n_samples"] == 20000 * copies
