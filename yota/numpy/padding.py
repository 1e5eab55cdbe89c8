"""``np.pad``'s modes that compute their values from the array: ``linear_ramp``
(``end_values``), ``maximum``, ``minimum``, ``mean`` and ``median`` (``stat_length``), and
``reflect_type='odd'`` of ``reflect`` and ``symmetric``.

They are compositions (``registry.compose``) of NumPy calls on the traced array, axis by
axis as NumPy pads (each axis sees the pads of the axes before it): a ramp is a traced
``np.linspace`` from the end value to the edge, a statistic a reduction of the first or
last ``stat_length`` values, an odd reflection ``2 * edge - mirrored values`` grown chunk
by chunk. The other modes (``constant``, ``empty``, ``edge``, even ``reflect`` and
``symmetric``, ``wrap``) are the ``pad`` entry's (``movement``): the composition
declines them. A function given as the mode is refused.

    >>> import numpy as np, yota
    >>> _, g = yota.grad(lambda x: np.sum(np.pad(x, 2, mode="mean")), np.arange(3.0))
    >>> g[0].tolist()
    [2.333333333333333, 2.333333333333333, 2.333333333333333]
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from yota.ir.errors import UnsupportedError

from ..structs import is_traced
from ..userloc import where
from .registry import compose

_STATS: dict[str, Callable[..., Any]] = {"maximum": np.max, "minimum": np.min,
                                         "mean": np.mean, "median": np.median}
_ALLOWED = {"linear_ramp": ("end_values",), "maximum": ("stat_length",),
            "minimum": ("stat_length",), "mean": ("stat_length",),
            "median": ("stat_length",), "reflect": ("reflect_type",),
            "symmetric": ("reflect_type",)}


@compose(np.pad)
def pad(array: Any, pad_width: Any, mode: Any = "constant", **kwargs: Any) -> Any:
    if callable(mode):
        raise UnsupportedError(
            f"np.pad with a function as the mode at {where()}: the function writes into "
            "views of the padded array, which Yota does not trace. Build the padding with "
            "np.concatenate (or use one of NumPy's named modes)")
    odd = kwargs.get("reflect_type", "even") == "odd"
    if mode not in _STATS and mode != "linear_ramp" and not (
            mode in ("reflect", "symmetric") and odd):
        return NotImplemented  # the pad entry's modes
    extra = set(kwargs) - set(_ALLOWED[mode])
    if extra:
        raise ValueError(f"unsupported keyword arguments for mode '{mode}': {extra}")
    if is_traced(pad_width) or isinstance(pad_width, (list, tuple)) and any(
            is_traced(v) for v in np.ravel(np.array(pad_width, dtype=object))):
        raise UnsupportedError(f"np.pad's pad_width at {where()} is traced: the shape of "
                               "the result must be known while tracing")
    x = np.asarray(array)
    widths = _pairs(pad_width, x.ndim, index=True)
    if x.size == 0:
        for ax, (lo, hi) in enumerate(widths):
            if x.shape[ax] == 0 and (lo or hi):
                raise ValueError(f"can't extend empty axis {ax} using modes other than "
                                 "'constant' or 'empty'")
        return np.pad(x, widths)  # no element to compute
    ends = _pairs(kwargs.get("end_values", 0), x.ndim) if mode == "linear_ramp" else None
    lengths = _pairs(kwargs.get("stat_length"), x.ndim, index=True) if mode in _STATS \
        else None
    for ax, (lo, hi) in enumerate(widths):
        if ends is not None:
            x = _ramp(x, ax, lo, hi, ends[ax])
        elif lengths is not None:
            x = _stat(x, ax, lo, hi, lengths[ax], _STATS[mode])
        elif np.shape(array)[ax] == 1 and (lo or hi):  # NumPy's legacy: edge values
            x = np.pad(x, [(lo, hi) if a == ax else (0, 0) for a in range(x.ndim)], "edge")
        else:
            x = _reflect_odd(x, ax, lo, hi, include_edge=mode == "symmetric",
                             period=np.shape(array)[ax])
    return x


def _pairs(x: Any, ndim: int, index: bool = False) -> Any:
    """``x`` as ``ndim`` (before, after) pairs, as NumPy reads ``pad_width``,
    ``stat_length`` (``index``: rounded, non-negative) and ``end_values``."""
    if x is None:
        return [(None, None)] * ndim
    a = np.array(x)
    if index:
        a = np.round(a).astype(np.intp)
        if a.size and a.min() < 0:
            raise ValueError("index can't contain negative values")
    if a.ndim < 3 and a.size == 1:
        v = a.reshape(-1)[0]
        return [(v, v)] * ndim
    if a.ndim < 3 and a.size == 2 and a.shape != (2, 1):
        v = a.reshape(-1)
        return [(v[0], v[1])] * ndim
    b = np.broadcast_to(a, (ndim, 2))
    return [(b[i, 0], b[i, 1]) for i in range(ndim)]


def _at(ax: int, sl: slice) -> tuple[slice, ...]:
    return (slice(None),) * ax + (sl,)


def _join(x: Any, ax: int, left: Any, right: Any) -> Any:
    parts = [p for p in (left, x, right) if p is not None and np.shape(p)[ax]]
    return parts[0] if len(parts) == 1 else np.concatenate(parts, axis=ax)


def _block(v: Any, x: Any, ax: int, width: int) -> Any:
    """``v`` (size 1 along ``ax``) repeated ``width`` times along ``ax``, in x's dtype."""
    shape = np.shape(x)[:ax] + (width,) + np.shape(x)[ax + 1:]
    return np.broadcast_to(np.asarray(v).astype(x.dtype), shape) if width else None


