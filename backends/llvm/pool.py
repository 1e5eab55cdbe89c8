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

When BLAS is bound, the module also holds the tiled GEMMs (``yota_sgemm_tiles``,
``yota_dgemm_tiles``): the CBLAS arguments of a row-major ``C = op(A) op(B)`` plus a batch
(count and element strides of A, B, C), ``axis`` (0: split the rows of C, 1: its
columns), ``step`` (rows or columns per tile) and ``nslots``. Tiles are claimed one at a time by the caller and the helpers, each a
single-threaded ``yota_sgemm``/``yota_dgemm`` call on its block (Yota's own BLAS
instance, ``blas.py``), so a helper that the OS deschedules delays at most its one tile
while the caller takes the rest. Without Yota's own instance (the names are bound to
NumPy's multithreaded OpenBLAS) the tiled GEMM makes one call on the whole product.
"""

from __future__ import annotations

import threading

import llvmlite.binding as llvm
import llvmlite.ir as ir

from .blas import single_threaded
from .jit import cached_object, load_object
from .target import host
from .types import F32, F64, I8, I32, I64, PTR, VOID, i64

SYMBOL = "yota_parallel"
GEMM_TILES = {"float32": "yota_sgemm_tiles", "float64": "yota_dgemm_tiles"}
_GEMMS = {"float32": ("yota_sgemm", F32, 4), "float64": ("yota_dgemm", F64, 8)}
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
            tiles = target.blas and target.threads > 1 and single_threaded()
            names = [SYMBOL, *(GEMM_TILES.values() if target.blas else ())]
            # compiled once, then loaded from the object cache (jit.cached_object)
            obj = cached_object(str(_module(target.triple, target.blas, tiles)), target)
            loaded = load_object(obj, target, names)
            for name in names:
                llvm.add_symbol(name, loaded.addresses[name])
            _engine = loaded.engine


def _module(triple: str, blas: bool = False, tiles: bool = False) -> ir.Module:
    """The pool; with ``blas``, the tiled GEMMs too (split only when ``tiles``)."""
    m = ir.Module(name="yota_pool")
    m.triple = triple
    g = _Globals(m)
    helper = _helper(m, g)
    par = _parallel(m, g, helper)
    if blas:
        for dt in GEMM_TILES:
            _gemm_tiles(m, dt, par if tiles else None)
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


def _parallel(m: ir.Module, g: _Globals, helper: ir.Function) -> ir.Function:
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
    return f


# -- tiled GEMMs ------------------------------------------------------------------------------
# The context of a tiled GEMM, i64 words on the caller's stack: the next tile to claim, the
# number of tiles, tiles per matrix, the extent being split, the tile size, the axis; the
# CBLAS arguments (alpha and beta as their bits); the batch strides (elements) of A, B, C.
(T_NEXT, T_TOTAL, T_PER, T_DIM, T_STEP, T_AXIS, T_TA, T_TB, T_M, T_N, T_K, T_ALPHA, T_A,
 T_LDA, T_B, T_LDB, T_BETA, T_C, T_LDC, T_SA, T_SB, T_SC) = range(22)
CBLAS_ROW_MAJOR, CBLAS_NO_TRANS = 101, 111
TILE_EXTRA = 7  # nbatch, stride_a, stride_b, stride_c, axis, step, nslots


def _gemm_args(ft: ir.Type) -> list[ir.Type]:
    return [I32, I32, I32, I64, I64, I64, ft, PTR, I64, PTR, I64, ft, PTR, I64]


def _gemm_tiles(m: ir.Module, dtype: str, par: ir.Function | None) -> None:
    """``yota_<s|d>gemm_tiles(cblas args..., nbatch, stride_a, stride_b, stride_c, axis,
    step, nslots)``: ``nbatch`` products, the i-th on A + i*stride_a, B + i*stride_b,
    C + i*stride_c (elements), each split into tiles of ``step`` rows (axis 0) or columns
    (axis 1) of C."""
    name, ft, size = _GEMMS[dtype]
    gemm = _declare(m, name, VOID, _gemm_args(ft))
    f = ir.Function(m, ir.FunctionType(VOID, _gemm_args(ft) + [I64] * TILE_EXTRA),
                    GEMM_TILES[dtype])
    args = list(f.args)
    nb, sa, sb, sc, axis, step, nslots = args[14:]
    b = ir.IRBuilder(f.append_basic_block("entry"))
    ctx = b.alloca(I64, 22)
    word = lambda k: b.gep(ctx, [i64(k)], source_etype=I64)  # noqa: E731
    dim = b.select(b.icmp_signed("==", axis, i64(0)), args[3], args[4])
    if par is None:  # NumPy's multithreaded BLAS: whole matrices, one call each
        step = dim
    per = b.sdiv(b.add(dim, b.sub(step, i64(1))), step)
    for k, v in ((T_NEXT, i64(0)), (T_TOTAL, b.mul(per, nb)), (T_PER, per), (T_DIM, dim),
                 (T_STEP, step), (T_AXIS, axis), (T_TA, b.sext(args[1], I64)),
                 (T_TB, b.sext(args[2], I64)), (T_M, args[3]), (T_N, args[4]), (T_K, args[5]),
                 (T_LDA, args[8]), (T_LDB, args[10]), (T_LDC, args[13]), (T_SA, sa),
                 (T_SB, sb), (T_SC, sc), (T_ALPHA, _bits(b, args[6])),
                 (T_BETA, _bits(b, args[11]))):
        b.store(v, word(k))
    for k, v in ((T_A, args[7]), (T_B, args[9]), (T_C, args[12])):
        b.store(b.ptrtoint(v, I64), word(k))
    chunks = _tile_chunks(m, gemm, ft, size, dtype)
    if par is None:  # NumPy's multithreaded BLAS: every tile on this thread, in order
        b.call(chunks, [ctx, i64(0)])
    else:
        b.call(par, [chunks, ctx, nslots])
    b.ret_void()


def _bits(b: ir.IRBuilder, x: ir.Value) -> ir.Value:
    """A float as an i64 word (its bits, zero-extended)."""
    if x.type == F64:
        return b.bitcast(x, I64)
    return b.zext(b.bitcast(x, I32), I64)


def _float(b: ir.IRBuilder, w: ir.Value, ft: ir.Type) -> ir.Value:
    return b.bitcast(w, F64) if ft == F64 else b.bitcast(b.trunc(w, I32), F32)


def _tile_chunks(m: ir.Module, gemm: ir.Function, ft: ir.Type, size: int,
                 dtype: str) -> ir.Function:
    """``chunks(ctx, slot)``: claim tiles until none is left, one GEMM call each."""
    f = ir.Function(m, CHUNKS_TYPE, f"yota_gemm_tiles.{dtype}")
    f.linkage = "internal"
    ctx = f.args[0]
    b = ir.IRBuilder(f.append_basic_block("entry"))
    word = lambda k: b.gep(ctx, [i64(k)], source_etype=I64)  # noqa: E731
    get = lambda k: b.load(word(k), typ=I64)  # noqa: E731
    top = f.append_basic_block("claim")
    body = f.append_basic_block("tile")
    done = f.append_basic_block("done")
    b.branch(top)
    b.position_at_end(top)
    t = b.atomic_rmw("add", word(T_NEXT), i64(1), "monotonic")
    b.cbranch(b.icmp_signed("<", t, get(T_TOTAL)), body, done)
    b.position_at_end(body)
    per, step, dim = get(T_PER), get(T_STEP), get(T_DIM)
    bi = b.sdiv(t, per)
    lo = b.mul(b.srem(t, per), step)
    rest = b.sub(dim, lo)
    n = b.select(b.icmp_signed("<", rest, step), rest, step)
    rows = b.icmp_signed("==", get(T_AXIS), i64(0))

    def at(k: int, elems: ir.Value) -> ir.Value:
        return b.gep(b.inttoptr(get(k), PTR), [b.mul(elems, i64(size))], source_etype=I8)

    # rows of C: A's rows (A + lo*lda, or A + lo when A is stored transposed) and C's;
    # columns of C: B's columns (B + lo, or B + lo*ldb when transposed) and C's.
    notrans_a = b.icmp_signed("==", get(T_TA), i64(CBLAS_NO_TRANS))
    notrans_b = b.icmp_signed("==", get(T_TB), i64(CBLAS_NO_TRANS))
    a_off = b.select(rows, b.select(notrans_a, b.mul(lo, get(T_LDA)), lo), i64(0))
    b_off = b.select(rows, i64(0), b.select(notrans_b, lo, b.mul(lo, get(T_LDB))))
    c_off = b.select(rows, b.mul(lo, get(T_LDC)), lo)
    pa = at(T_A, b.add(a_off, b.mul(bi, get(T_SA))))
    pb = at(T_B, b.add(b_off, b.mul(bi, get(T_SB))))
    pc = at(T_C, b.add(c_off, b.mul(bi, get(T_SC))))
    mm = b.select(rows, n, get(T_M))
    nn = b.select(rows, get(T_N), n)
    c32 = lambda k: b.trunc(get(k), I32)  # noqa: E731
    b.call(gemm, [ir.Constant(I32, CBLAS_ROW_MAJOR), c32(T_TA), c32(T_TB), mm, nn, get(T_K),
                  _float(b, get(T_ALPHA), ft), pa, get(T_LDA), pb, get(T_LDB),
                  _float(b, get(T_BETA), ft), pc, get(T_LDC)])
    b.branch(top)
    b.position_at_end(done)
    b.ret_void()
    return f
