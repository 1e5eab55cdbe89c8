"""The LLVM IR of Yota's fork-join pool (``pool.py`` says what it does; this module only
builds it). Imported only when the pool's object code is compiled, never by a process
that reads it from the object cache.

Shared state: i64 words of ``@yota_pool_state``, each on its own cache line. The two
futex words (``GEN``, ``ACTIVE``) are used as 32-bit integers (the low half of their
word on these little-endian targets) by every access, atomic and futex alike."""

from __future__ import annotations

from collections.abc import Callable

import llvmlite.ir as ir

from ..abi import GEMM_TILES, POOL_RESET, POOL_STATS, POOL_SYMBOL, POOL_THREADS, TILE_EXTRA
from ..types import F32, F64, I1, I8, I32, I64, PTR, VOID, declare, i64

(GEN, ACTIVE, OPEN, NEXT, FN, CTX, NSLOTS, BUSY, HELPERS, SLEEPERS, WAITING, CAP,
 N_JOBS, N_ALONE, N_JOINED) = range(15)
STATS = (N_JOBS, N_ALONE, N_JOINED, HELPERS)  # what yota_pool_stats copies out, in order
LINE = 8  # i64 words per cache line
IDLE_SPIN_NS = 1_000_000  # a helper watches for the next job this long, then sleeps
WAIT_SPIN_NS = 100_000  # a caller whose chunks are done watches for its helpers this long
FUTEX = {"x86_64": 202, "aarch64": 98}  # SYS_futex: the architectures the pool runs on
FUTEX_WAIT, FUTEX_WAKE = 128, 129  # FUTEX_WAIT_PRIVATE, FUTEX_WAKE_PRIVATE
HELPER_NAME = b"yota-pool\0"
CHUNKS_TYPE = ir.FunctionType(VOID, [PTR, I64])
Ready = Callable[[ir.IRBuilder], ir.Value]  # a condition, built where it is tested


def supported(triple: str) -> bool:
    """Whether the pool starts helper threads on ``triple`` (Linux on x86-64 and
    AArch64, the platforms it is tested on); elsewhere every job runs on its caller."""
    return "-linux" in triple and triple.split("-")[0] in FUTEX


def module(triple: str, blas: bool = False, tiles: bool = False) -> ir.Module:
    """The pool; with ``blas``, the tiled GEMMs too (split over the pool only when
    ``tiles``: BLAS is Yota's own single-threaded instance)."""
    m = ir.Module(name="yota_pool")
    m.triple = triple
    g = _State(m)
    par = _parallel(m, g, _helper(m, g) if g.threads else None)
    _small_exports(m, g)
    if blas:
        for dtype in GEMM_TILES:
            _gemm_tiles(m, g, dtype, par if tiles else None)
    return m


