"""Start-up time and memory: `python -m ppack --help`, `import ppack` and `from ppack import PackSVC`.

Run from the repository root:

    .venv/bin/python bench/startup.py                  # 15 runs of each command
    .venv/bin/python bench/startup.py --runs 5 --root /path/to/other/checkout

Each command runs N times in a fresh Python process (the ppack of ``--root`` first on its
path; default: this repository), one after another; the table gives the median, fastest and
slowest wall time and the median peak resident memory (the child's own, from wait4), with
`python -c pass` as the floor. Other work on the machine slows every row: the header gives the
load average. The targets are 0.35 s and 80 MB for the first two commands;
the third loads the estimators, with scikit-learn when it is installed. Results go to
bench/results/startup-<time>.json.
"""
import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
COMMANDS = {
    "python -c pass": ["-c", "pass"],
    "python -m ppack --help": ["-m", "ppack", "--help"],
    'python -c "import ppack"': ["-c", "import ppack"],
    'python -c "from ppack import PackSVC"': ["-c", "from ppack import PackSVC"],
}
TARGETS = {"python -m ppack --help": (0.35, 80), 'python -c "import ppack"': (0.35, 80)}


def measure(args, env, cwd):
    """(wall seconds, peak resident MB) of one fresh ``python ARGS`` process run in ``cwd`` (first
    on its path), which must succeed."""
    with tempfile.TemporaryFile() as errors:
        start = time.perf_counter()
        child = subprocess.Popen([sys.executable, *args], cwd=cwd, env=env, stdout=subprocess.DEVNULL,
                                 stderr=errors)
        _, status, usage = os.wait4(child.pid, 0)
        seconds = time.perf_counter() - start
        if os.waitstatus_to_exitcode(status) != 0:
            errors.seek(0)
            raise SystemExit(f"python {' '.join(args)} failed:\n{errors.read().decode()}")
    return seconds, usage.ru_maxrss / 1024  # KiB on Linux


def commit(root):
    out = subprocess.run(["git", "-C", str(root), "rev-parse", "--short", "HEAD"], capture_output=True, text=True)
    return out.stdout.strip() or None


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--runs", type=int, default=15, help="fresh processes per command (default 15)")
    parser.add_argument("--root", default=str(ROOT), help="the checkout whose ppack is measured (default: this one)")
    parser.add_argument("--out", default=str(ROOT / "bench" / "results"))
    args = parser.parse_args()
    root = Path(args.root).resolve()
    env = dict(os.environ, PYTHONPATH=str(root) + os.pathsep + os.environ.get("PYTHONPATH", ""))
    measure(COMMANDS['python -c "from ppack import PackSVC"'], env, root)  # a first run fills the file caches
    results = {"python": sys.version.split()[0], "root": str(root), "commit": commit(root), "runs": args.runs,
               "cores": len(os.sched_getaffinity(0)), "load_average": os.getloadavg(),
               "bytecode_cache": not os.environ.get("PYTHONDONTWRITEBYTECODE"), "commands": {}}
    print(f"{args.runs} fresh processes per command, ppack from {root} ({results['commit']}); load average "
          f"{results['load_average'][0]:.2f} on {results['cores']} cores"
          + ("" if results["bytecode_cache"] else "; PYTHONDONTWRITEBYTECODE is set: ppack compiles on every import"))
    print(f"{'command':40s} {'median s':>9s} {'min s':>7s} {'max s':>7s} {'peak MB':>8s}  target")
    for name, command in COMMANDS.items():
        samples = [measure(command, env, root) for _ in range(args.runs)]
        seconds = [s for s, _ in samples]
        mb = [m for _, m in samples]
        row = {"seconds": seconds, "peak_mb": mb, "median_seconds": statistics.median(seconds),
               "median_peak_mb": statistics.median(mb)}
        results["commands"][name] = row
        target = TARGETS.get(name)
        verdict = "" if target is None else (f"{target[0]} s, {target[1]} MB: " + (
            "met" if row["median_seconds"] <= target[0] and row["median_peak_mb"] <= target[1] else "MISSED"))
        print(f"{name:40s} {row['median_seconds']:9.3f} {min(seconds):7.3f} {max(seconds):7.3f} "
              f"{row['median_peak_mb']:8.1f}  {verdict}")
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    path = out / f"startup-{time.strftime('%Y%m%d-%H%M%S')}.json"
    path.write_text(json.dumps(results, indent=2) + "\n")
    print(f"results: {path}")


if __name__ == "__main__":
    main()
