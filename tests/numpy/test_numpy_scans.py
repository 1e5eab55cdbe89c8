"""Scans (``yota.numpy.scans``): values against NumPy (up to the rounding of another
association of the sums: 1e-12 relative), gradients against finite differences, products
with zeros, NaN-skipping variants, and the gradient kernels on the CUDA emulation."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
from support.gradcheck import check_grad

import yota

SHAPES = [((), None), ((0,), None), ((1,), 0), ((7,), None), ((3, 5), 1), ((3, 5), 0),
          ((3, 5), -1), ((2, 3, 4), None), ((2, 3, 4), -2), ((1000,), 0)]
FUNCS = [np.cumsum, np.cumprod, np.nancumsum, np.nancumprod]


@pytest.mark.parametrize("backend", ["interp", "llvm"])
@pytest.mark.parametrize("fn", FUNCS, ids=[f.__name__ for f in FUNCS])
def test_values_match_numpy(fn: Any, backend: str) -> None:
    rng = np.random.default_rng(1)
    for shape, axis in SHAPES:
        x = rng.uniform(0.5, 1.5, shape) * rng.choice([-1.0, 1.0], shape)
        if x.size > 2 and fn.__name__.startswith("nan"):
            x.reshape(-1)[1] = np.nan
        g = lambda x, axis=axis: fn(x, axis=axis)  # noqa: E731
        got, want = yota.compile(g, x, backend=backend)(x), g(x)
        assert got.shape == want.shape and got.dtype == want.dtype
        np.testing.assert_allclose(got, want, rtol=1e-12, atol=1e-12)
    xt = rng.standard_normal((4, 3)).T  # non-contiguous
    np.testing.assert_allclose(yota.compile(lambda x: fn(x, axis=1), xt, backend=backend)(xt),
                               fn(xt, axis=1), rtol=1e-12)


@pytest.mark.parametrize("backend", ["interp", "llvm"])
@pytest.mark.parametrize("fn", FUNCS, ids=[f.__name__ for f in FUNCS])
def test_gradients_match_finite_differences(fn: Any, backend: str) -> None:
    x = np.random.default_rng(2).uniform(0.5, 1.5, (3, 6))

    def loss(x: np.ndarray) -> Any:
        return np.sum(np.sin(fn(x, axis=1)) * np.arange(1.0, 7.0))

    _, g = yota.grad(loss, x, backend=backend)
    assert check_grad(loss, [x], g) == 1


def test_cumprod_with_zeros_is_exact() -> None:
    for x in ([2.0, 0.0, 3.0, 4.0], [0.0, 0.0, 3.0], [2.0, 3.0, 0.0]):
        x = np.array(x)
        _, g = yota.grad(lambda x: np.sum(np.cumprod(x)), x)
        want = [sum(np.prod(np.delete(x[: j + 1], i)) for j in range(i, len(x)))
                for i in range(len(x))]
        assert g[0].tolist() == want


def test_method_forms() -> None:
    x = np.arange(1.0, 7.0).reshape(2, 3)
    f = lambda x: np.sum(x.cumsum(axis=0) * x.cumprod(axis=1)) + np.sum(x.cumprod())  # noqa: E731
    v, g = yota.grad(f, x)
    assert float(v) == pytest.approx(float(f(x)))
    assert check_grad(f, [x], g) == 1


def test_cuda_kernels_emulated() -> None:
    from support.cuda_cases import emulated_mismatches
    from yota.ir.autodiff import vjp

    progs = []
    for fn in FUNCS:
        x = np.random.default_rng(3).uniform(0.5, 1.5, (3, 9))
        _, tape = yota.trace(lambda x, fn=fn: np.sum(np.sin(fn(x, axis=1))), x)
        progs.append((fn.__name__, vjp(yota.to_ir(tape), [0]), [x]))
    bad = emulated_mismatches(progs)
    assert not bad, bad
