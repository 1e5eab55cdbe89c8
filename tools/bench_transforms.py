"""Transformations beyond grad, Yota against JAX, A/B in one process.

    python tools/bench_transforms.py              # the three workloads, Markdown table
    python tools/bench_transforms.py --rounds 50 --json out.json
    python tools/bench.py --transforms            # the same, from the benchmark tool

Workloads (each system's answer is checked against the other's before it is timed):

- ``per-example``: per-example gradients of a 2-layer tanh MLP (64 -> 64 -> 1, squared
  error), 256 examples, float64: ``yota.vmap(yota.autograd.grad(loss), in_axes=(None, 0,
  0))`` against ``jax.jit(jax.vmap(jax.grad(loss), in_axes=(None, 0, 0)))``;
- ``hessian``: the Hessian of an L2-regularized logistic-regression loss in 100
  dimensions (1000 examples, float64): ``yota.hessian`` against ``jax.jit(jax.hessian)``;
- ``jvp-W3``: ``jvp`` of the W3 MLP loss of ``tools/bench.py`` (784-512-256-10, batch 128,
  float32) with respect to its parameters: ``yota.jvp`` against ``jax.jit(jax.jvp)``.

Timing: first calls (trace + compile + run) apart, then a warm-up, then interleaved
rounds (the systems alternate, the order flipping each round); medians and quartiles in
milliseconds, and Yota's median over JAX's.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np
from bench import workloads
from bench.machine import load_average, run_meta
from bench.workloads import MLP

os.environ.setdefault("XLA_FLAGS", "--xla_cpu_multi_thread_eigen=true")


@dataclass
class Case:
    name: str
    desc: str
    yota: Callable[[], Any]
    jax: Callable[[], Any]


def _mlp_loss(xp: Any) -> Callable[..., Any]:
    def loss(params: Any, x: Any, y: Any) -> Any:
        W1, b1, W2, b2 = params
        h = xp.tanh(W1 @ x + b1)
        return (W2 @ h + b2 - y) ** 2
    return loss


def _jax() -> Any:
    import jax

    jax.config.update("jax_enable_x64", True)  # float64 arrays stay float64
    return jax


def per_example(n: int = 256, d: int = 64, h: int = 64) -> Case:
    import jax.numpy as jnp

    import yota
    import yota.autograd as ag

    jax = _jax()

    r = np.random.default_rng(0)
    params = (r.standard_normal((h, d)) / 8, r.standard_normal(h) * 0.1,
              r.standard_normal(h) / 8, 0.1)
    X, Y = r.standard_normal((n, d)), r.standard_normal(n)
    yf = yota.vmap(ag.grad(_mlp_loss(np)), in_axes=(None, 0, 0))
    jf = jax.jit(jax.vmap(jax.grad(_mlp_loss(jnp)), in_axes=(None, 0, 0)))
    jparams = tuple(jnp.asarray(p) for p in params)
    jX, jY = jnp.asarray(X), jnp.asarray(Y)

    def run_yota() -> Any:
        return yf(params, X, Y)  # (a dict by path, or a tuple: _flat takes either)

    def run_jax() -> Any:
        return jax.block_until_ready(jf(jparams, jX, jY))

    return Case("per-example", f"per-example grads, MLP {d}-{h}-1 tanh, {n} examples, f64",
                run_yota, run_jax)


def _logreg(xp: Any) -> Callable[..., Any]:
    def loss(w: Any, X: Any, y: Any) -> Any:
        z = X @ w
        return xp.mean(xp.log1p(xp.exp(-y * z))) + 0.5e-3 * xp.sum(w * w)
    return loss


def hessian(d: int = 100, n: int = 1000) -> Case:
    import jax.numpy as jnp

    import yota

    jax = _jax()
    r = np.random.default_rng(1)
    w, X = r.standard_normal(d) * 0.1, r.standard_normal((n, d))
    y = np.sign(r.standard_normal(n))
    loss = _logreg(np)
    jf = jax.jit(jax.hessian(_logreg(jnp)))
    jw, jX, jy = jnp.asarray(w), jnp.asarray(X), jnp.asarray(y)
    return Case("hessian", f"Hessian of logistic regression, d={d}, {n} examples, f64",
                lambda: yota.hessian(loss, w, X, y),
                lambda: jax.block_until_ready(jf(jw, jX, jy)))


def jvp_w3(sizes: tuple[int, ...] = (784, 512, 256, 10), batch: int = 128) -> Case:
    import jax.numpy as jnp

    import yota

    jax = _jax()
    w = workloads.w3(list(sizes), batch)
    data = w.make(np.random.default_rng(2))
    names = w.params
    p = MLP(*(data[k] for k in names))
    X, labels = data["X"], data["labels"]
    r = np.random.default_rng(3)
    t = MLP(*(r.standard_normal(data[k].shape).astype(np.float32) for k in names))
    loss = w.loss(np)

    def f(q: Any) -> Any:
        return loss(q, X, labels)

    jloss = w.loss(jnp)
    jp = tuple(jnp.asarray(data[k]) for k in names)
    jt = tuple(jnp.asarray(getattr(t, k)) for k in names)
    jX, jl = jnp.asarray(X), jnp.asarray(labels)
    jf = jax.jit(lambda p, t, X, lab: jax.jvp(
        lambda p: jloss(MLP(*p), X, lab), (p,), (t,)))
    return Case("jvp-W3", f"jvp of the W3 loss (MLP {'-'.join(map(str, sizes))}, batch "
                f"{batch}, f32) w.r.t. its parameters",
                lambda: yota.jvp(f, (p,), (t,)),
                lambda: jax.block_until_ready(jf(jp, jt, jX, jl)))


def _flat(x: Any) -> list[np.ndarray]:
    if isinstance(x, dict):
        return [a for v in x.values() for a in _flat(v)]
    if isinstance(x, (list, tuple)):
        return [a for v in x for a in _flat(v)]
    if hasattr(x, "__dataclass_fields__"):
        return [a for k in x.__dataclass_fields__ for a in _flat(getattr(x, k))]
    return [np.asarray(x)]


def check(case: Case) -> float:
    """The largest relative difference between the two systems' answers."""
    a, b = _flat(case.yota()), _flat(case.jax())
    assert len(a) == len(b), (case.name, len(a), len(b))
    worst = 0.0
    for x, y in zip(a, b, strict=True):
        assert x.shape == y.shape, (case.name, x.shape, y.shape)
        scale = max(float(np.max(np.abs(y))) if y.size else 0.0, 1e-30)
        worst = max(worst, float(np.max(np.abs(x - y))) / scale if x.size else 0.0)
    return worst


