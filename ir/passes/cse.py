"""Common subexpression elimination over the whole function.

Two ops are the same computation when they have the same name, the same operands and
equal attributes (constants compared by dtype, shape and bytes, so ``-0.0`` is not
``0.0`` and NaNs with one bit pattern are equal); operands of commutative ops are
compared as a set. The later op is dropped and its results replaced by the earlier
op's. Ops with an effect (guards) are never merged.
"""

from __future__ import annotations

import struct
from typing import Any

import numpy as np

from ..core import Function, Op, Value
from ..ops.misc import splat_scalar
from .base import Pass, PassContext, has_effect, rebuild, remap

COMMUTATIVE = frozenset({"add", "mul", "eq", "ne", "and", "or", "xor"})


def attr_key(v: Any) -> Any:
    """A hashable key equal for attribute values that mean the same thing."""
    if isinstance(v, np.ndarray):
        s = splat_scalar(v)
        body = ("splat", s.tobytes()) if s is not None else ("data", np.ascontiguousarray(
            v).tobytes())
        return ("array", v.dtype.str, v.shape, body)
    if isinstance(v, (list, tuple)):
        return ("seq", tuple(attr_key(x) for x in v))
    if isinstance(v, (float, np.floating)):
        return ("float", struct.pack("<d", float(v)))
    return (type(v).__name__, v)


def op_key(op: Op, number: dict[Value, int]) -> tuple[Any, ...]:
    operands = tuple(number[v] for v in op.operands)
    if op.name in COMMUTATIVE:
        operands = tuple(sorted(operands))
    attrs = tuple(sorted((k, attr_key(a)) for k, a in op.attrs.items()))
    return (op.name, operands, attrs, tuple(r.type for r in op.results))


def cse(fn: Function, ctx: PassContext) -> Function:
    number: dict[Value, int] = {v: i for i, v in enumerate(fn.inputs)}
    seen: dict[tuple[Any, ...], Op] = {}
    subst: dict[Value, Value] = {}
    ops: list[Op] = []
    for op in fn.ops:
        op = remap(op, subst)
        key = op_key(op, number) if op.results and not has_effect(op, fn.callees) else None
        first = seen.get(key) if key is not None else None
        if first is not None:
            subst.update(zip(op.results, first.results, strict=True))
            continue
        if key is not None:
            seen[key] = op
        number.update((r, len(number)) for r in op.results)
        ops.append(op)
    if not subst:
        return fn
    return rebuild(fn, ops, subst)


CSE = Pass("cse", "compute each value once (the backward pass recomputes forward values)",
           cse)
