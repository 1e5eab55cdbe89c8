"""Where every value of a function lives: the memory plan rendered as storage, plus views.

The memory plan (``yota.ir.passes.plan_memory``) assigns each op result a buffer. This
module turns it into *locations*: a storage (an input, an output array, a workspace
region, a constant global) with an element offset and element strides. Shape ops
(``transpose``, ``broadcast``, ``slice``, ``flip``, ``reshape``) and splat constants
become *views* (index arithmetic, no copy) when that is safe:

- the memory the view reads is not overwritten while the view (or a view of it) is
  still used (the plan only knows the lifetimes of the values themselves), and
- every op reading the view can take its strides: kernels take any strides, BLAS takes
  a matrix or its transpose with unit inner stride, a ``call`` needs a contiguous
  array. An operand that does not fit gets a contiguous copy in a dedicated region
  (``copies``), made right before its op.

A view that is not safe is *materialized* (copied) into the buffer the plan gave it (a
``reshape`` that cannot be expressed as strides into a dedicated region). An output
value whose buffer holds nothing bigger is written straight into the caller's output
array; other outputs are copied there at the end (``out_copies``).
"""

from __future__ import annotations

import bisect
from dataclasses import dataclass, field

import numpy as np
from yota.ir.core import Function, Op, Value
from yota.ir.ops.misc import splat_scalar
from yota.ir.passes import PassContext
from yota.ir.passes.plan_memory import MemoryPlan, plan_memory

from ..layout_common import Loc, Storage, buffer_storages, is_contiguous, strided_view
from .kernel import contiguous_strides

VIEW_OPS = ("transpose", "broadcast", "slice", "flip", "reshape")
ALIGN = 64
STATUS_BYTES = 64


