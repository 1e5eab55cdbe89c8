"""How close the MLP workload (W3) can come to its FLOP bound on this machine: its matrix
products timed alone, beside the bench's bound, in one run.

    python tools/gemm_floor.py [--rounds 200] [--repeat 3]

``tools/bench.py`` gives W3's bound as its products' FLOPs at the rate of a 1024^3 product
through NumPy's threaded BLAS (best of 10). This tool times each product of W3's value and
gradient (forward, weight gradients, and input gradients from the second layer on: the
FLOPs that bound counts) three ways, interleaved, median over rounds:

- ``1 thread``: the whole product in one call of Yota's own OpenBLAS instance
  (``backends/llvm/runtime/blas.py``, single-threaded);
- ``2 threads, ideal``: the same kernels on two halves (rows or columns of C, the faster
  split), started together by two threads that spin on a shared word (a small C helper
  compiled here with ``cc``): no scheduler, no tiles, no pool, so no split of this product
  over this machine's cores can do much better with these kernels;
- ``Yota's tiles``: the pool's tiled GEMM (``yota_sgemm_tiles``) with the split Yota's
  lowering picks (``emit.gemm_split``).

Then the sums against the bound, and Yota's whole W3 gradient (hot loop, median) beside
them: what the products leave for everything else. The whole measurement runs
``--repeat`` times, because this VM's two-core rate moves from one minute to the next.
"""

from __future__ import annotations

import argparse
import ctypes
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np

# two threads, one half each, started by one store; the caller times each round
HELPER_C = r"""
#include <pthread.h>
#include <stdatomic.h>
#include <time.h>
typedef void (*gemm_t)(int, int, int, long, long, long, float, const float *, long,
                       const float *, long, float, float *, long);
typedef struct { int ta, tb; long m, n, k; const float *a; long lda; const float *b; long ldb;
                 float *c; long ldc; } half_t;
static gemm_t gemm;
static half_t halves[2];
static atomic_int go, done;
static void run(const half_t *h) {
    gemm(101, h->ta, h->tb, h->m, h->n, h->k, 1.0f, h->a, h->lda, h->b, h->ldb, 0.0f, h->c,
         h->ldc);
}
static void *helper(void *arg) {
    int seen = 0;
    for (;;) {
        int g;
        while ((g = atomic_load(&go)) == seen) __builtin_ia32_pause();
        if (g < 0) return arg;
        seen = g;
        run(&halves[1]);
        atomic_store(&done, g);
    }
}
static double now(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec + 1e-9 * t.tv_nsec;
}
/* reps rounds of the two halves (the first warms up, untimed); seconds of each in out */
int split2(void *fn, int ta, int tb, long m, long n, long k, const float *a, long lda,
           const float *b, long ldb, float *c, long ldc, int axis, int reps, double *out) {
    pthread_t t;
    gemm = (gemm_t)fn;
    for (int h = 0; h < 2; h++) {
        long lo = h ? (axis ? n / 2 : m / 2) : 0;
        half_t x = {ta, tb, m, n, k, a, lda, b, ldb, c, ldc};
        if (axis == 0) {
            x.m = h ? m - m / 2 : m / 2;
            x.a = a + (ta == 112 ? lo : lo * lda);
            x.c = c + lo * ldc;
        } else {
            x.n = h ? n - n / 2 : n / 2;
            x.b = b + (tb == 112 ? lo * ldb : lo);
            x.c = c + lo;
        }
        halves[h] = x;
    }
    atomic_store(&go, 0);
    atomic_store(&done, 0);
    if (pthread_create(&t, 0, helper, 0)) return 1;
    for (int r = 0; r <= reps; r++) {
        double t0 = now();
        atomic_store(&go, r + 1);
        run(&halves[0]);
        while (atomic_load(&done) != r + 1) __builtin_ia32_pause();
        if (r) out[r - 1] = now() - t0;
    }
    atomic_store(&go, -1);
    pthread_join(t, 0);
    return 0;
}
"""

NO_TRANS, TRANS = 111, 112


