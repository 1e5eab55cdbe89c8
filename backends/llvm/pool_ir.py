"""The LLVM IR of Yota's helper pool (``pool.py`` says what it does and why; this module
only builds it, from the names and layout in ``pool_layout.py``). Imported only when the pool's object code is compiled, never by a
process that reads it from the object cache."""

from __future__ import annotations

import llvmlite.ir as ir

from .loops import loop
from .pool_layout import (
    ACTIVE,
    AUTO,
    AUTO_CLEAN,
    AUTO_LEN,
    AUTO_MAX,
    AUTO_MIN,
    BACKOFF_SYMBOL,
    CALLER_CPU,
    CLEAN,
    CROWDED,
    CTX,
    F_FINISHED,
    F_RUNNING,
    F_SUSPENDED,
    FARG,
    FFN,
    FHOME,
    FIBER_MODE_SYMBOL,
    FIBER_SET,
    FIBER_STACK,
    FMODE,
    FN,
    FRC,
    FSTACK,
    FSTATE,
    GEMM_TILES,
    GEN,
    H_CROWDED,
    HELPER_NAME,
    HELPERS,
    IDLE_SPIN_NS,
    JOBSEQ,
    LINE,
    MASK_WORDS,
    N_ALONE,
    N_AUTO,
    N_CROWDED,
    N_FIBER,
    N_JOBS,
    N_JOINED,
    N_KEPT,
    N_MOVED,
    N_REVOC,
    N_STALLS,
    N_STOLEN,
    NEXT,
    NOSPIN,
    NSLOTS,
    NWORDS,
    OPEN,
    PCTX,
    PFN,
    PNSLOTS,
    PR_SET_NAME,
    QUIESCE_SYMBOL,
    QUIET_WINDOWS,
    RESET_SYMBOL,
    RESUME,
    REVJOB,
    REVOC_MIN_MACS,
    RUN_SYMBOL,
    SLEEPERS,
    SOLO,
    SPIN_NS,
    STALE,
    STALL_NS,
    STATS_SYMBOL,
    STEAL_MODE,
    STEAL_MODE_SYMBOL,
    STEAL_NS,
    SYMBOL,
    T_COMMIT,
    T_DONE,
    T_FREE,
    T_HELD,
    THREAD_CPU,
    TILE_CAP,
    TILE_EXTRA,
    TJOB,
    UCONTEXT,
    WAITING,
    WIN_CPU,
    WIN_OWN,
    WINDOW_NS,
    YIELD,
)
from .types import F32, F64, I8, I32, I64, PTR, VOID, i64

_GEMMS = {"float32": ("yota_sgemm", F32, 4), "float64": ("yota_dgemm", F64, 8)}
MASK_SIZE = i64(8 * MASK_WORDS)  # bytes of a cpu_set_t (sched_[gs]etaffinity's size)


def module(triple: str, blas: bool = False, tiles: bool = False) -> ir.Module:
    """The pool; with ``blas``, the tiled GEMMs too (split only when ``tiles``)."""
    m = ir.Module(name="yota_pool")
    m.triple = triple
    g = _Globals(m)
    helper = _helper(m, g)
    par = _parallel(m, g, helper)
    _stats(m, g)
    _reset(m, g)
    _back_off(m, g)
    _quiesce(m, g)
    _steal_mode(m, g)
    _fiber_mode(m, g)
    _run(m, g, helper)
    if blas:
        revocable = _parallel(m, g, helper, revocable=True) if tiles else None
        for dt in GEMM_TILES:
            _gemm_tiles(m, g, dt, par if tiles else None, revocable)
    return m


class _Globals:
    SYNC = ("yota_pool_mutex", "yota_pool_wake", "yota_pool_done", "yota_pool_joblock")

    def __init__(self, m: ir.Module) -> None:
        self.triple = m.triple

        def blob(name: str, n: int) -> ir.GlobalVariable:
            v = ir.GlobalVariable(m, ir.ArrayType(I8, n), name)
            v.initializer = ir.Constant(ir.ArrayType(I8, n), None)  # glibc's *_INITIALIZER
            v.align = 64
            v.linkage = "internal"
            return v
        self.mutex, self.wake, self.done, self.joblock = (blob(n, 64) for n in self.SYNC)
        self.job = ir.GlobalVariable(m, ir.ArrayType(I64, NWORDS * LINE), "yota_pool_job")
        self.job.initializer = ir.Constant(ir.ArrayType(I64, NWORDS * LINE), None)
        self.job.align = 64
        self.job.linkage = "internal"
        # revocable tiles (_tile_chunks): word 0 of line t is tile t's state, word 1 the
        # CPU clock of the helper that holds it
        self.tiles = ir.GlobalVariable(m, ir.ArrayType(I64, TILE_CAP * LINE), "yota_pool_tiles")
        self.tiles.initializer = ir.Constant(ir.ArrayType(I64, TILE_CAP * LINE), None)
        self.tiles.align = 64
        self.tiles.linkage = "internal"
        # the context of the revocable tiled GEMM that holds the pool (_revocable_ctx)
        self.tctx = ir.GlobalVariable(m, ir.ArrayType(I64, 4 * LINE), "yota_pool_tctx")
        self.tctx.initializer = ir.Constant(ir.ArrayType(I64, 4 * LINE), None)
        self.tctx.align = 64
        self.tctx.linkage = "internal"
        # the migrating program's context (_run): a glibc ucontext_t
        self.fiber = blob("yota_pool_fiber", UCONTEXT)
        d = lambda n, r, a: _declare(m, n, r, a)  # noqa: E731
        self.lock = d("pthread_mutex_lock", I32, [PTR])
        self.trylock = d("pthread_mutex_trylock", I32, [PTR])
        self.unlock = d("pthread_mutex_unlock", I32, [PTR])
        self.wait = d("pthread_cond_wait", I32, [PTR, PTR])
        self.broadcast = d("pthread_cond_broadcast", I32, [PTR])
        self.create = d("pthread_create", I32, [PTR, PTR, PTR, PTR])
        self.detach = d("pthread_detach", I32, [I64])
        self.clock = d("clock_gettime", I32, [I32, PTR])
        self.memset = d("memset", PTR, [PTR, I32, I64])
        self.memcpy = d("memcpy", PTR, [PTR, PTR, I64])
        self.malloc = d("malloc", PTR, [I64])
        self.free = d("free", VOID, [PTR])
        self.self_ = d("pthread_self", I64, [])
        self.cpuclock = d("pthread_getcpuclockid", I32, [I64, PTR])
        self.yield_ = d("sched_yield", I32, [])
        self.linux = "linux" in self.triple  # sched_getcpu, affinity, thread names
        if self.linux:
            self.getcpu = d("sched_getcpu", I32, [])
            self.getaffinity = d("sched_getaffinity", I32, [I32, I64, PTR])
            self.setaffinity = d("sched_setaffinity", I32, [I32, I64, PTR])
            self.prctl = d("prctl", I32, [I32, I64, I64, I64, I64])
            self.open = m.globals.get("open") or ir.Function(
                m, ir.FunctionType(I32, [PTR, I32], var_arg=True), "open")
            self.read = d("read", I64, [I32, PTR, I64])
            self.close = d("close", I32, [I32])
            self.nprocs = d("get_nprocs", I32, [])
        # a program that moves between threads (_run): glibc's ucontext on x86-64 Linux
        # (its layout is glibc's; musl has no getcontext)
        self.fibers = (self.linux and self.triple.startswith("x86_64")
                       and self.triple.endswith("-gnu"))
        if self.fibers:
            self.getcontext = d("getcontext", I32, [PTR])
            self.setcontext = d("setcontext", I32, [PTR])
            self.swapcontext = d("swapcontext", I32, [PTR, PTR])
            self.makecontext = ir.Function(
                m, ir.FunctionType(VOID, [PTR, PTR, I32], var_arg=True), "makecontext")
            self.mmap = d("mmap", PTR, [PTR, I64, I32, I32, I32, I64])
            self.mprotect = d("mprotect", I32, [PTR, I64, I32])

    def fiber_fns(self, m: ir.Module) -> tuple[ir.Function, ir.Function]:
        """The migrating program's ``fjoin`` and ``drive`` (built once)."""
        if not hasattr(self, "_fiber_fns"):
            fjoin = _fjoin(m, self)
            self._fiber_fns = (fjoin, _drive(m, self, fjoin))
        return self._fiber_fns

    def cpu(self, b: ir.IRBuilder) -> ir.Value:
        """The CPU this thread runs on (-1 where unknown)."""
        return b.sext(b.call(self.getcpu, []), I64) if self.linux else i64(-1)

    def name_thread(self, b: ir.IRBuilder) -> None:
        """Name this thread ``HELPER_NAME`` (as ``top -H`` and /proc show it; Linux)."""
        if not self.linux:
            return
        m = b.module
        text = bytearray(HELPER_NAME.encode() + b"\0")
        name = ir.GlobalVariable(m, ir.ArrayType(I8, len(text)), "yota_pool_name")
        name.initializer = ir.Constant(ir.ArrayType(I8, len(text)), text)
        name.global_constant = True
        name.linkage = "internal"
        b.call(self.prctl, [ir.Constant(I32, PR_SET_NAME), b.ptrtoint(name, I64), i64(0),
                            i64(0), i64(0)])

    def field(self, b: ir.IRBuilder, k: int) -> ir.Value:
        return b.gep(self.job, [i64(0), i64(k * LINE)], inbounds=True)

    def tile(self, b: ir.IRBuilder, t: ir.Value, word: int = 0) -> ir.Value:
        """Tile ``t``'s state (``word`` 0) or its holder's CPU clock id (1)."""
        return b.gep(self.tiles, [i64(0), b.add(b.mul(t, i64(LINE)), i64(word))],
                     inbounds=True)

    def get(self, b: ir.IRBuilder, k: int, order: str = "monotonic") -> ir.Value:
        return b.load_atomic(self.field(b, k), order, 8, typ=I64)

    def set(self, b: ir.IRBuilder, k: int, v: ir.Value, order: str = "monotonic") -> None:
        b.store_atomic(v, self.field(b, k), order, 8)

    def add(self, b: ir.IRBuilder, k: int, v: int | ir.Value,
            order: str = "seq_cst") -> ir.Value:
        """Atomically add ``v`` to word ``k``; the old value."""
        return b.atomic_rmw("add", self.field(b, k), i64(v) if isinstance(v, int) else v,
                            order)

    def now(self, b: ir.IRBuilder, ts: ir.Value, clock: int = 1) -> ir.Value:
        """``clock`` (CLOCK_MONOTONIC, or THREAD_CPU: this thread's CPU time) in
        nanoseconds (``ts``: two i64 words of scratch)."""
        b.call(self.clock, [ir.Constant(I32, clock), ts])
        sec = b.load(b.gep(ts, [i64(0)], source_etype=I64), typ=I64)
        nsec = b.load(b.gep(ts, [i64(1)], source_etype=I64), typ=I64)
        return b.add(b.mul(sec, i64(1_000_000_000)), nsec)

    def pause(self, b: ir.IRBuilder) -> None:
        """The CPU's spin-wait hint (x86 ``pause``, AArch64 ``yield``), by intrinsic (the
        object emitter has no inline-assembly parser)."""
        arch = self.triple.split("-")[0]
        m = b.module
        if arch in ("x86_64", "i686", "i386"):
            name, args = "llvm.x86.sse2.pause", []
        elif arch in ("aarch64", "arm64"):
            name, args = "llvm.aarch64.hint", [ir.Constant(I32, 1)]
        else:
            return
        fn = m.globals.get(name) or _declare(m, name, VOID, [a.type for a in args])
        b.call(fn, args)


