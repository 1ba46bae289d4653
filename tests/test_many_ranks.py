"""The whole path on 16 and 32 ranks of this machine (oversubscribed): bench/many_ranks.py's
jobs (ten classes; periodic checkpoints, SIGTERM and resume on another rank count, save,
load, predict; on 1, 4, 16 and 32 ranks, grouped in min(p, 4) node groups), held to the
bounds of issue 25. Counts and agreement only: no figure here depends on the machine's speed."""
import json
import subprocess
import sys
from pathlib import Path

import pytest

from helpers import clean_mpi_env

ROOT = Path(__file__).resolve().parents[1]
RANKS = (1, 4, 16, 32)


@pytest.fixture(scope="module")
def figures(tmp_path_factory):
    out = tmp_path_factory.mktemp("many_ranks") / "many_ranks.json"
    done = subprocess.run([sys.executable, "-m", "bench.many_ranks", "--ranks", ",".join(map(str, RANKS)),
                           "--out", str(out)], cwd=ROOT, env=clean_mpi_env(), capture_output=True, text=True,
                          timeout=1500)
    assert done.returncode == 0, done.stdout + done.stderr
    return json.loads(out.read_text())


@pytest.mark.second_tier
def test_decision_values_on_every_rank_count_equal_the_one_rank_runs(figures):
    """Fresh runs on 4, 16 and 32 ranks, the run stopped on 16 and resumed on 32, and `predict`
    on 32 ranks with that model: float64 decision values within 1e-9 of the 1-rank run's."""
    runs = {r["ranks"]: r for r in figures["runs"]}
    assert sorted(runs) == list(RANKS) and figures["reference_ranks"] == 1
    assert (figures["stopped_on"], figures["resumed_on"]) == (16, 32) and figures["stopped_at"] < figures["T"]
    for p in RANKS:
        assert runs[p]["max_decision_difference"] <= 1e-9, (p, runs[p]["max_decision_difference"])
        assert runs[p]["support_vectors"] == runs[1]["support_vectors"]
    assert figures["resumed"]["max_decision_difference"] <= 1e-9
    assert figures["predict_max_decision_difference"] <= 1e-9


@pytest.mark.second_tier
def test_sequential_file_opens_per_checkpoint_and_save_are_at_most_the_nodes_plus_one(figures):
    """min(p, 4) node groups (PPACK_RANKS_PER_NODE): the node leaders open the file once each,
    or, with parallel HDF5, twice in all."""
    for run in figures["runs"] + [figures["resumed"]]:
        nodes = min(run["ranks"], 4)
        expected = 2 if run["method"] == "parallel" else nodes
        assert run["checkpoints"] > 0
        assert run["opens_per_checkpoint"] == run["opens_per_save"] == expected <= nodes + 1, run
        if run["method"] == "node leaders":
            assert run["nodes"] == nodes


@pytest.mark.second_tier
def test_peak_memory_with_the_same_rows_per_rank_does_not_grow_from_4_to_32_ranks(figures):
    same = figures["same_rows_per_rank"]
    assert (same["small"]["ranks"], same["large"]["ranks"]) == (4, 32)
    assert same["small"]["rows"] / 4 == same["large"]["rows"] / 32 == figures["rows_per_rank"]
    assert same["peak_ratio"] <= 1.10, same


@pytest.mark.second_tier
def test_per_pack_buffers_follow_the_formula_at_4_and_32_ranks(figures):
    """Per rank and pack (docs/guide/performance.md, "Memory: what a rank holds"): collective 1 r (8 + 8 d) bytes (float64
    labels and dense float64 rows), collective 2 8 (K r + r (r + 1) / 2 + r + 4 p + 2)."""
    K = 10
    for run in figures["runs"]:
        if run["ranks"] not in (4, 32):
            continue
        r, d, p, packs = run["pack"], run["features"], run["ranks"], run["packs"]
        assert figures["T"] % r == 0 and packs == figures["T"] // r
        assert run["bytes_per_rank"] == {"collective1": packs * r * (8 + 8 * d),
                                         "collective2": packs * 8 * (K * r + r * (r + 1) // 2 + r + 4 * p + 2)}
