"""The benchmark report: bench/REPORT.md and its figures in bench/report/, from scratch.

Run from the repository root (data from ../shared/data; needs `pip install -e ".[bench]"`):

    python -m bench.report            # full size (more than two hours on 2 cores)
    python -m bench.report --quick    # every experiment on small sizes, under 10 minutes

    python -m bench.report --only calibration --update   # rerun one part, keep the others

The first part (the trainers users pick, at cross-validated settings, with oneDAL) is
bench/suite.py's. Experiments 1 and 2 (the alternatives: Table I analogue, accuracy against time) are in
report_peers.py, 3 to 5 (packing and ranks, kernel throughput, the communication model)
in report_scaling.py, 6 (the linear solvers on ten classes beside LIBLINEAR) in
report_linear.py, 7 (epsilon-SVR and one-class beside LIBSVM) in svr_oneclass.py, 8 (the
probabilities' calibration) in report_calibration.py, 9 (the headline: ten digits on 1,000,000
mnist8m-style rows and plan's 512-rank extrapolation) in report_headline.py, 10 (a 16-core node and one
GPU) in report_node.py (``PARTS``). Every ppack and peer figure is measured by this run,
except part 10's: it re-renders what the GPU node measured (``results/device_h200.json``), as
it says; figures quoted from the paper or from published hardware specifications say so.
``--update`` reruns only the parts named by ``--only``: each part's text sits between
``<!-- part NAME -->`` markers and is replaced there (or appended), stamped with its own
command, date and minutes; the other parts keep theirs.
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
# the report's parts, in its order, and their modules
PARTS = {"tuned": "suite", "peers": "report_peers", "scaling": "report_scaling", "linear": "report_linear", "svr": "svr_oneclass",
         "calibration": "report_calibration", "headline": "report_headline", "node": "report_node"}
MARK = "<!-- part {} -->"
PACKAGES = ("ppack", "numpy", "scipy", "numba", "mpi4py", "mpich", "h5py", "libsvm-official", "liblinear-official",
            "scikit-learn", "scikit-learn-intelex", "matplotlib", "threadpoolctl")


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
    p.add_argument("--quick", action="store_true", help="small sizes: every experiment in minutes, not hours")
    p.add_argument("--only", default=",".join(PARTS), help="comma-separated parts: tuned (the suite), peers (1, 2), "
                   "scaling (3-5), "
                   "linear (6), svr (7), calibration (8), headline (9), node (10: re-rendered, not rerun)")
    p.add_argument("--update", action="store_true",
                   help="rerun only the --only parts and replace them in the existing report")
    p.add_argument("--data-dir", default=str(ROOT.parent / "shared" / "data"))
    p.add_argument("--suite-json", default=None,
                   help="render the tuned part from this bench/suite.py run's JSON instead of running the suite")
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
        part_started = time.perf_counter()
        rendered = name == "tuned" and args.suite_json is not None
        if rendered:
            results = json.loads(Path(args.suite_json).read_text())
            section = module.render(results)
        else:
            section = module.run(args.quick, figures, Path(args.data_dir))
        stamp = ""
        if rendered:
            stamp = (f"\n*Part rendered by `python -m bench.report --only {name} --update --suite-json "
                     f"{Path(args.suite_json).name}` from the suite run of {results['date']} (`bench/suite.py"
                     f"{' --quick' if results['quick'] else ''}`).*\n")
        elif args.update:
            stamp = (f"\n*Part regenerated by `python -m bench.report{' --quick' if args.quick else ''} --only {name} "
                     f"--update` on {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())} in "
                     f"{(time.perf_counter() - part_started) / 60:.1f} minutes.*\n")
        parts.append(f"{MARK.format(name)}\n{section['markdown']}{stamp}{MARK.format(name)}")
        data[name] = section["data"]
    if args.update:
        return update(out, figures, parts, data, args.only.split(","))
    minutes = (time.perf_counter() - started) / 60
    command = "python -m bench.report" + (" --quick" if args.quick else "") + \
        ("" if args.only == ",".join(PARTS) else f" --only {args.only}")
    text = "\n".join([
        "# ppack benchmark report", "",
        f"Regenerated from scratch by `{command}` from the repository root in {minutes:.1f} minutes"
        f"{' (quick mode: small sizes)' if args.quick else ''}. Every ppack and peer figure below was measured by "
        "that run of the committed code on this machine, except part 10's, which the GPU node measured; figures "
        "from the paper or from published hardware specifications are marked *(quoted)*.", "",
        *machine(), "", *parts])
    out.write_text(text + "\n")
    (figures / "report.json").write_text(json.dumps(data, indent=1, default=str) + "\n")
    print(f"wrote {out} and {figures}/ in {minutes:.1f} min")


def update(out, figures, parts, data, names):
    """Replace the named parts of the existing report (or insert them in ``PARTS``' order) and merge
    their data."""
    text = out.read_text()
    for name, part in zip(names, parts):
        mark = MARK.format(name)
        if mark in text:
            before, _, rest = text.partition(mark)
            text = before + part + rest.partition(mark)[2]
            continue
        later = [MARK.format(n) for n in list(PARTS)[list(PARTS).index(name) + 1:] if MARK.format(n) in text]
        if later:  # before the first part that follows it in the report's order
            before, _, rest = text.partition(later[0])
            text = before + part + "\n\n" + later[0] + rest
        else:
            text = text.rstrip("\n") + "\n\n" + part + "\n"
    out.write_text(text)
    path = figures / "report.json"
    merged = json.loads(path.read_text()) if path.exists() else {}
    path.write_text(json.dumps({**merged, **data}, indent=1, default=str) + "\n")
    print(f"updated {', '.join(names)} in {out} and {path}")


if __name__ == "__main__":
    main()
