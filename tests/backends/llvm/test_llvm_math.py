"""Accuracy of the llvm backend's transcendentals (glibc libmvec) against NumPy over the
whole floating-point range: random bit patterns (so every exponent, denormals, huge
arguments, inf and NaN all occur), normal-sized arguments, and the edge cases (overflow
and underflow thresholds, +-0, +-inf, NaN).

NaN must appear exactly where NumPy has NaN, infinities where NumPy has them (a finite
result one ulp below the largest float counts as one ulp), and everything else within
``MAX_ULPS`` units in the last place of NumPy's result (NumPy itself is not correctly
rounded; the two measure 1-6 ulps apart at worst).
"""

from __future__ import annotations

import numpy as np
import pytest
from support import precision
from yota.backends import llvm as native
from yota.ir import Builder, TensorType, run

MAX_ULPS = precision.ULPS
UNARY = ["exp", "expm1", "log", "log1p", "log2", "sin", "cos", "tan", "tanh", "sinh", "cosh",
         "arctan", "arcsin", "arccos"]
EDGES = [0.0, -0.0, np.inf, -np.inf, np.nan, 1e-45, -1e-45, 1e-40, 1e-310, 5e-324, 1.0, -1.0,
         88.72, 88.73, -87.3, -103.9, -104.0, 709.78, 709.8, -745.2, 3.4e38, -3.4e38, 1e300,
         np.pi / 2, -np.pi, 1e7, 1e22, 0.5, 1 - 1e-7, -1 + 1e-7]


def sweep(dt: np.dtype, n: int, seed: int = 0) -> np.ndarray:
    rng = np.random.default_rng(seed)
    if dt == np.float32:
        bits = rng.integers(0, 2**32, n, dtype=np.uint64).astype(np.uint32).view(np.float32)
    else:
        bits = rng.integers(0, 2**64, n, dtype=np.uint64).view(np.float64)
    with np.errstate(all="ignore"):
        normal = (rng.standard_normal(n) * 4).astype(dt)
        edges = np.array(EDGES).astype(dt)
    return np.concatenate([bits, normal, edges, rng.uniform(-1, 1, n).astype(dt)])


def ulp_distance(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    it = np.int32 if a.dtype == np.float32 else np.int64
    mask = np.iinfo(it).max
    ia, ib = a.view(it).astype(np.int64), b.view(it).astype(np.int64)
    ia = np.where(ia < 0, -(ia & mask), ia)
    ib = np.where(ib < 0, -(ib & mask), ib)
    return np.abs(ia - ib)


def compare(op: str, dt: np.dtype, xs: list[np.ndarray]) -> None:
    b = Builder(op)
    ins = [b.input(TensorType(dt, x.shape)) for x in xs]
    fn = b.build([b.emit(op, *ins)])
    got = native.compile(fn)(*xs)[0]
    want = run(fn, *xs)[0]
    nan_g, nan_w = np.isnan(got), np.isnan(want)
    assert np.array_equal(nan_g, nan_w), \
        f"{op}: NaN at {xs[0][nan_g != nan_w][:5]} (got {got[nan_g != nan_w][:5]})"
    d = ulp_distance(got[~nan_w], want[~nan_w])
    if d.size and d.max() > MAX_ULPS:
        k = int(np.argmax(d))
        args = [x[~nan_w][k] if x.shape else x for x in xs]
        raise AssertionError(f"{op}{args}: {got[~nan_w][k]!r} vs NumPy {want[~nan_w][k]!r} "
                             f"({int(d.max())} ulps)")


@pytest.mark.parametrize("dt", [np.float32, np.float64])
@pytest.mark.parametrize("op", UNARY)
def test_unary_over_the_whole_range(op: str, dt: type) -> None:
    compare(op, np.dtype(dt), [sweep(np.dtype(dt), 1 << 14)])


@pytest.mark.parametrize("dt", [np.float32, np.float64])
@pytest.mark.parametrize("op", ["pow", "arctan2"])
def test_binary_over_the_whole_range(op: str, dt: type) -> None:
    x = sweep(np.dtype(dt), 1 << 13, 1)
    y = sweep(np.dtype(dt), 1 << 13, 2)
    rng = np.random.default_rng(3)
    compare(op, np.dtype(dt), [x, y])
    compare(op, np.dtype(dt), [np.abs(x), rng.permutation(y)])  # pow of non-negatives


@pytest.mark.slow
@pytest.mark.parametrize("op", UNARY)
def test_float32_dense(op: str) -> None:
    compare(op, np.dtype(np.float32), [sweep(np.dtype(np.float32), 1 << 22, 7)])


def test_denormal_results_are_kept() -> None:
    """No flush to zero: tiny inputs give tiny outputs, denormal results survive."""
    x = np.array([1e-40, -1e-40, 1e-45, -103.5, -745.0], np.float64)
    b = Builder("d")
    v = b.input(TensorType("f64", x.shape))
    got = native.compile(b.build([b.tanh(v), b.sin(v), b.exp(v)]))(x)
    assert got[0][0] == np.tanh(1e-40) and got[1][1] == np.sin(-1e-40)
    assert 0 < got[2][4] < 1e-320  # exp(-745) is a denormal
    x32 = x.astype(np.float32)
    b = Builder("d32")
    v = b.input(TensorType("f32", x.shape))
    got = native.compile(b.build([b.tanh(v), b.exp(v)]))(x32)
    assert got[0][0] == np.float32(1e-40) and 0 < got[1][3] < 1e-44
