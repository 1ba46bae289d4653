"""The official MNIST files (IDX format, plain or gzip) as uint8 pixel rows and digit labels.

A source directory holds ``train-images-idx3-ubyte``, ``train-labels-idx1-ubyte`` and,
for the test split, ``t10k-images-idx3-ubyte`` and ``t10k-labels-idx1-ubyte``, each
possibly with ``.gz``. Images are 28 x 28 unsigned bytes (0 = background), labels 0..9.
"""
import gzip
from pathlib import Path

import numpy as np

from ..errors import InputError

SIDE = 28
SPLITS = {"train": "train", "test": "t10k"}
# stored value = pixel / 255, so a stored byte is the original pixel
PIXEL_SCALE = 1.0 / 255.0


def read_idx(path, ndim):
    """The array of an IDX file of unsigned bytes with ``ndim`` dimensions (big-endian sizes)."""
    path = Path(path)
    raw = path.read_bytes()
    if raw[:2] == b"\x1f\x8b":
        try:
            raw = gzip.decompress(raw)
        except (OSError, EOFError) as exc:
            raise InputError(f"{path}: not a readable gzip file ({exc})") from None
    if len(raw) < 4 or raw[:3] != b"\x00\x00\x08" or raw[3] != ndim:
        raise InputError(f"{path}: expected an IDX file of unsigned bytes with {ndim} dimensions "
                         f"(magic 00 00 08 {ndim:02x}), got magic {raw[:4].hex(' ') or 'nothing'}")
    header = 4 + 4 * ndim
    if len(raw) < header:
        raise InputError(f"{path}: the IDX header is cut short ({len(raw)} bytes)")
    shape = tuple(int(n) for n in np.frombuffer(raw, dtype=">u4", count=ndim, offset=4))
    expected = header + int(np.prod(shape, dtype=np.int64))
    if len(raw) != expected:
        raise InputError(f"{path}: the header's sizes {shape} need {expected} bytes, the file has {len(raw)}")
    return np.frombuffer(raw, dtype=np.uint8, offset=header).reshape(shape)


def _find(source, stem):
    for name in (stem, stem + ".gz"):
        if (Path(source) / name).is_file():
            return Path(source) / name
    raise InputError(f"--source {source}: no {stem} or {stem}.gz (the official MNIST IDX files)")


def read_split(source, split="train"):
    """(images, labels) of a split ("train" or "test") in ``source``: images (n, 784) uint8
    with rows in reading order, labels (n,) uint8 in 0..9."""
    if not Path(source).is_dir():
        raise InputError(f"--source {source}: not a directory")
    prefix = SPLITS[split]
    images_path = _find(source, f"{prefix}-images-idx3-ubyte")
    labels_path = _find(source, f"{prefix}-labels-idx1-ubyte")
    images = read_idx(images_path, 3)
    labels = read_idx(labels_path, 1)
    if images.shape[1:] != (SIDE, SIDE):
        raise InputError(f"{images_path}: expected {SIDE} x {SIDE} images, got {images.shape[1]} x {images.shape[2]}")
    if len(labels) != len(images):
        raise InputError(f"{labels_path}: {len(labels)} labels for the {len(images)} images of {images_path}")
    if labels.size and labels.max() > 9:
        raise InputError(f"{labels_path}: labels must be digits 0..9, found {int(labels.max())}")
    return images.reshape(len(images), SIDE * SIDE), labels
