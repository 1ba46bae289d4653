"""COFFIN feature maps (ppack.linear.features): DOT, ADD and the squared norm against
explicit rows, the row loops against numpy twins, expand(), names and errors."""
import numpy as np
import pytest
import scipy.sparse as sp

from ppack.errors import PPackError
from ppack.linear.features import FeatureMap, MappedRows, _add, _dot, _sqnorm, as_feature_map, predict_decision
from ppack.linear.problem import loss_sum, primal_objective

from naive import adds_twin, dots_twin, explicit_features, explicit_shifts, hash_key_twin, tiny_images, tiny_problem


MAPS = ["identity", "poly2", "hash:5", "hash:12"]


@pytest.mark.parametrize("spec", MAPS)
def test_dot_add_sqnorm_match_explicit_rows(spec):
    fmap = FeatureMap.parse(spec)
    X, _ = tiny_problem(12, 9, seed=3)
    Phi = explicit_features(X, spec)
    assert Phi.shape == (12, fmap.n_out(9))
    params = fmap.params(9)
    rng = np.random.default_rng(0)
    w = rng.normal(size=fmap.n_out(9))
    for i in range(X.shape[0]):
        idx, val = X.indices[X.indptr[i]:X.indptr[i + 1]], X.data[X.indptr[i]:X.indptr[i + 1]]
        assert _dot(fmap.kind, params, idx, val, w) == pytest.approx(Phi[i] @ w, rel=1e-12, abs=1e-12)
        assert _sqnorm(fmap.kind, params, idx, val) == pytest.approx(Phi[i] @ Phi[i], rel=1e-12, abs=1e-12)
        got = w.copy()
        _add(fmap.kind, params, idx, val, got, -0.7)
        np.testing.assert_allclose(got, w - 0.7 * Phi[i], rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("spec", MAPS + ["shifts:1", "shifts:1:3x4"])
def test_expand_is_the_explicit_feature_matrix(spec):
    fmap = FeatureMap.parse(spec)
    X, _ = tiny_problem(8, 12 if spec.endswith("3x4") else 9, seed=7)
    np.testing.assert_allclose(fmap.expand(X).toarray(), explicit_features(X, spec), rtol=1e-14, atol=1e-14)


def test_poly2_is_the_inhomogeneous_quadratic_kernel():
    X, _ = tiny_problem(10, 6, seed=4)
    K = (X @ X.T).toarray()
    for Phi in (FeatureMap.parse("poly2").expand(X).toarray(), explicit_features(X, "poly2")):
        np.testing.assert_allclose(Phi @ Phi.T, K + K * K, rtol=1e-12, atol=1e-12)


def test_hash_folds_poly2_features_with_signs():
    """Bucket b of hash:B is the signed sum of the poly2 features whose key hashes to b."""
    X, _ = tiny_problem(6, 5, seed=5)
    d, bits = 5, 3
    poly = explicit_features(X, "poly2")
    hashed = FeatureMap("hash", bits=bits, seed=7).expand(X).toarray()
    keys = [2 * j for j in range(d)] + [2 * (k * (k + 1) // 2 + j) + 1 for k in range(d) for j in range(k + 1)]
    folded = np.zeros((X.shape[0], 1 << bits))
    for col, key in enumerate(keys):  # poly2 column order: j, then (j, k) at d + k(k+1)/2 + j
        h = hash_key_twin(key, 7)
        folded[:, h & ((1 << bits) - 1)] += (1.0 if h >> 63 == 0 else -1.0) * poly[:, col]
    np.testing.assert_allclose(hashed, folded, rtol=1e-12, atol=1e-12)
    assert np.count_nonzero(np.abs(hashed).sum(0)) < len(keys), "8 buckets for 20 features must collide"


def test_virtual_shifts_equal_explicit_shifted_copies():
    images, _ = tiny_images(4, side=5)
    X = sp.csr_matrix(images.reshape(4, -1))
    fmap = FeatureMap.parse("shifts:1")
    explicit = explicit_shifts(images, 1)
    np.testing.assert_array_equal(fmap.expand(X).toarray(), explicit)
    params = fmap.params(25)
    w = np.random.default_rng(2).normal(size=25)
    for r in range(explicit.shape[0]):
        i, k = divmod(r, 9)
        idx, val = X.indices[X.indptr[i]:X.indptr[i + 1]], X.data[X.indptr[i]:X.indptr[i + 1]]
        assert _dot(fmap.kind, params, idx, val, w, k) == pytest.approx(explicit[r] @ w, rel=1e-12, abs=1e-12)
        assert _sqnorm(fmap.kind, params, idx, val, k) == pytest.approx(explicit[r] @ explicit[r], rel=1e-12)
        got = w.copy()
        _add(fmap.kind, params, idx, val, got, 1.3, k)
        np.testing.assert_allclose(got, w + 1.3 * explicit[r], rtol=1e-12, atol=1e-12)
    assert not np.array_equal(explicit[0], explicit[1]), "shift id 0 is the image, 1 a moved copy"
    np.testing.assert_array_equal(explicit[0], images[0].ravel())


def test_shifts_of_non_square_images_need_a_shape():
    X = sp.csr_matrix(np.ones((2, 6)))
    with pytest.raises(PPackError, match="not a square image"):
        FeatureMap.parse("shifts:1").params(6)
    rect = FeatureMap.parse("shifts:1:2x3")
    np.testing.assert_array_equal(rect.expand(X).toarray(),
                                  explicit_shifts(np.ones((2, 2, 3)), 1))


@pytest.mark.parametrize("spec", MAPS + ["shifts:1"])
def test_row_loops_match_their_numpy_twins(spec):
    """MappedRows: phi(X) w over every (virtual) row (features._dots) and phi(X)^T c (features._adds)."""
    fmap = FeatureMap.parse(spec)
    X, _ = tiny_problem(11, 9, seed=8)
    rng = np.random.default_rng(3)
    w, coef = rng.normal(size=fmap.n_out(9)), rng.normal(size=11 * fmap.n_virtual)
    coef[::4] = 0.0  # rows with a zero coefficient are skipped
    for rows in (X, X.toarray()):
        mapped = MappedRows(rows, fmap)
        assert mapped.shape == (11 * fmap.n_virtual, fmap.n_out(9))
        np.testing.assert_allclose(mapped.matvec(w), dots_twin(X, spec, w), rtol=1e-12, atol=1e-12)
        np.testing.assert_allclose(mapped.rmatvec(coef), adds_twin(X, spec, coef), rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("spec", MAPS + ["shifts:1"])
def test_predict_decision_matches_expanded(spec):
    fmap = FeatureMap.parse(spec)
    X, _ = tiny_problem(9, 9, seed=6)
    w = np.random.default_rng(1).normal(size=fmap.n_out(9))
    every = fmap.expand(X).toarray() @ w + 0.25
    expected = every[::fmap.n_virtual]  # shift id 0 for shifts
    np.testing.assert_allclose(predict_decision(X, w, 0.25, fmap), expected, rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(predict_decision(X.toarray(), w, 0.25, fmap), expected, rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(predict_decision(X, w, 0.25, fmap, virtual=True), every, rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("spec", ["poly2", "hash:5", "shifts:1"])
def test_loss_sums_over_every_virtual_row(spec):
    fmap = FeatureMap.parse(spec)
    X, y = tiny_problem(10, 9, seed=9)
    w = np.random.default_rng(4).normal(scale=0.3, size=fmap.n_out(9))
    Phi, labels = fmap.expand(X), np.repeat(y, fmap.n_virtual)
    for p in (1.0, 2.0):
        assert loss_sum(X, y, w, -0.1, p, fmap) == pytest.approx(loss_sum(Phi, labels, w, -0.1, p), rel=1e-12)
    assert primal_objective(X, y, w, -0.1, 0.7, 1.0, fmap) == pytest.approx(
        primal_objective(Phi, labels, w, -0.1, 0.7), rel=1e-12)


def test_feature_map_names_and_errors():
    for spec in ["identity", "poly2", "hash:20", "hash:8:3", "shifts:1", "shifts:2:16x8"]:
        assert FeatureMap.parse(spec).name == spec
    assert FeatureMap.parse("poly2").n_out(22) == 22 + 253
    assert FeatureMap.parse("hash:20").n_out(22) == 1 << 20
    assert FeatureMap.parse("shifts:2").n_virtual == 25
    for bad in ["poly3", "hash", "hash:x", "shifts", "shifts:1:4by4", ""]:
        with pytest.raises(PPackError, match="feature map: expected identity, poly2"):
            FeatureMap.parse(bad)
    with pytest.raises(PPackError, match=r"hash bits: must be an integer in \[1, 40\], got 0"):
        FeatureMap.parse("hash:0")
    with pytest.raises(PPackError, match="max_entries: must be at least"):
        FeatureMap.parse("poly2").expand(sp.random(50, 40, density=0.5, format="csr"), max_entries=1000)


def test_solver_argument_feature_map():
    assert as_feature_map(None, 5).name == "identity"
    assert as_feature_map("poly2", 5).n_out(5) == 20
    fmap = FeatureMap.parse("hash:4")
    assert as_feature_map(fmap, 5) is fmap
    cases = [("cubic", r"^feature_map: must be a FeatureMap, None or a map name \(identity, poly2, .*got 'cubic'$"),
             ("hash:0", r"^feature_map: must be .*got 'hash:0' \(hash bits: must be an integer in \[1, 40\], got 0\)"),
             (3, r"^feature_map: must be a FeatureMap, None or a map name .*got 3$"),
             ("shifts:1", r"^feature_map: must fit X's 5 features, got shifts:1 \(.*not a square image")]
    for value, message in cases:
        with pytest.raises(PPackError, match=message):
            as_feature_map(value, 5)
