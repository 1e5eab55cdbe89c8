"""The LAPACK-level ops (``yota.ir.ops.lapack``: ``cholesky``, ``triangular_solve``,
``lu``, ``solve``, ``eigh``, ``svd``, ``svdvals``, ``qr``) as **library calls**, not
upstream ``linalg`` ops: upstream MLIR has no factorization or solve, so each op becomes a
``func.call`` of an external function declared in the module, as a StableHLO
``custom_call`` names a library routine. The op's bool attributes are part of the
callee's name (``_lower1``, ``_full_matrices0``...), the op's location is the call's.

- In the **export** the callee is ``@yota_linalg_<op>_<dtype><attributes>`` on unranked
  tensors (``tensor.cast`` to ``tensor<*xf64>`` and back), one declaration per name
  whatever the shapes::

      %u = tensor.cast %arg0 : tensor<3x3xf64> to tensor<*xf64>
      %r = func.call @yota_linalg_cholesky_f64(%u) : (tensor<*xf64>) -> tensor<*xf64>
      %l = tensor.cast %r : tensor<*xf64> to tensor<3x3xf64>

  A consumer of the module binds these names to its own LAPACK (the semantics are
  ``np.linalg``'s, row-major, batched over leading dimensions: ``ir/ops/lapack.py``).

- In the **executable** module each op calls its own ``@yota_linalg_<op>_<dtype>
  <attributes>_<k>(inputs..., outputs...) -> (i32, i64)`` on flat contiguous buffers
  (``bufferization.to_buffer`` of the operands collapsed to 1-D; outputs allocated), and
  that function is the llvm backend's own lowering of the op: a one-op ``ir.Function``
  lowered by its ``FnGen`` with its emitter table (``backends/llvm/lapack.py``: the same
  LAPACK calls, copies, workspace queries and ``info`` checks), wrapped to take the
  buffers, allocate the op's workspace and return the status (failure code, LAPACK's
  ``info``). Its ``"linalg"`` failure records become the MLIR module's (the op's index in
  the user's function), so a failed factorization raises the interpreter's
  ``LinAlgError`` at the user's line.
"""

from __future__ import annotations

import hashlib
import re
from typing import Any

import llvmlite.ir as lir
from yota.ir.core import Function, Op, Value

from .context import FnCtx
from .emit import emitter
from .text import elem, memref, tensor

OPS = ("cholesky", "triangular_solve", "lu", "solve", "eigh", "svd", "svdvals", "qr",
       "pivots", "callback")


def callee(op: Op) -> str:
    """``yota_linalg_<op>_<dtype>`` and the op's bool attributes (``_lower1``); an opaque
    primitive's ``callback``: ``yota_callback_<name>_<digest of the call>``."""
    if op.name == "callback":
        fn, static = op.attrs["fn"], op.attrs["static"]
        name = re.sub(r"\W", "_", fn.split("#")[0].rsplit(".", 1)[-1])
        digest = hashlib.sha256(f"{fn}\0{static}".encode()).hexdigest()[:12]
        return f"yota_callback_{name}_{digest}"
    flags = "".join(f"_{k}{int(bool(v))}" for k, v in sorted(op.attrs.items()))
    dt = op.operands[0].dtype
    return f"yota_linalg_{op.name}_{dt.kind}{dt.itemsize * 8}{flags}"


def _unranked(v: Value) -> str:
    return f"tensor<*x{elem(v.dtype)}>"


@emitter(*OPS)
def _lapack(c: FnCtx, op: Op) -> None:
    if c.executable:
        _native(c, op)
    else:
        _library_call(c, op)


def _library_call(c: FnCtx, op: Op) -> None:
    """The export: a call of the declared library function on unranked tensors."""
    L, name = c.L, callee(op)
    ins = [_unranked(v) for v in op.operands]
    outs = [_unranked(v) for v in op.results]
    sig = f"({', '.join(ins)}) -> ({', '.join(outs)})"
    decl = f"  func.func private @{name}{sig}"
    if decl not in c.mod.decls:
        c.mod.decls.append(decl)
    args = [L.op(f"tensor.cast {c.name(v)} : {tensor(v.type)} to {u}")
            for v, u in zip(op.operands, ins, strict=True)]
    res = L.fresh("r")
    n = len(op.results)
    L.line(f"{res}{f':{n}' if n > 1 else ''} = func.call @{name}({', '.join(args)}) : {sig}")
    for j, (v, u) in enumerate(zip(op.results, outs, strict=True)):
        got = res if n == 1 else f"{res}#{j}"
        c.bind(v, L.op(f"tensor.cast {got} : {u} to {tensor(v.type)}"))


def _flat(v: Value) -> Any:
    return v.type.with_shape((v.type.size,))


