"""Indexing (``x[key]``) lowered to IR: slices, flips, gathers and reshapes.

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

from ..tape import Var
from .registry import LoweringContext, register


@register("getitem", lambda x, key: x[key])
def _getitem(L: LoweringContext, outs: list[TensorType], x: Any, key: Any) -> Value:
    return lower_getitem(L, L.operand(x, None, None), key, outs[0])


def _is_array_index(k: Any, L: LoweringContext) -> bool:
    return isinstance(k, (Var, list, np.ndarray)) or L.is_traced(k)


def _expand(key: Any, ndim: int, L: LoweringContext) -> list[Any]:
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


def _bounds(k: Any, ax: int, size: int, advanced: bool) -> tuple[int, int, int, bool]:
    """(start, stop, step > 0, flip) of axis ``ax`` under basic index ``k``."""
    if isinstance(k, slice):
        lo, hi, st = k.indices(size)
        n = len(range(lo, hi, st))
        if st > 0:
            return lo, (lo + (n - 1) * st + 1 if n else lo), st, False
        last = lo + (n - 1) * st if n else 0
        return last, (lo + 1 if n else 0), -st, n > 1
    if isinstance(k, (int, np.integer)) and not advanced:
        i = int(k)
        if not -size <= i < size:
            raise UnsupportedError(f"index {i} is out of bounds for axis {ax} "
                                   f"with size {size}")
        i %= size
        return i, i + 1, 1, False
    return 0, size, 1, False


def lower_getitem(L: LoweringContext, x: Value, key: Any, out: TensorType) -> Value:
    """``x[key]`` with NumPy's semantics, reshaped to the result type ``out``."""
    key = _expand(key, x.ndim, L)
    dims = [k for k in key if k is not None]
    advanced = any(_is_array_index(k, L) for k in dims)
    b = L.b
    bounds = [_bounds(k, ax, x.shape[ax], advanced) for ax, k in enumerate(dims)]
    starts = tuple(s for s, _, _, _ in bounds)
    stops = tuple(s for _, s, _, _ in bounds)
    steps = tuple(s for _, _, s, _ in bounds)
    flips = tuple(ax for ax, (_, _, _, f) in enumerate(bounds) if f)
    if (starts, stops, steps) != ((0,) * x.ndim, x.shape, (1,) * x.ndim):
        x = b.slice(x, start=starts, stop=stops, step=steps)
    if flips:
        x = b.flip(x, axes=flips)
    if advanced:
        x = _gather(L, x, key)
    return b.reshape_to(x, out.shape)


def _gather(L: LoweringContext, x: Value, key: list[Any]) -> Value:
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