def _helper(workdir: str) -> Any:
    cc = os.environ.get("CC") or shutil.which("cc") or shutil.which("gcc")
    if cc is None:
        sys.exit("gemm_floor: needs a C compiler (cc or gcc) for its two-thread helper")
    src, lib = os.path.join(workdir, "split2.c"), os.path.join(workdir, "split2.so")
    Path(src).write_text(HELPER_C)
    subprocess.run([cc, "-O2", "-shared", "-fPIC", "-pthread", "-o", lib, src], check=True)
    f = ctypes.CDLL(lib).split2
    f.restype = ctypes.c_int
    L, P = ctypes.c_long, ctypes.c_void_p
    f.argtypes = [P, ctypes.c_int, ctypes.c_int, L, L, L, P, L, P, L, P, L, ctypes.c_int,
                  ctypes.c_int, ctypes.POINTER(ctypes.c_double)]
    return f


def mlp_products(inputs: dict[str, np.ndarray]) -> list[tuple[str, int, int, int, int, int]]:
    """W3's products as ``(name, m, n, k, transA, transB)`` of C = op(A) op(B), C m x n:
    per layer the forward product, the weight gradient and (from the second layer on)
    the input gradient, as ``bench.workloads.w3`` counts their FLOPs."""
    batch = inputs["X"].shape[0]
    shapes = [inputs[f"W{i}"].shape for i in range(1, 100) if f"W{i}" in inputs]
    out = []
    for i, (a, b) in enumerate(shapes, 1):
        out.append((f"forward {i}", batch, b, a, NO_TRANS, NO_TRANS))  # H_{i-1} @ W_i
        out.append((f"dW{i}", a, b, batch, TRANS, NO_TRANS))  # H_{i-1}.T @ dZ_i
        if i > 1:
            out.append((f"dH{i - 1}", batch, a, b, NO_TRANS, TRANS))  # dZ_i @ W_i.T
    return out


class Product:
    """One product's operands and its three ways of running."""

    def __init__(self, spec: tuple[str, int, int, int, int, int], sgemm: int, tiles: Any,
                 split2: Any, threads: int, rng: np.random.Generator) -> None:
        from yota.backends.llvm.emit import gemm_split

        self.name, m, n, k, ta, tb = spec
        self.dims = (m, n, k)
        self.kind = ("T" if ta == TRANS else "N") + ("T" if tb == TRANS else "N")
        self.a = rng.standard_normal((k, m) if ta == TRANS else (m, k)).astype(np.float32)
        self.b = rng.standard_normal((n, k) if tb == TRANS else (k, n)).astype(np.float32)
        self.c = np.empty((m, n), np.float32)
        lda, ldb = self.a.shape[1], self.b.shape[1]
        pa, pb, pc = self.a.ctypes.data, self.b.ctypes.data, self.c.ctypes.data
        self.flops = 2 * m * n * k
        gemm = ctypes.CFUNCTYPE(None, *_CBLAS)(sgemm)
        self.whole = lambda: gemm(101, ta, tb, m, n, k, 1.0, pa, lda, pb, ldb, 0.0, pc, n)
        split = gemm_split(m, n, k, threads)
        axis, step = split if split is not None else (0, m)
        self.split = "one call" if split is None else \
            f"{'rows' if axis == 0 else 'columns'} x{-(-(m if axis == 0 else n) // step)}"
        self.tiled = lambda: tiles(101, ta, tb, m, n, k, 1.0, pa, lda, pb, ldb, 0.0, pc, n,
                                   1, 0, 0, 0, axis, step, threads)
        times = (ctypes.c_double * 64)()

        def ideal(axis: int, reps: int) -> list[float]:
            rc = split2(sgemm, ta, tb, m, n, k, pa, lda, pb, ldb, pc, n, axis, reps, times)
            if rc:
                sys.exit("gemm_floor: pthread_create failed")
            return list(times[:reps])
        self.ideal = ideal


_CBLAS = [ctypes.c_int32] * 3 + [ctypes.c_int64] * 3 + [ctypes.c_float, ctypes.c_void_p,
          ctypes.c_int64, ctypes.c_void_p, ctypes.c_int64, ctypes.c_float, ctypes.c_void_p,
          ctypes.c_int64]


