"""A process-wide pool of helper threads for splitting large kernels, itself generated
with llvmlite (``pool_ir.py`` builds its IR; a process that finds the object code in the
cache does not import it, nor llvmlite's IR layer) and loaded once per process (never
unloaded).

Generated code calls it by name:

    void yota_parallel(void (*chunks)(ptr ctx, i64 slot), ptr ctx, i64 nslots)

``chunks`` claims pieces of work from ``ctx`` until none is left; ``yota_parallel``
runs it as slot 0 on the calling thread and lets up to ``nslots - 1`` helpers join as
slots 1, 2, ... It returns once every helper that joined has left ``chunks``: after
that no helper touches ``ctx`` or the caller's module (which may then be unloaded), and
a helper that wakes up late finds the job closed. One job runs at a time; a caller that
finds the pool busy runs its chunks alone. A fork()ed child starts with no helpers
(``os.register_at_fork`` resets the pool's state there): its jobs run on the calling
thread until it posts one that creates helpers of its own.

Scheduling, so that a thread the OS does not run never stalls the caller for long:

- The job is posted and joined with atomics (no lock a descheduled thread could hold):
  the caller publishes the job and bumps a generation word; helpers claim slots with an
  atomic counter and count themselves in and out of ``ACTIVE``.
- A helper that finished a job spins (``pause``) for ``IDLE_SPIN_NS`` (1 ms) watching for
  the next generation before it sleeps on a condition variable, so the parallel regions
  of one call (a GEMM, then a split kernel, then the next GEMM) find it awake on its own
  core instead of paying a wake-up each; the caller signals the condition variable only
  when some helper sleeps. 1 ms covers the serial steps between a call's parallel
  regions and the Python between calls of a loop: with 100 us, W7's helper slept during
  its 100-200 us copies and joined 1597-1905 of 2520 jobs when each sample of two calls
  followed 0.25 s idle (8.9-10.3 ms per call), with 1 ms 2037-2450 (7.5-8.1 ms); after a
  wake the VM's scheduler often put the helper on the caller's vCPU, so each needless
  sleep cost a move as well (below: a sleeping helper now keeps off that vCPU).
- The caller, its own chunks done, spins up to ``SPIN_NS`` (100 us) for helpers still in
  a chunk, then sleeps until the last one leaves.
- Spinning only while it is cheap (``pool_ir._crowding``): the caller times its own chunks in
  wall and CPU time (``CLOCK_THREAD_CPUTIME_ID``); a 2 ms window in which it ran less
  than ``CROWDED`` percent of the time (busy processes, or its own spinning helper,
  share its core) turns spinning off for ``QUIET_WINDOWS`` windows: helpers sleep as
  soon as they leave a job and the caller sleeps while it waits, as a blocking wait
  policy does on an oversubscribed machine. Spinning threads also ``sched_yield``
  every few microseconds, so a thread waiting for the same core runs.
- A helper that starts a job on its caller's CPU moves off it (``pool_ir._move_off``: its own
  affinity narrowed for a moment, then given back); the caller posts its CPU with the
  job. This VM's scheduler puts a helper woken after a quiet spell on the caller's
  vCPU: W3 beside NumPy's threaded OpenBLAS, 30 samples of 3 calls, had helpers joining
  247 of 450 jobs at 4.2 ms per call, and with the move 340-363 of 450 at 2.9-3.0 ms
  (~100 moves).
- A helper about to sleep takes the CPU of the last job's poster out of its affinity
  and gives the old affinity back once woken (``pool_ir._sleep_away``, ``_come_back``;
  an affinity someone else set meanwhile is kept, unless it is the very one the helper
  set). Linux queued the woken helper on the poster's vCPU in 35-38 of 40 wakes after
  0.12 s idle (``tools/wake_probe.c``), where it shares the caller's core until it
  moves or waits out the caller's time slice: its run-queue wait in W3's first call
  after such a rest was 1.3-1.6 ms (``/proc/self/task/*/schedstat``), and that call
  took 3.4-4.1 ms against 2.1-3.0 for the next (6 processes, medians of 40 rests);
  kept off that vCPU, 2.7-3.6 ms against 2.2-3.1, hot loops unchanged.
- A shared job that stalled because the OS ran something else on a helper's core or
  on the caller's makes the next jobs run alone for a while (tiled GEMMs excepted:
  their tiles are revocable then, below) (``pool_ir._adapt``: 8 jobs,
  doubling at each further such stall up to 512, a shared probe after each back-off
  unless ``/proc/loadavg`` shows more runnable threads than CPUs, when it goes on:
  ``pool_ir._oversubscribed``): with busy processes on every core a stall costs a time
  slice (milliseconds) against the 100 us or so that sharing gains. A stall alone is not enough: on a quiet machine a helper
  that woke late stalls a job now and then, and backing off on those made W7 slower
  (hot loop 10.2-10.5 ms against 6.7-7.0). An earlier rate-based rule (jobs alone
  while sharing did less work per second) measured slower under ``--load 2`` and
  misfired on a quiet machine. ``back_off(n)`` runs the next ``n`` jobs alone on
  request.

- Revocable tiles (``pool_ir._tile_chunks``): while the cores are crowded (the automatic
  back-off, or spinning off) a tiled GEMM's job is shared all the same, on the pool's own
  copy of its context, and a tile held by a thread the OS does not run is taken back:
  each thread computes its tile into a scratch buffer and copies it into C only if it
  wins the tile's state word; a thread with no tile left to claim takes back a tile
  whose holder's CPU clock (``pthread_getcpuclockid``) advanced less than a quarter of
  ``STEAL_NS`` over that long, and computes it the same way (the caller's tiles too:
  the job is done when every tile is, and the caller waits for that). A helper that
  joined such a job has left it for the job's drain as soon as it read it (it touches
  only the pool's copy), and one that lost its tile leaves at once; generated code that
  uses the tiled GEMMs calls ``yota_pool_quiesce`` before it returns, which waits until
  no thread is still reading a taken-back tile's operands (``STALE``). W3 beside two
  busy processes: 7.0 ms per call against 7.6-8.1 with its jobs alone, W9 8.1 against
  9.3 (before migrating programs, below).

- Migrating programs (``pool_ir._run``): while the cores are crowded, a program that only
  its calling thread can carry on stops whenever the OS runs something else on that
  core (W3 beside two busy processes, per call: the caller ran 3.2 ms and waited 2.5 ms
  for its core, the helper ran 0.7 ms: ``tools/pool_ab.py --threads``). Generated code
  enters through ``yota_pool_run(main, args, threads)``, which then runs the program on
  a stack of its own (glibc's ucontext, x86-64 Linux) that any of the pool's threads
  carries on: at a revocable tiled GEMM the program stops, the thread it ran on posts
  the job and joins it like the others, and the thread that sees its last tile DONE
  carries the program on; other jobs run on the thread that carries it, as in the
  back-off. The calling thread joins the jobs too and returns once the program
  finished. Any thread takes back a tile whose holder the OS does not run, the
  caller's included, so neither a descheduled helper nor the descheduled caller holds
  the program. W3 beside two busy processes: 5.3-5.5 ms per call against 6.6 ms fixed
  to the caller (JAX 5.6-5.7; ``tools/pool_ab.py``). ``fiber_mode(n)``: 0 while crowded
  (the default), 1 always, 2 never.

``yota_pool_stats(i64 *out)`` copies the pool's counters (``STATS``: jobs posted, jobs
run alone on request, jobs a helper joined, stalls, crowded windows, helper moves, jobs
run alone by the automatic back-off, back-offs kept going, revocable jobs, tiles taken
back, jobs of migrating programs) for ``stats()``; ``yota_pool_back_off(n)``,
``yota_pool_steal_mode(n)`` (when tiles are revocable: ``steal_mode``),
``yota_pool_fiber_mode(n)``, ``yota_pool_run(main, args, threads)``,
``yota_pool_quiesce()`` and ``yota_pool_reset()`` (after fork) are its other exports.

When BLAS is bound, the module also holds the tiled GEMMs (``yota_sgemm_tiles``,
``yota_dgemm_tiles``): the CBLAS arguments of a row-major ``C = op(A) op(B)`` plus a batch
(count and element strides of A, B, C), ``axis`` (0: split the rows of C, 1: its
columns), ``step`` (rows or columns per tile) and ``nslots``. Tiles are claimed one at a
time by the caller and the helpers, each a single-threaded ``yota_sgemm``/``yota_dgemm``
call on its block (Yota's own BLAS instance, ``blas.py``), so a helper that the OS
deschedules delays at most its one tile while the caller takes the rest. Without Yota's
own instance (the names are bound to NumPy's multithreaded OpenBLAS) the tiled GEMM makes
one call on the whole product.
"""