def _declare(m: ir.Module, name: str, ret: ir.Type, args: list[ir.Type]) -> ir.Function:
    return ir.Function(m, ir.FunctionType(ret, args), name)


CHUNKS_TYPE = ir.FunctionType(VOID, [PTR, I64])


def _spin(f: ir.Function, b: ir.IRBuilder, g: _Globals, ts: ir.Value,
          ready: ir.Function, hit: ir.Block, miss: ir.Block, tag: str, spin_ns: int) -> None:
    """Spin with the pause hint until ``ready(b)`` (branch to ``hit``) or ``spin_ns``
    passed, none while the cores are crowded (``NOSPIN``: branch to ``miss``, at once
    if ``ready`` is false); every 64 rounds (a few microseconds) the clock is read
    and, with ``YIELD``, the core offered to another thread (``sched_yield``): when the
    thread spun for shares its core (busy processes on every core), it runs then
    instead of waiting for the spinner's time slice to end."""
    start = g.now(b, ts)
    # (a helper between a migrating program's jobs keeps spinning, without yielding its
    # core: one that slept waits out a busy process's time slice once woken)
    fib = ir.Constant(ir.IntType(1), 0)
    if tag == "idle" and g.fibers:
        fib = b.icmp_unsigned("!=", g.get(b, FMODE), i64(0))
    crowd = b.and_(b.icmp_signed(">", g.get(b, NOSPIN), i64(0)), b.not_(fib))
    limit = b.select(crowd, i64(0), i64(spin_ns))
    entry = b.block
    top = f.append_basic_block(f"{tag}.spin")
    body = f.append_basic_block(f"{tag}.pause")
    clock = f.append_basic_block(f"{tag}.clock")
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
    if YIELD:
        with b.if_then(b.not_(fib)):
            b.call(g.yield_, [])
    i.add_incoming(i2, b.block)
    late = b.icmp_signed(">", b.sub(g.now(b, ts), start), limit)
    b.cbranch(late, miss, top)


def _helper(m: ir.Module, g: _Globals) -> ir.Function:
    """Forever: spin, then sleep, until a new job is posted; join it if it is open and a
    slot is free; leave, waking the caller if it sleeps on the last helper."""
    f = ir.Function(m, ir.FunctionType(PTR, [PTR]), "yota_pool_helper")
    f.linkage = "internal"
    b = ir.IRBuilder(f.append_basic_block("entry"))
    seen = b.alloca(I64)
    ts = b.alloca(I64, 2)
    masks = (b.alloca(I64, MASK_WORDS), b.alloca(I64, MASK_WORDS))
    check = b.alloca(I64, MASK_WORDS)
    away = b.alloca(ir.IntType(1))
    home = b.alloca(I8, UCONTEXT)  # this thread's own context while it carries a program on
    home.align = 64
    counted = b.alloca(ir.IntType(1))
    g.name_thread(b)
    b.store(g.get(b, GEN, "acquire"), seen)
    top = f.append_basic_block("idle")
    sleep = f.append_basic_block("sleep")
    woke = f.append_basic_block("woke")
    b.branch(top)
    b.position_at_end(top)
    new = lambda b: b.icmp_unsigned("!=", g.get(b, GEN, "acquire"),  # noqa: E731
                                    b.load(seen, typ=I64))
    _spin(f, b, g, ts, new, woke, sleep, "idle", IDLE_SPIN_NS)

    b.position_at_end(sleep)  # SLEEPERS before GEN (seq_cst both; the caller: GEN first)
    posted = lambda b: b.icmp_unsigned("!=", g.get(b, GEN, "seq_cst"),  # noqa: E731
                                       b.load(seen, typ=I64))
    _sleep_away(b, g, masks, away)
    _sleep_until(f, b, g, g.wake, SLEEPERS, posted, "sleep")
    _come_back(b, g, masks, check, away)
    b.branch(woke)

    b.position_at_end(woke)  # count in, then look: the caller closes, then counts
    b.store(g.get(b, GEN, "acquire"), seen)
    if g.fibers:  # a migrating program's job (_run): join it, carry it on if ours
        fjoin, drive = g.fiber_fns(m)
        fiber = f.append_basic_block("fiber")
        pool = f.append_basic_block("pool")
        b.cbranch(b.icmp_unsigned("!=", g.get(b, FMODE, "seq_cst"), i64(0)), fiber, pool)
        b.position_at_end(fiber)
        with b.if_then(b.call(fjoin, [seen])):
            b.call(drive, [home, seen])
        b.branch(top)
        b.position_at_end(pool)
    _move_off(b, g, masks)
    g.add(b, ACTIVE, 1)
    b.store(ir.Constant(ir.IntType(1), 1), counted)
    with b.if_then(b.icmp_unsigned("!=", g.get(b, OPEN, "seq_cst"), i64(0))):
        slot = g.add(b, NEXT, 1)
        with b.if_then(b.icmp_signed("<", slot, g.get(b, NSLOTS))):
            fn = b.inttoptr(g.get(b, FN), PTR)
            ctx = b.inttoptr(g.get(b, CTX), PTR)
            # a revocable tiled GEMM's context is the pool's own, and what the helper
            # holds of it the caller can take back: the job need not wait for it
            with b.if_then(b.icmp_unsigned("!=", g.get(b, REVJOB), i64(0))):
                b.store(ir.Constant(ir.IntType(1), 0), counted)
                g.add(b, ACTIVE, -1)
            t0, c0 = g.now(b, ts), g.now(b, ts, THREAD_CPU)
            b.call(_FnPtr(fn), [ctx, slot])
            wall = b.sub(g.now(b, ts), t0)
            cpu = b.sub(g.now(b, ts, THREAD_CPU), c0)
            short = b.icmp_signed("<", b.mul(cpu, i64(100)), b.mul(wall, i64(CROWDED)))
            with b.if_then(b.and_(short, b.icmp_signed(">", wall, i64(STALL_NS)))):
                g.set(b, H_CROWDED, i64(1))  # the OS ran something else on its core
    with b.if_then(b.load(counted)):
        g.add(b, ACTIVE, -1)
    _signal_done(b, g)
    b.branch(top)
    return f


def _publish(b: ir.IRBuilder, g: _Globals) -> None:
    """Bump the job generation (the job's words are written), then wake the helpers
    that sleep on ``wake``, if any (SLEEPERS after GEN: seq_cst both, as they count in
    before they look at GEN)."""
    g.add(b, GEN, 1)
    with b.if_then(b.icmp_signed(">", g.get(b, SLEEPERS, "seq_cst"), i64(0))):
        b.call(g.lock, [g.mutex])
        b.call(g.broadcast, [g.wake])
        b.call(g.unlock, [g.mutex])


def _signal_done(b: ir.IRBuilder, g: _Globals) -> None:
    """Wake the threads that sleep on ``done`` (a caller draining its job, or one waiting
    for stale helpers, ``_quiesce``), if any: each looks again at what it waits for."""
    with b.if_then(b.icmp_signed(">", g.get(b, WAITING, "seq_cst"), i64(0))):
        b.call(g.lock, [g.mutex])
        b.call(g.broadcast, [g.done])
        b.call(g.unlock, [g.mutex])


def _move_off(b: ir.IRBuilder, g: _Globals, masks: tuple[ir.Value, ir.Value]) -> None:
    """A helper that finds itself on the CPU of the job's caller moves off it: its own
    affinity set to its CPUs less that one (the kernel migrates it at once), then given
    back unchanged, so it stays free to run anywhere later. Some schedulers put a woken
    thread on its waker's CPU after a quiet spell (measured on this project's VMs: the
    helper and the caller then share one core until the load balancer splits them);
    the caller's thread, the user's, is never touched. (Skipping the move while the
    cores are crowded, ``NOSPIN``, measured no better under ``--load 2`` and worse on a
    quiet machine, where a misjudged crowded window then left the two threads packed.)
    A helper that slept is kept off that CPU from the start (``_sleep_away``)."""
    if not g.linux:
        return
    cc = g.get(b, CALLER_CPU)
    same = b.and_(b.icmp_signed("==", g.cpu(b), cc), _cpu_in_mask(b, cc))
    with b.if_then(same, likely=False):
        old, new = masks
        with b.if_then(_mask_less(b, g, cc, old, new)):
            b.call(g.setaffinity, [ir.Constant(I32, 0), MASK_SIZE, new])
            b.call(g.setaffinity, [ir.Constant(I32, 0), MASK_SIZE, old])
            g.add(b, N_MOVED, 1, "monotonic")


def _cpu_in_mask(b: ir.IRBuilder, cpu: ir.Value) -> ir.Value:
    """``cpu`` is a CPU number a ``cpu_set_t`` of ``MASK_WORDS`` words holds."""
    return b.and_(b.icmp_signed(">=", cpu, i64(0)),
                  b.icmp_signed("<", cpu, i64(64 * MASK_WORDS)))


def _mask_less(b: ir.IRBuilder, g: _Globals, cpu: ir.Value, old: ir.Value,
               new: ir.Value) -> ir.Value:
    """Read this thread's affinity into ``old`` and write it less ``cpu`` (a CPU number
    ``_cpu_in_mask`` accepts) into ``new``; true if the read worked and ``new`` has a
    CPU left."""
    b.call(g.memset, [old, ir.Constant(I32, 0), MASK_SIZE])  # (a failed read: left alone)
    got = b.call(g.getaffinity, [ir.Constant(I32, 0), MASK_SIZE, old])
    word, bit = b.lshr(cpu, i64(6)), b.shl(i64(1), b.and_(cpu, i64(63)))
    left: ir.Value = i64(0)
    for k in range(MASK_WORDS):
        v = b.load(b.gep(old, [i64(k)], source_etype=I64), typ=I64)
        drop = b.select(b.icmp_unsigned("==", word, i64(k)), bit, i64(0))
        v = b.and_(v, b.xor(drop, i64(-1)))
        b.store(v, b.gep(new, [i64(k)], source_etype=I64))
        left = b.or_(left, v)
    return b.and_(b.icmp_signed("==", got, ir.Constant(I32, 0)),
                  b.icmp_unsigned("!=", left, i64(0)))


