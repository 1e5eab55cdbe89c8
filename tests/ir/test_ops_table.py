"""Every op of the IR's op table: the reference interpreter on Builder-built programs
equals NumPy on random inputs (0-d, size-1 and empty axes, non-contiguous views, float32
and float64), and type inference refuses mismatched operands with an ``IRTypeError``
that quotes their types. ``test_every_op_is_covered`` fails when an op has no test.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable
from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from support.op_families import (
    BINARY,
    COMPARE,
    FLOAT_UNARY,
    LOGIC,
    NUMERIC_UNARY,
    PREDICATES,
    REDUCTIONS,
    kernel_body,
    two_output_callee,
)
from yota.ir import (
    OPS,
    Builder,
    Function,
    GuardFailed,
    IRTypeError,
    TensorType,
    Value,
    VerifyError,
    make_op,
    run,
    type_of,
    verify,
)

F32, F64 = np.dtype(np.float32), np.dtype(np.float64)
I32, I64, BOOL = np.dtype(np.int32), np.dtype(np.int64), np.dtype(np.bool_)
FLOATS = [F32, F64]
SHAPES = [(), (1,), (4,), (0,), (2, 3), (3, 1), (1, 0, 2), (2, 1, 3)]
SETTINGS = settings(max_examples=25, deadline=None, derandomize=True)

shapes = st.sampled_from(SHAPES)
floats = st.sampled_from(FLOATS)
layouts = st.sampled_from(["c", "T", "s"])
seeds = st.integers(0, 2**32 - 1)


# -- inputs and running ---------------------------------------------------------------------
def view(a: np.ndarray, layout: str) -> np.ndarray:
    """``a``'s values as a transposed or strided (non-contiguous) view."""
    if layout == "T" and a.ndim >= 2:
        return np.ascontiguousarray(a.T).T
    if layout in ("T", "s") and a.ndim >= 1:
        big = np.zeros(a.shape[:-1] + (2 * a.shape[-1],), a.dtype)
        big[..., ::2] = a
        return big[..., ::2]
    return a


def sample(rng: np.random.Generator, shape: tuple[int, ...], dtype: np.dtype,
           domain: str = "n", layout: str = "c") -> np.ndarray:
    if dtype == BOOL:
        a = rng.random(shape) < 0.5
    elif dtype.kind == "i":
        a = rng.integers(-5 if domain == "n" else 1, 6, shape)
    else:
        a = {"n": lambda: rng.standard_normal(shape) * 2,
             "p": lambda: rng.uniform(0.1, 4.0, shape),
             "u": lambda: rng.uniform(-0.99, 0.99, shape),
             "s": lambda: rng.choice([0.0, -0.0, 1.5, -2.0, np.nan, np.inf, -np.inf], shape),
             }[domain]()
    return view(np.asarray(a, dtype), layout)


def build(make: Callable[..., Any], *args: np.ndarray, name: str = "t") -> Function:
    """A function of ``args``' types whose outputs are ``make(builder, *inputs)``."""
    b = Builder(name)
    vals = [b.input(type_of(a)) for a in args]
    res = make(b, *vals)
    return verify(b.build(list(res) if isinstance(res, (tuple, list)) else [res]))


def assert_runs_as(make: Callable[..., Any], args: list[np.ndarray],
                   expected: list[Any] | Any) -> Function:
    fn = build(make, *args)
    outs = run(fn, *args)
    expected = expected if isinstance(expected, list) else [expected]
    assert len(outs) == len(expected)
    for got, want, v in zip(outs, expected, fn.outputs, strict=True):
        want = np.asarray(want)
        assert got.dtype == want.dtype == v.type.dtype, (got.dtype, want.dtype, v.type)
        assert got.shape == want.shape == v.type.shape, (got.shape, want.shape, v.type)
        np.testing.assert_array_equal(got, want)
    return fn


COVERED: set[str] = set()


def covers(*names: str) -> Callable[[Any], Any]:
    """Mark a test as the test of ops ``names`` (checked by test_every_op_is_covered)."""
    COVERED.update(names)
    return lambda f: f


# -- elementwise -------------------------------------------------------------------------------


@covers(*FLOAT_UNARY)
@pytest.mark.parametrize("op", sorted(FLOAT_UNARY))
@SETTINGS
@given(shape=shapes, dtype=floats, layout=layouts, seed=seeds)
def test_float_unary(op: str, shape: tuple[int, ...], dtype: np.dtype, layout: str,
                     seed: int) -> None:
    fn, domain = FLOAT_UNARY[op]
    x = sample(np.random.default_rng(seed), shape, dtype, domain, layout)
    with np.errstate(all="ignore"):
        assert_runs_as(lambda b, v: b.emit(op, v), [x], fn(x))


@covers(*NUMERIC_UNARY)
@pytest.mark.parametrize("op", sorted(NUMERIC_UNARY))
@SETTINGS
@given(shape=shapes, dtype=st.sampled_from([F32, F64, I32, I64]), layout=layouts, seed=seeds)
def test_numeric_unary(op: str, shape: tuple[int, ...], dtype: np.dtype, layout: str,
                       seed: int) -> None:
    x = sample(np.random.default_rng(seed), shape, dtype, "n", layout)
    assert_runs_as(lambda b, v: b.emit(op, v), [x], NUMERIC_UNARY[op](x))


