"""What lowering one IR function shares across targets: walking its ops through an
op -> emitter table, the locations the layout chose, kernel arguments, copies, scratch
workspace and the final copies into the caller's output arrays.

A backend subclasses ``FnLowering`` with how a kernel is launched (``launch``) and how
scratch memory is addressed (``scratch``); its emitter table (``backends/emit.py`` plus
the target's own emitters) is handed in, so the lowering imports no emitter.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Mapping
from typing import Any

import numpy as np
from yota.ir.core import Function, Op, Value

from .kernel import Access, Kernel, contiguous_strides, copy_kernel
from .layout import Layout, Loc

Emitter = Callable[[Any, Op], None]


class KernelArgs:
    """The pointer parameters of one kernel launch: one per distinct storage."""

    def __init__(self) -> None:
        self.storages: list[int] = []
        self.by_storage: dict[int, int] = {}

    def param(self, storage: int) -> int:
        if storage not in self.by_storage:
            self.by_storage[storage] = len(self.storages)
            self.storages.append(storage)
        return self.by_storage[storage]


class FnLowering:
    """The lowering of one IR function (a target's subclass renders kernels and steps)."""

    def __init__(self, fn: Function, lay: Layout, emitters: Mapping[str, Emitter]) -> None:
        self.fn, self.lay, self.emitters = fn, lay, emitters
        self.scratch_used = 0
        self.scratch_max = 0
        self.op_index = 0

    def emit_ops(self) -> None:
        """Every op through the emitter table, then the copies into output arrays."""
        for i, op in enumerate(self.fn.ops):
            self.scratch_used = 0
            self.op_index = i
            with self.step(i):
                self.emitters[op.name](self, op)
        with self.step(-1):
            for j, v in self.lay.out_copies:
                dst = Loc(self.lay.out_storage[j], 0, contiguous_strides(v.shape))
                self.copy(v.shape, self.loc(v), v.dtype, dst)

    def step(self, op_index: int) -> contextlib.AbstractContextManager[Any]:
        """The code of op ``op_index`` (-1: the copies into the output arrays) is emitted
        inside this context; a target's profiled variant times it (``yota.profile``)."""
        return contextlib.nullcontext()

    # -- memory ----------------------------------------------------------------------------
    def loc(self, v: Value) -> Loc:
        return self.lay.loc[v]

    def operand_loc(self, op_index: int, k: int, v: Value) -> Loc:
        """Where op ``op_index`` reads operand ``k``: a contiguous copy if the layout
        asked for one (made here), else the value's own location."""
        dst = self.lay.copies.get((op_index, k))
        if dst is None:
            return self.loc(v)
        self.copy(v.shape, self.loc(v), v.dtype, dst)
        return dst

    def scratch_offset(self, nbytes: int) -> int:
        """Workspace bytes that live only while the current op runs: their offset."""
        off = self.lay.ws_bytes + self.scratch_used
        self.scratch_used += -(-max(nbytes, 1) // self.lay.align) * self.lay.align
        self.scratch_max = max(self.scratch_max, self.scratch_used)
        return off

    # -- kernels -----------------------------------------------------------------------------
    def access(self, args: KernelArgs, loc: Loc, dtype: np.dtype,
               strides: tuple[int, ...] | None = None) -> Access:
        return Access(args.param(loc.storage), loc.offset,
                      loc.strides if strides is None else tuple(strides), np.dtype(dtype))

    def launch(self, k: Kernel, args: KernelArgs) -> None:
        raise NotImplementedError

    def copy(self, shape: tuple[int, ...], src: Loc, dtype: np.dtype, dst: Loc) -> None:
        if int(np.prod(shape, dtype=np.int64)) == 0:
            return
        args = KernelArgs()
        self.launch(copy_kernel(shape, self.access(args, src, dtype),
                                self.access(args, dst, dtype)), args)
