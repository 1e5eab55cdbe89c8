"""Where every value lives on the CPU: ``backends.layout`` with this target's rules.

- A view the plan made stays a view when strides express it (a ``reshape`` of strided
  memory too, ``reshape_strides``) and the memory it reads is not overwritten while the
  view (or a view of it) is still used (``yota.ir.passes.view_safety``: the plan lets an
  elementwise op write in place into a buffer a view of it reads).
- Every op reading a value must be able to take its strides: kernels take any strides,
  BLAS takes a matrix or its transpose with unit inner stride, a ``call`` needs a
  contiguous array. An operand that does not fit gets a contiguous copy in a dedicated
  region (``copies``), made right before its op.
"""

from __future__ import annotations

import numpy as np
from yota.ir.core import Function, Op, Value
from yota.ir.passes.view_safety import view_lifetimes

from ..kernel import contiguous_strides
from ..layout import Layout, LayoutBuilder, Loc, is_contiguous, memory_plan, strided_view

ALIGN = 64
STATUS_BYTES = 64


def build_layout(fn: Function, blas: bool) -> Layout:
    return _Builder(fn, blas).run()


class _Builder(LayoutBuilder):
    def __init__(self, fn: Function, blas: bool) -> None:
        plan = memory_plan(fn)
        super().__init__(fn, plan, ALIGN, STATUS_BYTES)
        self.blas = blas
        self.writer: dict[Value, int] = {}  # op that wrote the memory a value reads (-1: none)
        self.life = view_lifetimes(fn, plan)

    def placed(self, i: int, op: Op, r: Value, is_view: bool) -> None:
        self.writer[r] = self.writer.get(op.operands[0], -1) if is_view else i

    def view(self, i: int, op: Op, r: Value) -> Loc | None:
        """A view where the plan made one and it is safe."""
        src = op.operands[0]
        if not self.plan_view(op, r):
            return None
        cand = self.view_loc(op, self.lay.loc[src], src.shape)
        return cand if cand is not None and self._safe(src, r) else None

    def view_loc(self, op: Op, loc: Loc, shape: tuple[int, ...]) -> Loc | None:
        return view_loc(op, loc, shape)

    def _safe(self, src: Value, view: Value) -> bool:
        """No op overwrites the memory ``src`` occupies while ``view`` is used."""
        st = self.lay.loc[src].storage
        if st < 0 or self.lay.storages[st].kind in ("in", "const"):
            return True
        if not hasattr(self, "storage_buf"):
            self.storage_buf = {s: b for b, s in self.buf_storage.items()}
        b = self.storage_buf.get(st)
        if b is None:
            return True  # a dedicated region: never rewritten
        return not self.life.overwritten(b, self.writer.get(src, -1), view)

    def operand_copies(self, i: int, op: Op) -> None:
        """Contiguous copies of a ``call``'s strided operands and of matrices BLAS cannot
        read."""
        for k, v in enumerate(op.operands):
            if v.type.nbytes == 0:
                continue
            loc = self.lay.loc[v]
            if op.name in ("call",) and not is_contiguous(loc, v.shape):
                self.lay.copies[(i, k)] = self.lay.fresh(v)
            elif (op.name == "matmul" and self.blas and v.dtype.kind == "f"
                  and blas_matrix(loc, v.shape) is None):
                self.lay.copies[(i, k)] = self.lay.fresh(v)


# -- view arithmetic ------------------------------------------------------------------------
def view_loc(op: Op, loc: Loc, shape: tuple[int, ...]) -> Loc | None:
    """The location of shape op ``op``'s result as a view of ``loc``, or None."""
    if op.name != "reshape":
        return strided_view(op, loc, shape)
    st = reshape_strides(shape, loc.strides, op.attrs["shape"])
    return None if st is None else Loc(loc.storage, loc.offset, st)


def reshape_strides(old: tuple[int, ...], strides: tuple[int, ...],
                    new: tuple[int, ...]) -> tuple[int, ...] | None:
    """Strides that view ``old``-shaped memory as ``new`` without copying, or None."""
    if int(np.prod(old, dtype=np.int64)) == 0:
        return contiguous_strides(new)
    od = [(d, s) for d, s in zip(old, strides, strict=True) if d != 1]
    out: list[int] = []
    i = 0
    j = 0
    nd = list(new)
    while j < len(nd):
        if nd[j] == 1:
            out.append(0)
            j += 1
            continue
        # take old dims until the products match
        if i >= len(od):
            return None
        po, pn = od[i][0], nd[j]
        oi, nj = [i], [j]
        while po != pn:
            if po < pn:
                i += 1
                if i >= len(od):
                    return None
                po *= od[i][0]
                oi.append(i)
            else:
                j += 1
                while j < len(nd) and nd[j] == 1:
                    j += 1
                if j >= len(nd):
                    return None
                pn *= nd[j]
                nj.append(j)
        for a, b in zip(oi, oi[1:], strict=False):
            if od[a][1] != od[b][1] * od[b][0]:
                return None
        st = od[oi[-1]][1]
        group = list(range(nj[0], nj[-1] + 1))
        gs = {}
        for g in reversed(group):
            gs[g] = st if nd[g] != 1 else 0
            if nd[g] != 1:
                st *= nd[g]
        out.extend(gs[g] for g in group)
        i += 1
        j = nj[-1] + 1
    if i != len(od):
        return None
    return tuple(out)


def blas_matrix(loc: Loc, shape: tuple[int, ...]) -> tuple[bool, int] | None:
    """(transposed, leading dimension) if every matrix of ``loc`` is one BLAS can read:
    row-major with unit inner stride, or the transpose of one; else None."""
    rows, cols = shape[-2], shape[-1]
    rs, cs = loc.strides[-2], loc.strides[-1]
    if rows == 0 or cols == 0:
        return False, max(1, cols)
    if cols == 1 or cs == 1:
        ld = rs if rows > 1 else max(1, cols)
        if ld >= max(1, cols):
            return False, ld
    if rows == 1 or rs == 1:
        ld = cs if cols > 1 else max(1, rows)
        if ld >= max(1, rows):
            return True, ld
    return None
