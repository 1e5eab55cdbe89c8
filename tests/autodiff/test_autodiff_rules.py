"""Every derivative rule against central finite differences (float64), first and second
order, over shapes with 0-d, size-1 broadcast axes and empty axes."""

from __future__ import annotations

from collections.abc import Callable, Sequence

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra.numpy import mutually_broadcastable_shapes
from yota.ir import Builder, Function, TensorType, Value
from yota.ir.autodiff.check import check_grads, weighted_sum

F64 = "f64"
Build = Callable[[Builder, Sequence[Value]], Value]


def scalar_fn(shapes: Sequence[tuple[int, ...]], body: Build, name: str = "f") -> Function:
    """``sum(body(inputs) * w)`` for fixed random weights: a scalar to differentiate."""
    b = Builder(name)
    xs = [b.input(TensorType(F64, s), f"x{i}") for i, s in enumerate(shapes)]
    return b.build([weighted_sum(b, body(b, xs))])


def uniform(lo: float, hi: float, shape: tuple[int, ...], seed: int = 1) -> np.ndarray:
    return np.random.default_rng(seed).uniform(lo, hi, shape)


def signed(lo: float, hi: float, shape: tuple[int, ...], seed: int = 1) -> np.ndarray:
    """Values of random sign with magnitude in [lo, hi] (away from kinks at 0)."""
    rng = np.random.default_rng(seed)
    return rng.uniform(lo, hi, shape) * rng.choice([-1.0, 1.0], shape)


# -- unary elementwise ----------------------------------------------------------------
UNARY_DOMAINS = {
    "exp": (-2, 2), "expm1": (-2, 2), "log": (0.5, 3), "log1p": (-0.5, 2),
    "log2": (0.5, 3), "sqrt": (0.5, 3), "reciprocal": (0.5, 3), "sin": (-3, 3),
    "cos": (-3, 3), "tan": (-1, 1), "tanh": (-2, 2), "sinh": (-2, 2), "cosh": (-2, 2),
    "arctan": (-2, 2), "arcsin": (-0.8, 0.8), "arccos": (-0.8, 0.8), "square": (-2, 2),
    "neg": (-2, 2),
}
SHAPES = [(), (3,), (1, 4), (2, 3), (0, 3)]


@pytest.mark.parametrize("shape", SHAPES)
@pytest.mark.parametrize("name", sorted(UNARY_DOMAINS))
def test_unary(name: str, shape: tuple[int, ...]) -> None:
    f = scalar_fn([shape], lambda b, xs: b.emit(name, xs[0]))
    check_grads(f, [uniform(*UNARY_DOMAINS[name], shape)], order=2)


@pytest.mark.parametrize("shape", [(), (5,), (2, 3)])
def test_abs(shape: tuple[int, ...]) -> None:
    f = scalar_fn([shape], lambda b, xs: b.abs(xs[0]))
    check_grads(f, [signed(0.2, 2, shape)], order=2)


# -- binary elementwise, with explicit broadcasting -------------------------------------
def bcast(b: Builder, x: Value, y: Value) -> tuple[Value, Value]:
    shape = np.broadcast_shapes(x.shape, y.shape)
    return b.broadcast_to(x, shape), b.broadcast_to(y, shape)


def binary(name: str) -> Build:
    return lambda b, xs: b.emit(name, *bcast(b, xs[0], xs[1]))


BINARY_DOMAINS: dict[str, tuple[Callable[..., np.ndarray], ...]] = {
    "add": (lambda s: uniform(-2, 2, s), lambda s: uniform(-2, 2, s, 2)),
    "sub": (lambda s: uniform(-2, 2, s), lambda s: uniform(-2, 2, s, 2)),
    "mul": (lambda s: uniform(-2, 2, s), lambda s: uniform(-2, 2, s, 2)),
    "div": (lambda s: uniform(-2, 2, s), lambda s: signed(0.5, 2, s, 2)),
    "pow": (lambda s: uniform(0.5, 2, s), lambda s: uniform(-2, 2, s, 2)),
    "mod": (lambda s: uniform(0.1, 5, s), lambda s: signed(0.7, 2, s, 2)),
    "arctan2": (lambda s: uniform(-2, 2, s), lambda s: signed(0.3, 2, s, 2)),
    "maximum": (lambda s: uniform(-2, 2, s), lambda s: uniform(-2, 2, s, 2)),
    "minimum": (lambda s: uniform(-2, 2, s), lambda s: uniform(-2, 2, s, 2)),
}
BINARY_SHAPES = [((), ()), ((3,), (3,)), ((3, 1), (1, 4)), ((), (2, 3)), ((4,), (2, 4)),
                 ((0, 3), (1, 3))]


