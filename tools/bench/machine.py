"""The machine: its memory bandwidth and BLAS rate measured in the run, each workload's
physical bound from them, its name, its load, and the meta record of a run."""

from __future__ import annotations

import concurrent.futures
import datetime
import math
import os
import platform
import shlex
import subprocess
import time
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from bench.workloads import Workload


def triad_bandwidth(n: int, threads: int, reps: int = 5) -> float:
    """Bytes per second of a = b + s*c over float64 arrays of n elements (24 bytes per
    element: two reads, one write). Each thread walks its share in blocks small enough that
    the second ufunc pass over a block hits the cache, so memory sees one triad."""
    a, b, c = np.empty(n), np.ones(n), np.full(n, 2.0)
    a.fill(0.0)
    block = 1 << 15

    def part(lo: int, hi: int) -> None:
        for i in range(lo, hi, block):
            j = min(i + block, hi)
            np.multiply(c[i:j], 3.0, out=a[i:j])
            np.add(a[i:j], b[i:j], out=a[i:j])

    bounds = np.linspace(0, n, threads + 1).astype(int)
    best = math.inf
    with concurrent.futures.ThreadPoolExecutor(threads) as pool:
        for _ in range(reps):
            t0 = time.perf_counter()
            list(pool.map(lambda k: part(bounds[k], bounds[k + 1]), range(threads)))
            best = min(best, time.perf_counter() - t0)
    return 24 * n / best


def gemm_rate(n: int, dtype: type, reps: int = 10) -> float:
    """FLOP/s of an n x n x n matrix product through NumPy's BLAS, best of reps."""
    A, B = np.ones((n, n), dtype), np.ones((n, n), dtype)
    C = np.empty((n, n), dtype)
    np.matmul(A, B, out=C)
    best = min(_once(lambda: np.matmul(A, B, out=C)) for _ in range(reps))
    return 2 * n**3 / best


def _once(fn: Callable[[], Any]) -> float:
    t0 = time.perf_counter()
    fn()
    return time.perf_counter() - t0


def measure_limits(quick: bool, threads: int) -> dict[str, Any]:
    """Bandwidth and BLAS rate with as many threads as the systems may use."""
    n = 1 << (21 if quick else 23)  # 3 x 64 MiB in the full run: twice the L3 of these CPUs
    bw = {k: triad_bandwidth(n, k) for k in sorted({1, threads})}
    size = 256 if quick else 1024
    return {
        "triad_array_bytes": 8 * n,
        "threads": threads,
        "bandwidth_by_threads_Bps": bw,
        "bandwidth_Bps": max(bw.values()),
        "gemm_size": size,
        "flops": {"float32": gemm_rate(size, np.float32), "float64": gemm_rate(size, np.float64)},
    }


def bound(w: Workload, inputs: dict[str, np.ndarray], limits: dict[str, Any]) -> dict[str, Any]:
    """The physical lower bound: every input read once and every gradient written once at
    the measured bandwidth, or the matrix-product FLOPs at the measured BLAS rate."""
    nbytes = sum(v.nbytes for v in inputs.values()) + sum(inputs[n].nbytes for n in w.params)
    t_mem = nbytes / limits["bandwidth_Bps"]
    t_flop = w.flops / limits["flops"][np.dtype(w.dtype).name]
    return {"bytes": nbytes, "flops": w.flops, "memory_s": t_mem, "compute_s": t_flop,
            "bound_s": max(t_mem, t_flop), "kind": "FLOPs" if t_flop > t_mem else "bytes"}


def machine_name() -> str:
    try:
        out = subprocess.run(["lscpu"], capture_output=True, text=True, timeout=10).stdout
        for line in out.splitlines():
            if line.startswith("Model name:"):
                return line.split(":", 1)[1].strip()
    except (OSError, subprocess.SubprocessError):
        pass
    return platform.processor() or platform.machine()


def run_meta(argv: Sequence[str], tool: str) -> dict[str, Any]:
    """The date, machine, cores, command line and load of a run of ``tool`` (for the JSON
    of bench_compile.py and bench_transforms.py; docs/hooks/performance.py shows it)."""
    return {"date": datetime.date.today().isoformat(), "machine": machine_name(),
            "cores": os.cpu_count(), "command": shlex.join(["python", tool, *argv]),
            "load_start": load_average()}


def load_average() -> float | None:
    """The load average over the last minute, or None where the system has none."""
    try:
        return round(os.getloadavg()[0], 2)
    except (OSError, AttributeError):  # (no os.getloadavg on Windows)
        return None
