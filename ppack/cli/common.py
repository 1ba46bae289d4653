"""What every command shares: rank-0 argparse and output, reading data, metrics files."""
import argparse
import json
import os
import resource
import sys
import warnings
from contextlib import contextmanager
from pathlib import Path

from mpi4py import MPI

from ..data.bundled import DEFAULT_TEST, DEFAULT_TRAIN, bundled_path
from ..errors import PPackError
from ..kernels.threads import configure_threads
from ..mpi.comm import on_rank0, run_collectively
from ..registry import THREADS


class Parser(argparse.ArgumentParser):
    """argparse that prints (usage, help, errors) on rank 0 only; every rank still exits."""

    rank = 0

    def _print_message(self, message, file=None):
        if Parser.rank == 0:
            super()._print_message(message, file)

    def error(self, message):
        """Status 2 after the usage line and the error (an invalid choice's names the choices);
        a usage of several lines (train's) is cut to one that points to --help."""
        usage = self.format_usage().strip()
        if "\n" in usage:
            usage = f"usage: {self.prog} [options] (see {self.prog} --help)"
        self._print_message(f"{usage}\n{self.prog}: error: {message}\n", sys.stderr)
        self.exit(2)


class Version(argparse.Action):
    """``--version``: prints ``ppack VERSION`` and exits (the version is looked up only then)."""

    def __init__(self, option_strings, dest=argparse.SUPPRESS, default=argparse.SUPPRESS, help=None):
        super().__init__(option_strings, dest, nargs=0, default=default, help="print ppack's version and exit")

    def __call__(self, parser, namespace, values, option_string=None):
        from ..version import version

        parser._print_message(f"ppack {version()}\n", sys.stdout)
        parser.exit()


class Report:
    """Rank 0's console output (nothing with --quiet)."""

    def __init__(self, comm, quiet):
        self.on = comm.Get_rank() == 0 and not quiet

    def __call__(self, message):
        if self.on:
            print(message, flush=True)


def add_common(p):
    """--metrics-json, --threads, --quiet and --log-every, for train and predict."""
    p.add_argument("--metrics-json", help="write run metrics (times are the max over ranks) to this file")
    p.add_argument("--threads", type=int, default=None, metavar="N", help=THREADS.help)
    p.add_argument("--quiet", action="store_true", help="print only errors")
    p.add_argument("--log-every", type=float, default=30.0,
                   help="seconds between progress lines when not on a terminal (default 30; the first "
                        "comes at the first pack)")


def rank_threads(comm, threads):
    """Collective: ``--threads`` checked (an integer >= 1; None: the default), then this rank's
    numba and BLAS threads set (``kernels.threads.configure_threads``); returns the count."""
    if threads is not None:
        threads = run_collectively(comm, THREADS.rule.check, "--threads", threads)
    return configure_threads(comm, threads)


def check_outputs(comm, outputs):
    """Collective: rank 0 checks that every output file can be written (its folder exists and
    is writable; the path is not a folder) before any data is read, so a typo fails at once
    instead of after hours of training. ``outputs``: {flag: path or None}."""
    def check():
        for flag, path in outputs.items():
            if path is None:
                continue
            path = Path(path)
            folder = path.parent
            if path.is_dir():
                raise PPackError(f"{flag} {path}: is a folder; expected a file to write")
            if not folder.is_dir():
                raise PPackError(f"{flag} {path}: the folder {folder} does not exist")
            if not os.access(folder, os.W_OK | os.X_OK):
                raise PPackError(f"{flag} {path}: the folder {folder} is not writable")

    on_rank0(comm, check)


def check_inputs(comm, inputs, data=()):
    """Collective: rank 0 checks that every input file exists and can be read, and reads the
    layout of each HDF5 data set whose flag is in ``data`` (attributes and shapes, no rows),
    so a typo or a truncated file fails before any work instead of after it. ``inputs``:
    {flag: path or None}. Returns, on every rank, {flag: width} for those HDF5 data sets
    (a LIBSVM text's width is known only once it is read)."""
    def check():
        from ..data.hdf5 import is_hdf5, peek_header

        widths = {}
        for flag, path in inputs.items():
            if path is None:
                continue
            path = Path(path)
            if not path.exists():
                raise PPackError(f"{flag} {path}: No such file")
            if path.is_dir():
                raise PPackError(f"{flag} {path}: is a folder; expected a file to read")
            if not os.access(path, os.R_OK):
                raise PPackError(f"{flag} {path}: not readable (permission denied)")
            if flag in data and is_hdf5(path):
                try:
                    widths[flag] = peek_header(path).n_features
                except PPackError as exc:
                    raise PPackError(f"{flag} {exc}") from None
        return widths

    return comm.bcast(on_rank0(comm, check), root=0)


