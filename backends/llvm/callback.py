"""The ``callback`` op (an opaque primitive's body, ``yota.ir.ops.callback``) as a call out
of native code into Python: ``i32 yota_callback(ptr description, ptr pointers)``
(``backends/callback.py``), the description a constant string of the module, the
operands' and results' addresses in a stack array. The symbol is bound by name when code
is loaded (``runtime/symbols.bind_callback``, called by the llvm runtime's set-up and by
the MLIR runtime), so the object code holds no address and stays cacheable. A nonzero return
stops the program with the op's ``"callback"`` failure record: the kept Python exception
is raised as a ``CallbackError`` with the user's line.

Operands and results are passed where they are, with their strides (views included):
the host side makes NumPy views of them.
"""

from __future__ import annotations

import llvmlite.ir as ir
import numpy as np
from yota.ir.core import Op

from .. import callback as host
from ..lowering import Emitter
from .lower import FnGen
from .runtime.symbols import bind_callback
from .types import I8, I32, I64, PTR, declare, i64


def _string(g: FnGen, data: bytes) -> ir.GlobalVariable:
    ty = ir.ArrayType(I8, len(data))
    s = ir.GlobalVariable(g.mg.module, ty, name=g.mg.fresh("yota.callback.desc"))
    s.global_constant = True
    s.linkage = "private"
    s.initializer = ir.Constant(ty, bytearray(data))
    return s


def _emit(g: FnGen, op: Op) -> None:
    def where(v: object) -> tuple[np.dtype, tuple[int, ...], tuple[int, ...]]:
        loc = g.loc(v)  # type: ignore[arg-type]
        dt = v.dtype  # type: ignore[attr-defined]
        return dt, v.shape, tuple(s * dt.itemsize for s in loc.strides)  # type: ignore

    values = [*op.operands, *op.results]
    desc = host.describe(op.attrs["fn"], op.attrs["static"], [where(v) for v in op.operands],
                         [where(r) for r in op.results])
    ptrs = g.ab.alloca(ir.ArrayType(PTR, max(1, len(values))))
    for j, v in enumerate(values):
        p = g.elem_ptr(g.loc(v), v.dtype)
        g.b.store(p, g.b.gep(ptrs, [i64(0), i64(j)], inbounds=True))
    fn = declare(g.mg.module, host.SYMBOL, I32, [PTR, PTR])
    rc = g.b.call(fn, [_string(g, desc), ptrs])
    record = {"kind": "callback", "fn": op.attrs["fn"], "loc": op.loc, "index": g.op_index}
    g.fail_if(g.b.icmp_signed("!=", rc, ir.Constant(I32, 0)), record, g.b.sext(rc, I64))


bind_callback()
CALLBACK_EMITTERS: dict[str, Emitter] = {"callback": _emit}
