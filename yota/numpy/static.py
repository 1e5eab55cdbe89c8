"""Arguments that are data of the trace (indices, counts, widths, modes), read as values.

A lowering sees a NumPy array argument as a tape variable (user arrays become ``const``
entries of the tape); ``static_value`` reads the constant back. A value computed from the
function's inputs has no value at lowering time: NumPy functions whose result *shape*
depends on it (``repeat`` counts, ``pad`` widths...) refuse it with a clear error.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from yota.ir.core import Function, Op, Value
from yota.ir.errors import UnsupportedError
from yota.ir.interpreter import run
from yota.ir.ops import get_opdef

from ..tape import Var
from .registry import LoweringContext


def is_var(a: Any) -> bool:
    """Whether a lowering argument is a tape variable (a traced or recorded array)."""
    return isinstance(a, Var)


def static_value(L: LoweringContext, a: Any, what: str,
                 why: str = "it decides the result's shape") -> Any:
    """The value of argument ``a``: itself for Python values, the constant's value for a
    NumPy array met in user code; a traced value raises ``UnsupportedError`` naming
    ``what`` (e.g. ``"np.repeat's repeats"``) and ``why`` it must be static."""
    if not L.is_traced(a):
        if isinstance(a, (list, tuple)):
            return type(a)(static_value(L, v, what, why) for v in a)
        return a
    v: Value = L.operand(a, None, None)
    for op in reversed(L.b.ops):
        if op.name == "const" and op.results[0] is v:
            return np.asarray(op.attrs["value"])
    value = _computed_from_shapes(L.b.ops, v)
    if value is not None:
        return value
    raise UnsupportedError(
        f"{what} is computed from the function's inputs: {why}, so it must be a constant "
        "of the trace (a Python value or an array not derived from traced arguments)")


def _computed_from_shapes(ops: list[Op], v: Value) -> np.ndarray | None:
    """The value of ``v`` when the ops making it read no input (a constant of the trace
    computed from ``iota`` ops: ``yota.numpy.generated``), run by the interpreter."""
    made = {r: op for op in ops for r in op.results}
    needed: dict[int, Op] = {}
    stack = [v]
    while stack:
        op = made.get(stack.pop())
        if op is None or get_opdef(op.name).effect or get_opdef(op.name).calls:
            return None  # an input, or an op that is not a plain computation
        if id(op) not in needed:
            needed[id(op)] = op
            stack.extend(op.operands)
    order = [op for op in ops if id(op) in needed]
    (out,) = run(Function("static", [], order, [v]))
    return out


def normalize_axis(axis: Any, ndim: int, fname: str) -> int:
    """``axis`` in ``[0, ndim)`` (negative axes count from the end), or an error."""
    if not isinstance(axis, (int, np.integer)):
        what = "a traced value" if is_var(axis) else type(axis).__name__
        raise UnsupportedError(f"{fname}: the axis must be a Python int (a constant of the "
                               f"trace), not {what}")
    axis = int(axis)
    if not -ndim <= axis < max(ndim, 1):
        raise UnsupportedError(f"{fname}: axis {axis} is out of bounds for a {ndim}-d array")
    return axis % ndim if ndim else 0


def operand_along(L: LoweringContext, a: Any, axis: Any, dtype: Any,
                  fname: str) -> tuple[Value, int]:
    """Argument ``a`` and the axis to work along: with ``axis=None``, NumPy's "the
    flattened array" and axis 0."""
    x = L.operand(a, dtype, None)
    if axis is None:
        return L.b.reshape_to(x, (x.type.size,)), 0
    return x, normalize_axis(axis, x.ndim, fname)
