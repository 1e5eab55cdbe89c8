"""The llvm backend's tiled GEMMs (``backends/llvm/pool.py``'s ``yota_<s|d>gemm_tiles``):
a product split into row or column tiles that the caller and Yota's helper threads claim
one at a time must equal the unsplit product (one BLAS call) within the BLAS tolerance
(``tests/precision.py``'s rule for ``matmul``), for every transposition, odd sizes,
batched products, and products smaller than a tile; and compiled gradients that tile
their GEMMs must stay right when many Python threads call them at once. The pool's
backoff (jobs alone, whole-matrix calls) gives the unsplit product exactly, also while
other threads switch it on and off, and a fork()ed child gets a working pool."""

from __future__ import annotations

import contextlib
import ctypes
import os
import subprocess
import sys
import threading
import time
import warnings
from collections.abc import Iterator
from typing import Any

import numpy as np
import pytest
from yota.backends import llvm as native
from yota.backends.llvm import pool
from yota.backends.llvm.emit import GEMM_PAR_MACS, gemm_split
from yota.backends.llvm.target import host
from yota.ir import Builder, TensorType, run
from yota.ir.autodiff import vjp
from yota.ir.passes import optimize

import yota

pytestmark = pytest.mark.skipif(not host().blas, reason="no BLAS bound: GEMMs run as loops")

DT = {"f32": np.float32, "f64": np.float64}
MIGRATES = host().triple.startswith("x86_64") and host().triple.endswith("linux-gnu")


@contextlib.contextmanager
def _modes(fiber: int, steal: int) -> Iterator[None]:
    """The pool's ``fiber_mode`` and ``steal_mode`` for a block, the defaults after."""
    pool.fiber_mode(fiber)
    pool.steal_mode(steal)
    try:
        yield
    finally:
        pool.fiber_mode(0)
        pool.steal_mode(0)


def _product(m: int, k: int, n: int, ta: bool, tb: bool, dtype: str, batch: tuple[int, ...] = ()):
    """``op(A) @ op(B)`` with A (or its transpose) and B (or its transpose) as inputs."""
    b = Builder("prod")
    sa = batch + ((k, m) if ta else (m, k))
    sb = batch + ((n, k) if tb else (k, n))
    x = b.input(TensorType(dtype, sa), "A")
    y = b.input(TensorType(dtype, sb), "B")
    nb = len(batch)
    perm = tuple(range(nb)) + (nb + 1, nb)
    if ta:
        x = b.transpose(x, perm=perm)
    if tb:
        y = b.transpose(y, perm=perm)
    return b.build([b.matmul(x, y)])


def _close(got: np.ndarray, want: np.ndarray, a: np.ndarray, bm: np.ndarray, k: int) -> None:
    """The matmul rule: two summation orders of k terms differ by at most
    k * eps * (|A| @ |B|) elementwise."""
    eps = np.finfo(got.dtype).eps
    bound = k * eps * (np.abs(a) @ np.abs(bm)) + np.finfo(got.dtype).tiny
    assert got.shape == want.shape
    bad = np.abs(got.astype(np.float64) - want) > bound
    assert not bad.any(), f"{bad.sum()} elements beyond the BLAS bound"


SHAPES = [  # (m, k, n): split by rows, by columns, odd sizes, one row, below a tile
    (257, 129, 131), (67, 301, 263), (1031, 97, 33), (33, 97, 1031), (129, 1024, 17),
    (1, 2048, 1024), (1024, 2048, 1), (64, 64, 64), (5, 7, 3),
]


@pytest.mark.parametrize("ta,tb", [(False, False), (True, False), (False, True), (True, True)])
@pytest.mark.parametrize("m,k,n", SHAPES)
@pytest.mark.parametrize("dtype", ["f32", "f64"])
def test_tiled_product_equals_unsplit(m: int, k: int, n: int, ta: bool, tb: bool,
                                      dtype: str) -> None:
    fn = _product(m, k, n, ta, tb, dtype)
    rng = np.random.default_rng(m * 7 + n)
    A = rng.standard_normal((k, m) if ta else (m, k)).astype(DT[dtype])
    B = rng.standard_normal((n, k) if tb else (k, n)).astype(DT[dtype])
    a, bm = (A.T if ta else A), (B.T if tb else B)
    one = native.compile(fn, threads=1)(A, B)[0]  # one BLAS call
    tiled = native.compile(fn, threads=2)(A, B)[0]  # tiles when m*k*n is large enough
    want = a.astype(np.float64) @ bm.astype(np.float64)
    _close(one, want, a, bm, k)
    _close(tiled, want, a, bm, k)
    _close(tiled, one.astype(np.float64), a, bm, 2 * k)


