"""LIBSVM model files: the header and support vectors svm_save_model writes, read back (c_svc,
epsilon_svr, one_class); errors naming the file and the field; the names and labels of a
one-vs-rest export; slices; regression and one-class exports that LIBSVM predicts with."""
import numpy as np
import pytest
from libsvm import svmutil

from ppack.errors import InputError
from ppack.kernels.spec import KernelSpec
from ppack.model.format import is_libsvm_model, model_type
from ppack.model.kernel import KernelModelHeader, write_kernel_model
from ppack.model.libsvm_file import (class_model_path, export_libsvm, read_libsvm_model_header,
                                     read_libsvm_model_rows, rest_label)

from helpers import fitted, make_multiclass, make_problem

OPTIONS = {"rbf": "-t 2 -g 0.3 -c 2", "linear": "-t 0 -c 0.5", "poly": "-t 1 -d 2 -g 0.2 -r 1.5 -c 0.5",
           "sigmoid": "-t 3 -g 0.2 -r -0.5 -c 0.5"}


def libsvm_model_file(path, kernel="rbf", n=120, labels=(7.0, 3.0), classes=2, seed=5):
    """A model trained and saved by LIBSVM itself (first label: the first label of the data)."""
    if classes == 2:
        X, y = make_problem(n, 5, seed=seed, labels=labels)
    else:
        X, y = make_multiclass(n, 5, seed=seed)
    problem = svmutil.svm_problem(y.tolist(), [dict(enumerate(row.tolist(), 1)) for row in X])
    svmutil.svm_save_model(str(path), svmutil.svm_train(problem, OPTIONS[kernel] + " -q"))
    return path


def dense_support_vectors(reference, n_features):
    """(total_sv, n_features) support vectors of a LIBSVM model object, from its 1-based dicts."""
    expected = np.zeros((reference.get_nr_sv(), n_features))
    for i, sv in enumerate(reference.get_SV()):
        for j, v in sv.items():
            if j > 0:
                expected[i, j - 1] = v
    return expected


@pytest.mark.parametrize("kernel", ["rbf", "linear", "poly", "sigmoid"])
def test_header_and_support_vectors_are_read_as_libsvm_wrote_them(kernel, tmp_path):
    path = libsvm_model_file(tmp_path / "m.model", kernel)
    reference = svmutil.svm_load_model(str(path))
    h = read_libsvm_model_header(path)
    assert h.spec.name == kernel and h.spec.offset == 0.0
    if kernel != "linear":
        assert h.spec.gamma == pytest.approx(0.3 if kernel == "rbf" else 0.2)
    if kernel == "poly":
        assert (h.spec.degree, h.spec.coef0) == (2, 1.5)
    if kernel == "sigmoid":
        assert h.spec.coef0 == -0.5
    assert list(h.labels) == reference.get_labels()
    assert h.total_sv == reference.get_nr_sv() == sum(h.nr_sv)
    assert h.rho == reference.rho[0]
    assert h.probability is None
    coef, X, width = read_libsvm_model_rows(path, h, 0, h.total_sv)
    np.testing.assert_array_equal(coef, [c[0] for c in reference.get_sv_coef()])
    np.testing.assert_array_equal(X.toarray()[:, :5], dense_support_vectors(reference, 5))
    assert width == 5
    # any slices, read apart, are the same rows
    parts = [read_libsvm_model_rows(path, h, a, b) for a, b in [(0, 3), (3, h.total_sv // 2), (h.total_sv // 2,
                                                                                                h.total_sv)]]
    np.testing.assert_array_equal(np.concatenate([p[0] for p in parts]), coef)
    np.testing.assert_array_equal(np.vstack([p[1][:, :5].toarray() for p in parts]), X.toarray()[:, :5])


def test_model_type_tells_libsvm_model_files_from_ppack_models_and_data(tmp_path):
    path = libsvm_model_file(tmp_path / "m.model")
    assert is_libsvm_model(path) and model_type(path) == "libsvm"
    (tmp_path / "data.txt").write_text("1 1:0.5 2:1\n-1 3:2\n")
    assert not is_libsvm_model(tmp_path / "data.txt") and not is_libsvm_model(tmp_path / "missing")
    with pytest.raises(InputError, match="not an HDF5 model file"):
        model_type(tmp_path / "data.txt")


def test_one_vs_rest_file_names_and_rest_label(tmp_path):
    assert class_model_path(tmp_path / "out.model", 3.0) == tmp_path / "out.3.model"
    assert class_model_path(tmp_path / "out", 11) == tmp_path / "out.11.model"
    assert class_model_path(tmp_path / "a.b", -2.0) == tmp_path / "a.b.-2.model"
    assert rest_label([0, 1, 2]) == -1
    assert rest_label([-1.0, 0.0, 4.0]) == -2
    assert rest_label([-3, -1, 5]) == -4


