"""How the first call's compile time grows with the program, for programs with no
repeats (nothing a loop could roll up): per-phase times and the log-log slope.

    python tools/compile_scaling.py                       # 1k .. 100k ops
    python tools/compile_scaling.py --ops 1000 4000 16000 --profile 16000

The program: a deep MLP whose layers all differ (widths drawn at random from 3..24, each
layer's activation and extras drawn from a mix of elementwise ops, reductions and a
normalization; its weights a block of one of 8 weight banks), so no step repeats. ``--ops N`` asks for about N ops in the traced
program (``to_ir``); the gradient (``vjp``) holds about three times as many.

Each size is one first ``yota.grad`` call in this process (on-disk cache off, verifier
off), timed by the compile's own phase record (``yota.phases``: ``trace``, ``to_ir``,
``roll``, ``vjp``, ``passes`` and each pass with ``--detail``, ``lower``, ``codegen``:
LLVM O3 and object code, ``run``), with ``total`` its wall time and ``cpu`` the process's
CPU time (steadier than wall time on a shared machine). The slope is the least-squares
fit of log(time) against log(traced ops), over all sizes and between neighbours.
"""

from __future__ import annotations

import argparse
import cProfile
import gc
import os
import pstats
import time
from collections.abc import Callable
from typing import Any

import numpy as np

os.environ.setdefault("YOTA_CACHE", "0")
os.environ["YOTA_VERIFY"] = "0"

ACTS = ["tanh", "sin", "relu", "sigmoid", "softplus", "square", "gelu"]
EXTRAS = ["none", "none", "norm", "softmax", "residual_sum", "scale"]
OPS_PER_LAYER = 12.7  # traced ops per layer, on average (measured on the mix above)


def _act(name: str, z: Any) -> Any:
    if name == "tanh":
        return np.tanh(z)
    if name == "sin":
        return np.sin(z)
    if name == "relu":
        return np.maximum(z, 0.0)
    if name == "sigmoid":
        return 1.0 / (1.0 + np.exp(-z))
    if name == "softplus":
        return np.log1p(np.exp(-np.abs(z))) + np.maximum(z, 0.0)
    if name == "square":
        return z * z * 0.5
    return 0.5 * z * (1.0 + np.tanh(0.8 * z))  # gelu-like


def _extra(name: str, h: Any) -> Any:
    if name == "norm":
        c = h - np.mean(h, axis=1, keepdims=True)
        return c / np.sqrt(np.mean(c * c, axis=1, keepdims=True) + 1e-3)
    if name == "softmax":
        e = np.exp(h - np.max(h, axis=1, keepdims=True))
        return e / np.sum(e, axis=1, keepdims=True)
    if name == "residual_sum":
        return h + np.sum(h, axis=0, keepdims=True) * 0.01
    if name == "scale":
        return h * 0.9
    return h


BANKS = 8  # weight banks: layer k reads a block of bank j_k (few arrays at any size)
MAX_WIDTH = 24


def make_problem(n_ops: int, seed: int = 0, batch: int = 4
                 ) -> tuple[Callable[..., Any], list[np.ndarray], np.ndarray]:
    """(loss, params, x): a loss over about ``n_ops / OPS_PER_LAYER`` layers that all
    differ; ``params`` holds ``BANKS`` weight matrices, then as many bias vectors, and
    layer ``k`` of widths ``a -> b`` reads the top-left ``a x b`` block of one of them."""
    rng = np.random.default_rng(seed)
    layers = max(1, round(n_ops / OPS_PER_LAYER))
    widths = [int(w) for w in rng.integers(3, MAX_WIDTH + 1, layers + 1)]
    banks = [int(j) for j in rng.integers(BANKS, size=layers)]
    acts = [ACTS[i] for i in rng.integers(len(ACTS), size=layers)]
    extras = [EXTRAS[i] for i in rng.integers(len(EXTRAS), size=layers)]
    params = [rng.standard_normal((MAX_WIDTH, MAX_WIDTH)) / 4 for _ in range(BANKS)]
    params += [0.1 * rng.standard_normal(MAX_WIDTH) for _ in range(BANKS)]

    def loss(ps: list[np.ndarray], x: np.ndarray) -> Any:
        h = x
        for k in range(layers):
            a, b, j = widths[k], widths[k + 1], banks[k]
            h = _extra(extras[k], _act(acts[k], h @ ps[j][:a, :b] + ps[BANKS + j][:b]))
        return np.sum(h * h)

    return loss, params, rng.standard_normal((batch, widths[0]))