class _State:
    """The state words and the C library functions the pool calls."""

    def __init__(self, m: ir.Module) -> None:
        n = 15 * LINE
        self.words = ir.GlobalVariable(m, ir.ArrayType(I64, n), "yota_pool_state")
        self.words.initializer = ir.Constant(ir.ArrayType(I64, n), None)  # CAP 0: alone
        self.words.align = 64
        self.words.linkage = "internal"
        self.arch = m.triple.split("-")[0]
        self.threads = supported(m.triple)
        if self.threads:
            self.syscall = m.globals.get("syscall") or ir.Function(
                m, ir.FunctionType(I64, [I64], var_arg=True), "syscall")
            self.create = declare(m, "pthread_create", I32, [PTR, PTR, PTR, PTR])
            self.detach = declare(m, "pthread_detach", I32, [I64])
            self.self_ = declare(m, "pthread_self", I64, [])
            self.setname = declare(m, "pthread_setname_np", I32, [I64, PTR])
            self.clock = declare(m, "clock_gettime", I32, [I32, PTR])
            self.yield_ = declare(m, "sched_yield", I32, [])

    def at(self, b: ir.IRBuilder, k: int) -> ir.Value:
        """Word ``k``'s address (an i32 pointer for a futex word)."""
        p = b.gep(self.words, [i64(0), i64(k * LINE)], inbounds=True)
        return b.bitcast(p, ir.PointerType(I32)) if k in (GEN, ACTIVE) else p

    def get(self, b: ir.IRBuilder, k: int, order: str = "monotonic") -> ir.Value:
        """Word ``k`` (a futex word: its 32 bits, zero-extended)."""
        if k in (GEN, ACTIVE):
            return b.zext(b.load_atomic(self.at(b, k), order, 4, typ=I32), I64)
        return b.load_atomic(self.at(b, k), order, 8, typ=I64)

    def set(self, b: ir.IRBuilder, k: int, v: ir.Value, order: str = "monotonic") -> None:
        b.store_atomic(v, self.at(b, k), order, 8)

    def add(self, b: ir.IRBuilder, k: int, v: int, order: str = "seq_cst") -> ir.Value:
        """Atomically add ``v`` to word ``k``; its old value (i64)."""
        if k in (GEN, ACTIVE):
            return b.zext(b.atomic_rmw("add", self.at(b, k), ir.Constant(I32, v), order), I64)
        return b.atomic_rmw("add", self.at(b, k), i64(v), order)

    def futex(self, b: ir.IRBuilder, k: int, op: int, val: ir.Value) -> None:
        """``futex(&word k, op, val, NULL)``: wait while the word holds ``val``, or
        wake up to ``val`` waiters."""
        b.call(self.syscall, [i64(FUTEX[self.arch]), self.at(b, k), i64(op), val, i64(0)])

    def now(self, b: ir.IRBuilder, ts: ir.Value) -> ir.Value:
        """CLOCK_MONOTONIC in nanoseconds (``ts``: two i64 words of scratch)."""
        b.call(self.clock, [ir.Constant(I32, 1), ts])
        sec = b.load(b.gep(ts, [i64(0)], source_etype=I64), typ=I64)
        nsec = b.load(b.gep(ts, [i64(1)], source_etype=I64), typ=I64)
        return b.add(b.mul(sec, i64(1_000_000_000)), nsec)

    def pause(self, b: ir.IRBuilder) -> None:
        """The CPU's spin-wait hint (x86 ``pause``, AArch64 ``yield``)."""
        if self.arch == "x86_64":
            b.call(declare(b.module, "llvm.x86.sse2.pause", VOID, []), [])
        else:
            b.call(declare(b.module, "llvm.aarch64.hint", VOID, [I32]), [ir.Constant(I32, 1)])


def _call_chunks(b: ir.IRBuilder, fn: ir.Value, ctx: ir.Value, slot: ir.Value) -> None:
    """``fn(ctx, slot)`` through an opaque pointer."""
    b.call(_FnPtr(fn), [ctx, slot])


class _FnPtr(ir.Value):
    """An opaque pointer called as ``void (ptr, i64)`` (llvmlite's ``call`` wants to see
    a function type on its callee)."""

    def __init__(self, ptr: ir.Value) -> None:
        self.ptr, self.type, self.function_type = ptr, ir.PointerType(CHUNKS_TYPE), CHUNKS_TYPE

    def get_reference(self) -> str:
        return self.ptr.get_reference()

    def __str__(self) -> str:
        return f"ptr {self.get_reference()}"


def _spin(b: ir.IRBuilder, g: _State, ts: ir.Value, ready: Ready, hit: ir.Block,
          miss: ir.Block, ns: int, tag: str) -> None:
    """Spin with the pause hint until ``ready(b)`` (to ``hit``) or ``ns`` passed (to
    ``miss``); every 64 rounds the clock is read (``ts``: scratch for it) and the core
    offered to another thread (``sched_yield``), so one waiting for this core runs."""
    f = b.function
    start = g.now(b, ts)
    entry, top, body, clock = b.block, *(f.append_basic_block(f"{tag}.{n}")
                                          for n in ("spin", "pause", "clock"))
    b.branch(top)
    b.position_at_end(top)
    i = b.phi(I64)
    i.add_incoming(i64(0), entry)
    b.cbranch(ready(b), hit, body)
    b.position_at_end(body)
    g.pause(b)
    i2 = b.add(i, i64(1))
    i.add_incoming(i2, body)
    b.cbranch(b.icmp_unsigned("==", b.and_(i2, i64(63)), i64(0)), clock, top)
    b.position_at_end(clock)
    b.call(g.yield_, [])
    i.add_incoming(i2, clock)
    b.cbranch(b.icmp_signed(">", b.sub(g.now(b, ts), start), i64(ns)), miss, top)