def test_export_is_the_same_whatever_the_slices(tmp_path):
    X, y = make_multiclass(150, 5, sparse=True, seed=9)
    fitted(X, y, iterations=300, bias=True).save(tmp_path / "m.h5")
    whole = export_libsvm(tmp_path / "m.h5", tmp_path / "a.model")
    sliced = export_libsvm(tmp_path / "m.h5", tmp_path / "b.model", rows_per_slice=7)
    assert [p.name for p, _ in whole] == ["a.3.model", "a.5.model", "a.7.model", "a.11.model"]
    for (a, na), (b, nb) in zip(whole, sliced):
        assert na == nb > 0 and a.read_bytes() == b.read_bytes()
        h = read_libsvm_model_header(a)
        assert h.labels[1] == -1 and h.total_sv == na
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted(
        ["m.h5"] + [p.name for p, _ in whole] + [p.name for p, _ in sliced])  # no temporary left


VALID = ("svm_type c_svc\nkernel_type rbf\ngamma 0.5\nnr_class 2\ntotal_sv 3\nrho 0.25\nlabel 1 -1\n"
         "nr_sv 2 1\nSV\n0.5 1:1 3:2\n0.25 2:-1\n-0.75 1:0.5\n")


@pytest.mark.parametrize("change, message", [
    (("c_svc", "nu_svr"), "field 'svm_type': nu_svr (a LIBSVM type); ppack reads c_svc, epsilon_svr, one_class "
                          "models only"),
    (("c_svc", "c_svm"), "field 'svm_type': c_svm (not a LIBSVM type)"),
    (("nr_class 2", "nr_class 3"), "field 'nr_class': 3 classes"),
    (("kernel_type rbf", "kernel_type sigmoid"), "field 'coef0': missing (the sigmoid kernel needs it)"),
    (("kernel_type rbf", "kernel_type precomputed"), "field 'kernel_type': precomputed"),
    (("gamma 0.5\n", ""), "field 'gamma': missing (the rbf kernel needs it)"),
    (("gamma 0.5", "gamma -1"), "gamma"),
    (("rho 0.25", "rho abc"), "line 6: field 'rho': expected a number, got 'abc'"),
    (("rho 0.25", "rho 0.25 1"), "line 6: field 'rho': expected 1 value, got 2"),
    (("nr_sv 2 1", "nr_sv 2 2"), "fields 'nr_sv' (2 2) and 'total_sv' (3) disagree"),
    (("label 1 -1", "label 1 1"), "field 'label': the two labels are the same"),
    (("label 1 -1\n", ""), "field 'label': missing"),
    (("SV\n", ""), "the file ends before the line 'SV'"),
    (("1:1 3:2", "1:1 3:x"), "line 10: expected a number after ':'"),
    (("0.25 2:-1", "abc 2:-1"), "line 11: expected a numeric label, got 'abc'"),
    (("-0.75 1:0.5\n", ""), "field 'total_sv': 3 support vectors, but the file has 2 lines after 'SV'"),
    (("-0.75 1:0.5\n", "-0.75 1:0.5\n1 1:1\n"), "field 'total_sv': 3 support vectors, but the file has 4"),
])
def test_unsupported_or_malformed_files_are_refused_naming_the_file_and_field(change, message, tmp_path):
    path = tmp_path / "bad.model"
    path.write_text(VALID.replace(*change))
    with pytest.raises(InputError) as info:
        h = read_libsvm_model_header(path)
        read_libsvm_model_rows(path, h, 0, h.total_sv)
    assert str(info.value).startswith(str(path)) and message in str(info.value), str(info.value)


def test_a_valid_hand_written_file_reads_in_slices(tmp_path):
    path = tmp_path / "ok.model"
    path.write_text(VALID)
    h = read_libsvm_model_header(path)
    assert (h.labels, h.nr_sv, h.rho, h.sv_line) == ((1, -1), (2, 1), 0.25, 10)
    coef, X, width = read_libsvm_model_rows(path, h, 1, 2)  # a middle slice stops early
    np.testing.assert_array_equal(coef, [0.25])
    np.testing.assert_array_equal(X.toarray(), [[0.0, -1.0, 0.0]])
    assert width == 3  # the largest index of the lines parsed (here the whole file, one chunk)


