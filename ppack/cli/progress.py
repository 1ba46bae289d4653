"""The progress line of `train`: ``ppack.progress.Progress``, which the estimators' ``verbose``
shares (it lives below the trainers, so that they can import it)."""
from ..progress import Progress  # noqa: F401
