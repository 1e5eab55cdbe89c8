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
    if type(key) is int and x.ndim and -x.shape[0] <= key < x.shape[0]:
        return _row(L, x, key % x.shape[0], out)  # x[i], as below
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


def _row(L: LoweringContext, x: Value, i: int, out: TensorType) -> Value:
    """``x[i]`` for an in-range ``i >= 0``: the ops ``lower_getitem`` makes of it (one
    program step reading its slice of a sequence), without the general index analysis."""
    b, shape = L.b, x.shape
    if shape[0] != 1:
        nd = len(shape)
        x = b.slice(x, start=(i,) + (0,) * (nd - 1), stop=(i + 1,) + shape[1:],
                    step=(1,) * nd)
    return b.reshape_to(x, out.shape)


def _index_arrays(L: LoweringContext, key: list[Any]) -> tuple[list[int], bool, list[Value]]:
    """The array part of an indexing ``key`` (slices and arrays, ``None`` for new axes):
    the axes it indexes, whether they are adjacent in the key (NumPy keeps the advanced
    dimensions in place only then, no None or slice between them; otherwise they go
    first), and the index arrays as int64, broadcast to one shape."""
    b = L.b
    dims = [k for k in key if k is not None]
    adv = [ax for ax, k in enumerate(dims) if not isinstance(k, slice)]
    positions = [i for i, k in enumerate(key) if k is not None and not isinstance(k, slice)]
    adjacent = positions == list(range(positions[0], positions[0] + len(positions)))
    idx = [L.operand(dims[ax], None, None) for ax in adv]
    shape = tuple(np.broadcast_shapes(*[v.shape for v in idx]))
    return adv, adjacent, [b.broadcast_to(b.convert_to(v, I64), shape) for v in idx]


def _gather(L: LoweringContext, x: Value, key: list[Any]) -> Value:
    b = L.b
    adv, adjacent, idx = _index_arrays(L, key)
    if adjacent:
        return b.gather(x, *idx, axis=adv[0])
    rest = [ax for ax in range(x.ndim) if ax not in adv]
    x = b.transpose(x, perm=tuple(adv + rest)) if adv + rest != list(range(x.ndim)) else x
    return b.gather(x, *idx, axis=0)


# -- writes: x[key] = v, x[mask] = v, np.add.at, as new versions of x ------------------------------
def _set_forward(x: np.ndarray, key: Any, value: Any, vshape: Any = None) -> np.ndarray:
    out = np.array(x, copy=True)
    out[key] = value
    return out


def _add_at_forward(x: np.ndarray, key: Any, value: Any, vshape: Any = None) -> np.ndarray:
    out = np.array(x, copy=True)
    np.add.at(out, key, value)
    return out


def _setmask_forward(x: np.ndarray, mask: Any, value: Any, left: bool = True) -> np.ndarray:
    m = np.asarray(mask)
    if left:
        m = m.reshape(m.shape + (1,) * (x.ndim - m.ndim))
    out = np.array(x, copy=True)
    np.copyto(out, np.broadcast_to(np.asarray(value), x.shape), casting="unsafe",
              where=np.broadcast_to(m, x.shape))
    return out


def _setflat_forward(x: np.ndarray, pos: np.ndarray, value: Any) -> np.ndarray:
    out = np.array(x, copy=True)
    out.reshape(-1)[pos.ravel()] = np.broadcast_to(value, pos.shape).ravel()
    return out


@register("setitem", _set_forward)
def _setitem(L: LoweringContext, outs: list[TensorType], x: Any, key: Any, value: Any,
             vshape: Any = None) -> Value:
    return lower_write(L, L.operand(x, None, None), key, value, tuple(vshape), add=False)


@register("add_at", _add_at_forward)
def _add_at(L: LoweringContext, outs: list[TensorType], x: Any, key: Any, value: Any,
            vshape: Any = None) -> Value:
    return lower_write(L, L.operand(x, None, None), key, value, tuple(vshape), add=True)


@register("setmask", _setmask_forward)
def _setmask(L: LoweringContext, outs: list[TensorType], x: Any, mask: Any, value: Any,
             left: bool = True) -> Value:
    o, b = outs[0], L.b
    m = L.operand(mask, None, None)
    if m.dtype.kind != "b":
        m = b.ne(m, b.const(0, m.dtype, m.shape))
    if left:
        m = b.reshape_to(m, m.shape + (1,) * (o.ndim - m.ndim))
    return b.select(b.broadcast_to(m, o.shape), L.operand(value, o.dtype, o.shape),
                    L.operand(x, None, None))


