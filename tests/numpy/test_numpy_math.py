"""The real-valued math of ``yota.numpy.mathfuncs`` against NumPy itself and against
finite differences: inverse hyperbolics, exp2, logaddexp(2), hypot, fmax/fmin, fabs, sinc,
degree conversions, nan_to_num, copysign, heaviside, cbrt, trunc/fix, ldexp,
float_power, real/imag/conj/angle.

- values equal NumPy's (within 1e-13 relative in float64 and 1e-6 in float32: each is a
  composition of a few correctly rounded or few-ulp ops), NaN and infinities in the same
  places, over special values (0, -0.0, +-inf, NaN, huge, tiny), 0-d, empty, broadcast
  (size-1) and non-contiguous operands, on the interp and llvm backends;
- gradients match central finite differences (float64) at regular points, first and
  second order;
- every gradient program compiles through NVRTC and runs under the CUDA emulation,
  matching the interpreter (``tests/support/precision.py``).
"""

from __future__ import annotations

import warnings
from collections.abc import Callable
from typing import Any

import numpy as np
import pytest
from support.gradcheck import check_grad

import yota

SPECIAL = np.array([0.0, -0.0, np.inf, -np.inf, np.nan, 1e300, -1e300, 1e-300, 0.5, -2.5])

# name -> (function, arity, domain of regular points for gradients (low, high))
UNARY: dict[str, tuple[Callable[..., Any], tuple[float, float]]] = {
    "arcsinh": (np.arcsinh, (-4, 4)), "arccosh": (np.arccosh, (1.1, 6)),
    "arctanh": (np.arctanh, (-0.9, 0.9)), "sinc": (np.sinc, (-3, 3)),
    "cbrt": (np.cbrt, (0.2, 8)), "fabs": (np.fabs, (0.2, 3)),
    "deg2rad": (np.deg2rad, (-200, 200)), "radians": (np.radians, (-200, 200)),
    "rad2deg": (np.rad2deg, (-4, 4)), "degrees": (np.degrees, (-4, 4)),
    "exp2": (np.exp2, (-5, 5)), "real": (np.real, (-3, 3)), "conj": (np.conj, (-3, 3)),
    "conjugate": (np.conjugate, (-3, 3)), "imag": (np.imag, (-3, 3)),
    "angle": (np.angle, (0.5, 3)), "real_if_close": (np.real_if_close, (-3, 3)),
    "nan_to_num": (np.nan_to_num, (-3, 3)), "trunc": (np.trunc, (0.1, 0.9)),
    "fix": (np.fix, (0.1, 0.9)),
}
BINARY: dict[str, tuple[Callable[..., Any], tuple[float, float]]] = {
    "logaddexp": (np.logaddexp, (-4, 4)), "logaddexp2": (np.logaddexp2, (-4, 4)),
    "hypot": (np.hypot, (0.5, 4)), "fmax": (np.fmax, (-3, 3)), "fmin": (np.fmin, (-3, 3)),
    "copysign": (np.copysign, (0.5, 3)), "heaviside": (np.heaviside, (0.5, 3)),
    "float_power": (np.float_power, (0.5, 3)), "fmod": (np.fmod, (0.5, 3)),
}
BACKENDS = ["interp", "llvm"]


def _like_numpy(got: Any, want: Any, dtype: Any) -> None:
    got, want = np.asarray(got), np.asarray(want)
    assert got.shape == want.shape and got.dtype == want.dtype, (got.dtype, want.dtype)
    rtol = 1e-13 if want.dtype == np.float64 else 1e-6
    np.testing.assert_allclose(got, want, rtol=rtol, atol=0, equal_nan=True)
    finite = np.isfinite(want) & (want != 0)
    assert np.array_equal(np.signbit(got[finite]), np.signbit(want[finite]))


def _np(f: Callable[..., Any], *args: Any) -> Any:
    with warnings.catch_warnings(), np.errstate(all="ignore"):
        warnings.simplefilter("ignore")
        return f(*args)


def _shapes(arity: int) -> list[tuple[tuple[int, ...], ...]]:
    if arity == 1:
        return [((),), ((0,),), ((10,),), ((3, 4),)]
    return [((), ()), ((0,), (0,)), ((10,), (10,)), ((3, 1), (1, 4)), ((), (5,))]


def _args(rng: np.random.Generator, shapes: tuple[tuple[int, ...], ...], dtype: Any,
          special: bool) -> list[np.ndarray]:
    out = []
    for s in shapes:
        x = rng.standard_normal(s) * 3
        if special and x.size:
            flat = x.reshape(-1)
            flat[: min(flat.size, len(SPECIAL))] = rng.permutation(SPECIAL)[: flat.size]
        with np.errstate(over="ignore"):  # 1e300 in float32: inf, a special value too
            out.append(x.astype(dtype))
    return out