def _sleep_away(b: ir.IRBuilder, g: _Globals, masks: tuple[ir.Value, ir.Value],
                away: ir.Value) -> None:
    """Before a helper sleeps, it takes the CPU of the last job's poster out of its
    affinity (``away`` says whether it did; ``_come_back`` gives the affinity back once
    it is awake). Waking a sleeping thread, Linux may queue it on the waker's CPU though
    another is idle (this project's VMs: 35-38 of 40 wakes after 0.12 s idle,
    ``tools/wake_probe.c``); there the woken helper shares the caller's core or, having
    spun before it slept, waits until the caller's time slice ends (3.5 ms in a quarter
    of the wakes) before it can even move off (``_move_off``). Kept off that CPU, it is
    queued on another (1 of 40; 72-89 us from wake to run). The calls are the helper's
    own, made while it has nothing to do; a poster found on another CPU at the next job
    is met by ``_move_off`` as before."""
    b.store(ir.Constant(ir.IntType(1), 0), away)
    if not g.linux:
        return
    cc = g.get(b, CALLER_CPU)
    with b.if_then(_cpu_in_mask(b, cc)):
        old, new = masks
        with b.if_then(_mask_less(b, g, cc, old, new)):
            rc = b.call(g.setaffinity, [ir.Constant(I32, 0), MASK_SIZE, new])
            b.store(b.icmp_signed("==", rc, ir.Constant(I32, 0)), away)


def _come_back(b: ir.IRBuilder, g: _Globals, masks: tuple[ir.Value, ir.Value],
               check: ir.Value, away: ir.Value) -> None:
    """A helper woken after ``_sleep_away`` gives itself back the affinity it had, unless
    its affinity is no longer the one it set: someone else changed it meanwhile, and
    that setting stays (one that set the very mask the helper had set is not seen)."""
    if not g.linux:
        return
    with b.if_then(b.load(away)):
        old, new = masks
        b.call(g.memset, [check, ir.Constant(I32, 0), MASK_SIZE])
        got = b.call(g.getaffinity, [ir.Constant(I32, 0), MASK_SIZE, check])
        diff: ir.Value = i64(0)
        for k in range(MASK_WORDS):
            v = b.load(b.gep(check, [i64(k)], source_etype=I64), typ=I64)
            w = b.load(b.gep(new, [i64(k)], source_etype=I64), typ=I64)
            diff = b.or_(diff, b.xor(v, w))
        unchanged = b.and_(b.icmp_signed("==", got, ir.Constant(I32, 0)),
                           b.icmp_unsigned("==", diff, i64(0)))
        with b.if_then(unchanged):
            b.call(g.setaffinity, [ir.Constant(I32, 0), MASK_SIZE, old])


class _FnPtr(ir.Value):
    """An opaque pointer called as ``void (ptr, i64)``, or as ``ftype`` (llvmlite's
    ``call`` wants to see a function type on its callee)."""

    def __init__(self, ptr: ir.Value, ftype: ir.FunctionType = CHUNKS_TYPE) -> None:
        self.ptr = ptr
        self.type = ir.PointerType(ftype)
        self.function_type = ftype

    def get_reference(self) -> str:
        return self.ptr.get_reference()

    def __str__(self) -> str:
        return f"ptr {self.get_reference()}"


def _parallel(m: ir.Module, g: _Globals, helper: ir.Function, revocable: bool = False
              ) -> ir.Function:
    """``yota_parallel``; with ``revocable``, the internal variant that the revocable tiled
    GEMMs post their jobs with: shared during the automatic back-off too (a tile held by
    a helper the OS does not run is taken back, so such a job never stalls on it)."""
    f = ir.Function(m, ir.FunctionType(VOID, [PTR, PTR, I64]),
                    "yota_parallel_revocable" if revocable else SYMBOL)
    if revocable:
        f.linkage = "internal"
    fn, ctx, nslots = f.args
    b = ir.IRBuilder(f.append_basic_block("entry"))
    ts = b.alloca(I64, 2)
    alone = f.append_basic_block("alone")
    owned = f.append_basic_block("owned")
    fiber = ir.Constant(ir.IntType(1), 0)
    if g.fibers:  # a migrating program's job (_run): the program holds the pool; a
        pool = f.append_basic_block("pool")  # revocable one moves it, another is posted
        moves = f.append_basic_block("fiber")  # by the thread that carries it, as usual
        fiber = _on_fiber(b, g, ts)
        b.cbranch(fiber, moves, pool)
        b.position_at_end(moves)
        if revocable:
            g.add(b, N_REVOC, 1, "monotonic")
            _suspend(b, g, fn, _revocable_ctx(b, ctx, g), nslots)
            b.ret_void()
        else:
            b.branch(owned)
        b.position_at_end(pool)
    b.cbranch(b.icmp_signed("!=", b.call(g.trylock, [g.joblock]), ir.Constant(I32, 0)),
              alone, owned)
    b.position_at_end(alone)  # another job holds the pool: run every chunk here
    if revocable:  # (the tile states belong to the pool's job)
        _revocable_ctx(b, ctx, None)
    b.call(_FnPtr(fn), [ctx, i64(0)])
    b.ret_void()

    b.position_at_end(owned)  # SOLO and AUTO are only written under the job lock
    g.add(b, N_JOBS, 1, "monotonic")
    backoff = f.append_basic_block("backoff")
    shared = f.append_basic_block("shared")
    auto = f.append_basic_block("auto")
    post = f.append_basic_block("post")
    end = f.append_basic_block("end")
    solo = g.get(b, SOLO)
    b.cbranch(b.icmp_signed(">", solo, i64(0)), backoff, shared)
    b.position_at_end(backoff)  # back_off(n): this job on this thread
    if revocable:
        _revocable_ctx(b, ctx, None)
    g.set(b, SOLO, b.sub(solo, i64(1)))
    g.add(b, N_ALONE, 1, "monotonic")
    b.call(_FnPtr(fn), [ctx, i64(0)])
    b.branch(end)

    b.position_at_end(shared)
    left = g.get(b, AUTO)
    b.cbranch(_auto_alone(b, g), auto, post)
    b.position_at_end(auto)  # the automatic back-off after stalls (_adapt); the caller's
    # share of its core is still judged (_crowding); its last job looks at the machine
    last = b.icmp_signed("==", left, i64(1))
    more = b.and_(last, _oversubscribed(b, g, nslots, last))
    g.set(b, AUTO, b.select(more, g.get(b, AUTO_LEN), b.sub(left, i64(1))))
    with b.if_then(more):
        g.add(b, N_KEPT, 1, "monotonic")
    if revocable:  # counted down as a job of the back-off, but shared
        b.branch(post)
    else:
        g.add(b, N_AUTO, 1, "monotonic")
        a0, ac0 = g.now(b, ts), g.now(b, ts, THREAD_CPU)
        b.call(_FnPtr(fn), [ctx, i64(0)])
        _crowding(b, g, own=b.sub(g.now(b, ts), a0),
                  cpu=b.sub(g.now(b, ts, THREAD_CPU), ac0))
        b.branch(end)

    b.position_at_end(post)
    if revocable:
        g.add(b, N_REVOC, 1, "monotonic")
        ctx = _revocable_ctx(b, ctx, g)
    _spawn(f, b, g, helper, nslots)
    g.set(b, FN, b.ptrtoint(fn, I64))
    g.set(b, CTX, b.ptrtoint(ctx, I64))
    g.set(b, REVJOB, i64(1 if revocable else 0))
    g.set(b, NSLOTS, nslots)
    g.set(b, CALLER_CPU, g.cpu(b))
    g.set(b, NEXT, i64(1))
    g.set(b, H_CROWDED, i64(0))
    g.set(b, OPEN, i64(1), "seq_cst")
    _publish(b, g)
    t0, c0 = g.now(b, ts), g.now(b, ts, THREAD_CPU)
    b.call(_FnPtr(fn), [ctx, i64(0)])
    if revocable:  # (the caller returns early if a helper took back its own tile)
        _wait_done(f, b, g, ts, lambda b: _tiles_finished(b, ctx), "tiles")
    t1, c1 = g.now(b, ts), g.now(b, ts, THREAD_CPU)
    g.set(b, OPEN, i64(0), "seq_cst")
    _drain(f, b, g, ts)
    stalled = _count(b, g, own=b.sub(t1, t0), waited=b.sub(g.now(b, ts), t1))
    _adapt(b, g, stalled)
    _crowding(b, g, own=b.sub(t1, t0), cpu=b.sub(c1, c0))
    b.branch(end)
    b.position_at_end(end)
    with b.if_then(b.not_(fiber)):  # (a migrating program's lock is its caller's)
        b.call(g.unlock, [g.joblock])
    b.ret_void()
    return f


def _tiles_finished(b: ir.IRBuilder, ctx: ir.Value) -> ir.Value:
    """Whether every tile of the revocable job on ``ctx`` is DONE."""
    done = b.load_atomic(b.gep(ctx, [i64(T_FINISHED)], source_etype=I64), "acquire", 8, typ=I64)
    return b.icmp_signed("==", done, _ctx_word(b, ctx, T_TOTAL))


def _revocable_ctx(b: ir.IRBuilder, ctx: ir.Value, g: _Globals | None) -> ir.Value:
    """The context a revocable tiled GEMM's job runs on (``_tile_chunks``), set up under
    the job lock (``g``): a copy of the caller's in the pool's own (a helper may still
    be in it after the caller returned), a fresh tag, every tile FREE under it, and
    last the claim word (tag, tile count, next tile: ``T_NEXT``), which publishes the
    rest. Run alone (``g`` None), the tiles are plain ones on the caller's context."""
    word = lambda p, k: b.gep(p, [i64(k)], source_etype=I64)  # noqa: E731
    if g is None:
        b.store(i64(0), word(ctx, T_REVOC))
        return ctx
    job = b.gep(g.tctx, [i64(0), i64(0)], inbounds=True)
    for k in range(T_REVOC):
        if k != T_NEXT:
            b.store_atomic(b.load(word(ctx, k), typ=I64), word(job, k), "monotonic", 8)
    b.store_atomic(i64(1), word(job, T_REVOC), "monotonic", 8)
    b.store_atomic(i64(0), word(job, T_FINISHED), "monotonic", 8)
    tag = b.and_(b.add(g.add(b, TJOB, 1), i64(1)), i64(0xFFFFFFFF))
    total = b.load(word(ctx, T_TOTAL), typ=I64)
    free = _state(b, tag, T_FREE)
    def init(t: ir.Value, _: list[ir.Value]) -> list[ir.Value]:
        b.store_atomic(free, g.tile(b, t), "monotonic", 8)
        return []

    loop(b, 0, total, 1, [], init, "tiles.free")
    claim = b.or_(b.shl(tag, i64(32)), b.shl(total, i64(20)))
    b.store_atomic(claim, word(job, T_NEXT), "release", 8)
    return job