BATCHED = [  # batch, m, k, n, ta, tb: tiles inside matrices, whole matrices as tiles,
    # two batch axes, a batch below the threshold
    ((3,), 128, 64, 160, False, True), ((8,), 64, 64, 64, False, False),
    ((2, 3), 96, 80, 72, True, False), ((2, 2), 33, 65, 129, True, True),
    ((4,), 9, 5, 7, False, False),
]


@pytest.mark.parametrize("batch,m,k,n,ta,tb", BATCHED)
@pytest.mark.parametrize("dtype", ["f32", "f64"])
def test_batched_tiled_product(batch: tuple[int, ...], m: int, k: int, n: int, ta: bool,
                               tb: bool, dtype: str) -> None:
    fn = _product(m, k, n, ta, tb, dtype, batch=batch)
    rng = np.random.default_rng(5)
    A = rng.standard_normal(batch + ((k, m) if ta else (m, k))).astype(DT[dtype])
    B = rng.standard_normal(batch + ((n, k) if tb else (k, n))).astype(DT[dtype])
    a = np.swapaxes(A, -1, -2) if ta else A
    bm = np.swapaxes(B, -1, -2) if tb else B
    want = a.astype(np.float64) @ bm.astype(np.float64)
    for threads in (1, 2):
        got = native.compile(fn, threads=threads)(A, B)[0]
        _close(got, want, a, bm, k)


@pytest.mark.parametrize("dtype", ["f32", "f64"])
def test_batched_product_with_a_shared_operand(dtype: str) -> None:
    """B broadcast over the batch (batch stride 0 in the tiled call)."""
    b = Builder("shared")
    x = b.input(TensorType(dtype, (6, 96, 128)), "A")
    w = b.input(TensorType(dtype, (128, 112)), "W")
    fn = b.build([b.matmul(x, b.broadcast(w, shape=(6, 128, 112)))])
    rng = np.random.default_rng(6)
    A = rng.standard_normal((6, 96, 128)).astype(DT[dtype])
    W = rng.standard_normal((128, 112)).astype(DT[dtype])
    got = native.compile(fn, threads=2)(A, W)[0]
    _close(got, A.astype(np.float64) @ W.astype(np.float64), A, W, 128)


def test_split_plan() -> None:
    """Which products are tiled, how, and that tiles cover the split extent."""
    assert gemm_split(64, 64, 64, 2) is None  # below GEMM_PAR_MACS: one call
    for m, n in [(64, 64), (128, 128), (96, 40)]:  # a batch: one tile per matrix
        plan = gemm_split(m, n, 64, 2, nbatch=8)
        assert plan is not None and plan[1] == (m if plan[0] == 0 else n)
    assert gemm_split(1024, 1024, 1024, 1) is None  # one thread: one call
    for m, k, n in [(257, 129, 131), (67, 301, 263), (1, 2048, 1024), (128, 784, 512)]:
        plan = gemm_split(m, n, k, 2)
        assert (plan is not None) == (m * n * k >= GEMM_PAR_MACS)
        if plan:
            axis, step = plan
            dim = m if axis == 0 else n
            assert 0 < step < dim


def test_tiled_symbols_are_in_the_generated_code() -> None:
    ir_text = native.llvm_ir(_product(256, 256, 256, False, False, "f32"), threads=2)
    assert pool.GEMM_TILES["float32"] in ir_text
    ir_one = native.llvm_ir(_product(256, 256, 256, False, False, "f32"), threads=1)
    assert pool.GEMM_TILES["float32"] not in ir_one and "yota_sgemm" in ir_one


def _mlp(batch: int, sizes: tuple[int, ...]):
    b = Builder("mlp")
    ws = [(b.input(TensorType("f32", (m, n)), f"W{i}"), b.input(TensorType("f32", (n,)), f"b{i}"))
          for i, (m, n) in enumerate(zip(sizes, sizes[1:], strict=False))]
    h = b.input(TensorType("f32", (batch, sizes[0])), "x")
    for w, bias in ws:
        h = b.tanh(b.emit("add", b.matmul(h, w), b.broadcast(bias, shape=(batch, w.shape[1]))))
    return b.build([b.sum(b.mul(h, h), axes=(0, 1))])


