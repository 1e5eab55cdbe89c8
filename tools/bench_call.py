"""Per-call overhead of ``yota.grad`` on a cache-hot path (the program is compiled, the
arguments have the signature it was compiled for), and how it grows with the number of
argument leaves and of gradient outputs.

    python tools/bench_call.py [--reps N] [--rounds R] [--ab]

W1 is ``tools/bench.py``'s tiny workload (sum(logistic(x)), x of 5 f64). The leaf rows
differentiate ``sum(x0 + x1 + ... + x{k-1})`` over k arrays of 5 f64 (k leaves, k gradient
outputs); the structure rows pass the same k arrays as one tuple (or dict); the int rows
add k integer arguments (constants of the program); the float row adds a Python float
(a traced input with a float gradient). Each number is the median over R rounds of
the mean over N calls, in microseconds, by the wall clock and by the process's CPU time
(less disturbed by other processes on a loaded machine); rounds of different rows are
interleaved. The per-leaf rows at the end are slopes: (16 leaves - 1 leaf) / 15 for an
array argument with its gradient output, (16 ints - 4 ints) / 12 for an int constant.
``--ab`` adds W1 through the Python fast path (``yota.fastpath.NATIVE_FAST = False`` while
its fast path is made), interleaved with the others, for an A/B in one run.
"""

from __future__ import annotations

import statistics
import sys
import time
import warnings

import numpy as np

import yota
from yota import fastpath


def _w1(x):
    return np.sum(1 / (1 + np.exp(-x)))


def _sum_k(*xs):
    s = xs[0]
    for x in xs[1:]:
        s = s + x
    return np.sum(s)


def _sum_tuple(xs):
    return _sum_k(*xs)


def _sum_ints(x, *ks):
    return np.sum(x) + 0.0 * len(ks)


def _sum_dict(d):
    return _sum_k(*d.values())


def _scaled(x, s):
    return np.sum(x) * s


def cases() -> dict[str, tuple]:
    x = np.linspace(-1.0, 1.0, 5)
    out = {"W1 (1 leaf, 1 grad)": (_w1, (x,))}
    for k in (1, 2, 4, 8, 16):
        xs = tuple(x + i for i in range(k))
        out[f"{k} leaves, {k} grads"] = (_sum_k, xs)
    for k in (4, 16):
        xs = tuple(x + i for i in range(k))
        out[f"tuple of {k} leaves, {k} grads"] = (_sum_tuple, (xs,))
    for k in (4, 16):
        out[f"1 grad + {k} int leaves"] = (_sum_ints, (x, *range(k)))
    for k in (4, 16):
        d = {f"p{i}": x + i for i in range(k)}
        out[f"dict of {k} leaves, {k} grads"] = (_sum_dict, (d,))
    out["1 grad + 1 float leaf"] = (_scaled, (x, 2.0))
    return out


def main() -> None:
    warnings.simplefilter("ignore", getattr(yota, "RetraceWarning", Warning))  # new signatures
    reps = int(sys.argv[sys.argv.index("--reps") + 1]) if "--reps" in sys.argv else 2000
    rounds = int(sys.argv[sys.argv.index("--rounds") + 1]) if "--rounds" in sys.argv else 15
    cs = cases()
    if "--ab" in sys.argv:
        w1py = type(_w1)(_w1.__code__, _w1.__globals__, "_w1py")
        cs["W1, Python fast path"] = (w1py, cs["W1 (1 leaf, 1 grad)"][1])
        fastpath.NATIVE_FAST = False
        for _ in range(3):  # (the fast path is made at the first repeated call)
            yota.grad(w1py, *cs["W1, Python fast path"][1])
        fastpath.NATIVE_FAST = True
        assert type(fastpath.FAST[id(w1py)][1]).__name__ == "function"
    for f, args in cs.values():
        for _ in range(200):
            yota.grad(f, *args)
    wall: dict[str, list[float]] = {k: [] for k in cs}
    cpu: dict[str, list[float]] = {k: [] for k in cs}
    grad = yota.grad
    T, C = time.perf_counter, time.process_time
    for _ in range(rounds):
        for name, (f, args) in cs.items():
            t, c = T(), C()
            for _ in range(reps):
                grad(f, *args)
            wall[name].append((T() - t) / reps)
            cpu[name].append((C() - c) / reps)
    print(f"{'per yota.grad call (median)':<32} {'wall':>9} {'cpu':>9}")
    med = {name: (statistics.median(wall[name]) * 1e6, statistics.median(cpu[name]) * 1e6)
           for name in cs}
    for name in cs:
        print(f"{name:<32} {med[name][0]:6.2f} us {med[name][1]:6.2f} us")
    for name, hi, lo, n in [("per array leaf + grad output", "16 leaves, 16 grads",
                             "1 leaves, 1 grads", 15),
                            ("per leaf, in a tuple", "tuple of 16 leaves, 16 grads",
                             "tuple of 4 leaves, 4 grads", 12),
                            ("per leaf, in a dict", "dict of 16 leaves, 16 grads",
                             "dict of 4 leaves, 4 grads", 12),
                            ("per int leaf", "1 grad + 16 int leaves", "1 grad + 4 int leaves",
                             12)]:
        print(f"{name:<32} {(med[hi][0] - med[lo][0]) / n * 1e3:6.0f} ns "
              f"{(med[hi][1] - med[lo][1]) / n * 1e3:6.0f} ns")


if __name__ == "__main__":
    main()