def _sleep(b: ir.IRBuilder, g: _State, word: int, count: int, ready: Ready,
           tag: str) -> None:
    """Sleep on futex ``word`` until ``ready(b)``, counted in word ``count`` meanwhile
    (whoever makes ``ready`` true changes ``word``, then reads ``count`` and wakes the
    sleepers if it is not 0: seq_cst both sides, so one of the two sees the other)."""
    f = b.function
    g.add(b, count, 1)
    check, wait, up = (f.append_basic_block(f"{tag}.{n}") for n in ("check", "wait", "up"))
    b.branch(check)
    b.position_at_end(check)
    seen = g.get(b, word, "seq_cst")
    b.cbranch(ready(b), up, wait)
    b.position_at_end(wait)
    g.futex(b, word, FUTEX_WAIT, seen)  # (returns at once if the word moved on)
    b.branch(check)
    b.position_at_end(up)
    g.add(b, count, -1)


def _helper(m: ir.Module, g: _State) -> ir.Function:
    """``ptr helper(ptr gen)``, forever: wait for a job after generation ``gen`` (spin,
    then sleep on ``GEN``); count in (``ACTIVE``), join it if it is open and a slot is
    left, count out, waking the caller if it sleeps on the last helper."""
    f = ir.Function(m, ir.FunctionType(PTR, [PTR]), "yota_pool_helper")
    f.linkage = "internal"
    b = ir.IRBuilder(f.append_basic_block("entry"))
    seen, ts = b.alloca(I64), b.alloca(I64, 2)
    name = ir.GlobalVariable(m, ir.ArrayType(I8, len(HELPER_NAME)), "yota_pool_name")
    name.initializer = ir.Constant(name.value_type, bytearray(HELPER_NAME))
    name.global_constant, name.linkage = True, "internal"
    b.call(g.setname, [b.call(g.self_, []), name])
    b.store(b.ptrtoint(f.args[0], I64), seen)
    top, sleep, woke = (f.append_basic_block(n) for n in ("idle", "sleep", "woke"))
    b.branch(top)
    b.position_at_end(top)
    new = lambda b: b.icmp_unsigned("!=", g.get(b, GEN, "seq_cst"),  # noqa: E731
                                    b.load(seen, typ=I64))
    _spin(b, g, ts, new, woke, sleep, IDLE_SPIN_NS, "idle")
    b.position_at_end(sleep)
    _sleep(b, g, GEN, SLEEPERS, new, "sleep")
    b.branch(woke)
    b.position_at_end(woke)
    b.store(g.get(b, GEN, "seq_cst"), seen)
    g.add(b, ACTIVE, 1)  # count in, then look: the caller closes, then counts
    with b.if_then(b.icmp_unsigned("!=", g.get(b, OPEN, "seq_cst"), i64(0))):
        slot = g.add(b, NEXT, 1)
        with b.if_then(b.icmp_signed("<", slot, g.get(b, NSLOTS))):
            ctx = b.inttoptr(g.get(b, CTX), PTR)
            _call_chunks(b, b.inttoptr(g.get(b, FN), PTR), ctx, slot)
    last = b.icmp_unsigned("==", g.add(b, ACTIVE, -1), i64(1))
    with b.if_then(b.and_(last, b.icmp_unsigned("!=", g.get(b, WAITING, "seq_cst"), i64(0)))):
        g.futex(b, ACTIVE, FUTEX_WAKE, i64(1))
    b.branch(top)
    return f


def _parallel(m: ir.Module, g: _State, helper: ir.Function | None) -> ir.Function:
    """``yota_parallel(chunks, ctx, nslots)``: ``chunks(ctx, 0)`` on this thread while up
    to ``min(nslots, CAP) - 1`` helpers join as slots 1, 2, ...; returns once every
    helper that joined has left. Alone if the pool is busy (another thread's job: one
    job at a time) or one thread is all it may use."""
    f = ir.Function(m, ir.FunctionType(VOID, [PTR, PTR, I64]), POOL_SYMBOL)
    fn, ctx, nslots = f.args
    b = ir.IRBuilder(f.append_basic_block("entry"))
    alone = f.append_basic_block("alone")
    if helper is None:
        b.branch(alone)
    else:
        ts, tid = b.alloca(I64, 2), b.alloca(I64)
        owned, shared = f.append_basic_block("owned"), f.append_basic_block("shared")
        cap = g.get(b, CAP)
        n = b.select(b.icmp_signed("<", nslots, cap), nslots, cap)
        with b.if_then(b.icmp_signed("<=", n, i64(1))):
            _call_chunks(b, fn, ctx, i64(0))
            b.ret_void()
        took = b.cmpxchg(g.at(b, BUSY), i64(0), i64(1), "acquire", "monotonic")
        b.cbranch(b.extract_value(took, 1), owned, alone)
        b.position_at_end(owned)
        _spawn(b, g, helper, b.sub(n, i64(1)), tid)
        has = b.icmp_signed(">", g.get(b, HELPERS), i64(0))
        with b.if_then(b.not_(has)):
            g.set(b, BUSY, i64(0), "release")
        b.cbranch(has, shared, alone)
        b.position_at_end(shared)
        _shared_job(b, g, ts, fn, ctx, n)
        b.ret_void()
    b.position_at_end(alone)
    if helper is not None:
        g.add(b, N_ALONE, 1, "monotonic")
    _call_chunks(b, fn, ctx, i64(0))
    b.ret_void()
    return f


