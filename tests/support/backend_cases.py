"""What the differential tests of the llvm and CUDA backends share: the op lists, shapes
and special values of the op-by-op tests, input sampling, and the comparison of a
backend's results with the reference interpreter's, op by op and on random programs.

How exactly results must agree is decided per op in ``precision.py`` (bit for bit for
IEEE arithmetic and data movement; ulps for transcendentals; a bound scaled by the
reduction length and dtype for sums and matrix products).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
from yota.ir import Builder, Function, TensorType, run
from yota.ir.types import dtype_name

from support import precision  # noqa: E402

SHAPES = [(), (0,), (1,), (7,), (3, 5), (2, 1, 9), (37,)]
FLOATS = ["f32", "f64"]
SPECIAL = [0.0, -0.0, np.inf, -np.inf, np.nan, 1e-40, -1e-310, 1.0, -1.0, 0.5, 2.5, -2.5,
           1e30, -1e30, 88.7, -104.0]
TRANSCENDENTAL = ["exp", "expm1", "log", "log1p", "log2", "sin", "cos", "tan", "tanh", "sinh",
                  "cosh", "arctan", "arcsin", "arccos"]
FLOAT_UNARY = ["sqrt", "reciprocal", "floor", "ceil", "round", "neg", "abs", "sign", "square",
               "isnan", "isinf", "isfinite"]
# special functions (yota.ir.ops.special), and polygamma with these orders
SPECIAL_FUNCTIONS = ["lgamma", "digamma", "erf", "erfc", "erfcx", "erfinv", "erfcinv", "i0", "i0e",
           "i1", "i1e"]
POLYGAMMA_ORDERS = (1, 3)
INT_UNARY = ["neg", "abs", "sign", "square"]
FLOAT_BINARY = ["add", "sub", "mul", "div", "maximum", "minimum", "floordiv", "mod", "lt",
                "le", "gt", "ge", "eq", "ne"]
INT_BINARY = ["add", "sub", "mul", "floordiv", "mod", "maximum", "minimum", "lt", "le", "gt",
              "ge", "eq", "ne", "pow"]
BOOL_BINARY = ["and", "or", "xor", "add", "mul", "maximum", "minimum", "lt", "le", "gt", "ge",
               "eq", "ne"]


# -- programs and inputs -----------------------------------------------------------------
def sample(rng: np.random.Generator, shape: tuple[int, ...], dt: str,
           special: bool = True) -> np.ndarray:
    dtype = np.dtype(TensorType(dt, ()).dtype)
    if dtype.kind == "b":
        return rng.random(shape) < 0.5
    if dtype.kind in "iu":
        x = rng.integers(-20, 21, shape).astype(dtype)
        if special and x.size > 3:
            info = np.iinfo(dtype)
            x.reshape(-1)[:3] = [info.min, info.max, 0]
        return x
    with np.errstate(all="ignore"):
        x = (rng.standard_normal(shape) * 3).astype(dtype)
    if special and x.size:
        flat = x.reshape(-1)
        k = min(len(SPECIAL), flat.size // 2 + 1)
        flat[rng.choice(flat.size, k, replace=False)] = np.array(SPECIAL[:k]).astype(dtype)
    return x


def inputs(rng: np.random.Generator, fn: Function, special: bool = True) -> list[np.ndarray]:
    return [sample(rng, v.shape, dtype_name(v.dtype), special) for v in fn.inputs]


def unary_program(op: str, dt: str, shapes: list[tuple[int, ...]] = SHAPES,
                  **attrs: object) -> Function:
    b = Builder(f"{op}_{dt}")
    xs = [b.input(TensorType(dt, s)) for s in shapes]
    return b.build([b.emit(op, x, **attrs) for x in xs])


def special_programs(dt: str) -> list[tuple[str, Function]]:
    """(op, program) for each special function on ``dt``: ``SPECIAL_FUNCTIONS`` and
    ``polygamma`` of each order in ``POLYGAMMA_ORDERS``."""
    out = [(op, unary_program(op, dt)) for op in SPECIAL_FUNCTIONS]
    return out + [("polygamma", unary_program("polygamma", dt, n=n)) for n in POLYGAMMA_ORDERS]


def special_inputs(rng: np.random.Generator, op: str, fn: Function) -> list[np.ndarray]:
    """``inputs`` moved into the op's domain where it is narrow (erfinv: [-1, 1],
    erfcinv: [0, 2]), some outside it and at its ends."""
    args = inputs(rng, fn)
    if op not in ("erfinv", "erfcinv"):
        return args
    shift, ends = (1.0, (0.0, 2.0)) if op == "erfcinv" else (0.0, (-1.0, 1.0))
    with np.errstate(all="ignore"):
        args = [(a / 4 + shift).astype(a.dtype) for a in args]
    for a in args:
        if a.size > 3:
            a.reshape(-1)[1:4:2] = ends
    return args


def binary_program(op: str, dt: str, shapes: list[tuple[int, ...]] = SHAPES) -> Function:
    b = Builder(f"{op}_{dt}")
    outs = []
    for s in shapes:
        x, y = b.input(TensorType(dt, s)), b.input(TensorType(dt, s))
        outs.append(b.emit(op, x, y))
    return b.build(outs)


def iota_program(dt: str = "f64") -> Function:
    """``iota`` alone (empty, size-1 and odd shapes, every axis, integer and float
    indices) and the arrays built from it as the front end builds them, read by a ``dt``
    input of shape [37, 45] (so ``optimize`` fuses them): ``eye`` with offsets, ``tri``,
    an affine ``arange``, and a trace (a reduction over a masked product)."""
    b = Builder(f"iota_{dt}")
    x = b.input(TensorType(dt, (37, 45)))
    outs = [b.iota(shape=s, axis=a, dtype=d) for s, a, d in [
        ((0,), 0, "i64"), ((1,), 0, "f32"), ((7,), 0, "i32"), ((3, 5), 1, "f64"),
        ((2, 1, 9), 0, "i64"), ((2, 1, 9), 2, "f32"), ((0, 4), 1, "i32"), ((37,), 0, dt)]]
    rows = b.iota(shape=(37, 45), axis=0, dtype="i64")
    cols = b.iota(shape=(37, 45), axis=1, dtype="i64")
    for k in (0, 3, -40):  # eye(37, 45, k) * x: on, above and below every diagonal
        diag = b.eq(b.add(rows, b.const(k, "i64", (37, 45))), cols)
        outs.append(b.mul(x, b.convert(diag, dtype=dt)))
    outs.append(b.select(b.ge(rows, cols), x, b.const(0.0, dt, (37, 45))))  # tril
    ar = b.iota(shape=(37, 45), axis=1, dtype=dt)  # arange(0.5, -44.5, -1)[None, :] + x
    outs.append(b.add(x, b.add(b.const(0.5, dt, (37, 45)), b.mul(ar, b.const(-1.0, dt, (37, 45))))))
    eye = b.convert(b.eq(rows, cols), dtype=dt)
    outs += [b.sum(b.mul(x, eye), axes=(0, 1)), b.sum(b.mul(x, eye), axes=(1,))]
    return b.build(outs)


# -- comparison ----------------------------------------------------------------------------
def rnn_steps(T: int = 5, dt: str = "f64") -> Function:
    """A traced-looking RNN: ``T`` unrolled steps of ``h = tanh(xs[t] @ W + h @ U)`` and a
    running sum of ``sum(h)``, as ``roll`` finds them (the steps are one loop when
    rolled)."""
    b = Builder(f"rnn{T}_{dt}")
    xs = b.input(TensorType(dt, (T, 2, 3)), "xs")
    w, u = b.input(TensorType(dt, (3, 4)), "W"), b.input(TensorType(dt, (4, 4)), "U")
    h, tot = b.const(0.0, dt, (2, 4)), b.const(0.0, dt, ())
    for t in range(T):
        with b.at(f"rnn.py:{t % 2 + 4}"):
            x = b.reshape(b.slice(xs, start=(t, 0, 0), stop=(t + 1, 2, 3), step=(1, 1, 1)),
                          shape=(2, 3))
            h = b.tanh(b.add(b.matmul(x, w), b.matmul(h, u)))
            tot = b.add(tot, b.sum(h, axes=(0, 1)))
    return b.build([tot])


def loop_programs() -> list[tuple[str, Function]]:
    """Programs with ``loop`` ops: a rolled RNN and its optimized gradient (a forward
    loop saving residuals, a reverse loop), a loop of no steps, and a loop in a loop
    whose inner body holds a guard."""
    from yota.ir.autodiff import vjp
    from yota.ir.loops import loop_op
    from yota.ir.passes import PassContext, optimize
    from yota.ir.passes.roll import roll

    out = []
    for dt in FLOATS:
        fn = roll(rnn_steps(5, dt), PassContext(roll_min_saved=4))
        out += [(f"loop_rnn_{dt}", optimize(fn)),
                (f"loop_rnn_grad_{dt}", optimize(vjp(fn, [0, 1, 2])))]
    body = Builder("empty_body")
    c, x = body.input(TensorType("f32", (3,))), body.input(TensorType("f32", (3,)))
    body_fn = body.build([body.add(c, x), body.neg(x)])
    b = Builder("no_steps")
    c0, xs = b.input(TensorType("f32", (3,))), b.input(TensorType("f32", (0, 3)))
    b.callees[body_fn.name] = body_fn
    res = b.append(loop_op(body_fn, [c0, xs], length=0, carries=1, stacked=1)).results
    out.append(("loop_no_steps", b.build(list(res))))
    ib = Builder("inner")
    v = ib.input(TensorType("f64", (2,)))
    ib.guard(ib.lt(ib.sum(v, axes=(0,)), ib.const(100.0, "f64")), expected=True, kind="bool")
    inner = ib.build([ib.sin(ib.add(v, v))])
    ob = Builder("outer")
    v = ob.input(TensorType("f64", (2,)))
    ob.callees[inner.name] = inner
    (r,) = ob.append(loop_op(inner, [v], length=3, carries=1, stacked=0)).results
    outer = ob.build([ob.exp(r)])
    b = Builder("nested")
    x = b.input(TensorType("f64", (2,)))
    b.callees[outer.name] = outer
    out.append(("loop_nested_guard", b.build(list(b.append(loop_op(
        outer, [x], length=2, carries=1, stacked=0, reverse=True)).results))))
    return out


def mismatch(fn: Function, args: list[np.ndarray], got: list[Any],
             want: list[Any]) -> str | None:
    """None if ``got`` (a backend's run of ``fn``) agrees with ``want`` (the
    interpreter's) as ``precision`` says it must for each op, else a description."""
    return precision.mismatch(fn, args, got, want)


def compare(fn: Function, args: list[np.ndarray], exe: Callable[..., list[Any]],
            to_host: Callable[[Any], np.ndarray] = np.asarray,
            backend: str = "backend") -> str | None:
    """None if ``exe`` (``fn`` compiled by ``backend``) agrees with the interpreter on
    ``args`` (``precision.mismatch``). Errors must be the same error with the same
    message."""
    try:
        want, werr = run(fn, *args), None
    except Exception as e:  # noqa: BLE001 - the backend must raise the same
        want, werr = None, e
    try:
        got, gerr = [to_host(x) for x in exe(*args)], None
    except Exception as e:  # noqa: BLE001
        got, gerr = None, e
    if werr is not None or gerr is not None:
        if type(werr) is type(gerr) and str(werr) == str(gerr):
            return None
        return f"interpreter raised {werr!r}, {backend} raised {gerr!r}"
    assert got is not None and want is not None
    return mismatch(fn, args, got, want)
