"""Rendering an ``ir.Function`` and its callees as one MLIR module.

Two forms share every emitter:

- the **export** (``export(fn)``): each IR function becomes a ``func.func`` on tensors,
  a guard a ``cf.assert``; this is the text for ``mlir-opt`` and other MLIR tools;
- the **executable** module (``executable(fn)``): the same functions also return a
  status (``i32`` failure code, ``i64`` bits of the offending value) instead of
  asserting, and an entry ``@yota_main(inputs..., outputs..., status)`` on memrefs
  (``bufferization.to_tensor`` / ``materialize_in_destination``) returns the code;
  with the bare-pointer calling convention it has the llvm backend's entry signature.
"""

from __future__ import annotations

import numpy as np
from yota.ir.core import Function
from yota.ir.errors import UnsupportedError
from yota.ir.types import TensorType

from . import index as _index  # noqa: F401 - registers gather, scatter_add
from . import linalg as _linalg  # noqa: F401 - registers the LAPACK-level ops
from . import loop as _loop  # noqa: F401 - registers loop (scf.for)
from .context import FnCtx, ModuleCtx
from .emit import EMITTERS
from .text import location, memref, symbol, tensor

ENTRY = "yota_main"


def render_function(mod: ModuleCtx, fn: Function) -> None:
    """Render ``fn`` into ``mod`` (once; callees first)."""
    if fn.name in mod.functions:
        return
    mod.functions[fn.name] = ""  # placeholder: a recursive call would find it
    c = FnCtx(mod, fn)
    args = []
    for i, v in enumerate(fn.inputs):
        name = f"%arg{i}"
        c.bind(v, name)
        args.append(f"{name}: {tensor(v.type)}")
    if mod.executable:
        L = c.L
        c.status = (L.const(0, np.dtype(np.int32)), L.const(0, np.dtype(np.int64)))
    for i, op in enumerate(fn.ops):
        c.op_index = i
        c.L.loc = location(op.loc)
        if op.name not in EMITTERS:
            raise UnsupportedError(
                f"the MLIR backend cannot express op '{op.name}' (in @{fn.name}, "
                f"{op.loc or 'no location'}); use backend='llvm' for this program")
        EMITTERS[op.name](c, op)
    c.L.loc = None
    outs = [c.name(v) for v in fn.outputs]
    types = [tensor(v.type) for v in fn.outputs]
    if mod.executable:
        assert c.status is not None
        outs += list(c.status)
        types += ["i32", "i64"]
    ret = f"func.return {', '.join(outs)} : {', '.join(types)}" if outs else "func.return"
    c.L.line(ret)
    vis = "private " if mod.executable else ""
    head = (f"  func.func {vis}{symbol(fn.name)}({', '.join(args)}) -> "
            f"({', '.join(types)}) {{")
    mod.functions[fn.name] = "\n".join([head, *c.L.out, "  }"])


def export(fn: Function) -> str:
    """The MLIR module of ``fn`` (func, arith, math, tensor, linalg; scf for scatters,
    cf.assert for guards), every op located at Yota's provenance."""
    mod = ModuleCtx(executable=False)
    mod.render = lambda f: render_function(mod, f)
    render_function(mod, fn)
    return _module(mod, fn)


def executable(fn: Function, blas: bool = False) -> tuple[str, ModuleCtx]:
    """The executable module of ``fn`` (with the ``@yota_main`` entry on memrefs), and
    its context: failure records (code ``k`` is record ``k - 1``) and, with ``blas``, the
    GEMM calls (``gemms``) the runtime defines."""
    mod = ModuleCtx(executable=True, blas=blas)
    mod.render = lambda f: render_function(mod, f)
    render_function(mod, fn)
    return _module(mod, fn, _entry(mod, fn)), mod


def _module(mod: ModuleCtx, fn: Function, extra: str = "") -> str:
    head = f"// Yota: @{fn.name} as upstream MLIR (func, arith, math, tensor, linalg)"
    body = "\n\n".join([*mod.decls, *mod.functions.values()])
    return f"{head}\nmodule {{\n{body}\n{extra}}}\n"


def _entry(mod: ModuleCtx, fn: Function) -> str:
    """``@yota_main(in memrefs..., out memrefs..., status: memref<2xi64>) -> i32``."""
    from .text import Lines

    L = Lines(mod.counter)
    params, args = [], []
    for i, v in enumerate(fn.inputs):
        params.append(f"%in{i}: {_param(v.type)} {{llvm.noalias}}")
        if v.type.size == 0:  # no data: an empty tensor of the shape
            args.append(L.op(f"tensor.empty() : {tensor(v.type)}", "t"))
            continue
        args.append(L.op(f"bufferization.to_tensor %in{i} restrict : {memref(v.type)} to "
                         f"{tensor(v.type)}", "t"))
    # inputs are only read, outputs are fresh or checked not to overlap anything: noalias
    params += [f"%out{j}: {_param(v.type)} {{llvm.noalias}}" for j, v in enumerate(fn.outputs)]
    params.append("%status: memref<2xi64> {llvm.noalias}")
    n = len(fn.outputs) + 2
    res = L.fresh("r")
    L.line(f"{res}:{n} = func.call {symbol(fn.name)}({', '.join(args)}) : "
           f"({', '.join(tensor(v.type) for v in fn.inputs)}) -> "
           f"({', '.join([tensor(v.type) for v in fn.outputs] + ['i32', 'i64'])})")
    for j, v in enumerate(fn.outputs):
        if v.type.size == 0:
            continue
        L.line(f"bufferization.materialize_in_destination {res}#{j} in restrict writable "
               f"%out{j} : ({tensor(v.type)}, {memref(v.type)}) -> ()")
    one = L.index(1)
    L.line(f"memref.store {res}#{n - 1}, %status[{one}] : memref<2xi64>")
    L.line(f"func.return {res}#{n - 2} : i32")
    return "\n".join([f"\n  func.func @{ENTRY}({', '.join(params)}) -> i32 {{", *L.out,
                      "  }\n"])




def _param(t: TensorType) -> str:
    """An entry parameter's memref type; one without elements is ``memref<0xT>`` (the
    bare-pointer convention refuses some empty shapes, such as ``0x0``)."""
    return memref(t if t.size else t.with_shape((0,)))