@pytest.mark.parametrize("migrating", [False, True], ids=["fixed", "migrating"])
def test_tiled_gradient_from_many_threads(migrating: bool) -> None:
    """Eight Python threads call one compiled gradient whose GEMMs are tiled (the pool
    serves one job at a time; the others run their tiles alone): every result right.
    ``migrating``: with every program that finds the pool free a migrating one, its
    products revocable jobs (``fiber_mode`` 1, ``steal_mode`` 1)."""
    if migrating and not MIGRATES:
        pytest.skip("migrating programs need glibc's ucontext on x86-64 Linux")
    fn = _mlp(96, (160, 128, 64))
    g = optimize(vjp(fn, list(range(len(fn.inputs)))))
    exe = native.compile(g, threads=2)
    assert "gemm_tiles" in native.llvm_ir(g, threads=2)
    rng = np.random.default_rng(11)
    inputs = [[(rng.standard_normal(v.shape) * 0.2).astype(v.dtype) for v in g.inputs]
              for _ in range(8)]
    want = [run(g, *a) for a in inputs]
    errors: list[str] = []

    def work(t: int) -> None:
        for _ in range(10):
            got = exe(*inputs[t])
            for x, y in zip(got, want[t], strict=True):
                if not np.allclose(x, y, rtol=2e-4, atol=2e-4):
                    errors.append(f"thread {t}: max error {np.max(np.abs(x - y))}")
                    return

    ts = [threading.Thread(target=work, args=(t,)) for t in range(8)]
    before = pool.stats()
    with _modes(1 if migrating else 0, 1 if migrating else 0):
        for t in ts:
            t.start()
        for t in ts:
            t.join()
    assert not errors, errors[0]
    if migrating:
        assert pool.stats()["migrating"] > before["migrating"]


@pytest.mark.skipif(not MIGRATES, reason="migrating programs need glibc's ucontext on x86-64")
@pytest.mark.parametrize("steal", [1, 2])
def test_migrating_program_gives_the_same_bits(steal: int) -> None:
    """A migrating program (``fiber_mode`` 1: whenever the pool is free; its large
    products revocable jobs through ``steal_mode`` 1, any of whose tiles any thread of
    the pool computes, or 2, where a thread with no tile left to claim takes back every
    tile another holds) gives the bits of the same program fixed to its calling thread,
    100 calls of an MLP's gradient with tiled GEMMs and split kernels; its products are
    counted as migrating jobs, its split kernels run on the thread that carries it."""
    fn = _mlp(96, (160, 128, 64))
    g = optimize(vjp(fn, list(range(len(fn.inputs)))))
    exe = native.compile(g, threads=2, par_work=0)
    rng = np.random.default_rng(17)
    args = [(rng.standard_normal(v.shape) * 0.2).astype(v.dtype) for v in g.inputs]
    with _modes(2, steal):
        want = exe(*args)
    before = pool.stats()
    with _modes(1, steal):
        for _ in range(100):
            for x, y in zip(exe(*args), want, strict=True):
                np.testing.assert_array_equal(x, y)
    after = pool.stats()
    assert after["migrating"] - before["migrating"] >= 100, (before, after)
    ref = run(g, *args)
    for x, y in zip(want, ref, strict=True):
        np.testing.assert_allclose(x, y, rtol=2e-4, atol=2e-4)


def test_front_end_gradient_with_tiles_matches_interpreter() -> None:
    rng = np.random.default_rng(4)
    W = rng.standard_normal((256, 192)).astype(np.float32) * 0.1
    X = rng.standard_normal((128, 256)).astype(np.float32)

    def loss(W: np.ndarray, X: np.ndarray) -> float:
        return np.sum(np.tanh(X @ W) ** 2)

    v1, g1 = yota.grad(loss, W, X, backend="llvm")
    v2, g2 = yota.grad(loss, W, X, backend="interp")
    assert np.isclose(v1, v2, rtol=1e-4)
    for a, b in zip(g1, g2, strict=True):
        np.testing.assert_allclose(a, b, rtol=1e-3, atol=1e-3)


def test_own_blas_instance_is_separate_and_single_threaded() -> None:
    """With the scipy-openblas64 wheel installed, the yota_* names are bound to that
    separate instance (one thread), and NumPy's own OpenBLAS keeps its thread count."""
    import ctypes

    from yota.backends.llvm import blas, target

    if blas.own_library() is None:
        pytest.skip("scipy-openblas64 not installed: GEMMs go to NumPy's OpenBLAS unsplit")
    assert target._libraries()[0] == blas.own_library()
    own = ctypes.CDLL(blas.own_library())
    assert own.scipy_openblas_get_num_threads64_() == 1
    bundled = [p for p in target._libraries()[1:] if "numpy" in p]
    if bundled:
        numpy_blas = ctypes.CDLL(bundled[0])
        before = numpy_blas.scipy_openblas_get_num_threads64_()
        native.compile(_product(300, 300, 300, False, False, "f64"), threads=2)(
            np.ones((300, 300)), np.ones((300, 300)))
        assert numpy_blas.scipy_openblas_get_num_threads64_() == before


