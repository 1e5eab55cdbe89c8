"""From the executable MLIR module to a loaded program: ``PIPELINE`` and
``mlir-translate``, the llvm backend's array entry point linked in, optimization and
object code by the llvm backend's JIT, and its executable class for the calling side
(argument checks, output arrays, workspace = the status words, failure records)."""

from __future__ import annotations

import re
from collections.abc import Sequence
from types import SimpleNamespace
from typing import Any

import llvmlite.binding as llvm
import llvmlite.ir as lir
import numpy as np
from yota.ir.core import Function
from yota.ir.errors import YotaError

from ..llvm.exported import (
    ENTRY,
    ENTRY_OBJ,
    I32,
    I64,
    PTR,
    LLVMExecutable,
    array_entry,
    bind_callback,
    declare,
    emit_object,
    host,
    i64,
    init,
    load_object,
    loop,
    mvec_has,
    reg_type,
)
from ..llvm.exported import Artifact as LLVMArtifact
from ..llvm.exported import optimize as _optimize
from . import tools
from .render import executable

Gemm = tuple[str, np.dtype, int, int, int, int]  # name, dtype, batch, m, n, k
STATUS_BYTES = 16  # the status words: failure code, offending value (byte 8)


class Artifact(LLVMArtifact):
    MAGIC = b"YOTAMLR1"
    KIND = "Yota MLIR object"


class MLIRExecutable(LLVMExecutable):
    """A function compiled by the ``mlir`` backend: called as an llvm executable.
    ``mlir`` holds the executable module's text (when compiled in this process)."""

    backend = "mlir"
    mlir: str | None = None
    packs = False  # the MLIR module's entry takes its arguments one by one

    def __repr__(self) -> str:
        return f"<MLIRExecutable @{self.name}: {len(self._in)} inputs, {len(self._out)} outputs>"


_bound: list[str] = []


def bind_runtime() -> None:
    """Make MLIR's runtime helpers (``memrefCopy``) resolvable by the JIT (once)."""
    if _bound:
        return
    bind_callback()  # yota_callback: opaque primitives' calls out to Python
    lib = tools.runtime_library()
    if lib is not None:
        llvm.load_library_permanently(lib)
    _bound.append(lib or "")


def check_symbols(mod: llvm.ModuleRef) -> None:
    """Every function the module declares resolves in this process (libm, libc, MLIR's
    runtime helpers): an unresolved one would crash the call, so it is an error here."""
    bind_runtime()
    missing = [f.name for f in mod.functions if f.is_declaration
               and not f.name.startswith("llvm.") and not llvm.address_of_symbol(f.name)]
    if missing:
        raise YotaError(f"the MLIR-lowered code calls {', '.join(missing)}, which this "
                        "process does not provide (MLIR's libmlir_c_runner_utils, from the "
                        "libmlir-22 package, provides memrefCopy)")


def llvm_module(fn: Function, text: str, gemms: Sequence[Gemm] = (),
                natives: Any = None) -> llvm.ModuleRef:
    """The LLVM IR of the executable module ``text`` with the array entry, the GEMM
    calls' definitions and the LAPACK-level ops' functions (``natives``, a
    ``linalg.NativeOps``) linked in."""
    init()
    target = host()
    mod = llvm.parse_assembly(tools.translate(tools.lower(text)))
    wrapper = lir.Module(name="yota.mlir.entry")
    wrapper.triple = target.triple
    nptr = len(fn.inputs) + len(fn.outputs) + 1
    entry = lir.Function(wrapper, lir.FunctionType(I32, [PTR] * nptr), ENTRY)
    array_entry(SimpleNamespace(module=wrapper), fn, entry, False)  # type: ignore[arg-type]
    for g in gemms:
        _gemm(wrapper, *g)
    _allocator(wrapper)
    mod.triple = target.triple
    mod.link_in(llvm.parse_assembly(str(wrapper)))
    linalg = list(natives.names) if natives is not None else []
    if linalg:
        mod.link_in(llvm.parse_assembly(str(natives.module)))
    for name in [g[0] for g in gemms] + [ALLOC, FREE] + linalg:  # defined: module-private
        mod.get_function(name).linkage = "internal"
    check_symbols(mod)
    return mod


def optimize(text: str, target: Any, level: int) -> llvm.ModuleRef:
    """LLVM's pipeline at ``level`` on the translated module: as the llvm backend's, but
    with LLVM's loop vectorizer on (MLIR's loops are scalar; the llvm backend's kernels
    are vectorized as they are generated)."""
    return _optimize(text, target, level, loop_vectorize=True)


