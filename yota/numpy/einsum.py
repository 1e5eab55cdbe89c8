"""``np.einsum``: every subscript form (implicit and explicit output, ellipsis, repeated
indices within an operand, sums over one operand, the interleaved ``(op, sublist, ...)``
form), lowered so that BLAS does the work.

Each operand first loses its repeated indices (a ``gather`` of the diagonal), size-1
axes that meet a longer axis of the same label are broadcast, and labels no other
operand nor the output uses are summed away. Operands are then contracted two at a time
(left to right, or in the order ``np.einsum_path`` gives when ``optimize`` is set): a
pair with a shared summed label is one batched ``matmul`` of ``[batch, free, summed]``
by ``[batch, summed, free]``; a pair without one is a broadcast product. The last
operand is summed and transposed into the output's order.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from yota.ir.core import Value
from yota.ir.errors import UnsupportedError
from yota.ir.types import TensorType

from .movement import diagonal_of
from .registry import LoweringContext, register

Term = list[str]

_LETTERS = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ"  # string.ascii_letters


def _einsum_forward(*operands: Any, **kw: Any) -> Any:
    return np.einsum(*operands, **kw)


@register("einsum", _einsum_forward, np.einsum)
def _einsum(L: LoweringContext, outs: list[TensorType], *operands: Any, out: Any = None,
            dtype: Any = None, order: str = "K", casting: str = "safe",
            optimize: Any = False) -> Value:
    o = outs[0]
    subscripts, arrays = _split_args(operands)
    xs = [L.operand(a, o.dtype, None) for a in arrays]
    terms, output = parse(subscripts, [x.ndim for x in xs])
    ops = [_diagonals(L, x, t) for x, t in zip(xs, terms, strict=True)]
    ops = _broadcast_labels(L, ops)
    path = _path(subscripts, [x.shape for x in xs], optimize, len(ops))
    for group in path:
        picked = [ops[i] for i in group]
        ops = [v for i, v in enumerate(ops) if i not in group]
        while len(picked) > 1:
            keep = set(output).union(*[t for _, t in ops], *[t for _, t in picked[2:]])
            pair = [_sum_private(L, p, keep | set(q[1])) for p, q in
                    ((picked[0], picked[1]), (picked[1], picked[0]))]
            picked = [_contract(L, pair[0], pair[1], keep)] + picked[2:]
        ops.append(picked[0])
    x, t = _sum_private(L, ops[0], set(output))
    perm = tuple(t.index(lbl) for lbl in output)
    if perm != tuple(range(len(perm))):
        x = L.b.transpose(x, perm=perm)
    return L.b.reshape_to(x, o.shape)


def _split_args(operands: tuple[Any, ...]) -> tuple[str, list[Any]]:
    """``(subscripts, *arrays)`` or the interleaved ``(a, [0, 1], b, [1, 2], [0, 2])``."""
    if isinstance(operands[0], str):
        return operands[0], list(operands[1:])
    arrays, subs = list(operands[0::2]), list(operands[1::2])
    out = None
    if len(arrays) > len(subs):  # an odd count: the last item is the output sublist
        out = arrays.pop()
    text = ",".join(_sublist(s) for s in subs)
    return (text + "->" + _sublist(out) if out is not None else text), arrays


def _sublist(sub: Any) -> str:
    letters = _LETTERS
    return "".join("..." if s is Ellipsis else letters[int(s)] for s in sub)


def parse(subscripts: str, ndims: list[int]) -> tuple[list[Term], Term]:
    """Each operand's labels and the output's, with ellipses spelled out as labels
    ``"…0"``, ``"…1"``... aligned from the right as broadcasting aligns them.

    >>> parse("ij,jk", [2, 2])
    ([['i', 'j'], ['j', 'k']], ['i', 'k'])
    >>> parse("...i,i->...", [3, 1])
    ([['…0', '…1', 'i'], ['i']], ['…0', '…1'])
    """
    text = subscripts.replace(" ", "")
    lhs, arrow, rhs = text.partition("->")
    specs = lhs.split(",")
    if len(specs) != len(ndims):
        raise UnsupportedError(f"np.einsum: {len(specs)} operand subscripts for "
                               f"{len(ndims)} operands")
    n_ell = max((nd - len(s.replace("...", "")) for s, nd in zip(specs, ndims, strict=True)
                 if "..." in s), default=0)
    ell = [f"…{i}" for i in range(n_ell)]
    terms = [_term(s, nd, ell) for s, nd in zip(specs, ndims, strict=True)]
    if arrow:
        return terms, _term(rhs, len(rhs.replace("...", "")) + n_ell, ell)
    counts: dict[str, int] = {}
    for t in terms:
        for lbl in t:
            counts[lbl] = counts.get(lbl, 0) + 1
    once = sorted(lbl for lbl, c in counts.items() if c == 1 and not lbl.startswith("…"))
    return terms, ell + once


def _term(spec: str, ndim: int, ell: list[str]) -> Term:
    head, dots, tail = spec.partition("...")
    for ch in head + tail:
        if ch not in _LETTERS:
            raise UnsupportedError(f"np.einsum: invalid subscript {ch!r} in {spec!r}")
    if not dots:
        return list(head)
    k = ndim - len(head) - len(tail)
    return list(head) + (ell[len(ell) - k:] if k else []) + list(tail)


def _diagonals(L: LoweringContext, x: Value, t: Term) -> tuple[Value, Term]:
    """Remove repeated labels of one operand by taking diagonals (``'ii->i'``)."""
    t = list(t)
    while len(set(t)) < len(t):
        lbl = next(lb for lb in t if t.count(lb) > 1)
        p = t.index(lbl)
        q = t.index(lbl, p + 1)
        x = diagonal_of(L, x, 0, p, q)
        t = [lb for i, lb in enumerate(t) if i not in (p, q)] + [lbl]
    return x, t


def _broadcast_labels(L: LoweringContext, ops: list[tuple[Value, Term]]
                      ) -> list[tuple[Value, Term]]:
    """Size-1 axes broadcast to the longest axis of the same label among the operands."""
    size: dict[str, int] = {}
    for x, t in ops:
        for lbl, n in zip(t, x.shape, strict=True):
            size[lbl] = max(size.get(lbl, 1), n) if n != 0 else 0
    return [(L.b.broadcast_to(x, tuple(size[lbl] for lbl in t)), t) for x, t in ops]


def _path(subscripts: str, shapes: list[tuple[int, ...]], optimize: Any,
          n: int) -> list[tuple[int, ...]]:
    """The contraction order: groups of operand positions, each replaced by its result
    (appended at the end), as ``np.einsum_path`` reports it."""
    if not optimize or n < 3:
        return [tuple(range(n))] if n > 1 else []
    dummies = [np.broadcast_to(np.zeros(()), s) for s in shapes]
    how = optimize if isinstance(optimize, (str, list)) else "greedy"
    path, _ = np.einsum_path(subscripts, *dummies, optimize=how)
    return [tuple(g) for g in path[1:]]


def _sum_private(L: LoweringContext, op: tuple[Value, Term], keep: set[str]
                 ) -> tuple[Value, Term]:
    """Sum away the operand's labels that are not in ``keep``."""
    x, t = op
    axes = tuple(i for i, lbl in enumerate(t) if lbl not in keep)
    if not axes:
        return x, t
    return L.b.sum(x, axes=axes), [lbl for lbl in t if lbl in keep]


