"""The llvm backend's inline float32 ``exp`` (``backends/llvm/vecmath.exp_f32``): within
one unit in the last place of the correctly rounded value (float64 ``exp`` rounded to
float32) over the whole range, subnormal results, overflow, infinities and NaN, in
vector lanes and the masked tail of a length that is not a multiple of the lanes."""

from __future__ import annotations

import numpy as np
import pytest
from yota.backends import llvm as native
from yota.ir import Builder, TensorType


def _exp(x: np.ndarray) -> np.ndarray:
    b = Builder("f")
    v = b.input(TensorType("f32", x.shape), "x")
    return native.compile(b.build([b.exp(v)]))(x)[0]


def _ulps(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    ia, ib = (np.where(t.view(np.int32) < 0, -(t.view(np.int32) & 0x7FFFFFFF),
                       t.view(np.int32)).astype(np.int64) for t in (a, b))
    d = np.abs(ia - ib)
    d[np.isnan(a) & np.isnan(b)] = 0
    return d


@pytest.mark.parametrize("n", [1, 15, 16, 17, 1001])
def test_exp_f32_within_one_ulp(n: int) -> None:
    rng = np.random.default_rng(n)
    x = np.concatenate([rng.uniform(-105, 90, n), rng.uniform(-1, 1, n),
                        rng.uniform(-88, -86, n)]).astype(np.float32)
    with np.errstate(over="ignore"):
        want = np.exp(x.astype(np.float64)).astype(np.float32)
    assert _ulps(_exp(x), want).max() <= 1


def test_exp_f32_edges() -> None:
    x = np.array([0.0, -0.0, np.inf, -np.inf, np.nan, 88.72283, 88.7229, -87.33654,
                  -103.28, -103.97, -104.0, -1000.0, 1000.0, 1e-30, -1e-30], np.float32)
    got = _exp(x)
    with np.errstate(over="ignore"):
        want = np.exp(x.astype(np.float64)).astype(np.float32)
    np.testing.assert_array_equal(got, want)
    assert np.isnan(got[4]) and got[0] == 1.0 and got[3] == 0.0 and got[2] == np.inf
