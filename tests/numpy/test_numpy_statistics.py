"""Differences, gradients, NaN-aware statistics (``yota.numpy.statistics``) and masked
sums and means against NumPy on
interp and llvm, over 0-d where NumPy allows it, empty, size-1 and non-contiguous
operands and negative axes, and their gradients against finite differences."""

from __future__ import annotations

import warnings
from collections.abc import Callable
from typing import Any

import numpy as np
import pytest
from support.gradcheck import check_grad

import yota

RNG = np.random.default_rng(0)
X = RNG.standard_normal((3, 4))
XN = X.copy()
XN[0, 1] = np.nan
XN[2, :] = np.nan  # a row of NaNs: nanmean/nanmax give NaN there, as NumPy
XT = RNG.standard_normal((5, 3)).T  # non-contiguous
ONE = RNG.standard_normal((1, 4))
EMPTY = np.zeros((2, 0))

CASES: list[tuple[str, Callable[..., Any], list[np.ndarray]]] = [
    ("diff", lambda x: np.diff(x), [X, XT, ONE, EMPTY]),
    ("diff_axis0_n2", lambda x: np.diff(x, n=2, axis=0), [X, XT]),
    ("diff_negative_axis", lambda x: np.diff(x, axis=-2), [X, ONE]),
    ("diff_prepend_append", lambda x: np.diff(x, prepend=0.0, append=x[:, :1]), [X, XT]),
    ("diff_n0", lambda x: np.diff(x, n=0), [X]),
    ("diff_n_past_the_length", lambda x: np.diff(x, n=5), [X]),
    ("ediff1d", lambda x: np.ediff1d(x, to_begin=[1.0, 2.0], to_end=-1.0), [X, XT, ONE]),
    ("ptp", lambda x: np.ptp(x, axis=1), [X, XT, ONE]),
    ("ptp_all", lambda x: np.ptp(x), [X, XT]),
    ("ptp_keepdims", lambda x: np.ptp(x, axis=-1, keepdims=True), [X]),
    ("average", lambda x: np.average(x), [X, XT]),
    ("average_weights_1d", lambda x: np.average(x, axis=0, weights=np.arange(1.0, x.shape[0] + 1)),
     [X, XT]),
    ("average_weights_full", lambda x: np.average(x, weights=x * x + 1), [X]),
    ("average_returned", lambda x: np.average(x, axis=1, returned=True)[1], [X]),
    ("nansum", lambda x: np.nansum(x, axis=1), [XN, X]),
    ("nanprod", lambda x: np.nanprod(x), [XN]),
    ("nanmean", lambda x: np.nanmean(x, axis=1), [XN, X]),
    ("nanmax", lambda x: np.nanmax(x, axis=1), [XN, X]),
    ("nanmin_keepdims", lambda x: np.nanmin(x, axis=0, keepdims=True), [XN]),
    ("nanvar", lambda x: np.nanvar(x, axis=1), [XN, X]),
    ("nanstd_ddof", lambda x: np.nanstd(x, axis=0, ddof=1), [XN, X]),
    ("gradient_1d", lambda x: np.gradient(x[0]), [X, XT]),
    ("gradient_axis", lambda x: np.gradient(x, axis=-1), [X, XT, ONE]),
    ("gradient_all_axes", lambda x: np.gradient(x, 0.5)[0], [X]),
    ("gradient_edge_order_2", lambda x: np.gradient(x, 2.0, axis=1, edge_order=2), [X, XT]),
    ("sum_where", lambda x: np.sum(x, axis=1, where=x > 0), [X, XT]),
    ("sum_where_constant", lambda x: np.sum(x, where=np.array([True, False, True, True])),
     [X]),
    ("mean_where", lambda x: np.mean(x, axis=0, where=np.abs(x) < 1.5), [X, XT]),
]


@pytest.mark.parametrize("backend", ["interp", "llvm"])
@pytest.mark.parametrize("name,f,inputs", CASES, ids=[c[0] for c in CASES])
def test_values_match_numpy(name: str, f: Callable[..., Any], inputs: list[np.ndarray],
                            backend: str) -> None:
    for x in inputs:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # NumPy warns on all-NaN slices
            want = np.asarray(f(x))
            got = np.asarray(yota.compile(f, x, backend=backend)(x))
        assert got.shape == want.shape and got.dtype == want.dtype
        np.testing.assert_allclose(got, want, rtol=1e-12, atol=1e-14, equal_nan=True)


GRAD_CASES = [c for c in CASES if not c[0].startswith(("nan", "diff_n_past", "mean_where",
                                                        "sum_where"))]


@pytest.mark.parametrize("backend", ["interp", "llvm"])
@pytest.mark.parametrize("name,f,inputs", GRAD_CASES, ids=[c[0] for c in GRAD_CASES])
def test_gradients_match_finite_differences(name: str, f: Callable[..., Any],
                                            inputs: list[np.ndarray], backend: str) -> None:
    x = inputs[0] + 0.01 * np.arange(inputs[0].size).reshape(inputs[0].shape)  # no ties

    def loss(x: np.ndarray) -> Any:
        return np.sum(np.sin(f(x)))

    _, g = yota.grad(loss, x, backend=backend)
    assert check_grad(loss, [x], g) == 1


def test_nan_reductions_pass_no_gradient_to_nans() -> None:
    x = np.array([1.0, np.nan, 3.0])
    for f in (np.nansum, np.nanmean, np.nanmax, np.nanstd):
        _, g = yota.grad(lambda x, f=f: f(x) * 2.0, x)
        assert g[0][1] == 0.0 and np.all(np.isfinite(g[0]))


@pytest.mark.parametrize("backend", ["interp", "llvm"])
def test_masked_means_and_sums_differentiate_the_kept_elements(backend: str) -> None:
    x = np.array([[1.0, -2.0, 3.0], [0.5, 4.0, -1.0]])
    keep = np.array([[True, False, True], [True, True, False]])
    _, g = yota.grad(lambda x: np.mean(x, where=keep) + np.sum(x * x, where=keep), x,
                     backend=backend)
    np.testing.assert_allclose(g[0], np.where(keep, 1 / keep.sum() + 2 * x, 0.0))
