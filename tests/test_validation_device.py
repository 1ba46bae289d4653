"""Validation of an averaged model on the device (numpy standing in for CuPy): the averaged
coefficients cross once per validation pass, not once per block, and the pass measures the
averaged model (not the table's own coefficients, which the device mirrors)."""
import numpy as np
from mpi4py import MPI

from ppack import PackSVC
from ppack.kernels import device as device_module
from ppack.kernels.array_compute import ArrayCompute
from ppack.packsvm import predict, validation as validation_module

from helpers import make_multiclass

PARAMS = {"kernel": "rbf", "gamma": 0.3, "C": 5.0, "iterations": 1200, "pack": 100, "dtype": "float64",
          "average": True, "validation": 0.25, "validation_every": 3, "patience": 100, "comm": MPI.COMM_SELF}


def test_block_rows_are_larger_on_a_device():
    assert predict.block_rows(784, on_device=True) > 10 * predict.block_rows(784)
    assert predict.block_rows(10**7, on_device=True) == predict.MIN_BLOCK_ROWS


def test_averaged_validation_sends_its_coefficients_once_per_pass(monkeypatch):
    X, y = make_multiclass(n=480, d=8, seed=5)
    cpu = PackSVC(**PARAMS).fit(X, y)

    monkeypatch.setattr(device_module, "gpu_array_module", lambda comm: np)
    monkeypatch.setattr(predict, "DEVICE_MAX_BLOCK_ROWS", 40)  # several blocks per pass
    passes = []
    real_decisions = validation_module.distributed_decisions

    def watched(comm, table, scale, shard, n_features, ids=None, collectives=None, coef=None):
        device = table.compute
        assert isinstance(device, ArrayCompute) and coef is not None  # averaged: its own coefficients
        uploads, calls = [], []
        queue = device.queue
        real_send, real_sums = queue.to_device, device.partial_sums

        def send(array, dtype=None):  # whole arrays: the coefficients not mirrored
            uploads.append(np.asarray(array).nbytes)
            return real_send(array, dtype)
        queue.to_device = send
        device.partial_sums = lambda *a, **k: calls.append(k) or real_sums(*a, **k)
        try:
            got = real_decisions(comm, table, scale, shard, n_features, ids, collectives, coef)
        finally:
            del queue.to_device, device.partial_sums
        # the same pass on the CPU: the averaged model's decisions, not the mirror's
        table.compute = device.host()
        try:
            expected = real_decisions(comm, table, scale, shard, n_features, ids, None, coef)
        finally:
            table.compute = device
        np.testing.assert_allclose(got[0], expected[0], rtol=1e-10, atol=1e-10 * np.abs(expected[0]).max())
        passes.append({"uploads": uploads, "blocks": len(calls), "coef_bytes": coef.size * 8})
        return got

    monkeypatch.setattr(validation_module, "distributed_decisions", watched)
    device = PackSVC(device="gpu", **PARAMS).fit(X, y)
    assert len(passes) == len(cpu.training_["validation"]["history"]) >= 3
    for seen in passes:
        assert seen["blocks"] >= 3 and seen["uploads"] == [seen["coef_bytes"]]
    assert device.training_["validation"]["history"] == cpu.training_["validation"]["history"]
