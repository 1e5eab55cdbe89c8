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
