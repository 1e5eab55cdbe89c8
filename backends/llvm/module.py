"""Lowering an ``ir.Function`` (and its callees) to ONE LLVM module: the functions
(``lower.py``, through the emitter table of ``emit.py``) and the exported entry points
that Python calls:

    i32 @yota_main(ptr in0, ..., ptr out0, ..., ptr workspace)
    i32 @yota_main_arrays(PyArrayObject* in0, ..., out0, ..., ptr workspace)

(or, for a program of more than ``abi.MAX_CALL_ARGS`` pointers, each taking one pointer
to an array of them: ``abi.packed``).
"""

from __future__ import annotations

from typing import Any

import llvmlite.ir as ir
from yota.ir.core import Function

from .abi import ENTRY, ENTRY_OBJ, packed  # defined there for the loading side
from .emit import EMITTERS
from .loops import loop
from .lower import FnGen, ModuleGen, Options
from .runtime.target import ARRAY_ABI, Target
from .types import I1, I8, I32, I64, PTR, i64


def lower_module(fn: Function, target: Target, options: Options) -> ModuleGen:
    """Lower ``fn`` and everything it calls; adds the exported entry ``yota_main``."""
    mg = ModuleGen(target, options, EMITTERS)
    main, ws = FnGen(mg, fn, "yota.main").run()
    nptr = len(fn.inputs) + len(fn.outputs) + 1
    pack = packed(nptr) if options.packed is None else options.packed
    entry = ir.Function(mg.module, ir.FunctionType(I32, [PTR] * (1 if pack else nptr)), ENTRY)
    b = ir.IRBuilder(entry.append_basic_block("entry"))
    if pack:
        slots = entry.args[0]  # the caller's array, the workspace in it twice
    else:
        slots = b.alloca(ir.ArrayType(PTR, nptr + 1))
        for k, p in enumerate(list(entry.args) + [entry.args[-1]]):  # status = workspace
            b.store(p, b.gep(slots, [i64(0), i64(k)], inbounds=True))
    b.ret(b.call(main, [slots]))
    array_entry(mg, fn, entry, pack)
    mg.ws_bytes = ws  # type: ignore[attr-defined]
    return mg


def array_entry(mg: ModuleGen, fn: Function, entry: ir.Function, pack: bool = False
                ) -> None:
    """``i32 yota_main_arrays(PyArrayObject* in0, ..., out0, ..., ptr workspace)``: reads
    each array's data pointer itself (cheaper than any way Python has to get it) after
    checking that an input has the expected shape and is C-contiguous and aligned;
    returns -(k+1) if input k is not (the caller converts it and calls again)."""
    n, m = len(fn.inputs), len(fn.outputs)
    if pack:
        _packed_array_entry(mg, fn, entry)
        return
    f = ir.Function(mg.module, ir.FunctionType(I32, [PTR] * (n + m + 1)), ENTRY_OBJ)
    b = ir.IRBuilder(f.append_basic_block("entry"))
    field = lambda obj, name, ty: b.load(  # noqa: E731
        b.gep(obj, [i64(ARRAY_ABI[name])], source_etype=I8), typ=ty)
    ptrs = []
    for k, obj in enumerate(f.args[:n + m]):
        if k < n:
            _check_array(b, f, obj, fn.inputs[k].shape, field, k)
        ptrs.append(field(obj, "data", PTR))
    b.ret(b.call(entry, ptrs + [f.args[-1]]))


