"""Derivative rules of reductions over static axes."""

from __future__ import annotations

from ..core import Builder, Op, Value
from .helpers import full_like, mask, unreduce
from .registry import Grads, Rule


def _axes(op: Op) -> tuple[int, ...]:
    return tuple(op.attrs["axes"])


def _back(b: Builder, op: Op, y: Value) -> Value:
    """A reduced value ``y`` broadcast back to the operand's shape."""
    return unreduce(b, y, op.operands[0].shape, _axes(op))


def _sum(b: Builder, op: Op, dy: Value) -> Grads:
    return [_back(b, op, dy)]


def _chooser(b: Builder, op: Op, dy: Value) -> Grads:
    # JAX's rule: the cotangent is split equally among the positions that attain the max.
    x = op.operands[0]
    hit = mask(b, b.eq(x, _back(b, op, op.result)), x)
    count = b.sum(hit, axes=_axes(op))
    return [b.mul(hit, _back(b, op, b.div(dy, count)))]


def _prod(b: Builder, op: Op, dy: Value) -> Grads:
    # prod of the others: p/x without zeros, p_nonzero at a lone zero, 0 with two or more.
    x = op.operands[0]
    zero, one = full_like(b, x, 0.0), full_like(b, x, 1.0)
    is_zero = b.eq(x, zero)
    safe = b.select(is_zero, one, x)
    p = _back(b, op, b.mul(dy, b.prod(safe, axes=_axes(op))))
    nzeros = _back(b, op, b.sum(mask(b, is_zero, x), axes=_axes(op)))
    lone = b.emit("and", is_zero, b.eq(nzeros, one))
    none = b.eq(nzeros, zero)
    return [b.select(none, b.div(p, safe), b.select(lone, p, zero))]


RULES_REDUCE: dict[str, Rule] = {
    "sum": _sum,
    "prod": _prod,
    "max": _chooser,
    "min": _chooser,
}
