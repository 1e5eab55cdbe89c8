"""Where every value lives on the device: ``backends.layout`` with this target's rules.

A result the plan put in its operand's buffer is a view whenever strides express it; so
is any such shape op of an
input or a constant (nothing writes those during a call), whatever buffer the plan gave
it. The plan keeps a buffer alive while views of it are read, and kernels run in order
on one stream, so following it is safe.
"""

from __future__ import annotations

from yota.ir.core import Function, Op, Value

from ..layout import Layout, LayoutBuilder, Loc, memory_plan

ALIGN = 256  # bytes: cudaMalloc's alignment, and more than any vector access needs
STATUS_BYTES = 256  # the failure status words at the start of the workspace


def build_layout(fn: Function) -> Layout:
    return _Builder(fn).run()


class _Builder(LayoutBuilder):
    def __init__(self, fn: Function) -> None:
        super().__init__(fn, memory_plan(fn), ALIGN, STATUS_BYTES)

    def view(self, i: int, op: Op, r: Value) -> Loc | None:
        if not (self.plan_view(op, r) or self._read_only(op, r)):
            return None
        src = op.operands[0]
        return self.view_loc(op, self.lay.loc[src], src.shape)

    def _read_only(self, op: Op, r: Value) -> bool:
        """A shape op of an input or a constant (never written during a call) can be a
        view whenever strides express it, whatever buffer the plan gave it (a reshape of
        a slice of an input, say)."""
        st = self.lay.loc[op.operands[0]].storage
        return (r not in self.fn.outputs and st >= 0
                and self.lay.storages[st].kind in ("in", "const"))
