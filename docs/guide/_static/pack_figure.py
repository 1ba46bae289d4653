"""Draws pack.png, the user guide's picture of one pack: python docs/guide/_static/pack_figure.py"""
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
from matplotlib.patches import FancyBboxPatch  # noqa: E402

# each rank's seconds of partial sums and pair kernels in this pack (illustrative: unequal)
LOCAL_WORK = [3.2, 4.4, 3.7]
IDS, COLLECTIVE, REPLAY = 1.0, 0.6, 3.0


def box(ax, x, y, width, colour, label, height=0.6, **style):
    ax.add_patch(FancyBboxPatch((x, y - height / 2), width, height, boxstyle="round,pad=0.02",
                                facecolor=colour, edgecolor="#333", **style))
    if label:
        ax.text(x + width / 2, y, label, ha="center", va="center", fontsize=9)


def main():
    ranks = len(LOCAL_WORK)
    fig, ax = plt.subplots(figsize=(9, 2.9), dpi=100)
    lanes = [ranks - 1 - k for k in range(ranks)]
    x = 0.0
    for y in lanes:
        box(ax, x, y, IDS, "#cfe8ff", "r row ids")
    x += IDS + 0.1
    box(ax, x, (ranks - 1) / 2, COLLECTIVE, "#f4a259", "", height=ranks - 0.2)
    ax.text(x + COLLECTIVE / 2, -0.75, "Allreduce 1\nthe r rows", ha="center", va="top", fontsize=9)
    x += COLLECTIVE + 0.1
    for y, work in zip(lanes, LOCAL_WORK):
        box(ax, x, y, work, "#b8e0b8", "partial sums, pair share")
        if work < max(LOCAL_WORK):
            box(ax, x + work, y, max(LOCAL_WORK) - work, "#eeeeee", "", height=0.25, linestyle="--")
    ax.text(x + max(LOCAL_WORK) - 0.3, lanes[0] + 0.45, "waiting", ha="right", fontsize=8, color="#555")
    x += max(LOCAL_WORK) + 0.1
    box(ax, x, (ranks - 1) / 2, COLLECTIVE, "#f4a259", "", height=ranks - 0.2)
    ax.text(x + COLLECTIVE / 2, -0.75, "Allreduce 2\nsums, flags, digest", ha="center", va="top", fontsize=9)
    x += COLLECTIVE + 0.1
    for y in lanes:
        box(ax, x, y, REPLAY, "#e6d3f5", "replay r updates, merge table")
    x += REPLAY
    ax.set_yticks(lanes, [f"rank {k}" for k in range(ranks)])
    ax.set_xticks([])
    ax.set_xlim(-0.1, x + 0.1)
    ax.set_ylim(-1.6, ranks - 0.4)
    ax.set_xlabel("time in one pack")
    for side in ("top", "right", "bottom", "left"):
        ax.spines[side].set_visible(False)
    fig.tight_layout()
    fig.savefig(Path(__file__).with_name("pack.png"))


if __name__ == "__main__":
    main()
