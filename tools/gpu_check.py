"""Everything about the CUDA backend that needs a GPU, in one call, with a short summary last.

    python tools/gpu_check.py                # full: ~300 random programs, full-size benchmarks
    python tools/gpu_check.py --quick        # smoke run (a few minutes at most)
    python tools/gpu_check.py --json out.json --random 500 --rounds 50

Sections (each runs even if an earlier one failed; failures are listed in the summary and
make the exit status 1):

1. environment: GPU, compute capability, driver, CuPy, NVRTC, JAX and PyTorch versions;
2. ops: every op of the op table (``tests/support/cuda_cases.op_programs``: float32, float64,
   integers, bool; special values; 0-d, empty and odd shapes) against the reference
   interpreter, as exactly as ``tests/support/precision.py`` says each op must match;
3. random programs (``tests/irgen``), raw and after the pass pipeline, against the
   interpreter (errors must be the same error), float32 and float64;
4. models: gradients of the example models (``tests/support/cuda_cases.EXAMPLE_MODELS``:
   W2, MLP, RNN) against the CPU backend, and ``yota.grad`` on CuPy arrays end to end;
   then the on-disk cache: a program stored, then loaded without NVRTC;
5. benchmarks: the workloads of ``tools/bench.py`` on the device (inputs already there),
   Yota's cuda backend next to JAX's jitted ``value_and_grad`` and PyTorch (eager) on
   the same GPU when they are installed, median milliseconds per call (synchronized);
   for the memory-bound workloads, the fraction of the device bandwidth measured here (a
   device-to-device copy) that the minimal traffic (inputs read once, gradients written
   once) reaches.
"""

from __future__ import annotations

import argparse
import json
import math
import statistics
import sys
import time
import traceback
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests"))  # the tests' op programs, random programs, models

REPORT: dict[str, Any] = {"sections": {}, "failures": []}
EMULATE: list[bool] = [False]  # --emulate: sections 2-4 on the CPU emulation of the kernels


def to_host(x: Any) -> np.ndarray:
    if EMULATE[0]:
        return np.asarray(x)
    import cupy as cp

    return cp.asnumpy(x)


def log(msg: str) -> None:
    print(msg, file=sys.stderr, flush=True)


def section(name: str) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    """Run the decorated function as one section: its result or its error is recorded."""
    def wrap(f: Callable[..., Any]) -> Callable[..., Any]:
        def run(*a: Any, **k: Any) -> Any:
            log(f"== {name}")
            t0 = time.perf_counter()
            try:
                out = f(*a, **k)
            except Exception as e:  # noqa: BLE001 - a broken section must not stop the rest
                tb = traceback.format_exc()
                log(tb)
                REPORT["sections"][name] = {"error": f"{type(e).__name__}: {e}", "trace": tb}
                REPORT["failures"].append(f"{name}: crashed: {type(e).__name__}: {e}")
                return None
            REPORT["sections"][name] = {"result": out,
                                        "seconds": round(time.perf_counter() - t0, 1)}
            return out
        return run
    return wrap


# -- 1. environment --------------------------------------------------------------------------------
@section("environment")
def environment() -> dict[str, Any]:
    import cupy as cp
    from yota.backends import cuda

    dev = cp.cuda.Device()
    props = cp.cuda.runtime.getDeviceProperties(dev.id)
    env = {"gpu": props["name"].decode() if isinstance(props["name"], bytes) else props["name"],
           "compute_capability": dev.compute_capability,
           "memory_GiB": round(props["totalGlobalMem"] / 2**30, 1),
           "sms": props["multiProcessorCount"],
           "driver": cp.cuda.runtime.driverGetVersion(),
           "runtime": cp.cuda.runtime.runtimeGetVersion(), "cupy": cp.__version__,
           "nvrtc": ".".join(map(str, cuda.nvrtc_version())), "numpy": np.__version__}
    for name in ("jax", "torch"):
        try:
            mod = __import__(name)
            env[name] = mod.__version__
        except Exception as e:  # noqa: BLE001
            env[name] = f"unavailable ({type(e).__name__}: {e})"
    log(json.dumps(env))
    return env


