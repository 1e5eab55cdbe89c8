"""Time the first gradient of the MLP (784-512-256-10, batch 128, f32) in new processes:
without the cache (a cold compile), with an empty cache (compile and store), and with a
warm cache (a hit: trace, differentiate, optimize, load), phase by phase.

    python tests/cache_examples/measure_mlp.py [--runs N]

Each number is the median over N fresh processes (default 5).
"""

import json
import os
import statistics
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))


def child(mode):
    """One process: phases of the first yota.grad call, by hand, then end to end."""
    T = time.perf_counter
    t0 = T()
    sys.path.insert(0, HERE)
    import mlp

    from yota import cache as yc
    from yota import pipeline
    from yota.program import flatten_args
    from yota.tracing import trace

    r = {"import yota": T() - t0}
    args = mlp.example()
    t = T()
    _, tape = trace(mlp.loss, *args)
    fn = pipeline.lower(tape)
    r["trace"] = T() - t
    t = T()
    gfn = pipeline.grad_ir(tape, fn=fn)
    r["differentiate+optimize"] = T() - t
    t = T()
    from yota.backends import llvm
    from yota.backends.llvm.pool import ensure_pool
    from yota.backends.llvm.target import host

    host()
    ensure_pool()
    r["backend init (import llvmlite, host, thread pool JIT)"] = T() - t
    t = T()
    key = yc.make_key(gfn, None, kind="grad", signature=yc.tape_signature(tape))
    r["cache key (print IR, hash)"] = T() - t
    t = T()
    if mode == "warm":
        exe = yc.load(yc.default_cache(), key, llvm)
        assert exe is not None, "no cache hit"
        r["load (read, check, MCJIT add object)"] = T() - t
    else:
        exe = llvm.compile(gfn)
        r["LLVM compile (lower, O3, emit, load)"] = T() - t
        if mode == "store":
            t = T()
            yc.save(yc.default_cache(), key, gfn, llvm, exe)
            r["store entry"] = T() - t
    leaves, _ = flatten_args(args)
    t = T()
    exe(*leaves)
    r["first call"] = T() - t
    t = T()
    exe(*leaves)
    r["second call"] = T() - t
    return r


def end_to_end(mode):
    """One process: import, then the first yota.grad call, as a user sees it."""
    T = time.perf_counter
    t0 = T()
    sys.path.insert(0, HERE)
    import mlp

    import yota

    args = mlp.example()
    t1 = T()
    yota.grad(mlp.loss, *args, cache=mode != "cold")
    t2 = T()
    yota.grad(mlp.loss, *args)
    t3 = T()
    hit = yota.cache.stats.hits == 1
    return {"import": t1 - t0, "first yota.grad": t2 - t1, "second yota.grad": t3 - t2,
            "hit": hit}


def spawn(kind, mode, cache_dir):
    env = {**os.environ, "YOTA_CACHE_DIR": cache_dir}
    env.pop("YOTA_CACHE", None)
    out = subprocess.run([sys.executable, __file__, "--child", kind, mode], env=env,
                         capture_output=True, text=True)
    if out.returncode:
        raise RuntimeError(f"{kind} {mode} failed:\n{out.stderr}")
    return json.loads(out.stdout.splitlines()[-1])


def median_table(rows):
    keys = [k for k in rows[0] if k != "hit"]
    return {k: statistics.median(r[k] for r in rows) for k in keys}


def main():
    runs = int(sys.argv[sys.argv.index("--runs") + 1]) if "--runs" in sys.argv else 5
    results = {}
    with tempfile.TemporaryDirectory() as d:
        warm = os.path.join(d, "warm")
        spawn("phases", "store", warm)  # fill the cache once
        for mode in ("cold", "store", "warm"):
            rows = []
            for i in range(runs):
                cache = warm if mode == "warm" else os.path.join(d, f"{mode}{i}")
                rows.append(spawn("phases", mode, cache))
            results[f"phases/{mode}"] = median_table(rows)
        for mode in ("cold", "warm"):
            rows = [spawn("e2e", mode, warm) for _ in range(runs)]
            assert all(r["hit"] == (mode == "warm") for r in rows)
            results[f"end-to-end/{mode}"] = median_table(rows)
    for name, table in results.items():
        print(f"{name} (median of {runs} processes, ms)")
        for k, v in table.items():
            print(f"  {k:<55} {v * 1e3:8.1f}")


if __name__ == "__main__":
    if "--child" in sys.argv:
        kind, mode = sys.argv[sys.argv.index("--child") + 1:][:2]
        print(json.dumps(child(mode) if kind == "phases" else end_to_end(mode)))
    else:
        main()