@covers(*PREDICATES, "not")
@pytest.mark.parametrize("op", sorted(PREDICATES) + ["not"])
@SETTINGS
@given(shape=shapes, dtype=floats, layout=layouts, seed=seeds)
def test_predicates_and_not(op: str, shape: tuple[int, ...], dtype: np.dtype, layout: str,
                            seed: int) -> None:
    rng = np.random.default_rng(seed)
    if op == "not":
        x = sample(rng, shape, BOOL, layout=layout)
        assert_runs_as(lambda b, v: b.emit("not", v), [x], np.logical_not(x))
    else:
        x = sample(rng, shape, dtype, "s", layout)
        assert_runs_as(lambda b, v: b.emit(op, v), [x], PREDICATES[op](x))


def _pair(rng: np.random.Generator, shape: tuple[int, ...], dtype: np.dtype, domain: str,
          layout: str) -> list[np.ndarray]:
    return [sample(rng, shape, dtype, domain, layout), sample(rng, shape, dtype, domain, "c")]


@covers(*BINARY)
@pytest.mark.parametrize("op", sorted(BINARY))
@SETTINGS
@given(shape=shapes, dtype=floats, layout=layouts, seed=seeds)
def test_binary(op: str, shape: tuple[int, ...], dtype: np.dtype, layout: str,
                seed: int) -> None:
    fn, domain = BINARY[op]
    x, y = _pair(np.random.default_rng(seed), shape, dtype, domain, layout)
    with np.errstate(all="ignore"):
        assert_runs_as(lambda b, u, v: b.emit(op, u, v), [x, y], fn(x, y))


@pytest.mark.parametrize("op", ["add", "sub", "mul", "pow", "floordiv", "mod", "maximum",
                                "minimum"])
@SETTINGS
@given(shape=shapes, dtype=st.sampled_from([I32, I64]), seed=seeds)
def test_binary_on_integers(op: str, shape: tuple[int, ...], dtype: np.dtype,
                            seed: int) -> None:
    x, y = _pair(np.random.default_rng(seed), shape, dtype, "p", "c")
    fn = BINARY[op][0]
    assert_runs_as(lambda b, u, v: b.emit(op, u, v), [x, y], fn(x, y))


@covers(*COMPARE, *LOGIC)
@pytest.mark.parametrize("op", sorted(COMPARE) + sorted(LOGIC))
@SETTINGS
@given(shape=shapes, dtype=st.sampled_from([F32, F64, I64]), layout=layouts, seed=seeds)
def test_compare_and_logic(op: str, shape: tuple[int, ...], dtype: np.dtype, layout: str,
                           seed: int) -> None:
    rng = np.random.default_rng(seed)
    x, y = _pair(rng, shape, BOOL if op in LOGIC else dtype, "n", layout)
    if op in COMPARE:
        y = np.where(rng.random(shape) < 0.3, x, y)  # some equal elements
    fn = COMPARE.get(op) or LOGIC[op]
    assert_runs_as(lambda b, u, v: b.emit(op, u, v), [x, y], fn(x, y))


@covers("select")
@SETTINGS
@given(shape=shapes, dtype=floats, layout=layouts, seed=seeds)
def test_select(shape: tuple[int, ...], dtype: np.dtype, layout: str, seed: int) -> None:
    rng = np.random.default_rng(seed)
    c = sample(rng, shape, BOOL, layout=layout)
    x, y = _pair(rng, shape, dtype, "s", layout)
    assert_runs_as(lambda b, *v: b.select(*v), [c, x, y], np.where(c, x, y))


@covers("convert")
@pytest.mark.parametrize("src, dst", list(itertools.product([BOOL, I32, I64, F32, F64],
                                                            repeat=2)))
@SETTINGS
@given(shape=shapes, seed=seeds)
def test_convert(src: np.dtype, dst: np.dtype, shape: tuple[int, ...], seed: int) -> None:
    x = sample(np.random.default_rng(seed), shape, src, "n")
    assert_runs_as(lambda b, v: b.emit("convert", v, dtype=dst), [x], x.astype(dst))


# -- constants, guards, calls, fused kernels ---------------------------------------------------
CONSTS = [np.array(np.nan), np.array(-0.0), np.array([np.inf, -np.inf, -0.0, 0.0, np.nan]),
          np.full((2, 3), -0.0), np.full((3,), np.nan, np.float32), np.array(0.1, np.float32),
          np.array([1e-45, 3.4e38, -1.5], np.float32), np.array([5e-324, 1.7976931348623157e308]),
          np.arange(6, dtype=np.int32).reshape(2, 3), np.array([-(2**62), 2**62]),
          np.array([True, False]), np.zeros((0, 3)), np.full((2, 2), True), np.array(7)]


@covers("const")
@pytest.mark.parametrize("value", CONSTS, ids=range(len(CONSTS)))
def test_const(value: np.ndarray) -> None:
    fn = build(lambda b: b.emit("const", value=value))
    (out,) = run(fn)
    assert out.dtype == value.dtype and out.shape == value.shape
    assert out.tobytes() == value.tobytes()  # bit for bit: -0.0 and NaN kept