def _shared_job(b: ir.IRBuilder, g: _State, ts: ir.Value, fn: ir.Value, ctx: ir.Value,
                n: ir.Value) -> None:
    """With the pool held (``BUSY``): post the job, wake sleeping helpers, run slot 0,
    close the job, wait until no helper is in it, let the pool go."""
    g.set(b, FN, b.ptrtoint(fn, I64))
    g.set(b, CTX, b.ptrtoint(ctx, I64))
    g.set(b, NSLOTS, n)
    g.set(b, NEXT, i64(1))
    g.set(b, OPEN, i64(1), "seq_cst")
    g.add(b, GEN, 1)  # GEN before SLEEPERS (the helpers: SLEEPERS before GEN)
    with b.if_then(b.icmp_signed(">", g.get(b, SLEEPERS, "seq_cst"), i64(0))):
        g.futex(b, GEN, FUTEX_WAKE, b.sub(n, i64(1)))
    _call_chunks(b, fn, ctx, i64(0))
    g.set(b, OPEN, i64(0), "seq_cst")
    f = b.function
    done, sleep = f.append_basic_block("drained"), f.append_basic_block("drain.sleep")
    idle = lambda b: b.icmp_unsigned("==", g.get(b, ACTIVE, "seq_cst"), i64(0))  # noqa: E731
    _spin(b, g, ts, idle, done, sleep, WAIT_SPIN_NS, "drain")
    b.position_at_end(sleep)
    _sleep(b, g, ACTIVE, WAITING, idle, "drain")
    b.branch(done)
    b.position_at_end(done)
    g.add(b, N_JOBS, 1, "monotonic")
    with b.if_then(b.icmp_signed(">", g.get(b, NEXT), i64(1))):
        g.add(b, N_JOINED, 1, "monotonic")
    g.set(b, BUSY, i64(0), "release")


def _spawn(b: ir.IRBuilder, g: _State, helper: ir.Function, want: ir.Value,
           tid: ir.Value) -> None:
    """Start helpers until there are ``want`` (the pool is held: no other thread starts
    any); each starts from the current generation, so it joins the job about to be
    posted. A failed ``pthread_create`` leaves fewer."""
    f = b.function
    top, make, made, out = (f.append_basic_block(f"spawn.{n}")
                            for n in ("top", "make", "made", "out"))
    b.branch(top)
    b.position_at_end(top)
    b.cbranch(b.icmp_signed("<", g.get(b, HELPERS), want), make, out)
    b.position_at_end(make)
    gen = b.inttoptr(g.get(b, GEN), PTR)
    rc = b.call(g.create, [tid, ir.Constant(PTR, None), helper, gen])
    b.cbranch(b.icmp_signed("==", rc, ir.Constant(I32, 0)), made, out)
    b.position_at_end(made)
    b.call(g.detach, [b.load(tid, typ=I64)])
    g.set(b, HELPERS, b.add(g.get(b, HELPERS), i64(1)))
    b.branch(top)
    b.position_at_end(out)


