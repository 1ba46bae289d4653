"""
Multiclass probabilities and a reliability diagram
==================================================

PackSVC trains K classes one-vs-rest in one pass: each pack's rows, kernel values and
support vectors are shared by the classes. With ``probability=True`` it then fits a Platt
sigmoid per class on rows that training never stepped on (a held-out calibration slice of
5% of the rows, at least 200), and turns the K sigmoids into probabilities that sum to 1.

A reliability diagram shows whether they can be taken at their word: among the test points
predicted with confidence about 0.8, about 80% should be right. Beside PackSVC is
scikit-learn's :class:`~sklearn.svm.SVC` with sigmoids fitted by cross-validation
(:class:`~sklearn.calibration.CalibratedClassifierCV`, what scikit-learn advises in place of
``SVC(probability=True)``).
"""

# %%
# Four classes that overlap
# -------------------------
# A generated problem of 4 classes in 10 dimensions, hard enough that the models are
# often unsure; features standardised.
import time

import matplotlib.pyplot as plt
import numpy as np
from sklearn.calibration import CalibratedClassifierCV
from sklearn.datasets import make_classification
from sklearn.metrics import log_loss
from sklearn.model_selection import train_test_split
from sklearn.pipeline import make_pipeline
from sklearn.preprocessing import StandardScaler
from sklearn.svm import SVC

from ppack import PackSVC

X, y = make_classification(n_samples=6000, n_features=10, n_informative=6, n_redundant=2, n_classes=4,
                           n_clusters_per_class=1, class_sep=1.0, random_state=0)
X_train, X_test, y_train, y_test = train_test_split(X, y, test_size=0.5, random_state=0)

models = {"ppack PackSVC": make_pipeline(StandardScaler(),
                                         PackSVC(gamma="scale", C=1.0, epochs=3, probability=True, seed=0)),
          "scikit-learn SVC": make_pipeline(StandardScaler(),
                                            CalibratedClassifierCV(SVC(gamma="scale", C=1.0), ensemble=False))}
probabilities = {}
for name, model in models.items():
    start = time.perf_counter()
    model.fit(X_train, y_train)
    seconds = time.perf_counter() - start
    probabilities[name] = model.predict_proba(X_test)
    print(f"{name}: fit {seconds:.1f} s, test accuracy {model.score(X_test, y_test):.3f}, "
          f"log loss {log_loss(y_test, probabilities[name]):.3f}")


# %%
# Confidence against accuracy
# ---------------------------
# The confidence of a prediction is the probability of the class predicted. The test
# points are put in ten bins of confidence; each point of the diagram is a bin's mean
# confidence and the fraction of its points predicted right. A calibrated model lies on the
# diagonal; below it, it is overconfident. The expected calibration error (ECE) is the
# distance from the diagonal averaged over the points. Bins of fewer than 20 points are
# left out of the drawing (not of the ECE): their fraction is mostly noise.
def reliability(proba, truth, bins=10):
    """(mean confidence, accuracy, points) of each non-empty bin, and the ECE."""
    confidence = proba.max(axis=1)
    right = proba.argmax(axis=1) == truth
    which = np.minimum((confidence * bins).astype(int), bins - 1)
    rows = [(confidence[which == b].mean(), right[which == b].mean(), np.sum(which == b))
            for b in range(bins) if np.any(which == b)]
    mean_confidence, accuracy, count = map(np.array, zip(*rows))
    return mean_confidence, accuracy, count, np.sum(count * np.abs(accuracy - mean_confidence)) / len(truth)


fig, (ax, hist) = plt.subplots(1, 2, figsize=(11, 4.8), layout="constrained")
ax.plot([0, 1], [0, 1], color="grey", linestyle=":", label="calibrated")
for (name, proba), marker in zip(probabilities.items(), "os"):
    classes = models[name].classes_
    truth = np.searchsorted(classes, y_test)
    mean_confidence, accuracy, count, ece = reliability(proba, truth)
    shown = count >= 20
    ax.plot(mean_confidence[shown], accuracy[shown], marker=marker, label=f"{name} (ECE {ece:.3f})")
    hist.hist(proba.max(axis=1), bins=np.linspace(0, 1, 21), alpha=0.5, label=name)
    print(f"{name}: expected calibration error {ece:.3f}")
ax.set_xlabel("mean confidence in the bin")
ax.set_ylabel("fraction predicted right")
ax.set_title(f"reliability diagram, {len(y_test):,} test points")
ax.set_xlim(0.2, 1.0)
ax.set_ylim(0.2, 1.0)
ax.legend(loc="upper left")
hist.set_xlabel("confidence (probability of the class predicted)")
hist.set_ylabel("test points")
hist.set_title("how sure the models are")
hist.legend(loc="upper left")
plt.show()

# %%
# Per class
# ---------
# Each class's own probability against how often a test point of that probability
# belongs to it, for PackSVC: one-vs-rest sigmoids, one per class, raised to a common
# power fitted on the same held-out rows so that they sum to 1.
proba = probabilities["ppack PackSVC"]
fig, ax = plt.subplots(figsize=(6, 5), layout="constrained")
ax.plot([0, 1], [0, 1], color="grey", linestyle=":")
edges = np.linspace(0, 1, 11)
for k, label in enumerate(models["ppack PackSVC"].classes_):
    which = np.clip(np.digitize(proba[:, k], edges) - 1, 0, 9)
    filled = [b for b in range(10) if np.sum(which == b) >= 10]
    ax.plot([proba[which == b, k].mean() for b in filled], [np.mean(y_test[which == b] == label) for b in filled],
            marker="o", label=f"class {label}")
ax.set_xlabel("predicted probability of the class")
ax.set_ylabel("fraction of the class (bins of 10 points or more)")
ax.set_title("PackSVC, one curve per class")
ax.legend()
plt.show()
