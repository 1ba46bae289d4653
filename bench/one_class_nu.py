"""One-class SVM across nu beside LIBSVM (issue 41): outliers and support vectors at small nu.

Run from the repository root (scikit-learn's bundled data sets, generated rows; a minute or so):

    python bench/one_class_nu.py
    python bench/one_class_nu.py --nus 0.05,0.1 --sets digits3

Three training sets, each scored on itself:

- digits3: the 183 threes of scikit-learn's digits, standardised with StandardScaler fitted on
  all 1,797 digits;
- cancer_benign: the 357 benign rows of scikit-learn's breast cancer set, standardised with
  StandardScaler fitted on all 569 rows;
- blob: 300 rows of a 2-D standard Gaussian (numpy's default_rng(0)).

rbf kernel with gamma = 1 / n_features on every set. ppack's PackOneClassSVM trains in process
on one rank at its defaults (1 epoch, step 0.5, averaged iterate), in float64 (``--dtype``);
LIBSVM is scikit-learn's OneClassSVM (libsvm inside) at its defaults, with the same gamma and
nu. A training row counts as an outlier when its decision value is below -1e-3 |rho|, for both:
at small nu LIBSVM puts many support vectors exactly on the boundary, whose decision values
round to either side of 0. The goals: ppack's outlier fraction within 0.05 of LIBSVM's, and at
least 0.8 nu m support vectors (the dual optimum has at least nu m). Results go to
bench/results/one_class_nu.json (``--out``).
"""
import argparse
import json
import sys
from pathlib import Path

import numpy as np

BENCH = Path(__file__).resolve().parent
ROOT = BENCH.parent
sys.path[:0] = [str(ROOT)]

NUS = (0.01, 0.05, 0.1, 0.3, 0.5)
SETS = ("digits3", "cancer_benign", "blob")
OUTLIER_GOAL = 0.05  # |ppack's outlier fraction - LIBSVM's| at most this
SUPPORT_GOAL = 0.8  # ppack's support vectors at least this times nu m
TOLERANCE = 1e-3  # an outlier: decision < -TOLERANCE |rho|


def training_set(name):
    """(X (m, d) float64, gamma) of the set ``name``."""
    from sklearn.datasets import load_breast_cancer, load_digits
    from sklearn.preprocessing import StandardScaler

    if name == "digits3":
        X, y = load_digits(return_X_y=True)
        X = StandardScaler().fit_transform(X)[y == 3]
    elif name == "cancer_benign":
        X, y = load_breast_cancer(return_X_y=True)
        X = StandardScaler().fit_transform(X)[y == 1]
    elif name == "blob":
        X = np.random.default_rng(0).normal(size=(300, 2))
    else:
        raise ValueError(f"unknown set {name!r}; choose from {SETS}")
    return np.ascontiguousarray(X, dtype=np.float64), 1.0 / X.shape[1]


def outlier_fraction(decisions, rho):
    """The fraction of rows whose decision value is below -TOLERANCE |rho|."""
    return float(np.mean(np.asarray(decisions) < -TOLERANCE * abs(rho)))


def measure(name, nu, dtype="float64"):
    """One row of the table: ppack's and LIBSVM's outliers and support vectors on ``name`` at ``nu``."""
    from mpi4py import MPI
    from sklearn.svm import OneClassSVM

    from ppack.estimators import PackOneClassSVM

    X, gamma = training_set(name)
    m = X.shape[0]
    libsvm = OneClassSVM(kernel="rbf", gamma=gamma, nu=nu).fit(X)
    model = PackOneClassSVM(comm=MPI.COMM_SELF, gamma=gamma, nu=nu, dtype=dtype).fit(X)
    ppack_out = outlier_fraction(model.decision_function(X), model.offset_)
    libsvm_out = outlier_fraction(libsvm.decision_function(X), libsvm.offset_[0])
    row = {"set": name, "nu": nu, "m": m, "ppack_outliers": ppack_out, "libsvm_outliers": libsvm_out,
           "ppack_sv": int(model.n_support_), "libsvm_sv": int(len(libsvm.support_)),
           "sv_goal": SUPPORT_GOAL * nu * m,
           # LIBSVM's rho is nu m times ppack's (its dual coefficients sum to nu m, ppack's w to 1)
           "ppack_rho": float(model.offset_), "libsvm_rho_scaled": float(libsvm.offset_[0]) / (nu * m),
           "ppack_rho_sgd": model.training_.get("rho_sgd"),
           # the training loop's seconds, and the prediction pass that sets rho after it
           "ppack_seconds": model.training_["seconds"]["total"],
           "ppack_offset_seconds": model.training_["seconds"].get("offset")}
    row["meets_goals"] = bool(abs(ppack_out - libsvm_out) <= OUTLIER_GOAL and row["ppack_sv"] >= row["sv_goal"])
    return row


def table(rows):
    """The rows as a fixed-width text table."""
    head = (f"{'set':14s} {'nu':>5s} {'m':>4s} {'ppack out':>9s} {'LIBSVM out':>10s} {'ppack SV':>8s} "
            f"{'LIBSVM SV':>9s} {'0.8 nu m':>8s} {'ppack rho':>9s} {'LIBSVM rho/(nu m)':>17s}  goals")
    lines = [head, "-" * len(head)]
    for r in rows:
        lines.append(f"{r['set']:14s} {r['nu']:5.2f} {r['m']:4d} {r['ppack_outliers']:9.3f} "
                     f"{r['libsvm_outliers']:10.3f} {r['ppack_sv']:8d} {r['libsvm_sv']:9d} {r['sv_goal']:8.1f} "
                     f"{r['ppack_rho']:9.4f} {r['libsvm_rho_scaled']:17.4f}  {'met' if r['meets_goals'] else 'MISSED'}")
    return "\n".join(lines)


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--sets", default=",".join(SETS))
    p.add_argument("--nus", default=",".join(str(nu) for nu in NUS))
    p.add_argument("--dtype", default="float64", help="ppack's dtype (float64, float32 or auto)")
    p.add_argument("--out", default=str(BENCH / "results"))
    args = p.parse_args()
    rows = [measure(name, float(nu), args.dtype) for name in args.sets.split(",") for nu in args.nus.split(",")]
    print(table(rows))
    met = sum(r["meets_goals"] for r in rows)
    print(f"goals met in {met} of {len(rows)} rows")
    path = Path(args.out) / "one_class_nu.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps({"rows": rows, "dtype": args.dtype, "outlier_goal": OUTLIER_GOAL,
                                "support_goal": SUPPORT_GOAL, "tolerance": TOLERANCE}, indent=2) + "\n")
    print(f"results: {path}")


if __name__ == "__main__":
    main()
