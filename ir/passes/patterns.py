"""The rewrite patterns of ``simplify``, as tables by op name.

A pattern is a pure function ``pattern(op, view) -> Rewrite | None``: it reads ``op``
and, through ``view``, the ops that define its operands, and returns either an existing
value that equals ``op``'s result, or ``(new_ops, value)``, or None. Only the driver
(``simplify``) changes the program.

Every pattern in ``PATTERNS`` is exact in IEEE arithmetic, bit for bit, including signed
zeros, infinities and where NaNs appear. The reference semantics are NumPy's: ``sum``
starts from ``+0.0``, so a sum of one element ``x`` is ``x + 0.0`` (``-0.0`` becomes
``+0.0``). Hence, for instance:

- ``x + 0.0`` is kept (``-0.0 + 0.0`` is ``+0.0``); ``x + (-0.0)`` and ``x - 0.0`` are ``x``;
- ``sum`` of ``n`` broadcast copies of ``x`` is ``x*n + 0.0`` only for ``n <= 2`` (for
  ``n >= 3`` the rounding of the summation differs from that of ``x*n``; integers: any n);
- ``x / 2**k`` is ``x * 2**-k`` (both round the same real number);
- ``log(exp x)`` and ``exp(log x)`` are not ``x`` (overflow, rounding, ``log`` of
  negatives).

``FAST_MATH_PATTERNS`` hold the rewrites that are not exact (``x*0 -> 0``, ``x - x -> 0``,
``x + 0.0 -> x``, reassociation of constants, ``log(exp x) -> x``, any ``sum`` of a
broadcast); they run only with ``ctx.fast_math``.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Union

import numpy as np

from ..core import Op, Value, make_op
from ..ops import get_opdef
from ..types import TensorType, dtype_name
from .base import const_splat, splat_const

Rewrite = Union[Value, tuple[list[Op], Value]]  # noqa: UP007 (a runtime alias, py3.10)


@dataclass(frozen=True)
class View:
    """What a pattern may read: the op defining each value, and constants."""

    producers: dict[Value, Op]
    fast_math: bool

    def producer(self, v: Value, name: str | None = None) -> Op | None:
        op = self.producers.get(v)
        return op if op is not None and (name is None or op.name == name) else None

    def splat(self, v: Value) -> np.ndarray | None:
        return const_splat(v, self.producers)

    def is_const(self, v: Value, value: float, negative_zero: bool | None = None) -> bool:
        """``v`` is a constant with every element ``value`` (and, for a float zero, the
        given sign when ``negative_zero`` is not None)."""
        s = self.splat(v)
        if s is None or s.dtype.kind == "b" and value not in (0, 1):
            return False
        if s != value:
            return False
        if negative_zero is None or s.dtype.kind != "f":
            return True
        return bool(np.signbit(s)) == negative_zero


Pattern = Callable[[Op, View], Union[Rewrite, None]]  # noqa: UP007


def new(name: str, *operands: Value, loc: str | None = None, **attrs: object) -> Op:
    return make_op(name, operands, attrs, loc)


def chain(*ops: Op) -> Rewrite:
    """New ops whose last result is the replacement."""
    return list(ops), ops[-1].result


def _sides(op: Op) -> list[tuple[Value, Value]]:
    a, b = op.operands
    return [(a, b), (b, a)]


def _float(t: TensorType) -> bool:
    return t.dtype.kind == "f"


# -- add, sub, mul, div, neg --------------------------------------------------------------
def add_zero(op: Op, m: View) -> Rewrite | None:
    """x + (-0.0) -> x; x + 0 -> x for integers and booleans (never x + (+0.0))."""
    for x, c in _sides(op):
        if m.is_const(c, 0, negative_zero=True):
            return x
    return None


def add_neg(op: Op, m: View) -> Rewrite | None:
    """x + neg(y) -> x - y; neg(x) + y -> y - x."""
    for x, c in _sides(op):
        n = m.producer(c, "neg")
        if n is not None:
            return chain(new("sub", x, n.operands[0], loc=op.loc))
    return None


def sub_zero(op: Op, m: View) -> Rewrite | None:
    """x - 0.0 -> x (and x - 0 for integers); -0.0 - x -> neg(x)."""
    x, c = op.operands
    if m.is_const(c, 0, negative_zero=False):
        return x
    if m.is_const(x, 0, negative_zero=True):
        return chain(new("neg", c, loc=op.loc))
    return None


def sub_neg(op: Op, m: View) -> Rewrite | None:
    """x - neg(y) -> x + y."""
    x, c = op.operands
    n = m.producer(c, "neg")
    return chain(new("add", x, n.operands[0], loc=op.loc)) if n is not None else None


def mul_one(op: Op, m: View) -> Rewrite | None:
    """x * 1 -> x; x * (-1) -> neg(x)."""
    for x, c in _sides(op):
        if m.is_const(c, 1):
            return x
        if x.dtype.kind != "b" and m.is_const(c, -1):
            return chain(new("neg", x, loc=op.loc))
    return None


def div_one(op: Op, m: View) -> Rewrite | None:
    """x / 1 -> x; x / (-1) -> neg(x)."""
    x, c = op.operands
    if m.is_const(c, 1):
        return x
    return chain(new("neg", x, loc=op.loc)) if m.is_const(c, -1) else None


def _reciprocal(c: np.ndarray, exact: bool) -> np.ndarray | None:
    """1/c when it is finite and (if ``exact``) c is a power of two, so that
    ``x * (1/c)`` rounds like ``x / c``."""
    with np.errstate(all="ignore"):
        r = np.reciprocal(c)
    if not (np.isfinite(c) and np.isfinite(r) and c != 0):
        return None
    if exact and abs(float(np.frexp(c)[0])) != 0.5:
        return None
    return r


def _div_by_const(op: Op, m: View, exact: bool) -> Rewrite | None:
    x, c = op.operands
    s = m.splat(c)
    r = _reciprocal(s, exact) if s is not None else None
    if r is None or abs(float(r)) == 1:
        return None
    k = splat_const(r, x.dtype, x.shape, op.loc)
    return chain(k, new("mul", x, k.result, loc=op.loc))


def div_pow2(op: Op, m: View) -> Rewrite | None:
    """x / 2**k -> x * 2**-k (exact: both round the same real number)."""
    return _div_by_const(op, m, exact=True)


def neg_neg(op: Op, m: View) -> Rewrite | None:
    n = m.producer(op.operands[0], "neg")
    return n.operands[0] if n is not None else None


# -- shape ops ------------------------------------------------------------------------
def transpose(op: Op, m: View) -> Rewrite | None:
    """transpose to the identity -> x; transpose(transpose x) -> one transpose (or x)."""
    perm, x = op.attrs["perm"], op.operands[0]
    if perm == tuple(range(len(perm))):
        return x
    inner = m.producer(x, "transpose")
    if inner is None:
        return None
    composed = tuple(inner.attrs["perm"][p] for p in perm)
    src = inner.operands[0]
    if composed == tuple(range(len(composed))):
        return src
    return chain(new("transpose", src, perm=composed, loc=op.loc))


def _same_kind_twice(name: str, key: str) -> Pattern:
    """``name`` to x's own shape -> x; ``name(name(x))`` -> one ``name`` of x."""

    def pattern(op: Op, m: View) -> Rewrite | None:
        x = op.operands[0]
        if x.shape == op.result.shape:
            return x
        inner = m.producer(x, name)
        if inner is None:
            return None
        src = inner.operands[0]
        if src.shape == op.result.shape:
            return src
        return chain(new(name, src, loc=op.loc, **{key: op.attrs[key]}))

    pattern.__name__ = f"{name}_{name}"
    return pattern


