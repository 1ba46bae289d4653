"""Linear model files: the weights of w . phi(x) + b and how they were trained.

Layout (format "ppack-model", format_version 1, model_type "linear"):
  root attributes  format, format_version, model_type, solver, C, loss, p, bias,
                   features (feature map name, "identity" when none), n_features,
                   training (JSON text)
  classes          (2,) float64
  w                (n_weights,) float64 (n_features, or the feature map's output size)
  b                scalar float64
"""
from dataclasses import dataclass

import numpy as np

from ..atomic import atomic_h5_write
from .format import header_attributes, open_model, read_classes, training_of, write_classes


@dataclass
class LinearModelFile:
    w: np.ndarray
    b: float
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
        f.create_dataset("b", data=float(model.b))

    atomic_h5_write(path, write)


def read_linear_model(path):
    """Validate and read a linear model file."""
    with open_model(path, "linear", ("classes", "w", "b")) as f:
        a = f.attrs
        return LinearModelFile(f["w"][()], float(f["b"][()]), read_classes(f), str(a["solver"]), float(a["C"]),
                               str(a["loss"]), float(a["p"]), bool(a["bias"]), str(a["features"]),
                               int(a["n_features"]), training_of(f))
