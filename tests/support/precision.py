"""How closely two runs of one IR program must agree: the one rule used by every
differential test (a backend against the interpreter, a memory plan against plain
buffers, an optimized program against the one it came from).

Every op is in one class of ``PRECISION``, with the reason:

- ``move``: the result's elements are copies of operand elements or constants (shape and
  data movement, ``max``/``min``, ``select``): equal operands give equal bits, but for the
  sign of a zero that a ``max``/``min`` reduction picks among zeros of both signs (IEEE
  leaves it to the implementation, NumPy's follows its SIMD order).
- ``exact``: IEEE arithmetic, correctly rounded in every implementation (``add``, ``mul``,
  ``div``, ``sqrt``...): equal operands give equal bits; different operands move the
  result by what the operands moved it, plus one unit in the last place for rounding.
- ``step``: piecewise constant (comparisons, ``floor``, ``sign``, integer conversion,
  ``argmax``): equal operands give equal results; where operands that differ could land
  on different sides of a step, the element is *undetermined* and not compared.
- ``ulp``: transcendentals. NumPy, glibc's libmvec and CUDA's libdevice are different
  implementations, each a few ulps from the exact value; two of them may differ by
  ``ULPS`` units in the last place. Within one implementation (NumPy against NumPy) they
  are deterministic and count as ``exact``. The special functions (``lgamma``, ``erf``,
  ``i0e``...) are one algorithm rendered by every backend with the same float64
  operations, but each platform's ``exp``/``log``/``sin``/``tan``; they are ``ulp`` too,
  and where the reflection formula of ``lgamma``/``digamma``/``polygamma`` cancels
  (``x < 0``), the bound also allows ``ULPS`` ulps of the terms that cancel.
- ``sum``: reductions that reassociate (``sum``, ``sum_to``, ``prod``, ``matmul``,
  ``scatter_add``): BLAS blocking, vector lanes and thread splits order the terms by
  layout and CPU. Two orders of an n-term sum differ by at most ``n * eps * sum|terms|``
  (twice the (n-1)u bound of recursive summation, u = eps/2).

``bounds(fn, args)`` propagates these through the program on the reference values: every
value gets an elementwise bound on how far a second correct run may be from the
reference (0: bit for bit, inf: undetermined), operands' differences carried through
each op by its sensitivity (evaluated in extended precision at the corners of the
operands' intervals, or by the op's linear structure). ``mismatch(fn, args, got, want)``
compares two runs under those bounds.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from itertools import product
from typing import Any

import numpy as np
from yota.ir import Function, get_opdef, run
from yota.ir.interpreter import check_inputs
from yota.ir.ops import OPS

MOVE, EXACT, STEP, ULP, SUM, FACTOR = "move", "exact", "step", "ulp", "sum", "factor"
ULPS = 8  # libmvec and CUDA document 1-4 ulps (float32 pow: 8); NumPy's own are 1-4

_WHY = {
    MOVE: "elements are copied, not computed",
    EXACT: "IEEE correctly rounded: equal operands give equal bits",
    STEP: "piecewise constant: exact unless operands straddle a step",
    ULP: "transcendental: implementations differ by a few ulps",
    SUM: "reassociated reduction: the order of terms depends on layout and CPU",
    FACTOR: "LAPACK factorization: backward stable, blocking and pivot order differ",
}
_CLASSES = {
    MOVE: "reshape transpose broadcast slice flip pad concatenate gather select const iota max "
          "min "
          "update_slice scatter "
          "maximum minimum neg abs",
    EXACT: "add sub mul div sqrt square reciprocal convert pivots callback",
    STEP: "lt le gt ge eq ne and or xor not floor ceil round sign floordiv mod isnan isinf "
          "isfinite argmax argmin",
    ULP: "exp expm1 log log1p log2 sin cos tan tanh sinh cosh arctan arcsin arccos arctan2 "
         "pow lgamma digamma polygamma erf erfc erfcx erfinv erfcinv i0 i0e i1 i1e",
    SUM: "sum sum_to prod matmul scatter_add",
    FACTOR: "cholesky triangular_solve lu solve eigh svd svdvals qr",
}
PRECISION: dict[str, tuple[str, str]] = {
    op: (cls, _WHY[cls]) for cls, ops in _CLASSES.items() for op in ops.split()}
STRUCTURAL = {"guard", "call", "fused", "loop"}  # no values of their own (effects, callees)


def classify(op: str) -> str:
    """The precision class of ``op``; an op nobody classified is an error, so a new op
    has to say how exactly backends must reproduce it."""
    if op not in PRECISION:
        raise KeyError(f"op {op!r} has no precision class in tests/support/precision.py")
    return PRECISION[op][0]


# -- bounds -------------------------------------------------------------------------------
def _eps(dtype: np.dtype) -> float:
    return float(np.finfo(dtype).eps) if dtype.kind == "f" else 0.0


def _spacing(y: np.ndarray, extra: np.ndarray) -> np.ndarray:
    if y.dtype.kind != "f":
        return np.zeros(y.shape)
    with np.errstate(all="ignore"):
        big = np.abs(y.astype(np.float64)) + extra
        return np.spacing(np.where(np.isfinite(big), big, 0).astype(y.dtype)).astype(np.float64)


def _undetermined(d: np.ndarray) -> np.ndarray:
    """Bounds of an integer or boolean value: 0 where known, inf where not."""
    return np.where(d > 0, np.inf, 0.0)


def _corner_spread(impl: Callable[..., Any], xs: list[np.ndarray], ds: list[np.ndarray],
                   attrs: dict[str, Any], y: np.ndarray) -> np.ndarray:
    """max |f(x') - f(x)| over the corners x' = x +- d, in extended precision; inf where a
    corner changes NaN-ness or infinity."""
    with np.errstate(all="ignore"):
        return _spread(impl, xs, ds, attrs, y)


def _spread(impl: Callable[..., Any], xs: list[np.ndarray], ds: list[np.ndarray],
            attrs: dict[str, Any], y: np.ndarray) -> np.ndarray:
    ext = [x.astype(np.longdouble) if x.dtype.kind == "f" else x for x in xs]
    ref = np.asarray(impl(*ext, **attrs))
    out = np.zeros(y.shape)
    moving = [i for i, d in enumerate(ds) if d.size and np.any(d > 0)]
    for signs in product((-1, 1), repeat=len(moving)):
        pert = list(ext)
        for i, s in zip(moving, signs, strict=True):
            pert[i] = ext[i] + s * ds[i].astype(np.longdouble)
        c = np.asarray(impl(*pert, **attrs))
        same = (c == ref) | (np.isnan(c) & np.isnan(ref))
        jump = (np.isnan(c) != np.isnan(ref)) | (np.isinf(c) != np.isinf(ref))
        diff = np.abs(c.astype(np.longdouble) - ref).astype(np.float64)
        out = np.maximum(out, np.where(same, 0.0, np.where(jump, np.inf, diff)))
    return np.broadcast_to(out, y.shape)


def _elementwise(op: str, cls: str, xs: list[np.ndarray], ds: list[np.ndarray],
                 attrs: dict[str, Any], y: np.ndarray, same_impl: bool) -> np.ndarray:
    floats = [d if x.dtype.kind == "f" else np.zeros(d.shape) for x, d in zip(xs, ds, strict=True)]
    unknown = np.zeros(y.shape, dtype=bool)  # an integer or boolean operand not known
    for x, d in zip(xs, ds, strict=True):
        if x.dtype.kind != "f":
            unknown |= np.broadcast_to(d > 0, y.shape)
    if any(np.any(d > 0) for d in floats):
        spread = _corner_spread(get_opdef(op).impl, xs, floats, attrs, y)
    else:
        spread = np.zeros(y.shape)
    if cls == STEP or y.dtype.kind != "f":
        out = _undetermined(spread)
    else:
        ulps = 0 if cls == ULP and same_impl else (ULPS if cls == ULP else 0)
        rounding = np.where(spread > 0, 1.0, 0.0) + ulps
        out = spread + rounding * _spacing(y, spread)
        if op in _REFLECTED and not same_impl:
            out = out + _reflection(op, xs[0], attrs, y)
    return np.where(unknown, np.inf, out)


_REFLECTED = ("lgamma", "digamma", "polygamma")


def _reflection(op: str, x: np.ndarray, attrs: dict[str, Any], y: np.ndarray) -> np.ndarray:
    """For x < 0, where ``f(x)`` is computed as ``+-f(1 - x)`` minus a term of the
    reflection formula: ``ULPS`` ulps of those terms' size ``2 |f(1 - x)| + |f(x)|``."""
    with np.errstate(all="ignore"):
        xf = x.astype(np.float64)
        pos = np.abs(get_opdef(op).impl(1.0 - xf, **attrs).astype(np.float64))
        size = 2 * pos + np.abs(y.astype(np.float64))
        out = np.where((xf < 0) & np.isfinite(size), ULPS * _eps(y.dtype) * size, 0.0)
    return np.broadcast_to(out, y.shape)


def _abs(x: np.ndarray) -> np.ndarray:
    with np.errstate(all="ignore"):
        a = np.abs(x.astype(np.float64))
    return np.where(np.isfinite(a), a, 0.0)


def _reduce_len(op: str, xs: list[np.ndarray], attrs: dict[str, Any], y: np.ndarray) -> int:
    if op == "matmul":
        return xs[0].shape[-1] if xs[0].ndim else 1
    if op == "scatter_add":
        return max(1, xs[0].size // max(1, y.size) + 1)
    return max(1, xs[0].size // max(1, y.size))


def _sum_class(op: str, xs: list[np.ndarray], ds: list[np.ndarray], attrs: dict[str, Any],
               y: np.ndarray) -> np.ndarray:
    impl = get_opdef(op).impl
    if y.dtype.kind != "f":
        if not any(np.any(d > 0) for d in ds):
            return np.zeros(y.shape)
        return np.full(y.shape, np.inf)
    n = _reduce_len(op, xs, attrs, y)
    eps = _eps(y.dtype)
    with np.errstate(all="ignore"):
        if op == "matmul":
            a, b = _abs(xs[0]), _abs(xs[1])
            carried = a @ ds[1] + ds[0] @ b + ds[0] @ ds[1]
            own = n * eps * (a @ b)
        elif op == "prod":
            a = _abs(xs[0])
            carried = impl(a + ds[0], **attrs) - impl(a, **attrs)
            own = n * eps * impl(a, **attrs)
        else:  # sum, sum_to, scatter_add: linear with coefficients 1
            rest = xs[1:]
            carried = impl(ds[0], *rest, **attrs)
            own = n * eps * impl(_abs(xs[0]), *rest, **attrs)
            if op == "scatter_add" and any(np.any(d > 0) for d in ds[1:]):
                return np.full(y.shape, np.inf)
    out = np.asarray(carried + own, dtype=np.float64)
    out = np.where(np.isnan(out), np.inf, out)
    return out + np.where(out > 0, _spacing(y, out), 0.0)


# IEEE 754 leaves the sign of min(-0.0, 0.0) and max(-0.0, 0.0) to the implementation, and
# NumPy's reductions pick by their SIMD order (np.min([-0., 0., 0., 0.]) is 0.0, a loop
# keeping the first smaller-or-equal value gives -0.0): such a zero's sign is undetermined,
# a bound of one subnormal step (the value is a zero either way; an op that tells the
# signs apart, 1/x, makes its result undetermined through the corners).
_SIGN_OF_ZERO = float(np.finfo(np.float64).smallest_subnormal)


def _zero_of_either_sign(x: np.ndarray, axes: tuple[int, ...], y: np.ndarray) -> np.ndarray:
    """Where a max/min reduction's result is a zero picked among zeros of both signs."""
    if x.dtype.kind != "f" or not x.size:
        return np.zeros(y.shape, bool)
    zero = x == 0
    both = np.any(zero & np.signbit(x), axis=axes) & np.any(zero & ~np.signbit(x), axis=axes)
    return np.broadcast_to(both & (y == 0), y.shape)


def _move_class(op: str, xs: list[np.ndarray], ds: list[np.ndarray], attrs: dict[str, Any],
                y: np.ndarray) -> np.ndarray:
    """The op applied to the operands' bounds (data operands); index and condition
    operands must be known exactly, else the elements they pick are undetermined."""
    impl = get_opdef(op).impl
    if op in ("const", "iota"):  # exact values, read from nothing
        return np.zeros(y.shape)
    if op in ("max", "min"):
        out = np.max(ds[0], axis=attrs["axes"]) if ds[0].size else np.zeros(y.shape)
        return np.where(_zero_of_either_sign(xs[0], attrs["axes"], y), _SIGN_OF_ZERO, out)
    if op in ("maximum", "minimum", "neg", "abs"):
        return np.broadcast_to(np.maximum.reduce([np.broadcast_to(d, y.shape) for d in ds])
                               if len(ds) > 1 else ds[0], y.shape)
    if op == "select":
        c = np.broadcast_to(ds[0] > 0, y.shape)
        picked = np.where(xs[0], ds[1], ds[2])
        return np.where(c, np.inf, picked)
    if op == "gather":
        if any(np.any(d > 0) for d in ds[1:]):
            return np.full(y.shape, np.inf)
        return np.asarray(impl(ds[0], *xs[1:], **attrs), dtype=np.float64)
    if op == "scatter":  # the bounds of x, with the updates' bounds where they land
        if any(np.any(d > 0) for d in ds[2:]):
            return np.full(y.shape, np.inf)
        return np.asarray(impl(ds[0], ds[1], *xs[2:], **attrs), dtype=np.float64)
    return np.asarray(impl(*ds, **attrs), dtype=np.float64)


def _op_bounds(op: Any, xs: list[np.ndarray], ds: list[np.ndarray], y: np.ndarray,
               same_impl: bool) -> np.ndarray:
    cls = classify(op.name)
    if op.name == "convert" and xs[0].dtype.kind == "f" and y.dtype.kind == "f":
        return ds[0] + np.where(ds[0] > 0, _spacing(y, ds[0]), 0.0)  # a rounding at most
    if cls == SUM:
        out = _sum_class(op.name, xs, ds, op.attrs, y)
    elif cls == MOVE:
        out = _move_class(op.name, xs, ds, op.attrs, y)
    elif cls == FACTOR:
        out = _factor_bounds(op.name, xs, ds, y)
    elif op.name in ("argmax", "argmin"):
        out = _arg_bounds(op.name, xs[0], ds[0], op.attrs["axis"], y)
    else:
        out = _elementwise(op.name, cls, xs, ds, op.attrs, y, same_impl)
    out = np.broadcast_to(np.asarray(out, dtype=np.float64), y.shape)
    return _undetermined(out) if y.dtype.kind != "f" else out


def _factor_bounds(op: str, xs: list[np.ndarray], ds: list[np.ndarray],
                   y: np.ndarray) -> np.ndarray:
    """A backward-stable factorization or solve (single result): the computed result is
    the exact one of operands moved by ``c n eps`` relative to their size, so it moves by
    the condition number times that, plus the operands' own bounds relative to their size
    (normwise, per matrix; c = 8; singular values have condition 1)."""
    a = xs[0].astype(np.float64)
    n = max(a.shape[-2:]) if a.ndim >= 2 else 1
    with np.errstate(all="ignore"):
        kappa = np.ones(a.shape[:-2]) if op == "svdvals" or not a.size else np.linalg.cond(a)
        rel = 8 * n * _eps(y.dtype) + sum(
            np.max(d, axis=(-1, -2), initial=0.0) / np.maximum(
                np.max(_abs(x), axis=(-1, -2), initial=0.0), np.finfo(np.float64).tiny)
            for x, d in zip(xs, ds, strict=True))
        size = np.max(_abs(y), axis=-1, initial=0.0)
        if y.ndim == a.ndim:
            size = np.max(size, axis=-1, initial=0.0)
        out = kappa * rel * size
    out = np.where(np.isfinite(out), out, np.inf)
    return out.reshape(out.shape + (1,) * (y.ndim - out.ndim))


def _arg_bounds(op: str, x: np.ndarray, d: np.ndarray, axis: int, y: np.ndarray) -> np.ndarray:
    """An arg-extremum is known where one candidate stays ahead whatever the differences."""
    if not np.any(d > 0):
        return np.zeros(y.shape)
    s = 1.0 if op == "argmax" else -1.0
    with np.errstate(all="ignore"):
        lo, hi = s * x.astype(np.float64) - d, s * x.astype(np.float64) + d
        best_lo = np.max(lo, axis=axis, keepdims=True)
        contenders = np.sum(hi >= best_lo, axis=axis)
    return np.where(contenders > 1, np.inf, 0.0)


def bounds(fn: Function, args: Sequence[np.ndarray], *, same_impl: bool = False,
           arg_bounds: Sequence[np.ndarray] | None = None) -> list[np.ndarray]:
    """For each output of ``fn`` on ``args``, the elementwise bound on how far another
    correct implementation's result may be from the interpreter's: 0 means bit for bit,
    inf undetermined. ``same_impl``: both runs use NumPy's transcendentals."""
    env: dict[Any, np.ndarray] = {}
    dev: dict[Any, np.ndarray] = {}
    args = check_inputs(fn, list(args))
    zeros = [np.zeros(np.shape(a)) for a in args]
    for v, a, d in zip(fn.inputs, args, arg_bounds or zeros, strict=True):
        env[v], dev[v] = np.asarray(a), np.asarray(d, dtype=np.float64)
    for op in fn.ops:
        xs, ds = [env[v] for v in op.operands], [dev[v] for v in op.operands]
        if op.name == "guard":
            continue
        if op.name == "loop":
            ys, dys = _loop_bounds(op.attrs, fn.callees[op.attrs["callee"]], xs, ds,
                                   same_impl)
        elif get_opdef(op.name).calls:
            callee = fn.callees[op.attrs["callee"]]
            ys = run(callee, *xs)
            dys = bounds(callee, xs, same_impl=same_impl, arg_bounds=ds)
        else:
            ys = _run_values_op(op, xs)
            dys = [_op_bounds(op, xs, ds, ys[0], same_impl)] if len(ys) == 1 else \
                [np.full(y.shape, np.inf) for y in ys]
        for r, y, d in zip(op.results, ys, dys, strict=True):
            env[r], dev[r] = y, d
    return [dev[v] for v in fn.outputs]


def _loop_bounds(attrs: dict[str, Any], body: Function, xs: list[np.ndarray],
                 ds: list[np.ndarray], same_impl: bool
                 ) -> tuple[list[np.ndarray], list[np.ndarray]]:
    """A loop's values and bounds, step by step: each step's carried bounds are the
    next step's input bounds."""
    from yota.ir.ops.loop import LoopShape, run_loop

    sh = LoopShape.of(attrs)
    ys = run_loop(attrs, body, xs, run)
    (c, s, w), (dc, ds_, dw) = sh.split_operands(xs), sh.split_operands(ds)
    dys = [np.zeros(y.shape) for y in ys[sh.carries:]]
    for i in sh.steps():
        ins = c + [x[i] for x in s] + w
        step = bounds(body, ins, same_impl=same_impl,
                      arg_bounds=dc + [d[i] for d in ds_] + dw)
        c = run(body, *ins)[:sh.carries]
        dc = step[:sh.carries]
        for d, e in zip(dys, step[sh.carries:], strict=True):
            d[i] = e
    return ys, dc + dys


def _run_values_op(op: Any, xs: list[np.ndarray]) -> list[np.ndarray]:
    with np.errstate(all="ignore"):
        out = get_opdef(op.name).impl(*xs, **op.attrs)
    outs = [out] if len(op.results) == 1 else list(out)
    return [np.asarray(o).astype(r.dtype).reshape(r.shape)
            for o, r in zip(outs, op.results, strict=True)]


# -- comparison ---------------------------------------------------------------------------
def within(got: np.ndarray, want: np.ndarray, bound: np.ndarray) -> str | None:
    """None if ``got`` is within ``bound`` of ``want`` elementwise: bit for bit (signs of
    zeros, NaN where NaN) where the bound is 0, not compared where it is inf."""
    if got.dtype != want.dtype or got.shape != want.shape:
        return f"{got.dtype}{got.shape} vs {want.dtype}{want.shape}"
    bound = np.broadcast_to(bound, want.shape)
    known = np.isfinite(bound)
    exact = known & (bound == 0)
    g, w = got[exact], want[exact]
    if want.dtype.kind == "f":
        gn, wn = np.isnan(g), np.isnan(w)
        bad = (gn != wn) | (~wn & ((g != w) | (np.signbit(g) != np.signbit(w))))
    else:
        bad = g != w
    if np.any(bad):
        k = int(np.flatnonzero(bad)[0])
        return f"must be bit for bit equal: {g[k]!r} vs {w[k]!r} (and {int(bad.sum()) - 1} more)"
    tol = known & (bound > 0)
    if want.dtype.kind != "f" or not np.any(tol):
        return None  # integer and boolean bounds are 0 or inf
    g, w, b = got[tol].astype(np.float64), want[tol].astype(np.float64), bound[tol]
    with np.errstate(all="ignore"):
        finite = np.isfinite(g) & np.isfinite(w)
        ok = np.where(finite, np.abs(g - w) <= b, _nonfinite_ok(g, w, b, want.dtype))
    if not np.all(ok):
        k = int(np.flatnonzero(~ok)[0])
        return (f"{g[k]!r} vs {w[k]!r}: differ by {abs(g[k] - w[k]):.3g}, more than the "
                f"bound {b[k]:.3g} (and {int((~ok).sum()) - 1} more)")
    return None


def _nonfinite_ok(g: np.ndarray, w: np.ndarray, b: np.ndarray, dtype: np.dtype) -> np.ndarray:
    """Where one side is NaN or inf: the same value, or an overflow the bound allows."""
    same = (g == w) | (np.isnan(g) & np.isnan(w))
    big = float(np.finfo(dtype).max)
    fin = np.where(np.isfinite(g), g, w)
    inf = np.where(np.isfinite(g), w, g)
    overflow = np.isinf(inf) & np.isfinite(fin) & (np.sign(inf) == np.sign(fin)) & \
        (np.abs(fin) + b >= big)
    return same | overflow


def mismatch(fn: Function, args: Sequence[np.ndarray], got: Sequence[Any],
             want: Sequence[Any], *, same_impl: bool = False) -> str | None:
    """None if two runs of ``fn`` on ``args`` agree as ``bounds`` says they must, else
    which output differs and how."""
    if len(got) != len(want):
        return f"{len(got)} outputs vs {len(want)}"
    bs = bounds(fn, args, same_impl=same_impl)
    for i, (g, w, b) in enumerate(zip(got, want, bs, strict=True)):
        msg = within(np.asarray(g), np.asarray(w), b)
        if msg:
            return f"output {i}: {msg}"
    return None


def unclassified() -> list[str]:
    """Ops of the op table without a precision class (a test keeps this empty)."""
    return sorted(set(OPS) - set(PRECISION) - STRUCTURAL)


def programs_mismatch(f: Function, g: Function, args: Sequence[np.ndarray]) -> str | None:
    """None if ``g`` (``f`` rewritten by passes that may reassociate sums, such as
    batching matrix products) agrees with ``f`` on the interpreter within the sum of both
    programs' bounds: each run is within its own bound of any other correct order of its
    sums. A rewrite that is not a reassociation of the modelled ops (fast-math algebra)
    is outside this rule."""
    want, got = run(f, *args), run(g, *args)
    bf = bounds(f, args, same_impl=True)
    bg = bounds(g, args, same_impl=True)
    for i, (x, y, b1, b2) in enumerate(zip(got, want, bf, bg, strict=True)):
        msg = within(np.asarray(x), np.asarray(y), b1 + b2)
        if msg:
            return f"output {i}: {msg}"
    return None
