"""The rule of the differential tests (``precision.py``): every op has a class, the bounds
demand bit for bit equality where an op is exact and are no looser than the op allows
where it is not."""

from __future__ import annotations

import numpy as np
from support import precision
from support.irgen import random_program
from yota.ir import Builder, TensorType, run


def test_every_op_has_a_precision_class() -> None:
    assert precision.unclassified() == []


def _one_ulp_off(x: np.ndarray) -> np.ndarray:
    return np.nextafter(x, np.inf).astype(x.dtype)


def test_exact_ops_must_match_bit_for_bit() -> None:
    b = Builder("f")
    x, y = b.input(TensorType("f64", (5,))), b.input(TensorType("f64", (5,)))
    fn = b.build([b.div(b.mul(x, y), b.emit("add", x, y)), b.transpose(
        b.reshape(x, shape=(5, 1)), perm=(1, 0))])
    args = [np.linspace(1, 2, 5), np.linspace(-3, 3, 5) + 0.1]
    want = run(fn, *args)
    assert [float(np.max(b)) for b in precision.bounds(fn, args)] == [0.0, 0.0]
    assert precision.mismatch(fn, args, want, want) is None
    assert "bit for bit" in str(precision.mismatch(fn, args, [_one_ulp_off(want[0]), want[1]],
                                                   want))
    args0 = [np.zeros(5), np.ones(5)]
    want0 = run(fn, *args0)
    assert precision.mismatch(fn, args0, [-want0[0], want0[1]], want0) is not None  # -0.0


def test_sum_bound_is_n_eps_times_the_sum_of_magnitudes() -> None:
    n = 1000
    b = Builder("s")
    x = b.input(TensorType("f32", (n,)))
    fn = b.build([b.sum(x, axes=(0,))])
    a = np.random.default_rng(0).standard_normal(n).astype(np.float32)
    (bound,) = precision.bounds(fn, [a])
    magnitudes = float(np.sum(np.abs(a.astype(np.float64))))
    eps = float(np.finfo(np.float32).eps)
    assert n * eps * magnitudes <= float(bound) <= (n * eps * magnitudes) * 1.01
    # another order of the same sum is accepted; a difference twice the bound is not
    want = run(fn, a)
    reordered = np.float32(np.sum(np.sort(a)))
    assert precision.mismatch(fn, [a], [np.asarray(reordered)], want) is None
    off = np.asarray(np.float32(want[0] + 2 * bound))
    assert "more than the bound" in str(precision.mismatch(fn, [a], [off], want))


def test_an_exact_op_after_a_sum_carries_its_bound() -> None:
    b = Builder("m")
    A, B = b.input(TensorType("f64", (4, 30))), b.input(TensorType("f64", (30, 3)))
    y = b.tanh(b.mul(b.matmul(A, B), b.const(2.0, "f64", (4, 3))))
    fn = b.build([y])
    rng = np.random.default_rng(1)
    args = [rng.standard_normal((4, 30)), rng.standard_normal((30, 3))]
    (bound,) = precision.bounds(fn, args)
    abs_prod = np.abs(args[0]) @ np.abs(args[1])
    eps = np.finfo(np.float64).eps
    # d tanh(2z) = 2 (1 - tanh^2) dz: the product's 30 eps |A||B|, times the slope, plus
    # a few ulps of the result
    slope = 2 * (1 - run(fn, *args)[0] ** 2)
    assert np.all(bound >= 30 * eps * abs_prod * slope * 0.99)
    assert np.all(bound <= 30 * eps * abs_prod * slope * 1.01 + 20 * np.spacing(1.0))


def test_transcendentals_within_ulps_across_implementations_exact_within_one() -> None:
    b = Builder("t")
    x = b.input(TensorType("f32", (50,)))
    fn = b.build([b.exp(x)])
    a = np.linspace(-5, 5, 50).astype(np.float32)
    want = run(fn, a)
    (across,) = precision.bounds(fn, [a])
    (same,) = precision.bounds(fn, [a], same_impl=True)
    assert np.array_equal(across, precision.ULPS * np.spacing(want[0]).astype(np.float64))
    assert not np.any(same)
    assert precision.mismatch(fn, [a], [_one_ulp_off(want[0])], want) is None
    assert precision.mismatch(fn, [a], [_one_ulp_off(want[0])], want, same_impl=True)


def test_a_step_on_an_inexact_value_is_undetermined_only_near_the_step() -> None:
    b = Builder("c")
    x = b.input(TensorType("f64", (3, 1000)))
    s = b.sum(x, axes=(1,))
    fn = b.build([b.gt(s, b.const(0.0, "f64", (3,)))])
    a = np.random.default_rng(2).standard_normal((3, 1000))
    a[0] -= a[0].mean()   # a sum of about zero: either side
    a[1] += 1.0           # far above
    a[2] -= 1.0           # far below
    (bound,) = precision.bounds(fn, [a])
    assert np.isinf(bound[0]) and bound[1] == 0 and bound[2] == 0
    want = run(fn, a)
    flipped = want[0].copy()
    flipped[0] = ~flipped[0]
    assert precision.mismatch(fn, [a], [flipped], want) is None
    flipped[1] = ~flipped[1]
    assert precision.mismatch(fn, [a], [flipped], want) is not None


def test_layout_dependent_product_of_seed_102_is_within_its_bound() -> None:
    """The program that made the memory-plan test fail on one CPU: a (1x3)@(3x1) product
    whose last bit depends on the operands' layout in OpenBLAS."""
    fn, args = random_program(np.random.default_rng(102))
    assert any(op.name == "matmul" for op in fn.ops)
    want = run(fn, *args)
    bounds = precision.bounds(fn, args, same_impl=True)
    for w, bd in zip(want, bounds, strict=True):
        if w.dtype.kind == "f" and np.any(bd > 0):
            off = np.where(bd > 0, _one_ulp_off(w), w).astype(w.dtype)
            moved = [off if x is w else x for x in want]
            assert precision.mismatch(fn, args, moved, want, same_impl=True) is None


def test_the_sign_of_a_zero_picked_among_zeros_of_both_signs_is_undetermined() -> None:
    """IEEE leaves min(-0.0, 0.0) to the implementation and NumPy's reductions pick by their
    SIMD order: either zero is right there, and 1/min is undetermined; a row of zeros of
    one sign keeps its sign, and values stay exact."""
    b = Builder("m")
    x = b.input(TensorType("f64", (3, 4)))
    m = b.emit("min", x, axes=(1,))
    fn = b.build([m, b.div(b.const(1.0, "f64", (3,)), m)])
    a = np.array([[-0.0, 0.0, 0.0, 0.0], [0.0, 0.0, 1.0, 2.0], [3.0, -1.5, 0.0, -0.0]])
    with np.errstate(divide="ignore"):
        want = run(fn, a)
        other = want[0].copy()
        other[0] = -other[0]
        assert precision.mismatch(fn, [a], [other, 1 / other], want) is None
        for k, v in ((1, -0.0), (2, -1.5 + 2**-50)):  # a determined sign; a value off
            bad = want[0].copy()
            bad[k] = v
            assert precision.mismatch(fn, [a], [bad, 1 / bad], want) is not None
