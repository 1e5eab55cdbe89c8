"""Quick micro-benchmarks of the llvm backend against the interpreter and hand NumPy, in
one run (JAX and PyTorch comparisons live in tools/bench.py).

    python tools/bench_llvm.py            # W2 at N=10^6, the 784-512-256-10 MLP, call overhead
    python tools/bench_llvm.py --quick    # tiny sizes (a smoke test)

Reports medians (and the best round) in milliseconds, plus compile times.
"""

from __future__ import annotations

import argparse
import time
from collections.abc import Callable
from typing import Any

import numpy as np
from bench.workloads import MLP, hand_w2, hand_w3, loss_w2, loss_w3, w3
from yota.backends import llvm as native
from yota.backends.llvm.runtime.target import host
from yota.ir import run
from yota.ir.autodiff import vjp
from yota.ir.passes import optimize

import yota


def timeit(f: Callable[[], Any], rounds: int, inner: int = 1) -> tuple[float, float]:
    f()
    ts = []
    for _ in range(rounds):
        t = time.perf_counter()
        for _ in range(inner):
            f()
        ts.append((time.perf_counter() - t) / inner)
    return float(np.median(ts)), float(np.min(ts))


def row(name: str, t: tuple[float, float], unit: float = 1e3, suffix: str = "ms") -> None:
    print(f"  {name:42s} {t[0] * unit:10.3f} {suffix}   (best {t[1] * unit:.3f})")


# the workloads (losses and hand-written gradients) are tools/bench/workloads.py's
w2 = loss_w2(np)
mlp = loss_w3(np)


def first_call(f: Callable[..., Any], *args: Any, backend: str) -> float:
    t = time.perf_counter()
    yota.grad(f, *args, backend=backend)
    return time.perf_counter() - t


def bench_w2(n: int, rounds: int) -> None:
    print(f"W2 value and gradient, N={n} float32")
    rng = np.random.default_rng(0)
    x, y = (rng.standard_normal(n).astype(np.float32) for _ in range(2))
    fresh = lambda: (lambda a, b: w2(a, b))  # noqa: E731 - a new function: empty cache
    f = fresh()
    print(f"  first call (trace+diff+optimize+compile) {first_call(f, x, y, backend='llvm'):.3f} s")
    row("yota.grad, llvm (default threads)", timeit(lambda: yota.grad(f, x, y, backend="llvm"),
                                                     rounds))
    g = optimize(vjp(_ir(w2, x, y), [0, 1]))
    for th in (1, 2):
        exe = native.compile(g, threads=th)
        row(f"llvm executable, {th} thread(s)", timeit(lambda e=exe: e(x, y), rounds))
        outs = [np.empty((), np.float32), np.empty(n, np.float32), np.empty(n, np.float32)]
        row(f"llvm executable, {th} thread(s), out=", timeit(lambda e=exe, o=outs: e(x, y, out=o),
                                                            rounds))
    row("hand-written NumPy", timeit(lambda: hand_w2(x, y), rounds))
    row("interpreter (optimized IR)", timeit(lambda: run(g, x, y), max(3, rounds // 4)))


def _ir(f: Callable[..., Any], *args: Any) -> Any:
    from yota.lowering import to_ir
    from yota.tracing import trace

    return to_ir(trace(f, *args)[1])


def bench_mlp(sizes: tuple[int, ...], batch: int, rounds: int) -> None:
    print(f"W3 MLP {'-'.join(map(str, sizes))} gradient, batch {batch} float32")
    w = w3(sizes, batch)
    inputs = w.make(np.random.default_rng(1))
    p = MLP(*(inputs[n] for n in w.params))
    X, labels = inputs["X"], inputs["labels"]
    f = lambda p, X, labels: mlp(p, X, labels)  # noqa: E731
    print(f"  first call (trace+diff+optimize+compile) "
          f"{first_call(f, p, X, labels, backend='llvm'):.3f} s")
    row("yota.grad, llvm", timeit(lambda: yota.grad(f, p, X, labels, backend="llvm"), rounds))
    row("hand-written NumPy", timeit(lambda: hand_w3(**inputs), rounds))
    f2 = lambda p, X, labels: mlp(p, X, labels)  # noqa: E731
    row("yota.grad, interp", timeit(lambda: yota.grad(f2, p, X, labels, backend="interp"),
                                    max(3, rounds // 2)))


def bench_overhead(rounds: int) -> None:
    print("Per-call overhead, x of size 5 float64: sum(logistic(x)) value and gradient")
    x = np.random.default_rng(2).standard_normal(5)
    f = lambda x: np.sum(1 / (1 + np.exp(-x)))  # noqa: E731
    g = optimize(vjp(_ir(f, x), [0]))
    exe = native.compile(g)
    row("llvm executable", timeit(lambda: exe(x), rounds, 2000), 1e6, "us")
    row("yota.grad, llvm", timeit(lambda: yota.grad(f, x, backend="llvm"), rounds, 500), 1e6,
        "us")
    row("hand-written NumPy", timeit(lambda: (lambda s: (np.sum(s), s * (1 - s)))(
        1 / (1 + np.exp(-x))), rounds, 2000), 1e6, "us")
    f2 = lambda x: np.sum(1 / (1 + np.exp(-x)))  # noqa: E731
    row("yota.grad, interp", timeit(lambda: yota.grad(f2, x, backend="interp"), rounds, 200),
        1e6, "us")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="tiny sizes, few rounds")
    ap.add_argument("--rounds", type=int, default=30)
    a = ap.parse_args()
    rounds = 3 if a.quick else a.rounds
    print(f"target: {native.target_key()['cpu']}, threads {host().threads}\n")
    bench_w2(10_000 if a.quick else 1_000_000, rounds)
    bench_mlp((20, 16, 8, 10) if a.quick else (784, 512, 256, 10), 8 if a.quick else 128,
              rounds)
    bench_overhead(rounds)


if __name__ == "__main__":
    main()