@pytest.mark.parametrize("svm_type, options", [
    ("epsilon_svr", "-s 3 -t 2 -g 0.3 -c 2 -p 0.2"), ("epsilon_svr", "-s 3 -t 1 -d 2 -g 0.2 -r 1 -c 0.5 -b 1"),
    ("one_class", "-s 2 -t 2 -g 0.3 -n 0.2"), ("one_class", "-s 2 -t 0 -n 0.3 -b 1"),
])
def test_regression_and_one_class_files_are_read_as_libsvm_wrote_them(svm_type, options, tmp_path):
    """No label or nr_sv line; -b 1's probA (epsilon_svr) and prob_density_marks (one_class) skipped."""
    X, _ = make_problem(150, 5, seed=6)
    y = np.sin(X[:, 0]) * 3 + X[:, 1] + 10
    problem = svmutil.svm_problem(y.tolist(), [dict(enumerate(row.tolist(), 1)) for row in X])
    path = tmp_path / "m.model"
    svmutil.svm_save_model(str(path), svmutil.svm_train(problem, options + " -q"))
    assert ("probA" in path.read_text() or "prob_density_marks" in path.read_text()) == ("-b 1" in options)
    reference = svmutil.svm_load_model(str(path))
    h = read_libsvm_model_header(path)
    assert (h.svm_type, h.labels, h.probability) == (svm_type, None, None)
    assert h.total_sv == reference.get_nr_sv() == h.nr_sv[0] and h.rho == reference.rho[0]
    assert h.describe().startswith(f"{svm_type}, kernel ") and f"rho {h.rho:.17g}" in h.describe()
    coef, X_sv, _ = read_libsvm_model_rows(path, h, 0, h.total_sv)
    np.testing.assert_array_equal(coef, [c[0] for c in reference.get_sv_coef()])
    np.testing.assert_array_equal(X_sv.toarray()[:, :5], dense_support_vectors(reference, 5))


@pytest.mark.parametrize("svm_type, offset", [("epsilon_svr", 0.0), ("epsilon_svr", 1.0), ("one_class", 1.0)])
def test_regression_and_one_class_exports_predict_in_libsvm_as_the_model_decides(svm_type, offset, tmp_path):
    """A model file written by hand (so every term of the decision value is exercised, the kernel
    offset included): LIBSVM's svm_predict on the export gives scale * sum_j coef_j (K(sv_j, x) +
    offset) - rho, and for one_class +1 exactly where that is > 0."""
    rng = np.random.default_rng(7)
    sv, X = rng.normal(size=(40, 4)), rng.normal(size=(60, 4))
    coef = rng.normal(size=40) if svm_type == "epsilon_svr" else rng.random(40)  # one-class: alpha >= 0
    coef[[3, 17]] = 0.0  # left out of the file
    scale, gamma = 0.7, 0.3
    kernel = np.exp(-gamma * ((X[:, None, :] - sv[None, :, :]) ** 2).sum(axis=2))
    raw = scale * (kernel + offset) @ coef
    rho = -3.25 if svm_type == "epsilon_svr" else float(np.median(raw))  # one-class: half the rows inliers
    classes = np.empty(0) if svm_type == "epsilon_svr" else np.array([-1.0, 1.0])
    header = KernelModelHeader(KernelSpec("rbf", gamma, 3, 0.0, offset), 1.0, 0.01, scale, classes, 4, 40, "dense",
                               np.dtype(np.float64), {}, None, svm_type, rho)
    write_kernel_model(tmp_path / "m.h5", header, np.arange(40), coef, sv)
    [(path, total_sv)] = export_libsvm(tmp_path / "m.h5", tmp_path / "m.model")
    assert path == tmp_path / "m.model" and total_sv == 38
    text = path.read_text().split("\nSV\n")[0].splitlines()
    assert text[0] == f"svm_type {svm_type}" and not any(line.startswith(("label", "nr_sv")) for line in text)
    expected = raw - rho
    labels, _, values = svmutil.svm_predict([0.0] * len(X), [dict(enumerate(row.tolist(), 1)) for row in X],
                                            svmutil.svm_load_model(str(path)), "-q")
    np.testing.assert_allclose(np.asarray(values)[:, 0], expected, rtol=1e-12, atol=1e-12 * np.abs(expected).max())
    if svm_type == "one_class":
        assert 0 < np.sum(expected > 0) < len(X)
        np.testing.assert_array_equal(labels, np.where(expected > 0, 1.0, -1.0))
    else:
        np.testing.assert_allclose(labels, expected, rtol=1e-12, atol=1e-12 * np.abs(expected).max())
    read_back = read_libsvm_model_header(path)
    assert (read_back.svm_type, read_back.total_sv) == (svm_type, 38)
