"""`info FILE`: what a data, model or checkpoint file (or LIBSVM text) holds."""
import json
from pathlib import Path

import numpy as np

from ..errors import InputError
from ..mpi.comm import on_rank0


def add_parser(sub):
    inf = sub.add_parser("info", help="describe a data, model or checkpoint file")
    inf.add_argument("file", help="ppack HDF5 data, model or checkpoint file, LIBSVM text or LIBSVM model")


def run(comm, args):
    on_rank0(comm, lambda: print("\n".join(describe(args.file)), flush=True))


def describe(path):
    """Lines of text describing ``path`` (ppack HDF5 data, model, checkpoint, or LIBSVM text)."""
    import h5py

    from ..data.hdf5 import is_hdf5
    from ..model.format import is_libsvm_model
    from ..model.libsvm_file import read_libsvm_model_header

    path = str(path)
    if not Path(path).exists():
        raise InputError("No such file", path)
    if is_libsvm_model(path):
        return [f"{path}: LIBSVM model", f"  {read_libsvm_model_header(path).describe()}"]
    if not is_hdf5(path):
        return _describe_text(path)
    try:
        with h5py.File(path, "r") as f:
            kind = f.attrs.get("format")
            if kind == "ppack-data":
                return _describe_data(path, f)
            if kind == "ppack-model":
                return _describe_model(path, f)
            if kind == "ppack-checkpoint":
                return _describe_checkpoint(path, f)
    except OSError as exc:  # a truncated or damaged file, as train and predict say it
        raise InputError(f"cannot open HDF5 file: {exc}", path) from None
    raise InputError(f"attribute 'format': not a ppack file (found {kind!r}; expected ppack-data, "
                     "ppack-model or ppack-checkpoint)", path)


def _labels(y):
    values, counts = np.unique(y, return_counts=True)
    return ", ".join(f"{v:g}: {c}" for v, c in zip(values[:12], counts[:12])) + (" ..." if len(values) > 12 else "")


def _describe_data(path, f):
    from ..data.hdf5 import read_header

    h = read_header(path, check_indices=False)
    nnz = len(f["X/data"]) if h.storage == "csr" else h.n_samples * h.n_features
    scale = f", value = stored x {h.value_scale:.9g}" if h.value_scale != 1.0 else ""
    return [f"{path}: ppack data set (format_version {f.attrs['format_version']})",
            f"  rows {h.n_samples}, features {h.n_features}, storage {h.storage} ({h.dtype}{scale})",
            f"  stored values {nnz} ({100 * nnz / max(1, h.n_samples * h.n_features):.2f}% of the matrix), "
            f"longest row {h.max_row_nnz}",
            f"  labels {_labels(f['y'][()])}"]


def _describe_model(path, f):
    from ..model.format import read_classes

    a = f.attrs
    training = json.loads(a["training"])
    classes = [f"{c:g}" if isinstance(c, float) else str(c) for c in read_classes(f).tolist()]
    svm_type = str(a.get("svm_type", "c_svc"))
    if svm_type == "epsilon_svr":
        described = "regression (the decision value is the prediction)"
    elif svm_type == "one_class":
        described = "novelty detection: +1 inlier (decision value >= 0), -1 outlier"
    elif len(classes) == 2:
        described = f"classes {classes[0]} -> -1, {classes[1]} -> +1"
    else:
        described = f"{len(classes)} classes one-vs-rest ({', '.join(classes[:12])}{' ...' if len(classes) > 12 else ''})"
    if a.get("model_type", "kernel") == "kernel":
        problem = {"epsilon_svr": f", epsilon={training.get('epsilon')}", "one_class": f", nu={a['sigma']:g}"}
        described = (f"svm_type {svm_type}{problem.get(svm_type, '')}, rho={float(a.get('rho', 0.0)):.9g}; "
                     + described)
    lines = [f"{path}: ppack {a.get('model_type', 'kernel')} model (format_version {a['format_version']})",
             f"  {described}; features {a['n_features']}"]
    if a.get("model_type", "kernel") == "linear":
        lines.append(f"  solver {a['solver']}, loss p={a['p']:g}, C={a['C']:g}, bias {bool(a['bias'])}, "
                     f"features map {a['features']}")
        lines.append(f"  averaging {training.get('mode')} over {training.get('ranks')} ranks, "
                     f"{training.get('rounds')} rounds, primal objective {training.get('primal_objective')}")
    else:
        lines.append(f"  kernel {a['kernel']} (gamma={a['gamma']:g}, degree={a['degree']}, coef0={a['coef0']:g}, "
                     f"offset={a['kernel_offset']:g}); C={a['C']:g}, sigma={a['sigma']:g}, "
                     f"scale={_numbers(a['scale'])}")
        lines.append(f"  support vectors {a['n_support']} ({a['storage']})")
        lines.append(f"  trained on {training.get('data')} ({training.get('n_samples')} rows), "
                     f"T={training.get('iterations')}, r={training.get('pack')}, {training.get('ranks')} ranks, "
                     f"seed {training.get('seed')}, {training.get('seconds', {}).get('total', float('nan')):.2f} s")
    return lines


