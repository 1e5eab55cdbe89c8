"""Convolutions lowered two ways (``yota.numpy.convolve``): shifted slices (one fused
direct-loop kernel) against im2col (gathered windows and one GEMM), for the value and the
gradient, at typical sizes; each with the correlation's own derivative rule (a ``call``,
the default) and with the ops' rules (``RULED = False``: what the pass pipeline makes of
the slices, or of the gather); SciPy's own call (value only) beside them.

Each case compiles every variant (``STRATEGY`` forced, no on-disk cache), checks they
agree, then times them interleaved (A, B, C... rounds), medians of ``--rounds``.

    python tools/bench_convolve.py            # Markdown table on stdout
    python tools/bench_convolve.py --quick
"""

from __future__ import annotations

import argparse
import statistics
import time
from collections.abc import Callable
from typing import Any

import numpy as np
import scipy.signal as ss

import yota
from yota.numpy import convolve as conv

Case = tuple[str, Callable[..., Any], list[np.ndarray]]


def cases(quick: bool) -> list[Case]:
    r = np.random.default_rng(0)
    n1 = 10_000 if quick else 100_000
    img = 64 if quick else 256
    out: list[Case] = []
    for m in (3, 9, 31, 101):
        out.append((f"np.convolve N={n1} M={m} same", lambda a, v: np.convolve(a, v, "same"),
                    [r.standard_normal(n1), r.standard_normal(m)]))
    for k in (3, 5, 9, 15):
        out.append((f"convolve2d {img}x{img} * {k}x{k} same",
                    lambda x, w: ss.convolve2d(x, w, "same"),
                    [r.standard_normal((img, img)), r.standard_normal((k, k))]))
    v = 16 if quick else 48
    out.append((f"signal.convolve {v}^3 * 3^3 valid", lambda x, w: ss.convolve(x, w, "valid"),
                [r.standard_normal((v, v, v)), r.standard_normal((3, 3, 3))]))
    return out


VARIANTS = {"shifts": ("shifts", True), "gemm": ("gemm", True),
            "shifts, ops' rules": ("shifts", False), "gemm, ops' rules": ("gemm", False)}


def _compiled(variant: str, fn: Callable[..., Any], args: list[np.ndarray]) -> tuple[Any, Any]:
    conv.STRATEGY, conv.RULED = VARIANTS[variant]
    try:
        fwd = yota.compile(fn, *args, cache=False)
        loss = lambda *xs: np.sum(fn(*xs) ** 2)  # noqa: E731
        yota.grad(loss, *args, cache=False)  # compiled now, replayed below
        return fwd, loss
    finally:
        conv.STRATEGY, conv.RULED = None, True


def _time(f: Callable[[], Any]) -> float:
    t = time.perf_counter()
    f()
    return time.perf_counter() - t


def measure(name: str, fn: Callable[..., Any], args: list[np.ndarray], rounds: int
            ) -> dict[str, Any]:
    runs: dict[str, list[Callable[[], Any]]] = {}
    for s in VARIANTS:
        fwd, loss = _compiled(s, fn, args)
        runs[s] = [lambda fwd=fwd: fwd(*args),
                   lambda loss=loss: yota.grad(loss, *args, cache=False)]
    for s in VARIANTS:
        np.testing.assert_allclose(runs[s][0](), runs["gemm"][0](), rtol=1e-9, atol=1e-9)
    times: dict[str, list[float]] = {f"{s} {k}": [] for s in runs for k in ("value", "grad")}
    times["scipy value"] = []
    for _ in range(rounds):
        for s, (v, g) in runs.items():
            times[f"{s} value"].append(_time(v))
            times[f"{s} grad"].append(_time(g))
        times["scipy value"].append(_time(lambda: fn(*args)))
    return {"case": name, **{k: statistics.median(v) * 1e3 for k, v in times.items()}}


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--quick", action="store_true")
    p.add_argument("--rounds", type=int, default=30)
    a = p.parse_args()
    rows = [measure(n, f, xs, 5 if a.quick else a.rounds) for n, f, xs in cases(a.quick)]
    cols = [f"{v} {k}" for k in ("value", "grad") for v in VARIANTS] + ["scipy value"]
    print("| case | " + " | ".join(f"{c} (ms)" for c in cols) + " |")
    print("|---|" + "---:|" * len(cols))
    for r in rows:
        print(f"| {r['case']} | " + " | ".join(f"{r[c]:.3f}" for c in cols) + " |")


if __name__ == "__main__":
    main()
