"""One workload: every system prepared, called once (trace + compile + run, timed) and
checked, then timed in interleaved rounds, its memory measured, and its ratios to Yota
and to the physical bound."""

from __future__ import annotations

import dataclasses
import math
import time
from collections.abc import Sequence
from typing import Any

import numpy as np

from bench.check import compare
from bench.log import log, why
from bench.machine import bound
from bench.systems import Step, System, Unavailable, yota_backends
from bench.timing import Outcome, Timing, calibrate, peak_rss_delta, peak_tracemalloc, run_rounds
from bench.workloads import Result, Workload


def first_call(system: System, w: Workload, inputs: dict[str, np.ndarray], ref: Result,
               out: Outcome) -> Step | None:
    """Prepare, call once (timed: trace + compile + run), check against the reference.
    Returns the step to time, or None with the outcome saying why not."""
    try:
        step, read = system.prepare(system.module, w, inputs)
        t0 = time.perf_counter()
        result = step()
        out.first_call_s = time.perf_counter() - t0
        got = read(result)
    except Exception as e:
        out.status, out.reason = "failed", why(e)
        return None
    err, problem = compare(got, ref, w)
    out.max_rel_err = err if math.isfinite(err) else None
    if problem:
        out.status, out.reason = "mismatch", problem
        return None
    return step


def run_workload(w: Workload, systems: Sequence[System], timing: Timing,
                 limits: dict[str, Any], seed: int = 0) -> dict[str, Any]:
    inputs = w.make(np.random.default_rng(seed))
    ref = w.hand(**inputs)
    outcomes = {s.name: Outcome(s.name) for s in systems}
    steps: dict[str, Step] = {}
    counts: dict[str, int] = {}
    for s in systems:
        o = outcomes[s.name]
        try:
            s.setup()
        except Unavailable as e:
            o.status, o.reason = "skipped", str(e)
            continue
        step = first_call(s, w, inputs, ref, o)
        if step is None:
            log(f"  {w.name} {s.name}: {o.status}: {o.reason}")
            continue
        counts[s.name] = calibrate(step, timing)
        steps[s.name] = step
    run_rounds(steps, counts, timing, outcomes)
    for s in systems:
        if s.name in steps:
            measure_memory(s, steps[s.name], outcomes[s.name])
    res = {"name": w.name, "description": w.desc, "dtype": np.dtype(w.dtype).name,
           "bound": bound(w, inputs, limits), "results": [dataclasses.asdict(o) for o in
                                                           outcomes.values()]}
    for r, o in zip(res["results"], outcomes.values(), strict=True):
        q = o.quartiles()
        r.update(q1_s=q and q[0], median_s=q and q[1], q3_s=q and q[2], rounds=len(o.samples))
    add_ratios(res)
    return res


def measure_memory(s: System, step: Step, o: Outcome) -> None:
    try:
        if s.numpy_based:
            o.peak_tracemalloc_bytes = peak_tracemalloc(step)
        o.peak_rss_delta_bytes = peak_rss_delta(step)
    except Exception as e:  # memory is a side measurement: never lose the timings to it
        log(f"  memory of {s.name}: {why(e)}")


def reference_system(results: Sequence[dict[str, Any]], default: str) -> str | None:
    """Ratios are to Yota's default backend, else to the first Yota backend that ran."""
    ran = [r["system"] for r in results if r["median_s"] is not None]
    preferred = f"yota[{default}]"
    if preferred in ran:
        return preferred
    return next((n for n in ran if n.startswith("yota[")), None)


def add_ratios(res: dict[str, Any], default_backend: str | None = None) -> None:
    if default_backend is None:
        default_backend = _default_backend()
    ref = reference_system(res["results"], default_backend)
    t_ref = next((r["median_s"] for r in res["results"] if r["system"] == ref), None)
    res["ratio_reference"] = ref
    for r in res["results"]:
        med = r["median_s"]
        r["ratio_to_yota"] = med / t_ref if med is not None and t_ref else None
        r["ratio_to_bound"] = med / res["bound"]["bound_s"] if med is not None else None


def _default_backend() -> str:
    try:
        return yota_backends()[1]
    except Exception:
        return "interp"

