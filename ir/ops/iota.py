"""Arrays computed from their shape alone: ``iota``.

``%i = iota {axis = a, dtype = i64, shape = [d0, ...]} : i64[d0,...]`` is the index along
axis ``a`` at every position (NumPy: ``np.indices(shape)[a]``, converted to ``dtype``). It
has no operands, and it is elementwise: a kernel computes it from its loop indices, so
arrays built from shapes (``np.eye``, ``np.arange``, ``np.tri``, ``np.linspace``) are
ordinary elementwise ops on iotas, fused into their users, never data in the program.

    >>> iota(shape=(2, 3), axis=1, dtype=np.dtype("int64")).tolist()
    [[0, 1, 2], [0, 1, 2]]
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ..errors import IRTypeError
from ..types import TensorType, as_dtype
from .table import OpDef, an_int, register, tuple_of_ints


def iota(*, shape: tuple[int, ...], axis: int, dtype: np.dtype) -> np.ndarray:
    """The NumPy reference: the index along ``axis``, of ``dtype``, broadcast to ``shape``."""
    n = shape[axis]
    idx = np.arange(n, dtype=np.int64).reshape([n if a == axis else 1
                                                for a in range(len(shape))])
    return np.broadcast_to(idx, shape).astype(dtype)


def _iota_infer(types: list[TensorType], attrs: dict[str, Any]) -> TensorType:
    shape, axis, dt = attrs["shape"], attrs["axis"], attrs["dtype"]
    if not 0 <= axis < len(shape):
        raise IRTypeError(f"'iota' axis {axis} is out of range for shape {list(shape)}")
    if any(d < 0 for d in shape):
        raise IRTypeError(f"'iota' needs a shape of sizes >= 0, got {list(shape)}")
    if dt.kind not in "iuf":
        raise IRTypeError(f"'iota' makes integer or float indices, not {dt}")
    return TensorType(dt, shape)


register(OpDef("iota", 0, _iota_infer, iota,
               attrs={"shape": tuple_of_ints, "axis": an_int, "dtype": as_dtype},
               elementwise=True, min_in=0))


# -- arrays from iotas ---------------------------------------------------------------------------
# Builders of the arrays NumPy makes from shapes, for lowerings and derivative rules: an
# array of at most ``CONST_BYTES`` is a plain constant (``small=True``, the default), a
# larger one is computed from iotas (elementwise ops a kernel fuses), never data.
CONST_BYTES = 4096
I64 = np.dtype(np.int64)


def is_small(shape: tuple[int, ...], dtype: Any) -> bool:
    """Whether an array of ``shape`` and ``dtype`` is small enough to be a constant."""
    return int(np.prod(shape, dtype=np.int64)) * np.dtype(dtype).itemsize <= CONST_BYTES


def index_along(b: Any, shape: tuple[int, ...], axis: int, dtype: Any = I64) -> Any:
    """The index along ``axis`` of every element of an array of ``shape``."""
    return b.iota(shape=tuple(shape), axis=axis % len(shape), dtype=as_dtype(dtype))


def offset_cols(b: Any, shape: tuple[int, ...], k: int) -> tuple[Any, Any]:
    """(row index + k, column index) over the last two axes of ``shape`` (int64)."""
    rows = index_along(b, shape, -2)
    if k:
        rows = b.add(rows, b.const(k, I64, shape))
    return rows, index_along(b, shape, -1)


def eye(b: Any, shape: tuple[int, ...], k: int = 0, dtype: Any = np.float64,
        small: bool = True) -> Any:
    """Matrices ``[..., m, n]`` of ``dtype`` with ones on diagonal ``k`` (``np.eye``)."""
    shape, dt = tuple(shape), as_dtype(dtype)
    if small and is_small(shape, dt):
        return b.const(np.eye(shape[-2], shape[-1], k, dtype=dt), dt, shape)
    rows, cols = offset_cols(b, shape, k)
    return b.convert_to(b.eq(rows, cols), dt)


def tri(b: Any, shape: tuple[int, ...], k: int = 0, dtype: Any = np.float64,
        small: bool = True, upper: bool = False) -> Any:
    """Matrices ``[..., m, n]`` of ``dtype`` with ones at and below diagonal ``k``
    (``np.tri``: column - row <= k), or with ``upper`` at and above it (column - row >= k:
    what ``np.triu`` keeps)."""
    shape, dt = tuple(shape), as_dtype(dtype)
    if small and is_small(shape, dt):
        m, n = shape[-2:]
        mask = (np.tri(m, n, k - 1) == 0) if upper else np.tri(m, n, k)
        return b.const(mask.astype(dt), dt, shape)
    rows, cols = offset_cols(b, shape, k)
    return b.convert_to(b.ge(cols, rows) if upper else b.le(cols, rows), dt)


def arange(b: Any, shape: tuple[int, ...], axis: int, dtype: Any = I64, start: int = 0,
           small: bool = True) -> Any:
    """``np.arange(start, start + shape[axis])`` of ``dtype`` along ``axis``, broadcast to
    ``shape``."""
    shape, dt = tuple(shape), as_dtype(dtype)
    if small and is_small(shape, dt):
        n = shape[axis]
        one = [n if a == axis % len(shape) else 1 for a in range(len(shape))]
        return b.const((np.arange(n, dtype=dt) + start).reshape(one), dt, shape)
    i = index_along(b, shape, axis, dt)
    return b.add(i, b.const(start, dt, shape)) if start else i


def col_minus_row(b: Any, shape: tuple[int, ...], small: bool = True) -> Any:
    """int64 ``column - row`` over the last two axes of ``shape`` (which diagonal each
    element is on)."""
    shape = tuple(shape)
    if small and is_small(shape, I64):
        m, n = shape[-2:]
        return b.const(np.subtract.outer(-np.arange(m), -np.arange(n)).astype(I64), I64, shape)
    rows, cols = offset_cols(b, shape, 0)
    return b.sub(cols, rows)
