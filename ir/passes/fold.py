"""Constant folding: an op whose operands are all constants becomes a constant, computed
by the op's NumPy reference implementation (so it gives exactly what the interpreter
would).

Size limits keep huge constants out of the IR: a result with more than
``ctx.fold_limit`` elements is folded only if it is a splat (all elements equal; such a
constant is stored lazily as one value), no op reading or writing more than
``ctx.fold_work_limit`` elements is evaluated, and no result larger than both
``ctx.fold_grow_bytes`` and every constant it is computed from is made (a mask of bools
selecting between splats, a vector broadcast to a matrix: the program computes those).
Guards, calls and fused kernels are never folded, nor are ops that read no operand
(``iota``): an array made from its shape alone is computed by the program, so folding it
would only put its data in the program.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ..core import Function, Op, Value, make_op
from ..errors import IRTypeError
from ..ops import get_opdef
from ..ops.misc import splat_scalar
from ..types import TensorType
from .base import Pass, PassContext, rebuild, remap

# Shape ops that turn a splat into a splat of another shape.
SPLAT_SHAPE_OPS = frozenset({"broadcast", "reshape", "transpose", "slice", "flip"})


def _foldable(op: Op) -> bool:
    opdef = get_opdef(op.name)
    return (len(op.results) == 1 and bool(op.operands) and not opdef.effect
            and not opdef.calls)


def _splat_result(op: Op, args: list[np.ndarray]) -> np.ndarray | None:
    """The result as a lazy splat when every operand is one and the op keeps splats."""
    opdef = get_opdef(op.name)
    if not (opdef.elementwise or op.name in SPLAT_SHAPE_OPS):
        return None
    scalars = [splat_scalar(a) for a in args]
    if any(s is None for s in scalars):
        return None
    if op.name in SPLAT_SHAPE_OPS:
        value: Any = scalars[0]
    else:
        with np.errstate(all="ignore"):
            value = opdef.impl(*scalars, **op.attrs)
    return np.broadcast_to(_cast(value, op.result.type.with_shape(())), op.result.shape)


def _cast(value: Any, t: TensorType) -> np.ndarray:
    """``value`` as an array of type ``t`` (the interpreter's conversion of results)."""
    arr = np.asarray(value)
    if arr.shape != t.shape:
        raise IRTypeError(f"fold: computed shape {arr.shape}, expected {t}")
    return arr.astype(t.dtype) if arr.dtype != t.dtype else arr


def _evaluate(op: Op, args: list[np.ndarray], ctx: PassContext) -> np.ndarray | None:
    if op.result.type.size == 0 or any(a.size == 0 for a in args):
        return None
    splat = _splat_result(op, args)
    if splat is not None:
        return splat
    work = op.result.type.size + sum(a.size for a in args)
    if op.result.type.size > ctx.fold_limit or work > ctx.fold_work_limit:
        return None
    if op.result.type.nbytes > max([ctx.fold_grow_bytes] + [_stored(a) for a in args]):
        return None  # more data than the program computes it from: keep the computation
    with np.errstate(all="ignore"):
        value = get_opdef(op.name).impl(*args, **op.attrs)
    return _cast(value, op.result.type)


def _stored(a: np.ndarray) -> int:
    """The bytes a constant holds (one element for a lazy splat)."""
    return a.itemsize if a.ndim and a.size and not any(a.strides) else a.nbytes


def fold(fn: Function, ctx: PassContext) -> Function:
    consts: dict[Value, np.ndarray] = {}
    subst: dict[Value, Value] = {}
    ops: list[Op] = []
    for op in fn.ops:
        op = remap(op, subst)
        if op.name == "const":
            consts[op.result] = op.attrs["value"]
        elif _foldable(op) and all(v in consts for v in op.operands):
            value = _evaluate(op, [consts[v] for v in op.operands], ctx)
            if value is not None:
                new = make_op("const", [], {"value": value}, op.loc)
                consts[new.result] = new.attrs["value"]
                subst[op.result] = new.result
                op = new
        ops.append(op)
    return rebuild(fn, ops, subst) if subst else fn


FOLD = Pass("fold", "evaluate ops on constants once, at compile time (within size limits)",
            fold)