def measure(products: list[Product], rounds: int, reps: int) -> dict[str, dict[str, float]]:
    """Median seconds of each way for each product, interleaved round by round."""
    got: dict[str, dict[str, list[float]]] = {
        p.name: {"one": [], "rows": [], "columns": [], "tiles": []} for p in products}
    for _ in range(rounds):
        for p in products:
            g = got[p.name]
            for way, run in (("one", p.whole), ("tiles", p.tiled)):
                run()  # untimed: caches warm, the pool's helper awake (as between a
                for _ in range(reps):  # gradient's products)
                    t0 = time.perf_counter()
                    run()
                    g[way].append(time.perf_counter() - t0)
            g["rows"] += p.ideal(0, reps)
            g["columns"] += p.ideal(1, reps)
    return {name: {k: float(np.median(v)) for k, v in g.items()} for name, g in got.items()}


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--rounds", type=int, default=200, help="interleaved rounds (default 200)")
    p.add_argument("--repeat", type=int, default=3, help="whole measurements (default 3)")
    args = p.parse_args()
    from bench.machine import measure_limits
    from bench.systems import prepare_yota
    from bench.workloads import find
    from yota.backends.llvm.runtime import blas, pool
    from yota.backends.llvm.runtime.target import host

    import yota

    threads = host().threads
    if threads != 2 or not blas.single_threaded():
        sys.exit(f"gemm_floor: written for two cores and Yota's own OpenBLAS (here {threads} "
                 f"threads, own BLAS: {blas.single_threaded()})")
    lib = blas.own_library()
    assert lib is not None
    sgemm = ctypes.cast(ctypes.CDLL(lib, mode=os.RTLD_LOCAL).scipy_cblas_sgemm64_,
                        ctypes.c_void_p).value
    pool.ensure_pool()
    tiles = ctypes.CFUNCTYPE(None, *_CBLAS, *[ctypes.c_int64] * 7)(
        pool._addresses[pool.GEMM_TILES["float32"]])
    w = find("W3")
    inputs = w.make(np.random.default_rng(0))
    step, _ = prepare_yota("llvm")(yota, w, inputs)
    rng = np.random.default_rng(1)
    with tempfile.TemporaryDirectory() as tmp:
        split2 = _helper(tmp)
        products = [Product(s, sgemm, tiles, split2, threads, rng) for s in mlp_products(inputs)]
        assert sum(q.flops for q in products) == w.flops, "the products are not the bound's"
        print(f"W3: {w.desc}; {len(products)} products, {w.flops / 1e6:.1f} MFLOP")
        for rep in range(args.repeat):
            limits = measure_limits(False, threads)
            rate = limits["flops"]["float32"]
            med = measure(products, args.rounds, 3)
            for _ in range(50):
                step()
            hot = []
            for _ in range(300):
                t0 = time.perf_counter()
                step()
                hot.append(time.perf_counter() - t0)
            bound = w.flops / rate
            print(f"\nRun {rep + 1}: bound {1e3 * bound:.3f} ms (BLAS 1024^3 "
                  f"{rate / 1e9:.0f} GFLOP/s float32, best of 10); medians of "
                  f"{3 * args.rounds} calls, ms")
            print("| product | m x n x k | op | 1 thread | 2 threads, ideal "
                  "(rows / columns) | Yota's tiles (split) |")
            print("|---|---|---|---|---|---|")
            tot = dict.fromkeys(("one", "ideal", "tiles"), 0.0)
            for q in products:
                r = med[q.name]
                best = min(r["rows"], r["columns"])
                tot["one"] += r["one"]
                tot["ideal"] += best
                tot["tiles"] += r["tiles"]
                m, n, k = q.dims
                print(f"| {q.name} | {m} x {n} x {k} | {q.kind} | {1e3 * r['one']:.3f} | "
                      f"{1e3 * best:.3f} ({1e3 * r['rows']:.3f} / {1e3 * r['columns']:.3f}) "
                      f"| {1e3 * r['tiles']:.3f} ({q.split}) |")
            print(f"| sum | | | {1e3 * tot['one']:.3f} | {1e3 * tot['ideal']:.3f} | "
                  f"{1e3 * tot['tiles']:.3f} |")
            print(f"\nAgainst the bound: products on 1 thread {tot['one'] / bound:.2f}x, "
                  f"ideally split {tot['ideal'] / bound:.2f}x, in Yota's tiles "
                  f"{tot['tiles'] / bound:.2f}x; Yota's whole W3 gradient (hot loop, median "
                  f"of 300) {1e3 * float(np.median(hot)):.3f} ms = "
                  f"{float(np.median(hot)) / bound:.2f}x")


if __name__ == "__main__":
    main()