def timed(f: Callable[[], Any]) -> float:
    t = time.perf_counter()
    f()
    return time.perf_counter() - t


def measure(case: Case, rounds: int, warmup: int) -> dict[str, Any]:
    first = {"yota": timed(case.yota), "jax": timed(case.jax)}
    err = check(case)
    for _ in range(warmup):
        case.yota()
        case.jax()
    samples: dict[str, list[float]] = {"yota": [], "jax": []}
    for i in range(rounds):
        order = ("yota", "jax") if i % 2 == 0 else ("jax", "yota")
        for who in order:
            samples[who].append(timed(getattr(case, who)))
    out: dict[str, Any] = {"name": case.name, "desc": case.desc, "max_rel_diff": err,
                           "first_call_s": first}
    for who, s in samples.items():
        q = np.percentile(np.array(s) * 1e3, [25, 50, 75])
        out[who] = {"median_ms": q[1], "q1_ms": q[0], "q3_ms": q[2]}
    out["ratio"] = out["yota"]["median_ms"] / out["jax"]["median_ms"]
    return out


def table(results: list[dict[str, Any]]) -> str:
    lines = ["| workload | Yota (ms) | JAX (ms) | Yota / JAX | max rel. diff |",
             "|---|---|---|---|---|"]
    for r in results:
        y, j = r["yota"], r["jax"]
        lines.append(f"| {r['desc']} | {y['median_ms']:.3f} [{y['q1_ms']:.3f}-{y['q3_ms']:.3f}]"
                     f" | {j['median_ms']:.3f} [{j['q1_ms']:.3f}-{j['q3_ms']:.3f}] | "
                     f"{r['ratio']:.2f}x | {r['max_rel_diff']:.1e} |")
    return "\n".join(lines)


CASES = {"per-example": per_example, "hessian": hessian, "jvp-W3": jvp_w3}


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--only", default=",".join(CASES), help="workloads, comma-separated")
    ap.add_argument("--rounds", type=int, default=30)
    ap.add_argument("--warmup", type=int, default=5)
    ap.add_argument("--json", default=None, help="write the results here")
    args = ap.parse_args(argv)
    results = []
    meta = run_meta(sys.argv[1:] if argv is None else argv, "tools/bench_transforms.py")
    for name in args.only.split(","):
        case = CASES[name]()
        print(f"{name}...", file=sys.stderr)
        results.append(measure(case, args.rounds, args.warmup))
    print(table(results))
    for r in results:
        f = r["first_call_s"]
        print(f"first call {r['name']}: yota {f['yota']:.2f} s, jax {f['jax']:.2f} s",
              file=sys.stderr)
    if args.json:
        with open(args.json, "w") as fh:
            json.dump({"meta": {**meta, "load_end": load_average()}, "results": results}, fh,
                      indent=1, default=float)


if __name__ == "__main__":
    main()