def _inputs(m: int, k: int, n: int, dtype: str, seed: int) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    return (rng.standard_normal((m, k)).astype(DT[dtype]),
            rng.standard_normal((k, n)).astype(DT[dtype]))


@pytest.mark.parametrize("dtype", ["f32", "f64"])
def test_backed_off_pool_makes_whole_calls(dtype: str) -> None:
    """While the pool runs jobs alone (``back_off``), a tiled GEMM is one BLAS call per
    matrix on the calling thread: bit for bit the unsplit product; each job is counted
    as run alone, and sharing resumes after them."""
    fn = _product(257, 300, 263, False, False, dtype)
    bfn = _product(96, 80, 72, True, False, dtype, batch=(2, 3))
    A, B = _inputs(257, 300, 263, dtype, 1)
    rng = np.random.default_rng(2)
    bA = rng.standard_normal((2, 3, 80, 96)).astype(DT[dtype])
    bB = rng.standard_normal((2, 3, 80, 72)).astype(DT[dtype])
    one, tiled = native.compile(fn, threads=1), native.compile(fn, threads=2)
    bone, btiled = native.compile(bfn, threads=1), native.compile(bfn, threads=2)
    want, bwant = one(A, B)[0], bone(bA, bB)[0]
    try:
        pool.back_off(6)
        before = pool.stats()
        for _ in range(3):
            np.testing.assert_array_equal(tiled(A, B)[0], want)
            np.testing.assert_array_equal(btiled(bA, bB)[0], bwant)
        after = pool.stats()
        _close(tiled(A, B)[0], A.astype(np.float64) @ B.astype(np.float64), A, B, 300)
        last = pool.stats()
    finally:
        pool.back_off(0)
    if pool.single_threaded():  # tiles (and the pool's jobs) only with Yota's own BLAS
        assert after["alone"] - before["alone"] == 6
        assert after["jobs"] - before["jobs"] == 6
        assert last["jobs"] - after["jobs"] == 1 and last["alone"] == after["alone"]


def test_switching_backoff_under_many_threads() -> None:
    """Eight threads call tiled products and a split-kernel gradient while another
    switches the backoff on and off: every result stays right (a job may see the switch
    half-way: its tiles are then whole matrices or shared tiles, never lost)."""
    fn = _product(192, 160, 224, False, True, "f32")
    rng = np.random.default_rng(9)
    pairs = [(rng.standard_normal((192, 160)).astype(np.float32),
              rng.standard_normal((224, 160)).astype(np.float32)) for _ in range(8)]
    exe = native.compile(fn, threads=2)
    g = optimize(vjp(_mlp(96, (160, 128, 64)), [0, 1, 2, 3]))
    gexe = native.compile(g, threads=2, par_work=0)  # kernels split over the pool too
    gin = [(rng.standard_normal(v.shape) * 0.2).astype(v.dtype) for v in g.inputs]
    gwant = run(g, *gin)
    stop = threading.Event()
    errors: list[str] = []

    def toggle() -> None:
        k = 0
        while not stop.is_set():
            pool.back_off(k % 4)
            k += 1

    def work(t: int) -> None:
        A, B = pairs[t]
        want = A.astype(np.float64) @ B.T.astype(np.float64)
        bound = 160 * np.finfo(np.float32).eps * (np.abs(A) @ np.abs(B.T))  # k = 160
        for _ in range(15):
            got = exe(A, B)[0]
            if (np.abs(got - want) > bound).any():
                errors.append(f"thread {t}: product beyond the BLAS bound")
                return
            for x, y in zip(gexe(*gin), gwant, strict=True):
                if not np.allclose(x, y, rtol=2e-4, atol=2e-4):
                    errors.append(f"thread {t}: gradient off by {np.max(np.abs(x - y))}")
                    return

    flip = threading.Thread(target=toggle)
    flip.start()
    ts = [threading.Thread(target=work, args=(t,)) for t in range(8)]
    try:
        for t in ts:
            t.start()
        for t in ts:
            t.join()
    finally:
        stop.set()
        flip.join()
        pool.back_off(0)
    assert not errors, errors[0]


