"""Where every value lives on the CPU: ``backends.layout`` with this target's rules.

- A view the plan made stays a view when strides express it and the memory it reads is not overwritten while the
  view (or a view of it) is still used (``yota.ir.passes.view_safety``: the plan lets an
  elementwise op write in place into a buffer a view of it reads).
- BLAS takes a matrix or its transpose with unit inner stride: a matrix product's
  operand that is neither gets a contiguous copy (``copies``), made right before it.
"""

from __future__ import annotations

from yota.ir.core import Function, Op, Value
from yota.ir.passes.view_safety import view_lifetimes

from ..layout import Layout, LayoutBuilder, Loc, memory_plan

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

    def _safe(self, src: Value, view: Value) -> bool:
        """No op overwrites the memory ``src`` occupies while ``view`` is used."""
        st = self.lay.loc[src].storage
        if st < 0 or self.lay.storages[st].kind in ("in", "const"):
            return True
        b = self.storage_buf.get(st)
        if b is None:
            return True  # a dedicated region: never rewritten
        return not self.life.overwritten(b, self.writer.get(src, -1), view)

    def operand_copies(self, i: int, op: Op) -> None:
        """Also contiguous copies of the matrices BLAS cannot read."""
        super().operand_copies(i, op)
        if op.name != "matmul" or not self.blas:
            return
        for k, v in enumerate(op.operands):
            if (v.type.nbytes and v.dtype.kind == "f"
                    and blas_matrix(self.lay.loc[v], v.shape) is None):
                self.lay.copies[(i, k)] = self.lay.fresh(v)


# -- BLAS operands ----------------------------------------------------------------------------
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
