"""``np.<ufunc>.at(a, indices, b)`` on a traced array, for the ufuncs other than ``add``
and ``subtract`` (which record one scatter-add, ``yota.tracer.ufunc_at``): ``multiply``,
``divide``, ``minimum``, ``maximum``, ``power``... and unary ufuncs (``np.negative.at(a,
indices)``).

NumPy applies the ufunc once per selected element, in order, so an element selected
twice is updated twice. With constant indices the repeats are known while tracing: the
updates run in rounds, round ``r`` applying the ``r``-th occurrence of every element
(the elements of one round are distinct, so each round is an ordinary gather, ufunc and
write: ``flat[p] = ufunc(flat[p], v)``), which applies each element's updates in NumPy's
order and differentiates as those writes do. Traced indices repeat in ways known only
when the program runs: refused, with what to write instead.

    >>> import numpy as np, yota
    >>> def f(x):
    ...     y = x + 1.0
    ...     np.multiply.at(y, [0, 2, 0], x)  # y[0] *= x[0], y[2] *= x[1], y[0] *= x[2]
    ...     return y
    >>> yota.compile(f, np.array([2.0, 3.0, 4.0]))(np.array([2.0, 3.0, 4.0])).tolist()
    [24.0, 4.0, 15.0]
"""

from __future__ import annotations

from typing import Any

import numpy as np

from yota.ir.errors import UnsupportedError

from ..structs import is_traced
from ..userloc import where


def _holds_traced(x: Any) -> bool:
    if is_traced(x):
        return True
    if isinstance(x, (list, tuple)):
        return any(_holds_traced(v) for v in x)
    if isinstance(x, slice):
        return any(is_traced(v) for v in (x.start, x.stop, x.step))
    return False


def occurrences(flat: np.ndarray) -> np.ndarray:
    """For each entry of ``flat``, how many entries before it hold the same value."""
    order = np.argsort(flat, kind="stable")
    s = flat[order]
    first = np.r_[True, s[1:] != s[:-1]] if s.size else np.zeros(0, bool)
    start = np.maximum.accumulate(np.where(first, np.arange(s.size), 0))
    rank = np.empty(flat.size, np.int64)
    rank[order] = np.arange(s.size) - start
    return rank


def ufunc_at_rounds(ufunc: np.ufunc, t: Any, indices: Any, b: Any, what: str) -> None:
    """``ufunc.at(t, indices, b)`` (``b`` None for a unary ufunc) on traced array ``t``
    with constant ``indices``: the updates of each repeat of an element in a round."""
    if (ufunc.nin == 2) != (b is not None):
        raise TypeError(f"{what} takes {'a value' if ufunc.nin == 2 else 'no value'} "
                        "after the indices")
    if ufunc.nin > 2 or ufunc.nout != 1:
        raise UnsupportedError(f"{what} at {where()} is not supported on traced arrays")
    if _holds_traced(indices):
        raise UnsupportedError(
            f"{what} at {where()} with traced indices: the elements selected more than "
            "once are known only when the program runs, and Yota traces np.add.at and "
            "np.subtract.at there. Use constant indices, or write the update with "
            "np.add.at (np.add.at(np.log(...)) for a product of positive values)")
    pos = np.arange(t.size).reshape(t.shape)[indices]  # NumPy's IndexError for a bad one
    flat_pos = np.asarray(pos).reshape(-1)
    if flat_pos.size == 0:
        return
    vals = None
    if b is not None:
        vals = np.broadcast_to(b, np.shape(pos)).reshape(-1)
    rank = occurrences(flat_pos)
    flat = t.reshape(-1).copy()
    for r in range(int(rank.max()) + 1):
        sel = np.nonzero(rank == r)[0]
        p = flat_pos[sel]
        flat[p] = ufunc(flat[p]) if vals is None else ufunc(flat[p], vals[sel])
    t[...] = flat.reshape(t.shape)
