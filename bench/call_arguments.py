"""What passing a run's arrays to a numba call costs: as many arguments, or one structref.

    .venv/bin/python bench/call_arguments.py
    .venv/bin/python bench/call_arguments.py --arrays 60 --calls 300

The compiled pack step takes its state as dozens of array arguments; the plan was to pass one
numba ``structref`` holding them instead. This measures the difference on the same body (read
one entry of each array): the median microseconds of a call with N array arguments and of a
call with one structref of N array fields, warm (called back to back) and cold (after a pass
over ``--stream-mb`` of memory, as the pack step runs after the kernel sums have emptied the
caches). Results go to bench/results/call_arguments.json.
"""
import argparse
import json
import os
import sys
import tempfile
import textwrap
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]


def functions(n):
    """Source of a module with ``make`` (the structref from n arrays), ``many`` (n array
    arguments) and ``one`` (the structref), both summing one entry of each array."""
    names = [f"a{i}" for i in range(n)]
    args = ", ".join(names)
    return textwrap.dedent(f"""\
        from numba import njit, types
        from numba.experimental import structref

        @structref.register
        class RunType(types.StructRef):
            def preprocess_fields(self, fields):
                return tuple((name, types.unliteral(t)) for name, t in fields)

        class Run(structref.StructRefProxy):
            pass

        structref.define_proxy(Run, RunType, {names!r})

        @njit(cache=True)
        def make({args}):
            return Run({args})

        @njit(cache=True)
        def many({args}, out):
            s = 0.0
        """) + "".join(f"    s += {a}[0]\n" for a in names) + "    out[0] = s\n\n" + textwrap.dedent("""\
        @njit(cache=True)
        def one(run, out):
            s = 0.0
        """) + "".join(f"    s += run.{a}[0]\n" for a in names) + "    out[0] = s\n"


def call_times(call, before=None, calls=300):
    """Microseconds of each of ``calls`` calls of ``call`` (calls,), each after ``before()`` when given."""
    times = []
    for _ in range(calls):
        if before is not None:
            before()
        start = time.perf_counter()
        call()
        times.append(time.perf_counter() - start)
    return np.array(times) * 1e6


def median_us(call, before=None, calls=300):
    return float(np.median(call_times(call, before, calls)))


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--arrays", type=int, default=60)
    parser.add_argument("--calls", type=int, default=300)
    parser.add_argument("--stream-mb", type=int, default=64)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--out", default=str(ROOT / "bench" / "results" / "call_arguments.json"))
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as folder:
        Path(folder, "call_arguments_kernels.py").write_text(functions(args.arrays))
        sys.path.insert(0, folder)
        os.environ.setdefault("NUMBA_CACHE_DIR", folder)
        import call_arguments_kernels as k
        arrays = [np.ones(10 + i) for i in range(args.arrays)]
        out = np.zeros(1)
        start = time.perf_counter()
        run = k.make(*arrays)
        k.many(*arrays, out)
        k.one(run, out)
        compile_seconds = time.perf_counter() - start
        stream = np.ones(args.stream_mb * 2 ** 20 // 8)
        rounds = []
        for _ in range(args.rounds):
            figures = {
                "warm_arguments_us": median_us(lambda: k.many(*arrays, out), calls=args.calls),
                "warm_structref_us": median_us(lambda: k.one(run, out), calls=args.calls),
                "cold_arguments_us": median_us(lambda: k.many(*arrays, out), stream.sum, args.calls),
                "cold_structref_us": median_us(lambda: k.one(run, out), stream.sum, args.calls),
            }
            rounds.append(figures)
            print(f"{args.arrays} arrays: warm {figures['warm_arguments_us']:.1f} us as arguments, "
                  f"{figures['warm_structref_us']:.1f} as one structref; after streaming {args.stream_mb} MB "
                  f"{figures['cold_arguments_us']:.1f} against {figures['cold_structref_us']:.1f}")
    result = {"arrays": args.arrays, "calls": args.calls, "stream_mb": args.stream_mb,
              "compile_seconds": compile_seconds, "rounds": rounds}
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(json.dumps(result, indent=1))
    print(f"saved {args.out}")


if __name__ == "__main__":
    main()
