"""The llvm backend's tiled GEMMs (``backends/llvm/runtime/pool.py``'s ``yota_<s|d>gemm_tiles``):
a product split into row or column tiles that the caller and Yota's helper threads claim
one at a time must equal the unsplit product (one BLAS call) within the BLAS tolerance
(``tests/support/precision.py``'s rule for ``matmul``), for every transposition, odd sizes,
batched products, and products smaller than a tile; and compiled gradients that tile
their GEMMs must stay right when many Python threads call them at once. With one thread
allowed (``set_num_threads(1)``) a tiled GEMM is one call per matrix: the unsplit
product exactly, also while other threads switch the setting. (The pool itself:
``tests/backends/llvm/test_pool.py``.)"""

from __future__ import annotations

import contextlib
import os
import threading
from collections.abc import Iterator

import numpy as np
import pytest
from yota.backends import llvm as native
from yota.backends.llvm.emit import GEMM_PAR_MACS, gemm_split
from yota.backends.llvm.runtime import pool
from yota.backends.llvm.runtime.target import host
from yota.ir import Builder, TensorType, run
from yota.ir.autodiff import vjp
from yota.ir.passes import optimize

import yota

pytestmark = pytest.mark.skipif(not host().blas, reason="no BLAS bound: GEMMs run as loops")

DT = {"f32": np.float32, "f64": np.float64}


@contextlib.contextmanager
def _threads(n: int) -> Iterator[None]:
    """``set_num_threads(n)`` for a block, the previous setting after."""
    before = pool.num_threads()
    pool.set_num_threads(n)
    try:
        yield
    finally:
        pool.set_num_threads(before)


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


def test_tiled_gradient_from_many_threads() -> None:
    """Eight Python threads call one compiled gradient whose GEMMs are tiled (the pool
    serves one job at a time; the others run their tiles alone): every result right."""
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
    with _threads(2):
        for t in ts:
            t.start()
        for t in ts:
            t.join()
    assert not errors, errors[0]


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

    from yota.backends.llvm.runtime import blas

    if blas.own_library() is None:
        pytest.skip("scipy-openblas64 not installed: GEMMs go to NumPy's OpenBLAS unsplit")
    assert blas._libraries()[0] == blas.own_library()
    own = ctypes.CDLL(blas.own_library())
    assert own.scipy_openblas_get_num_threads64_() == 1
    bundled = [p for p in blas._libraries()[1:] if "numpy" in p]
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
def test_one_thread_makes_whole_calls(dtype: str) -> None:
    """With one thread allowed, a program built with tiled GEMMs makes one BLAS call per
    matrix on the calling thread: bit for bit the unsplit product; with two, tiles
    within the BLAS bound."""
    fn = _product(257, 300, 263, False, False, dtype)
    bfn = _product(96, 80, 72, True, False, dtype, batch=(2, 3))
    A, B = _inputs(257, 300, 263, dtype, 1)
    rng = np.random.default_rng(2)
    bA = rng.standard_normal((2, 3, 80, 96)).astype(DT[dtype])
    bB = rng.standard_normal((2, 3, 80, 72)).astype(DT[dtype])
    one, tiled = native.compile(fn, threads=1), native.compile(fn, threads=2)
    bone, btiled = native.compile(bfn, threads=1), native.compile(bfn, threads=2)
    assert pool.GEMM_TILES[np.dtype(DT[dtype]).name] in tiled.llvm_ir
    want, bwant = one(A, B)[0], bone(bA, bB)[0]
    with _threads(1):
        for _ in range(3):
            np.testing.assert_array_equal(tiled(A, B)[0], want)
            np.testing.assert_array_equal(btiled(bA, bB)[0], bwant)
    with _threads(2):
        _close(tiled(A, B)[0], A.astype(np.float64) @ B.astype(np.float64), A, B, 300)


def test_switching_threads_under_many_threads() -> None:
    """Eight threads call tiled products and a split-kernel gradient while another
    switches the thread setting between 1 and 2: every result stays right (a job that
    starts under either setting gives a right product)."""
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
            pool.set_num_threads(1 + k % 2)
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

    with _threads(2):
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
    assert not errors, errors[0]


def test_split_reduction_same_bits_every_run() -> None:
    """A reduction over the split axis sums each chunk into its own partial and combines
    them in chunk order, so its bits do not depend on which thread took which chunk
    (the same whether the caller ran every chunk or helpers took some)."""
    b = Builder("colsum")
    x = b.input(TensorType("f32", (4099, 48)), "x")
    fn = b.build([b.sum(b.tanh(x), axes=(0,)), b.sum(b.mul(x, x), axes=(0, 1))])
    exe = native.compile(fn, threads=2, par_work=0)
    X = np.random.default_rng(12).standard_normal((4099, 48)).astype(np.float32)
    with _threads(1):  # every chunk on the calling thread
        first = exe(X)
    with _threads(2):
        for _ in range(60):  # helpers take some of the chunks
            for got, want in zip(exe(X), first, strict=True):
                np.testing.assert_array_equal(got, want)
    np.testing.assert_allclose(first[0], np.tanh(X.astype(np.float64)).sum(axis=0), rtol=1e-4,
                               atol=1e-3)


@pytest.mark.stress
def test_products_right_beside_busy_processes() -> None:
    """Scheduler-dependent (``-m stress``): with a busy process per core, helpers are
    descheduled mid-tile and the caller waits for them; eight threads calling tiled
    products and a split-kernel gradient for a few seconds all get right results."""
    import subprocess
    import sys
    import time

    busy = [subprocess.Popen([sys.executable, "-c", "while True: pass"])
            for _ in range(os.cpu_count() or 2)]
    try:
        end = time.monotonic() + 5
        while time.monotonic() < end:
            test_switching_threads_under_many_threads()
    finally:
        for p in busy:
            p.kill()
            p.wait()
