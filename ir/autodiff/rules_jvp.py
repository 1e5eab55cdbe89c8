"""Forward-mode (jvp) rules of the ops whose tangent is not given by their reverse rule.

A rule is ``rule(b, op, ts) -> [tangent per result]``: ``ts`` holds one tangent per
operand (None: zero, or no tangent), and a rule returns None for a result whose tangent
is zero. Linear ops (shape ops, sums, indexing) apply themselves to the tangents;
``matmul`` is the product rule; ``prod``/``max``/``min`` weight the tangent by their
reverse rule's cotangent of ones. Elementwise ops need no entry here (``jvp.py``: their
reverse rule is their tangent rule), nor do ops whose reverse rule is transposed
(``transpose.py``: LAPACK).
"""

from __future__ import annotations

from collections.abc import Callable

from ..core import Builder, Op, Value
from .helpers import add
from .rules import RULES

Tangents = list["Value | None"]
JvpRule = Callable[[Builder, Op, list["Value | None"]], Tangents]


def _zeros(b: Builder, v: Value) -> Value:
    return b.const(0.0, v.dtype, v.shape)


def _or_zeros(b: Builder, ts: list[Value | None], op: Op) -> list[Value]:
    """Every operand's tangent, zeros where it has none (float operands)."""
    return [t if t is not None else _zeros(b, v) for t, v in zip(ts, op.operands, strict=True)]


def _linear(b: Builder, op: Op, ts: list[Value | None]) -> Tangents:
    """A linear op of one operand: the op itself applied to the tangent."""
    assert ts[0] is not None
    return [b.emit(op.name, ts[0], **op.attrs)]


def _convert(b: Builder, op: Op, ts: list[Value | None]) -> Tangents:
    return [b.convert_to(ts[0], op.result.dtype)]  # type: ignore[arg-type]


def _select(b: Builder, op: Op, ts: list[Value | None]) -> Tangents:
    _, x, y = op.operands
    tx = ts[1] if ts[1] is not None else _zeros(b, x)
    ty = ts[2] if ts[2] is not None else _zeros(b, y)
    return [b.select(op.operands[0], tx, ty)]


def _weighted_sum(b: Builder, op: Op, ts: list[Value | None]) -> Tangents:
    """``prod``/``max``/``min``: the tangent weighted by d result / d operand (the reverse
    rule's cotangent for a cotangent of ones), summed over the reduced axes."""
    ones = b.const(1.0, op.result.dtype, op.result.shape)
    g = RULES[op.name](b, op, ones)[0]
    assert g is not None and ts[0] is not None
    return [b.sum(b.mul(g, ts[0]), axes=op.attrs["axes"])]


def _concatenate(b: Builder, op: Op, ts: list[Value | None]) -> Tangents:
    return [b.concatenate(*_or_zeros(b, ts, op), axis=op.attrs["axis"])]


def _gather(b: Builder, op: Op, ts: list[Value | None]) -> Tangents:
    return [b.gather(ts[0], *op.operands[1:], axis=op.attrs["axis"])]


def _scatter_add(b: Builder, op: Op, ts: list[Value | None]) -> Tangents:
    return [b.scatter_add(ts[0], *op.operands[1:], **op.attrs)]


def _update_slice(b: Builder, op: Op, ts: list[Value | None]) -> Tangents:
    tx, tu = _or_zeros(b, ts, op)
    return [b.update_slice(tx, tu, **op.attrs)]


def _scatter(b: Builder, op: Op, ts: list[Value | None]) -> Tangents:
    x, u, *idx = op.operands
    tx = ts[0] if ts[0] is not None else _zeros(b, x)
    tu = ts[1] if ts[1] is not None else _zeros(b, u)
    return [b.scatter(tx, tu, *idx, axis=op.attrs["axis"])]


def _matmul(b: Builder, op: Op, ts: list[Value | None]) -> Tangents:
    x, y = op.operands
    tx, ty = ts
    parts = ([b.matmul(tx, y)] if tx is not None else []) + \
        ([b.matmul(x, ty)] if ty is not None else [])
    return [parts[0] if len(parts) == 1 else add(b, parts[0], parts[1])]


JVP_RULES: dict[str, JvpRule] = {
    "convert": _convert,
    "select": _select,
    "sum": _linear,
    "prod": _weighted_sum,
    "max": _weighted_sum,
    "min": _weighted_sum,
    "reshape": _linear,
    "transpose": _linear,
    "broadcast": _linear,
    "sum_to": _linear,
    "slice": _linear,
    "flip": _linear,
    "pad": _linear,
    "concatenate": _concatenate,
    "gather": _gather,
    "scatter_add": _scatter_add,
    "update_slice": _update_slice,
    "scatter": _scatter,
    "matmul": _matmul,
}