@covers("iota")
@pytest.mark.parametrize("shape", [(1,), (4,), (0,), (2, 3), (3, 1), (1, 0, 2), (2, 1, 3)])
def test_iota(shape: tuple[int, ...]) -> None:
    """The index along each axis, as np.indices gives it, in each dtype."""
    for axis, dt in itertools.product(range(len(shape)), [I32, I64, F32, F64]):
        fn = build(lambda b, a=axis, d=dt: b.iota(shape=shape, axis=a, dtype=d))
        (out,) = run(fn)
        want = np.indices(shape, dtype=np.int64)[axis].astype(dt)
        assert out.dtype == dt and out.shape == shape
        np.testing.assert_array_equal(out, want)


@pytest.mark.parametrize("attrs, match", [
    ({"shape": (), "axis": 0, "dtype": I64}, "axis 0 is out of range"),
    ({"shape": (2, 3), "axis": 2, "dtype": I64}, "axis 2 is out of range"),
    ({"shape": (2, 3), "axis": -1, "dtype": I64}, "axis -1 is out of range"),
    ({"shape": (2, -3), "axis": 0, "dtype": I64}, "sizes >= 0"),
    ({"shape": (2,), "axis": 0, "dtype": BOOL}, "integer or float"),
])
def test_iota_refuses(attrs: dict[str, Any], match: str) -> None:
    with pytest.raises(IRTypeError, match=match):
        make_op("iota", [], attrs)


def test_builder_const_splat() -> None:
    fn = build(lambda b: b.const(-0.0, F32, (2, 3)))
    (out,) = run(fn)
    assert out.shape == (2, 3) and out.dtype == F32 and np.all(np.signbit(out))


@covers("guard")
@pytest.mark.parametrize("kind, expected, good, bad", [
    ("bool", True, np.array(True), np.array(False)),
    ("bool", False, np.array([0.0]), np.array([2.5])),
    ("int", 3, np.array(3), np.array(4)),
    ("int", 1, np.array([[1.7]], np.float32), np.array([[2.1]], np.float32)),
    ("float", 0.5, np.array(0.5), np.array(0.25)),
    ("float", float("nan"), np.array(np.nan), np.array(0.0)),
])
def test_guard(kind: str, expected: Any, good: np.ndarray, bad: np.ndarray) -> None:
    def make(b: Builder, v: Value) -> Value:
        b.guard(v, expected=expected, kind=kind)
        return b.neg(b.convert_to(v, F64))

    fn = build(make, good)
    np.testing.assert_array_equal(run(fn, good)[0], -good.astype(F64))
    with pytest.raises(GuardFailed, match=f"{kind}.*{expected}"):
        run(fn, bad)


@covers("call")
@SETTINGS
@given(seed=seeds)
def test_call(seed: int) -> None:
    rng = np.random.default_rng(seed)
    x, y = sample(rng, (2, 3), F64, layout="T"), sample(rng, (3,), F64)
    callee = two_output_callee()
    fn = assert_runs_as(lambda b, u, v: b.call(callee, u, v) + b.call(callee, u, v),
                        [x, y], [x + y, np.sum(x + y, axis=1)] * 2)
    assert list(fn.callees) == ["two"]


@covers("fused")
@SETTINGS
@given(seed=seeds, layout=layouts)
def test_fused(seed: int, layout: str) -> None:
    rng = np.random.default_rng(seed)
    x, y = sample(rng, (2, 3), F32, layout=layout), sample(rng, (3,), F32, layout=layout)
    body = kernel_body()

    def make(b: Builder, u: Value, v: Value) -> tuple[Value, ...]:
        b.callees["k"] = body
        op = make_op("fused", [u, v], {"callee": "k"}, result_types=body.output_types)
        return b.append(op).results

    s = np.tanh(x * y) + np.float32(1.0)
    assert_runs_as(make, [x, y], [s, np.sum(s, axis=1)])


@covers("loop")
@SETTINGS
@given(seed=seeds, layout=layouts, reverse=st.booleans(), length=st.sampled_from([0, 1, 4]))
def test_loop(seed: int, layout: str, reverse: bool, length: int) -> None:
    """A carried value ``c = c * w + xs[i]``, a stacked output ``tanh(c)`` per step and an
    invariant ``w``, run forward or in reverse (step ``i`` reads and writes slice ``i``)."""
    from yota.ir.loops import loop_op

    rng = np.random.default_rng(seed)
    c0, w = sample(rng, (3,), F64), sample(rng, (3,), F64)
    xs = view(sample(rng, (length, 3), F64), layout)
    body = Builder("step")
    c, x, v = (body.input(TensorType(F64, (3,))) for _ in range(3))
    nxt = body.add(body.mul(c, v), x)
    step = body.build([nxt, body.tanh(nxt)])

    def make(b: Builder, u: Value, s: Value, iw: Value) -> tuple[Value, ...]:
        b.callees[step.name] = step
        return b.append(loop_op(step, [u, s, iw], length=length, carries=1, stacked=1,
                                reverse=reverse)).results

    h, ys = c0, np.zeros((length, 3))
    for i in (reversed(range(length)) if reverse else range(length)):
        h = h * w + xs[i]
        ys[i] = np.tanh(h)
    assert_runs_as(make, [c0, xs, w], [h, ys])


