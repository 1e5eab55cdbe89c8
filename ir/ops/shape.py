"""Shape ops: reshape, transpose, broadcast, sum_to, slice, flip, pad, concatenate."""

from __future__ import annotations

from typing import Any

import numpy as np

from ..errors import IRTypeError
from ..types import TensorType
from .table import OpDef, an_int, register, tuple_of_ints, types_str


def _reshape_infer(types: list[TensorType], attrs: dict[str, Any]) -> TensorType:
    t, shape = types[0], attrs["shape"]
    out = t.with_shape(shape)
    if out.size != t.size:
        raise IRTypeError(f"'reshape' cannot turn {t} into shape {list(shape)}: sizes differ")
    return out


register(OpDef("reshape", 1, _reshape_infer,
               lambda x, *, shape: np.reshape(x, shape), attrs={"shape": tuple_of_ints},
               source="np.reshape({0}, {shape})"))


def _transpose_infer(types: list[TensorType], attrs: dict[str, Any]) -> TensorType:
    t, perm = types[0], attrs["perm"]
    if sorted(perm) != list(range(t.ndim)):
        raise IRTypeError(f"'transpose' needs a permutation of 0..{t.ndim - 1}, got {list(perm)}")
    return t.with_shape(tuple(t.shape[p] for p in perm))


register(OpDef("transpose", 1, _transpose_infer,
               lambda x, *, perm: np.transpose(x, perm), attrs={"perm": tuple_of_ints},
               source="np.transpose({0}, {perm})"))


def broadcastable(src: tuple[int, ...], dst: tuple[int, ...]) -> bool:
    """True if NumPy broadcasting turns shape ``src`` into exactly ``dst``."""
    if len(src) > len(dst):
        return False
    return all(s == d or s == 1 for s, d in zip(src[::-1], dst[::-1], strict=False))


def _broadcast_infer(types: list[TensorType], attrs: dict[str, Any]) -> TensorType:
    t, shape = types[0], attrs["shape"]
    if not broadcastable(t.shape, shape):
        raise IRTypeError(f"'broadcast' cannot broadcast {t} to shape {list(shape)}")
    return t.with_shape(shape)


register(OpDef("broadcast", 1, _broadcast_infer,
               lambda x, *, shape: np.broadcast_to(x, shape), attrs={"shape": tuple_of_ints},
               elementwise=True, source="np.broadcast_to({0}, {shape})"))


def sum_to(x: np.ndarray, *, shape: tuple[int, ...]) -> np.ndarray:
    """Sum ``x`` down to ``shape``: the transpose of broadcasting ``shape`` to ``x.shape``."""
    lead = x.ndim - len(shape)
    axes = tuple(range(lead)) + tuple(
        lead + i for i, s in enumerate(shape) if s == 1 and x.shape[lead + i] != 1
    )
    return np.asarray(np.sum(x, axis=axes, keepdims=True)).reshape(shape).astype(x.dtype)


def _sum_to_infer(types: list[TensorType], attrs: dict[str, Any]) -> TensorType:
    t, shape = types[0], attrs["shape"]
    if not broadcastable(shape, t.shape):
        raise IRTypeError(f"'sum_to' cannot sum {t} to shape {list(shape)}: "
                          f"{list(shape)} does not broadcast to {list(t.shape)}")
    return t.with_shape(shape)


register(OpDef("sum_to", 1, _sum_to_infer, sum_to, attrs={"shape": tuple_of_ints}))


def slice_(x: np.ndarray, *, start: tuple[int, ...], stop: tuple[int, ...],
           step: tuple[int, ...]) -> np.ndarray:
    return x[tuple(slice(a, b, c) for a, b, c in zip(start, stop, step, strict=True))]


