"""Random deformations of 28 x 28 digit images, as mnist8m was made.

Loosli, Canu and Bottou (2007) built mnist8m from the MNIST training set with smooth
random elastic displacement fields plus small affine transforms, after Simard, Steinkraus
and Platt (2003). Here each deformed image is resampled (bilinear, zero outside the
image) at ``p + u(p)`` for every pixel p, where the displacement u is the sum of

- an elastic field: uniform noise in [-1, 1] per pixel and axis, smoothed by a Gaussian of
  ``ELASTIC_SIGMA`` pixels and scaled by ``ELASTIC_ALPHA`` (about 0.35 pixels of standard
  deviation per axis inside the image), and
- an affine map about the image centre: rotation up to ``MAX_ROTATION_DEGREES``, scale
  by up to ``MAX_SCALE_CHANGE`` and shear up to ``MAX_SHEAR``, each drawn uniformly.

The mean displacement over the pixels is about 0.8 pixels (tests/test_mnist8m.py holds it
between 0.5 and 1.5). The sizes were chosen so that the digits keep their labels for a
model that never saw a deformation: an rbf SVM trained on 6,000 MNIST originals scores
93.3% on deformed copies of 2,000 other training digits, against 94.95% on those
originals (Simard's alpha = 20 with 8 degrees of rotation gave 82%).

The random draws of a row come from its own counter-based generator keyed by (seed, row
id), so a row's image depends on nothing else: any number of processes, in any order,
produce the same rows.
"""
import functools

import numpy as np

from ..jit import njit
from .mnist import SIDE

ELASTIC_SIGMA = 4.0
ELASTIC_ALPHA = 8.0
MAX_ROTATION_DEGREES = 5.0
MAX_SCALE_CHANGE = 0.05
MAX_SHEAR = 0.05


@functools.lru_cache(maxsize=None)
def _smoothing(side, sigma):
    """(side, side) Gaussian smoothing matrix with rows summing to 1 (a constant field stays constant)."""
    a = np.arange(side, dtype=np.float64)
    G = np.exp(-((a[:, None] - a[None, :]) ** 2) / (2.0 * sigma * sigma))
    return G / G.sum(axis=1, keepdims=True)


def row_generator(seed, row):
    """The random generator of one row: Philox keyed by (seed, row id)."""
    return np.random.Generator(np.random.Philox(key=np.array([seed, row], dtype=np.uint64)))


def displacements(seed, rows):
    """Displacement fields of the rows ``rows`` (ids, length B): (B, 2, 28, 28) float64 pixels,
    axis 1 being (down, right); the image is resampled at pixel + displacement."""
    rows = np.asarray(rows, dtype=np.int64)
    noise = np.empty((len(rows), 2, SIDE, SIDE))
    params = np.empty((len(rows), 3))
    for i, row in enumerate(rows):
        g = row_generator(seed, int(row))
        noise[i] = g.uniform(-1.0, 1.0, size=(2, SIDE, SIDE))
        params[i] = g.uniform(-1.0, 1.0, size=3)
    field = smooth(noise, _smoothing(SIDE, ELASTIC_SIGMA), ELASTIC_ALPHA)
    angle = np.deg2rad(MAX_ROTATION_DEGREES) * params[:, 0]
    scale = 1.0 + MAX_SCALE_CHANGE * params[:, 1]
    shear = MAX_SHEAR * params[:, 2]
    cos, sin = np.cos(angle), np.sin(angle)
    # M = rotation @ [[scale, shear], [0, scale]] acting on (down, right) offsets from the centre
    M = np.empty((len(rows), 2, 2))
    M[:, 0, 0], M[:, 0, 1] = cos * scale, cos * shear - sin * scale
    M[:, 1, 0], M[:, 1, 1] = sin * scale, sin * shear + cos * scale
    centre = (SIDE - 1) / 2.0
    offsets = np.stack(np.meshgrid(np.arange(SIDE) - centre, np.arange(SIDE) - centre, indexing="ij"))
    affine = np.einsum("bij,jhw->bihw", M - np.eye(2), offsets)
    return field + affine


@njit(cache=True)
def smooth(noise, G, alpha):
    """alpha * G @ noise[b, a] @ G.T for every image b and axis a: noise (B, 2, n, n), G (n, n).

    Plain loops in a fixed order, so a row's field is bit-identical however the rows are
    batched (a BLAS product may change its summation order with the batch's size).
    """
    n = G.shape[0]
    GT = np.ascontiguousarray(G.T)
    out = np.zeros(noise.shape)
    across = np.empty((n, n))
    for b in range(noise.shape[0]):
        for a in range(noise.shape[1]):
            N = noise[b, a]
            for i in range(n):  # across[i, :] = N[i, :] @ G.T
                row = across[i]
                row[:] = 0.0
                for k in range(n):
                    v = N[i, k]
                    for j in range(n):
                        row[j] += v * GT[k, j]
            smoothed = out[b, a]
            for i in range(n):  # smoothed[i, :] = alpha * G[i, :] @ across
                for k in range(n):
                    w = alpha * G[i, k]
                    for j in range(n):
                        smoothed[i, j] += w * across[k, j]
    return out


@njit(cache=True)
def resample(images, fields):
    """Bilinear resampling of ``images`` (B, 784) uint8 at pixel + ``fields`` (B, 2, 28, 28):
    (B, 784) uint8, rounded half to even, zero where the source lies outside the image."""
    B = images.shape[0]
    out = np.empty((B, SIDE * SIDE), dtype=np.uint8)
    for b in range(B):
        for i in range(SIDE):
            for j in range(SIDE):
                down = i + fields[b, 0, i, j]
                right = j + fields[b, 1, i, j]
                d0 = int(np.floor(down))
                r0 = int(np.floor(right))
                wd = down - d0
                wr = right - r0
                value = 0.0
                for dd in range(2):
                    d = d0 + dd
                    if d < 0 or d >= SIDE:
                        continue
                    for rr in range(2):
                        r = r0 + rr
                        if r < 0 or r >= SIDE:
                            continue
                        weight = (wd if dd else 1.0 - wd) * (wr if rr else 1.0 - wr)
                        value += weight * images[b, d * SIDE + r]
                out[b, i * SIDE + j] = min(255.0, max(0.0, np.rint(value)))
    return out


def deformed(images, seed, rows):
    """``images`` (B, 784) uint8 deformed with the fields of rows ``rows`` (B ids)."""
    return resample(images, displacements(seed, rows))