# -- shape ops ---------------------------------------------------------------------------------
@covers("reshape")
@SETTINGS
@given(shape=shapes, dtype=floats, layout=layouts, seed=seeds)
def test_reshape(shape: tuple[int, ...], dtype: np.dtype, layout: str, seed: int) -> None:
    rng = np.random.default_rng(seed)
    x = sample(rng, shape, dtype, layout=layout)
    for new in [(x.size,), (1, x.size, 1), x.shape[::-1], ()][: 4 if x.size == 1 else 3]:
        assert_runs_as(lambda b, v, new=new: b.reshape(v, shape=new), [x],
                       np.array(x).reshape(new))


@covers("transpose")
@SETTINGS
@given(shape=shapes, dtype=floats, layout=layouts, seed=seeds)
def test_transpose(shape: tuple[int, ...], dtype: np.dtype, layout: str, seed: int) -> None:
    rng = np.random.default_rng(seed)
    x = sample(rng, shape, dtype, layout=layout)
    perm = tuple(int(p) for p in rng.permutation(x.ndim))
    assert_runs_as(lambda b, v: b.transpose(v, perm=perm), [x], np.transpose(x, perm))


@covers("broadcast", "sum_to")
@SETTINGS
@given(shape=shapes, dtype=floats, layout=layouts, seed=seeds, lead=st.integers(0, 2))
def test_broadcast_and_sum_to(shape: tuple[int, ...], dtype: np.dtype, layout: str, seed: int,
                              lead: int) -> None:
    rng = np.random.default_rng(seed)
    small = tuple(1 if rng.random() < 0.5 else s for s in shape)
    big = tuple(int(n) for n in rng.integers(0, 3, lead)) + shape
    x = sample(rng, small, dtype, layout=layout)
    assert_runs_as(lambda b, v: b.broadcast(v, shape=big), [x], np.broadcast_to(x, big))
    y = sample(rng, big, dtype, layout=layout)
    axes = tuple(range(lead)) + tuple(lead + i for i, s in enumerate(small)
                                      if s == 1 and big[lead + i] != 1)
    want = np.sum(y, axis=axes, keepdims=True).reshape(small) if y.ndim else y
    assert_runs_as(lambda b, v: b.sum_to(v, shape=small), [y], want.astype(dtype))


@covers("slice", "flip")
@SETTINGS
@given(shape=shapes, dtype=floats, layout=layouts, seed=seeds)
def test_slice_and_flip(shape: tuple[int, ...], dtype: np.dtype, layout: str,
                        seed: int) -> None:
    rng = np.random.default_rng(seed)
    x = sample(rng, shape, dtype, layout=layout)
    start = tuple(int(rng.integers(0, d + 1)) for d in shape)
    stop = tuple(int(rng.integers(a, d + 1)) for a, d in zip(start, shape, strict=True))
    step = tuple(int(rng.integers(1, 4)) for _ in shape)
    want = x[tuple(slice(a, c, s) for a, c, s in zip(start, stop, step, strict=True))]
    assert_runs_as(lambda b, v: b.slice(v, start=start, stop=stop, step=step), [x], want)
    axes = tuple(i for i in range(x.ndim) if rng.random() < 0.5)
    assert_runs_as(lambda b, v: b.flip(v, axes=axes), [x], x[tuple(
        slice(None, None, -1) if i in axes else slice(None) for i in range(x.ndim))])


@covers("pad")
@SETTINGS
@given(shape=shapes, dtype=floats, layout=layouts, seed=seeds)
def test_pad(shape: tuple[int, ...], dtype: np.dtype, layout: str, seed: int) -> None:
    rng = np.random.default_rng(seed)
    x = sample(rng, shape, dtype, layout=layout)
    low, high, interior = ([int(v) for v in rng.integers(0, 3, x.ndim)] for _ in range(3))
    want = np.asarray(x)
    for ax, it in enumerate(interior):  # interior zeros: spread the elements out
        if want.shape[ax] > 1 and it:
            idx = np.repeat(np.arange(1, want.shape[ax]), it)
            want = np.insert(want, idx, 0, axis=ax)
    want = np.pad(want, list(zip(low, high, strict=True))) if x.ndim else want
    assert_runs_as(lambda b, v: b.pad(v, low=low, high=high, interior=interior), [x], want)


@covers("concatenate")
@SETTINGS
@given(shape=st.sampled_from([s for s in SHAPES if s]), dtype=floats, layout=layouts,
       seed=seeds, n=st.integers(1, 3))
def test_concatenate(shape: tuple[int, ...], dtype: np.dtype, layout: str, seed: int,
                     n: int) -> None:
    rng = np.random.default_rng(seed)
    axis = int(rng.integers(0, len(shape)))
    xs = [sample(rng, shape[:axis] + (int(rng.integers(0, 3)),) + shape[axis + 1:], dtype,
                 layout=layout) for _ in range(n)]
    assert_runs_as(lambda b, *v: b.concatenate(*v, axis=axis), xs, np.concatenate(xs, axis))


# -- indexing ----------------------------------------------------------------------------------
@covers("gather", "scatter_add")
@SETTINGS
@given(dtype=floats, layout=layouts, seed=seeds, axis=st.integers(0, 2), k=st.integers(1, 2),
       ishape=st.sampled_from([(), (4,), (0,), (2, 3)]))