def _stat(x: Any, ax: int, lo: int, hi: int, lengths: tuple[Any, Any],
          func: Callable[..., Any]) -> Any:
    n = np.shape(x)[ax]
    llen, rlen = (n if v is None or v > n else int(v) for v in lengths)
    if (llen == 0 or rlen == 0) and func in (np.max, np.min):
        raise ValueError("stat_length of 0 yields no value for padding")
    left = _rounded(func(x[_at(ax, slice(0, llen))], axis=ax, keepdims=True), x.dtype)
    right = left if llen == rlen == n else _rounded(
        func(x[_at(ax, slice(n - rlen, n))], axis=ax, keepdims=True), x.dtype)
    return _join(x, ax, _block(left, x, ax, lo), _block(right, x, ax, hi))


def _rounded(stat: Any, dtype: np.dtype) -> Any:
    return np.round(stat) if np.dtype(dtype).kind in "iu" else stat


def _ramp(x: Any, ax: int, lo: int, hi: int, ends: tuple[Any, Any]) -> Any:
    n = np.shape(x)[ax]
    ramps = []
    for side, width in ((0, lo), (1, hi)):
        edge = x[_at(ax, slice(0, 1) if side == 0 else slice(n - 1, n))]
        r = np.linspace(ends[side], np.squeeze(edge, ax), num=width, endpoint=False,
                        dtype=x.dtype, axis=ax)
        ramps.append(np.flip(r, ax) if side else r)
    return _join(x, ax, ramps[0] if lo else None, ramps[1] if hi else None)


def _reflect_odd(x: Any, ax: int, lo: int, hi: int, include_edge: bool, period: int) -> Any:
    """NumPy's iterative reflection, each chunk ``2 * edge - mirrored values``."""
    while lo > 0 or hi > 0:
        n = np.shape(x)[ax]
        if include_edge:
            usable, offset = n // period * period, 1
        else:
            usable, offset = (n - 1) // (period - 1) * (period - 1), 0
        left = right = None
        if lo > 0:
            k = min(usable, lo)
            chunk = np.flip(x[_at(ax, slice(1 - offset, k + 1 - offset))], ax)
            left = 2 * x[_at(ax, slice(0, 1))] - chunk
            lo -= k
        if hi > 0:
            k = min(usable, hi)
            chunk = np.flip(x[_at(ax, slice(n - 1 + offset - k, n - 1 + offset))], ax)
            right = 2 * x[_at(ax, slice(n - 1, n))] - chunk
            hi -= k
        x = _join(x, ax, left, right)
    return x