def _small_exports(m: ir.Module, g: _State) -> None:
    """``yota_pool_threads(n)`` (the most threads a job may use, this one included),
    ``yota_pool_reset()`` (in a fork()ed child: no helpers, the pool free, no job) and
    ``yota_pool_stats(i64 *out)`` (jobs shared, jobs run alone, jobs a helper joined,
    helpers started)."""
    f = ir.Function(m, ir.FunctionType(VOID, [I64]), POOL_THREADS)
    b = ir.IRBuilder(f.append_basic_block("entry"))
    g.set(b, CAP, f.args[0], "seq_cst")
    b.ret_void()
    f = ir.Function(m, ir.FunctionType(VOID, []), POOL_RESET)
    b = ir.IRBuilder(f.append_basic_block("entry"))
    for k in (HELPERS, BUSY, OPEN, SLEEPERS, WAITING, NEXT):
        g.set(b, k, i64(0))
    b.store_atomic(ir.Constant(I32, 0), g.at(b, ACTIVE), "seq_cst", 4)
    b.ret_void()
    f = ir.Function(m, ir.FunctionType(VOID, [PTR]), POOL_STATS)
    b = ir.IRBuilder(f.append_basic_block("entry"))
    for j, k in enumerate(STATS):
        b.store(g.get(b, k), b.gep(f.args[0], [i64(j)], source_etype=I64))
    b.ret_void()


# -- tiled GEMMs ----------------------------------------------------------------------------
# The context of a tiled GEMM, i64 words on the caller's stack: the next tile to claim, the
# number of tiles, tiles per matrix, the extent being split, the tile size, the axis; the
# CBLAS arguments (alpha and beta as their bits); the batch strides (elements) of A, B, C.
(T_NEXT, T_TOTAL, T_PER, T_DIM, T_STEP, T_AXIS, T_TA, T_TB, T_M, T_N, T_K, T_ALPHA, T_A,
 T_LDA, T_B, T_LDB, T_BETA, T_C, T_LDC, T_SA, T_SB, T_SC) = range(22)
CBLAS_ROW_MAJOR, CBLAS_NO_TRANS = 101, 111
_GEMMS = {"float32": ("yota_sgemm", F32, 4), "float64": ("yota_dgemm", F64, 8)}


def _gemm_args(ft: ir.Type) -> list[ir.Type]:
    return [I32, I32, I32, I64, I64, I64, ft, PTR, I64, PTR, I64, ft, PTR, I64]


def _gemm_tiles(m: ir.Module, g: _State, dtype: str, par: ir.Function | None) -> None:
    """``yota_<s|d>gemm_tiles(cblas args..., nbatch, stride_a, stride_b, stride_c, axis,
    step, nslots)``: ``nbatch`` products, the i-th on A + i*stride_a, B + i*stride_b,
    C + i*stride_c (elements), each split into tiles of ``step`` rows (axis 0) or columns
    (axis 1) of C, claimed one at a time by the caller and the pool's helpers
    (``yota_parallel``). Whole matrices on the caller alone when the pool may use one
    thread, or ``par`` is None (BLAS is NumPy's multithreaded one)."""
    name, ft, size = _GEMMS[dtype]
    gemm = declare(m, name, VOID, _gemm_args(ft))
    f = ir.Function(m, ir.FunctionType(VOID, _gemm_args(ft) + [I64] * TILE_EXTRA),
                    GEMM_TILES[dtype])
    args = list(f.args)
    nb, sa, sb, sc, axis, step, nslots = args[14:]
    b = ir.IRBuilder(f.append_basic_block("entry"))
    ctx = b.alloca(I64, T_SC + 1)
    dim = b.select(b.icmp_signed("==", axis, i64(0)), args[3], args[4])
    whole = ir.Constant(I1, 1) if par is None else b.or_(
        b.icmp_signed("<=", nslots, i64(1)), b.icmp_signed("<=", g.get(b, CAP), i64(1)))
    step = b.select(whole, dim, step)
    per = b.sdiv(b.add(dim, b.sub(step, i64(1))), step)
    for k, v in ((T_NEXT, i64(0)), (T_TOTAL, b.mul(per, nb)), (T_PER, per), (T_DIM, dim),
                 (T_STEP, step), (T_AXIS, axis), (T_TA, b.sext(args[1], I64)),
                 (T_TB, b.sext(args[2], I64)), (T_M, args[3]), (T_N, args[4]), (T_K, args[5]),
                 (T_ALPHA, _bits(b, args[6])), (T_A, b.ptrtoint(args[7], I64)),
                 (T_LDA, args[8]), (T_B, b.ptrtoint(args[9], I64)), (T_LDB, args[10]),
                 (T_BETA, _bits(b, args[11])), (T_C, b.ptrtoint(args[12], I64)),
                 (T_LDC, args[13]), (T_SA, sa), (T_SB, sb), (T_SC, sc)):
        b.store(v, b.gep(ctx, [i64(k)], source_etype=I64))
    chunks = _tile_chunks(m, gemm, ft, size, dtype)
    if par is None:
        b.call(chunks, [ctx, i64(0)])
    else:
        b.call(par, [chunks, ctx, nslots])
    b.ret_void()