def test_gather_and_scatter_add(dtype: np.dtype, layout: str, seed: int, axis: int, k: int,
                                ishape: tuple[int, ...]) -> None:
    rng = np.random.default_rng(seed)
    shape = (3, 4, 2, 1)
    axis = min(axis, 4 - k)
    x = sample(rng, shape, dtype, layout=layout)
    idx = [rng.integers(-shape[axis + j], shape[axis + j], ishape) for j in range(k)]
    key = (slice(None),) * axis + tuple(idx)
    want = x[key]
    assert_runs_as(lambda b, v, *i: b.gather(v, *i, axis=axis), [x, *idx], want)
    upd = sample(rng, want.shape, dtype)
    acc = np.zeros(shape, dtype)
    for pos in np.ndindex(*want.shape):  # one update at a time: repeats accumulate
        src = pos[:axis] + tuple(int(i[pos[axis:axis + len(ishape)]]) for i in idx) \
            + pos[axis + len(ishape):]
        acc[src] += upd[pos]
    assert_runs_as(lambda b, u, *i: b.scatter_add(u, *i, axis=axis, shape=shape),
                   [upd, *idx], acc)


@covers("scatter", "update_slice")
@SETTINGS
@given(dtype=floats, layout=layouts, seed=seeds, axis=st.integers(0, 2),
       ishape=st.sampled_from([(), (4,), (0,), (2, 3)]))
def test_scatter_and_update_slice(dtype: np.dtype, layout: str, seed: int, axis: int,
                                  ishape: tuple[int, ...]) -> None:
    """Writes: x with x[..., idx, ...] = u (repeated indices: the last update wins, as
    NumPy's assignment does here) and x with a strided region replaced."""
    rng = np.random.default_rng(seed)
    shape = (3, 4, 2, 1)
    x = sample(rng, shape, dtype, layout=layout)
    idx = rng.integers(-shape[axis], shape[axis], ishape)
    key = (slice(None),) * axis + (idx,)
    upd = sample(rng, x[key].shape, dtype)
    want = x.copy()
    want[key] = upd
    assert_runs_as(lambda b, v, u, i: b.scatter(v, u, i, axis=axis), [x, upd, idx], want)
    start = tuple(int(rng.integers(0, d + 1)) for d in shape)
    stop = tuple(int(rng.integers(a, d + 1)) for a, d in zip(start, shape, strict=True))
    step = tuple(int(rng.integers(1, 3)) for _ in shape)
    region = tuple(slice(a, b, c) for a, b, c in zip(start, stop, step, strict=True))
    u = sample(rng, x[region].shape, dtype)
    want = x.copy()
    want[region] = u
    assert_runs_as(lambda b, v, w: b.update_slice(v, w, start=start, stop=stop, step=step),
                   [x, u], want)


# -- linear algebra and reductions -------------------------------------------------------------
@covers("matmul")
@SETTINGS
@given(dtype=st.sampled_from([F32, F64, I64]), layout=layouts, seed=seeds,
       batch=st.sampled_from([(), (2,), (1, 3)]), mkn=st.tuples(*[st.integers(0, 4)] * 3))
def test_matmul(dtype: np.dtype, layout: str, seed: int, batch: tuple[int, ...],
                mkn: tuple[int, int, int]) -> None:
    rng = np.random.default_rng(seed)
    m, k, n = mkn
    a = sample(rng, batch + (m, k), dtype, layout=layout)
    c = sample(rng, batch + (k, n), dtype, layout=layout)
    assert_runs_as(lambda b, u, v: b.matmul(u, v), [a, c], np.matmul(a, c))


def _spd(rng: np.random.Generator, shape: tuple[int, ...], dtype: np.dtype) -> np.ndarray:
    """Well-conditioned symmetric positive definite matrices of ``shape`` [..., n, n]."""
    x = rng.standard_normal(shape)
    return (x @ np.swapaxes(x, -1, -2) + shape[-1] * np.eye(shape[-1])).astype(dtype)


LAPACK = ["cholesky", "triangular_solve", "lu", "solve", "eigh", "svd", "svdvals", "qr"]


@covers(*LAPACK)
@pytest.mark.parametrize("op", LAPACK)
@settings(max_examples=8, deadline=None, derandomize=True)
@given(dtype=floats, layout=layouts, seed=seeds, batch=st.sampled_from([(), (2,), (1, 3)]),
       mn=st.tuples(st.integers(1, 4), st.integers(1, 4)), flags=st.integers(0, 7))