def _arranged(L: LoweringContext, x: Value, t: Term, order: Term) -> Value:
    perm = tuple(t.index(lbl) for lbl in order)
    return x if perm == tuple(range(x.ndim)) else L.b.transpose(x, perm=perm)


def _contract(L: LoweringContext, a: tuple[Value, Term], b: tuple[Value, Term],
              keep: set[str]) -> tuple[Value, Term]:
    """The product of two operands, summed over their shared labels not in ``keep``."""
    (x, ta), (y, tb) = a, b
    batch = [lbl for lbl in ta if lbl in tb and lbl in keep]
    summed = [lbl for lbl in ta if lbl in tb and lbl not in keep]
    fa = [lbl for lbl in ta if lbl not in tb]
    fb = [lbl for lbl in tb if lbl not in ta]
    dims = {**dict(zip(ta, x.shape, strict=True)), **dict(zip(tb, y.shape, strict=True))}
    shape_of = lambda labels: tuple(dims[lbl] for lbl in labels)  # noqa: E731
    n = lambda labels: int(np.prod(shape_of(labels)))  # noqa: E731
    res = batch + fa + fb
    if not summed:  # a broadcast product
        x = L.b.reshape_to(_arranged(L, x, ta, batch + fa), shape_of(batch + fa) + (1,) * len(fb))
        y = L.b.reshape_to(_arranged(L, y, tb, batch + fb),
                           shape_of(batch) + (1,) * len(fa) + shape_of(fb))
        full = shape_of(res)
        return L.b.mul(L.b.broadcast_to(x, full), L.b.broadcast_to(y, full)), res
    x = L.b.reshape_to(_arranged(L, x, ta, batch + fa + summed), (n(batch), n(fa), n(summed)))
    y = L.b.reshape_to(_arranged(L, y, tb, batch + summed + fb), (n(batch), n(summed), n(fb)))
    return L.b.reshape_to(L.b.matmul(x, y), shape_of(res)), res
