"""Sorting and order statistics (``yota.numpy.sorting``, a bitonic network): values against
NumPy (sort and argsort exactly, with NaNs last; median/percentile/quantile within 1e-12),
over 0-d-free shapes including empty, size-1, powers of two and not, every axis; gradients
through the permutation against finite differences; the kernels on the CUDA emulation."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
from support.gradcheck import check_grad

import yota

SHAPES = [((7,), -1), ((0,), -1), ((1,), 0), ((16,), 0), ((3, 5), 0), ((3, 5), 1),
          ((2, 3, 6), -2), ((4, 9), None), ((33,), 0)]
FUNCS = {
    "sort": lambda x, axis: np.sort(x, axis=axis),
    "argsort": lambda x, axis: np.argsort(x, axis=axis),
    "partition": lambda x, axis: np.sort(np.partition(x, 0, axis=axis if axis is not None
                                                      else -1), axis=axis),
    "median": lambda x, axis: np.median(x, axis=axis),
    "percentile": lambda x, axis: np.percentile(x, [0, 10, 50, 99.5, 100], axis=axis),
    "quantile_keepdims": lambda x, axis: np.quantile(x, 0.3, axis=axis, keepdims=True),
}


@pytest.mark.parametrize("backend", ["interp", "llvm"])
@pytest.mark.parametrize("name", sorted(FUNCS))
def test_values_match_numpy(name: str, backend: str) -> None:
    f = FUNCS[name]
    rng = np.random.default_rng(0)
    for shape, axis in SHAPES:
        if shape == (0,) and name in ("median", "percentile", "quantile_keepdims"):
            continue  # NumPy: an empty slice has no median
        x = rng.permutation(np.arange(float(np.prod(shape)))).reshape(shape) - 3.0  # distinct
        g = lambda x, axis=axis: f(x, axis)  # noqa: E731
        got, want = np.asarray(yota.compile(g, x, backend=backend)(x)), np.asarray(g(x))
        assert got.shape == want.shape and got.dtype == want.dtype, (shape, axis)
        np.testing.assert_allclose(got, want, rtol=1e-12, atol=0)


def test_nans_sort_last_and_make_the_median_nan() -> None:
    x = np.array([3.0, np.nan, 1.0, 2.0, np.nan, -np.inf, np.inf])
    assert np.array_equal(yota.compile(np.sort, x)(x), np.sort(x), equal_nan=True)
    got, want = yota.compile(np.argsort, x)(x), np.argsort(x)
    assert got[:5].tolist() == want[:5].tolist()  # the NaNs last, in either order
    assert set(got[5:].tolist()) == set(want[5:].tolist()) == {1, 4}
    assert np.isnan(yota.compile(np.median, x)(x))


def test_integer_and_bool_sorts() -> None:
    for x in (np.array([5, -2, 7, 0, 3], np.int32), np.array([True, False, True, False])):
        assert yota.compile(np.sort, x)(x).tolist() == np.sort(x).tolist()


@pytest.mark.parametrize("backend", ["interp", "llvm"])
def test_gradients_follow_the_permutation(backend: str) -> None:
    x = np.random.default_rng(1).permutation(12).reshape(3, 4) * 0.5 + 0.1

    def loss(x: np.ndarray) -> Any:
        return (np.sum(np.sort(x, axis=1) * np.arange(1.0, 5.0))
                + np.sum(np.percentile(x, [25, 60], axis=0)) + np.median(x) ** 2)

    _, g = yota.grad(loss, x, backend=backend)
    assert check_grad(loss, [x], g) == 1


def test_refused_forms_name_the_argument() -> None:
    with pytest.raises(yota.UnsupportedError, match="method"):
        yota.grad(lambda x: np.percentile(x, 50, method="nearest"), np.ones(4))
    with pytest.raises(yota.UnsupportedError, match="constant"):
        yota.grad(lambda x: np.quantile(x, np.max(x) / 10.0), np.ones(4))


def test_cuda_kernels_emulated() -> None:
    from support.cuda_cases import emulated_mismatches
    from yota.ir.autodiff import vjp

    x = np.random.default_rng(2).standard_normal((3, 6))
    _, tape = yota.trace(lambda x: np.sum(np.sort(x, axis=1) ** 2) + np.median(x), x)
    g = vjp(yota.to_ir(tape), [0])
    assert not emulated_mismatches([("sort and median", g, [x])])


NAN_FUNCS = {
    "nanmedian": lambda x: np.nanmedian(x, axis=1),
    "nanmedian_all": lambda x: np.nanmedian(x),
    "nanmedian_keepdims": lambda x: np.nanmedian(x, axis=0, keepdims=True),
    "nanpercentile": lambda x: np.nanpercentile(x, [0, 10, 50, 95, 100], axis=1),
    "nanquantile": lambda x: np.nanquantile(x, 0.3, axis=0),
}


@pytest.mark.parametrize("backend", ["interp", "llvm"])
@pytest.mark.parametrize("name", sorted(NAN_FUNCS))
def test_nan_order_statistics_match_numpy(name: str, backend: str) -> None:
    import warnings

    x = np.random.default_rng(4).standard_normal((4, 7))
    x[0, [1, 3]] = np.nan
    x[2, :] = np.nan  # no value left: NaN, as NumPy (which warns)
    x[3, 6] = np.nan
    f = NAN_FUNCS[name]
    with warnings.catch_warnings():  # NumPy warns of the all-NaN row, eagerly and traced
        warnings.simplefilter("ignore", RuntimeWarning)
        want = np.asarray(f(x))
        got = np.asarray(yota.compile(f, x, backend=backend)(x))
    assert got.shape == want.shape
    np.testing.assert_allclose(got, want, rtol=1e-12, equal_nan=True)


@pytest.mark.parametrize("backend", ["interp", "llvm"])
def test_nan_percentile_gradient_skips_the_nans(backend: str) -> None:
    x = np.array([[3.0, np.nan, 1.0, 4.0, 2.0], [0.5, 1.5, np.nan, np.nan, -1.0]])
    _, g = yota.grad(lambda x: np.sum(np.nanpercentile(x, 40, axis=1)) * 2.0, x,
                     backend=backend)
    want = np.zeros_like(x)
    # row 0: sorted 1, 2, 3, 4; position 3 * 0.4 = 1.2: 0.8 of 2 (x[0, 4]) + 0.2 of 3
    want[0, [4, 0]] = [1.6, 0.4]
    # row 1: sorted -1, 0.5, 1.5; position 2 * 0.4 = 0.8: 0.2 of -1 (x[1, 4]) + 0.8 of 0.5
    want[1, [4, 0]] = [0.4, 1.6]
    np.testing.assert_allclose(g[0], want, atol=1e-12)