def _packed_array_entry(mg: ModuleGen, fn: Function, entry: ir.Function) -> None:
    """``i32 yota_main_arrays(ptr argv)`` for a program of many arguments (``packed``):
    the same checks as loops over tables of the inputs' shapes, so its code does not grow
    with the arguments."""
    n, m = len(fn.inputs), len(fn.outputs)
    f = ir.Function(mg.module, ir.FunctionType(I32, [PTR]), ENTRY_OBJ)
    b = ir.IRBuilder(f.append_basic_block("entry"))
    field = lambda obj, name, ty: b.load(  # noqa: E731
        b.gep(obj, [i64(ARRAY_ABI[name])], source_etype=I8), typ=ty)
    item = lambda table, k, ty=I64: b.load(  # noqa: E731
        b.gep(table, [k], source_etype=ty), typ=ty)
    starts, dims = [0], [d for v in fn.inputs for d in v.shape]
    for v in fn.inputs:
        starts.append(starts[-1] + v.ndim)
    start, want = _table(mg, "yota.entry.dims_at", starts), _table(mg, "yota.entry.dims", dims)
    slots = b.alloca(ir.ArrayType(PTR, n + m + 2))
    need = ir.Constant(I32, ARRAY_ABI["need"])

    def check(k: ir.Value, _: list[ir.Value]) -> list[ir.Value]:
        obj = item(f.args[0], k, PTR)
        lo, hi = item(start, k), item(start, b.add(k, i64(1)))
        nd = b.trunc(b.sub(hi, lo), I32)
        bad = b.or_(b.icmp_signed("!=", field(obj, "nd", I32), nd),
                    b.icmp_signed("!=", b.and_(field(obj, "flags", I32), need), need))
        _fail(b, bad, k)
        got = field(obj, "dims", PTR)
        loop(b, lo, hi, 1, [], lambda j, _: _fail(b, b.icmp_signed(
            "!=", item(got, b.sub(j, lo)), item(want, j)), k))
        b.store(field(obj, "data", PTR), b.gep(slots, [i64(0), k], inbounds=True))
        return []

    def output(k: ir.Value, _: list[ir.Value]) -> list[ir.Value]:
        ptr = field(item(f.args[0], k, PTR), "data", PTR)
        b.store(ptr, b.gep(slots, [i64(0), k], inbounds=True))
        return []
    loop(b, 0, n, 1, [], check, name="inputs")
    loop(b, n, n + m, 1, [], output, name="outputs")
    ws = item(f.args[0], i64(n + m), PTR)
    for k in (n + m, n + m + 1):  # the workspace, and the status block in it
        b.store(ws, b.gep(slots, [i64(0), i64(k)], inbounds=True))
    b.ret(b.call(entry, [slots]))


def _fail(b: ir.IRBuilder, bad: ir.Value, k: ir.Value) -> list[ir.Value]:
    """Return -(k+1) if ``bad``: input ``k`` is not as expected."""
    with b.if_then(bad, likely=False):
        b.ret(b.trunc(b.sub(i64(-1), k), I32))
    return []


def _table(mg: ModuleGen, name: str, values: list[int]) -> ir.GlobalVariable:
    """A constant global array of i64 ``values``."""
    ty = ir.ArrayType(I64, max(len(values), 1))
    g = ir.GlobalVariable(mg.module, ty, name=name)
    g.global_constant = True
    g.linkage = "private"
    g.initializer = ir.Constant(ty, [int(v) for v in values] or [0])
    return g


def _check_array(b: ir.IRBuilder, f: ir.Function, obj: ir.Value, shape: tuple[int, ...],
                 field: Any, k: int) -> None:
    bad = f.append_basic_block(f"bad{k}")
    nd = field(obj, "nd", I32)
    flags = field(obj, "flags", I32)
    need = ir.Constant(I32, ARRAY_ABI["need"])
    ok = b.and_(b.icmp_signed("==", nd, ir.Constant(I32, len(shape))),
                b.icmp_signed("==", b.and_(flags, need), need))
    nxt = f.append_basic_block(f"dims{k}")
    b.cbranch(ok, nxt, bad)
    b.position_at_end(nxt)
    if shape:
        dims = field(obj, "dims", PTR)
        same = ir.Constant(I1, 1)
        for a, d in enumerate(shape):
            got = b.load(b.gep(dims, [i64(a)], source_etype=I64), typ=I64)
            same = b.and_(same, b.icmp_signed("==", got, i64(d)))
        nxt = f.append_basic_block(f"ok{k}")
        b.cbranch(same, nxt, bad)
        b.position_at_end(nxt)
    with b.goto_block(bad):
        b.ret(ir.Constant(I32, -(k + 1)))