def first_call(n_ops: int, seed: int = 0) -> tuple[dict[str, float], dict[str, int]]:
    """A first ``yota.grad`` call (on-disk cache off) on the problem of about ``n_ops``
    traced ops: (phase -> seconds, as ``yota.phases`` recorded them, plus ``cpu``: the
    process's CPU seconds for the call; sizes)."""
    import warnings

    import yota
    from yota import phases

    loss, params, x = make_problem(n_ops, seed)
    gc.collect()
    warnings.simplefilter("ignore", yota.RetraceWarning)  # (each size is a new program)
    cpu = time.process_time()
    yota.grad(loss, params, x)
    cpu = time.process_time() - cpu
    rec = phases.last()
    assert rec is not None
    times = dict(rec.totals())
    times["total"] = rec.elapsed()
    times["cpu"] = cpu
    return times, {"traced": rec.traced or 0, "ops": rec.ops or 0}


def slope(xs: list[float], ys: list[float]) -> float:
    """Least-squares slope of log(y) against log(x)."""
    lx, ly = np.log(xs), np.log(ys)
    return float(np.polyfit(lx, ly, 1)[0]) if len(xs) > 1 else float("nan")


TOP = ["trace", "to_ir", "roll", "vjp", "passes", "lower", "codegen", "run"]


def report(rows: list[tuple[dict[str, float], dict[str, int]]], detail: bool) -> None:
    """The phase table (seconds) and each phase's slope against the traced op count."""
    keys = [k for k in rows[-1][0] if detail or k in TOP or k in ("total", "cpu")]
    xs = [float(s["traced"]) for _, s in rows]
    print(f"{'phase':>22} " + " ".join(f"{int(x):>9}" for x in xs)
          + "    slope  (between neighbours)")
    for k in keys:
        ys = [max(t.get(k, 0.0), 1e-6) for t, _ in rows]
        pair = [slope(xs[i:i + 2], ys[i:i + 2]) for i in range(len(xs) - 1)]
        print(f"{k:>22} " + " ".join(f"{y:9.3f}" for y in ys)
              + f"   {slope(xs, ys):6.2f}  (" + " ".join(f"{p:.2f}" for p in pair) + ")")
    print(f"{'compiled ops':>22} " + " ".join(f"{s['ops']:>9}" for _, s in rows))


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--ops", type=int, nargs="+", default=[1000, 3000, 10000, 30000, 100000])
    ap.add_argument("--detail", action="store_true", help="every pass and sub-phase")
    ap.add_argument("--profile", type=int, help="cProfile one first call of this size")
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args(argv)
    first_call(100, args.seed + 1)  # warm: imports and first-use tables, off the clock
    if args.profile:
        prof = cProfile.Profile()
        prof.runcall(first_call, args.profile, args.seed)
        pstats.Stats(prof).sort_stats("tottime").print_stats(40)
        return 0
    rows = []
    for n in args.ops:
        times, sizes = first_call(n, args.seed)
        rows.append((times, sizes))
        print(f"# --ops {n}: {sizes['traced']} traced, {sizes['ops']} compiled ops, "
              f"{times['total']:.2f} s ({times['cpu']:.2f} s CPU)", flush=True)
    report(rows, args.detail)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