# -- 2. ops ------------------------------------------------------------------------------------------
@section("ops")
def ops(seeds: list[int]) -> dict[str, Any]:
    from support.cuda_cases import op_programs, run_case
    from yota.backends import cuda

    total, bad = 0, []
    for seed in seeds:
        cases = op_programs(seed)
        exes = cuda.compile_many([c.fn for c in cases])
        for case, exe in zip(cases, exes, strict=True):
            total += 1
            try:
                msg = run_case(exe, case, to_host)
            except Exception as e:  # noqa: BLE001
                msg = f"raised {type(e).__name__}: {e}"
            if msg:
                bad.append(f"{case.label} (seed {seed}): {msg[:2000]}")
                log(f"  MISMATCH {bad[-1][:300]}")
    if bad:
        REPORT["failures"].append(f"ops: {len(bad)}/{total} programs differ: "
                                  + "; ".join(b.split(':')[0] for b in bad[:10]))
    return {"programs": total, "failed": len(bad), "details": bad}


# -- 3. random programs ----------------------------------------------------------------------------
@section("random programs")
def random_programs(n: int) -> dict[str, Any]:
    from support import irgen
    from support.cuda_cases import compare
    from yota.backends import cuda
    from yota.ir.passes import optimize

    total, bad, dtypes = 0, [], {}
    for start in range(0, n, 50):  # 50 seeds (200 functions) per module
        progs = []
        for seed in range(start, min(n, start + 50)):
            for tame in (False, True):
                fn, args = irgen.random_program(np.random.default_rng(seed + 100_000 * tame),
                                                tame=tame)
                progs += [(seed, tame, "raw", fn, args),
                          (seed, tame, "optimized", optimize(fn), args)]
        exes = cuda.compile_many([p[3] for p in progs])
        for (seed, tame, label, f, args), exe in zip(progs, exes, strict=True):
            total += 1
            dt = str(f.inputs[0].dtype) if f.inputs else "-"
            dtypes[dt] = dtypes.get(dt, 0) + 1
            try:
                msg = compare(f, args, exe, to_host)
            except Exception as e:  # noqa: BLE001
                msg = f"raised {type(e).__name__}: {e}"
            if msg:
                bad.append(f"seed {seed} tame={tame} ({label}): {msg[:1500]}\n{f}")
                log(f"  MISMATCH {bad[-1][:300]}")
        log(f"  {min(n, start + 50)}/{n} seeds, {len(bad)} mismatches")
    if bad:
        REPORT["failures"].append(f"random programs: {len(bad)}/{total} differ")
    return {"functions": total, "failed": len(bad), "by_dtype": dtypes, "details": bad[:20]}


# -- 4. models and the frontend ------------------------------------------------------------------------
@section("models")
def models() -> dict[str, Any]:
    from support.cuda_cases import EXAMPLE_MODELS, model_gradients_match
    from yota.backends import cuda

    import yota

    out: dict[str, Any] = {}
    for name in EXAMPLE_MODELS:
        msg = model_gradients_match(cuda.default_device(), name, to_host)
        out[name] = msg or "ok"
        if msg:
            REPORT["failures"].append(f"models: {msg}")
    if EMULATE[0]:
        return out
    import cupy as cp
    from support.cuda_cases import linear_loss, linear_model

    m, X = linear_model(np.random.default_rng(5))
    v0, g0 = yota.grad(linear_loss, m, X)
    v1, g1 = yota.grad(linear_loss, yota.to_device(m, "cuda"), cp.asarray(X))
    ok = (isinstance(g1[1], cp.ndarray) and np.allclose(cp.asnumpy(g1[1]), g0[1], rtol=1e-10)
          and np.allclose(cp.asnumpy(g1[0].W), g0[0].W, rtol=1e-10)
          and math.isclose(float(v1), float(v0), rel_tol=1e-12))
    out["frontend"] = "ok" if ok else "gradients on CuPy arrays differ from the CPU backend's"
    if not ok:
        REPORT["failures"].append("models: yota.grad on CuPy arrays differs")
    try:
        yota.grad(linear_loss, m, cp.asarray(X))
        out["mixing"] = "no error"
        REPORT["failures"].append("models: mixing host and device arrays did not raise")
    except yota.YotaError as e:
        out["mixing"] = f"ok ({e})"
    return out