def _native(c: FnCtx, op: Op) -> None:
    """The executable module: a call of this op's native function (``NativeOps.add``) on flat
    buffers; its status merged into the function's."""
    L = c.L
    if c.mod.natives is None:
        c.mod.natives = NativeOps()
    native = c.mod.natives.add(op, c.op_index, c.mod.failure)
    ins, outs = [], []
    for v in op.operands:
        flat = c.reshape(c.name(v), v.type, _flat(v).shape)
        ins.append(L.op(f"bufferization.to_buffer {flat} read_only : {tensor(_flat(v))} to "
                        f"{memref(_flat(v))}"))
    for v in op.results:
        outs.append(L.op(f"memref.alloc() {{alignment = 64 : i64}} : {memref(_flat(v))}"))
    types = [memref(_flat(v)) for v in op.operands + op.results]
    sig = f"({', '.join(types)}) -> (i32, i64)"
    c.mod.decls.append(f"  func.func private @{native.name}{sig}")
    res = L.fresh("r")
    L.line(f"{res}:2 = func.call @{native.name}({', '.join(ins + outs)}) : {sig}")
    for v, buf in zip(op.results, outs, strict=True):
        t = L.op(f"bufferization.to_tensor {buf} restrict writable : {memref(_flat(v))} to "
                 f"{tensor(_flat(v))}")
        c.bind(v, c.reshape(t, _flat(v), v.shape))
    c.merge_status(f"{res}#0", f"{res}#1")


class NativeOps:
    """The native functions of a module's LAPACK-level ops, built by the llvm backend's
    lowering into one LLVM module (``module``) that the runtime links in."""

    def __init__(self) -> None:
        from ..llvm.exported import EMITTERS, ModuleGen, Options, host

        self.mg = ModuleGen(host(), Options(threads=1), EMITTERS,
                            lir.Module(name="yota.mlir.linalg"))
        self.names: list[str] = []

    @property
    def module(self) -> lir.Module:
        return self.mg.module

    def add(self, op: Op, op_index: int, register: Any) -> lir.Function:
        """``op`` (the ``op_index``-th op of its function) as
        ``{i32, i64} NAME(ptr inputs..., ptr outputs...)``; ``register(record) -> code``
        numbers a failure record in the MLIR module."""
        from ..llvm.exported import I8, I32, I64, PTR, WS_ALIGN, FnGen, declare, i64

        ins = [Value(v.type) for v in op.operands]
        outs = [Value(v.type) for v in op.results]
        k = len(self.names)
        one = Function(f"linalg{k}", ins, [op.replace(operands=ins, results=outs)], outs)
        first = len(self.mg.failures)
        body, ws = FnGen(self.mg, one, f"yota.linalg.{k}").run()
        # the body's codes first+1.. are the module's codes from codes[0] on, in order
        codes = [register({**rec, "index": op_index}) for rec in self.mg.failures[first:]]
        assert codes == list(range(codes[0], codes[0] + len(codes))) if codes else True
        base = codes[0] if codes else first + 1
        name = f"{callee(op)}_{k}"
        self.names.append(name)
        module = self.mg.module
        status_t = lir.LiteralStructType([I32, I64])
        n = len(ins) + len(outs)
        f = lir.Function(module, lir.FunctionType(status_t, [PTR] * n), name)
        b = lir.IRBuilder(f.append_basic_block("entry"))
        malloc = declare(module, "malloc", PTR, [I64])
        free = declare(module, "free", lir.VoidType(), [PTR])
        block = b.call(malloc, [i64(ws + WS_ALIGN)])  # the workspace, 64-byte aligned
        addr = b.ptrtoint(block, I64)
        pad = b.and_(b.sub(i64(0), addr), i64(WS_ALIGN - 1))
        work = b.gep(block, [pad], source_etype=I8)
        status = b.alloca(lir.ArrayType(I64, 2))
        slots = b.alloca(lir.ArrayType(PTR, n + 2))
        for j, p in enumerate(list(f.args) + [work, status]):
            b.store(p, b.gep(slots, [i64(0), i64(j)], inbounds=True))
        code = b.call(body, [slots])
        b.call(free, [block])
        failed = b.icmp_signed("!=", code, lir.Constant(I32, 0))
        mapped = b.select(failed, b.add(code, lir.Constant(I32, base - first - 1)),
                          lir.Constant(I32, 0))
        value = b.load(b.gep(status, [i64(0), i64(1)], inbounds=True), typ=I64)
        out = b.insert_value(lir.Constant(status_t, None), mapped, 0)
        b.ret(b.insert_value(out, value, 1))
        return f


__all__ = ["OPS", "NativeOps", "callee"]