@pytest.mark.skipif(not hasattr(os, "fork"), reason="no fork()")
def test_forked_child_gets_a_working_pool() -> None:
    """A fork() while another thread is inside a pool job (holding the pool, its helpers
    in the job): the child has none of those threads, yet its tiled products run right
    and through its own pool (reset at fork: none is refused as busy)."""
    fn = _product(300, 200, 280, False, False, "f64")
    A, B = _inputs(300, 200, 280, "f64", 3)
    exe = native.compile(fn, threads=2)
    want = A @ B
    bound = 200 * np.finfo(np.float64).eps * (np.abs(A) @ np.abs(B))  # k = 200
    big = native.compile(_product(1200, 1200, 1200, False, False, "f64"), threads=2)
    X = np.ones((1200, 1200))
    jobs = pool.stats()["jobs"]
    th = threading.Thread(target=big, args=(X, X))  # one job of some 40 ms
    th.start()
    while pool.stats()["jobs"] == jobs:  # counted once the job holds the pool
        pass
    try:
        with warnings.catch_warnings():  # Python 3.12+: fork() with threads running
            warnings.simplefilter("ignore", DeprecationWarning)
            pid = os.fork()
        if pid == 0:  # the child: exit status 0 only if every product is right
            ok = True
            try:
                jobs = pool.stats()["jobs"]
                for _ in range(20):
                    ok = ok and not (np.abs(exe(A, B)[0] - want) > bound).any()
                ok = ok and pool.stats()["jobs"] - jobs == 20
                if MIGRATES:  # and as a migrating program
                    moved = pool.stats()["migrating"]
                    with _modes(1, 1):
                        for _ in range(20):
                            ok = ok and not (np.abs(exe(A, B)[0] - want) > bound).any()
                    ok = ok and pool.stats()["migrating"] - moved == 20
            except BaseException:
                ok = False
            os._exit(0 if ok else 1)
    finally:
        th.join()
    _, status = os.waitpid(pid, 0)
    assert os.waitstatus_to_exitcode(status) == 0


def test_split_reduction_same_bits_every_run() -> None:
    """A reduction over the split axis sums each chunk into its own partial and combines
    them in chunk order, so its bits do not depend on which thread took which chunk
    (the same whether the caller ran every chunk or helpers took some)."""
    b = Builder("colsum")
    x = b.input(TensorType("f32", (4099, 48)), "x")
    fn = b.build([b.sum(b.tanh(x), axes=(0,)), b.sum(b.mul(x, x), axes=(0, 1))])
    exe = native.compile(fn, threads=2, par_work=0)
    X = np.random.default_rng(12).standard_normal((4099, 48)).astype(np.float32)
    try:
        pool.back_off(1 << 20)  # every chunk on the calling thread
        first = exe(X)
    finally:
        pool.back_off(0)
    for _ in range(60):  # helpers take some of the chunks
        for got, want in zip(exe(X), first, strict=True):
            np.testing.assert_array_equal(got, want)
    np.testing.assert_allclose(first[0], np.tanh(X.astype(np.float64)).sum(axis=0), rtol=1e-4,
                               atol=1e-3)


def _helper_threads() -> list[int]:
    """The thread ids of the pool's helpers (named ``pool.HELPER_NAME``)."""
    tids = []
    for t in os.listdir("/proc/self/task"):
        try:
            with open(f"/proc/self/task/{t}/comm") as f:
                if f.read().strip() == pool.HELPER_NAME:
                    tids.append(int(t))
        except OSError:  # the thread ended meanwhile
            pass
    return tids


def _shared_product() -> tuple[Any, np.ndarray, np.ndarray, np.ndarray]:
    """A tiled f64 product for two threads, its inputs and NumPy's result, run once (the
    pool's helpers exist from then on); skips where the pool has no tiled GEMMs."""
    if not pool.single_threaded():
        pytest.skip("the pool's jobs here come from tiled GEMMs (Yota's own BLAS instance)")
    fn = _product(257, 300, 263, False, False, "f64")
    A, B = _inputs(257, 300, 263, "f64", 3)
    tiled = native.compile(fn, threads=2)
    want = A @ B
    _close(tiled(A, B)[0], want, A, B, 300)
    return tiled, A, B, want


@pytest.mark.skipif(not hasattr(os, "sched_setaffinity") or len(os.sched_getaffinity(0)) < 2,
                    reason="needs per-thread CPU affinity and two allowed CPUs")
