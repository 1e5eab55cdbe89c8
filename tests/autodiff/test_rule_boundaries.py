"""Gradients at the degenerate points of the rules: where a function is not differentiable
or a formula would divide 0 by 0. Each value is the one-sided derivative where that is
the mathematical answer (checked against one-sided finite differences), or the documented
subgradient (docs/guide/semantics.md, "Gradients at degenerate points"):

=======================  ==========================  ==============================
point                    Yota                        JAX / PyTorch
=======================  ==========================  ==============================
sqrt(x) at 0             +inf (one-sided)            inf / inf
log(x) at 0              +inf (one-sided)            inf / inf
abs(x) at 0              0 (sign(0))                 1 / 0
maximum(x, y), x == y    dy/2 to each                1/2 each / 1/2 each
max(x), ties             dy split among the maxima   split / split (amax)
prod(x) with zeros       exact (product of others)   exact / exact
x ** p, p == 0           0 for x                     0 / 0
x ** p, x == 0           0 for p; p x**(p-1) for x   same / same
arctan2(y, x) at (0, 0)  0 for both                  nan / 0
std(x), one element      0                           nan / nan
var(x), one element      0                           0 / nan (ddof)
=======================  ==========================  ==============================
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import pytest

import yota

BACKENDS = ["interp", "llvm"]


def _grad(f: Callable[..., object], *args: object, backend: str) -> list[np.ndarray]:
    _, g = yota.grad(f, *args, backend=backend)
    return [np.asarray(x) for x in g]


def _right_difference(f: Callable[[np.ndarray], float], x: np.ndarray, i: int,
                      h: float = 1e-7) -> float:
    e = np.zeros_like(x)
    e.flat[i] = h
    return (f(x + e) - f(x)) / h


@pytest.mark.parametrize("backend", BACKENDS)
def test_sqrt_and_log_at_zero_are_the_one_sided_infinity(backend: str) -> None:
    x = np.array([0.0, 4.0])
    (g,) = _grad(lambda x: np.sum(np.sqrt(x)), x, backend=backend)
    assert g[0] == np.inf and g[1] == 0.25
    assert _right_difference(lambda x: float(np.sum(np.sqrt(x))), x, 0, 1e-12) > 1e5
    (g,) = _grad(lambda x: np.sum(np.log(x)), x, backend=backend)
    assert g[0] == np.inf and g[1] == 0.25


@pytest.mark.parametrize("backend", BACKENDS)
def test_abs_at_zero_is_zero(backend: str) -> None:
    (g,) = _grad(lambda x: np.sum(np.abs(x)), np.array([-2.0, 0.0, 3.0, -0.0]),
                 backend=backend)
    assert g.tolist() == [-1.0, 0.0, 1.0, 0.0]


@pytest.mark.parametrize("backend", BACKENDS)
def test_ties_split_the_cotangent(backend: str) -> None:
    x = np.array([1.0, 3.0, 3.0, -1.0])
    (g,) = _grad(lambda x: np.max(x) * 2.0, x, backend=backend)
    assert g.tolist() == [0.0, 1.0, 1.0, 0.0]
    (g,) = _grad(lambda x: np.min(x * x), np.array([1.0, -1.0, 2.0]), backend=backend)
    assert g.tolist() == [1.0, -1.0, 0.0]
    gx, gy = _grad(lambda x, y: np.sum(np.maximum(x, y)), np.array([1.0, 2.0, 5.0]),
                   np.array([1.0, 3.0, 4.0]), backend=backend)
    assert gx.tolist() == [0.5, 0.0, 1.0] and gy.tolist() == [0.5, 1.0, 0.0]


@pytest.mark.parametrize("backend", BACKENDS)
def test_prod_with_zeros_is_the_product_of_the_others(backend: str) -> None:
    for x, want in (([2.0, 0.0, 3.0], [0.0, 6.0, 0.0]), ([0.0, 0.0, 3.0], [0.0, 0.0, 0.0]),
                    ([2.0, -1.0, 3.0], [-3.0, 6.0, -2.0])):
        (g,) = _grad(lambda x: np.prod(x), np.array(x), backend=backend)
        assert g.tolist() == want
        for i in range(3):  # a polynomial: the difference quotient is exact up to rounding
            fd = _right_difference(lambda x: float(np.prod(x)), np.array(x), i, 1e-6)
            assert abs(fd - want[i]) < 1e-5


@pytest.mark.parametrize("backend", BACKENDS)
def test_pow_with_a_zero_base_or_exponent(backend: str) -> None:
    x, p = np.array([0.0, 0.0, 0.0, 2.0]), np.array([2.0, 0.5, 0.0, 0.0])
    gx, gp = _grad(lambda x, p: np.sum(x ** p), x, p, backend=backend)
    assert gx.tolist() == [0.0, np.inf, 0.0, 0.0]
    assert gp.tolist() == [0.0, 0.0, 0.0, float(np.log(2.0))]


@pytest.mark.parametrize("backend", BACKENDS)
def test_arctan2_at_the_origin_is_zero(backend: str) -> None:
    y, x = np.array([0.0, 1.0]), np.array([0.0, 1.0])
    gy, gx = _grad(lambda y, x: np.sum(np.arctan2(y, x)), y, x, backend=backend)
    assert gy.tolist() == [0.0, 0.5] and gx.tolist() == [0.0, -0.5]


def test_arctan2_second_order_has_no_nan_at_the_origin() -> None:
    from yota.ir import Builder, TensorType, run
    from yota.ir.autodiff import vjp
    from yota.ir.passes import optimize

    b = Builder("atan2")
    y, x = b.input(TensorType("f64", (2,))), b.input(TensorType("f64", (2,)))
    first = vjp(b.build([b.sum(b.emit("arctan2", y, x), axes=(0,))]), [0, 1])
    b = Builder("dsum")
    ins = [b.input(v.type) for v in first.inputs]
    outs = b.call(first, *ins)
    h = optimize(b.build([b.emit("add", b.sum(outs[1], axes=(0,)), b.sum(outs[2], axes=(0,)))]),
                 ["inline"])
    second = run(vjp(h, [0, 1]), np.array([0.0, 1.0]), np.array([0.0, 2.0]))
    assert all(np.all(np.isfinite(v)) for v in second)  # undefined there, but no NaN


@pytest.mark.parametrize("backend", BACKENDS)
def test_std_and_var_of_equal_values_have_a_zero_gradient(backend: str) -> None:
    for x in (np.array([3.0]), np.full(4, 2.0), np.full((2, 3), -1.0)):
        for f in (np.std, np.var, lambda x: np.std(x, axis=0), lambda x: np.var(x, axis=-1)):
            v, (g,) = yota.grad(lambda x, f=f: np.sum(f(x)), x, backend=backend)
            assert float(v) == 0.0 and not np.any(g), (f, x)


@pytest.mark.parametrize("backend", BACKENDS)
def test_std_elsewhere_matches_finite_differences(backend: str) -> None:
    x = np.array([1.0, 2.0, 4.0, -0.5])
    _, (g,) = yota.grad(lambda x: np.std(x, ddof=1), x, backend=backend)
    fd = [(np.std(x + e, ddof=1) - np.std(x - e, ddof=1)) / 2e-6 for e in np.eye(4) * 1e-6]
    np.testing.assert_allclose(g, fd, rtol=1e-6)
