"""The llvm backend's fork-join pool (``backends/llvm/runtime/pool.py``), driven directly through
``yota_parallel`` with Python callbacks as the chunk function, so that each test decides
who does what and when (events, not timing): every chunk runs once on a slot below the
job's; a helper that holds a chunk delays the job by that chunk only; a second job while
one runs, or a job with one thread allowed, runs on its caller; the thread setting
(``YOTA_NUM_THREADS``, ``set_num_threads``); a fork()ed child, and a multiprocessing
worker started by fork, get a working pool; the pool's IR for each platform."""

from __future__ import annotations

import contextlib
import ctypes
import multiprocessing
import os
import subprocess
import sys
import threading
import warnings
from collections.abc import Callable, Iterator
from typing import Any

import numpy as np
import pytest
from yota.backends import llvm as native
from yota.backends.llvm.runtime import pool, pool_ir
from yota.backends.llvm.runtime.target import host

import yota

CHUNKS = ctypes.CFUNCTYPE(None, ctypes.c_void_p, ctypes.c_int64)
WAIT = 20.0  # seconds an event may take before the test fails (never reached when right)
LINUX_POOL = pool_ir.supported(host().triple)
needs_helpers = pytest.mark.skipif(not LINUX_POOL, reason="single-threaded on this platform")


@contextlib.contextmanager
def threads(n: int) -> Iterator[None]:
    """``set_num_threads(n)`` for a block, the previous setting after."""
    before = pool.num_threads()
    pool.set_num_threads(n)
    try:
        yield
    finally:
        pool.set_num_threads(before)


def parallel(chunks: Callable[[int, int], None], nslots: int) -> None:
    """``yota_parallel`` with a Python chunk function ``chunks(ctx, slot)``."""
    pool.ensure_pool()
    cb = CHUNKS(lambda ctx, slot: chunks(ctx or 0, slot))
    run = ctypes.CFUNCTYPE(None, ctypes.c_void_p, ctypes.c_void_p, ctypes.c_int64)(
        pool._addresses[pool.SYMBOL])
    run(ctypes.cast(cb, ctypes.c_void_p), None, nslots)


class Work:
    """``n`` chunks claimed one at a time (under a lock); who ran which."""

    def __init__(self, n: int) -> None:
        self.n, self.next, self.lock = n, 0, threading.Lock()
        self.done: list[tuple[int, int]] = []  # (chunk, slot)
        self.calls: list[int] = []  # the slot of each call

    def claim(self) -> int | None:
        with self.lock:
            c, self.next = self.next, self.next + 1
        return c if c < self.n else None

    def __call__(self, ctx: int, slot: int) -> None:
        self.calls.append(slot)
        while (c := self.claim()) is not None:
            self.done.append((c, slot))


@pytest.mark.parametrize("nslots", [1, 2, 3, 8])
def test_every_chunk_runs_once_on_a_slot_of_the_job(nslots: int) -> None:
    work = Work(200)
    with threads(4):
        parallel(work, nslots)
    assert sorted(c for c, _ in work.done) == list(range(200))
    assert 0 in work.calls  # the caller's (a helper may have claimed every chunk first)
    assert len(set(work.calls)) == len(work.calls)  # one call per slot
    assert set(work.calls) <= set(range(min(nslots, 4)))


@needs_helpers
def test_a_helper_holding_a_chunk_delays_the_job_by_that_chunk_only() -> None:
    """A helper takes one chunk and does not come back until the caller, having run
    every other chunk, says so: the caller ran the rest, and ``yota_parallel`` returned
    only after the helper left its chunk."""
    work = Work(50)
    helper_in, caller_done = threading.Event(), threading.Event()
    order: list[str] = []

    def chunks(ctx: int, slot: int) -> None:
        if slot == 0:
            assert helper_in.wait(WAIT), "no helper joined"
            work(ctx, slot)
            caller_done.set()
        elif not helper_in.is_set() and (c := work.claim()) is not None:
            helper_in.set()
            assert caller_done.wait(WAIT)
            work.done.append((c, slot))
            order.append("helper left")

    with threads(2):
        parallel(chunks, 2)
    order.append("returned")
    assert order == ["helper left", "returned"]
    assert sorted(c for c, _ in work.done) == list(range(50))
    assert sum(s == 0 for _, s in work.done) == 49


@needs_helpers
def test_a_job_posted_while_another_runs_runs_on_its_caller() -> None:
    """One job at a time: a second one, from another thread while the first holds the
    pool, runs every chunk on its calling thread (counted as ``alone``)."""
    first_in, second_done = threading.Event(), threading.Event()

    def first(ctx: int, slot: int) -> None:
        if slot == 0:
            first_in.set()
            assert second_done.wait(WAIT)

    with threads(2):
        t = threading.Thread(target=parallel, args=(first, 2))
        t.start()
        try:
            assert first_in.wait(WAIT)
            before = pool.stats()
            work = Work(20)
            parallel(work, 2)
            after = pool.stats()
        finally:
            second_done.set()
            t.join()
    assert {s for _, s in work.done} == {0} and len(work.done) == 20
    assert after["alone"] == before["alone"] + 1 and after["jobs"] == before["jobs"]


def test_one_thread_runs_every_job_on_its_caller() -> None:
    with threads(1):
        before = pool.stats()
        work = Work(30)
        parallel(work, 4)
        assert {s for _, s in work.done} == {0} and len(work.done) == 30
        assert pool.stats() == before  # not even offered to the pool
        assert native.options_key()["threads"] == 1


def test_thread_setting_is_checked_and_sets_the_compile_default() -> None:
    with threads(3):
        assert yota.num_threads() == 3 and native.options_key()["threads"] == 3
    for bad in (0, -1, 1.5, "2", None, pool.MAX_THREADS + 1):
        with pytest.raises(yota.YotaError, match="set_num_threads"):
            yota.set_num_threads(bad)  # type: ignore[arg-type]