def test_helper_moves_off_its_callers_cpu_and_gives_its_affinity_back() -> None:
    """A helper that starts a job on its caller's CPU moves off it (``moved`` counts it)
    and gives its affinity back; one that may run nowhere else stays. Products stay
    right throughout. The calling thread is pinned to one CPU and a helper put on that
    CPU before each product, so the collision the move is for happens on purpose."""
    tiled, A, B, want = _shared_product()
    helpers = _helper_threads()
    assert helpers, "the pool's helper threads carry their name"
    allowed = os.sched_getaffinity(0)
    c = min(allowed)
    try:
        pool.fiber_mode(2)  # the move is a fixed program's (a migrating one's helpers
        #                     carry it on wherever they run), whatever earlier tests left
        os.sched_setaffinity(0, {c})  # this thread only
        _close(tiled(A, B)[0], want, A, B, 300)
        # a helper may still be in a revocable job after its product returned: pinned in
        # the middle of a move off the caller's CPU, it would give itself back its old
        # affinity; let it come to rest first (asleep, all its CPUs but c: the {c} set
        # below differs from what it set itself, so it keeps {c} when it wakes)
        time.sleep(0.01)
        for h in helpers:
            os.sched_setaffinity(h, {c})
        before = pool.stats()
        for _ in range(5):
            _close(tiled(A, B)[0], want, A, B, 300)
        assert pool.stats()["moved"] == before["moved"]  # no other CPU allowed: stays
        assert all(os.sched_getaffinity(h) == {c} for h in helpers)
        pool.back_off(0)  # share from here on even if the pinned jobs stalled (_adapt)
        moved = False
        for _ in range(200):
            time.sleep(0.002)
            for h in helpers:  # onto the caller's CPU, then free to go anywhere
                os.sched_setaffinity(h, {c})
                os.sched_setaffinity(h, allowed)
            _close(tiled(A, B)[0], want, A, B, 300)
            if pool.stats()["moved"] > before["moved"]:
                moved = True
                break
        assert moved, "a helper on its caller's CPU moved off it"
        # given back (or, once it sleeps again, all but its caller's CPU: the next test)
        assert all(os.sched_getaffinity(h) in (allowed, allowed - {c}) for h in helpers)
    finally:
        pool.fiber_mode(0)
        os.sched_setaffinity(0, allowed)
        for h in helpers:
            os.sched_setaffinity(h, allowed)


def _until(ok: Any, timeout: float = 5.0) -> bool:
    """Poll ``ok()`` every millisecond until it is true (True) or ``timeout`` passed."""
    end = time.monotonic() + timeout
    while not ok():
        if time.monotonic() > end:
            return False
        time.sleep(0.001)
    return True


@pytest.mark.skipif(not hasattr(os, "sched_setaffinity") or len(os.sched_getaffinity(0)) < 2,
                    reason="needs per-thread CPU affinity and two allowed CPUs")
def test_sleeping_helper_keeps_off_its_callers_cpu_and_gives_its_affinity_back() -> None:
    """A helper that goes to sleep takes its last caller's CPU out of its affinity (so
    that the next job's wake-up queues it on another CPU, not behind the caller), and
    gives itself the old affinity back once woken: asleep after a product called from
    CPU c it may run on every allowed CPU but c; asleep after the next product, called
    from CPU d, on every one but d (had it kept the first setting, it would now lack c
    too). An affinity someone else gave it while it slept is kept. Products right
    throughout."""
    tiled, A, B, want = _shared_product()
    helpers = _helper_threads()
    assert helpers, "the pool's helper threads carry their name"
    allowed = os.sched_getaffinity(0)
    c, d = sorted(allowed)[:2]
    mask = lambda: [os.sched_getaffinity(h) for h in helpers]  # noqa: E731

    def shared() -> None:  # a shared job even if an earlier one stalled (_adapt)
        pool.back_off(0)
        _close(tiled(A, B)[0], want, A, B, 300)

    try:
        pool.fiber_mode(2)  # each product posted by this thread, whatever earlier tests left
        os.sched_setaffinity(0, {c})
        shared()
        assert _until(lambda: mask() == [allowed - {c}] * len(helpers)), mask()
        os.sched_setaffinity(0, {d})
        shared()
        assert _until(lambda: mask() == [allowed - {d}] * len(helpers)), mask()
        for h in helpers:  # set by someone else while it sleeps: kept
            os.sched_setaffinity(h, {d})
        shared()
        time.sleep(0.05)  # asleep again: {d} less the caller's CPU d leaves none to move to
        assert mask() == [{d}] * len(helpers)
    finally:
        pool.fiber_mode(0)
        os.sched_setaffinity(0, allowed)
        for h in helpers:
            os.sched_setaffinity(h, allowed)


def _colsum() -> tuple[Any, np.ndarray]:
    """A program of split kernels (no GEMM) for two threads, and its input."""
    b = Builder("colsum")
    x = b.input(TensorType("f32", (4099, 48)), "x")
    fn = b.build([b.sum(b.tanh(x), axes=(0,)), b.sum(b.mul(x, x), axes=(0, 1))])
    X = np.random.default_rng(13).standard_normal((4099, 48)).astype(np.float32)
    return native.compile(fn, threads=2, par_work=0), X


@pytest.mark.skipif(not hasattr(os, "sched_setaffinity") or len(os.sched_getaffinity(0)) < 2,
                    reason="needs per-thread CPU affinity and two allowed CPUs")
