"""Checks the invariants of an ``ir.Function``: SSA order, types, attributes, callees."""

from __future__ import annotations

import os

from .core import Function, Op, Value
from .errors import VerifyError, YotaError
from .ops import get_opdef
from .ops.fused import check_kernel


def verify(fn: Function) -> Function:
    """Raise ``VerifyError`` naming the first broken invariant; returns ``fn`` unchanged."""
    for callee in fn.all_callees().values():
        _verify_one(callee)
    _verify_one(fn)
    return fn


def _where(fn: Function, i: int, op: Op) -> str:
    loc = f" ({op.loc})" if op.loc else ""
    return f"@{fn.name}, op #{i} '{op.name}'{loc}"


def _verify_one(fn: Function) -> None:
    defined: set[Value] = set()
    for v in fn.inputs:
        if v in defined:
            raise VerifyError(f"@{fn.name}: an input appears twice")
        defined.add(v)
    for i, op in enumerate(fn.ops):
        where = _where(fn, i, op)
        for v in op.operands:
            if v not in defined:
                raise VerifyError(f"{where}: operand {v.type} is not defined before use")
        _check_types(fn, op, where)
        for r in op.results:
            if r in defined:
                raise VerifyError(f"{where}: a result is defined twice (not SSA)")
            defined.add(r)
    for v in fn.outputs:
        if v not in defined:
            raise VerifyError(f"@{fn.name}: output {v.type} is not defined")
    if len(fn.input_labels) != len(fn.inputs) or len(fn.output_labels) != len(fn.outputs):
        raise VerifyError(f"@{fn.name}: labels do not match inputs/outputs")


def _check_types(fn: Function, op: Op, where: str) -> None:
    try:
        opdef = get_opdef(op.name)
        attrs = opdef.normalize_attrs(dict(op.attrs))
        if opdef.calls:
            callee = fn.callees.get(attrs["callee"])
            if callee is None:
                raise VerifyError(f"{where}: unknown callee @{attrs['callee']}")
            want_in, want = opdef.types_with(attrs, callee)
            if tuple(v.type for v in op.operands) != want_in:
                raise VerifyError(f"{where}: operand types do not match @{callee.name}")
            if op.name == "fused":
                check_kernel(callee)
        else:
            want = opdef.infer_types([v.type for v in op.operands], attrs, len(op.operands))
    except VerifyError:
        raise
    except YotaError as e:
        raise VerifyError(f"{where}: {e}") from e
    got = tuple(r.type for r in op.results)
    if got != tuple(want):
        raise VerifyError(f"{where}: results typed {', '.join(map(str, got))}, "
                          f"but the op gives {', '.join(map(str, want))}")


def verify_enabled() -> bool:
    return os.environ.get("YOTA_VERIFY", "") not in ("", "0")


def maybe_verify(fn: Function) -> Function:
    """Verify when ``YOTA_VERIFY=1`` (tests set it); otherwise a no-op."""
    return verify(fn) if verify_enabled() else fn