reshape_reshape = _same_kind_twice("reshape", "shape")
broadcast_broadcast = _same_kind_twice("broadcast", "shape")


def slice_all(op: Op, m: View) -> Rewrite | None:
    """A slice that takes every element -> x."""
    x = op.operands[0]
    return x if op.result.shape == x.shape and set(op.attrs["step"]) <= {1} else None


def pad_none(op: Op, m: View) -> Rewrite | None:
    """A pad that adds no element -> x."""
    a = op.attrs
    return op.operands[0] if not any(a["low"] + a["high"] + a["interior"]) else None


def _row_block(v: Value, m: View) -> tuple[Value, int, int] | None:
    """(X, lo, hi) if ``v`` is rows lo:hi of X along axis 0 (a step-1 slice that keeps
    every other axis whole), or such a slice of one row reshaped to drop that axis."""
    sl = m.producer(v, "slice")
    rs = None
    if sl is None:
        rs = m.producer(v, "reshape")
        sl = m.producer(rs.operands[0], "slice") if rs is not None else None
    if sl is None:
        return None
    x, (start, stop, step) = sl.operands[0], (sl.attrs[k] for k in ("start", "stop", "step"))
    whole = start[1:] == (0,) * (x.ndim - 1) and stop[1:] == x.shape[1:]
    if not whole or set(step) != {1} or (rs is not None and (
            stop[0] - start[0] != 1 or v.shape != x.shape[1:])):
        return None
    return x, start[0], stop[0]