# -- 4b. the on-disk cache ------------------------------------------------------------------------------
@section("cache")
def cache_hit() -> dict[str, Any]:
    """A program stored in a fresh cache directory, then loaded: no NVRTC, same values."""
    import tempfile

    import cupy as cp
    from yota.backends import cuda

    import yota.cache as yc
    from yota import pipeline

    def f(x: Any) -> Any:
        return np.sum(np.tanh(x) ** 2, axis=0)

    x = np.random.default_rng(7).standard_normal((64, 33))
    fn, sig = pipeline.program_ir(f, (x,), kind="forward")
    key = yc.make_key(fn, "cuda", kind="forward", signature=sig)
    if key is None:
        REPORT["failures"].append("cache: the cuda backend's programs are not cacheable")
        return {"ok": False}
    with tempfile.TemporaryDirectory() as d:
        cache = yc.DiskCache(d)
        exe = yc.lookup_or_compile(cache, key, fn, "cuda")
        n, hits = cuda.stats["nvrtc"], yc.stats.hits
        exe2 = yc.lookup_or_compile(cache, key, fn, "cuda")
        same = np.array_equal(cp.asnumpy(exe2(cp.asarray(x))[0]), cp.asnumpy(exe(cp.asarray(x))[0]))
    out = {"target": key.parts["target"], "hit": yc.stats.hits == hits + 1,
           "nvrtc_on_hit": cuda.stats["nvrtc"] - n, "same_values": same}
    out["ok"] = out["hit"] and not out["nvrtc_on_hit"] and same
    if not out["ok"]:
        REPORT["failures"].append(f"cache: {out}")
    return out


