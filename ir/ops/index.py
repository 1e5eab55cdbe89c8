"""Integer-array indexing: ``gather`` and its transpose ``scatter_add``.

``gather(x, i1, ..., ik) {axis=a}`` is NumPy's ``x[:, ..., :, i1, ..., ik]`` with the k
index arrays (of one shape) on consecutive axes starting at ``a``: the result has shape
``x.shape[:a] + i.shape + x.shape[a+k:]``. Negative indices count from the end.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ..errors import IRTypeError
from ..types import TensorType, is_int
from .table import OpDef, an_int, register, tuple_of_ints, types_str


def _index(axis: int, idx: tuple[np.ndarray, ...]) -> tuple[Any, ...]:
    return (slice(None),) * axis + tuple(idx)


def gather(x: np.ndarray, *idx: np.ndarray, axis: int) -> np.ndarray:
    return x[_index(axis, idx)]


def scatter_add(upd: np.ndarray, *idx: np.ndarray, axis: int,
                shape: tuple[int, ...]) -> np.ndarray:
    """Zeros of ``shape`` plus ``upd`` added at the gathered positions (repeats accumulate)."""
    out = np.zeros(shape, dtype=upd.dtype)
    np.add.at(out, _index(axis, idx), upd)
    return out


def _check_idx(name: str, types: list[TensorType], axis: int, ndim: int) -> TensorType:
    idx = types[1:]
    if not idx:
        raise IRTypeError(f"'{name}' needs at least one index array")
    for t in idx:
        if not is_int(t.dtype) or t.shape != idx[0].shape:
            raise IRTypeError(f"'{name}' needs integer index arrays of one shape; "
                              f"got {types_str(idx)}")
    if not 0 <= axis or axis + len(idx) > ndim:
        raise IRTypeError(f"'{name}': {len(idx)} index arrays from axis {axis} do not fit "
                          f"a {ndim}-d array")
    return idx[0]


def _gather_infer(types: list[TensorType], attrs: dict[str, Any]) -> TensorType:
    x, a = types[0], attrs["axis"]
    i = _check_idx("gather", types, a, x.ndim)
    k = len(types) - 1
    return x.with_shape(x.shape[:a] + i.shape + x.shape[a + k:])


register(OpDef("gather", None, _gather_infer, gather, attrs={"axis": an_int}, min_in=2))


def _scatter_infer(types: list[TensorType], attrs: dict[str, Any]) -> TensorType:
    u, a, shape = types[0], attrs["axis"], attrs["shape"]
    i = _check_idx("scatter_add", types, a, len(shape))
    k = len(types) - 1
    want = shape[:a] + i.shape + shape[a + k:]
    if u.shape != want:
        raise IRTypeError(f"'scatter_add' into shape {list(shape)} needs updates of shape "
                          f"{list(want)}, got {u}")
    return u.with_shape(shape)


register(OpDef("scatter_add", None, _scatter_infer, scatter_add,
               attrs={"axis": an_int, "shape": tuple_of_ints}, min_in=2))