@pytest.mark.parametrize("shapes", BINARY_SHAPES, ids=str)
@pytest.mark.parametrize("name", sorted(BINARY_DOMAINS))
def test_binary(name: str, shapes: tuple[tuple[int, ...], ...]) -> None:
    f = scalar_fn(shapes, binary(name))
    args = [gen(s) for gen, s in zip(BINARY_DOMAINS[name], shapes, strict=True)]
    check_grads(f, args, order=2)


@settings(max_examples=15, deadline=None)
@given(mutually_broadcastable_shapes(num_shapes=2, max_dims=3, min_side=0, max_side=3),
       st.sampled_from(["add", "mul", "sub", "div", "maximum"]), st.integers(0, 9))
def test_binary_broadcast_hypothesis(shapes: object, name: str, seed: int) -> None:
    sx, sy = shapes.input_shapes  # type: ignore[attr-defined]
    f = scalar_fn([sx, sy], binary(name))
    check_grads(f, [uniform(-2, 2, sx, seed), signed(0.5, 2, sy, seed + 1)], seed=seed)


@pytest.mark.parametrize("shape", [(), (4,), (2, 3)])
def test_select(shape: tuple[int, ...]) -> None:
    cond = np.random.default_rng(0).random(shape) > 0.5
    f = scalar_fn([shape, shape], lambda b, xs: b.select(b.const(cond), b.sin(xs[0]),
                                                         b.exp(xs[1])))
    grads = check_grads(f, [uniform(-1, 1, shape), uniform(-1, 1, shape, 2)], order=2)
    assert grads.attrs["grads"] == (0, 1)


def test_convert_float_to_float_gives_exact_cotangent() -> None:
    b = Builder("f")
    x = b.input(TensorType("f32", (3,)), "x")
    y = b.convert_to(b.convert_to(x, "f64"), "f32")
    f = b.build([b.sum(b.convert_to(b.mul(y, b.const(np.float32([1, 2, 3]))), "f64"),
                       axes=(0,))])
    from yota.ir import run
    from yota.ir.autodiff import vjp

    val, gx = run(vjp(f), np.float32([1, 1, 1]))
    assert gx.dtype == np.float32 and gx.tolist() == [1.0, 2.0, 3.0]


# -- reductions --------------------------------------------------------------------------
REDUCE_CASES = [((), ()), ((4,), (0,)), ((2, 3, 4), (1,)), ((2, 3, 4), (0, 2)),
                ((2, 3, 4), (0, 1, 2)), ((1, 3), (0,)), ((2, 3), ())]


@pytest.mark.parametrize("shape,axes", REDUCE_CASES, ids=str)
@pytest.mark.parametrize("name", ["sum", "prod", "max", "min"])
def test_reduce(name: str, shape: tuple[int, ...], axes: tuple[int, ...]) -> None:
    f = scalar_fn([shape], lambda b, xs: b.emit(name, xs[0], axes=axes))
    check_grads(f, [signed(0.5, 1.5, shape)], order=2)


@pytest.mark.parametrize("axes", [(0,), (1,), (0, 1)])
@pytest.mark.parametrize("name", ["sum", "prod"])
def test_reduce_empty(name: str, axes: tuple[int, ...]) -> None:
    f = scalar_fn([(0, 3)], lambda b, xs: b.emit(name, xs[0], axes=axes))
    check_grads(f, [np.zeros((0, 3))], order=2)


@settings(max_examples=15, deadline=None)
@given(st.lists(st.integers(1, 3), max_size=3), st.data())
def test_reduce_hypothesis(shape: list[int], data: st.DataObject) -> None:
    axes = tuple(sorted(data.draw(st.sets(st.sampled_from(range(len(shape))))
                                  if shape else st.just(set()))))
    name = data.draw(st.sampled_from(["sum", "prod", "max", "min"]))
    f = scalar_fn([tuple(shape)], lambda b, xs: b.emit(name, xs[0], axes=axes))
    check_grads(f, [signed(0.5, 1.5, tuple(shape), len(shape))])