@pytest.mark.parametrize("migrating", [True, False], ids=["migrating", "fixed"])
def test_crowded_cores_make_tiles_revocable_and_other_jobs_run_alone(migrating: bool) -> None:
    """With a busy process on each of two CPUs, the caller on one and the helpers on
    the other: the tiled products become revocable jobs (``revocable`` counts them;
    tiles taken back from a thread the OS does not run, ``stolen``, are seldom here, 0-10
    in hundreds of products: ``test_abandoned_tiles_never_outlive_the_call`` takes them
    back on purpose), every product right.

    ``migrating`` (the default on x86-64 Linux, ``pool.fiber_mode(0)``): the programs
    run as migrating programs, whose products move them (``migrating`` counts those
    jobs); fixed to the calling thread (``fiber_mode(2)``), none does. Either way
    shared jobs of split kernels (posted by the thread that carries the program) stall
    (it waits for a helper the OS does not run) while its core is crowded, and the pool
    then runs them alone (``auto``), and at the end of a back-off more threads are
    runnable than the job has slots, so it goes on (``kept``). ``back_off(0)`` ends it:
    the next job is shared again."""
    if migrating and not MIGRATES:
        pytest.skip("migrating programs need glibc's ucontext on x86-64 Linux")
    tiled, A, B, want = _shared_product()
    colsum, X = _colsum()
    sums = colsum(X)
    helpers = _helper_threads()
    allowed = os.sched_getaffinity(0)
    c, d = sorted(allowed)[:2]
    spin = "import os, sys\nos.sched_setaffinity(0, {int(sys.argv[1])})\nwhile True: pass"
    busy = [subprocess.Popen([sys.executable, "-c", spin, str(cpu)]) for cpu in (c, d)]
    try:
        pool.fiber_mode(0 if migrating else 2)
        os.sched_setaffinity(0, {d})
        for h in helpers:
            os.sched_setaffinity(h, {c})
        pool.back_off(0)  # no back-off left from earlier jobs
        before = pool.stats()
        deadline = time.monotonic() + 30
        while (pool.stats()["revocable"] < before["revocable"] + 20
               and time.monotonic() < deadline):
            _close(tiled(A, B)[0], want, A, B, 300)
        after = pool.stats()
        assert after["revocable"] >= before["revocable"] + 20, after
        moved = after["migrating"] - before["migrating"]
        assert moved >= 10 if migrating else moved == 0, after
        _crowded_split_kernels_back_off(colsum, X, sums, before, deadline)
        for _ in range(3):  # still right
            _close(tiled(A, B)[0], want, A, B, 300)
    finally:
        pool.fiber_mode(0)
        for p in busy:
            p.kill()
            p.wait()
        os.sched_setaffinity(0, allowed)
        for h in helpers:
            os.sched_setaffinity(h, allowed)
    pool.back_off(0)
    pool.fiber_mode(2)  # (a crowded window may still be counted: the next job is the
    try:                 # pool's own, shared)
        before = pool.stats()
        _close(tiled(A, B)[0], want, A, B, 300)
        after = pool.stats()
    finally:
        pool.fiber_mode(0)
    assert after["jobs"] == before["jobs"] + 1 and after["auto"] == before["auto"]


def _crowded_split_kernels_back_off(colsum: Any, X: np.ndarray, sums: list[np.ndarray],
                                    before: dict[str, int], deadline: float) -> None:
    """(Crowded cores:) shared split kernels stall, then run alone (``auto``), and the
    back-off is kept going (``kept``)."""
    while pool.stats()["auto"] == before["auto"] and time.monotonic() < deadline:
        for got, ref in zip(colsum(X), sums, strict=True):
            np.testing.assert_allclose(got, ref, rtol=1e-5, atol=1e-4)
    after = pool.stats()
    assert after["auto"] > before["auto"], ("auto", after)
    assert after["stalls"] > before["stalls"]  # what set it off
    if (os.cpu_count() or 0) <= 2:  # the machine's CPUs (CI's 2-core machines)
        # at the back-off's last job three threads are runnable for two CPUs (the
        # caller and the two busy processes; /proc/loadavg): it is kept going
        while pool.stats()["kept"] == before["kept"] and time.monotonic() < deadline:
            colsum(X)
        assert pool.stats()["kept"] > before["kept"], pool.stats()


def _tiles_call(dtype: str) -> Any:
    """``yota_<s|d>gemm_tiles`` itself (its CBLAS arguments, then the batch, the split
    and the slots), for products with alpha and beta that generated code never makes."""
    pool.ensure_pool()
    addr = pool._addresses[pool.GEMM_TILES[{"f32": "float32", "f64": "float64"}[dtype]]]
    f = ctypes.c_float if dtype == "f32" else ctypes.c_double
    i32, i64, p = ctypes.c_int32, ctypes.c_int64, ctypes.c_void_p
    return ctypes.CFUNCTYPE(None, i32, i32, i32, i64, i64, i64, f, p, i64, p, i64, f, p, i64,
                            *[i64] * pool.TILE_EXTRA)(addr)


