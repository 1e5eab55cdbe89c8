"""A process-wide pool of helper threads for splitting large kernels, itself generated
with llvmlite and compiled once per process (never unloaded).

Generated code calls it by name:

    void yota_parallel(void (*chunks)(ptr ctx, i64 slot), ptr ctx, i64 nslots)

``chunks`` claims pieces of work from ``ctx`` until none is left; ``yota_parallel``
runs it as slot 0 on the calling thread and lets up to ``nslots - 1`` helpers join as
slots 1, 2, ... It returns once every helper that joined has left ``chunks``: after
that no helper touches ``ctx`` or the caller's module (which may then be unloaded), and
a helper that wakes up late finds the job closed. Helpers are created on first need and
then sleep on a condition variable, so a split kernel costs no thread creation. One job
runs at a time; a caller that finds the pool busy runs its chunks alone. A fork()ed
child has no helpers: its jobs simply run on the calling thread.
"""

from __future__ import annotations

import threading

import llvmlite.binding as llvm
import llvmlite.ir as ir

from .jit import optimize
from .target import host
from .types import I8, I32, I64, PTR, VOID, i64

SYMBOL = "yota_parallel"
_lock = threading.Lock()
_engine: llvm.ExecutionEngine | None = None

# job fields, i64 words of the global @yota_pool_job
GEN, FN, CTX, OPEN, ACTIVE, NEXT, NSLOTS, HELPERS = range(8)


def ensure_pool() -> None:
    """Compile the pool once and bind ``yota_parallel`` for the JIT's linker."""
    global _engine
    if _engine is not None:
        return
    with _lock:
        if _engine is None:
            target = host()
            mod = optimize(str(_module(target.triple)), target)
            engine = llvm.create_mcjit_compiler(mod, target.machine())
            engine.finalize_object()
            llvm.add_symbol(SYMBOL, engine.get_function_address(SYMBOL))
            _engine = engine


def _module(triple: str) -> ir.Module:
    m = ir.Module(name="yota_pool")
    m.triple = triple
    g = _Globals(m)
    helper = _helper(m, g)
    _parallel(m, g, helper)
    return m


class _Globals:
    def __init__(self, m: ir.Module) -> None:
        def blob(name: str, n: int) -> ir.GlobalVariable:
            v = ir.GlobalVariable(m, ir.ArrayType(I8, n), name)
            v.initializer = ir.Constant(ir.ArrayType(I8, n), None)  # glibc's *_INITIALIZER
            v.align = 64
            v.linkage = "internal"
            return v
        self.mutex, self.wake, self.done, self.joblock = (
            blob(n, 64) for n in ("yota_pool_mutex", "yota_pool_wake", "yota_pool_done",
                                  "yota_pool_joblock"))
        self.job = ir.GlobalVariable(m, ir.ArrayType(I64, 8), "yota_pool_job")
        self.job.initializer = ir.Constant(ir.ArrayType(I64, 8), None)
        self.job.linkage = "internal"
        d = lambda n, r, a: _declare(m, n, r, a)  # noqa: E731
        self.lock = d("pthread_mutex_lock", I32, [PTR])
        self.trylock = d("pthread_mutex_trylock", I32, [PTR])
        self.unlock = d("pthread_mutex_unlock", I32, [PTR])
        self.wait = d("pthread_cond_wait", I32, [PTR, PTR])
        self.broadcast = d("pthread_cond_broadcast", I32, [PTR])
        self.create = d("pthread_create", I32, [PTR, PTR, PTR, PTR])
        self.detach = d("pthread_detach", I32, [I64])

    def field(self, b: ir.IRBuilder, k: int) -> ir.Value:
        return b.gep(self.job, [i64(0), i64(k)], inbounds=True)

    def get(self, b: ir.IRBuilder, k: int) -> ir.Value:
        return b.load(self.field(b, k), typ=I64)

    def set(self, b: ir.IRBuilder, k: int, v: ir.Value) -> None:
        b.store(v, self.field(b, k))


def _declare(m: ir.Module, name: str, ret: ir.Type, args: list[ir.Type]) -> ir.Function:
    return ir.Function(m, ir.FunctionType(ret, args), name)


CHUNKS_TYPE = ir.FunctionType(VOID, [PTR, I64])


