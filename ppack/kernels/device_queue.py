"""The device's one queue of work for ``ArrayCompute``'s fused path: one stream, pinned host
buffers, the small uploads of a pack gathered into one copy, one download and one sync a pack,
and the count of each (``counts``: "launches", "h2d", "d2h", "d2d", "syncs").

``DeviceQueue(cupy)`` queues everything on one non-blocking stream, made current for the
process (so that CuPy's GEMMs and copies join it); copies between the host and the device go
through page-locked (pinned) host buffers with ``cudaMemcpyAsync``, so the host returns at
once and waits only in ``sync``. ``DeviceQueue(numpy)`` is its twin for the numpy stand-in:
the same buffers and calls, done at once. An ``Upload`` is reused only after a ``sync`` (a
pack's work ends with one), so its pinned buffer is never rewritten while a copy from it is
queued.
"""
from collections import Counter
from functools import lru_cache

import numpy as np

ALIGN = 256  # bytes: each part of an upload starts on this boundary


@lru_cache(maxsize=None)
def _the_stream(cupy):
    """The process's one stream, made current."""
    stream = cupy.cuda.Stream(non_blocking=True)
    stream.use()
    return stream


class DeviceQueue:
    """Copies, launches and syncs on the device of ``xp`` (CuPy, or numpy standing in), counted."""

    def __init__(self, xp):
        self.xp = xp
        self.on_gpu = xp is not np
        self.counts = Counter()
        if self.on_gpu:
            self.stream = _the_stream(xp)

    def launched(self, n=1):
        """Count n kernel launches (the formulas' kernels call this)."""
        self.counts["launches"] += n

    def empty(self, shape, dtype):
        """A device array (not initialised; allocation launches nothing)."""
        return self.xp.empty(shape, dtype=dtype)

    def pinned(self, nbytes):
        """A page-locked host buffer of nbytes (uint8)."""
        if self.on_gpu:
            import cupyx

            return cupyx.empty_pinned(nbytes, dtype=np.uint8)
        return np.empty(nbytes, dtype=np.uint8)

    def h2d(self, device, host, nbytes):
        """Queue a copy of host[:nbytes] (pinned, uint8) to device[:nbytes] (uint8)."""
        self.counts["h2d"] += 1
        if self.on_gpu:
            runtime = self.xp.cuda.runtime
            runtime.memcpyAsync(device.data.ptr, host.ctypes.data, nbytes, runtime.memcpyHostToDevice,
                                self.stream.ptr)
        else:
            device[:nbytes] = host[:nbytes]

    def d2h(self, host, device):
        """Queue a copy of the contiguous device array into host (pinned, same bytes)."""
        self.counts["d2h"] += 1
        if self.on_gpu:
            runtime = self.xp.cuda.runtime
            runtime.memcpyAsync(host.ctypes.data, device.data.ptr, device.nbytes, runtime.memcpyDeviceToHost,
                                self.stream.ptr)
        else:
            host.view(device.dtype)[:device.size] = device.ravel()

    def d2d(self, target, source):
        """Queue target[...] = source on the device."""
        self.counts["d2d"] += 1
        target[...] = source

    def to_device(self, array, dtype=None):
        """A device copy of a host array, sent at once (whole coefficient arrays, sent rarely)."""
        self.counts["h2d"] += 1
        return self.xp.asarray(np.ascontiguousarray(array, dtype=dtype))

    def gemm(self, a, b, out):
        """Queue out = a @ b (cuBLAS on the GPU)."""
        self.counts["launches"] += 1
        if self.on_gpu:
            self.xp.matmul(a, b, out=out)
        else:  # numpy's matmul given ``out`` and a transposed operand skips BLAS: 100 times slower
            out[...] = a @ b

    def add(self, target, part):
        """Queue target += part."""
        self.counts["launches"] += 1
        target += part

    def sync(self):
        """Wait for everything queued."""
        self.counts["syncs"] += 1
        if self.on_gpu:
            self.stream.synchronize()


class Upload:
    """Host arrays sent together: gathered into one pinned buffer, one copy to the device, and
    handed back as device arrays (views of one device buffer). Buffers grow as needed."""

    def __init__(self, queue):
        self.queue = queue
        self.host = self.device = None

    def put(self, arrays):
        """Device views of ``arrays`` (host arrays, each with its dtype and shape), one copy."""
        offsets, end = [], 0
        for array in arrays:
            offsets.append(end)
            end += -(-array.nbytes // ALIGN) * ALIGN
        if end == 0:
            return [self.queue.empty(a.shape, a.dtype) for a in arrays]
        if self.host is None or self.host.nbytes < end:
            size = max(end, 2 * (0 if self.host is None else self.host.nbytes))
            self.host, self.device = self.queue.pinned(size), self.queue.empty(size, np.uint8)
        for array, at in zip(arrays, offsets):
            self.host[at:at + array.nbytes] = np.ascontiguousarray(array).reshape(-1).view(np.uint8)
        self.queue.h2d(self.device, self.host, end)
        return [self.device[at:at + a.nbytes].view(a.dtype).reshape(a.shape) for a, at in zip(arrays, offsets)]


class Download:
    """One device buffer of float64 results and its pinned host twin, reused while big enough."""

    def __init__(self, queue):
        self.queue = queue
        self.host = self.device = None

    def buffer(self, n):
        """The device buffer's first n float64 (the next pack's results go there)."""
        if self.device is None or self.device.size < n:
            self.device = self.queue.empty(max(n, 1), np.float64)
            self.host = self.queue.pinned(8 * max(n, 1)).view(np.float64)
        return self.device[:n]

    def fetch(self, n):
        """Queue the copy of the first n results to the host; returns the host array they land in
        (valid after the next ``sync``)."""
        self.queue.d2h(self.host, self.device[:n])
        return self.host[:n]