def _describe_checkpoint(path, f):
    a = f.attrs
    params = json.loads(a["params"])
    stats = json.loads(a["stats"])
    grid = params.pop("grid", None)
    lines = [f"{path}: ppack checkpoint (format_version {a['format_version']}, "
             f"{'complete' if a.get('complete', False) else 'INCOMPLETE'})",
             f"  iteration {a['iteration']} of {params.get('iterations')}, {len(f['keys'])} support vectors "
             f"on {a['ranks']} ranks, {stats['packs']} packs done",
             "  run: " + ", ".join(f"{k}={v}" for k, v in sorted(params.items()))]
    if grid is not None:  # a grid pass (tune, PackGridSearchCV): its first column's kernel and sigma are above
        name = "nu" if "nu" in grid else "C"  # one-class grids search nu
        settings, points = len(grid["kernels"]), len(grid["kernels"]) * len(grid[name])
        stopped = sum(i >= 0 for i in json.loads(a["column_stops"])["iteration"]) if "column_stops" in a else 0
        lines += [f"  grid pass: {len(grid[name])} {name} values x {settings} kernel settings = {points} grid points, "
                  f"{grid['folds']} folds + the refit, {grid['class_columns']} class column(s) each: "
                  f"{points * (grid['folds'] + 1) * grid['class_columns']} columns ({stopped} stopped by tol or "
                  f"validation), {grid.get('scores', 'pass')} scores",
                  f"  {name}: " + ", ".join(f"{C:g}" for C in grid[name])]
        lines += [f"  kernel: {kernel}" for kernel in grid["kernels"]]
    if "validation" in a:  # the held-out accuracy so far (a grid's: each group of columns')
        tracks = json.loads(a["validation"])["tracks"]
        best = [t["best"] for t in tracks if t["best"] is not None]
        lines.append(f"  validation: {len(tracks[0]['history'])} evaluation(s) so far"
                     + (f", best {max(best):.4f}" if len(tracks) == 1 and best else "")
                     + (f" in {len(tracks)} groups of columns" if len(tracks) > 1 else "")
                     + f"; patience used {max(t['since_best'] for t in tracks)} (the most of any)")
    return lines


def _describe_text(path):
    from ..data.libsvm import read_libsvm

    _, y, info = read_libsvm(path)
    return [f"{path}: LIBSVM text", f"  rows {info.n_samples}, features {info.n_features} (largest index), "
            f"longest row {info.max_row_nnz}", f"  labels {_labels(y)}"]


def _numbers(value):
    """A number, or a few of an array's, in short form."""
    values = np.atleast_1d(value)
    text = ", ".join(f"{v:g}" for v in values[:4]) + (" ..." if len(values) > 4 else "")
    return text if len(values) == 1 else f"[{text}]"