def concat_rows(op: Op, m: View) -> Rewrite | None:
    """concatenate along axis 0 of adjacent row blocks of one array X (slices, or rows
    reshaped to drop their axis) -> one slice of X (reshaped): exact, data movement only."""
    if op.attrs["axis"] != 0:
        return None
    found = [_row_block(v, m) for v in op.operands]
    blocks = [b for b in found if b is not None]
    if len(blocks) != len(found):
        return None
    x = blocks[0][0]
    bounds = [(lo, hi) for _, lo, hi in blocks]
    if any(b[0] is not x for b in blocks) or any(
            a[1] != b[0] for a, b in zip(bounds, bounds[1:], strict=False)):
        return None
    lo, hi = bounds[0][0], bounds[-1][1]
    sl = new("slice", x, start=(lo,) + (0,) * (x.ndim - 1), stop=(hi,) + x.shape[1:],
             step=(1,) * x.ndim, loc=op.loc)
    if sl.result.shape == op.result.shape:
        return chain(sl)
    return chain(sl, new("reshape", sl.result, shape=op.result.shape, loc=op.loc))


# -- reductions -----------------------------------------------------------------------
def sum_to_as_sum(op: Op, m: View) -> Rewrite | None:
    """sum_to -> sum over the summed axes (and a reshape putting back size-1 axes)."""
    x, shape = op.operands[0], op.attrs["shape"]
    lead = x.ndim - len(shape)
    axes = tuple(range(lead)) + tuple(lead + i for i, s in enumerate(shape)
                                      if s == 1 and x.shape[lead + i] != 1)
    s = new("sum", x, axes=axes, loc=op.loc)
    if s.result.shape == shape:
        return chain(s)
    return chain(s, new("reshape", s.result, shape=shape, loc=op.loc))


def _copies(op: Op, m: View) -> tuple[Value, int, tuple[int, ...]] | None:
    """For a reduction over axes that only repeat values (axes a broadcast added, or of
    size 1): (x, n, kept) such that the result reduces ``n`` copies of ``x`` reshaped to
    the kept axes' source sizes ``kept``."""
    y, axes = op.operands[0], op.attrs["axes"]
    b = m.producer(y, "broadcast")
    x = b.operands[0] if b is not None else y
    src = (1,) * (y.ndim - x.ndim) + x.shape
    if any(src[a] != 1 for a in axes):
        return None
    n = math.prod(y.shape[a] for a in axes)
    kept = tuple(s for i, s in enumerate(src) if i not in axes)
    return x, n, kept


class _Emit:
    """Builds a chain of new ops from ``x``; ``v`` is the chain's current value."""

    def __init__(self, x: Value, loc: str | None) -> None:
        self.ops: list[Op] = []
        self.v, self.loc = x, loc

    def __call__(self, name: str, *operands: Value, **attrs: object) -> Value:
        self.ops.append(new(name, *operands, loc=self.loc, **attrs))
        self.v = self.ops[-1].result
        return self.v

    def with_const(self, name: str, c: float) -> None:
        """``v = name(v, c)`` with a splat constant ``c``."""
        k = splat_const(c, self.v.dtype, self.v.shape, self.loc)
        self.ops.append(k)
        self(name, self.v, k.result)

    def to_shape(self, name: str, shape: tuple[int, ...]) -> None:
        if self.v.shape != shape:
            self(name, self.v, shape=shape)

    def rewrite(self) -> Rewrite:
        return (self.ops, self.v) if self.ops else self.v


def _sum_copies(op: Op, m: View, exact: bool) -> Rewrite | None:
    found = _copies(op, m)
    if found is None:
        return None
    x, n, kept = found
    if n == 0:
        return chain(splat_const(0, x.dtype, op.result.shape, op.loc))
    if exact and _float(x.type) and n > 2:
        return None
    e = _Emit(x, op.loc)
    e.to_shape("reshape", kept)
    if x.dtype.kind != "b" and n != 1:  # a sum of booleans is their "or": x itself
        e.with_const("mul", n)
    if exact and _float(x.type):
        e.with_const("add", 0.0)  # NumPy's sum starts from +0.0: -0.0 sums to +0.0
    e.to_shape("broadcast", op.result.shape)
    return e.rewrite()


def sum_of_copies(op: Op, m: View) -> Rewrite | None:
    """sum over axes that only repeat values (of a broadcast, or of size 1) of ``n``
    copies of x -> ``x*n + 0.0`` for floats when n <= 2, ``x*n`` for integers, ``any``
    for booleans (``x``), zeros when n == 0; a no-axes sum is ``x + 0.0``."""
    return _sum_copies(op, m, exact=True)