@dataclass
class Layout:
    fn: Function
    storages: list[Storage] = field(default_factory=list)
    consts: list[np.ndarray] = field(default_factory=list)
    loc: dict[Value, Loc] = field(default_factory=dict)
    materialize: set[Value] = field(default_factory=set)  # view-op results to copy
    copies: dict[tuple[int, int], Loc] = field(default_factory=dict)  # (op, operand)
    out_copies: list[tuple[int, Value]] = field(default_factory=list)
    out_storage: dict[int, int] = field(default_factory=dict)  # output number -> storage
    ws_bytes: int = STATUS_BYTES

    # -- storage --------------------------------------------------------------------
    def add_storage(self, kind: str, index: int, nbytes: int) -> int:
        self.storages.append(Storage(kind, index, nbytes))
        return len(self.storages) - 1

    def workspace(self, nbytes: int) -> int:
        off = self.ws_bytes
        self.ws_bytes += -(-max(nbytes, 1) // ALIGN) * ALIGN
        return self.add_storage("ws", off, nbytes)

    def contiguous(self, storage: int, v: Value) -> Loc:
        return Loc(storage, 0, contiguous_strides(v.shape))

    def fresh(self, v: Value) -> Loc:
        """A dedicated contiguous workspace region for ``v``."""
        return self.contiguous(self.workspace(v.type.nbytes), v)


def build_layout(fn: Function, blas: bool) -> Layout:
    plan = MemoryPlan.of(fn)
    if plan is None:
        plan = MemoryPlan.of(plan_memory(fn, PassContext()))
    assert plan is not None
    return _Builder(fn, plan, blas).run()


class _Builder:
    def __init__(self, fn: Function, plan: MemoryPlan, blas: bool) -> None:
        self.fn, self.plan, self.blas = fn, plan, blas
        self.lay = Layout(fn)
        self.buf = plan.buffer_of(fn)
        self.writer: dict[Value, int] = {}
        self.last = self._last_uses()
        self.writes = self._buffer_writes()

    def run(self) -> Layout:
        lay = self.lay
        for k, v in enumerate(self.fn.inputs):
            lay.loc[v] = lay.contiguous(lay.add_storage("in", k, v.type.nbytes), v)
            self.writer[v] = -1
        self.buf_storage = buffer_storages(lay, self.fn, self.plan, self._plan_view)
        self.storage_buf = {s: b for b, s in self.buf_storage.items()}
        for i, op in enumerate(self.fn.ops):
            self._place(i, op)
            self._operand_copies(i, op)
        for j, v in enumerate(self.fn.outputs):
            want = lay.contiguous(lay.out_storage[j], v)
            if v.type.nbytes and lay.loc[v] != want:
                lay.out_copies.append((j, v))
        return lay

    # -- analysis of the plan ---------------------------------------------------------
    def _last_uses(self) -> dict[Value, int]:
        """Last op index reading each value or a view derived from it (n: returned)."""
        n = len(self.fn.ops)
        last: dict[Value, int] = {}
        for i, op in enumerate(self.fn.ops):
            for v in op.operands:
                last[v] = i
        for v in self.fn.outputs:
            last[v] = n
        for op in reversed(self.fn.ops):
            if op.name in VIEW_OPS:
                src, r = op.operands[0], op.result
                last[src] = max(last.get(src, -1), last.get(r, -1))
        return last

    def _buffer_writes(self) -> dict[int, list[int]]:
        """For each plan buffer, the op indices that write a new value into it."""
        out: dict[int, list[int]] = {}
        for i, op in enumerate(self.fn.ops):
            for r in op.results:
                b = self.buf.get(r, -1)
                if b >= 0 and not self._plan_view(op, r):
                    out.setdefault(b, []).append(i)
        return out

    def _plan_view(self, op: Op, r: Value) -> bool:
        """The plan made ``r`` a view: it shares its operand's memory."""
        return op.name in VIEW_OPS and self.buf.get(r, -1) == self.buf.get(op.operands[0], -1)

    # -- placing results ----------------------------------------------------------------
    def _place(self, i: int, op: Op) -> None:
        lay = self.lay
        if op.name == "const":
            self._place_const(op)
            return
        if op.name in VIEW_OPS:
            self._place_view(i, op)
            return
        for r in op.results:
            self.writer[r] = i
            b = self.buf.get(r, -1)
            if b >= 0 and self.plan.buffers[b] >= r.type.nbytes:
                lay.loc[r] = lay.contiguous(self.buf_storage[b], r)
            elif r.type.nbytes:  # no buffer, or one too small: a plan we cannot follow
                lay.loc[r] = lay.fresh(r)
            else:
                lay.loc[r] = Loc(-1, 0, (0,) * r.ndim)

    def _place_const(self, op: Op) -> None:
        lay, r = self.lay, op.result
        value = op.attrs["value"]
        self.writer[r] = -1
        if r.type.nbytes == 0:
            lay.loc[r] = Loc(-1, 0, (0,) * r.ndim)
            return
        first = splat_scalar(value)
        splat = first is not None
        data = first if splat else np.ascontiguousarray(value)
        lay.consts.append(data)
        s = lay.add_storage("const", len(lay.consts) - 1, data.nbytes)
        lay.loc[r] = Loc(s, 0, (0,) * r.ndim) if splat else lay.contiguous(s, r)

    def _place_view(self, i: int, op: Op) -> None:
        """A view where the plan made one (and it is safe); else a copy into the
        buffer the plan gave the result (or into a dedicated region)."""
        lay = self.lay
        src, r = op.operands[0], op.result
        if r.type.nbytes == 0:
            lay.loc[r] = Loc(-1, 0, (0,) * r.ndim)
            self.writer[r] = i
            return
        b = self.buf.get(r, -1)
        if self._plan_view(op, r):
            cand = view_loc(op, lay.loc[src], src.shape)
            if cand is not None and self._safe(src, r):
                lay.loc[r] = cand
                self.writer[r] = self.writer[src]
                return
            b = -1
        lay.materialize.add(r)
        self.writer[r] = i
        lay.loc[r] = lay.contiguous(self.buf_storage[b], r) if b >= 0 else lay.fresh(r)

    def _safe(self, src: Value, view: Value) -> bool:
        """No op overwrites the memory ``src`` occupies while ``view`` is used."""
        st = self.lay.loc[src].storage
        if st < 0 or self.lay.storages[st].kind in ("in", "const"):
            return True
        b = self.storage_buf.get(st)
        if b is None:
            return True  # a dedicated region: never rewritten
        d, e = self.writer[src], self.last.get(view, -1)
        w = self.writes.get(b, [])
        k = bisect.bisect_right(w, d)
        return k == len(w) or w[k] > e

    # -- operands that need contiguous memory -----------------------------------------------
    def _operand_copies(self, i: int, op: Op) -> None:
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