def slice_len(start: int, stop: int, step: int) -> int:
    return max(0, -(-(stop - start) // step))


def _slice_infer(types: list[TensorType], attrs: dict[str, Any]) -> TensorType:
    t = types[0]
    start, stop, step = attrs["start"], attrs["stop"], attrs["step"]
    if not len(start) == len(stop) == len(step) == t.ndim:
        raise IRTypeError(f"'slice' of {t} needs {t.ndim} starts, stops and steps")
    for a, b, c, d in zip(start, stop, step, t.shape, strict=True):
        if c <= 0 or not 0 <= a <= d or not 0 <= b <= d:
            raise IRTypeError(f"'slice' of {t}: bad range {a}:{b}:{c} for a dimension of {d} "
                              "(need 0 <= start, stop <= dim and step > 0)")
    return t.with_shape(tuple(slice_len(a, b, c) for a, b, c in zip(start, stop, step,
                                                                     strict=True)))


register(OpDef("slice", 1, _slice_infer, slice_,
               attrs={"start": tuple_of_ints, "stop": tuple_of_ints, "step": tuple_of_ints}))


def _flip_infer(types: list[TensorType], attrs: dict[str, Any]) -> TensorType:
    t = types[0]
    if any(not 0 <= a < t.ndim for a in attrs["axes"]):
        raise IRTypeError(f"'flip' axes {list(attrs['axes'])} out of range for {t}")
    return t


register(OpDef("flip", 1, _flip_infer, lambda x, *, axes: np.flip(x, axes),
               attrs={"axes": tuple_of_ints}, source="np.flip({0}, {axes})"))


def pad(x: np.ndarray, *, low: tuple[int, ...], high: tuple[int, ...],
        interior: tuple[int, ...]) -> np.ndarray:
    """Zero padding: ``low``/``high`` zeros at each end, ``interior`` zeros between elements."""
    shape = tuple(lo + hi + d + max(d - 1, 0) * it
                  for lo, hi, d, it in zip(low, high, x.shape, interior, strict=True))
    out = np.zeros(shape, dtype=x.dtype)
    idx = tuple(slice(lo, lo + max(d - 1, 0) * (it + 1) + 1 if d else lo, it + 1)
                for lo, d, it in zip(low, x.shape, interior, strict=True))
    out[idx] = x
    return out


def _pad_infer(types: list[TensorType], attrs: dict[str, Any]) -> TensorType:
    t = types[0]
    low, high, interior = attrs["low"], attrs["high"], attrs["interior"]
    if not len(low) == len(high) == len(interior) == t.ndim or min(low + high + interior,
                                                                    default=0) < 0:
        raise IRTypeError(f"'pad' of {t} needs {t.ndim} non-negative low, high, interior")
    return t.with_shape(tuple(lo + hi + d + max(d - 1, 0) * it
                              for lo, hi, d, it in zip(low, high, t.shape, interior,
                                                       strict=True)))


register(OpDef("pad", 1, _pad_infer, pad, attrs={
    "low": tuple_of_ints, "high": tuple_of_ints, "interior": tuple_of_ints}))


def _concat_infer(types: list[TensorType], attrs: dict[str, Any]) -> TensorType:
    t0, axis = types[0], attrs["axis"]
    if not 0 <= axis < t0.ndim:
        raise IRTypeError(f"'concatenate' axis {axis} out of range for {t0}")
    for t in types[1:]:
        if t.dtype != t0.dtype or t.ndim != t0.ndim or any(
                a != b for i, (a, b) in enumerate(zip(t.shape, t0.shape, strict=True))
                if i != axis):
            raise IRTypeError(f"'concatenate' along axis {axis} needs one dtype and equal "
                              f"other dimensions; got {types_str(types)}")
    shape = list(t0.shape)
    shape[axis] = sum(t.shape[axis] for t in types)
    return t0.with_shape(tuple(shape))


register(OpDef("concatenate", None, _concat_infer,
               lambda *xs, axis: np.concatenate(xs, axis=axis), attrs={"axis": an_int},
               source="np.concatenate([{all}], axis={axis})"))
