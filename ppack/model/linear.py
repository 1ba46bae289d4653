"""Linear model files: the weights of w . phi(x) + b and how they were trained.

Layout (format "ppack-model", format_version 1, model_type "linear"):
  root attributes  format, format_version, model_type, solver, C, loss, p, bias,
                   features (feature map name, "identity" when none), n_features,
                   training (JSON text)
  classes          (K,) float64 (int64 for integer labels, or text), sorted; for K = 2 the first
                   is -1, the second +1
  w                (width,) float64 for two classes, (width, K) for K > 2 (one column per
                   class, against the rest); width: n_features, or the feature map's output size
  b                scalar float64 for two classes, (K,) for K > 2
"""
from dataclasses import dataclass

import numpy as np

from ..atomic import atomic_h5_write
from ..errors import InputError
from .format import header_attributes, open_model, read_classes, training_of, write_classes


@dataclass
class LinearModelFile:
    """w (width,) and b a float for two classes; w (width, K) and b (K,) for K > 2."""

    w: np.ndarray
    b: object
    classes: np.ndarray
    solver: str
    C: float
    loss: str
    p: float
    bias: bool
    features: str
    n_features: int
    training: dict


def save_linear_model(path, model):
    """Write a ``LinearModelFile`` atomically (call on one rank)."""
    def write(f):
        f.attrs.update(header_attributes("linear", model.training, solver=model.solver, C=model.C, loss=model.loss,
                                         p=model.p, bias=model.bias, features=model.features,
                                         n_features=model.n_features))
        write_classes(f, model.classes)
        f.create_dataset("w", data=np.asarray(model.w, dtype=np.float64))
        f.create_dataset("b", data=np.asarray(model.b, dtype=np.float64))

    atomic_h5_write(path, write)


def read_linear_model(path):
    """Validate and read a linear model file (two classes or K > 2)."""
    with open_model(path, "linear", ("classes", "w", "b")) as f:
        a = f.attrs
        classes, w, b = read_classes(f), f["w"][()], f["b"][()]
        K = len(classes)
        width = w.shape[0] if w.ndim else "width"
        expected_w, expected_b = ((width,), ()) if K == 2 else ((width, K), (K,))
        if w.shape != expected_w or np.shape(b) != expected_b:
            raise InputError(f"datasets 'w' and 'b': expected shapes {expected_w} and {expected_b} for {K} classes, "
                             f"got {w.shape} and {np.shape(b)}", path)
        return LinearModelFile(w, float(b) if K == 2 else b, classes, str(a["solver"]), float(a["C"]),
                               str(a["loss"]), float(a["p"]), bool(a["bias"]), str(a["features"]),
                               int(a["n_features"]), training_of(f))
