"""Compile-time benchmark (``python tools/bench.py --compile``): how long the first gradient
takes (trace, IR, rolling, differentiation, passes, code generation, first run) as the
program grows, beside JAX, and how fast the compiled step runs.

Programs, each a plain Python loop:

- ``rnn``: a tanh RNN (hidden 64, batch 16, input 32, f64), ``T`` steps,
  ``loss = mean over t of sum((h_t @ Wo)**2)``; JAX runs it as ``lax.scan``, its way of
  compiling a loop once;
- ``rnn_scan``: the same RNN written with ``yota.scan`` (the step traced once; JAX's
  column is its ``lax.scan`` again);
- ``resmlp``: a pre-LayerNorm residual MLP of ``L`` equal blocks (batch 64, width 256,
  f32), ``x = x + tanh(LN(x) @ W1[l] + b1[l]) @ W2[l] + b2[l]``, weights stacked along a
  leading axis; JAX runs it as ``lax.scan`` over the stacked weights.

Every first call runs in a fresh process (no cache: ``YOTA_CACHE=0``), ``--repeat`` (3)
per system and size, the systems alternated; the table gives the medians (of the first
call, of each phase, and of the step: the median of repeated calls in each process).
Yota's per-phase times come from its compile record (``yota.phases``). The table ends
with the log-log slope of Yota's first call against the traced op count.

    python tools/bench.py --compile                 # the default sizes
    python tools/bench.py --compile --quick         # small sizes, a smoke run
"""

from __future__ import annotations

import argparse
import json
import math
import os
import subprocess
import sys
import time
from typing import Any

import numpy as np
from bench.machine import load_average, run_meta

SIZES = {"rnn": [10, 100, 1000, 10_000], "rnn_scan": [10, 100, 1000, 10_000],
         "resmlp": [4, 16, 64, 256]}
QUICK = {"rnn": [10, 100], "rnn_scan": [10, 100], "resmlp": [4, 16]}
H, B, I = 64, 16, 32  # the RNN
WIDTH, BATCH = 256, 64  # the residual MLP
EPS = 1e-5


# -- the programs, for NumPy (Yota traces them) and for JAX -------------------------------------
def rnn_inputs(T: int) -> list[np.ndarray]:
    rng = np.random.default_rng(0)
    return [rng.standard_normal((I, H)) * 0.1, rng.standard_normal((H, H)) * 0.1,
            rng.standard_normal((H, 1)) * 0.1, rng.standard_normal((T, B, I))]


def rnn_loss(Wx: Any, Wh: Any, Wo: Any, xs: Any) -> Any:
    """(Its sizes come from its arguments: the tests run it small, tests/support/rnn_cases.)"""
    h = np.zeros((xs.shape[1], Wh.shape[0]))
    total = 0.0
    for t in range(xs.shape[0]):
        h = np.tanh(xs[t] @ Wx + h @ Wh)
        total = total + np.sum((h @ Wo) ** 2)
    return total / xs.shape[0]


def rnn_scan_loss(Wx: Any, Wh: Any, Wo: Any, xs: Any) -> Any:
    """``rnn_loss`` with ``yota.scan``: the step traced once."""
    import yota

    def step(h: Any, x: Any) -> tuple[Any, Any]:
        h = np.tanh(x @ Wx + h @ Wh)
        return h, np.sum((h @ Wo) ** 2)

    _, ys = yota.scan(step, np.zeros((xs.shape[1], Wh.shape[0])), xs)
    return np.sum(ys) / xs.shape[0]


def resmlp_inputs(L: int) -> list[np.ndarray]:
    rng = np.random.default_rng(0)
    f32 = np.float32
    s = 1 / math.sqrt(WIDTH)
    return [(rng.standard_normal((L, WIDTH, WIDTH)) * s).astype(f32),
            (rng.standard_normal((L, WIDTH)) * 0.1).astype(f32),
            (rng.standard_normal((L, WIDTH, WIDTH)) * s).astype(f32),
            (rng.standard_normal((L, WIDTH)) * 0.1).astype(f32),
            rng.standard_normal((BATCH, WIDTH)).astype(f32)]


