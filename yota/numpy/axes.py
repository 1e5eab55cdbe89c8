"""Axis and shape arguments as NumPy accepts them, normalized for the IR."""

from __future__ import annotations

from typing import Any

import numpy as np

from yota.ir.errors import UnsupportedError


def int_tuple(v: Any) -> tuple[int, ...]:
    """An axis or shape argument (an int, NumPy integer, or a sequence of them)."""
    return (int(v),) if isinstance(v, (int, np.integer)) else tuple(int(a) for a in v)


def norm_axes(axis: Any, ndim: int) -> tuple[int, ...]:
    """Sorted, distinct, non-negative axes (``None`` is every axis)."""
    if axis is None:
        return tuple(range(ndim))
    axes = int_tuple(axis)
    out = []
    for a in axes:
        if not -ndim <= a < max(ndim, 1):
            raise UnsupportedError(f"axis {a} is out of bounds for a {ndim}-d array")
        if ndim:  # NumPy accepts axis 0 or -1 of a 0-d array, reducing nothing
            out.append(a % ndim)
    return tuple(sorted(set(out)))
