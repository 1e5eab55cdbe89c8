"""Yota's fork-join pool: helper threads that share the chunks of large kernels and the
tiles of large GEMMs with the thread that calls a compiled program. It is generated with
llvmlite (``pool_ir.py`` builds its IR; a process that finds the object code in the
cache imports neither it nor llvmlite's IR layer) and loaded once per process.

Generated code calls

    void yota_parallel(void (*chunks)(ptr ctx, i64 slot), ptr ctx, i64 nslots)

``chunks`` claims pieces of work from ``ctx`` with an atomic counter until none is left.
``yota_parallel`` publishes the job, runs ``chunks(ctx, 0)`` on the calling thread, and
lets up to ``min(nslots, num_threads()) - 1`` helpers join as slots 1, 2, ...; it
returns once every helper that joined has left ``chunks``. Since the caller claims
chunks too, a helper that the OS does not run delays the job by at most the one chunk
it holds. One job runs at a time: a caller that finds the pool busy (another Python
thread's job, or a job inside a job) runs its chunks alone.

Waiting: a helper that finished a job spins 1 ms (``pool_ir.IDLE_SPIN_NS``) watching for
the next one, so the parallel regions of one call find it awake, then sleeps on a futex;
the caller, its own chunks done, spins 100 us for its helpers, then sleeps on a futex
until the last one leaves. Spinning threads offer their core (``sched_yield``) every few
microseconds. The shared state is a few atomic words (no mutex, nothing to initialise
but zeros); every synchronising access is sequentially consistent.

Threads: ``YOTA_NUM_THREADS`` (read once, when this module is imported) or
``set_num_threads(n)`` (also ``yota.set_num_threads``) chooses how many threads a job may
use, the caller included; the default is the cores this process may use, at most 8.
It is also the default ``threads`` of programs compiled from then on (the chunk and tile
counts their code is built with); a program built for more threads than the setting
runs with the setting's.

Platforms: Linux on x86-64 and AArch64 (``pool_ir.supported``); elsewhere every job
runs on its calling thread. After ``fork()`` (``os.fork``, ``multiprocessing``'s fork
start method) the child has none of its parent's helpers: ``os.register_at_fork``
resets the pool there, and the child's first shared job starts helpers of its own.

With BLAS bound, the module also holds the tiled GEMMs ``yota_sgemm_tiles`` and
``yota_dgemm_tiles`` (``abi.GEMM_TILES``: a row-major ``C = op(A) op(B)`` for a batch,
split into row or column tiles that the caller and the helpers claim one at a time,
each a single-threaded call of Yota's own BLAS instance, ``blas.py``). Without that
instance, or with one thread, each matrix is one call on the calling thread.
"""

from __future__ import annotations

import ctypes
import numbers
import os
import threading

from yota.ir.errors import YotaError

from ..abi import GEMM_TILES, POOL_RESET, POOL_STATS, POOL_THREADS, TILE_EXTRA
from ..abi import POOL_SYMBOL as SYMBOL
from .blas import single_threaded
from .jit import runtime_module
from .target import host

__all__ = ["SYMBOL", "GEMM_TILES", "TILE_EXTRA", "STATS", "ENV", "ensure_pool", "stats",
           "num_threads", "set_num_threads", "single_threaded"]

ENV = "YOTA_NUM_THREADS"
MAX_THREADS = 256
STATS = ("jobs", "alone", "joined", "helpers")  # yota_pool_stats's words, in order

_lock = threading.Lock()
_engine: object = None  # what holds the loaded pool (objload image or MCJIT engine)
_addresses: dict[str, int] = {}
_threads: int | None = None  # set_num_threads's value, else YOTA_NUM_THREADS's


def _check(n: object, what: str) -> int:
    """``n`` as a thread count, or a clear error naming ``what`` it came from."""
    k = int(n) if isinstance(n, numbers.Integral) and not isinstance(n, bool) else 0
    if not 1 <= k <= MAX_THREADS:
        raise YotaError(f"{what} must be a whole number of threads from 1 to "
                        f"{MAX_THREADS}, not {n!r}")
    return k


def _from_env() -> int | None:
    value = os.environ.get(ENV, "").strip()
    what = f"the environment variable {ENV}"
    if value and not value.isdigit():
        _check(value, what)  # (raises, naming the value)
    return _check(int(value), what) if value else None


_threads = _from_env()


def num_threads() -> int:
    """The most threads one job of the pool may use, the calling thread included:
    ``set_num_threads``'s value, else ``YOTA_NUM_THREADS``, else the cores this process
    may use (at most 8)."""
    return host().threads if _threads is None else _threads


def set_num_threads(n: int) -> None:
    """Use at most ``n`` threads per job (the caller and ``n - 1`` helpers), in programs
    compiled before and after; programs compiled from now on split their work for ``n``
    threads by default (and are cached apart from those split for another number)."""
    global _threads
    k = _check(n, "set_num_threads's argument")
    with _lock:
        _threads = k
        if _engine is not None:
            ctypes.CFUNCTYPE(None, ctypes.c_int64)(_addresses[POOL_THREADS])(k)


def ensure_pool() -> None:
    """Load the pool once (compiled, or its object code read from the cache by spec) and
    bind its names for generated code."""
    global _engine
    if _engine is not None:
        return
    with _lock:
        if _engine is None:
            target = host()
            tiles = bool(target.blas and single_threaded())
            names = [SYMBOL, POOL_THREADS, POOL_RESET, POOL_STATS,
                     *(GEMM_TILES.values() if target.blas else ())]
            # later processes read its object code by this spec, without building the IR
            spec = {"module": "pool", "triple": target.triple, "blas": target.blas,
                    "tiles": tiles}
            loaded = runtime_module(spec, None, lambda: _ir(target.triple, target.blas, tiles),
                                    target, names)
            _addresses.update(loaded.addresses)
            ctypes.CFUNCTYPE(None, ctypes.c_int64)(_addresses[POOL_THREADS])(num_threads())
            if hasattr(os, "register_at_fork"):
                os.register_at_fork(after_in_child=_reset_in_child)
            _engine = loaded.engine


def stats() -> dict[str, int]:
    """The pool's counters since the process started (zeros before it is loaded): jobs
    it shared, jobs run alone on their caller (the pool busy with another job), jobs a
    helper joined, helpers started."""
    if _engine is None:
        return dict.fromkeys(STATS, 0)
    out = (ctypes.c_int64 * len(STATS))()
    ctypes.CFUNCTYPE(None, ctypes.c_void_p)(_addresses[POOL_STATS])(ctypes.addressof(out))
    return dict(zip(STATS, out, strict=True))


def _reset_in_child() -> None:
    """After fork(): the child has none of the parent's helpers, and the job or counts
    they were in mean nothing there."""
    ctypes.CFUNCTYPE(None)(_addresses[POOL_RESET])()


def _ir(triple: str, blas: bool, tiles: bool) -> str:
    """The pool's LLVM IR (built only when its object code is not in the cache: the
    generator, and llvmlite's IR layer with it, is imported here, not by a cache hit)."""
    from .pool_ir import module

    return str(module(triple, blas, tiles))
