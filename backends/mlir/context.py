"""What the emitters of one function share: value names, the current op's location,
tensor helpers (``tensor.empty``, fills, ``linalg.generic``, reshapes) and, in an
executable module, the status chain that records the first failure (a guard that does
not hold, an index out of range)."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
from yota.ir.core import Function, Value
from yota.ir.types import BOOL, TensorType

from .text import Lines, affine_map, elem, identity_map, tensor

Body = Callable[[Lines, list[str]], list[str]]


class ModuleCtx:
    """The module being rendered: fresh-name counter, failure records, functions."""

    def __init__(self, executable: bool, blas: bool = False) -> None:
        self.executable = executable
        self.blas = blas  # executable float matrix products call the llvm backend's GEMMs
        self.gemms: list[tuple[str, np.dtype, int, int, int, int]] = []  # name, dtype, b, m, n, k
        self.decls: list[str] = []  # external functions the module calls
        self.counter = [0]
        self.failures: list[dict[str, Any]] = []
        self.functions: dict[str, str] = {}  # IR name -> rendered text
        self.render: Callable[[Function], None] = lambda fn: None  # set by render.py
        self.natives: Any = None  # linalg.NativeOps: the LAPACK-level ops' functions

    def failure(self, record: dict[str, Any]) -> int:
        self.failures.append(record)
        return len(self.failures)


class FnCtx:
    """The rendering of one IR function's body."""

    def __init__(self, mod: ModuleCtx, fn: Function) -> None:
        self.mod, self.fn = mod, fn
        self.L = Lines(mod.counter)
        self.names: dict[Value, str] = {}
        self.op_index = 0
        self.status: tuple[str, str] | None = None  # (i32 code, i64 value bits)

    @property
    def executable(self) -> bool:
        return self.mod.executable

    def name(self, v: Value) -> str:
        return self.names[v]

    def bind(self, v: Value, name: str) -> None:
        self.names[v] = name

    # -- tensors ----------------------------------------------------------------------
    def empty(self, t: TensorType) -> str:
        return self.L.op(f"tensor.empty() : {tensor(t)}", "e")

    def fill(self, t: TensorType, value: object) -> str:
        c = self.L.const(value, t.dtype)
        return self.L.op(f"linalg.fill ins({c} : {elem(t.dtype)}) outs({self.empty(t)} : "
                         f"{tensor(t)}) -> {tensor(t)}")

    def generic(self, ins: Sequence[tuple[str, TensorType, str]],
                outs: Sequence[tuple[str, TensorType, str]], iters: Sequence[str],
                body: Body, domain: Sequence[int] | None = None) -> list[str]:
        """A ``linalg.generic``: ``ins``/``outs`` as (SSA name, type, indexing map);
        ``body(lines, block arguments)`` returns the yielded scalars. With ``domain``, a
        loop that no operand spans (every input broadcast along it, every output
        reduced) gets an unread 1-D operand of its extent, so linalg knows its range."""
        L = self.L
        real = len(ins)
        if domain is not None:
            ins = list(ins) + self._spans(list(ins) + list(outs), domain)
        res = L.fresh("g")
        maps = ", ".join(m for _, _, m in list(ins) + list(outs))
        its = ", ".join(f'"{i}"' for i in iters)
        head = f"{res}{f':{len(outs)}' if len(outs) > 1 else ''} = linalg.generic " \
               f"{{indexing_maps = [{maps}], iterator_types = [{its}]}}"
        if ins:
            head += (f" ins({', '.join(n for n, _, _ in ins)} : "
                     f"{', '.join(tensor(t) for _, t, _ in ins)})")
        head += (f" outs({', '.join(n for n, _, _ in outs)} : "
                 f"{', '.join(tensor(t) for _, t, _ in outs)}) {{")
        L.line(head)
        args = [L.fresh("a") for _ in list(ins) + list(outs)]
        types = [elem(t.dtype) for _, t, _ in list(ins) + list(outs)]
        L.line("^bb0(" + ", ".join(f"{a}: {t}" for a, t in zip(args, types, strict=True)) + "):")
        outer = L.indent
        L.indent = outer + "  "
        ys = body(L, args[:real] + args[len(ins):])
        L.line(f"linalg.yield {', '.join(ys)} : "
               f"{', '.join(elem(t.dtype) for _, t, _ in outs)}")
        L.indent = outer
        rtypes = [tensor(t) for _, t, _ in outs]
        L.line(f"}} -> {rtypes[0] if len(rtypes) == 1 else '(' + ', '.join(rtypes) + ')'}")
        return [res] if len(outs) == 1 else [f"{res}#{i}" for i in range(len(outs))]

    def _spans(self, operands: list[tuple[str, TensorType, str]], domain: Sequence[int]
               ) -> list[tuple[str, TensorType, str]]:
        covered: set[str] = set()
        for _, _, m in operands:
            covered.update(r.strip() for r in m.split("-> (")[1].rstrip(")>").split(","))
        n = len(domain)
        spans = [TensorType(BOOL, (domain[k],)) for k in range(n)]
        return [(self.empty(spans[k]), spans[k], affine_map(n, [f"d{k}"]))
                for k in range(n) if f"d{k}" not in covered]

    def elementwise(self, xs: Sequence[tuple[str, TensorType]], out: TensorType,
                    body: Body) -> str:
        """A ``linalg.generic`` over ``out``'s shape reading ``xs`` at the same index."""
        m = identity_map(len(out.shape))
        return self.generic([(n, t, m) for n, t in xs], [(self.empty(out), out, m)],
                            ["parallel"] * len(out.shape), body)[0]

    def reshape(self, x: str, src: TensorType, dst: tuple[int, ...]) -> str:
        """``x`` (of type ``src``) with shape ``dst``: collapsed to 1-D (0-d), then
        expanded."""
        if src.shape == dst:
            return x
        L = self.L
        mid = src.with_shape(() if not dst else (src.size,))
        if src.shape and len(src.shape) != len(mid.shape):
            groups = f"[{list(range(len(src.shape)))}]" if mid.shape else "[]"
            x = L.op(f"tensor.collapse_shape {x} {groups} : {tensor(src)} into {tensor(mid)}")
        else:
            mid = src
        if mid.shape == dst:
            return x
        out = src.with_shape(dst)
        groups = f"[{list(range(len(dst)))}]" if mid.shape else "[]"
        return L.op(f"tensor.expand_shape {x} {groups} output_shape {list(dst)} : "
                    f"{tensor(mid)} into {tensor(out)}")

    def extract(self, x: str, t: TensorType) -> str:
        """The one element of a size-1 tensor."""
        zero = [self.L.index(0) for _ in t.shape]
        return self.L.op(f"tensor.extract {x}[{', '.join(zero)}] : {tensor(t)}")

    # -- failures (executable modules) ---------------------------------------------------
    def record_failure(self, failed: str, record: dict[str, Any], bits: str) -> None:
        """If ``failed`` (i1) and nothing failed before, the status becomes this record's
        code and the offending value's bits (i64)."""
        assert self.status is not None
        L, (code, value) = self.L, self.status
        k = self.mod.failure(record)
        first = L.op(f"arith.cmpi eq, {code}, {L.const(0, np.dtype(np.int32))} : i32")
        take = L.op(f"arith.andi {failed}, {first} : i1")
        self.status = (L.op(f"arith.select {take}, {L.const(k, np.dtype(np.int32))}, {code} "
                            ": i32"),
                       L.op(f"arith.select {take}, {bits}, {value} : i64"))

    def merge_status(self, code: str, bits: str) -> None:
        """A callee's status: kept if it failed and nothing failed before."""
        assert self.status is not None
        L, (old, value) = self.L, self.status
        zero = L.const(0, np.dtype(np.int32))
        take = L.op(f"arith.andi {L.op(f'arith.cmpi ne, {code}, {zero} : i32')}, "
                    f"{L.op(f'arith.cmpi eq, {old}, {zero} : i32')} : i1")
        self.status = (L.op(f"arith.select {take}, {code}, {old} : i32"),
                       L.op(f"arith.select {take}, {bits}, {value} : i64"))


def broadcast_map(src: tuple[int, ...], domain: tuple[int, ...]) -> str:
    """The indexing map reading a value of shape ``src`` broadcast (NumPy rules) over
    ``domain``: stretched size-1 axes read index 0."""
    lead = len(domain) - len(src)
    return affine_map(len(domain), [f"d{lead + i}" if s == domain[lead + i] else "0"
                                    for i, s in enumerate(src)])
