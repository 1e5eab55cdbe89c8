"""What the optimization pipeline does to the issue's example gradients.

    python tools/bench_passes.py [--repeat 20]

For each gradient (W2 elementwise, W3 MLP, W4 RNN), traced with ``yota.trace`` and
differentiated with ``yota.ir.autodiff.vjp``: op counts before and after ``optimize``,
the fused kernels, the memory plan's peak bytes against the sum of all intermediate
sizes, the matrix products (count and m x k x n) before and after, and the pipeline's
time (median and minimum of ``--repeat`` runs, and the sum of each pass's fastest run,
which stays steady on a loaded machine; verifier off).
"""

from __future__ import annotations

import argparse
import os
import statistics
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np
from yota.ir import Function
from yota.ir.autodiff import vjp
from yota.ir.passes import PASSES, PIPELINE, MemoryPlan, PassContext, optimize

import yota


def logistic(x: np.ndarray) -> np.ndarray:
    return 1 / (1 + np.exp(-x))


def w2(x: np.ndarray, y: np.ndarray) -> Any:
    return np.sum(np.tanh(x) * logistic(y) + np.exp(-x * x) * y)


@dataclass
class MLP:
    W1: np.ndarray
    b1: np.ndarray
    W2: np.ndarray
    b2: np.ndarray
    W3: np.ndarray
    b3: np.ndarray


def mlp(m: MLP, x: np.ndarray, labels: np.ndarray) -> Any:
    h1 = np.tanh(x @ m.W1 + m.b1)
    h2 = np.tanh(h1 @ m.W2 + m.b2)
    z = h2 @ m.W3 + m.b3
    zmax = np.max(z, axis=1, keepdims=True)
    lse = np.log(np.sum(np.exp(z - zmax), axis=1)) + zmax[:, 0]
    return np.sum(lse - z[np.arange(z.shape[0]), labels]) / z.shape[0]


@dataclass
class RNN:
    W: np.ndarray
    U: np.ndarray
    b: np.ndarray


def rnn(p: RNN, xs: np.ndarray) -> Any:
    h = np.zeros((xs.shape[1], p.W.shape[0]), dtype=xs.dtype)
    for t in range(xs.shape[0]):
        h = np.tanh(h @ p.W.T + xs[t] @ p.U.T + p.b)
    return np.sum(h ** 2)


def workloads() -> dict[str, tuple[Callable[..., Any], tuple[Any, ...], int]]:
    """name -> (function, example arguments, number of leading leaves to differentiate)."""
    rng = np.random.default_rng(0)
    f32, f64 = np.float32, np.float64

    def r(*shape: int, dt: Any = f32) -> np.ndarray:
        return (rng.standard_normal(shape) * 0.05).astype(dt)

    n = 10**6
    m = MLP(r(784, 512), r(512), r(512, 256), r(256), r(256, 10), r(10))
    net = RNN(r(256, 256, dt=f64), r(256, 256, dt=f64), r(256, dt=f64))
    return {
        "W2 elementwise, N=1e6": (w2, (r(n), r(n)), 2),
        "W3 MLP 784-512-256-10, batch 128": (mlp, (m, r(128, 784), rng.integers(0, 10, 128)), 6),
        "W4 RNN 20 steps, hidden 256, batch 32": (rnn, (net, r(20, 32, 256, dt=f64)), 3),
    }


def gradient(f: Callable[..., Any], args: tuple[Any, ...], n_wrt: int) -> Function:
    _, tape = yota.trace(f, *args)
    return vjp(yota.to_ir(tape), list(range(n_wrt)))


def gemms(fn: Function) -> str:
    shapes = Counter(f"{op.operands[0].shape[-2]}x{op.operands[0].shape[-1]}x"
                     f"{op.result.shape[-1]}" for op in fn.ops if op.name == "matmul")
    return ", ".join(f"{k} x{v}" for k, v in sorted(shapes.items())) or "none"


def op_counts(fn: Function) -> str:
    compute = sum(op.name != "const" for op in fn.ops)
    return f"{len(fn.ops)} ops ({compute} without constants)"


def mib(n: int) -> str:
    return f"{n / 2**20:.2f} MiB"


def timings(g: Function, repeat: int) -> tuple[list[float], float]:
    """Whole-pipeline times, and the sum over passes of each pass's fastest run (steady
    even on a loaded machine)."""
    times: list[float] = []
    best = [float("inf")] * len(PIPELINE)
    for _ in range(repeat):
        fn, start = g, time.perf_counter()
        for i, (name, _) in enumerate(PIPELINE):
            t = time.perf_counter()
            fn = PASSES[name].apply(fn, PassContext())
            best[i] = min(best[i], time.perf_counter() - t)
        times.append(time.perf_counter() - start)
    return times, sum(best)


def report(name: str, g: Function, repeat: int) -> None:
    times, per_pass = timings(g, repeat)
    stages = optimize(g, trace_stages=True)
    opt = stages[-1][1]
    plan = MemoryPlan.of(opt)
    assert plan is not None
    kernels = [opt.callees[op.attrs["callee"]] for op in opt.ops if op.name == "fused"]
    print(f"## {name}")
    print(f"- before: {op_counts(g)}; after: {op_counts(opt)}")
    print("- per pass: " + " -> ".join(f"{n} {len(f.ops)}" for n, f in stages))
    kinds = Counter(f"{len(k.ops)} ops over {list(k.attrs['domain'])}" for k in kernels)
    sizes = ", ".join(f"{k} x{n}" if n > 1 else k for k, n in kinds.items())
    print(f"- fused kernels: {len(kernels)} ({sizes})")
    print(f"- memory: planned peak {mib(plan.peak_bytes)} in {len(plan.buffers)} buffers; "
          f"all intermediates and outputs {mib(plan.total_bytes)}; "
          f"most live at one op {mib(plan.live_bytes)}")
    print(f"- matrix products before: {gemms(g)}")
    print(f"- matrix products after:  {gemms(opt)}")
    print(f"- pipeline time: median {statistics.median(times) * 1e3:.1f} ms, "
          f"min {min(times) * 1e3:.1f} ms over {repeat} runs; "
          f"sum of per-pass minimums {per_pass * 1e3:.1f} ms\n")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeat", type=int, default=20)
    args = ap.parse_args()
    os.environ["YOTA_VERIFY"] = "0"
    for name, (f, xs, n_wrt) in workloads().items():
        report(name, gradient(f, xs, n_wrt), args.repeat)


if __name__ == "__main__":
    main()