def _spawn(f: ir.Function, b: ir.IRBuilder, g: _Globals, helper: ir.Function,
           nslots: ir.Value) -> None:
    """Create helpers until there are ``nslots - 1`` (under the mutex; once per process
    in practice)."""
    need = lambda b: b.icmp_signed("<", b.add(g.get(b, HELPERS), i64(1)), nslots)  # noqa: E731
    go = f.append_basic_block("spawn")
    done = f.append_basic_block("spawned")
    b.cbranch(need(b), go, done)
    b.position_at_end(go)
    tid = b.alloca(I64)
    b.call(g.lock, [g.mutex])
    top = f.append_basic_block("spawn.top")
    make = f.append_basic_block("spawn.make")
    made = f.append_basic_block("spawn.made")
    out = f.append_basic_block("spawn.out")
    b.branch(top)
    b.position_at_end(top)
    b.cbranch(need(b), make, out)
    b.position_at_end(make)
    rc = b.call(g.create, [tid, ir.Constant(PTR, None), helper, ir.Constant(PTR, None)])
    b.cbranch(b.icmp_signed("==", rc, ir.Constant(I32, 0)), made, out)
    b.position_at_end(made)
    b.call(g.detach, [b.load(tid, typ=I64)])
    g.set(b, HELPERS, b.add(g.get(b, HELPERS), i64(1)))
    b.branch(top)
    b.position_at_end(out)
    b.call(g.unlock, [g.mutex])
    b.branch(done)
    b.position_at_end(done)


def _drain(f: ir.Function, b: ir.IRBuilder, g: _Globals, ts: ir.Value) -> None:
    """Wait until no helper is in the job (the job is closed). A helper that joined a
    revocable tiled GEMM has left it as soon as it read the job (``_helper``)."""
    idle = lambda b: b.icmp_signed("==", g.get(b, ACTIVE, "seq_cst"), i64(0))  # noqa: E731
    _wait_done(f, b, g, ts, idle, "drain")


def _wait_done(f: ir.Function, b: ir.IRBuilder, g: _Globals, ts: ir.Value,
               ready: ir.Function, tag: str) -> None:
    """Spin, then sleep on ``done``, until ``ready(b)``. ``WAITING`` counts the sleepers
    (a draining caller and threads in ``_quiesce`` may sleep at once); it is raised
    before ``ready`` is read (seq_cst both; a helper changes what ``ready`` reads, then
    reads ``WAITING``: ``_signal_done``)."""
    done = f.append_basic_block(f"{tag}.done")
    sleep = f.append_basic_block(f"{tag}.sleep")
    _spin(f, b, g, ts, ready, done, sleep, tag, SPIN_NS)
    b.position_at_end(sleep)
    _sleep_until(f, b, g, g.done, WAITING, ready, tag)
    b.branch(done)
    b.position_at_end(done)


def _sleep_until(f: ir.Function, b: ir.IRBuilder, g: _Globals, cv: ir.Value, count: int,
                 ready: ir.Function, tag: str) -> None:
    """Under the pool's mutex: count this thread in job word ``count``, wait on the
    condition variable ``cv`` until ``ready(b)``, count it out. (Whoever makes ``ready``
    true changes what it reads, then reads ``count``, and signals ``cv`` if it is not 0.)"""
    b.call(g.lock, [g.mutex])
    g.add(b, count, 1)
    check = f.append_basic_block(f"{tag}.check")
    wait = f.append_basic_block(f"{tag}.wait")
    up = f.append_basic_block(f"{tag}.up")
    b.branch(check)
    b.position_at_end(check)
    b.cbranch(ready(b), up, wait)
    b.position_at_end(wait)
    b.call(g.wait, [cv, g.mutex])
    b.branch(check)
    b.position_at_end(up)
    g.add(b, count, -1)
    b.call(g.unlock, [g.mutex])


def _quiesce(m: ir.Module, g: _Globals) -> None:
    """``yota_pool_quiesce()``: return once no helper is still computing a tile that its
    caller took back (``STALE``). Such a helper reads the tile's operands and writes
    only its own scratch; generated code calls this before it returns to its caller,
    who may then free those operands."""
    f = ir.Function(m, ir.FunctionType(VOID, []), QUIESCE_SYMBOL)
    b = ir.IRBuilder(f.append_basic_block("entry"))
    ts = b.alloca(I64, 2)
    ready = lambda b: b.icmp_signed("==", g.get(b, STALE, "seq_cst"), i64(0))  # noqa: E731
    wait = f.append_basic_block("quiesce")
    out = f.append_basic_block("out")
    b.cbranch(ready(b), out, wait)
    b.position_at_end(wait)
    _wait_done(f, b, g, ts, ready, "quiesce")
    b.branch(out)
    b.position_at_end(out)
    b.ret_void()


def _steal_mode(m: ir.Module, g: _Globals) -> None:
    """``yota_pool_steal_mode(n)``: when tiled GEMMs are revocable (``_tile_chunks``): 0
    while the cores are crowded (the default), 1 whenever shared, 2 whenever shared and
    every tile a helper holds is taken back as soon as the caller has none left (tests)."""
    f = ir.Function(m, ir.FunctionType(VOID, [I64]), STEAL_MODE_SYMBOL)
    b = ir.IRBuilder(f.append_basic_block("entry"))
    g.set(b, STEAL_MODE, f.args[0])
    b.ret_void()


def _count(b: ir.IRBuilder, g: _Globals, own: ir.Value, waited: ir.Value) -> ir.Value:
    """Counters of a shared job: joined (a helper took a slot), stalled (the caller
    waited for helpers longer than it worked in its own chunks, and over STALL_NS);
    whether it stalled."""
    with b.if_then(b.icmp_signed(">", g.get(b, NEXT), i64(1))):
        g.add(b, N_JOINED, 1, "monotonic")
    stall = b.and_(b.icmp_signed(">", waited, i64(STALL_NS)), b.icmp_signed(">", waited, own))
    with b.if_then(stall):
        g.add(b, N_STALLS, 1, "monotonic")
    return stall


def _auto_alone(b: ir.IRBuilder, g: _Globals) -> ir.Value:
    """Whether the automatic back-off runs the next job alone (jobs of it are left)."""
    return b.icmp_signed(">", g.get(b, AUTO), i64(0))


LOADAVG = b"/proc/loadavg\0"


def _oversubscribed(b: ir.IRBuilder, g: _Globals, nslots: ir.Value, ask: ir.Value
                    ) -> ir.Value:
    """When ``ask``: whether more threads are runnable on the machine right now than it
    has CPUs online (or the job has slots, if more), by the fourth field of
    ``/proc/loadavg`` ("running/total" tasks, the calling thread included: counted over
    the whole machine, so it is compared with the whole machine's CPUs, not with those a
    container or an affinity mask leaves us); false where it cannot be read, and off
    Linux.
    Read once per back-off (a few microseconds): the probe that would otherwise end one
    wakes a helper, and each wake lets the scheduler regroup the threads, so the caller
    that had a core to itself beside two busy processes comes to share one (W3: 3.8 ms
    per call with every job alone, 7.0-7.7 ms with a probe every few hundred jobs)."""
    if not g.linux:
        return ir.Constant(ir.IntType(1), 0)
    m, f = b.module, b.function
    path = m.globals.get("yota_pool_loadavg")
    if path is None:
        path = ir.GlobalVariable(m, ir.ArrayType(I8, len(LOADAVG)), "yota_pool_loadavg")
        path.initializer = ir.Constant(ir.ArrayType(I8, len(LOADAVG)), bytearray(LOADAVG))
        path.global_constant = True
        path.linkage = "internal"
    buf = b.alloca(I8, 64)
    result = b.alloca(ir.IntType(1))
    b.store(ir.Constant(ir.IntType(1), 0), result)
    with b.if_then(ask, likely=False):
        fd = b.call(g.open, [b.bitcast(path, PTR), ir.Constant(I32, 0)])
        with b.if_then(b.icmp_signed(">=", fd, ir.Constant(I32, 0))):
            n = b.call(g.read, [fd, buf, i64(63)])
            b.call(g.close, [fd])
            # scan: after the third space, digits up to '/'
            top = f.append_basic_block("loadavg.scan")
            body = f.append_basic_block("loadavg.char")
            done = f.append_basic_block("loadavg.done")
            entry = b.block
            b.branch(top)
            b.position_at_end(top)
            i = b.phi(I64)
            spaces = b.phi(I64)
            value = b.phi(I64)
            i.add_incoming(i64(0), entry)
            spaces.add_incoming(i64(0), entry)
            value.add_incoming(i64(0), entry)
            b.cbranch(b.icmp_signed("<", i, n), body, done)
            b.position_at_end(body)
            c = b.zext(b.load(b.gep(buf, [i], source_etype=I8), typ=I8), I64)
            space = b.icmp_unsigned("==", c, i64(ord(" ")))
            digit = b.and_(b.icmp_unsigned(">=", c, i64(ord("0"))),
                           b.icmp_unsigned("<=", c, i64(ord("9"))))
            field = b.icmp_unsigned("==", spaces, i64(3))
            value2 = b.select(b.and_(field, digit),
                              b.add(b.mul(value, i64(10)), b.sub(c, i64(ord("0")))), value)
            spaces2 = b.add(spaces, b.zext(space, I64))
            stop = b.and_(field, b.icmp_unsigned("==", c, i64(ord("/"))))
            i2 = b.add(i, i64(1))
            i.add_incoming(i2, body)
            spaces.add_incoming(spaces2, body)
            value.add_incoming(value2, body)
            b.cbranch(stop, done, top)
            b.position_at_end(done)
            running = b.phi(I64)
            running.add_incoming(value, top)
            running.add_incoming(value2, body)
            complete = b.phi(ir.IntType(1))
            complete.add_incoming(ir.Constant(ir.IntType(1), 0), top)
            complete.add_incoming(ir.Constant(ir.IntType(1), 1), body)
            cpus = b.sext(b.call(g.nprocs, []), I64)
            cpus = b.select(b.icmp_signed(">", cpus, nslots), cpus, nslots)
            b.store(b.and_(complete, b.icmp_signed(">", running, cpus)), result)
    return b.load(result)


def _adapt(b: ir.IRBuilder, g: _Globals, stalled: ir.Value) -> None:
    """The automatic back-off. A shared job that stalled (the caller waited for helpers
    longer than it worked) because the OS ran something else on a helper's core or on
    the caller's (a helper's chunk took over ``CROWDED`` percent more wall than CPU time,
    ``H_CROWDED``, or the caller's core is crowded, ``NOSPIN``) makes the next
    ``AUTO_LEN`` jobs run alone on their callers. That length starts at ``AUTO_MIN``,
    doubles at each such stall up to ``AUTO_MAX``, and halves after ``AUTO_CLEAN``
    shared jobs in a row without a stall; after a back-off the next job is shared again
    (a probe). Measured here with busy processes (``python -c "while True: pass"``) on
    the 2-core VM, per call, shared against alone: two busy, W7 24-30 ms against 13-14,
    W10 3.3-3.8 against 1.5; one busy, equal (W3 3.9, W7 11-12, W10 1.4). On a quiet
    machine a stall is rare and comes from a helper that woke late, not from a crowded
    core: nothing changes."""
    n = g.get(b, AUTO_LEN)
    n = b.select(b.icmp_signed("<", n, i64(AUTO_MIN)), i64(AUTO_MIN), n)
    crowded = b.or_(b.icmp_signed(">", g.get(b, NOSPIN), i64(0)),
                    b.icmp_unsigned("!=", g.get(b, H_CROWDED), i64(0)))
    with b.if_else(b.and_(stalled, crowded)) as (then, other):
        with then:
            g.set(b, AUTO, n)
            twice = b.mul(n, i64(2))
            g.set(b, AUTO_LEN, b.select(b.icmp_signed(">", twice, i64(AUTO_MAX)),
                                        i64(AUTO_MAX), twice))
            g.set(b, CLEAN, i64(0))
        with other:
            clean = b.add(g.get(b, CLEAN), b.select(stalled, i64(0), i64(1)))
            run = b.icmp_signed(">=", clean, i64(AUTO_CLEAN))
            g.set(b, CLEAN, b.select(run, i64(0), clean))
            half = b.sdiv(n, i64(2))
            half = b.select(b.icmp_signed("<", half, i64(AUTO_MIN)), i64(AUTO_MIN), half)
            g.set(b, AUTO_LEN, b.select(run, half, n))