def _block(xp: Any, x: Any, w1: Any, b1: Any, w2: Any, b2: Any) -> Any:
    mu = xp.mean(x, axis=-1, keepdims=True)
    xc = x - mu
    ln = xc / xp.sqrt(xp.mean(xc * xc, axis=-1, keepdims=True) + EPS)
    return x + xp.tanh(ln @ w1 + b1) @ w2 + b2


def resmlp_loss(W1: Any, b1: Any, W2: Any, b2: Any, x: Any) -> Any:
    for layer in range(W1.shape[0]):
        x = _block(np, x, W1[layer], b1[layer], W2[layer], b2[layer])
    return np.mean(x * x)


def jax_loss(name: str) -> Any:
    import jax
    import jax.numpy as jnp

    if name in ("rnn", "rnn_scan"):
        def loss(Wx: Any, Wh: Any, Wo: Any, xs: Any) -> Any:
            def step(h: Any, x: Any) -> Any:
                h = jnp.tanh(x @ Wx + h @ Wh)
                return h, jnp.sum((h @ Wo) ** 2)
            _, ys = jax.lax.scan(step, jnp.zeros((B, H), xs.dtype), xs)
            return jnp.sum(ys) / xs.shape[0]
        return loss

    def mlp(W1: Any, b1: Any, W2: Any, b2: Any, x: Any) -> Any:
        def step(x: Any, w: Any) -> Any:
            return _block(jnp, x, *w), None
        x, _ = jax.lax.scan(step, x, (W1, b1, W2, b2))
        return jnp.mean(x * x)
    return mlp


PROGRAMS = {"rnn": (rnn_inputs, rnn_loss), "rnn_scan": (rnn_inputs, rnn_scan_loss),
            "resmlp": (resmlp_inputs, resmlp_loss)}


# -- one measurement, in its own process ------------------------------------------------------------
def measure(system: str, name: str, size: int, steps: int) -> dict[str, Any]:
    """First call and step time of ``system`` on program ``name`` at ``size``."""
    make, loss = PROGRAMS[name]
    args = make(size)
    if system == "jax":
        import jax

        jax.config.update("jax_enable_x64", True)
        f = jax.jit(jax.grad(jax_loss(name), argnums=tuple(range(len(args) - 1))))
        jargs = [jax.numpy.asarray(a) for a in args]
        t0 = time.perf_counter()
        jax.block_until_ready(f(*jargs))
        first = time.perf_counter() - t0
        step = _median(lambda: jax.block_until_ready(f(*jargs)), steps)
        return {"first": first, "step": step}
    import yota
    from yota import phases

    t0 = time.perf_counter()
    yota.grad(loss, *args, cache=False)
    first = time.perf_counter() - t0
    rec = phases.last()
    step = _median(lambda: yota.grad(loss, *args, cache=False), steps)
    out: dict[str, Any] = {"first": first, "step": step}
    if rec is not None:
        out.update(traced=rec.traced, ops=rec.ops,
                   phases={k: v for k, v in rec.totals() if "." not in k})
    return out


def _median(call: Any, n: int) -> float:
    call()
    ts = []
    for _ in range(n):
        t0 = time.perf_counter()
        call()
        ts.append(time.perf_counter() - t0)
    return float(np.median(ts))


def run(system: str, name: str, size: int, steps: int, timeout: float) -> dict[str, Any]:
    env = {**os.environ, "YOTA_CACHE": "0", "PYTHONWARNINGS": "ignore"}
    # Python's own bytecode cache stays on, as for any installed package (a sandbox that
    # sets PYTHONDONTWRITEBYTECODE recompiles Yota's lazily imported modules per process)
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    cmd = [sys.executable, __file__, "--one", system, name, str(size), str(steps)]
    try:
        p = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=timeout,
                           check=False)
    except subprocess.TimeoutExpired:
        return {"error": f"over {timeout:.0f} s"}
    if p.returncode:
        return {"error": (p.stderr.strip().splitlines() or ["failed"])[-1][:120]}
    return dict(json.loads(p.stdout.strip().splitlines()[-1]))


# -- the table ------------------------------------------------------------------------------------
def fmt(s: float | None) -> str:
    if s is None:
        return "—"
    return f"{s * 1e3:.2f} ms" if s < 1 else f"{s:.2f} s"


