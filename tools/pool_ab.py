"""Yota's pool against its jobs on the calling thread alone, beside busy processes, in one
process.

    python tools/pool_ab.py W3 --load 2 --seconds 20 [--jax]

Runs one workload of ``tools/bench.py`` as Yota's gradient twice over, with the pool
("yota": ``num_threads()`` threads per job) and with every job on the calling thread
("yota-alone": the same compiled program under ``pool.set_num_threads(1)``, its tiled
GEMMs then whole calls), and optionally JAX's, in interleaved samples of 5 calls while
``--load`` busy processes run (``bench.load.BusyLoad``); each sample starts once the
process rests (``bench.timing.settle``). Prints the median wall and CPU (``process_time``)
time per call of each, and the pool's counters over the run (``pool.stats()``). An A/B
tool for the pool; the performance page's tables come from ``tools/bench.py``.

``--threads S`` then runs each system back to back for S seconds beside the same load
and prints, per thread of the process that ran, the time it ran, the time it waited
runnable for a CPU, and how often it was put on one, per call (Linux
``/proc/self/task/*/schedstat``): where a system's wall time goes when it shares the
cores, e.g. a helper that wakes for each job and then waits out another process's
time slice.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from typing import Any

import numpy as np
from bench.load import BusyLoad
from bench.systems import load_jax, prepare_jax, prepare_yota
from bench.timing import settle
from bench.workloads import find


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("workload", help="a workload of tools/bench.py by name (W3, W9, W4-f32)")
    p.add_argument("--load", type=int, default=2, help="busy processes (default 2)")
    p.add_argument("--seconds", type=float, default=20.0, help="length of the run")
    p.add_argument("--jax", action="store_true", help="time JAX's gradient too")
    p.add_argument("--threads", type=float, default=0.0, metavar="S",
                   help="then S seconds of each system's calls back to back, with the "
                        "scheduler's account of each thread per call (Linux)")
    args = p.parse_args()
    from yota.backends.llvm.runtime import pool

    import yota

    try:
        w = find(args.workload)
    except KeyError as e:
        sys.exit(str(e.args[0]))
    inputs = w.make(np.random.default_rng(0))
    step, _ = prepare_yota("llvm")(yota, w, inputs)
    steps = {"yota": step, "yota-alone": step}
    threads = {"yota-alone": 1}  # set_num_threads per system; default: the setting
    if args.jax:
        steps["jax"] = prepare_jax(load_jax(), w, inputs)[0]
    for s in steps.values():
        s()
        s()
    wall: dict[str, list[float]] = {k: [] for k in steps}
    cpu: dict[str, list[float]] = {k: [] for k in steps}
    default = pool.num_threads()
    before = pool.stats()
    with BusyLoad(args.load):
        time.sleep(0.5)
        end = time.monotonic() + args.seconds
        r = 0
        while time.monotonic() < end:
            names = list(steps)
            for name in names[r % len(names):] + names[:r % len(names)]:
                settle(0.25)
                pool.set_num_threads(threads.get(name, default))
                t0, c0 = time.perf_counter(), time.process_time()
                for _ in range(5):
                    steps[name]()
                wall[name].append((time.perf_counter() - t0) / 5)
                cpu[name].append((time.process_time() - c0) / 5)
            r += 1
    pool.set_num_threads(default)
    after = pool.stats()
    for name in steps:
        print(f"{w.name} {name:11s} {statistics.median(wall[name]) * 1e3:7.2f} ms per call "
              f"(cpu {statistics.median(cpu[name]) * 1e3:.2f} ms), {len(wall[name])} samples")
    print("pool:", {k: after[k] - before[k] for k in after})
    if args.threads > 0:
        for name in steps:
            with BusyLoad(args.load):
                time.sleep(0.5)
                pool.set_num_threads(threads.get(name, default))
                _thread_account(name, steps[name], args.threads)
                pool.set_num_threads(default)


def _schedstat() -> dict[tuple[str, str], tuple[int, int, int]]:
    """Per thread of this process: (name, tid) -> ns run, ns waited runnable, times run."""
    out = {}
    for tid in os.listdir("/proc/self/task"):
        try:
            with open(f"/proc/self/task/{tid}/comm") as f:
                comm = f.read().strip()
            with open(f"/proc/self/task/{tid}/schedstat") as f:
                run, wait, slices = (int(x) for x in f.read().split()[:3])
        except (OSError, ValueError):
            continue
        out[(comm, tid)] = (run, wait, slices)
    return out


def _thread_account(name: str, step: Any, seconds: float) -> None:
    before, n = _schedstat(), 0
    t0 = time.perf_counter()
    while time.perf_counter() - t0 < seconds:
        step()
        n += 1
    wall = time.perf_counter() - t0
    after = _schedstat()
    print(f"{name}: {wall / n * 1e3:.2f} ms per call over {n} calls; per call and thread:")
    for key, (run, wait, slices) in sorted(after.items()):
        r0, w0, s0 = before.get(key, (0, 0, 0))
        if run - r0 > 0.01 * wall * 1e9:  # threads that ran at least 1% of the time
            print(f"  {key[0]:>16s} {key[1]:>7s}  ran {(run - r0) / n / 1e6:6.2f} ms, "
                  f"waited runnable {(wait - w0) / n / 1e6:6.2f} ms, "
                  f"put on a CPU {(slices - s0) / n:5.1f} times")


if __name__ == "__main__":
    main()