# -- 5. benchmarks ----------------------------------------------------------------------------------
def device_bandwidth(nbytes: int = 1 << 30, reps: int = 20) -> float:
    """Bytes per second of a device-to-device copy (read + write counted)."""
    if EMULATE[0]:  # host memory: a NumPy copy
        a = np.ones(nbytes // 4, np.float32)
        b = np.empty_like(a)
        best = min(_once(lambda: np.copyto(b, a)) for _ in range(5))
        return 2 * nbytes / best
    import cupy as cp

    a = cp.ones(nbytes // 4, cp.float32)
    b = cp.empty_like(a)
    b[...] = a
    start, stop = cp.cuda.Event(), cp.cuda.Event()
    times = []
    for _ in range(reps):
        start.record()
        b[...] = a
        stop.record()
        stop.synchronize()
        times.append(cp.cuda.get_elapsed_time(start, stop) / 1e3)
    return 2 * nbytes / min(times)


def median_ms(step: Callable[[], Any], sync: Callable[[], None], rounds: int) -> float:
    step()
    sync()
    times = []
    for _ in range(rounds):
        t0 = time.perf_counter()
        step()
        sync()
        times.append(time.perf_counter() - t0)
    return 1e3 * statistics.median(times)


def _once(f: Callable[[], Any]) -> float:
    t0 = time.perf_counter()
    f()
    return time.perf_counter() - t0


def _yota_step(w: Any, inputs: dict[str, np.ndarray]) -> Callable[[], Any]:
    """``yota.grad`` on device arrays (all inputs are arguments, so Yota also computes
    the gradients of float inputs the others treat as constants, e.g. W3's X); the
    first result is checked against the hand-written NumPy gradient."""
    from bench.check import compare

    import yota

    loss = w.loss(np)
    if EMULATE[0]:
        dev = dict(inputs)
    else:
        import cupy as cp

        dev = {k: cp.asarray(v) for k, v in inputs.items()}
    args, consts = w.call_args(dev)
    f = lambda *a: loss(*a)  # noqa: E731 - consts are arguments too (on the device)
    step = lambda: yota.grad(f, *args, *consts, backend="cuda")  # noqa: E731
    val, g = step()
    grads = ({k[0]: to_host(v) for k, v in g.flat[0].items()} if w.struct is not None
             else {n: to_host(g[i]) for i, n in enumerate(w.params)})
    err, verdict = compare((float(val), grads), w.hand(**inputs), w)
    if verdict:
        raise AssertionError(f"yota's gradient differs from the hand-written one: {verdict} "
                             f"(relative error {err:.2e})")
    return step


def _jax_step(w: Any, inputs: dict[str, np.ndarray]) -> Callable[[], Any]:
    import jax
    from bench.systems import prepare_jax

    jax.config.update("jax_enable_x64", True)
    if jax.default_backend() != "gpu":
        raise RuntimeError(f"JAX runs on {jax.default_backend()}, not the GPU")
    step, _ = prepare_jax(jax, w, inputs)
    return step


def _torch_step(w: Any, inputs: dict[str, np.ndarray]) -> Callable[[], Any]:
    import torch
    from bench.systems import torch_namespace

    if not torch.cuda.is_available():
        raise RuntimeError("PyTorch has no CUDA device")
    loss = w.loss(torch_namespace(torch))
    leaves = {n: torch.from_numpy(inputs[n]).cuda().requires_grad_() for n in w.params}
    consts = [torch.from_numpy(inputs[n]).cuda() for n in w.consts]
    tensors, names = list(leaves.values()), list(leaves)

    def step() -> Any:
        out = loss(*w.pack(dict(zip(names, tensors, strict=True))), *consts)
        return out.detach(), torch.autograd.grad(out, tensors)
    return step


def _min_bytes(w: Any, inputs: dict[str, np.ndarray]) -> int:
    """Inputs read once, gradients (one per differentiated input) written once."""
    return sum(v.nbytes for v in inputs.values()) + sum(inputs[n].nbytes for n in w.params)


@section("benchmarks")
def benchmarks(quick: bool, rounds: int) -> dict[str, Any]:
    from bench import workloads

    bw = device_bandwidth(1 << 26 if quick else 1 << 30)
    log(f"  device bandwidth (copy): {bw / 1e9:.0f} GB/s")
    memory_bound = {"W2-1e6", "W2-1e7", "W2-1e8", "W5"}
    works = workloads.workloads(quick)
    if not quick:
        works.insert(4, workloads.w2(10**8, "1e8"))
    rows = []
    for w in works:
        inputs = w.make(np.random.default_rng(0))
        row: dict[str, Any] = {"workload": w.name, "desc": w.desc}
        systems = [("yota", _yota_step, _cupy_sync), ("jax", _jax_step, lambda: None),
                   ("torch", _torch_step, _torch_sync)]
        for sysname, make, sync in systems[:1] if EMULATE[0] else systems:
            try:
                t0 = time.perf_counter()
                step = make(w, inputs)
                step()
                sync()
                first = time.perf_counter() - t0
                ms = median_ms(step, sync, rounds)
                row[sysname] = {"median_ms": round(ms, 4), "first_call_s": round(first, 3)}
                if w.name in memory_bound:
                    frac = _min_bytes(w, inputs) / (ms / 1e3) / bw
                    row[sysname]["bandwidth_fraction"] = round(frac, 3)
            except Exception as e:  # noqa: BLE001 - a missing peer is reported, not fatal
                row[sysname] = {"unavailable": f"{type(e).__name__}: {str(e)[:200]}"}
                if sysname == "yota":
                    REPORT["failures"].append(f"benchmarks: yota failed on {w.name}: {e}")
        log(f"  {json.dumps(row)}")
        rows.append(row)
    return {"bandwidth_GBps": round(bw / 1e9, 1), "rows": rows}


def _cupy_sync() -> None:
    if not EMULATE[0]:
        import cupy as cp

        cp.cuda.get_current_stream().synchronize()


def _torch_sync() -> None:
    import torch

    torch.cuda.synchronize()


# -- summary -----------------------------------------------------------------------------------------
def summary() -> str:
    s = REPORT["sections"]
    lines = ["", "== gpu_check summary"]
    env = s.get("environment", {}).get("result")
    if env:
        lines.append(f"device: {env['gpu']} (sm_{env['compute_capability']}, {env['sms']} SMs, "
                     f"{env['memory_GiB']} GiB), driver {env['driver']}, CuPy {env['cupy']}, "
                     f"NVRTC {env['nvrtc']}; jax {env['jax'][:40]}; torch {env['torch'][:40]}")
    for name, unit in (("ops", "programs"), ("random programs", "functions")):
        r = s.get(name, {}).get("result")
        if r:
            n = r.get(unit, 0)
            lines.append(f"{name}: {n - r['failed']}/{n} {unit} match the interpreter")
    m = s.get("models", {}).get("result")
    if m:
        lines.append("models vs CPU backend: " + ", ".join(f"{k} {str(v)[:60]}" for k, v in
                                                           m.items()))
    c = s.get("cache", {}).get("result")
    if c:
        lines.append(f"cache: {'hit loads the cubin without NVRTC' if c['ok'] else c}")
    b = s.get("benchmarks", {}).get("result")
    if b:
        lines.append(f"benchmarks (median ms per value+gradient call; % = fraction of the "
                     f"measured {b['bandwidth_GBps']:.0f} GB/s):")
        for row in b["rows"]:
            cells = []
            for sysname in ("yota", "jax", "torch"):
                c = row.get(sysname, {})
                if "median_ms" in c:
                    pct = f" ({100 * c['bandwidth_fraction']:.0f}%)" if "bandwidth_fraction" in c \
                        else ""
                    cells.append(f"{sysname} {c['median_ms']:.3f}{pct}")
                else:
                    cells.append(f"{sysname} -")
            lines.append(f"  {row['workload']:<8} " + "   ".join(cells))
    for name, sec in s.items():
        if "error" in sec:
            lines.append(f"{name}: CRASHED {sec['error'][:200]}")
    lines.append("RESULT: " + ("PASS" if not REPORT["failures"] else
                               f"FAIL ({len(REPORT['failures'])}): "
                               + " | ".join(f[:160] for f in REPORT["failures"][:6])))
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--quick", action="store_true", help="fewer programs, small benchmarks")
    p.add_argument("--random", type=int, default=None, help="random-program seeds (x2 tame, "
                   "x2 raw/optimized) [default: 150, quick: 15]")
    p.add_argument("--rounds", type=int, default=None, help="timed calls per benchmark "
                   "[default: 30, quick: 5]")
    p.add_argument("--no-bench", action="store_true", help="skip the benchmarks")
    p.add_argument("--json", default=None, help="write the full report here")
    p.add_argument("--emulate", action="store_true", help="no GPU: run the ops, random "
                   "programs and models on the CPU emulation of the kernels (checks the "
                   "script and the backend's logic, not the device)")
    a = p.parse_args(argv)
    from yota.backends import cuda

    if a.emulate:
        from yota.backends.cuda.emulate import EmuDevice

        EMULATE[0] = True
        cuda.use_device(EmuDevice())
        a.quick = True  # benchmark harness only: emulated times mean nothing
    else:
        why = cuda.unavailable()
        if why:
            print(f"== gpu_check summary\nRESULT: SKIPPED (no usable GPU: {why})")
            return 2
        environment()
    ops([0] if a.quick else [0, 1])
    random_programs(a.random if a.random is not None else (15 if a.quick else 150))
    models()
    if not a.emulate:
        cache_hit()
    if not a.no_bench:
        benchmarks(a.quick, a.rounds or (5 if a.quick else 30))
    if a.json:
        Path(a.json).write_text(json.dumps(REPORT, indent=1, default=str))
    print(summary())
    return 1 if REPORT["failures"] else 0


if __name__ == "__main__":
    sys.exit(main())