ROWS = [(n, f, 1) for n, (f, _) in UNARY.items()] + [(n, f, 2) for n, (f, _) in BINARY.items()]


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("name,f,arity", ROWS, ids=[r[0] for r in ROWS])
def test_values_match_numpy(name: str, f: Callable[..., Any], arity: int, backend: str) -> None:
    rng = np.random.default_rng(len(name))
    for dtype in (np.float64, np.float32):
        for shapes in _shapes(arity):
            args = _args(rng, shapes, dtype, special=True)
            if name == "float_power":
                args[0] = np.abs(args[0])  # a negative base to a fractional power: NaN
            cf = yota.compile(lambda *a: f(*a), *args, backend=backend)
            _like_numpy(cf(*args), _np(f, *args), dtype)
            other = [np.asarray(a).T.copy().T if a.ndim > 1 else a for a in
                     _args(rng, shapes, dtype, special=True)]
            if name == "float_power":
                other[0] = np.abs(other[0])
            _like_numpy(cf(*other), _np(f, *other), dtype)


def test_values_on_non_contiguous_operands() -> None:
    rng = np.random.default_rng(5)
    x = (rng.standard_normal((6, 8)) * 3)[::2, 1::2]  # strided
    y = (rng.standard_normal((4, 3)) * 3).T  # transposed
    for f, _ in UNARY.values():
        _like_numpy(yota.compile(f, x)(x), _np(f, x), np.float64)
    for name, (f, _) in BINARY.items():
        a = np.abs(x) if name == "float_power" else x
        _like_numpy(yota.compile(f, a, y)(a, y), _np(f, a, y), np.float64)


def _regular(rng: np.random.Generator, domain: tuple[float, float], shape: tuple[int, ...]
             ) -> np.ndarray:
    return rng.uniform(*domain, shape)


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("name,f,arity", ROWS, ids=[r[0] for r in ROWS])
def test_gradients_match_finite_differences(name: str, f: Callable[..., Any], arity: int,
                                            backend: str) -> None:
    domain = (UNARY if arity == 1 else BINARY)[name][1]
    rng = np.random.default_rng(7 + len(name))
    args = [_regular(rng, domain, (5,)) for _ in range(arity)]
    if name in ("fmax", "fmin"):
        args[1] = args[0] + rng.choice([-1.0, 1.0], 5)  # no ties: differentiable

    def loss(*a: Any) -> Any:
        return np.sum(np.sin(f(*a)) * np.arange(1.0, 6.0))

    _, g = yota.grad(loss, *args, backend=backend)
    assert check_grad(loss, args, g) == arity or name in ("heaviside",)


def _loss_programs() -> list[tuple[str, Any, list[np.ndarray]]]:
    """Each function's loss ``sum(sin(f(...)))`` as IR, at regular points."""
    out = []
    for name, f, arity in ROWS:
        domain = (UNARY if arity == 1 else BINARY)[name][1]
        rng = np.random.default_rng(11)
        args = [_regular(rng, domain, (7,)) for _ in range(arity)]
        if name in ("fmax", "fmin"):
            args[1] = args[0] + rng.choice([-1.0, 1.0], 7)
        _, tape = yota.trace(lambda *a, f=f: np.sum(np.sin(f(*a))), *args)
        out.append((name, yota.to_ir(tape), args))
    return out


def test_second_order_matches_finite_differences() -> None:
    from yota.ir.autodiff.check import check_grads

    for _, fn, args in _loss_programs():
        check_grads(fn, args, order=2, rtol=1e-4, atol=1e-6)


def test_cuda_kernels_compile_and_run_emulated() -> None:
    from support.cuda_cases import emulated_mismatches, nvrtc_compiles
    from yota.ir.autodiff import vjp

    progs = [(name, vjp(fn, list(range(len(args)))), args) for name, fn, args in
             _loss_programs()]
    nvrtc_compiles([g for _, g, _ in progs])
    bad = emulated_mismatches(progs)
    assert not bad, bad[:3]


@pytest.mark.parametrize("backend", BACKENDS)
def test_ldexp_with_integer_exponents(backend: str) -> None:
    x = np.array([1.5, -0.75, 0.0, 3.0])
    i = np.array([3, -2, 5, 0])
    _like_numpy(yota.compile(np.ldexp, x, i, backend=backend)(x, i), np.ldexp(x, i),
                np.float64)
    _, g = yota.grad(lambda x: np.sum(np.ldexp(x, i)), x, backend=backend)
    assert g[0].tolist() == (2.0 ** i).tolist()