@pytest.mark.parametrize("dtype", ["f32", "f64"])
@pytest.mark.parametrize("axis", [0, 1])
@pytest.mark.parametrize("mode", [1, 2])
def test_revocable_tiles_give_the_tiled_product(dtype: str, axis: int, mode: int) -> None:
    """Revocable tiles (``steal_mode`` 1: whenever shared; 2: every tile another thread
    holds taken back as soon as a thread has none left to claim, so threads abandon
    tiles on most jobs): ``C = alpha A B + beta C`` on row or column tiles, batched,
    equals NumPy's within the BLAS bound, and the same bits on every call (a tile is
    one BLAS call on the same block, into the scratch of whoever computes it); C's block
    is read into the scratch first where beta reads it. (Tiles this small are seldom
    taken back: the next test makes sure that happens.)"""
    if not pool.single_threaded():
        pytest.skip("the pool's tiled GEMMs split only with Yota's own BLAS instance")
    call = _tiles_call(dtype)
    rng = np.random.default_rng(21)
    nb, m, k, n = 3, 67, 150, 71
    A = rng.standard_normal((nb, m, k)).astype(DT[dtype])
    B = rng.standard_normal((nb, k, n)).astype(DT[dtype])
    C0 = rng.standard_normal((nb, m, n)).astype(DT[dtype])
    alpha, beta = 0.5, 2.0
    want = alpha * (A.astype(np.float64) @ B) + beta * C0
    step = 16

    def product() -> np.ndarray:
        C = C0.copy()
        call(101, 111, 111, m, n, k, alpha, A.ctypes.data, k, B.ctypes.data, n, beta,
             C.ctypes.data, n, nb, m * k, k * n, m * n, axis, step, 2)
        return C

    before = pool.stats()
    try:
        pool.steal_mode(mode)
        pool.back_off(0)
        first = product()
        eps = np.finfo(DT[dtype]).eps
        bound = (k + 2) * eps * (alpha * np.abs(A) @ np.abs(B) + beta * np.abs(C0))
        assert (np.abs(first - want) <= bound).all()
        for _ in range(150):
            np.testing.assert_array_equal(product(), first)
    finally:
        pool.steal_mode(0)
    assert pool.stats()["revocable"] >= before["revocable"] + 151


@pytest.mark.parametrize("migrating", [False, True], ids=["fixed", "migrating"])
def test_abandoned_tiles_never_outlive_the_call(migrating: bool) -> None:
    """A thread whose tile was taken back may still be reading the tile's operands; the
    generated program waits for it before it returns (``yota_pool_quiesce``), so the
    caller may free them at once. Fresh operands of 1 MB and more each call (NumPy
    maps such arrays and unmaps them on free: a read after that would crash this
    process), every tile another thread holds taken back, from four threads at once,
    until tiles were taken back at least five times (9 or so in 100 calls here);
    ``migrating``: each program that finds the pool free a migrating one."""
    if migrating and not MIGRATES:
        pytest.skip("migrating programs need glibc's ucontext on x86-64 Linux")
    if not pool.single_threaded():
        pytest.skip("the pool's tiled GEMMs split only with Yota's own BLAS instance")
    fn = _product(256, 512, 384, False, False, "f64")
    exe = native.compile(fn, threads=2)
    errors: list[str] = []
    before = pool.stats()
    deadline = time.monotonic() + 60

    def enough() -> bool:
        return pool.stats()["stolen"] >= before["stolen"] + 5 or time.monotonic() > deadline

    def work(seed: int) -> None:
        rng = np.random.default_rng(seed)
        calls = 0
        while calls < 25 or not enough():
            A = rng.standard_normal((256, 512))
            B = rng.standard_normal((512, 384))
            got = exe(A, B)[0]
            want = A @ B
            if not np.allclose(got, want, rtol=1e-10, atol=1e-9):
                errors.append(f"max error {np.max(np.abs(got - want))}")
                return
            del A, B
            calls += 1

    with _modes(1 if migrating else 0, 2):
        ts = [threading.Thread(target=work, args=(s,)) for s in range(4)]
        for t in ts:
            t.start()
        for t in ts:
            t.join()
    assert not errors, errors[0]
    after = pool.stats()
    assert after["stolen"] >= before["stolen"] + 5, after
    if migrating:
        assert after["migrating"] > before["migrating"], after