def _crowding(b: ir.IRBuilder, g: _Globals, own: ir.Value, cpu: ir.Value) -> None:
    """Spinning only while it is cheap: over windows of ``WINDOW_NS`` of the caller's
    own chunks, a window in which it ran less than ``CROWDED`` percent of the time (other
    threads share its core: busy processes, or a spinning helper of its own) stops all
    spinning for ``QUIET_WINDOWS`` windows (helpers then sleep as soon as they leave a
    job and the caller sleeps while it waits), as a blocking wait policy does on an
    oversubscribed machine; windows with the core to itself count that down."""
    acc_o = b.add(g.get(b, WIN_OWN), own)
    acc_c = b.add(g.get(b, WIN_CPU), cpu)
    g.set(b, WIN_OWN, acc_o)
    g.set(b, WIN_CPU, acc_c)
    with b.if_then(b.icmp_signed(">=", acc_o, i64(WINDOW_NS))):
        g.set(b, WIN_OWN, i64(0))
        g.set(b, WIN_CPU, i64(0))
        crowded = b.icmp_signed("<", b.mul(acc_c, i64(100)), b.mul(acc_o, i64(CROWDED)))
        with b.if_else(crowded) as (then, other):
            with then:
                g.add(b, N_CROWDED, 1, "monotonic")
                g.set(b, NOSPIN, i64(QUIET_WINDOWS))
            with other:
                left = g.get(b, NOSPIN)
                g.set(b, NOSPIN, b.select(b.icmp_signed(">", left, i64(0)),
                                          b.sub(left, i64(1)), left))


def _stats(m: ir.Module, g: _Globals) -> None:
    f = ir.Function(m, ir.FunctionType(VOID, [PTR]), STATS_SYMBOL)
    b = ir.IRBuilder(f.append_basic_block("entry"))
    for j, k in enumerate((N_JOBS, N_ALONE, N_JOINED, N_STALLS, N_CROWDED, N_MOVED, N_AUTO,
                           N_KEPT, N_REVOC, N_STOLEN, N_FIBER)):
        b.store(g.get(b, k), b.gep(f.args[0], [i64(j)], source_etype=I64))
    b.ret_void()


def _back_off(m: ir.Module, g: _Globals) -> None:
    """``back_off(n)``: the next ``n`` jobs alone; any call also ends the automatic
    back-off and its memory (``_adapt``), so ``back_off(0)`` shares from the next job."""
    f = ir.Function(m, ir.FunctionType(VOID, [I64]), BACKOFF_SYMBOL)
    b = ir.IRBuilder(f.append_basic_block("entry"))
    b.call(g.lock, [g.joblock])
    g.set(b, SOLO, f.args[0])
    for k in (AUTO, AUTO_LEN, CLEAN):
        g.set(b, k, i64(0))
    b.call(g.unlock, [g.joblock])
    b.ret_void()


def _reset(m: ir.Module, g: _Globals) -> None:
    """After fork() in the child: no helpers, every word and lock as at load."""
    f = ir.Function(m, ir.FunctionType(VOID, []), RESET_SYMBOL)
    b = ir.IRBuilder(f.append_basic_block("entry"))
    for v in (g.mutex, g.wake, g.done, g.joblock):
        b.call(g.memset, [v, ir.Constant(I32, 0), i64(64)])
    b.call(g.memset, [g.job, ir.Constant(I32, 0), i64(NWORDS * LINE * 8)])
    b.call(g.memset, [g.tiles, ir.Constant(I32, 0), i64(TILE_CAP * LINE * 8)])
    b.ret_void()


# -- the migrating program ----------------------------------------------------------------------
# While the cores are crowded the calling thread gets a share of its core, and a program
# that only it can carry on waits whenever the OS runs something else there: its helper
# finishes the job at hand, then has nothing to do until the caller runs again (W3
# beside two busy processes: the caller ran 3.2 ms and waited 2.5 ms per call, its
# helper ran 0.7 ms; pool_ab.py --threads). So then the program itself runs on a stack
# of its own (a ucontext, glibc's getcontext/makecontext/swapcontext), which any of the
# pool's threads carries on: at a revocable tiled GEMM (a large product while crowded)
# the program stops (``_parallel``), the thread it ran on posts the job and joins it like
# any other (``_fjoin``), and the thread that sees its last tile DONE carries the program
# on to its next one (``_drive``), the caller's thread or a helper; since any thread
# takes back a tile whose holder the OS does not run, no thread holds the program.
# Other jobs the carrying thread posts as a caller does (``_parallel``).
PROT_RW, PROT_NONE = 3, 0
MAP_FLAGS = 0x02 | 0x20 | 0x4000 | 0x20000  # private, anonymous, no reserve, stack
GUARD = 1 << 16  # bytes below the stack that fault instead of being overwritten
UC_LINK, UC_STACK_SP, UC_STACK_SIZE = 8, 16, 32  # byte offsets in glibc's x86-64 ucontext_t
MAIN_TYPE = ir.FunctionType(I32, [PTR])  # the generated program: i32 main(ptr args)


def _on_fiber(b: ir.IRBuilder, g: _Globals, probe: ir.Value) -> ir.Value:
    """Whether this code runs on the migrating program's stack (``probe``: an alloca of
    the function's entry block) while such a program runs."""
    if not g.fibers:
        return ir.Constant(ir.IntType(1), 0)
    off = b.sub(b.ptrtoint(probe, I64), g.get(b, FSTACK))
    inside = b.icmp_unsigned("<", off, i64(FIBER_STACK))
    return b.and_(b.icmp_unsigned("!=", g.get(b, FMODE), i64(0)), inside)


def _suspend(b: ir.IRBuilder, g: _Globals, fn: ir.Value, ctx: ir.Value,
             nslots: ir.Value) -> None:
    """On the migrating program's stack: leave the revocable job on ``ctx`` (pending:
    ``_drive`` posts it once this stack is saved) and switch to the thread's own stack;
    back here once a thread finished the job."""
    g.set(b, PFN, b.ptrtoint(fn, I64))
    g.set(b, PCTX, b.ptrtoint(ctx, I64))
    g.set(b, PNSLOTS, nslots)
    g.add(b, N_JOBS, 1, "monotonic")
    g.add(b, N_FIBER, 1, "monotonic")
    g.set(b, FSTATE, i64(F_SUSPENDED), "seq_cst")
    b.call(g.swapcontext, [g.fiber, b.inttoptr(g.get(b, FHOME, "seq_cst"), PTR)])


def _fjoin(m: ir.Module, g: _Globals) -> ir.Function:
    """``i1 fjoin(i64 *seen)``: join the job that is open, if any, while a migrating
    program runs. Its revocable tiled GEMM (slots from 0: the thread that posted it has
    no slot of its own; counted out of ``ACTIVE`` once it has read the job): the first
    to leave its chunks closes it (nothing is left to claim), and then, if every tile is
    DONE, wins the right to carry the program on (``RESUME``: the job's number, taken
    by one thread). Any other job the thread that carries the program posts as a caller
    does (``_parallel``), and it is joined as a helper joins. ``seen``: the job
    generation it looked at."""
    f = ir.Function(m, ir.FunctionType(ir.IntType(1), [PTR]), "yota_pool_fjoin")
    f.linkage = "internal"
    (seen,) = f.args
    b = ir.IRBuilder(f.append_basic_block("entry"))
    ts = b.alloca(I64, 2)
    counted, won = b.alloca(ir.IntType(1)), b.alloca(ir.IntType(1))
    b.store(ir.Constant(ir.IntType(1), 0), won)
    b.store(ir.Constant(ir.IntType(1), 0), counted)
    b.store(g.get(b, GEN, "acquire"), seen)
    join = f.append_basic_block("join")
    tail = f.append_basic_block("tail")
    o = g.get(b, OPEN, "seq_cst")
    b.cbranch(b.icmp_unsigned("!=", o, i64(0)), join, tail)
    b.position_at_end(join)  # count in, then look again (the publisher waits for ACTIVE 0)
    g.add(b, ACTIVE, 1)
    b.store(ir.Constant(ir.IntType(1), 1), counted)
    with b.if_then(b.icmp_unsigned("==", g.get(b, OPEN, "seq_cst"), o)):
        slot = g.add(b, NEXT, 1)
        with b.if_then(b.icmp_signed("<", slot, g.get(b, NSLOTS))):
            fn = b.inttoptr(g.get(b, FN), PTR)
            ctx = b.inttoptr(g.get(b, CTX), PTR)
            rev = b.icmp_unsigned("!=", g.get(b, REVJOB), i64(0))
            with b.if_then(rev):
                b.store(ir.Constant(ir.IntType(1), 0), counted)
                g.add(b, ACTIVE, -1)
            t0, c0 = g.now(b, ts), g.now(b, ts, THREAD_CPU)
            b.call(_FnPtr(fn), [ctx, slot])
            with b.if_then(rev):  # (a job of the carrying thread's: it closes it, times it)
                _crowding(b, g, own=b.sub(g.now(b, ts), t0),
                          cpu=b.sub(g.now(b, ts, THREAD_CPU), c0))
                b.cmpxchg(g.field(b, OPEN), o, i64(0), "seq_cst", "seq_cst")
    with b.if_then(b.load(counted)):
        g.add(b, ACTIVE, -1)
    _signal_done(b, g)
    b.branch(tail)

    b.position_at_end(tail)  # (RESUME first: what follows is that job's)
    r = g.get(b, RESUME, "seq_cst")
    with b.if_then(b.icmp_unsigned("!=", r, i64(0))):
        with b.if_then(_tiles_finished(b, b.inttoptr(g.get(b, CTX, "seq_cst"), PTR))):
            ok = b.extract_value(b.cmpxchg(g.field(b, RESUME), r, i64(0), "seq_cst",
                                           "seq_cst"), 1)
            b.store(ok, won)
    b.ret(b.load(won))
    return f