@register("setflat", _setflat_forward)
def _setflat(L: LoweringContext, outs: list[TensorType], x: Any, pos: Any,
             value: Any) -> Value:
    o, b = outs[0], L.b
    p = L.operand(pos, None, None)
    n = p.type.size
    xf = b.reshape_to(L.operand(x, None, None), (o.type.size if hasattr(o, "type") else
                                                  int(np.prod(o.shape)),))
    v = b.reshape_to(L.operand(value, o.dtype, p.shape), (n,))
    new = b.scatter(xf, v, b.reshape_to(b.convert_to(p, I64), (n,)), axis=0)
    return b.reshape_to(new, o.shape)


def _index_shape(L: LoweringContext, k: Any) -> tuple[int, ...]:
    t = L.type_of(k)
    return t.shape if t is not None else np.shape(k)


def _gathered_shape(L: LoweringContext, shape: tuple[int, ...], key: list[Any]) -> tuple[int, ...]:
    """The shape ``_gather`` gives ``x[key]`` (before the final reshape) for ``x`` of
    ``shape``, after the basic part of the key was applied."""
    dims = [k for k in key if k is not None]
    adv = [ax for ax, k in enumerate(dims) if not isinstance(k, slice)]
    positions = [i for i, k in enumerate(key) if k is not None and not isinstance(k, slice)]
    adjacent = positions == list(range(positions[0], positions[0] + len(positions)))
    ishape = tuple(np.broadcast_shapes(*[_index_shape(L, dims[ax]) for ax in adv]))
    if adjacent:
        return shape[:adv[0]] + ishape + shape[adv[0] + len(adv):]
    return ishape + tuple(shape[ax] for ax in range(len(shape)) if ax not in adv)


def lower_write(L: LoweringContext, x: Value, key: Any, value: Any, vshape: tuple[int, ...],
                add: bool) -> Value:
    """``x`` after ``x[key] = value`` (``add``: ``np.add.at(x, key, value)``, repeated
    indices accumulating): the region the basic part of the key selects is updated in
    place of ``x`` (``update_slice``), through a ``scatter`` where the key has arrays."""
    key = _expand(key, x.ndim, L)
    dims = [k for k in key if k is not None]
    advanced = any(_is_array_index(k, L) for k in dims)
    b = L.b
    bounds = [_bounds(k, ax, x.shape[ax], advanced) for ax, k in enumerate(dims)]
    region = dict(start=tuple(s for s, _, _, _ in bounds), stop=tuple(s for _, s, _, _ in bounds),
                  step=tuple(s for _, _, s, _ in bounds))
    flips = tuple(ax for ax, (_, _, _, f) in enumerate(bounds) if f)
    whole = (region["start"], region["stop"], region["step"]) == (
        (0,) * x.ndim, x.shape, (1,) * x.ndim)
    r = x if whole else b.slice(x, **region)
    if flips:
        r = b.flip(r, axes=flips)
    v = L.operand(value, x.dtype, vshape)
    if advanced:
        v = b.reshape_to(v, _gathered_shape(L, r.shape, key))
        new = _scatter(L, r, key, v, add)
    else:
        v = b.reshape_to(v, r.shape)
        new = b.add(r, v) if add else v
    if flips:
        new = b.flip(new, axes=flips)
    return new if whole else b.update_slice(x, new, **region)


def _scatter(L: LoweringContext, x: Value, key: list[Any], v: Value, add: bool) -> Value:
    """``x`` with ``x[key] = v`` (or ``+=``, accumulating) for the array part of ``key``."""
    b = L.b
    adv, adjacent, idx = _index_arrays(L, key)
    perm = tuple(adv + [ax for ax in range(x.ndim) if ax not in adv])
    moved = not adjacent and perm != tuple(range(x.ndim))
    axis = adv[0] if adjacent else 0
    xt = b.transpose(x, perm=perm) if moved else x
    if add:
        new = b.add(xt, b.scatter_add(v, *idx, axis=axis, shape=xt.shape))
    else:
        new = b.scatter(xt, v, *idx, axis=axis)
    if moved:
        inv = tuple(int(a) for a in np.argsort(perm))
        new = b.transpose(new, perm=inv)
    return new