def test_lapack(op: str, dtype: np.dtype, layout: str, seed: int, batch: tuple[int, ...],
                mn: tuple[int, int], flags: int) -> None:
    """The factorizations are NumPy's own routines (bit for bit); ``lu`` and
    ``triangular_solve`` reconstruct their input within the conditioning of the matrix."""
    rng = np.random.default_rng(seed)
    n = mn[0]
    a = view(_spd(rng, batch + (n, n), dtype), layout)
    r = sample(rng, batch + mn, dtype, layout=layout)
    lo, tr, unit = bool(flags & 1), bool(flags & 2), bool(flags & 4)
    tol = 1e-4 if dtype == F32 else 1e-10
    if op == "cholesky":
        assert_runs_as(lambda b, u: b.cholesky(u), [a], np.linalg.cholesky(a))
    elif op == "solve":
        assert_runs_as(lambda b, u, v: b.solve(u, v), [a, r], np.linalg.solve(a, r))
    elif op == "eigh":
        assert_runs_as(lambda b, u: b.eigh(u, lower=lo), [r @ np.swapaxes(r, -1, -2)],
                       list(np.linalg.eigh(r @ np.swapaxes(r, -1, -2), UPLO="LU"[not lo])))
    elif op in ("svd", "svdvals", "qr"):
        want = {"svd": lambda: list(np.linalg.svd(r, full_matrices=lo)),
                "svdvals": lambda: np.linalg.svd(r, compute_uv=False),
                "qr": lambda: list(np.linalg.qr(r))}[op]()
        attrs = {"full_matrices": lo} if op == "svd" else {}
        assert_runs_as(lambda b, u: b.emit(op, u, **attrs), [r], want)
    elif op == "lu":
        g = sample(rng, batch + (n, n), dtype, layout=layout)
        lu, perm = run(build(lambda b, u: b.lu(u), g), g)
        assert lu.dtype == dtype and perm.dtype == I64 and perm.shape == batch + (n,)
        low = np.tril(lu, -1) + np.eye(n, dtype=dtype)
        np.testing.assert_allclose(low @ np.triu(lu), np.take_along_axis(
            g, perm[..., None], -2), atol=tol * 10, rtol=0)
        assert np.all(np.abs(low) <= 1)  # partial pivoting
    else:
        (x,) = run(build(lambda b, u, v: b.triangular_solve(u, v, lower=lo, transpose=tr,
                                                            unit_diagonal=unit), a, r), a, r)
        t = np.tril(a) if lo else np.triu(a)
        if unit:
            t = t - np.einsum("...ii->...i", t)[..., None] * np.eye(n) + np.eye(n)
        np.testing.assert_allclose(np.swapaxes(t, -1, -2) @ x if tr else t @ x, r,
                                   atol=tol * 100, rtol=0)


@covers("pivots")
@settings(max_examples=12, deadline=None, derandomize=True)
@given(seed=seeds, batch=st.sampled_from([(), (2,), (1, 3), (0,)]), n=st.integers(0, 6),
       layout=layouts)
def test_pivots(seed: int, batch: tuple[int, ...], n: int, layout: str) -> None:
    """Replaying the interchanges on 0..n-1 gives the permutation back (SciPy's
    ``lu_factor`` pivots are these: tests/numpy/test_scipy_linalg.py)."""
    rng = np.random.default_rng(seed)
    perm = np.zeros(batch + (n,), I64)
    for idx in np.ndindex(*batch):
        perm[idx] = rng.permutation(n)
    perm = view(perm, layout)
    (piv,) = run(build(lambda b, p: b.pivots(p), perm), perm)
    assert piv.dtype == I64 and piv.shape == perm.shape
    for idx in np.ndindex(*batch):
        cur = list(range(n))
        for i, j in enumerate(piv[idx]):
            assert i <= j < n
            cur[i], cur[j] = cur[j], cur[i]
        assert cur == perm[idx].tolist()


def _scaled_sum(static: Any, xs: list[np.ndarray]) -> list[Any]:
    """A registered callback: ``x * k + y`` (``k`` from the constant arguments) and a sum."""
    x, y = xs
    return [x * static["k"] + y, float(np.sum(x))]


@covers("callback")
@pytest.mark.parametrize("dtype", FLOATS)
@pytest.mark.parametrize("shape", [(), (0,), (2, 3)])
def test_callback(dtype: np.dtype, shape: tuple[int, ...]) -> None:
    """The registered Python function on the operands (a view among them), the results
    converted to the types the op names (a Python float to f32[], float64 to float32)."""
    from yota.ir.ops.callback import CALLBACKS

    CALLBACKS["tests.pair#0"] = _scaled_sum
    rng = np.random.default_rng(0)
    x = sample(rng, shape, dtype, layout="T")
    y = sample(rng, shape, dtype)
    results = ((dtype.name, shape), (dtype.name, ()))
    assert_runs_as(lambda b, u, v: b.callback(u, v, fn="tests.pair#0", static="{'k': 2.0}",
                                              results=results),
                   [x, y], [(x * 2.0 + y).astype(dtype), np.asarray(np.sum(x), dtype)])




# -- special functions: the reference against SciPy (each backend is compared with it) -----------
SPECIAL_OPS = {"lgamma": ("gammaln", "p"), "digamma": ("psi", "p"), "erf": ("erf", "n"),
               "erfc": ("erfc", "n"), "erfcx": ("erfcx", "n"), "erfinv": ("erfinv", "u"),
               "erfcinv": ("erfcinv", "p"), "i0": ("i0", "n"), "i0e": ("i0e", "n"),
               "i1": ("i1", "n"), "i1e": ("i1e", "n")}


