"""The benchmark report: bench/REPORT.md and its figures in bench/report/, from scratch.

Run from the repository root (data from ../shared/data; needs `pip install -e ".[bench]"`):

    python -m bench.report            # full size (about half an hour on 2 cores, and 40 minutes more for svr)
    python -m bench.report --quick    # every experiment on small sizes, under 10 minutes

Experiments 1 and 2 (the alternatives: Table I analogue, accuracy against time) are in
report_peers.py, 3 to 5 (packing and ranks, kernel throughput, the communication model)
in report_scaling.py, 6 (epsilon-SVR and one-class beside LIBSVM) in svr_oneclass.py.
Every ppack and peer figure is measured by this run; figures quoted from the paper or from
published hardware specifications say so.
"""
import argparse
import json
import os
import platform
import sys
import time
from importlib import metadata
from pathlib import Path

BENCH = Path(__file__).resolve().parent
ROOT = BENCH.parent
sys.path[:0] = [str(BENCH), str(ROOT)]

# --only's parts and their modules
PARTS = {"peers": "report_peers", "scaling": "report_scaling", "svr": "svr_oneclass"}
PACKAGES = ("ppack", "numpy", "scipy", "numba", "mpi4py", "mpich", "h5py", "libsvm-official", "liblinear-official",
            "scikit-learn", "matplotlib", "threadpoolctl")


def machine():
    """Lines describing this machine and the software versions."""
    import numpy  # noqa: F401 - loads its BLAS, for threadpool_info
    from threadpoolctl import threadpool_info

    cpu = "unknown CPU"
    if Path("/proc/cpuinfo").exists():
        names = [line.split(":", 1)[1].strip() for line in Path("/proc/cpuinfo").read_text().splitlines()
                 if line.startswith("model name")]
        cpu = names[0] if names else cpu
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    memory = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") / 2**30
    versions = []
    for name in PACKAGES:
        try:
            versions.append(f"{name} {metadata.version(name)}")
        except metadata.PackageNotFoundError:
            versions.append(f"{name} (not installed)")
    blas = ", ".join(f"{b.get('internal_api')} {b.get('version')} ({b.get('architecture', '?')} kernel)"
                     for b in threadpool_info() if b.get("user_api") == "blas")
    return [f"- Date: {time.strftime('%Y-%m-%d %H:%M %Z')}",
            f"- Machine: {cpu}, {cores} cores available, {memory:.0f} GiB memory, {platform.system()} "
            f"{platform.release()}",
            f"- Python {platform.python_version()}; {', '.join(versions)}",
            f"- BLAS: {blas or 'none found'}; OPENBLAS_CORETYPE={os.environ.get('OPENBLAS_CORETYPE', '(unset)')}"]


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--quick", action="store_true", help="small sizes: every experiment in under 10 minutes")
    p.add_argument("--only", default=",".join(PARTS),
                   help="comma-separated parts: peers (1, 2), scaling (3-5), svr (6)")
    p.add_argument("--data-dir", default=str(ROOT.parent / "shared" / "data"))
    p.add_argument("--out", default=str(BENCH / "REPORT.md"))
    args = p.parse_args()
    out = Path(args.out)
    figures = out.parent / "report"
    figures.mkdir(parents=True, exist_ok=True)
    started = time.perf_counter()
    parts, data = [], {}
    for name in args.only.split(","):
        module = __import__(PARTS[name])
        print(f"{name}: running", flush=True)
        section = module.run(args.quick, figures, Path(args.data_dir))
        parts.append(section["markdown"])
        data[name] = section["data"]
    minutes = (time.perf_counter() - started) / 60
    command = "python -m bench.report" + (" --quick" if args.quick else "") + \
        ("" if args.only == ",".join(PARTS) else f" --only {args.only}")
    text = "\n".join([
        "# ppack benchmark report", "",
        f"Regenerated from scratch by `{command}` from the repository root in {minutes:.1f} minutes"
        f"{' (quick mode: small sizes)' if args.quick else ''}. Every ppack and peer figure below was measured by "
        "that run of the committed code on this machine; figures from the paper or from published hardware "
        "specifications are marked *(quoted)*.", "",
        *machine(), "", *parts])
    out.write_text(text + "\n")
    (figures / "report.json").write_text(json.dumps(data, indent=1, default=str) + "\n")
    print(f"wrote {out} and {figures}/ in {minutes:.1f} min")


if __name__ == "__main__":
    main()