def _helper(m: ir.Module, g: _Globals) -> ir.Function:
    """Sleep until a new job is posted; join it if a slot is free; repeat forever."""
    f = ir.Function(m, ir.FunctionType(PTR, [PTR]), "yota_pool_helper")
    f.linkage = "internal"
    b = ir.IRBuilder(f.append_basic_block("entry"))
    seen = b.alloca(I64)
    b.store(i64(0), seen)
    b.call(g.lock, [g.mutex])
    top = f.append_basic_block("sleep")
    b.branch(top)
    b.position_at_end(top)
    wait = f.append_basic_block("wait")
    woke = f.append_basic_block("woke")
    b.cbranch(b.icmp_unsigned("==", g.get(b, GEN), b.load(seen, typ=I64)), wait, woke)
    b.position_at_end(wait)
    b.call(g.wait, [g.wake, g.mutex])
    b.branch(top)
    b.position_at_end(woke)
    b.store(g.get(b, GEN), seen)
    can = b.and_(b.icmp_unsigned("!=", g.get(b, OPEN), i64(0)),
                 b.icmp_signed("<", g.get(b, NEXT), g.get(b, NSLOTS)))
    with b.if_then(can):
        slot = g.get(b, NEXT)
        g.set(b, NEXT, b.add(slot, i64(1)))
        g.set(b, ACTIVE, b.add(g.get(b, ACTIVE), i64(1)))
        fn = b.inttoptr(g.get(b, FN), PTR)
        ctx = b.inttoptr(g.get(b, CTX), PTR)
        b.call(g.unlock, [g.mutex])
        b.call(_FnPtr(fn), [ctx, slot])
        b.call(g.lock, [g.mutex])
        left = b.sub(g.get(b, ACTIVE), i64(1))
        g.set(b, ACTIVE, left)
        with b.if_then(b.icmp_signed("==", left, i64(0))):
            b.call(g.broadcast, [g.done])
    b.branch(top)
    return f


class _FnPtr(ir.Value):
    """An opaque pointer called as ``void (ptr, i64)`` (llvmlite's ``call`` wants to
    see a function type on its callee)."""

    def __init__(self, ptr: ir.Value) -> None:
        self.ptr = ptr
        self.type = ir.PointerType(CHUNKS_TYPE)
        self.function_type = CHUNKS_TYPE

    def get_reference(self) -> str:
        return self.ptr.get_reference()

    def __str__(self) -> str:
        return f"ptr {self.get_reference()}"


def _parallel(m: ir.Module, g: _Globals, helper: ir.Function) -> None:
    f = ir.Function(m, ir.FunctionType(VOID, [PTR, PTR, I64]), SYMBOL)
    fn, ctx, nslots = f.args
    b = ir.IRBuilder(f.append_basic_block("entry"))
    tid = b.alloca(I64)
    alone = f.append_basic_block("alone")
    shared = f.append_basic_block("shared")
    b.cbranch(b.icmp_signed("!=", b.call(g.trylock, [g.joblock]), ir.Constant(I32, 0)),
              alone, shared)
    b.position_at_end(alone)  # another job holds the pool: run every chunk here
    b.call(_FnPtr(fn), [ctx, i64(0)])
    b.ret_void()

    b.position_at_end(shared)
    b.call(g.lock, [g.mutex])
    spawn = f.append_basic_block("spawn")
    post = f.append_basic_block("post")
    b.branch(spawn)
    b.position_at_end(spawn)  # create helpers until there are nslots - 1
    need = b.icmp_signed("<", b.add(g.get(b, HELPERS), i64(1)), nslots)
    make = f.append_basic_block("make")
    b.cbranch(need, make, post)
    b.position_at_end(make)
    rc = b.call(g.create, [tid, ir.Constant(PTR, None), helper, ir.Constant(PTR, None)])
    made = f.append_basic_block("made")
    b.cbranch(b.icmp_signed("==", rc, ir.Constant(I32, 0)), made, post)
    b.position_at_end(made)
    b.call(g.detach, [b.load(tid, typ=I64)])
    g.set(b, HELPERS, b.add(g.get(b, HELPERS), i64(1)))
    b.branch(spawn)

    b.position_at_end(post)
    g.set(b, GEN, b.add(g.get(b, GEN), i64(1)))
    g.set(b, FN, b.ptrtoint(fn, I64))
    g.set(b, CTX, b.ptrtoint(ctx, I64))
    g.set(b, OPEN, i64(1))
    g.set(b, ACTIVE, i64(0))
    g.set(b, NEXT, i64(1))
    g.set(b, NSLOTS, nslots)
    b.call(g.broadcast, [g.wake])
    b.call(g.unlock, [g.mutex])
    b.call(_FnPtr(fn), [ctx, i64(0)])
    b.call(g.lock, [g.mutex])
    g.set(b, OPEN, i64(0))
    top = f.append_basic_block("drain")
    wait = f.append_basic_block("drain.wait")
    end = f.append_basic_block("drain.end")
    b.branch(top)
    b.position_at_end(top)
    b.cbranch(b.icmp_signed(">", g.get(b, ACTIVE), i64(0)), wait, end)
    b.position_at_end(wait)
    b.call(g.wait, [g.done, g.mutex])
    b.branch(top)
    b.position_at_end(end)
    b.call(g.unlock, [g.mutex])
    b.call(g.unlock, [g.joblock])
    b.ret_void()
