"""Lowers NumPy indexing (``x[key]``) to IR: slices, flips, gathers and reshapes.

Basic indices (ints, slices with any step, ``None``, ``...``) become ``slice``/``flip``
ops; integer arrays become one ``gather`` (after a transpose when NumPy moves the
advanced dimensions to the front); a final reshape inserts ``None`` axes and drops
integer-indexed ones. Boolean masks have data-dependent shapes and are refused.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from yota.ir.core import Value
from yota.ir.errors import UnsupportedError
from yota.ir.types import I64, TensorType

from .tape import Var


def _is_array_index(k: Any, L: Any) -> bool:
    return isinstance(k, (Var, list, np.ndarray)) or L.is_traced(k)


def _expand(key: Any, ndim: int, L: Any) -> list[Any]:
    key = list(key) if isinstance(key, tuple) else [key]
    for k in key:
        kt = L.type_of(k)
        if kt is not None and kt.dtype.kind == "b" or (isinstance(k, list) and k
                                                       and isinstance(k[0], bool)):
            raise UnsupportedError("boolean mask indexing has a data-dependent shape; use "
                                   "np.where(mask, x, 0) or integer indices instead")
    consumed = sum(1 for k in key if k is not None and k is not Ellipsis)
    if consumed > ndim:
        raise UnsupportedError(f"too many indices ({consumed}) for a {ndim}-d array")
    ellipses = [i for i, k in enumerate(key) if k is Ellipsis]
    if len(ellipses) > 1:
        raise UnsupportedError("an index can only have a single ellipsis ('...')")
    fill = [slice(None)] * (ndim - consumed)
    if ellipses:
        return key[:ellipses[0]] + fill + key[ellipses[0] + 1:]
    return key + fill


def lower_getitem(L: Any, x: Value, key: Any, out: TensorType) -> Value:
    key = _expand(key, x.ndim, L)
    dims = [k for k in key if k is not None]
    advanced = any(_is_array_index(k, L) for k in dims)
    b = L.b
    starts, stops, steps, flips = [], [], [], []
    for ax, k in enumerate(dims):
        size = x.shape[ax]
        if isinstance(k, slice):
            lo, hi, st = k.indices(size)
            n = len(range(lo, hi, st))
            if st > 0:
                starts.append(lo), stops.append(lo + (n - 1) * st + 1 if n else lo)
                steps.append(st)
            else:
                last = lo + (n - 1) * st if n else 0
                starts.append(last), stops.append(lo + 1 if n else 0), steps.append(-st)
                if n > 1:
                    flips.append(ax)
        elif isinstance(k, (int, np.integer)) and not advanced:
            i = int(k)
            if not -size <= i < size:
                raise UnsupportedError(f"index {i} is out of bounds for axis {ax} "
                                       f"with size {size}")
            i %= size
            starts.append(i), stops.append(i + 1), steps.append(1)
        else:
            starts.append(0), stops.append(size), steps.append(1)
    if (tuple(starts), tuple(stops), tuple(steps)) != ((0,) * x.ndim, x.shape, (1,) * x.ndim):
        x = b.slice(x, start=tuple(starts), stop=tuple(stops), step=tuple(steps))
    if flips:
        x = b.flip(x, axes=tuple(flips))
    if advanced:
        x = _gather(L, x, key)
    return b.reshape_to(x, out.shape)


def _gather(L: Any, x: Value, key: list[Any]) -> Value:
    b = L.b
    dims = [k for k in key if k is not None]
    adv = [ax for ax, k in enumerate(dims) if not isinstance(k, slice)]
    # NumPy keeps advanced dims in place only if they are adjacent in the key (no None or
    # slice between them); otherwise they go first.
    positions = [i for i, k in enumerate(key) if k is not None and not isinstance(k, slice)]
    adjacent = positions == list(range(positions[0], positions[0] + len(positions)))
    idx = [L.operand(dims[ax], None, None) for ax in adv]
    shape = tuple(np.broadcast_shapes(*[v.shape for v in idx]))
    idx = [b.broadcast_to(b.convert_to(v, I64), shape) for v in idx]
    if adjacent:
        return b.gather(x, *idx, axis=adv[0])
    rest = [ax for ax in range(x.ndim) if ax not in adv]
    x = b.transpose(x, perm=tuple(adv + rest)) if adv + rest != list(range(x.ndim)) else x
    return b.gather(x, *idx, axis=0)