from __future__ import annotations

import ctypes
import os
import threading

from .blas import single_threaded
from .jit import runtime_module
from .pool_layout import (  # noqa: F401  (the pool's public names)
    BACKOFF_SYMBOL,
    FIBER_MODE_SYMBOL,
    GEMM_TILES,
    HELPER_NAME,
    QUIESCE_SYMBOL,
    RESET_SYMBOL,
    RUN_SYMBOL,
    STATS,
    STATS_SYMBOL,
    STEAL_MODE_SYMBOL,
    SYMBOL,
    TILE_EXTRA,
)
from .target import host

_lock = threading.Lock()
_engine: object = None  # what holds the loaded pool (objload image or MCJIT engine)
_addresses: dict[str, int] = {}


def ensure_pool() -> None:
    """Compile the pool once and bind ``yota_parallel`` for the JIT's linker."""
    global _engine
    if _engine is not None:
        return
    with _lock:
        if _engine is None:
            target = host()
            tiles = target.blas and target.threads > 1 and single_threaded()
            names = [SYMBOL, STATS_SYMBOL, RESET_SYMBOL, BACKOFF_SYMBOL, QUIESCE_SYMBOL,
                     STEAL_MODE_SYMBOL, RUN_SYMBOL, FIBER_MODE_SYMBOL,
                     *(GEMM_TILES.values() if target.blas else ())]
            # compiled once; later processes read its object code by this spec, without
            # building the IR or importing llvmlite's binding (jit.runtime_module)
            spec = {"module": "pool", "triple": target.triple, "blas": target.blas,
                    "tiles": bool(tiles)}
            loaded = runtime_module(spec, None, lambda: _ir(target.triple, target.blas, tiles),
                                    target, names)
            _addresses.update(loaded.addresses)
            if hasattr(os, "register_at_fork"):
                os.register_at_fork(after_in_child=_reset_in_child)
            _engine = loaded.engine


