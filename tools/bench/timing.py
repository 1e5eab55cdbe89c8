"""Timing and memory: interleaved rounds of samples (each started once the process is at
rest), calibrated batch sizes, medians and quartiles, and the peak memory of one call."""

from __future__ import annotations

import gc
import math
import time
import tracemalloc
from dataclasses import dataclass, field

import numpy as np

from bench.systems import Step


@dataclass
class Outcome:
    """One system on one workload."""

    system: str
    status: str = "ok"  # ok | skipped | failed | mismatch
    reason: str = ""
    first_call_s: float | None = None
    max_rel_err: float | None = None
    samples: list[float] = field(default_factory=list)
    calls_per_sample: int = 0
    peak_tracemalloc_bytes: int | None = None
    peak_rss_delta_bytes: int | None = None

    def quartiles(self) -> tuple[float, float, float] | None:
        if not self.samples:
            return None
        q1, med, q3 = np.percentile(self.samples, [25, 50, 75])
        return float(q1), float(med), float(q3)


def timed(step: Step, n: int) -> float:
    """Seconds per call, over n back-to-back calls with the garbage collector off."""
    enabled = gc.isenabled()
    gc.disable()
    try:
        t0 = time.perf_counter()
        for _ in range(n):
            step()
        return (time.perf_counter() - t0) / n
    finally:
        if enabled:
            gc.enable()


@dataclass
class Timing:
    budget_s: float  # stop the rounds after this long ...
    min_rounds: int  # ... but only once this many are done
    max_rounds: int
    batch_s: float  # calls per sample are chosen so that one sample takes about this long
    warmup: int = 2
    settle_s: float = 0.25  # before a sample, wait up to this long for the process to rest


def calibrate(step: Step, timing: Timing) -> int:
    """Warm up, then choose how many calls make one sample."""
    t = min(timed(step, 1) for _ in range(timing.warmup))
    return max(1, min(100_000, math.ceil(timing.batch_s / max(t, 1e-9))))


def settle(limit_s: float, window_s: float = 0.01, idle: float = 0.1) -> float:
    """Wait until no thread of this process is still running: until, over a window, the
    process used less than ``idle`` of one core (the calling thread sleeps meanwhile), or
    ``limit_s`` passed. Returns the seconds waited.

    Libraries return before their worker threads rest: NumPy's OpenBLAS workers spin
    about 0.1 s after a call (measured here: a 128x784x512 product, then ~105 ms of one
    core busy), XLA's pool briefly. Without this wait the next system's sample runs beside
    the previous one's spinning threads, so each system would be timed partly against
    another's leftovers (the rotation keeps the cyclic order, so always the same one)."""
    t0 = time.perf_counter()
    if limit_s <= 0:
        return 0.0
    while True:
        w0, c0 = time.perf_counter(), time.process_time()
        time.sleep(window_s)
        w1, c1 = time.perf_counter(), time.process_time()
        if (c1 - c0) < idle * (w1 - w0) or w1 - t0 >= limit_s:
            return w1 - t0


def run_rounds(steps: dict[str, Step], counts: dict[str, int], timing: Timing,
               outcomes: dict[str, Outcome]) -> None:
    """Every system once per round, the order rotating by one each round; each sample
    starts once the process is at rest (``settle``), and the budget counts only samples."""
    names = list(steps)
    spent, r = 0.0, 0
    while names and r < timing.max_rounds and (r < timing.min_rounds or spent < timing.budget_s):
        k = r % len(names)
        for name in names[k:] + names[:k]:
            settle(timing.settle_s)
            t0 = time.perf_counter()
            outcomes[name].samples.append(timed(steps[name], counts[name]))
            spent += time.perf_counter() - t0
            outcomes[name].calls_per_sample = counts[name]
        r += 1


def _proc_status_kb(key: str) -> int | None:
    try:
        with open("/proc/self/status") as f:
            for line in f:
                if line.startswith(key + ":"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    return None


def peak_rss_delta(step: Step) -> int | None:
    """Resident memory high-water mark during one call, above the resident size before it
    (Linux: reset through /proc/self/clear_refs). Memory an allocator reuses from its own
    cache is not seen, so this is a lower bound."""
    try:
        with open("/proc/self/clear_refs", "w") as f:
            f.write("5")
    except OSError:
        return None
    before = _proc_status_kb("VmRSS")
    out = step()
    peak = _proc_status_kb("VmHWM")
    del out
    return None if before is None or peak is None else max(0, peak - before)


def peak_tracemalloc(step: Step) -> int:
    """Peak traced allocation (NumPy array data included) during one call, outputs kept."""
    gc.collect()
    tracemalloc.start()
    try:
        base = tracemalloc.get_traced_memory()[0]
        out = step()
        peak = tracemalloc.get_traced_memory()[1]
        del out
        return peak - base
    finally:
        tracemalloc.stop()