ALLOC, FREE = "_mlir_memref_to_llvm_alloc", "_mlir_memref_to_llvm_free"
CACHE_SLOTS = 8  # large buffers kept for the next call, per compiled module
CACHE_MIN = 1 << 20  # bytes: smaller buffers go straight back to malloc
HEADER = 16  # bytes before each buffer: its capacity


def _allocator(module: lir.Module) -> None:
    """The module's buffer allocation (``finalize-memref-to-llvm{use-generic-functions}``
    calls these): malloc, except that buffers of a MiB or more are kept in a few slots
    (taken and returned with atomic exchanges, so concurrent calls are safe) and handed
    out again, as the llvm backend's workspace is reused: fresh large blocks cost page
    faults on every call."""
    malloc = declare(module, "malloc", PTR, [I64])
    free = declare(module, "free", lir.VoidType(), [PTR])
    slots = lir.GlobalVariable(module, lir.ArrayType(PTR, CACHE_SLOTS), "yota.mlir.cache")
    slots.linkage = "internal"
    slots.initializer = lir.Constant(lir.ArrayType(PTR, CACHE_SLOTS), None)
    null = lir.Constant(PTR, None)

    f = lir.Function(module, lir.FunctionType(PTR, [I64]), ALLOC)
    b = lir.IRBuilder(f.append_basic_block("entry"))
    size = f.args[0]
    fresh = f.append_basic_block("fresh")
    big = b.icmp_unsigned(">=", size, i64(CACHE_MIN))
    nxt = f.append_basic_block("slot0")
    b.cbranch(big, nxt, fresh)
    for k in range(CACHE_SLOTS):
        b.position_at_end(nxt)
        slot = b.gep(slots, [lir.Constant(I32, 0), lir.Constant(I32, k)], inbounds=True)
        got = b.atomic_rmw("xchg", slot, null, "acq_rel")
        nxt = f.append_basic_block(f"slot{k + 1}") if k + 1 < CACHE_SLOTS else fresh
        have = f.append_basic_block(f"have{k}")
        b.cbranch(b.icmp_unsigned("!=", got, null), have, nxt)
        b.position_at_end(have)
        cap = b.load(got, typ=I64)
        fits = b.and_(b.icmp_unsigned(">=", cap, size),
                      b.icmp_unsigned("<=", cap, b.mul(size, i64(2))))
        use, back = f.append_basic_block(f"use{k}"), f.append_basic_block(f"back{k}")
        b.cbranch(fits, use, back)
        b.position_at_end(use)
        b.ret(b.gep(got, [i64(HEADER)], source_etype=lir.IntType(8)))
        b.position_at_end(back)  # not this size: free it, look further
        b.call(free, [got])
        b.branch(nxt)
    b.position_at_end(fresh)
    blk = b.call(malloc, [b.add(size, i64(HEADER))])
    ok, bad = f.append_basic_block("ok"), f.append_basic_block("null")
    b.cbranch(b.icmp_unsigned("!=", blk, null), ok, bad)
    b.position_at_end(bad)
    b.ret(null)
    b.position_at_end(ok)
    b.store(size, blk)
    b.ret(b.gep(blk, [i64(HEADER)], source_etype=lir.IntType(8)))

    g = lir.Function(module, lir.FunctionType(lir.VoidType(), [PTR]), FREE)
    b = lir.IRBuilder(g.append_basic_block("entry"))
    p = g.args[0]
    done, release = g.append_basic_block("done"), g.append_basic_block("release")
    body = g.append_basic_block("body")
    b.cbranch(b.icmp_unsigned("==", p, null), done, body)
    b.position_at_end(body)
    blk = b.gep(p, [i64(-HEADER)], source_etype=lir.IntType(8))
    keep = b.icmp_unsigned(">=", b.load(blk, typ=I64), i64(CACHE_MIN))
    nxt = g.append_basic_block("put0")
    b.cbranch(keep, nxt, release)
    for k in range(CACHE_SLOTS):
        b.position_at_end(nxt)
        slot = b.gep(slots, [lir.Constant(I32, 0), lir.Constant(I32, k)], inbounds=True)
        res = b.cmpxchg(slot, null, blk, "acq_rel", "monotonic")
        nxt = g.append_basic_block(f"put{k + 1}") if k + 1 < CACHE_SLOTS else release
        b.cbranch(b.extract_value(res, 1), done, nxt)
    b.position_at_end(release)
    b.call(free, [blk])
    b.branch(done)
    b.position_at_end(done)
    b.ret_void()


