"""Differential tests of the llvm backend against the reference interpreter, op by op.

Every op of the op table is compiled on float32 and float64 (and the integer and bool
dtypes it takes), over shapes that include 0-d, empty, size-1 and lengths that are not
a multiple of the vector width, with special values (0, -0.0, +-inf, NaN, denormals)
among the inputs. How exactly each op must match (bit for bit, within ulps for
transcendentals, or within a bound scaled by the reduction length for reassociated
sums and matrix products) is decided in ``precision.py``.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
from support import irgen  # noqa: E402
from support.backend_cases import (  # noqa: E402
    BOOL_BINARY,
    FLOAT_BINARY,
    FLOAT_UNARY,
    FLOATS,
    INT_BINARY,
    INT_UNARY,
    SHAPES,
    TRANSCENDENTAL,
    inputs,
    iota_program,
    mismatch,
    sample,
    special_inputs,
    special_programs,
)
from support.backend_cases import binary_program as _binary_program  # noqa: E402
from support.backend_cases import unary_program as _unary_program  # noqa: E402
from yota.backends import llvm as native
from yota.ir import OPS, Builder, Function, TensorType, run
from yota.ir.passes import optimize

COVERED: set[str] = set()


# -- helpers ---------------------------------------------------------------------------
def check(fn: Function, args: list[np.ndarray]) -> None:
    msg = mismatch(fn, args, native.compile(fn)(*args), run(fn, *args))
    assert msg is None, f"{fn}\n{msg}"


def unary_program(op: str, dt: str, shapes: list[tuple[int, ...]] = SHAPES,
                  **attrs: object) -> Function:
    COVERED.add(op)
    return _unary_program(op, dt, shapes, **attrs)


def binary_program(op: str, dt: str, shapes: list[tuple[int, ...]] = SHAPES) -> Function:
    COVERED.add(op)
    return _binary_program(op, dt, shapes)


# -- elementwise ---------------------------------------------------------------------------
@pytest.mark.parametrize("dt", FLOATS)
@pytest.mark.parametrize("op", FLOAT_UNARY)
def test_float_unary_exact(op: str, dt: str) -> None:
    fn = unary_program(op, dt)
    check(fn, inputs(np.random.default_rng(1), fn))


@pytest.mark.parametrize("dt", FLOATS)
@pytest.mark.parametrize("op", TRANSCENDENTAL)
def test_transcendental_within_ulps(op: str, dt: str) -> None:
    fn = unary_program(op, dt)
    check(fn, inputs(np.random.default_rng(2), fn))


@pytest.mark.parametrize("dt", FLOATS)
def test_special_functions_within_ulps(dt: str) -> None:
    for op, fn in special_programs(dt):
        COVERED.add(op)
        check(fn, special_inputs(np.random.default_rng(len(op)), op, fn))


@pytest.mark.parametrize("dt", ["i32", "i64"])
@pytest.mark.parametrize("op", INT_UNARY)
def test_int_unary(op: str, dt: str) -> None:
    fn = unary_program(op, dt)
    check(fn, inputs(np.random.default_rng(3), fn))


def test_not() -> None:
    fn = unary_program("not", "bool")
    check(fn, inputs(np.random.default_rng(4), fn))


@pytest.mark.parametrize("dt", FLOATS)
@pytest.mark.parametrize("op", FLOAT_BINARY)
def test_float_binary_exact(op: str, dt: str) -> None:
    fn = binary_program(op, dt)
    check(fn, inputs(np.random.default_rng(5), fn))


@pytest.mark.parametrize("dt", FLOATS)
@pytest.mark.parametrize("op", ["pow", "arctan2"])
def test_float_binary_transcendental(op: str, dt: str) -> None:
    fn = binary_program(op, dt)
    check(fn, inputs(np.random.default_rng(6), fn))


@pytest.mark.parametrize("dt", ["i32", "i64"])
@pytest.mark.parametrize("op", INT_BINARY)
def test_int_binary(op: str, dt: str) -> None:
    fn = binary_program(op, dt)
    args = inputs(np.random.default_rng(7), fn)
    if op == "pow":  # negative integer powers are an error in NumPy
        args = [np.abs(a) % 7 if i % 2 else a for i, a in enumerate(args)]
        args = [a.astype(fn.inputs[0].dtype) for a in args]
    check(fn, args)


@pytest.mark.parametrize("op", BOOL_BINARY)
def test_bool_binary(op: str) -> None:
    fn = binary_program(op, "bool")
    check(fn, inputs(np.random.default_rng(8), fn))


def test_zero_signs_of_maximum_and_minimum() -> None:
    b = Builder("z")
    x, y = b.input(TensorType("f64", (4,))), b.input(TensorType("f64", (4,)))
    fn = b.build([b.maximum(x, y), b.minimum(x, y), b.maximum(y, x), b.minimum(y, x)])
    COVERED.update(["maximum", "minimum"])
    check(fn, [np.array([0.0, -0.0, np.nan, 1.0]), np.array([-0.0, 0.0, 1.0, np.nan])])


@pytest.mark.parametrize("dt", ["f32", "f64", "i32", "i64", "bool"])
def test_select(dt: str) -> None:
    COVERED.add("select")
    b = Builder("sel")
    outs = []
    for s in SHAPES:
        c, x, y = (b.input(TensorType("bool", s)), b.input(TensorType(dt, s)),
                   b.input(TensorType(dt, s)))
        outs.append(b.select(c, x, y))
    fn = b.build(outs)
    check(fn, inputs(np.random.default_rng(9), fn))


@pytest.mark.parametrize("src", ["f32", "f64", "i32", "i64", "bool"])
def test_convert(src: str) -> None:
    COVERED.add("convert")
    b = Builder("conv")
    x = b.input(TensorType(src, (37,)))
    dsts = [d for d in ["f32", "f64", "i32", "i64", "bool"] if d != src]
    fn = b.build([b.convert(x, dtype=d) for d in dsts])
    rng = np.random.default_rng(10)
    x0 = sample(rng, (37,), src, special=False)
    if x0.dtype.kind == "f":  # no out-of-range float->int casts (undefined in C)
        x0[:4] = [0.0, -0.0, 1e-40, -2.5]
    check(fn, [x0])


# -- reductions -------------------------------------------------------------------------------
RED_CASES = [((37,), (0,)), ((3, 5), (0,)), ((3, 5), (1,)), ((3, 5), (0, 1)), ((2, 1, 9), (2,)),
             ((2, 1, 9), (0, 2)), ((4, 0), (0,)), ((4, 0), (1,)), ((), ()), ((1000, 3), (0,)),
             ((3, 1000), (1,)), ((5000,), (0,))]


@pytest.mark.parametrize("dt", ["f32", "f64", "i32", "i64", "bool"])
@pytest.mark.parametrize("op", ["sum", "prod", "max", "min"])
def test_reductions(op: str, dt: str) -> None:
    COVERED.add(op)
    cases = [(s, a) for s, a in RED_CASES
             if not (op in ("max", "min") and any(s[i] == 0 for i in a))]
    b = Builder(f"{op}_{dt}")
    fn = b.build([b.emit(op, b.input(TensorType(dt, s)), axes=a) for s, a in cases])
    rng = np.random.default_rng(11)
    args = [sample(rng, s, dt, special=op in ("max", "min")) for s, _ in cases]
    if op == "prod" and dt[0] == "f":
        args = [np.clip(np.abs(a), 0.9, 1.1).astype(a.dtype) for a in args]
    check(fn, args)


@pytest.mark.parametrize("dt", ["f32", "f64", "i32", "bool"])
@pytest.mark.parametrize("op", ["argmax", "argmin"])
def test_arg_reductions(op: str, dt: str) -> None:
    COVERED.add(op)
    b = Builder(op)
    cases = [((37,), 0), ((3, 5), 0), ((3, 5), 1), ((2, 1, 9), 2), ((1,), 0)]
    fn = b.build([b.emit(op, b.input(TensorType(dt, s)), axis=a) for s, a in cases])
    rng = np.random.default_rng(12)
    args = [sample(rng, s, dt) for s, _ in cases]
    if dt[0] == "f":
        args[0][[3, 9]] = np.nan  # the first NaN wins
    check(fn, args)


def test_sum_of_negative_zeros_is_positive_zero() -> None:
    b = Builder("z")
    x = b.input(TensorType("f64", (3, 4)))
    fn = b.build([b.sum(x, axes=(0,)), b.sum(x, axes=(1,)), b.sum(x, axes=(0, 1))])
    check(fn, [np.full((3, 4), -0.0)])


# -- shape ops ----------------------------------------------------------------------------------
@pytest.mark.parametrize("dt", ["f32", "f64", "i32", "bool"])
def test_shape_ops(dt: str) -> None:
    COVERED.update(["reshape", "transpose", "broadcast", "sum_to", "slice", "flip", "pad",
                    "concatenate"])
    b = Builder("shape")
    x = b.input(TensorType(dt, (3, 4, 5)))
    y = b.input(TensorType(dt, (4, 1)))
    outs = [
        b.reshape(x, shape=(12, 5)), b.reshape(x, shape=(60,)),
        b.transpose(x, perm=(2, 0, 1)), b.broadcast(y, shape=(3, 4, 5)),
        b.slice(x, start=(1, 0, 1), stop=(3, 4, 5), step=(1, 2, 3)),
        b.flip(x, axes=(0, 2)), b.pad(y, low=(1, 2), high=(0, 1), interior=(1, 0)),
        b.concatenate(x, x, axis=1),
        b.reshape(b.transpose(x, perm=(1, 0, 2)), shape=(4, 15)),
        b.add(b.transpose(x, perm=(0, 2, 1)), b.transpose(x, perm=(0, 2, 1)))
        if dt != "bool" else b.xor(b.transpose(x, perm=(0, 2, 1)),
                                   b.transpose(x, perm=(0, 2, 1))),
        b.slice(b.transpose(x, perm=(2, 1, 0)), start=(4, 0, 0), stop=(5, 4, 3),
                step=(1, 1, 1)),
        b.reshape(b.slice(x, start=(0, 1, 0), stop=(3, 2, 5), step=(1, 1, 1)), shape=(15,)),
        b.broadcast(b.reshape(y, shape=(4,)), shape=(2, 4)),
    ]
    if dt[0] in "fi":
        outs += [b.sum_to(x, shape=(4, 1)), b.sum_to(x, shape=(1, 1, 5)),
                 b.sum_to(x, shape=(3, 4, 5))]
    fn = b.build(outs)
    rng = np.random.default_rng(13)
    check(fn, [sample(rng, (3, 4, 5), dt), sample(rng, (4, 1), dt)])


def test_empty_shapes() -> None:
    b = Builder("empty")
    x = b.input(TensorType("f32", (0, 3)))
    y = b.input(TensorType("f32", (3, 0)))
    outs = [b.exp(x), b.sum(x, axes=(0,)), b.matmul(y, x), b.transpose(x, perm=(1, 0)),
            b.concatenate(x, x, axis=0), b.matmul(x, y)]
    check(b.build(outs), [np.zeros((0, 3), np.float32), np.zeros((3, 0), np.float32)])


# -- indexing -------------------------------------------------------------------------------------
@pytest.mark.parametrize("dt", ["f32", "i64"])
def test_gather_and_scatter_add(dt: str) -> None:
    COVERED.update(["gather", "scatter_add", "scatter", "update_slice"])
    b = Builder("idx")
    x = b.input(TensorType(dt, (5, 4, 3)))
    i = b.input(TensorType("i64", (2, 3)))
    j = b.input(TensorType("i32", (2, 3)))
    u = b.input(TensorType(dt, (5, 2, 3, 3)))
    band = b.slice(u, start=(0, 0, 0, 0), stop=(1, 2, 3, 3), step=(1, 1, 1, 1))
    outs = [b.gather(x, i, axis=0), b.gather(x, i, j, axis=0), b.gather(x, j, axis=1),
            b.scatter_add(u, i, j, axis=1, shape=(5, 5, 4, 3)),
            b.scatter(b.scatter_add(u, i, j, axis=1, shape=(5, 5, 4, 3)), u, i, j, axis=1),
            b.update_slice(x, b.reshape(band, shape=(2, 3, 3)), start=(1, 1, 0),
                           stop=(5, 4, 3), step=(2, 1, 1))]
    fn = b.build(outs)
    rng = np.random.default_rng(14)
    iv = np.array([[0, -1, 4], [2, 2, -5]])  # negative, repeated
    jv = np.array([[1, 3, -1], [0, 0, 2]], np.int32)
    check(fn, [sample(rng, (5, 4, 3), dt, False), iv, jv, sample(rng, (5, 2, 3, 3), dt, False)])


def test_gather_index_out_of_range_raises_before_reading() -> None:
    b = Builder("oob")
    x = b.input(TensorType("f32", (5,)))
    i = b.input(TensorType("i64", (3,)))
    exe = native.compile(b.build([b.gather(x, i, axis=0)]))
    with pytest.raises(IndexError, match="index 5 is out of bounds for axis 0 with size 5"):
        exe(np.zeros(5, np.float32), np.array([0, 5, 1]))
    with pytest.raises(IndexError, match="index -6"):
        exe(np.zeros(5, np.float32), np.array([-6, 0, 1]))
    assert exe(np.arange(5, dtype=np.float32), np.array([-1, 0, 4]))[0].tolist() == [4, 0, 4]


# -- matrix products ----------------------------------------------------------------------------
@pytest.mark.parametrize("dt", ["f32", "f64", "i32", "i64"])
def test_matmul(dt: str) -> None:
    COVERED.add("matmul")
    b = Builder("mm")
    a = b.input(TensorType(dt, (7, 5)))
    c = b.input(TensorType(dt, (5, 3)))
    p = b.input(TensorType(dt, (2, 4, 5)))
    q = b.input(TensorType(dt, (2, 5, 6)))
    outs = [b.matmul(a, c), b.matmul(b.transpose(c, perm=(1, 0)), b.transpose(a, perm=(1, 0))),
            b.matmul(p, q), b.matmul(b.transpose(q, perm=(0, 2, 1)), b.transpose(p, perm=(0, 2, 1))),
            b.matmul(b.slice(a, start=(1, 0), stop=(7, 5), step=(2, 1)), c),
            b.matmul(b.flip(a, axes=(1,)), c), b.matmul(b.reshape(a, shape=(5, 7)), a),
            b.matmul(b.transpose(a, perm=(1, 0)), a),
            b.matmul(b.broadcast(b.reshape(b.transpose(c, perm=(1, 0)), shape=(1, 3, 5)),
                                 shape=(2, 3, 5)), q)]
    fn = b.build(outs)
    rng = np.random.default_rng(15)
    args = [sample(rng, v.shape, dt, special=False) for v in fn.inputs]
    check(fn, args)


# -- callback: a Python function called from native code (tests/numpy/test_opaque.py in depth) ----------
def _scaled(static: Any, xs: list[np.ndarray]) -> list[Any]:
    return [xs[0] * static + xs[1].sum(), xs[1].T.copy()]


def test_callback() -> None:
    from yota.ir.ops.callback import CALLBACKS

    COVERED.add("callback")
    CALLBACKS["tests.llvm_scaled#0"] = _scaled
    b = Builder("cb")
    x, y = b.input(TensorType("f32", (3, 4))), b.input(TensorType("f64", (2, 3)))
    r = b.callback(b.transpose(x, perm=(1, 0)), b.slice(y, start=(0, 0), stop=(2, 3),
                                                        step=(1, 2)),
                   fn="tests.llvm_scaled#0", static="3.0",
                   results=(("float32", (4, 3)), ("float64", (2, 2))))
    fn = b.build([b.exp(r[0]), r[1]])
    rng = np.random.default_rng(17)
    check(fn, [sample(rng, (3, 4), "f32", special=False), sample(rng, (2, 3), "f64",
                                                                   special=False)])


# -- LAPACK-level ops (tests/backends/llvm/test_linalg_native.py tests them in depth) ----------------------------
@pytest.mark.parametrize("dt", ["f32", "f64"])
def test_lapack(dt: str) -> None:
    COVERED.update(["cholesky", "solve", "eigh", "triangular_solve", "lu", "svd", "svdvals",
                    "qr", "pivots"])
    b = Builder("la")
    s, r = b.input(TensorType(dt, (2, 4, 4))), b.input(TensorType(dt, (2, 4, 3)))
    w = b.input(TensorType(dt, (3, 5)))
    st = b.transpose(s, perm=(0, 2, 1))
    fn = b.build([b.cholesky(st), b.solve(s, r), *b.eigh(st, lower=True),
                  b.triangular_solve(s, r, lower=True, transpose=True, unit_diagonal=False),
                  *b.lu(s), *b.svd(w, full_matrices=True), b.svdvals(r), *b.qr(r),
                  b.pivots(b.flip(b.lu(s)[1], axes=(1,)))])
    rng = np.random.default_rng(16)
    x = rng.standard_normal((2, 4, 4))
    spd = x @ np.swapaxes(x, -1, -2) + 4 * np.eye(4)
    raw = (spd, rng.standard_normal((2, 4, 3)), rng.standard_normal((3, 5)))
    args = [a.astype({"f32": np.float32, "f64": np.float64}[dt]) for a in raw]
    check(fn, args)


# -- constants, guards, calls, fused kernels -------------------------------------------------------
def test_constants() -> None:
    COVERED.add("const")
    b = Builder("c")
    x = b.input(TensorType("f64", (2, 3)))
    k = b.const(np.arange(6.0).reshape(2, 3))
    outs = [b.add(x, k), k, b.const(7.0, "f64", (2, 3)), b.const(np.arange(4), np.int32),
            b.matmul(b.const(1.0, "f64", (4, 2)), x)]
    check(b.build(outs), [np.ones((2, 3))])


def test_call_and_guard() -> None:
    COVERED.update(["call", "guard"])
    sb = Builder("inner")
    u = sb.input(TensorType("f64", (3,)))
    sb.guard(sb.sum(u, axes=(0,)), expected=True, kind="bool")
    inner = sb.build([sb.exp(u), sb.sum(u, axes=(0,))])
    b = Builder("outer")
    x = b.input(TensorType("f64", (3, 2)))
    column = b.slice(b.transpose(x, perm=(1, 0)), start=(0, 0), stop=(1, 3), step=(1, 1))
    r = b.call(inner, b.reshape(column, shape=(3,)))  # a strided view: copied for the call
    b.guard(b.max(x, axes=(0, 1)), expected=2, kind="int")
    fn = b.build([r[0], r[1]])
    exe = native.compile(fn)
    x0 = np.array([[0.5, 9.0], [1.0, 9.0], [2.9, 9.0]])
    x0[:, 1] = 1.0
    for a in (x0, np.ascontiguousarray(x0.T).T):
        got, want = exe(a), run(fn, a)
        assert mismatch(fn, [a], got, want) is None
    for bad in (np.zeros((3, 2)), x0 + 5):
        with pytest.raises(Exception) as native_err:
            exe(bad)
        with pytest.raises(Exception) as interp_err:
            run(fn, bad)
        assert type(native_err.value) is type(interp_err.value)
        assert str(native_err.value) == str(interp_err.value)
        assert native_err.value.guard_index == interp_err.value.guard_index


@pytest.mark.parametrize("kind,expected,dt,good,bad", [
    ("bool", False, "f32", 0.0, np.nan), ("int", 3, "f64", 3.7, 4.0), ("int", -2, "i32", -2, 2),
    ("float", 0.5, "f32", 0.5, 0.25), ("float", float("nan"), "f64", np.nan, 1.0),
    ("bool", True, "bool", True, False), ("int", 1, "bool", True, False)])
def test_guard_kinds(kind: str, expected: object, dt: str, good: object, bad: object) -> None:
    b = Builder("g")
    x = b.input(TensorType(dt, (1,)))
    b.guard(x, expected=expected, kind=kind)
    fn = b.build([b.reshape(x, shape=())])
    exe = native.compile(fn)
    g = np.array([good], dtype=fn.inputs[0].dtype)
    assert mismatch(fn, [g], exe(g), run(fn, g)) is None
    with pytest.raises(Exception) as e1:
        exe(np.array([bad], dtype=fn.inputs[0].dtype))
    with pytest.raises(Exception) as e2:
        run(fn, np.array([bad], dtype=fn.inputs[0].dtype))
    assert str(e1.value) == str(e2.value)


def test_fused_kernels() -> None:
    COVERED.add("fused")
    for fn in (irgen.w2_loss(1000), irgen.mlp_loss(8, (6, 5, 4, 10))):
        from yota.ir.autodiff import vjp

        g = optimize(vjp(fn, [i for i, v in enumerate(fn.inputs) if v.dtype.kind == "f"]))
        assert any(op.name == "fused" for op in g.ops)
        rng = np.random.default_rng(16)
        check(g, irgen.example_inputs(g, rng))


# -- inputs ------------------------------------------------------------------------------------------
@pytest.mark.parametrize("dt", FLOATS)
def test_iota(dt: str) -> None:
    """``iota`` alone and fused (eye with offsets, tri, arange, a trace): exact."""
    COVERED.add("iota")
    fn = iota_program(dt)
    g = optimize(fn)
    assert any(op.name == "iota" for op in fn.ops)
    assert any(o.name == "iota" for c in g.callees.values() for o in c.ops)  # fused
    args = inputs(np.random.default_rng(3), fn)
    check(fn, args)
    check(g, args)


def test_noncontiguous_and_converted_inputs() -> None:
    b = Builder("nc")
    x = b.input(TensorType("f32", (3, 5)))
    y = b.input(TensorType("f64", (5,)))
    fn = b.build([b.exp(x), b.neg(y)])
    exe = native.compile(fn)
    big = np.random.default_rng(17).standard_normal((6, 11)).astype(np.float32)
    cases = [big[::2, 1::2], np.asfortranarray(big[:3, :5]), big[:3, :5].astype(">f4"),
             big[1:4, 2:7].astype(np.float64)]
    for a in cases:
        for yv in (np.arange(10.0)[::2], [1, 2, 3, 4, 5], np.arange(5, dtype=np.float32)):
            got, want = exe(a, yv), run(fn, a, yv)
            assert mismatch(fn, [a, yv], got, want) is None


def test_loops() -> None:
    """The shared loop programs (tests/passes/test_loops.py runs them with guards failing)."""
    from support.backend_cases import loop_programs

    COVERED.add("loop")
    for _label, fn in loop_programs():
        check(fn, inputs(np.random.default_rng(4), fn, special=False))


def test_signature_errors() -> None:
    from yota.ir.errors import SignatureError

    b = Builder("s")
    x = b.input(TensorType("f32", (3,)), "x")
    exe = native.compile(b.build([b.neg(x)]))
    with pytest.raises(SignatureError, match="should have shape"):
        exe(np.zeros(4, np.float32))
    with pytest.raises(SignatureError, match="should be f32"):
        exe(np.zeros(3, np.complex64))
    with pytest.raises(SignatureError, match="takes 1 inputs"):
        exe()
    out = np.empty(3, np.float32)
    assert exe(np.ones(3, np.float32), out=[out])[0] is out and out.tolist() == [-1, -1, -1]
    with pytest.raises(SignatureError, match="out"):
        exe(np.ones(3, np.float32), out=[np.empty(3)])


def test_every_op_is_covered() -> None:
    """Keep last: fails when an op is added to the table without a test here."""
    if len(COVERED) < 10:
        pytest.skip("run with the rest of the file")
    assert set(OPS) - COVERED == set()