def _drive(m: ir.Module, g: _Globals, fjoin: ir.Function) -> ir.Function:
    """``void drive(ptr home, i64 *seen)``: carry the migrating program on from this
    thread (its own context saved in ``home``) until it stops at a job; post that job
    (once no thread is still counted in the last one) and join it; if this thread
    finishes it, carry on again. Returns once the program finished, or another thread
    carries it on."""
    f = ir.Function(m, ir.FunctionType(VOID, [PTR, PTR]), "yota_pool_drive")
    f.linkage = "internal"
    home, seen = f.args
    b = ir.IRBuilder(f.append_basic_block("entry"))
    top = f.append_basic_block("resume")
    post = f.append_basic_block("post")
    out = f.append_basic_block("out")
    b.branch(top)
    b.position_at_end(top)
    g.set(b, FHOME, b.ptrtoint(home, I64), "seq_cst")
    g.set(b, FSTATE, i64(F_RUNNING), "seq_cst")
    b.call(g.swapcontext, [home, g.fiber])
    b.cbranch(b.icmp_signed("==", g.get(b, FSTATE, "seq_cst"), i64(F_FINISHED)), out, post)

    b.position_at_end(post)
    spin = f.append_basic_block("post.wait")
    ready = f.append_basic_block("post.ready")
    b.branch(spin)
    b.position_at_end(spin)
    pause = f.append_basic_block("post.pause")
    idle = b.icmp_signed("==", g.get(b, ACTIVE, "seq_cst"), i64(0))
    b.cbranch(idle, ready, pause)
    b.position_at_end(pause)
    g.pause(b)
    b.branch(spin)
    b.position_at_end(ready)
    for k, src in ((FN, PFN), (CTX, PCTX), (NSLOTS, PNSLOTS)):
        g.set(b, k, g.get(b, src))
    g.set(b, REVJOB, i64(1))
    g.set(b, NEXT, i64(0))
    g.set(b, CALLER_CPU, g.cpu(b))  # (for the helpers' _sleep_away: the poster's CPU)
    seq = b.add(g.add(b, JOBSEQ, 1), i64(1))
    g.set(b, OPEN, b.shl(seq, i64(1)), "seq_cst")  # (even: never a caller's job's 1)
    g.set(b, RESUME, seq, "seq_cst")
    _publish(b, g)
    b.cbranch(b.call(fjoin, [seen]), top, out)
    b.position_at_end(out)
    b.ret_void()
    return f


def _trampoline(m: ir.Module, g: _Globals) -> ir.Function:
    """Where the migrating program's stack starts: run the program, record its result,
    and switch to the stack of the thread it finished on (never returns)."""
    f = ir.Function(m, ir.FunctionType(VOID, []), "yota_pool_fiber_main")
    f.linkage = "internal"
    b = ir.IRBuilder(f.append_basic_block("entry"))
    main = b.inttoptr(g.get(b, FFN), PTR)
    rc = b.call(_FnPtr(main, MAIN_TYPE), [b.inttoptr(g.get(b, FARG), PTR)])
    g.set(b, FRC, b.sext(rc, I64))
    g.set(b, FSTATE, i64(F_FINISHED), "seq_cst")
    b.call(g.setcontext, [b.inttoptr(g.get(b, FHOME, "seq_cst"), PTR)])
    b.unreachable()
    return f


def _run(m: ir.Module, g: _Globals, helper: ir.Function) -> None:
    """``i32 yota_pool_run(i32 (*main)(ptr), ptr args, i64 threads)``: ``main(args)``, the
    generated program; while the cores are crowded (``NOSPIN``; ``FIBER_SET`` 1: always,
    2: never), the pool is free and runs jobs shared (not ``back_off``), as a migrating
    program that any of the pool's
    threads carries on (above). The calling thread joins its jobs and carries it on
    too, and returns once it finished."""
    f = ir.Function(m, ir.FunctionType(I32, [PTR, PTR, I64]), RUN_SYMBOL)
    main, args, threads = f.args
    b = ir.IRBuilder(f.append_basic_block("entry"))
    direct = f.append_basic_block("direct")
    if not g.fibers:
        b.branch(direct)
        b.position_at_end(direct)
        b.ret(b.call(_FnPtr(main, MAIN_TYPE), [args]))
        return
    home = b.alloca(I8, UCONTEXT)
    home.align = 64
    seen = b.alloca(I64)
    fjoin, drive = g.fiber_fns(m)
    tramp = _trampoline(m, g)
    mode = g.get(b, FIBER_SET)
    want = b.or_(b.icmp_signed("==", mode, i64(1)),
                 b.and_(b.icmp_signed("==", mode, i64(0)),
                        b.icmp_signed(">", g.get(b, NOSPIN), i64(0))))
    want = b.and_(want, b.icmp_signed(">", threads, i64(1)))
    want = b.and_(want, b.icmp_signed("==", g.get(b, SOLO), i64(0)))  # back_off(n): alone
    lock = f.append_basic_block("lock")
    b.cbranch(want, lock, direct)
    b.position_at_end(direct)
    b.ret(b.call(_FnPtr(main, MAIN_TYPE), [args]))

    b.position_at_end(lock)
    owned = f.append_basic_block("owned")
    b.cbranch(b.icmp_signed("==", b.call(g.trylock, [g.joblock]), ir.Constant(I32, 0)),
              owned, direct)
    b.position_at_end(owned)
    _spawn(f, b, g, helper, threads)
    stack = f.append_basic_block("stack")
    give_up = f.append_basic_block("give_up")
    b.cbranch(b.icmp_signed(">", g.get(b, HELPERS), i64(0)), stack, give_up)
    b.position_at_end(give_up)
    b.call(g.unlock, [g.joblock])
    b.branch(direct)

    b.position_at_end(stack)  # mapped once per process, never unmapped
    with b.if_then(b.icmp_unsigned("==", g.get(b, FSTACK), i64(0)), likely=False):
        p = b.call(g.mmap, [ir.Constant(PTR, None), i64(FIBER_STACK), ir.Constant(I32, PROT_RW),
                            ir.Constant(I32, MAP_FLAGS), ir.Constant(I32, -1), i64(0)])
        with b.if_then(b.icmp_unsigned("!=", b.ptrtoint(p, I64), i64(-1))):
            b.call(g.mprotect, [p, i64(GUARD), ir.Constant(I32, PROT_NONE)])
            g.set(b, FSTACK, b.ptrtoint(p, I64), "seq_cst")
    start = f.append_basic_block("start")
    b.cbranch(b.icmp_unsigned("==", g.get(b, FSTACK), i64(0)), give_up, start)

    b.position_at_end(start)
    g.set(b, FFN, b.ptrtoint(main, I64))
    g.set(b, FARG, b.ptrtoint(args, I64))
    b.call(g.getcontext, [g.fiber])
    uc = lambda off: b.inttoptr(b.add(b.ptrtoint(g.fiber, I64), i64(off)), PTR)  # noqa: E731
    b.store(ir.Constant(PTR, None), uc(UC_LINK))
    b.store(b.inttoptr(g.get(b, FSTACK), PTR), uc(UC_STACK_SP))
    b.store(i64(FIBER_STACK), uc(UC_STACK_SIZE))
    b.call(g.makecontext, [g.fiber, tramp, ir.Constant(I32, 0)])
    g.set(b, FMODE, i64(1), "seq_cst")
    b.call(drive, [home, seen])
    loop, look, join, wait, done = (f.append_basic_block(n)
                                    for n in ("loop", "look", "join", "wait", "done"))
    b.branch(loop)
    b.position_at_end(loop)  # until it finished: join its jobs, carry it on when ours
    fin = b.icmp_signed("==", g.get(b, FSTATE, "seq_cst"), i64(F_FINISHED))
    b.cbranch(fin, done, look)
    b.position_at_end(look)
    new = b.icmp_unsigned("!=", g.get(b, GEN, "acquire"), b.load(seen))
    b.cbranch(new, join, wait)
    b.position_at_end(join)
    with b.if_then(b.call(fjoin, [seen])):
        b.call(drive, [home, seen])
    b.branch(loop)
    b.position_at_end(wait)
    g.pause(b)
    b.branch(loop)
    b.position_at_end(done)
    g.set(b, OPEN, i64(0), "seq_cst")
    g.set(b, RESUME, i64(0), "seq_cst")
    g.set(b, FMODE, i64(0), "seq_cst")
    rc = b.trunc(g.get(b, FRC), I32)
    b.call(g.unlock, [g.joblock])
    b.ret(rc)


def _fiber_mode(m: ir.Module, g: _Globals) -> None:
    """``yota_pool_fiber_mode(n)``: 0 migrating programs while the cores are crowded (the
    default), 1 always, 2 never."""
    f = ir.Function(m, ir.FunctionType(VOID, [I64]), FIBER_MODE_SYMBOL)
    b = ir.IRBuilder(f.append_basic_block("entry"))
    g.set(b, FIBER_SET, f.args[0])
    b.ret_void()


# -- tiled GEMMs ------------------------------------------------------------------------------
# The context of a tiled GEMM, i64 words on the caller's stack: the next tile to claim, the
# number of tiles, tiles per matrix, the extent being split, the tile size, the axis; the
# CBLAS arguments (alpha and beta as their bits); the batch strides (elements) of A, B, C;
# whether its tiles are revocable (then the pool's copy of it is used, whose first word
# holds the job's tag, bits 32-63, its tile count, bits 20-31, and the next tile).
(T_NEXT, T_TOTAL, T_PER, T_DIM, T_STEP, T_AXIS, T_TA, T_TB, T_M, T_N, T_K, T_ALPHA, T_A,
 T_LDA, T_B, T_LDB, T_BETA, T_C, T_LDC, T_SA, T_SB, T_SC, T_REVOC, T_FINISHED) = range(24)
CBLAS_ROW_MAJOR, CBLAS_NO_TRANS = 101, 111
assert TILE_CAP < 1 << 12  # the tile count's field of the claim word


def _gemm_args(ft: ir.Type) -> list[ir.Type]:
    return [I32, I32, I32, I64, I64, I64, ft, PTR, I64, PTR, I64, ft, PTR, I64]


