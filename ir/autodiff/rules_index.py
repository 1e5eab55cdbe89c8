"""Derivative rules of integer-array indexing: gather and scatter_add transpose each other."""

from __future__ import annotations

from ..core import Builder, Op, Value
from .registry import Grads, Rule


def _gather(b: Builder, op: Op, dy: Value) -> Grads:
    x, *idx = op.operands
    dx = b.scatter_add(dy, *idx, axis=op.attrs["axis"], shape=x.shape)
    return [dx] + [None] * len(idx)


def _scatter_add(b: Builder, op: Op, dy: Value) -> Grads:
    _, *idx = op.operands
    return [b.gather(dy, *idx, axis=op.attrs["axis"])] + [None] * len(idx)


RULES_INDEX: dict[str, Rule] = {
    "gather": _gather,
    "scatter_add": _scatter_add,
}
