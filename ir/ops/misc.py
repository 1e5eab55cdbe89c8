"""Constants, guards and calls of sub-functions."""

from __future__ import annotations

from typing import Any

import numpy as np

from ..errors import IRTypeError
from ..types import TensorType, as_dtype
from .table import OpDef, a_str, anything, register, runs_callee


def _const_value(v: Any) -> np.ndarray:
    """A read-only copy; a splat given as a broadcast view (all strides 0) stays lazy."""
    arr = np.asarray(v)
    if arr.ndim and arr.size and not any(arr.strides):
        arr = np.broadcast_to(np.array(arr.flat[0]), arr.shape)
    else:
        arr = np.array(arr, copy=True)
        arr.flags.writeable = False
    as_dtype(arr.dtype)
    return arr


def splat_scalar(arr: np.ndarray) -> np.ndarray | None:
    """The one value (0-d) of an array whose elements all have the same bytes, else None."""
    if arr.size == 0:
        return None
    first = np.array(arr.flat[0])
    if arr.size == 1 or not any(arr.strides):
        return first
    if np.array(arr.flat[-1]).tobytes() != first.tobytes():
        return None
    raw, n = np.ascontiguousarray(arr).tobytes(), arr.dtype.itemsize
    return first if raw == raw[:n] * arr.size else None


def _const_infer(types: list[TensorType], attrs: dict[str, Any]) -> TensorType:
    v = attrs["value"]
    return TensorType(as_dtype(v.dtype), v.shape)


register(OpDef("const", 0, _const_infer, lambda *, value: value,
               attrs={"value": _const_value}, min_in=0))

GUARD_KINDS = ("bool", "int", "float")


def _guard_kind(v: Any) -> str:
    if v not in GUARD_KINDS:
        raise IRTypeError(f"guard kind must be one of {GUARD_KINDS}, got {v!r}")
    return str(v)


def _guard_infer(types: list[TensorType], attrs: dict[str, Any]) -> tuple[TensorType, ...]:
    if types[0].ndim != 0 and types[0].size != 1:
        raise IRTypeError(f"'guard' needs a single-element value, got {types[0]}")
    return ()


def guard_holds(x: np.ndarray, *, expected: Any, kind: str) -> bool:
    """True when the guarded value still converts to what Python saw while tracing."""
    v = np.asarray(x).reshape(())[()]
    if kind == "bool":
        return bool(v) == bool(expected)
    if kind == "int":
        return int(v) == int(expected)
    f = float(v)
    return f == float(expected) or (f != f and float(expected) != float(expected))


register(OpDef("guard", 1, _guard_infer, guard_holds,
               attrs={"expected": anything, "kind": _guard_kind}, effect=True))


def _call_infer(types: list[TensorType], attrs: dict[str, Any]) -> TensorType:
    raise IRTypeError("'call' result types come from the callee; build it with Builder.call")


register(OpDef("call", None, _call_infer, runs_callee, attrs={"callee": a_str}, min_in=0,
               calls=True))
