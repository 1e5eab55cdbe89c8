"""Contractions: ``matmul`` (and ``@``), ``dot``, ``vdot``, ``inner``, ``outer``,
``tensordot``, ``kron`` and ``cross`` (``einsum`` is in ``einsum``).

Every contraction becomes transposes and reshapes around one (batched) ``matmul``, so
BLAS does the work: the operands are laid out as ``[batch, free, contracted]`` and
``[batch, contracted, free]``. ``kron`` and ``outer`` are broadcast products, ``cross``
slices and products.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from yota.ir.core import Value
from yota.ir.errors import UnsupportedError
from yota.ir.types import TensorType

from .registry import LoweringContext, register
from .static import normalize_axis, static_value


def matmul_values(L: LoweringContext, a: Value, b: Value, out: TensorType) -> Value:
    """NumPy matmul semantics: 1-D operands promoted, batch dimensions broadcast."""
    bld = L.b
    a, b = bld.convert_to(a, out.dtype), bld.convert_to(b, out.dtype)
    a2 = bld.reshape_to(a, (1,) + a.shape) if a.ndim == 1 else a
    b2 = bld.reshape_to(b, b.shape + (1,)) if b.ndim == 1 else b
    batch = a2.shape[:-2]  # equal batch dimensions need no broadcast (the common case)
    if batch != b2.shape[:-2]:
        batch = tuple(np.broadcast_shapes(batch, b2.shape[:-2]))
    a2 = bld.broadcast_to(a2, batch + a2.shape[-2:])
    b2 = bld.broadcast_to(b2, batch + b2.shape[-2:])
    return bld.reshape_to(bld.matmul(a2, b2), out.shape)


def contract(L: LoweringContext, a: Value, b: Value, axes_a: list[int], axes_b: list[int],
             out: TensorType) -> Value:
    """``np.tensordot(a, b, (axes_a, axes_b))``: one matmul of ``[free_a, k] @ [k, free_b]``,
    reshaped to ``out`` (free axes of ``a``, then free axes of ``b``)."""
    bld = L.b
    a, b = bld.convert_to(a, out.dtype), bld.convert_to(b, out.dtype)
    if a.ndim == 0 or b.ndim == 0:
        return bld.mul(bld.broadcast_to(a, out.shape), bld.broadcast_to(b, out.shape))
    free_a = [i for i in range(a.ndim) if i not in axes_a]
    free_b = [i for i in range(b.ndim) if i not in axes_b]
    a2 = _arrange(L, a, free_a + list(axes_a), len(free_a))
    b2 = _arrange(L, b, list(axes_b) + free_b, len(axes_b))
    return bld.reshape_to(bld.matmul(a2, b2), out.shape)


def _arrange(L: LoweringContext, x: Value, perm: list[int], n_rows: int) -> Value:
    """``x`` transposed by ``perm``, as a matrix: its first ``n_rows`` axes make the rows."""
    if perm != list(range(x.ndim)):
        x = L.b.transpose(x, perm=tuple(perm))
    rows = int(np.prod(x.shape[:n_rows]))
    return L.b.reshape_to(x, (rows, int(np.prod(x.shape[n_rows:]))))


@register("matmul", np.matmul, np.matmul)
def _matmul(L: LoweringContext, outs: list[TensorType], x1: Any, x2: Any) -> Value:
    return matmul_values(L, L.operand(x1, None, None), L.operand(x2, None, None), outs[0])


@register("dot", np.dot, np.dot)
def _dot(L: LoweringContext, outs: list[TensorType], a: Any, b: Any, out: Any = None) -> Value:
    o = outs[0]
    x, y = L.operand(a, o.dtype, None), L.operand(b, o.dtype, None)
    if x.ndim == 0 or y.ndim == 0 or y.ndim == 1:
        return contract(L, x, y, [x.ndim - 1] if x.ndim and y.ndim else [], [0] if y.ndim and
                        x.ndim else [], o)
    if x.ndim <= 2 and y.ndim == 2:
        return matmul_values(L, x, y, o)
    return contract(L, x, y, [x.ndim - 1], [y.ndim - 2], o)


@register("vdot", np.vdot, np.vdot)
def _vdot(L: LoweringContext, outs: list[TensorType], a: Any, b: Any) -> Value:
    o = outs[0]
    x, y = L.operand(a, o.dtype, None), L.operand(b, o.dtype, None)
    x, y = L.b.reshape_to(x, (x.type.size,)), L.b.reshape_to(y, (y.type.size,))
    return contract(L, x, y, [0], [0], o)


@register("inner", np.inner, np.inner)
def _inner(L: LoweringContext, outs: list[TensorType], a: Any, b: Any) -> Value:
    o = outs[0]
    x, y = L.operand(a, o.dtype, None), L.operand(b, o.dtype, None)
    if x.ndim == 0 or y.ndim == 0:
        return contract(L, x, y, [], [], o)
    return contract(L, x, y, [x.ndim - 1], [y.ndim - 1], o)


@register("outer", np.outer, np.outer)
def _outer(L: LoweringContext, outs: list[TensorType], a: Any, b: Any, out: Any = None) -> Value:
    o = outs[0]
    x, y = L.operand(a, o.dtype, None), L.operand(b, o.dtype, None)
    x = L.b.broadcast_to(L.b.reshape_to(x, (x.type.size, 1)), o.shape)
    y = L.b.broadcast_to(L.b.reshape_to(y, (1, y.type.size)), o.shape)
    return L.b.mul(x, y)


def _tensordot_axes(axes: Any, nda: int, ndb: int) -> tuple[list[int], list[int]]:
    if isinstance(axes, (int, np.integer)):
        n = int(axes)
        if n < 0 or n > min(nda, ndb):
            raise UnsupportedError(f"np.tensordot: axes={n} does not fit {nda}-d and {ndb}-d")
        return list(range(nda - n, nda)), list(range(n))
    ax_a, ax_b = axes
    ax_a = [ax_a] if isinstance(ax_a, (int, np.integer)) else list(ax_a)
    ax_b = [ax_b] if isinstance(ax_b, (int, np.integer)) else list(ax_b)
    return ([normalize_axis(i, nda, "np.tensordot") for i in ax_a],
            [normalize_axis(i, ndb, "np.tensordot") for i in ax_b])


@register("tensordot", np.tensordot, np.tensordot)
def _tensordot(L: LoweringContext, outs: list[TensorType], a: Any, b: Any,
               axes: Any = 2) -> Value:
    o = outs[0]
    x, y = L.operand(a, o.dtype, None), L.operand(b, o.dtype, None)
    axes = static_value(L, axes, "np.tensordot's axes")
    ax_a, ax_b = _tensordot_axes(axes, x.ndim, y.ndim)
    return contract(L, x, y, ax_a, ax_b, o)


@register("kron", np.kron, np.kron)
def _kron(L: LoweringContext, outs: list[TensorType], a: Any, b: Any) -> Value:
    o = outs[0]
    x, y = L.operand(a, o.dtype, None), L.operand(b, o.dtype, None)
    d = max(x.ndim, y.ndim)
    sa = (1,) * (d - x.ndim) + x.shape
    sb = (1,) * (d - y.ndim) + y.shape
    x = L.b.reshape_to(x, tuple(v for s in sa for v in (s, 1)))
    y = L.b.reshape_to(y, tuple(v for s in sb for v in (1, s)))
    wide = tuple(v for p, q in zip(sa, sb, strict=True) for v in (p, q))
    prod = L.b.mul(L.b.broadcast_to(x, wide), L.b.broadcast_to(y, wide))
    return L.b.reshape_to(prod, o.shape)


def _components(L: LoweringContext, x: Value, ax: int, batch: tuple[int, ...],
                o: TensorType) -> list[Value | None]:
    """The 2 or 3 components of vectors along ``ax``, each broadcast to ``batch``."""
    x = L.b.convert_to(x, o.dtype)
    perm = [i for i in range(x.ndim) if i != ax] + [ax]
    if perm != list(range(x.ndim)):
        x = L.b.transpose(x, perm=tuple(perm))
    res: list[Value | None] = []
    for c in range(3):
        if c >= x.shape[-1]:
            res.append(None)
            continue
        start = (0,) * (x.ndim - 1) + (c,)
        s = L.b.slice(x, start=start, stop=x.shape[:-1] + (c + 1,), step=(1,) * x.ndim)
        res.append(L.b.broadcast_to(L.b.reshape_to(s, x.shape[:-1]), batch))
    return res


@register("cross", np.cross, np.cross)
def _cross(L: LoweringContext, outs: list[TensorType], a: Any, b: Any, axisa: int = -1,
           axisb: int = -1, axisc: int = -1, axis: Any = None) -> Value:
    o = outs[0]
    x, y = L.operand(a, o.dtype, None), L.operand(b, o.dtype, None)
    if axis is not None:
        axisa = axisb = axisc = axis
    axa = normalize_axis(axisa, x.ndim, "np.cross")
    axb = normalize_axis(axisb, y.ndim, "np.cross")
    batch = tuple(np.broadcast_shapes(tuple(s for i, s in enumerate(x.shape) if i != axa),
                                      tuple(s for i, s in enumerate(y.shape) if i != axb)))
    a0, a1, a2 = _components(L, x, axa, batch, o)
    b0, b1, b2 = _components(L, y, axb, batch, o)

    def term(p: Value | None, q: Value | None, r: Value | None, s: Value | None) -> Value:
        """p*q - r*s, where a missing (third) component is zero."""
        pq = L.b.mul(p, q) if p is not None and q is not None else None
        rs = L.b.mul(r, s) if r is not None and s is not None else None
        if rs is None:
            return pq if pq is not None else L.b.const(0, o.dtype, batch)
        return L.b.sub(pq, rs) if pq is not None else L.b.neg(rs)

    z = term(a0, b1, a1, b0)
    if a2 is None and b2 is None:
        return L.b.reshape_to(z, o.shape)
    parts = [term(a1, b2, a2, b1), term(a2, b0, a0, b2), z]
    c = L.b.concatenate(*[L.b.reshape_to(p, batch + (1,)) for p in parts], axis=len(batch))
    axc = normalize_axis(axisc, o.ndim, "np.cross")
    if axc != o.ndim - 1:
        perm = list(range(o.ndim - 1))
        perm.insert(axc, o.ndim - 1)
        c = L.b.transpose(c, perm=tuple(perm))
    return c


# -- the array-API spellings (NumPy 2): gufuncs and np.linalg's contractions ------------------------
def _vecdot_lower(L: LoweringContext, outs: list[TensorType], x1: Any, x2: Any,
                  axis: int = -1, **kw: Any) -> Value:
    """``sum(x1 * x2, axis)`` with broadcasting (real inputs: no conjugate)."""
    if set(kw) - {"axes", "keepdims"} or kw.get("axes") is not None or kw.get("keepdims"):
        raise UnsupportedError(f"np.vecdot with {sorted(kw)} is not supported; use axis=")
    o = outs[0]
    x, y = L.operand(x1, o.dtype, None), L.operand(x2, o.dtype, None)
    shape = tuple(np.broadcast_shapes(x.shape, y.shape))
    p = L.b.mul(L.b.broadcast_to(x, shape), L.b.broadcast_to(y, shape))
    return L.b.reshape_to(L.b.sum(p, axes=(normalize_axis(axis, len(shape), "vecdot"),)),
                          o.shape)


register("vecdot", np.vecdot, *[f for f in (getattr(np, "vecdot", None),
                                            getattr(np.linalg, "vecdot", None)) if f])(
    _vecdot_lower)


def _matvec_lower(L: LoweringContext, outs: list[TensorType], x1: Any, x2: Any) -> Value:
    o = outs[0]
    x, v = L.operand(x1, o.dtype, None), L.operand(x2, o.dtype, None)
    col = L.b.reshape_to(v, v.shape + (1,))
    return matmul_values(L, x, col, TensorType(o.dtype, o.shape + (1,)))


def _vecmat_lower(L: LoweringContext, outs: list[TensorType], x1: Any, x2: Any) -> Value:
    o = outs[0]
    v, x = L.operand(x1, o.dtype, None), L.operand(x2, o.dtype, None)
    row = L.b.reshape_to(v, v.shape[:-1] + (1,) + v.shape[-1:])
    res = matmul_values(L, row, x, TensorType(o.dtype, o.shape[:-1] + (1,) + o.shape[-1:]))
    return L.b.reshape_to(res, o.shape)


if hasattr(np, "matvec"):  # NumPy 2.2
    register("matvec", np.matvec, np.matvec)(
        lambda L, outs, x1, x2: L.b.reshape_to(_matvec_lower(L, outs, x1, x2), outs[0].shape))
    register("vecmat", np.vecmat, np.vecmat)(_vecmat_lower)

register("linalg.matmul", np.linalg.matmul, np.linalg.matmul)(
    lambda L, outs, x1, x2: _matmul(L, outs, x1, x2))
register("linalg.tensordot", np.linalg.tensordot, np.linalg.tensordot)(
    lambda L, outs, x1, x2, *, axes=2: _tensordot(L, outs, x1, x2, axes))
register("linalg.outer", np.linalg.outer, np.linalg.outer)(
    lambda L, outs, x1, x2: _outer(L, outs, x1, x2))
register("linalg.cross", np.linalg.cross, np.linalg.cross)(
    lambda L, outs, x1, x2, *, axis=-1: _cross(L, outs, x1, x2, axis=axis))
