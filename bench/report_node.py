"""Report part: a 16-core node and one GPU, from the figures `bench/device.sh` and the runs
beside it measured on the GPU node (``results/device_h200.json``). The node is lent only
now and then, so this part re-renders those stored measurements; it does not rerun them."""
import json
from pathlib import Path

import numpy as np

RESULTS = Path(__file__).resolve().parent / "results" / "device_h200.json"


def _median_us(metrics, phase):
    """The median rank's seconds of ``phase`` per pack, in us."""
    return 1e6 * float(np.median(metrics["per_rank"]["seconds"][phase])) / metrics["packs"]


def run(quick, figures, data_dir):
    """{"markdown": the section's text, "data": the figures shown}; quick and data_dir unused (nothing runs)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    stored = json.loads(RESULTS.read_text())
    sweep = stored["node_scaling_first_node"]
    one = sweep["digits-count-off-p1"]["seconds"]["total"]
    rows, speedups = [], {"off": {}, "on": {}}
    for p in (1, 2, 4, 8, 16):
        for schedule in (("off",) if p == 1 else ("off", "on")):
            m = sweep[f"digits-count-{schedule}-p{p}"]
            total = m["seconds"]["total"]
            speedups[schedule][p] = one / total
            rows.append(f"| {p} | {schedule} | {total:.2f} | {one / total:.2f} | {_median_us(m, 'partial_sums'):,.0f} "
                        f"| {_median_us(m, 'waiting'):,.0f} | {_median_us(m, 'collective_own'):,.0f} "
                        f"| {_median_us(m, 'serial'):,.0f}"
                        + (f" + {_median_us(m, 'shadow'):,.0f}" if schedule == "on" else "") + " |")
    speedups["on"][1] = speedups["off"][1]
    gpu = stored["gpu_sums"]["rows"]
    train = stored["gpu_train_1000000"]
    fig, (left, right) = plt.subplots(1, 2, figsize=(10, 4))
    ps = [1, 2, 4, 8, 16]
    left.plot(ps, ps, "k:", label="ideal")
    for schedule, style in (("off", "o-"), ("on", "s--")):
        left.plot(ps, [speedups[schedule][p] for p in ps], style, label=f"--pipeline {schedule}")
    left.set(xscale="log", yscale="log", xlabel="ranks (one per core)", ylabel="speed-up over one rank",
             title="ten digits, 240,000 rows, placement by count")
    left.set_xticks(ps, [str(p) for p in ps])
    left.legend()
    sizes = sorted(int(n) for n in gpu)
    right.plot(sizes, [1e3 * gpu[str(n)]["gpu_seconds_per_pack"] for n in sizes], "o-", label="one H200, fused")
    right.plot(sizes, [1e3 * gpu[str(n)]["unfused_seconds_per_pack"] for n in sizes], "s--", label="one H200, unfused")
    right.plot(sizes, [1e3 * gpu[str(n)]["cpu_seconds_per_pack"] for n in sizes], "^-", label="16 CPU ranks")
    right.set(xscale="log", yscale="log", xlabel="stored rows", ylabel="partial sums per pack (ms)",
              title="d = 784 float32, r = 100, K = 10")
    right.legend()
    fig.tight_layout()
    fig.savefig(figures / "node_and_gpu.png", dpi=110)
    plt.close(fig)
    lines = ["### 10. A 16-core node and one GPU", "",
             f"*Measured on the GPU node ({stored['device']}) on {stored['date']} by `bench/device.sh` and the runs "
             "beside it, not by this run: the node is lent only now and then, and this part re-renders its "
             "stored figures (`bench/results/device_h200.json`; `bench/gpu.py` and `bench/node_scaling.py` made them).*", "",
             "Ten digits on 240,000 mnist8m-style rows (gamma 0.02, sigma 1e-6, T = m/2, float32, one thread per "
             "rank, placement by count, one run each; us per pack, median rank):", "",
             "| p | --pipeline | total s | speed-up | partial sums us | waiting us | collectives' own us "
             "| serial us (+ shadow) |",
             "|---|---|---|---|---|---|---|---|", *rows, "",
             "16 ranks reached 6.2 to 7.7x one rank on such nodes (two machines, both schedules and placements, "
             "packs of 100 to 400; goal 12x): the vCPUs' speeds differ steadily by up to 1.5x (placement by cost "
             "balances the partial sums), the ranks jitter from pack to pack, and every rank repeats 0.3 to 0.4 ms "
             "of serial work a pack. The pipelined schedule measured no faster there, and `--pipeline` now "
             "defaults to off.", "",
             "The kernel sums on one H200 against 16 CPU ranks of the same node (`bench/gpu.py sums`):", "",
             "| stored rows | GPU fused us | GPU unfused us | 16 CPU ranks us |", "|---|---|---|---|",
             *[f"| {n:,} | {1e6 * gpu[str(n)]['gpu_seconds_per_pack']:,.0f} "
               f"| {1e6 * gpu[str(n)]['unfused_seconds_per_pack']:,.0f} "
               f"| {1e6 * gpu[str(n)]['cpu_seconds_per_pack']:,.0f} |" for n in sizes], "",
             f"Ten digits on 1,000,000 rows at T = m on that GPU: {train['seconds']['total']:.2f} s of training, "
             f"test accuracy {100 * train['test_accuracy']:.2f}%, {train['support_vectors']:,} support vectors.", "",
             "![speed-up on the node and the GPU's sums](report/node_and_gpu.png)", ""]
    data = {"speedups": speedups, "gpu_sums": gpu, "gpu_train_seconds": train["seconds"]["total"],
            "gpu_train_accuracy": train["test_accuracy"]}
    return {"markdown": "\n".join(lines), "data": data}