def peak_rss_bytes(comm):
    """Collective: every rank's peak resident memory so far (bytes), as a list on rank 0."""
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return comm.gather(peak if sys.platform == "darwin" else peak * 1024, root=0)  # Linux counts KiB


def process_age_seconds():
    """Wall seconds since this process started (Linux: /proc, 10 ms resolution), or None
    where the system does not say."""
    try:
        with open("/proc/uptime") as f:
            uptime = float(f.read().split()[0])
        with open("/proc/self/stat") as f:
            started = int(f.read().rsplit(")", 1)[1].split()[19])  # field 22, starttime, in clock ticks
        return uptime - started / os.sysconf("SC_CLK_TCK")
    except (OSError, ValueError, IndexError):
        return None


def read_shard(comm, path, dtype):
    """Collective: this rank's shard of ``path`` and the seconds it took (max over ranks)."""
    from ..data.shard import load_shard

    start = MPI.Wtime()
    shard = load_shard(comm, path, dtype=dtype)
    return shard, comm.allreduce(MPI.Wtime() - start, op=MPI.MAX)


def describe_run(comm, path, shard, threads):
    """One line: the data set and the layout of the run."""
    return (f"data {path}: {shard.n_samples} rows, {shard.n_features} features, "
            f"{'csr' if shard.sparse else 'dense'}; {ranks_and_threads(comm, threads)}")


def ranks_and_threads(comm, threads):
    size = comm.Get_size()
    return f"{size} rank{'s' if size > 1 else ''} x {threads} thread{'s' if threads > 1 else ''}"


def training_data(args, say):
    """The training and test paths: the user's, or the bundled a9a set."""
    if args.data is not None:
        return args.data, args.test
    say(f"no --data given: training on the bundled {DEFAULT_TRAIN} set (UCI Adult), testing on {DEFAULT_TEST}")
    return str(bundled_path(DEFAULT_TRAIN)), args.test or str(bundled_path(DEFAULT_TEST))


def describe_metrics(metrics):
    """Test metrics (``model.test_metrics``) in words, or None when there are none."""
    known = {name: value for name, value in metrics.items() if value is not None}
    if not known:
        return None
    words = {"test_accuracy": lambda v: f"accuracy {100 * v:.2f}%", "test_rmse": lambda v: f"RMSE {v:.6g}",
             "test_r2": lambda v: f"R^2 {v:.6g}"}
    return ", ".join(words[name](value) for name, value in known.items())


def evaluate(comm, model, shard):
    """Collective: ``(decisions, labels, metrics, seconds)``; decisions and labels on rank 0,
    the test metrics (``model.test_metrics``: test_accuracy, or test_rmse and test_r2 for
    regression; None values without labels) and seconds on every rank."""
    start = MPI.Wtime()
    decisions, labels = model.decision_function_shard(shard)
    seconds = comm.allreduce(MPI.Wtime() - start, op=MPI.MAX)
    metrics = model.test_metrics(decisions, labels) if comm.Get_rank() == 0 else None
    return decisions, labels, comm.bcast(metrics, root=0), seconds


def write_metrics(comm, path, metrics):
    """Collective: rank 0 writes ``metrics`` as JSON to ``path`` (atomically); nothing without a path."""
    from ..atomic import atomic_write

    if path:
        on_rank0(comm, atomic_write, path, lambda f: f.write(json.dumps(metrics, indent=2, sort_keys=True) + "\n"))


def warning_line(command, comm, advice):
    """Rank 0's one ``ppack COMMAND: warning:`` line on stderr (``advice``: what was seen and
    what to change, or None); said even with --quiet, as an error would be."""
    if advice is not None and comm.Get_rank() == 0:
        print(f"ppack {command}: warning: {advice}", file=sys.stderr, flush=True)


@contextmanager
def scale_warning_said(command, model):
    """While training ``model``: its feature-scale warning (``packsvm.feature_scale``) said at
    once as a ``warning_line``, before the packs, so that a long run can be stopped; other
    warnings as usual."""
    with warnings.catch_warnings():
        warnings.simplefilter("always", model.feature_scale_warning)
        show = warnings.showwarning

        def said(message, category, *args, **kwargs):
            if issubclass(category, model.feature_scale_warning):
                warning_line(command, model._comm(), message.advice)  # without the estimator's name
            else:
                show(message, category, *args, **kwargs)

        warnings.showwarning = said
        yield