def _gemm_tiles(m: ir.Module, g: _Globals, dtype: str, par: ir.Function | None,
                revocable: ir.Function | None) -> None:
    """``yota_<s|d>gemm_tiles(cblas args..., nbatch, stride_a, stride_b, stride_c, axis,
    step, nslots)``: ``nbatch`` products, the i-th on A + i*stride_a, B + i*stride_b,
    C + i*stride_c (elements), each split into tiles of ``step`` rows (axis 0) or columns
    (axis 1) of C. While the pool runs jobs alone on request (``back_off``), each matrix
    is one tile: the caller makes whole calls instead of paying for tiles nobody shares.
    While the cores are crowded (the automatic back-off, or spinning off: ``_crowding``)
    the tiles of a product of ``REVOC_MIN_MACS`` multiply-adds or more are revocable
    (``_tile_chunks``) and its job is shared; smaller ones run as the back-off says
    (beside two busy processes, W10's batched 8.4M-MAC products took 3.05 ms per call
    shared with revocable tiles against 2.24 alone; W3's 17M and 51M, 6.8 against 7.2)."""
    name, ft, size = _GEMMS[dtype]
    gemm = _declare(m, name, VOID, _gemm_args(ft))
    f = ir.Function(m, ir.FunctionType(VOID, _gemm_args(ft) + [I64] * TILE_EXTRA),
                    GEMM_TILES[dtype])
    args = list(f.args)
    nb, sa, sb, sc, axis, step, nslots = args[14:]
    b = ir.IRBuilder(f.append_basic_block("entry"))
    ctx = b.alloca(I64, T_FINISHED + 1)
    word = lambda k: b.gep(ctx, [i64(k)], source_etype=I64)  # noqa: E731
    dim = b.select(b.icmp_signed("==", axis, i64(0)), args[3], args[4])
    revoc: ir.Value = ir.Constant(ir.IntType(1), 0)
    if par is None:  # NumPy's multithreaded BLAS: whole matrices, one call each
        step = dim
    else:
        solo = b.icmp_signed(">", g.get(b, SOLO), i64(0))
        auto = _auto_alone(b, g)
        if g.linux:  # (the holder's CPU clock: pthread_getcpuclockid)
            tiles = b.mul(_ceil_div(b, dim, step), nb)
            crowded = b.or_(auto, b.icmp_signed(">", g.get(b, NOSPIN), i64(0)))
            macs = b.mul(b.mul(b.mul(args[3], args[4]), args[5]), nb)
            big = b.icmp_signed(">=", macs, i64(REVOC_MIN_MACS))
            wanted = b.or_(b.and_(crowded, big),
                           b.icmp_signed(">", g.get(b, STEAL_MODE), i64(0)))
            fits = b.and_(b.icmp_signed(">", tiles, i64(1)),
                          b.icmp_signed("<=", tiles, i64(TILE_CAP)))
            revoc = b.and_(b.and_(wanted, fits), b.not_(solo))
        step = b.select(b.and_(b.or_(solo, auto), b.not_(revoc)), dim, step)
    per = _ceil_div(b, dim, step)
    total = b.mul(per, nb)
    for k, v in ((T_NEXT, i64(0)), (T_TOTAL, total), (T_PER, per), (T_DIM, dim),
                 (T_STEP, step), (T_AXIS, axis), (T_TA, b.sext(args[1], I64)),
                 (T_TB, b.sext(args[2], I64)), (T_M, args[3]), (T_N, args[4]), (T_K, args[5]),
                 (T_LDA, args[8]), (T_LDB, args[10]), (T_LDC, args[13]), (T_SA, sa),
                 (T_SB, sb), (T_SC, sc), (T_ALPHA, _bits(b, args[6])),
                 (T_BETA, _bits(b, args[11])), (T_REVOC, b.zext(revoc, I64))):
        b.store(v, word(k))
    for k, v in ((T_A, args[7]), (T_B, args[9]), (T_C, args[12])):
        b.store(b.ptrtoint(v, I64), word(k))
    chunks = _tile_chunks(m, g, gemm, ft, size, dtype)
    if par is None:  # NumPy's multithreaded BLAS: every tile on this thread, in order
        b.call(chunks, [ctx, i64(0)])
        b.ret_void()
        return
    assert revocable is not None
    with b.if_else(revoc) as (then, other):
        with then:  # (its context and tile states: _revocable_ctx, under the job lock)
            b.call(revocable, [chunks, ctx, nslots])
        with other:
            b.call(par, [chunks, ctx, nslots])
    b.ret_void()


def _ceil_div(b: ir.IRBuilder, n: ir.Value, d: ir.Value) -> ir.Value:
    return b.sdiv(b.add(n, b.sub(d, i64(1))), d)


def _bits(b: ir.IRBuilder, x: ir.Value) -> ir.Value:
    """A float as an i64 word (its bits, zero-extended)."""
    if x.type == F64:
        return b.bitcast(x, I64)
    return b.zext(b.bitcast(x, I32), I64)


def _float(b: ir.IRBuilder, w: ir.Value, ft: ir.Type) -> ir.Value:
    return b.bitcast(w, F64) if ft == F64 else b.bitcast(b.trunc(w, I32), F32)


def _ctx_word(b: ir.IRBuilder, ctx: ir.Value, k: int) -> ir.Value:
    """Word ``k`` of a tiled GEMM's context. (Atomic: a helper may read the pool's copy
    while a later job's caller writes it; what it read is used only once its claim
    proves it was this job's.)"""
    return b.load_atomic(b.gep(ctx, [i64(k)], source_etype=I64), "monotonic", 8, typ=I64)


class _Tile:
    """Where tile ``t`` of a tiled GEMM's context lies: its A, B and C blocks and its
    extent (``mm`` rows by ``nn`` columns of C)."""

    def __init__(self, b: ir.IRBuilder, ctx: ir.Value, t: ir.Value, size: int) -> None:
        self.b, self.ctx, self.size = b, ctx, size
        get = self.get
        per, step, dim = get(T_PER), get(T_STEP), get(T_DIM)
        bi = b.sdiv(t, per)
        lo = b.mul(b.srem(t, per), step)
        rest = b.sub(dim, lo)
        n = b.select(b.icmp_signed("<", rest, step), rest, step)
        rows = b.icmp_signed("==", get(T_AXIS), i64(0))
        # rows of C: A's rows (A + lo*lda, or A + lo when A is stored transposed) and C's;
        # columns of C: B's columns (B + lo, or B + lo*ldb when transposed) and C's.
        notrans_a = b.icmp_signed("==", get(T_TA), i64(CBLAS_NO_TRANS))
        notrans_b = b.icmp_signed("==", get(T_TB), i64(CBLAS_NO_TRANS))
        a_off = b.select(rows, b.select(notrans_a, b.mul(lo, get(T_LDA)), lo), i64(0))
        b_off = b.select(rows, i64(0), b.select(notrans_b, lo, b.mul(lo, get(T_LDB))))
        c_off = b.select(rows, b.mul(lo, get(T_LDC)), lo)
        self.pa = self.at(T_A, b.add(a_off, b.mul(bi, get(T_SA))))
        self.pb = self.at(T_B, b.add(b_off, b.mul(bi, get(T_SB))))
        self.pc = self.at(T_C, b.add(c_off, b.mul(bi, get(T_SC))))
        self.mm = b.select(rows, n, get(T_M))
        self.nn = b.select(rows, get(T_N), n)

    def get(self, k: int) -> ir.Value:
        return _ctx_word(self.b, self.ctx, k)

    def at(self, k: int, elems: ir.Value) -> ir.Value:
        b = self.b
        return b.gep(b.inttoptr(self.get(k), PTR), [b.mul(elems, i64(self.size))],
                     source_etype=I8)

    def gemm(self, gemm: ir.Function, ft: ir.Type, c: ir.Value, ldc: ir.Value) -> None:
        """This tile's product into ``c`` (leading dimension ``ldc``)."""
        b, get = self.b, self.get
        c32 = lambda k: b.trunc(get(k), I32)  # noqa: E731
        b.call(gemm, [ir.Constant(I32, CBLAS_ROW_MAJOR), c32(T_TA), c32(T_TB), self.mm,
                      self.nn, get(T_K), _float(b, get(T_ALPHA), ft), self.pa, get(T_LDA),
                      self.pb, get(T_LDB), _float(b, get(T_BETA), ft), c, ldc])

    def copy(self, g: _Globals, dst: ir.Value, ldd: ir.Value, src: ir.Value,
             lds: ir.Value) -> None:
        """The tile's ``mm`` rows of ``nn`` elements from ``src`` to ``dst``."""
        b, size = self.b, self.size
        def row(r: ir.Value, _: list[ir.Value]) -> list[ir.Value]:
            at = lambda p, ld: b.gep(p, [b.mul(b.mul(r, ld), i64(size))],  # noqa: E731
                                     source_etype=I8)
            b.call(g.memcpy, [at(dst, ldd), at(src, lds), b.mul(self.nn, i64(size))])
            return []

        loop(b, 0, self.mm, 1, [], row, "tile.copy")


def _state(b: ir.IRBuilder, tag: ir.Value, st: int, epoch: ir.Value | None = None) -> ir.Value:
    """A revocable tile's state word: (job tag << 16) | (epoch << 3) | ``st``."""
    w = b.or_(b.shl(tag, i64(16)), i64(st))
    return w if epoch is None else b.or_(w, b.shl(epoch, i64(3)))


def _tile_chunks(m: ir.Module, g: _Globals, gemm: ir.Function, ft: ir.Type, size: int,
                 dtype: str) -> ir.Function:
    """``chunks(ctx, slot)``: claim tiles until none is left, one GEMM call each.

    Revocable tiles (``T_REVOC``), so that a thread the OS stops running never stalls
    the job: whoever claims a tile announces it in the tile's state word (FREE -> HELD,
    with its CPU clock beside it), computes it into a scratch buffer of its own, and
    copies it into C only if it wins HELD -> COMMIT (then DONE, counted in
    ``T_FINISHED``). A thread with nothing left to claim watches the tiles still out
    (``_take_back``): one whose holder's CPU clock advanced less than a quarter of
    ``STEAL_NS`` over that long (or that was claimed but not announced for that long)
    it takes back (HELD under a new epoch, with its own clock) and computes the same
    way; it returns once every tile is DONE. Any thread may take back any other's tile,
    the caller's too (the job is done when ``T_FINISHED`` reaches the tile count, not
    when its caller returns from here). A thread that loses its tile leaves the job at
    once, touching nothing of the caller's but the operands it is still reading: the
    taker counts it in ``STALE`` and the generated program waits for ``STALE`` to drop
    to zero before it returns (``yota_pool_quiesce``), since the operands may be freed
    then."""
    f = ir.Function(m, CHUNKS_TYPE, f"yota_gemm_tiles.{dtype}")
    f.linkage = "internal"
    ctx, slot = f.args
    run = _tile_run(m, g, gemm, ft, size, dtype)
    b = ir.IRBuilder(f.append_basic_block("entry"))
    get = lambda k: _ctx_word(b, ctx, k)  # noqa: E731
    ts = b.alloca(I64, 2)
    scratch, cap = b.alloca(PTR), b.alloca(I64)
    clk32, clk = b.alloca(I32), b.alloca(I64)
    mytag = b.alloca(I64)
    since, ran = b.alloca(I64, TILE_CAP), b.alloca(I64, TILE_CAP)  # the take-back's watch
    tvar, pending = b.alloca(I64), b.alloca(I64)
    b.store(ir.Constant(PTR, None), scratch)
    b.store(i64(0), cap)
    b.store(i64(-1), clk)
    revoc = b.icmp_unsigned("!=", get(T_REVOC), i64(0))
    if g.linux:
        with b.if_then(revoc):
            b.call(g.cpuclock, [b.call(g.self_, []), clk32])
            b.store(b.sext(b.load(clk32), I64), clk)
    top = f.append_basic_block("claim")
    body = f.append_basic_block("tile")
    direct = f.append_basic_block("direct")
    held = f.append_basic_block("held")
    work = f.append_basic_block("work")
    stale = f.append_basic_block("stale")
    done = f.append_basic_block("done")
    out = f.append_basic_block("out")
    b.branch(top)

    b.position_at_end(top)  # (revocable: the claim word says which job's tile it is)
    w = b.atomic_rmw("add", b.gep(ctx, [i64(T_NEXT)], source_etype=I64), i64(1), "acq_rel")
    t = b.select(revoc, b.and_(w, i64(0xFFFFF)), w)
    total = b.select(revoc, b.and_(b.lshr(w, i64(20)), i64(0xFFF)), get(T_TOTAL))
    b.store(b.lshr(w, i64(32)), mytag)
    b.cbranch(b.icmp_signed("<", t, total), body, done)
    b.position_at_end(body)
    b.cbranch(revoc, held, direct)

    b.position_at_end(direct)  # plain tiles: straight into C
    tile = _Tile(b, ctx, t, size)
    tile.gemm(gemm, ft, tile.pc, get(T_LDC))
    b.branch(top)

    b.position_at_end(held)  # a revocable tile: announce it, then compute and commit
    tag = b.load(mytag)
    b.store_atomic(b.load(clk), g.tile(b, t, 1), "monotonic", 8)
    mine = _state(b, tag, T_HELD)
    ok = b.extract_value(b.cmpxchg(g.tile(b, t), _state(b, tag, T_FREE), mine, "seq_cst",
                                   "seq_cst"), 1)
    b.cbranch(ok, work, stale)
    b.position_at_end(work)
    won = b.call(run, [ctx, t, mine, tag, scratch, cap])
    b.cbranch(won, top, stale)

    b.position_at_end(stale)  # another thread took it back: leave the job at once
    b.call(g.free, [b.load(scratch)])
    g.add(b, STALE, -1)
    b.ret_void()

    b.position_at_end(done)
    with b.if_then(revoc):
        _take_back(b, g, run, ctx, b.load(mytag), ts, (since, ran, tvar, pending),
                   (scratch, cap, clk), stale)
    b.branch(out)
    b.position_at_end(out)
    b.call(g.free, [b.load(scratch)])
    b.ret_void()
    return f


