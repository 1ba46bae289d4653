"""Linear SVM solvers, run on each rank's block and combined by block averaging.

Every solver solves the LIBLINEAR-style problem (with ``bias=True`` the bias is an extra
feature of constant value 1 whose weight b is regularised like w, as ``liblinear -B 1``):

    min_{w,b}  1/2 (||w||^2 + b^2) + C * sum_i c_i loss(y_i (w . x_i + b))

with loss(m) = max(0, 1 - m)^p: p = 1 (hinge, "l1") or p = 2 (squared hinge, "l2");
the ALM solver also takes 1 < p < 2; c_i >= 0 are optional row weights (``weights=``:
class weight times the row's own, LIBLINEAR's -wi), 1 without them. See ``problem.py``
for the shared types. A solver reads rows through a COFFIN feature map (``feature_map=``,
``features.py``), where x_i becomes phi(x_i) and, under shifts, one row per virtual row;
its arguments are checked by ``checks.py`` against the registry, and a bad one raises
PPackError naming it.
"""