PHASES = ["trace", "to_ir", "roll", "vjp", "passes", "lower", "codegen", "run"]


def row(name: str, size: int, y: dict[str, Any], j: dict[str, Any]) -> str:
    ph = y.get("phases", {})
    cells = [name, str(size), f"{y.get('traced', '—')} → {y.get('ops', '—')}",
             " · ".join(f"{k} {fmt(ph[k])}" for k in PHASES if k in ph),
             y.get("error") or fmt(y.get("first")), j.get("error") or fmt(j.get("first")),
             y.get("error") or fmt(y.get("step")), j.get("error") or fmt(j.get("step"))]
    return "| " + " | ".join(cells) + " |"


def median_run(runs: list[dict[str, Any]]) -> dict[str, Any]:
    """The runs of one system and size as one: the medians of the first call, the step
    and each phase (the first error, if every run failed); ``runs``: how many."""
    ok = [r for r in runs if "first" in r]
    if not ok:
        return runs[0] if runs else {}
    out = dict(ok[0])
    for k in ("first", "step"):
        out[k] = float(np.median([r[k] for r in ok]))
    if "phases" in out:
        out["phases"] = {p: float(np.median([r["phases"].get(p, 0.0) for r in ok]))
                         for p in out["phases"]}
    out["runs"] = len(ok)
    return out


def slope(points: list[tuple[float, float]]) -> float | None:
    pts = [(math.log(a), math.log(b)) for a, b in points if a and b]
    if len(pts) < 2:
        return None
    xs, ys = zip(*pts, strict=True)
    mx, my = sum(xs) / len(xs), sum(ys) / len(ys)
    den = sum((x - mx) ** 2 for x in xs)
    return sum((x - mx) * (y - my) for x, y in zip(xs, ys, strict=True)) / den if den else None


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--systems", default="yota,jax")
    ap.add_argument("--steps", type=int, default=20, help="calls timed for the step")
    ap.add_argument("--timeout", type=float, default=600)
    ap.add_argument("--repeat", type=int, default=3,
                    help="fresh processes per system and size, alternated; medians reported")
    ap.add_argument("--json", help="where to write the results as JSON")
    a = ap.parse_args(argv)
    systems = a.systems.split(",")
    sizes = QUICK if a.quick else SIZES
    print("| program | size | ops traced → compiled | Yota phases | Yota first call | "
          "JAX first call (lax.scan) | Yota step | JAX step |")
    print("|---|---|---|---|---|---|---|---|")
    results: dict[str, Any] = {}
    load_start = load_average()
    for name, ns in sizes.items():
        pts = []
        for n in ns:
            same = results.get(f"rnn/{n}", {}).get("jax") if name == "rnn_scan" else None
            runs: dict[str, list[dict[str, Any]]] = {"yota": [], "jax": []}
            for _ in range(max(1, a.repeat)):
                for s in ("yota", "jax"):
                    if s in systems and not (s == "jax" and same):
                        runs[s].append(run(s, name, n, a.steps, a.timeout))
            res = {s: same if s == "jax" and same else median_run(runs[s])
                   for s in ("yota", "jax")}
            results[f"{name}/{n}"] = res
            print(row(name, n, res["yota"], res["jax"]), flush=True)
            if "first" in res["yota"] and res["yota"].get("traced"):
                pts.append((res["yota"]["traced"], res["yota"]["first"]))
        k = slope(pts)
        if k is not None:
            print(f"| {name} | slope | log-log, first call against ops traced: {k:.2f} "
                  "| | | | | |")
    if a.json:
        meta = run_meta(sys.argv[1:] if argv is None else argv, "tools/bench_compile.py")
        with open(a.json, "w") as fh:
            json.dump({"meta": {**meta, "load_start": load_start, "load_end": load_average()},
                       "results": results}, fh, indent=1)


if __name__ == "__main__":
    if len(sys.argv) > 1 and sys.argv[1] == "--one":
        sysname, prog, size, steps = sys.argv[2], sys.argv[3], int(sys.argv[4]), int(sys.argv[5])
        print(json.dumps(measure(sysname, prog, size, steps)))
    else:
        main()
