"""Report part: ten digits on 1,000,000 mnist8m-style rows as T grows, and `plan`'s 512-rank
extrapolation of the full mnist8m from each run (``headline.py``)."""
import tempfile

from headline import FRACTIONS, make_data, run_curve

RANKS = 2


def run(quick, figures, data_dir):
    """{"markdown": the section's text, "data": every measurement}; quick: 100,000 rows."""
    rows = 100_000 if quick else 1_000_000
    with tempfile.TemporaryDirectory() as work:
        data, test = make_data(rows, str(data_dir / "mnist"), work, RANKS)
        runs = run_curve(data, test, RANKS, FRACTIONS)
    lines = ["### 9. The headline: ten digits on mnist8m-style rows, and the full mnist8m on 512 ranks", "",
             f"`bench/headline.py`: `ppack data mnist8m --rows {rows}` (the 60,000 MNIST training digits and "
             "deformed copies, uint8), all ten digits one-vs-rest in one pass, gamma 0.02, sigma 1e-6, r = 100, "
             f"`--dtype float32`, the defaults otherwise, on {RANKS} ranks of one thread, tested on the original "
             "MNIST test set. Per pack: the parallel products (partial sums, pair kernels), the two Allreduce calls "
             "and the serial part (`seconds.serial`: total less those, taken per rank, then the maximum over ranks). "
             "`plan --rows 8100000 --ranks 512 --from-run` extrapolates the full mnist8m at the same T / m from "
             "each run's measured rates (InfiniBand's Allreduce model).", "",
             "| T | train s | test accuracy | support vectors | us per pack: partial sums, pair kernels, Allreduce, "
             "serial | plan: full mnist8m on 512 ranks |", "|---|---|---|---|---|---|"]
    for run_ in runs:
        u = run_["us_per_pack"]
        lines.append(f"| m x {run_['T_over_m']:g} | {run_['seconds']:.1f} | {100 * run_['test_accuracy']:.2f}% | "
                     f"{run_['support_vectors']:,} | {u['partial_sums']:,.0f}, {u['pair_kernels']:,.0f}, "
                     f"{u['communication']:,.0f}, {u['serial']:,.0f} | {run_['plan_estimate']} |")
    return {"markdown": "\n".join(lines) + "\n", "data": {"rows": rows, "ranks": RANKS, "runs": runs}}