def _bits(b: ir.IRBuilder, x: ir.Value) -> ir.Value:
    """A float as an i64 word (its bits, zero-extended)."""
    return b.bitcast(x, I64) if x.type == F64 else b.zext(b.bitcast(x, I32), I64)


def _tile_chunks(m: ir.Module, gemm: ir.Function, ft: ir.Type, size: int,
                 dtype: str) -> ir.Function:
    """``chunks(ctx, slot)``: claim tiles until none is left, one GEMM call each."""
    f = ir.Function(m, CHUNKS_TYPE, f"yota_gemm_tiles.{dtype}")
    f.linkage = "internal"
    ctx = f.args[0]
    b = ir.IRBuilder(f.append_basic_block("entry"))
    top, body, done = (f.append_basic_block(n) for n in ("claim", "tile", "done"))
    b.branch(top)
    b.position_at_end(top)
    t = b.atomic_rmw("add", b.gep(ctx, [i64(T_NEXT)], source_etype=I64), i64(1), "monotonic")
    total = b.load(b.gep(ctx, [i64(T_TOTAL)], source_etype=I64), typ=I64)
    b.cbranch(b.icmp_signed("<", t, total), body, done)
    b.position_at_end(body)
    _tile(b, ctx, t, size, gemm, ft)
    b.branch(top)
    b.position_at_end(done)
    b.ret_void()
    return f


def _tile(b: ir.IRBuilder, ctx: ir.Value, t: ir.Value, size: int, gemm: ir.Function,
          ft: ir.Type) -> None:
    """Tile ``t``: its blocks of A, B and C and one GEMM call on them. Rows of C are A's
    rows (A + lo*lda, or A + lo when A is stored transposed) and C's; columns of C are
    B's columns (B + lo, or B + lo*ldb when transposed) and C's."""
    get = lambda k: b.load(b.gep(ctx, [i64(k)], source_etype=I64), typ=I64)  # noqa: E731
    at = lambda k, n: b.gep(b.inttoptr(get(k), PTR), [b.mul(n, i64(size))],  # noqa: E731
                            source_etype=I8)
    per, step, dim = get(T_PER), get(T_STEP), get(T_DIM)
    bi, lo = b.sdiv(t, per), b.mul(b.srem(t, per), step)
    rest = b.sub(dim, lo)
    n = b.select(b.icmp_signed("<", rest, step), rest, step)
    rows = b.icmp_signed("==", get(T_AXIS), i64(0))
    plain_a = b.icmp_signed("==", get(T_TA), i64(CBLAS_NO_TRANS))
    plain_b = b.icmp_signed("==", get(T_TB), i64(CBLAS_NO_TRANS))
    a_off = b.select(rows, b.select(plain_a, b.mul(lo, get(T_LDA)), lo), i64(0))
    b_off = b.select(rows, i64(0), b.select(plain_b, lo, b.mul(lo, get(T_LDB))))
    c_off = b.select(rows, b.mul(lo, get(T_LDC)), lo)
    pa = at(T_A, b.add(a_off, b.mul(bi, get(T_SA))))
    pb = at(T_B, b.add(b_off, b.mul(bi, get(T_SB))))
    pc = at(T_C, b.add(c_off, b.mul(bi, get(T_SC))))
    fl = lambda w: (b.bitcast(w, F64) if ft == F64  # noqa: E731
                    else b.bitcast(b.trunc(w, I32), F32))
    i32 = lambda k: b.trunc(get(k), I32)  # noqa: E731
    b.call(gemm, [ir.Constant(I32, CBLAS_ROW_MAJOR), i32(T_TA), i32(T_TB),
                  b.select(rows, n, get(T_M)), b.select(rows, get(T_N), n), get(T_K),
                  fl(get(T_ALPHA)), pa, get(T_LDA), pb, get(T_LDB), fl(get(T_BETA)), pc,
                  get(T_LDC)])
