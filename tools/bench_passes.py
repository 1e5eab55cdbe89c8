"""What the optimization pipeline does to the issue's example gradients.

    python tools/bench_passes.py [--repeat 20]

For each gradient (the W2 elementwise, W3 MLP and W4 RNN workloads of ``tools/bench.py``
at full size, from ``bench.workloads``), traced with ``yota.trace`` and differentiated
with ``yota.ir.autodiff.vjp``: op counts before and after ``optimize``, the fused kernels,
the memory plan's peak bytes against the sum of all intermediate sizes, the matrix
products (count and m x k x n) before and after, and the pipeline's time (median and
minimum of ``--repeat`` runs, and the sum of each pass's fastest run, which stays steady
on a loaded machine; verifier off).
"""

from __future__ import annotations

import argparse
import os
import statistics
import time
from collections import Counter
from collections.abc import Callable
from typing import Any

import numpy as np
from bench.workloads import find
from yota.ir import Function
from yota.ir.autodiff import vjp
from yota.ir.passes import PASSES, PIPELINE, MemoryPlan, PassContext, optimize

import yota


def workloads() -> dict[str, tuple[Callable[..., Any], tuple[Any, ...], int]]:
    """name -> (function, example arguments, number of leading leaves to differentiate):
    the loss takes the differentiated leaves first, then the other inputs."""
    out = {}
    for name in ("W2-1e6", "W3", "W4-f64"):
        w = find(name)
        args, consts = w.call_args(w.make(np.random.default_rng(0)))
        out[f"{w.name}: {w.desc}"] = (w.loss(np), (*args, *consts), len(w.params))
    return out


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