# -- shape ops ---------------------------------------------------------------------------
SHAPE_CASES: list[tuple[str, tuple[int, ...], Build]] = [
    ("reshape", (2, 3), lambda b, xs: b.reshape(xs[0], shape=(3, 2))),
    ("reshape-0d", (), lambda b, xs: b.reshape(xs[0], shape=(1, 1))),
    ("reshape-empty", (0, 3), lambda b, xs: b.reshape(xs[0], shape=(3, 0))),
    ("transpose", (2, 3, 4), lambda b, xs: b.transpose(xs[0], perm=(2, 0, 1))),
    ("broadcast", (3, 1), lambda b, xs: b.broadcast(xs[0], shape=(2, 3, 4))),
    ("broadcast-0d", (), lambda b, xs: b.broadcast(xs[0], shape=(2, 2))),
    ("sum_to", (2, 3, 4), lambda b, xs: b.sum_to(xs[0], shape=(3, 1))),
    ("sum_to-0d", (2, 3), lambda b, xs: b.sum_to(xs[0], shape=())),
    ("slice", (5, 6), lambda b, xs: b.slice(xs[0], start=(1, 0), stop=(5, 6), step=(2, 3))),
    ("slice-empty", (5, 6), lambda b, xs: b.slice(xs[0], start=(2, 1), stop=(2, 5),
                                                  step=(1, 2))),
    ("slice-tail", (7,), lambda b, xs: b.slice(xs[0], start=(1,), stop=(6,), step=(3,))),
    ("flip", (3, 4), lambda b, xs: b.flip(xs[0], axes=(1,))),
    ("flip-both", (3, 4), lambda b, xs: b.flip(xs[0], axes=(0, 1))),
    ("pad", (3, 2), lambda b, xs: b.pad(xs[0], low=(1, 0), high=(2, 3), interior=(1, 2))),
    ("pad-empty", (0, 2), lambda b, xs: b.pad(xs[0], low=(1, 0), high=(2, 1),
                                              interior=(3, 0))),
    ("concatenate", (2, 3), lambda b, xs: b.concatenate(
        xs[0], b.sin(xs[0]), b.slice(xs[0], start=(0, 0), stop=(2, 0), step=(1, 1)),
        axis=1)),
]


@pytest.mark.parametrize("name,shape,body", SHAPE_CASES, ids=[c[0] for c in SHAPE_CASES])
def test_shape_ops(name: str, shape: tuple[int, ...], body: Build) -> None:
    f = scalar_fn([shape], lambda b, xs: b.square(body(b, xs)))
    check_grads(f, [uniform(-2, 2, shape)], order=2)


# -- indexing ----------------------------------------------------------------------------
def test_gather_axis0_repeats_and_negative() -> None:
    idx = np.array([[0, 2], [-1, 0]])
    f = scalar_fn([(4, 3)], lambda b, xs: b.square(b.gather(xs[0], b.const(idx), axis=0)))
    check_grads(f, [uniform(-2, 2, (4, 3))], order=2)


def test_gather_two_index_arrays() -> None:
    i, j = np.array([0, 1, 1, 0]), np.array([2, 0, 0, 3])
    f = scalar_fn([(2, 2, 4)], lambda b, xs: b.sin(b.gather(xs[0], b.const(i), b.const(j),
                                                              axis=1)))
    check_grads(f, [uniform(-2, 2, (2, 2, 4))], order=2)


def test_scatter_add() -> None:
    idx = np.array([1, 1, 3])
    f = scalar_fn([(3, 2)], lambda b, xs: b.square(
        b.scatter_add(xs[0], b.const(idx), axis=0, shape=(5, 2))))
    check_grads(f, [uniform(-2, 2, (3, 2))], order=2)


# -- matmul ------------------------------------------------------------------------------
MATMUL_SHAPES = [((2, 3), (3, 4)), ((2, 3, 4), (2, 4, 5)), ((1, 3), (3, 1)),
                 ((2, 0), (0, 3)), ((0, 2), (2, 3))]


@pytest.mark.parametrize("shapes", MATMUL_SHAPES, ids=str)
def test_matmul(shapes: tuple[tuple[int, ...], ...]) -> None:
    f = scalar_fn(shapes, lambda b, xs: b.tanh(b.matmul(xs[0], xs[1])))
    check_grads(f, [uniform(-1, 1, shapes[0]), uniform(-1, 1, shapes[1], 2)], order=2)
