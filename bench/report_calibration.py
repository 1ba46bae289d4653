"""Report part: how honest the probabilities are, beside LIBSVM's -b 1 (``calibration.py``)."""
from calibration import LABELS, SETS, run_sets


def run(quick, figures, data_dir):
    """{"markdown": the section's text, "data": every measurement}; quick: usps only, 2 seeds."""
    seeds = 2 if quick else 5
    results = run_sets(["usps"] if quick else list(SETS), seeds, 1 if quick else 2, data_dir)
    lines = ["### 8. Probabilities: calibration beside LIBSVM -b 1", "",
             "`bench/calibration.py`: ppack's `--probability` with its default calibration slice (5% of the rows, "
             "200 to 50,000, held out of training) and with `--calibration training` (the sigmoids fitted on the rows "
             "trained on), beside LIBSVM's `-b 1` (its internal five-fold cross-validation), at the same C and gamma. "
             f"On the test set, means over {seeds} seeds of ppack's sampling stream and over shuffles of LIBSVM's "
             "training rows (which move its folds): the expected calibration error (15 equal-width bins of the top "
             "probability), the log loss, the mean top probability and the accuracy. Goal: ppack's ECE at most "
             "LIBSVM's plus 0.01. The last two rows per set test on a fifth of the training rows that ppack "
             "and LIBSVM did not train on (the training rows' own distribution).", "",
             "| set | trainer | ECE | log loss | confidence | accuracy | train s |", "|---|---|---|---|---|---|---|"]
    for name, result in results.items():
        C, gamma, epochs = SETS[name]
        for label, key in LABELS:
            m = result["means"][key]
            lines.append(f"| {name} (C {C:g}, gamma {gamma:g}, {epochs:g} epochs) | {label} | {m['ece']:.4f} | "
                         f"{m['log_loss']:.4f} | {m['confidence']:.4f} | {m['accuracy']:.4f} | {m['seconds']:.2f} |")
        lines.append(f"| | goal | {'met' if result['goal_met'] else 'not met'} | | | | |")
    return {"markdown": "\n".join(lines) + "\n", "data": results}