@covers(*SPECIAL_OPS, "polygamma")
@pytest.mark.parametrize("op", sorted(SPECIAL_OPS) + ["polygamma"])
@SETTINGS
@given(shape=shapes, dtype=floats, layout=layouts, seed=seeds)
def test_special_functions(op: str, shape: tuple[int, ...], dtype: np.dtype, layout: str,
                           seed: int) -> None:
    """Within 8 ulps of SciPy away from the negative axis (float32: SciPy's float32
    loops are less accurate than the reference's float64-then-round)."""
    special = pytest.importorskip("scipy.special")
    name, domain = SPECIAL_OPS.get(op, ("polygamma", "p"))
    x = sample(np.random.default_rng(seed), shape, dtype, domain, layout)
    if op == "erfcinv":
        x = (x / 2).astype(dtype)
    attrs = {"n": 2} if op == "polygamma" else {}
    fn = build(lambda b, v: b.emit(op, v, **attrs), x)
    (got,) = run(fn, x)
    want = (special.polygamma(2, x) if op == "polygamma" else getattr(special, name)(x))
    assert got.dtype == dtype and got.shape == x.shape
    tol = 8 * np.finfo(dtype).eps * (32 if dtype == F32 else 1)
    np.testing.assert_allclose(got, np.asarray(want, dtype), rtol=tol, atol=tol)


@covers(*REDUCTIONS, "argmax", "argmin")
@pytest.mark.parametrize("op", sorted(REDUCTIONS) + ["argmax", "argmin"])
@SETTINGS
@given(shape=shapes, dtype=st.sampled_from([F32, F64, I64]), layout=layouts, seed=seeds)
def test_reductions(op: str, shape: tuple[int, ...], dtype: np.dtype, layout: str,
                    seed: int) -> None:
    rng = np.random.default_rng(seed)
    x = sample(rng, shape, dtype, layout=layout)
    if op in REDUCTIONS:
        axes = tuple(i for i in range(x.ndim) if rng.random() < 0.6)
        if op in ("max", "min") and any(shape[a] == 0 for a in axes):
            axes = tuple(a for a in axes if shape[a])
        want = np.asarray(REDUCTIONS[op](x, axis=axes)).astype(dtype)
        assert_runs_as(lambda b, v: b.emit(op, v, axes=axes), [x], want)
    elif x.ndim and 0 not in shape:
        axis = int(rng.integers(0, x.ndim))
        want = getattr(np, op)(x, axis=axis).astype(I64)
        assert_runs_as(lambda b, v: b.emit(op, v, axis=axis), [x], want)


# -- type errors -------------------------------------------------------------------------------
def t(dtype: np.dtype, *shape: int) -> TensorType:
    return TensorType(dtype, shape)


def _binary_mismatch(op: str, a: TensorType, c: TensorType) -> Callable[[Builder], Any]:
    return lambda b: b.emit(op, b.input(a), b.input(c))


ERRORS: dict[str, tuple[Callable[[Builder], Any], list[str]]] = {}
for _op in [*BINARY, *COMPARE, "maximum", "minimum"]:
    ERRORS[_op] = (_binary_mismatch(_op, t(F32, 3), t(F64, 3)), ["f32[3]", "f64[3]"])
for _op in LOGIC:
    ERRORS[_op] = (_binary_mismatch(_op, t(BOOL, 3), t(BOOL, 4)), ["bool[3]", "bool[4]"])
for _op in [*FLOAT_UNARY, *PREDICATES]:
    ERRORS[_op] = ((lambda op: lambda b: b.emit(op, b.input(t(I64, 2))))(_op),
                   ["float", "i64[2]"])
for _op in NUMERIC_UNARY:
    ERRORS[_op] = ((lambda op: lambda b: b.emit(op, b.input(t(BOOL, 2))))(_op),
                   ["numeric", "bool[2]"])
for _op in REDUCTIONS:
    ERRORS[_op] = ((lambda op: lambda b: b.emit(op, b.input(t(F32, 2, 3)), axes=(2,)))(_op),
                   ["f32[2,3]", "[2]"])
for _op in ("argmax", "argmin"):
    ERRORS[_op] = ((lambda op: lambda b: b.emit(op, b.input(t(F32, 2, 0)), axis=1))(_op),
                   ["f32[2,0]"])
for _op in [*SPECIAL_OPS, "polygamma"]:
    ERRORS[_op] = ((lambda op: lambda b: b.emit(op, b.input(t(I64, 2)),
                                                **({"n": 1} if op == "polygamma" else {})))(_op),
                   ["float", "i64[2]"])