def _tile_run(m: ir.Module, g: _Globals, gemm: ir.Function, ft: ir.Type, size: int,
              dtype: str) -> ir.Function:
    """``i1 run(ctx, t, held, tag, scratch**, cap*)``: revocable tile ``t``, held under
    state word ``held``, computed into the thread's scratch buffer (grown by malloc as
    needed; C's block copied in first where beta reads it) and copied into C if this
    thread wins HELD -> COMMIT; then DONE, counted in ``T_FINISHED``. Without memory
    for the scratch: the commit is won first, then the tile computed straight into C.
    Returns whether this thread won."""
    f = ir.Function(m, ir.FunctionType(ir.IntType(1), [PTR, I64, I64, I64, PTR, PTR]),
                    f"yota_gemm_tile.{dtype}")
    f.linkage = "internal"
    ctx, t, held, tag, scratch, cap = f.args
    b = ir.IRBuilder(f.append_basic_block("entry"))
    get = lambda k: _ctx_word(b, ctx, k)  # noqa: E731
    tile = _Tile(b, ctx, t, size)
    need = b.mul(b.mul(tile.mm, tile.nn), i64(size))
    with b.if_then(b.icmp_signed(">", need, b.load(cap, typ=I64))):
        b.call(g.free, [b.load(scratch, typ=PTR)])
        p = b.call(g.malloc, [need])
        b.store(p, scratch)
        b.store(b.select(b.icmp_unsigned("==", b.ptrtoint(p, I64), i64(0)), i64(0), need),
                cap)
    buf = b.load(scratch, typ=PTR)
    commit = lambda: b.extract_value(b.cmpxchg(  # noqa: E731
        g.tile(b, t), held, _state(b, tag, T_COMMIT), "seq_cst", "seq_cst"), 1)
    finish = lambda: (b.store_atomic(_state(b, tag, T_DONE), g.tile(b, t), "release", 8),  # noqa: E731
                      b.atomic_rmw("add", b.gep(ctx, [i64(T_FINISHED)], source_etype=I64),
                               i64(1), "acq_rel"))
    nomem = f.append_basic_block("nomem")
    into = f.append_basic_block("scratch")
    lost = f.append_basic_block("lost")
    b.cbranch(b.icmp_unsigned("==", b.ptrtoint(buf, I64), i64(0)), nomem, into)
    b.position_at_end(nomem)
    won_c = f.append_basic_block("nomem.won")
    b.cbranch(commit(), won_c, lost)
    b.position_at_end(won_c)
    tile.gemm(gemm, ft, tile.pc, get(T_LDC))
    finish()
    b.ret(ir.Constant(ir.IntType(1), 1))
    b.position_at_end(into)
    with b.if_then(b.icmp_unsigned("!=", get(T_BETA), i64(0))):
        tile.copy(g, buf, tile.nn, tile.pc, get(T_LDC))
    tile.gemm(gemm, ft, buf, tile.nn)
    won = f.append_basic_block("won")
    b.cbranch(commit(), won, lost)
    b.position_at_end(won)
    tile.copy(g, tile.pc, get(T_LDC), buf, tile.nn)
    finish()
    b.ret(ir.Constant(ir.IntType(1), 1))
    b.position_at_end(lost)
    b.ret(ir.Constant(ir.IntType(1), 0))
    return f


def _take_back(b: ir.IRBuilder, g: _Globals, run: ir.Function, ctx: ir.Value, tag: ir.Value,
               ts: ir.Value, watch: tuple[ir.Value, ...], own: tuple[ir.Value, ...],
               stale: ir.Block) -> None:
    """A thread's end of a revocable job (``_tile_chunks``), once no tile is left to
    claim: scan the tiles until each is DONE, taking back and computing (``run``) any
    whose holder the OS does not run. A tile still out is watched from the scan that
    first sees it (``since``, and its holder's CPU clock then, ``ran``); after
    ``STEAL_NS`` a holder that ran less than a quarter of that, or a claim never
    announced, loses it (``STEAL_MODE`` 2: at once). A tile being copied in (COMMIT) is
    waited for. A tile of another job (the job is over, and the pool has moved on) ends
    the watch. If this thread loses a tile it took back, it goes to ``stale``."""
    f = b.function
    since, ran, tvar, pending = watch
    scratch, cap, clk = own
    get = lambda k: _ctx_word(b, ctx, k)  # noqa: E731
    slot = lambda p, t: b.gep(p, [t], source_etype=I64)  # noqa: E731
    total = get(T_TOTAL)
    b.call(g.memset, [since, ir.Constant(I32, 0), b.mul(total, i64(8))])
    eager = b.icmp_signed(">=", b.and_(g.get(b, STEAL_MODE), i64(3)), i64(2))
    blocks = {n: f.append_basic_block(f"back.{n}") for n in (
        "scan", "loop", "body", "out", "watch", "clock", "noclock", "judge", "first", "old",
        "grab", "lost", "mine", "computed", "next", "scanned", "wait", "finish")}
    bb = blocks.__getitem__
    b.branch(bb("scan"))

    b.position_at_end(bb("scan"))
    now = g.now(b, ts)
    b.store(i64(0), tvar)
    b.store(i64(0), pending)
    b.branch(bb("loop"))

    b.position_at_end(bb("loop"))
    t = b.load(tvar)
    b.cbranch(b.icmp_signed("<", t, total), bb("body"), bb("scanned"))

    b.position_at_end(bb("body"))
    w = b.load_atomic(g.tile(b, t), "acquire", 8, typ=I64)
    st = b.and_(w, i64(7))
    finished = b.or_(b.icmp_unsigned("==", w, _state(b, tag, T_DONE)),
                     b.icmp_unsigned("!=", b.lshr(w, i64(16)), tag))
    b.cbranch(finished, bb("next"), bb("out"))

    b.position_at_end(bb("out"))  # still out: wait for a copy in progress, else watch
    b.store(b.add(b.load(pending), i64(1)), pending)
    b.cbranch(b.icmp_unsigned("==", st, i64(T_COMMIT)), bb("next"), bb("watch"))

    b.position_at_end(bb("watch"))
    b.cbranch(b.icmp_unsigned("==", st, i64(T_HELD)), bb("clock"), bb("noclock"))
    b.position_at_end(bb("clock"))  # the holder's CPU time (0 if it cannot be read)
    cid = b.trunc(b.load_atomic(g.tile(b, t, 1), "monotonic", 8, typ=I64), I32)
    rc = b.call(g.clock, [cid, ts])
    sec = b.load(b.gep(ts, [i64(0)], source_etype=I64), typ=I64)
    nsec = b.load(b.gep(ts, [i64(1)], source_etype=I64), typ=I64)
    held_ns = b.select(b.icmp_signed("==", rc, ir.Constant(I32, 0)),
                       b.add(b.mul(sec, i64(1_000_000_000)), nsec), i64(0))
    b.branch(bb("judge"))
    b.position_at_end(bb("noclock"))  # claimed, not yet announced
    b.branch(bb("judge"))
    b.position_at_end(bb("judge"))
    c = b.phi(I64)
    c.add_incoming(held_ns, bb("clock"))
    c.add_incoming(i64(0), bb("noclock"))
    w0 = b.load(slot(since, t))
    b.cbranch(b.and_(b.icmp_signed("==", w0, i64(0)), b.not_(eager)), bb("first"), bb("old"))
    b.position_at_end(bb("first"))
    b.store(now, slot(since, t))
    b.store(c, slot(ran, t))
    b.branch(bb("next"))
    b.position_at_end(bb("old"))
    dt = b.sub(now, w0)
    due = b.icmp_signed(">=", dt, i64(STEAL_NS))
    progressed = b.icmp_signed(">=", b.mul(b.sub(c, b.load(slot(ran, t))), i64(4)), dt)
    with b.if_then(b.and_(b.and_(due, progressed), b.not_(eager))):  # it runs: a new window
        b.store(now, slot(since, t))
        b.store(c, slot(ran, t))
    take = b.or_(eager, b.and_(due, b.not_(progressed)))
    b.cbranch(take, bb("grab"), bb("next"))

    b.position_at_end(bb("grab"))  # STALE first: the loser's decrement follows it
    g.add(b, STALE, 1)
    epoch = b.and_(b.add(b.lshr(w, i64(3)), i64(1)), i64(0x1FFF))
    hw = _state(b, tag, T_HELD, epoch)
    ok = b.extract_value(b.cmpxchg(g.tile(b, t), w, hw, "seq_cst", "seq_cst"), 1)
    b.cbranch(ok, bb("mine"), bb("lost"))
    b.position_at_end(bb("lost"))  # it moved on meanwhile (announced, or committing)
    g.add(b, STALE, -1)
    b.store(i64(0), slot(since, t))
    b.branch(bb("next"))
    b.position_at_end(bb("mine"))
    b.store_atomic(b.load(clk), g.tile(b, t, 1), "monotonic", 8)
    g.add(b, N_STOLEN, 1, "monotonic")
    won = b.call(run, [ctx, t, hw, tag, scratch, cap])
    b.cbranch(won, bb("computed"), stale)
    b.position_at_end(bb("computed"))
    b.store(b.sub(b.load(pending), i64(1)), pending)
    b.store(i64(0), slot(since, t))
    b.branch(bb("next"))

    b.position_at_end(bb("next"))
    b.store(b.add(t, i64(1)), tvar)
    b.branch(bb("loop"))

    b.position_at_end(bb("scanned"))
    b.cbranch(b.icmp_signed("==", b.load(pending), i64(0)), bb("finish"), bb("wait"))
    b.position_at_end(bb("wait"))  # (no sched_yield: beside a busy process that gives
    g.pause(b)                      # this thread's core away for a time slice)
    b.branch(bb("scan"))
    b.position_at_end(bb("finish"))