def stats() -> dict[str, int]:
    """The pool's counters since the process started (``STATS``; zeros before the pool
    is built): jobs posted, those run alone (``back_off``), those a helper joined,
    stalls (the caller waited for helpers longer than it worked, over ``STALL_NS``),
    crowded windows (spinning turned off: ``pool_ir._crowding``), the times a helper moved
    off its caller's CPU (``pool_ir._move_off``), jobs run alone by the automatic back-off
    after stalls (``pool_ir._adapt``), the back-offs kept going because more threads
    were runnable than there are cores (``pool_ir._oversubscribed``), tiled GEMMs run as
    revocable jobs, tiles taken back from a thread the OS did not run
    (``pool_ir._tile_chunks``), and jobs of migrating programs (``pool_ir._run``)."""
    if _engine is None:
        return dict.fromkeys(STATS, 0)
    out = (ctypes.c_int64 * len(STATS))()
    ctypes.CFUNCTYPE(None, ctypes.c_void_p)(_addresses[STATS_SYMBOL])(ctypes.addressof(out))
    return dict(zip(STATS, out, strict=True))


def back_off(jobs: int) -> None:
    """Run the pool's next ``jobs`` jobs on their calling threads alone (a tiled GEMM
    then makes one call per matrix); 0 shares again from the next job (this also ends
    the automatic back-off after stalls, ``pool_ir._adapt``). For comparing the two, or for a
    caller that knows the other cores are taken."""
    ensure_pool()
    ctypes.CFUNCTYPE(None, ctypes.c_int64)(_addresses[BACKOFF_SYMBOL])(max(0, int(jobs)))


def steal_mode(mode: int) -> None:
    """When tiled GEMMs are revocable (``pool_ir._tile_chunks``): 0 while the cores are
    crowded (the default), 1 whenever their job is shared, 2 whenever shared and every
    tile a helper holds taken back as soon as the caller has none left (for tests: it
    exercises the helpers' abandoned tiles on every job)."""
    ensure_pool()
    ctypes.CFUNCTYPE(None, ctypes.c_int64)(_addresses[STEAL_MODE_SYMBOL])(max(0, int(mode)))


def fiber_mode(mode: int) -> None:
    """Migrating programs (``pool_ir._run``: the program runs on a stack of its own that
    any of the pool's threads carries on from one parallel job to the next): 0 while the
    cores are crowded (the default), 1 always, 2 never (x86-64 Linux with glibc;
    elsewhere never)."""
    ensure_pool()
    ctypes.CFUNCTYPE(None, ctypes.c_int64)(_addresses[FIBER_MODE_SYMBOL])(max(0, int(mode)))


def _reset_in_child() -> None:
    """After fork(): the child has none of the parent's helper threads, and locks or
    counts they held are meaningless there."""
    ctypes.CFUNCTYPE(None)(_addresses[RESET_SYMBOL])()


def _ir(triple: str, blas: bool, tiles: bool) -> str:
    """The pool's LLVM IR (built only when its object code is not in the cache: the
    generator, and llvmlite's IR layer with it, is imported here, not by a cache hit)."""
    from .pool_ir import module

    return str(module(triple, blas, tiles))