ERRORS.update({
    "not": (lambda b: b.emit("not", b.input(t(F32, 2))), ["bool", "f32[2]"]),
    "select": (lambda b: b.select(b.input(t(BOOL, 3)), b.input(t(F32, 3)), b.input(t(F64, 3))),
               ["bool[3]", "f32[3]", "f64[3]"]),
    "convert": (lambda b: b.emit("convert", b.input(t(F32, 3)), dtype=np.float16),
                ["float16"]),
    "const": (lambda b: b.emit("const", value=np.ones(2, np.float16)), ["float16"]),
    "guard": (lambda b: b.guard(b.input(t(F64, 3)), expected=True, kind="bool"), ["f64[3]"]),
    "matmul": (lambda b: b.matmul(b.input(t(F32, 2, 3)), b.input(t(F32, 4, 5))),
               ["f32[2,3]", "f32[4,5]"]),
    "reshape": (lambda b: b.reshape(b.input(t(F32, 2, 3)), shape=(4,)), ["f32[2,3]", "[4]"]),
    "transpose": (lambda b: b.transpose(b.input(t(F32, 2, 3)), perm=(0, 0)), ["[0, 0]"]),
    "broadcast": (lambda b: b.broadcast(b.input(t(F32, 3)), shape=(4,)), ["f32[3]", "[4]"]),
    "sum_to": (lambda b: b.sum_to(b.input(t(F32, 3)), shape=(2,)), ["f32[3]", "[2]"]),
    "slice": (lambda b: b.slice(b.input(t(F32, 3)), start=(0,), stop=(4,), step=(1,)),
              ["f32[3]", "0:4:1"]),
    "flip": (lambda b: b.flip(b.input(t(F32, 3)), axes=(1,)), ["f32[3]", "[1]"]),
    "pad": (lambda b: b.pad(b.input(t(F32, 3)), low=(1,), high=(-1,), interior=(0,)),
            ["f32[3]"]),
    "concatenate": (lambda b: b.concatenate(b.input(t(F32, 2, 3)), b.input(t(F64, 2, 3)),
                                            axis=0), ["f32[2,3]", "f64[2,3]"]),
    "gather": (lambda b: b.gather(b.input(t(F32, 3)), b.input(t(F32, 2)), axis=0),
               ["f32[2]", "integer"]),
    "scatter_add": (lambda b: b.scatter_add(b.input(t(F32, 3)), b.input(t(I64, 2)), axis=0,
                                            shape=(5,)), ["f32[3]", "[2]"]),
    "scatter": (lambda b: b.scatter(b.input(t(F32, 3)), b.input(t(F32, 3)),
                                    b.input(t(I64, 2)), axis=0), ["f32[3]", "f32[2]"]),
    "update_slice": (lambda b: b.update_slice(b.input(t(F32, 4)), b.input(t(F32, 3)),
                                              start=(0,), stop=(4,), step=(2,)),
                     ["f32[4]", "f32[2]", "f32[3]"]),
    "cholesky": (lambda b: b.cholesky(b.input(t(F32, 2, 3))), ["square", "f32[2,3]"]),
    "triangular_solve": (lambda b: b.triangular_solve(
        b.input(t(F64, 3, 3)), b.input(t(F64, 2, 3)), lower=True, transpose=False,
        unit_diagonal=False), ["f64[3,3]", "f64[2,3]"]),
    "lu": (lambda b: b.lu(b.input(t(I64, 2, 2))), ["float", "i64[2,2]"]),
    "solve": (lambda b: b.solve(b.input(t(F32, 2, 2, 2)), b.input(t(F32, 3, 2, 1))),
              ["f32[2,2,2]", "f32[3,2,1]"]),
    "eigh": (lambda b: b.eigh(b.input(t(F64, 3)), lower=True), ["f64[3]"]),
    "svd": (lambda b: b.svd(b.input(t(I32, 2, 3)), full_matrices=False), ["i32[2,3]"]),
    "svdvals": (lambda b: b.svdvals(b.input(t(F32, 4))), ["f32[4]"]),
    "qr": (lambda b: b.qr(b.input(t(BOOL, 2, 2))), ["bool[2,2]"]),
    "pivots": (lambda b: b.pivots(b.input(t(I32, 3))), ["int64", "i32[3]"]),
    "callback": (lambda b: b.callback(b.input(t(F32, 3)), fn="f", static="",
                                      results=(("f32",),)), ["[dtype, shape]"]),
    "call": (lambda b: b.emit("call", b.input(t(F32, 3)), callee="g"), ["call", "callee"]),
    "fused": (lambda b: b.emit("fused", b.input(t(F32, 3)), callee="k"), ["fused", "body"]),
    "iota": (lambda b: b.emit("iota", shape=(2,), axis=0, dtype=BOOL), ["iota", "bool"]),
    "loop": (lambda b: b.emit("loop", b.input(t(F32, 3)), callee="step", length=2, carries=1,
                              stacked=0, reverse=False), ["loop", "loop_op"]),
})


@pytest.mark.parametrize("op", sorted(ERRORS))
def test_type_errors_quote_the_operands(op: str) -> None:
    make, quoted = ERRORS[op]
    with pytest.raises(IRTypeError) as err:
        make(Builder())
    for text in quoted:
        assert text in str(err.value), (op, str(err.value))


def test_polygamma_order_is_at_least_one() -> None:
    with pytest.raises(IRTypeError, match="n >= 1"):
        Builder().emit("polygamma", Builder().input(t(F64, 2)), n=0)


def test_call_operands_are_checked_against_the_callee() -> None:
    callee = two_output_callee()
    b = Builder()
    x = b.input(t(F32, 2, 3))
    b.call(callee, x, b.input(t(F64, 3)))
    with pytest.raises(VerifyError, match="@two"):
        verify(b.build([]))


def test_every_op_is_covered() -> None:
    """Adding an op to the table without tests here fails."""
    assert not set(OPS) - COVERED, f"ops without an interpreter test: {set(OPS) - COVERED}"
    assert not set(OPS) - set(ERRORS), f"ops without a type-error test: {set(OPS) - set(ERRORS)}"