def _run(code: str, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          env={**os.environ, **env}, timeout=300)


def test_yota_num_threads_from_the_environment() -> None:
    code = ("import yota; from yota.backends import llvm\n"
            "print(yota.num_threads(), llvm.options_key()['threads'])")
    r = _run(code, {"YOTA_NUM_THREADS": "3"})
    assert r.returncode == 0 and r.stdout.split() == ["3", "3"], r.stderr
    r = _run(code, {"YOTA_NUM_THREADS": "many"})
    assert r.returncode != 0 and "YOTA_NUM_THREADS" in r.stderr and "'many'" in r.stderr


def _mlp_grad() -> tuple[Any, list[np.ndarray]]:
    """A compiled MLP gradient with tiled GEMMs and split kernels (two threads), and its
    arguments."""
    from yota.ir import Builder, TensorType
    from yota.ir.autodiff import vjp
    from yota.ir.passes import optimize

    b = Builder("mlp")
    x = b.input(TensorType("f64", (128, 256)), "x")
    w = b.input(TensorType("f64", (256, 192)), "w")
    fn = b.build([b.sum(b.tanh(b.matmul(x, w)), axes=(0, 1))])
    g = optimize(vjp(fn, [0, 1]))
    rng = np.random.default_rng(3)
    args = [rng.standard_normal(v.shape) * 0.1 for v in g.inputs]
    return native.compile(g, threads=2, par_work=0), args


def _child_checks(exe: Any, args: list[np.ndarray], want: list[np.ndarray]) -> bool:
    """In a fork()ed child: the gradient's bits, and a job a helper of the child's own
    joins (the caller waits for it)."""
    for _ in range(5):
        if not all(np.array_equal(a, b) for a, b in zip(exe(*args), want, strict=True)):
            return False
    if not LINUX_POOL:
        return True
    joined = threading.Event()

    def chunks(ctx: int, slot: int) -> None:
        if slot == 0:
            assert joined.wait(WAIT)
        else:
            joined.set()
    with threads(2):
        parallel(chunks, 2)
    return joined.is_set() and pool.stats()["helpers"] == 1


def test_forked_child_gets_a_working_pool() -> None:
    """fork() while another thread holds the pool with a helper in its job: the child
    has neither, yet its gradients give the parent's bits and its own helper joins."""
    if not hasattr(os, "fork"):
        pytest.skip("no fork()")
    exe, args = _mlp_grad()
    want = exe(*args)
    inside, release = threading.Event(), threading.Event()

    def held(ctx: int, slot: int) -> None:
        inside.set()
        assert release.wait(WAIT)

    with threads(2):
        t = threading.Thread(target=parallel, args=(held, 2))
        t.start()
        try:
            assert inside.wait(WAIT)
            with warnings.catch_warnings():  # Python 3.12+: fork() with threads running
                warnings.simplefilter("ignore", DeprecationWarning)
                pid = os.fork()
            if pid == 0:
                ok = False
                try:
                    ok = _child_checks(exe, args, want)
                finally:
                    os._exit(0 if ok else 1)
        finally:
            release.set()
            t.join()
    _, status = os.waitpid(pid, 0)
    assert os.waitstatus_to_exitcode(status) == 0


_FORKED: dict[str, Any] = {}  # what a multiprocessing worker started by fork inherits


def _in_worker(k: int) -> tuple[list[np.ndarray], dict[str, int]]:
    exe, args = _FORKED["exe"], _FORKED["args"]
    return exe(*[a * k for a in args]), pool.stats()


def test_multiprocessing_fork_worker_runs_a_compiled_gradient() -> None:
    if "fork" not in multiprocessing.get_all_start_methods():
        pytest.skip("no fork start method")
    exe, args = _mlp_grad()
    _FORKED.update(exe=exe, args=args)
    exe(*args)  # the parent's helper exists from here on
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        with multiprocessing.get_context("fork").Pool(2) as workers:
            got = workers.map(_in_worker, [1, 2, 3])
    for k, (grads, st) in zip([1, 2, 3], got, strict=True):
        for a, b in zip(grads, exe(*[a * k for a in args]), strict=True):
            np.testing.assert_array_equal(a, b)
        assert st["jobs"] + st["alone"] > 0  # its jobs went through the child's pool


@pytest.mark.parametrize("triple", ["x86_64-unknown-linux-gnu", "aarch64-unknown-linux-gnu",
                                    "x86_64-apple-darwin", "aarch64-apple-darwin"])
def test_pool_ir_for_each_platform(triple: str) -> None:
    """Helper threads (futexes, pthreads) on Linux x86-64 and AArch64 only; elsewhere
    ``yota_parallel`` calls the chunks on its caller and the module calls nothing from
    the C library. Each compiles to object code where LLVM has the target."""
    import llvmlite.binding as llvm

    text = pool._ir(triple, True, True)
    assert pool.SYMBOL in text and all(n in text for n in pool.GEMM_TILES.values())
    threaded = "linux" in triple
    assert pool_ir.supported(triple) == threaded
    for name in ("pthread_create", "syscall", "sched_yield"):
        assert (f'@"{name}"' in text) == threaded
    mod = llvm.parse_assembly(text)
    mod.verify()
    with contextlib.suppress(AttributeError):  # (older llvmlite: the native target only)
        llvm.initialize_all_targets()
        llvm.initialize_all_asmprinters()
    try:
        target = llvm.Target.from_triple(triple)
    except RuntimeError:
        pytest.skip(f"this LLVM has no target for {triple}")
    assert target.create_target_machine(opt=2).emit_object(mod)
