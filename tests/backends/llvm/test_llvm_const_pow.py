"""The llvm backend's ``pow`` with a constant integer exponent in [-1, 8], emitted as
multiplications (``backends/llvm/vecmath.py``): compared with the float64 (exactly
rounded for these sizes) power of the same inputs, including zeros of both signs,
infinities, NaNs, overflow and underflow, against ``tests/support/precision.py``'s ulp rule for
pow; n = 2 and n = -1 round once (the correctly rounded result exactly); non-integer and
larger exponents still go through the vector pow; gradients of ``z**3`` (whose adjoint
holds ``z**2``) match the interpreter."""

from __future__ import annotations

import numpy as np
import pytest
from support import precision
from yota.backends import llvm as native
from yota.backends.llvm.vecmath import MUL_POW_MAX
from yota.ir import Builder, TensorType, run
from yota.ir.passes import optimize

import yota

DT = {"f32": np.float32, "f64": np.float64}


def _pow_fn(n: float, dtype: str, size: int):
    b = Builder("p")
    x = b.input(TensorType(dtype, (size,)), "x")
    c = b.const(float(n), dtype, (size,))
    # pow then neg (exact): a fused kernel, which holds the constant exponent itself
    return optimize(b.build([b.emit("neg", b.emit("pow", x, c))]))


def _inputs(dtype: str) -> np.ndarray:
    rng = np.random.default_rng(0)
    t = DT[dtype]
    big = np.finfo(t).max ** 0.3
    special = [0.0, -0.0, 1.0, -1.0, np.inf, -np.inf, np.nan, big, -big, 1 / big,
               -1 / big, np.finfo(t).tiny, -np.finfo(t).tiny, 2.0, -2.0, 0.5, -0.5]
    x = np.concatenate([special, rng.standard_normal(1000) * 3,
                        rng.standard_normal(50) * np.finfo(t).max ** (1 / 8)])
    return x.astype(t)


@pytest.mark.parametrize("dtype", ["f32", "f64"])
@pytest.mark.parametrize("n", [-1, 0, 1, 2, 3, 4, 5, 7, MUL_POW_MAX])
def test_integer_power_as_multiplications(n: int, dtype: str) -> None:
    x = _inputs(dtype)
    fn = _pow_fn(n, dtype, x.size)
    ir_text = native.llvm_ir(fn, optimized=True)
    assert "powf" not in ir_text and "_pow" not in ir_text.replace("yota", "")
    got = -native.compile(fn, threads=1)(x)[0]
    with np.errstate(all="ignore"):
        want = np.power(x.astype(np.longdouble), n).astype(x.dtype)  # rounded once
        ref = np.power(x, DT[dtype](n))
    same_special = np.isnan(got) == np.isnan(ref)
    assert same_special.all(), x[~same_special]
    fin = np.isfinite(want) & np.isfinite(got)
    assert np.array_equal(np.isinf(got), np.isinf(want) & ~np.isnan(ref) | np.isinf(ref)) or \
        np.array_equal(np.isinf(got), np.isinf(ref))
    assert (np.signbit(got) == np.signbit(ref))[~np.isnan(ref)].all()
    if n in (-1, 0, 1, 2):  # one IEEE operation: the correctly rounded power itself
        with np.errstate(all="ignore"):
            once = {-1: 1 / x, 0: np.ones_like(x), 1: x, 2: x * x}[n]
        np.testing.assert_array_equal(got, once)
    else:
        ulp = np.spacing(np.abs(want[fin]).astype(x.dtype))
        err = np.abs(got[fin].astype(np.float64) - want[fin].astype(np.float64))
        assert (err <= precision.ULPS * ulp.astype(np.float64)).all()


@pytest.mark.parametrize("n", [2.5, -2.0, MUL_POW_MAX + 1])
def test_other_exponents_keep_the_vector_pow(n: float) -> None:
    x = np.abs(_inputs("f32")[17:]) + 0.5
    fn = _pow_fn(n, "f32", x.size)
    got = -native.compile(fn, threads=1)(x)[0]
    want = -run(fn, x)[0]
    np.testing.assert_allclose(got, want, rtol=precision.ULPS * np.finfo(np.float32).eps)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_gelu_gradient_with_cubes_matches_interpreter(dtype: type) -> None:
    c, a = np.sqrt(2 / np.pi), 0.044715

    def gelu_sum(z: np.ndarray) -> float:
        return np.sum(0.5 * z * (1 + np.tanh(c * (z + a * z**3))))

    z = np.random.default_rng(3).standard_normal((64, 48)).astype(dtype) * 2
    v1, g1 = yota.grad(gelu_sum, z, backend="llvm")
    v2, g2 = yota.grad(gelu_sum, z, backend="interp")
    tol = 1e-5 if dtype == np.float32 else 1e-12
    assert np.isclose(v1, v2, rtol=tol)
    np.testing.assert_allclose(g1, g2, rtol=tol, atol=tol)