def _gemm(module: lir.Module, name: str, dt: np.dtype, batch: int, m: int, n: int,
          k: int) -> None:
    """``void NAME(A, B, C)``: C = A @ B for each of ``batch`` contiguous row-major
    matrices, by the llvm backend's ``yota_sgemm``/``yota_dgemm`` (bound by its target)."""
    ft = reg_type(dt)
    gemm = declare(module, "yota_sgemm" if dt.itemsize == 4 else "yota_dgemm", lir.VoidType(),
                   [I32, I32, I32, I64, I64, I64, ft, PTR, I64, PTR, I64, ft, PTR, I64])
    f = lir.Function(module, lir.FunctionType(lir.VoidType(), [PTR] * 3), name)
    b = lir.IRBuilder(f.append_basic_block("entry"))
    a, bm, c = f.args
    c32 = lambda v: lir.Constant(I32, v)  # noqa: E731

    def one(i: lir.Value, _: list[lir.Value]) -> list[lir.Value]:
        pa = b.gep(a, [b.mul(i, i64(m * k))], source_etype=ft)
        pb = b.gep(bm, [b.mul(i, i64(k * n))], source_etype=ft)
        pc = b.gep(c, [b.mul(i, i64(m * n))], source_etype=ft)
        b.call(gemm, [c32(101), c32(111), c32(111), i64(m), i64(n), i64(k),
                      lir.Constant(ft, 1.0), pa, i64(max(1, k)), pb, i64(max(1, n)),
                      lir.Constant(ft, 0.0), pc, i64(max(1, n))])
        return []
    loop(b, 0, batch, 1, [], one, name="batch")
    b.ret_void()


_LIBM = re.compile(r"^declare (double|float) @(\w+)\(((?:double|float)(?:, (?:double|float))*)\)"
                   r"(.*)$", re.M)
MVEC_LANES = {"e": 16, "d": 8, "b": 4}  # float32 lanes per ISA (float64: half)


def vector_variants(ll: str, target: Any) -> str:
    """Tell LLVM's loop vectorizer where glibc's libmvec has vector versions of the libm
    functions the module calls (``vector-function-abi-variant``, as clang's
    ``-fveclib=libmvec`` does), so loops over ``tanh``/``exp``... are vectorized with
    the same vector math as the llvm backend's kernels."""
    decls, used = [], []

    def one(m: re.Match[str]) -> str:
        ty, name, params, rest = m.group(1), m.group(2), m.group(3), m.group(4)
        arity = params.count(",") + 1
        variants = []
        for isa in target.mvec_isas:
            lanes = MVEC_LANES[isa] // (1 if ty == "float" else 2)
            sym = f"_ZGV{isa}N{lanes}{'v' * arity}_{name}"
            if mvec_has(sym):
                vt = f"<{lanes} x {ty}>"
                variants.append(f"_ZGV_LLVM_N{lanes}{'v' * arity}_{name}({sym})")
                decls.append(f"declare {vt} @{sym}({', '.join([vt] * arity)})")
                used.append(f"ptr @{sym}")
        if not variants:
            return m.group(0)
        return (f"declare {ty} @{name}({params}){rest} "
                f"\"vector-function-abi-variant\"=\"{','.join(variants)}\"")
    out = _LIBM.sub(one, ll)
    if used and "@llvm.compiler.used" not in out:
        out += "\n" + "\n".join(decls) + (
            f"\n@llvm.compiler.used = appending global [{len(used)} x ptr] "
            f"[{', '.join(used)}], section \"llvm.metadata\"\n")
    return out


def build(fn: Function, target_key: dict[str, Any], opt_level: int) -> MLIRExecutable:
    target = host()
    text, ctx = executable(fn, blas=target.blas)
    failures = ctx.failures
    ll = vector_variants(str(llvm_module(fn, text, ctx.gemms, ctx.natives)), target)
    mod = optimize(ll, target, opt_level)
    obj = emit_object(mod, target)
    meta = LLVMArtifact.describe(fn, STATUS_BYTES, failures, target_key)
    art = Artifact(obj, meta)
    exe = MLIRExecutable(art, load_object(obj, target, [ENTRY, ENTRY_OBJ]), target, fn, ll,
                         str(mod))
    exe.mlir = text
    return exe


def load_code(art: Artifact) -> MLIRExecutable:
    target = host()
    bind_runtime()
    return MLIRExecutable(art, load_object(art.object_code, target, [ENTRY, ENTRY_OBJ]),
                          target)
