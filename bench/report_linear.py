"""Report part 6: the linear solvers on ten classes (one-vs-rest) beside LIBLINEAR, on usps
and MNIST (``linear_multiclass.py``: the same runs, the same JSON under bench/results/)."""
import time

from linear_multiclass import GOAL_POINTS, RUNS, SETS, bench_set, print_table, save

QUICK_ROWS = 2000  # quick mode: the first rows of each split
RESULTS = __import__("pathlib").Path(__file__).resolve().parent / "results"


def run(quick, figures, data_dir):
    """{"markdown": the section's text, "data": every measurement}."""
    repeats = 1 if quick else 3
    results = []
    for name, C in SETS.items():
        result = bench_set(name, data_dir, C, repeats, QUICK_ROWS if quick else None)
        print_table(result)
        results.append(result)
    path = save(results, RESULTS)
    header = "| run | " + " | ".join(f"{r['set']}: train s | test accuracy" for r in results) + " |"
    lines = [header, "|---|" + "---:|---:|" * len(results)]
    for i, (label, solver, loss, options, faces) in enumerate(RUNS):
        cells = []
        for r in results:
            row = r["runs"][i]
            versus = "" if faces is None else f" ({row['points_vs_liblinear']:+.2f})"
            cells.append(f"{row['median_seconds']:.2f} | {100 * row['test_accuracy']:.2f}%{versus}")
        shown = label + ("" if not options else " (" + ", ".join(f"{k} {v}" for k, v in options.items()) + ")")
        lines.append(f"| {shown} | " + " | ".join(cells) + " |")
    verdicts = []
    for r in results:
        for row in r["runs"]:
            if row["solver"] == "dcd":
                ok = abs(row["points_vs_liblinear"]) <= GOAL_POINTS
                verdicts.append(f"{r['set']} {row['run']} vs {row['faces']}: {row['points_vs_liblinear']:+.2f} "
                                f"points ({'within' if ok else 'not within'} {GOAL_POINTS})")
    scope = (f"Quick mode: the first {QUICK_ROWS} rows of each split, one run each, so the figures show the "
             "method, not the full-size result." if quick else
             f"Full training and test sets; train seconds and test accuracy are the medians of {repeats} runs, "
             "each repeat running every row of the table side by side before the next (ppack's runs are seeded; "
             "LIBLINEAR's accuracy varies a little between runs: its permutations are not).")
    sets = ", ".join(f"{r['set']} ({r['n']:,} x {r['d']}, test {r['test_rows']:,}, C = {r['C']:g})" for r in results)
    markdown = f"""### 6. Ten classes with the linear solvers, beside LIBLINEAR

{scope} Sets: {sets}; features scaled to [0, 1]. ppack trains the ten classes one-vs-rest in one
`BlockAveragedSVC` fit on one rank (one round: the block is the whole problem); LIBLINEAR
(liblinear-official) trains one-vs-rest with `-B 1` (ppack's default regularised bias) at the
same C and its default tolerance. In brackets: test accuracy points against the LIBLINEAR run
of the same loss (`-s 3` for the hinge loss, `-s 1` for the squared hinge). Measured
{time.strftime('%Y-%m-%d')}; the run's JSON went to `bench/results/{path.name}` (the results folder is
not committed: rerun to get it).

{chr(10).join(lines)}

{chr(10).join('- ' + v for v in verdicts)}
"""
    return {"markdown": markdown, "data": results}
