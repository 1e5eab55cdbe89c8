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


# -- writes: the functional form of NumPy's in-place assignments ---------------------------
# ``update_slice(x, u) {start, stop, step}`` is ``x`` with ``x[start:stop:step] = u``
# (steps > 0; ``u`` has the slice's shape); ``scatter(x, u, i1, ..., ik) {axis}`` is ``x``
# with ``x[:, ..., :, i1, ..., ik] = u`` (the index arrays as in ``gather``; where an
# index repeats, the last update wins, as NumPy's assignment does). Both have ``x``'s type,
# and a backend may write them in place when ``x`` is read for the last time.
def _region(start: tuple[int, ...], stop: tuple[int, ...],
            step: tuple[int, ...]) -> tuple[slice, ...]:
    return tuple(slice(a, b, c) for a, b, c in zip(start, stop, step, strict=True))


def update_slice(x: np.ndarray, u: np.ndarray, *, start: tuple[int, ...],
                 stop: tuple[int, ...], step: tuple[int, ...]) -> np.ndarray:
    out = np.array(x, copy=True)
    out[_region(start, stop, step)] = u
    return out


def _update_slice_infer(types: list[TensorType], attrs: dict[str, Any]) -> TensorType:
    x, u = types
    start, stop, step = attrs["start"], attrs["stop"], attrs["step"]
    if not len(start) == len(stop) == len(step) == x.ndim:
        raise IRTypeError(f"'update_slice' of {x} needs {x.ndim} starts, stops and steps")
    for a, b, c, d in zip(start, stop, step, x.shape, strict=True):
        if c <= 0 or not 0 <= a <= d or not 0 <= b <= d:
            raise IRTypeError(f"'update_slice' of {x}: bad range {a}:{b}:{c} for a "
                              f"dimension of {d} (need 0 <= start, stop <= dim and step > 0)")
    want = tuple(len(range(a, b, c)) for a, b, c in zip(start, stop, step, strict=True))
    if u.shape != want or u.dtype != x.dtype:
        raise IRTypeError(f"'update_slice' of {x} needs an update of type "
                          f"{x.with_shape(want)}, got {u}")
    return x


register(OpDef("update_slice", 2, _update_slice_infer, update_slice,
               attrs={"start": tuple_of_ints, "stop": tuple_of_ints, "step": tuple_of_ints}))


def scatter(x: np.ndarray, u: np.ndarray, *idx: np.ndarray, axis: int) -> np.ndarray:
    out = np.array(x, copy=True)
    out[_index(axis, idx)] = u
    return out


def _scatter_set_infer(types: list[TensorType], attrs: dict[str, Any]) -> TensorType:
    x, u, a = types[0], types[1], attrs["axis"]
    i = _check_idx("scatter", [x] + types[2:], a, x.ndim)
    k = len(types) - 2
    want = x.shape[:a] + i.shape + x.shape[a + k:]
    if u.shape != want or u.dtype != x.dtype:
        raise IRTypeError(f"'scatter' into {x} needs updates of type {x.with_shape(want)}, "
                          f"got {u}")
    return x


register(OpDef("scatter", None, _scatter_set_infer, scatter, attrs={"axis": an_int},
               min_in=3))
