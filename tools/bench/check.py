"""Checking a system's answer against the hand-written gradient before it is timed."""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from bench.workloads import Result, Workload


def tolerance(dtype: type) -> float:
    return 2e-3 if np.dtype(dtype) == np.float32 else 1e-8


def rel_err(a: Any, b: Any) -> float:
    a, b = np.asarray(a, np.float64), np.asarray(b, np.float64)
    return float(np.linalg.norm(a - b) / max(float(np.linalg.norm(b)), 1e-30))


def compare(got: Result, ref: Result, w: Workload) -> tuple[float, str]:
    """Largest relative error (2-norm) over value and gradients, and what is wrong if any."""
    (val, grads), (rval, rgrads) = got, ref
    if set(grads) != set(rgrads):
        return math.inf, f"gradients for {sorted(grads)}, expected {sorted(rgrads)}"
    errs = {"value": rel_err(val, rval)}
    for n, g in rgrads.items():
        a = np.asarray(grads[n])
        if a.shape != g.shape or a.dtype != g.dtype:
            return math.inf, f"d{n}: {a.dtype}{list(a.shape)}, expected {g.dtype}{list(g.shape)}"
        errs[f"d{n}"] = rel_err(a, g)
    worst = max(errs, key=lambda k: errs[k])
    if not errs[worst] <= tolerance(w.dtype):
        return errs[worst], f"{worst} differs: relative error {errs[worst]:.2e}"
    return errs[worst], ""

