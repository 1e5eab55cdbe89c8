"""Lowering an ``ir.Function`` (and its callees) to ONE LLVM module: the functions
(``lower.py``, through the emitter table of ``emit.py``) and the exported entry points
that Python calls:

    i32 @yota_main(ptr in0, ..., ptr out0, ..., ptr workspace)
    i32 @yota_main_arrays(PyArrayObject* in0, ..., out0, ..., ptr workspace)
"""

from __future__ import annotations

from typing import Any

import llvmlite.ir as ir
from yota.ir.core import Function

from .abi import ENTRY, ENTRY_OBJ  # defined there for the loading side
from .emit import EMITTERS
from .lower import FnGen, ModuleGen, Options
from .pool import GEMM_TILES, QUIESCE_SYMBOL, RUN_SYMBOL
from .pool import SYMBOL as POOL_SYMBOL
from .target import ARRAY_ABI, Target
from .types import I1, I8, I32, I64, PTR, VOID, declare, i64


def lower_module(fn: Function, target: Target, options: Options) -> ModuleGen:
    """Lower ``fn`` and everything it calls; adds the exported entry ``yota_main``."""
    mg = ModuleGen(target, options, EMITTERS)
    main, ws = FnGen(mg, fn, "yota.main").run()
    nptr = len(fn.inputs) + len(fn.outputs) + 1
    entry = ir.Function(mg.module, ir.FunctionType(I32, [PTR] * nptr), ENTRY)
    b = ir.IRBuilder(entry.append_basic_block("entry"))
    slots = b.alloca(ir.ArrayType(PTR, nptr + 1))
    for k, p in enumerate(list(entry.args) + [entry.args[-1]]):  # status = workspace
        b.store(p, b.gep(slots, [i64(0), i64(k)], inbounds=True))
    tiles = any(name in mg.module.globals for name in GEMM_TILES.values())
    if tiles or POOL_SYMBOL in mg.module.globals:  # the program may migrate (pool.py)
        run = declare(mg.module, RUN_SYMBOL, I32, [PTR, PTR, I64])
        rc = b.call(run, [main, slots, i64(options.threads)])
    else:
        rc = b.call(main, [slots])
    if tiles:
        # a helper may still read a revocable tile's operands (pool.py): not past here
        b.call(declare(mg.module, QUIESCE_SYMBOL, VOID, []), [])
    b.ret(rc)
    _array_entry(mg, fn, entry)
    mg.ws_bytes = ws  # type: ignore[attr-defined]
    return mg


def _array_entry(mg: ModuleGen, fn: Function, entry: ir.Function) -> None:
    """``i32 yota_main_arrays(PyArrayObject* in0, ..., out0, ..., ptr workspace)``: reads
    each array's data pointer itself (cheaper than any way Python has to get it) after
    checking that an input has the expected shape and is C-contiguous and aligned;
    returns -(k+1) if input k is not (the caller converts it and calls again)."""
    n, m = len(fn.inputs), len(fn.outputs)
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