def maxmin_of_copies(op: Op, m: View) -> Rewrite | None:
    """max/min over axes that only repeat values -> the value (reshaped, broadcast)."""
    found = _copies(op, m)
    if found is None:
        return None
    e = _Emit(found[0], op.loc)
    e.to_shape("reshape", found[2])
    e.to_shape("broadcast", op.result.shape)
    return e.rewrite()


# -- convert, select --------------------------------------------------------------------
LOSSLESS = {("i32", "i64"), ("i32", "f64"), ("f32", "f64"), ("bool", "i32"),
            ("bool", "i64"), ("bool", "f32"), ("bool", "f64")}


def convert(op: Op, m: View) -> Rewrite | None:
    """convert to its own dtype -> x; a lossless round trip (f32 -> f64 -> f32) -> x."""
    x = op.operands[0]
    if x.dtype == op.result.dtype:
        return x
    inner = m.producer(x, "convert")
    if inner is None or inner.operands[0].dtype != op.result.dtype:
        return None
    names = (dtype_name(inner.operands[0].dtype), dtype_name(x.dtype))
    return inner.operands[0] if names in LOSSLESS else None


def select(op: Op, m: View) -> Rewrite | None:
    """select(true, a, b) -> a; select(false, a, b) -> b; select(c, a, a) -> a."""
    c, a, b = op.operands
    if a is b:
        return a
    s = m.splat(c)
    if s is None:
        return None
    return a if bool(s) else b


# -- fast-math only -----------------------------------------------------------------------
def fm_add_zero(op: Op, m: View) -> Rewrite | None:
    """x + 0.0 -> x (wrong for x = -0.0)."""
    for x, c in _sides(op):
        if m.is_const(c, 0):
            return x
    return None


def fm_sub_zero(op: Op, m: View) -> Rewrite | None:
    """x - (-0.0) -> x; 0.0 - x -> neg(x); x - x -> 0 (wrong for inf, NaN)."""
    x, c = op.operands
    if m.is_const(c, 0):
        return x
    if m.is_const(x, 0):
        return chain(new("neg", c, loc=op.loc))
    if x is c:
        return chain(splat_const(0, x.dtype, x.shape, op.loc))
    return None


def fm_mul_zero(op: Op, m: View) -> Rewrite | None:
    """x * 0 -> 0 (wrong for inf, NaN and the sign of zero)."""
    for _, c in _sides(op):
        if m.is_const(c, 0):
            return c
    return None


def fm_div_const(op: Op, m: View) -> Rewrite | None:
    """x / c -> x * (1/c) (one rounding more)."""
    return _div_by_const(op, m, exact=False)


def fm_reassociate(op: Op, m: View) -> Rewrite | None:
    """(x op c1) op c2 -> x op (c1 op c2) for op in add, mul."""
    for y, c2 in _sides(op):
        inner = m.producer(y, op.name)
        s2 = m.splat(c2)
        if inner is None or s2 is None:
            continue
        for x, c1 in _sides(inner):
            s1 = m.splat(c1)
            if s1 is not None:
                k = splat_const(get_opdef(op.name).impl(s1, s2), x.dtype, x.shape, op.loc)
                return chain(k, new(op.name, x, k.result, loc=op.loc))
    return None


def fm_inverse(outer: str, inner: str) -> Pattern:
    def pattern(op: Op, m: View) -> Rewrite | None:
        p = m.producer(op.operands[0], inner)
        return p.operands[0] if p is not None else None

    pattern.__name__ = f"{outer}_{inner}"
    return pattern


def fm_sum_of_copies(op: Op, m: View) -> Rewrite | None:
    """sum of n copies of x -> x * n for any n (rounds differently from the sum)."""
    return _sum_copies(op, m, exact=False)


PATTERNS: dict[str, list[Pattern]] = {
    "add": [add_zero, add_neg],
    "sub": [sub_zero, sub_neg],
    "mul": [mul_one],
    "div": [div_one, div_pow2],
    "neg": [neg_neg],
    "transpose": [transpose],
    "reshape": [reshape_reshape],
    "broadcast": [broadcast_broadcast],
    "slice": [slice_all],
    "pad": [pad_none],
    "concatenate": [concat_rows],
    "sum_to": [sum_to_as_sum],
    "sum": [sum_of_copies],
    "max": [maxmin_of_copies],
    "min": [maxmin_of_copies],
    "convert": [convert],
    "select": [select],
}

FAST_MATH_PATTERNS: dict[str, list[Pattern]] = {
    "add": [fm_add_zero, fm_reassociate],
    "sub": [fm_sub_zero],
    "mul": [fm_mul_zero, fm_reassociate],
    "div": [fm_div_const],
    "log": [fm_inverse("log", "exp")],
    "exp": [fm_inverse("exp", "log")],
    "sum": [fm_sum_of_copies],
}
