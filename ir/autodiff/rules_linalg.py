"""Derivative rule of matmul (``[..., m, k] @ [..., k, n]``, equal batch dimensions)."""

from __future__ import annotations

from ..core import Builder, Op, Value
from .helpers import swap_last
from .registry import Grads, Rule


def _matmul(b: Builder, op: Op, dy: Value) -> Grads:
    x, y = op.operands
    return [b.matmul(dy, swap_last(b, y)), b.matmul(swap_last(b, x), dy)]


RULES_LINALG: dict[str, Rule] = {
    "matmul": _matmul,
}
