"""Time the first gradient of the MLP (784-512-256-10, batch 128, f32) in new processes:
without the cache (a cold compile), with an empty cache (compile and store), and with a
warm cache (a hit: trace, the traced key, load without LLVM), phase by phase, then end
to end.

    python tests/cache_examples/measure_mlp.py [--runs N] [--compare OTHER_PYTHON]

Each number is the median over N fresh processes (default 7); each phase is given by
the wall clock and by the calling thread's CPU time (what the phase itself costs, apart
from waiting for a core that other threads or processes hold). Measure with ``.pyc`` files
present: ``PYTHONDONTWRITEBYTECODE`` unset and ``python -m compileall -q`` of the package
run once (../shared/TOOLCHAIN.md). End to end, ``import yota`` is timed after NumPy is
imported, and each time is given by the wall clock and by the process's CPU time (less
disturbed by other processes on a loaded machine; "thread cpu": the calling thread's
alone, without NumPy's OpenBLAS workers spinning after the traced matrix products nor
Yota's helper threads). ``--compare`` runs the end-to-end
processes of a second interpreter (e.g. a virtual environment with another checkout of
Yota) interleaved with this one's, and prints the two side by side.
"""

import json
import os
import statistics
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))


class Clock:
    """Times phases into ``r``: each label gets [wall, the calling thread's CPU time]
    (the thread's CPU time leaves out other threads and processes that share the cores:
    NumPy's OpenBLAS workers spinning after the traced matrix products, Yota's helpers,
    other jobs on the machine)."""

    def __init__(self, r):
        self.r = r
        self.start()

    def start(self):
        self.t, self.m = time.perf_counter(), time.thread_time()

    def stop(self, label):
        self.r[label] = [time.perf_counter() - self.t, time.thread_time() - self.m]
        self.start()


def child(mode):
    """One process: phases of the first yota.grad call, by hand, then end to end."""
    r = {}
    clock = Clock(r)
    sys.path.insert(0, HERE)
    import mlp

    from yota import cache as yc
    from yota import pipeline
    from yota.tracing import trace

    clock.stop("import (numpy, yota)")
    args = mlp.example()
    clock.start()
    _, tape = trace(mlp.loss, *args)
    fn = pipeline.lower(tape)
    clock.stop("trace")
    if mode == "warm":
        return warm_phases(r, clock, tape, fn, args)
    gfn = pipeline.grad_ir(tape, fn=fn)
    clock.stop("differentiate+optimize")
    from yota.backends import llvm
    from yota.backends.llvm.runtime.pool import ensure_pool
    from yota.backends.llvm.runtime.target import host

    host()
    ensure_pool()
    clock.stop("backend init (host, thread pool: compiled, or by spec)")
    key = yc.make_key(gfn, None, kind="grad", signature=yc.tape_signature(tape))
    clock.stop("cache key (print IR, hash)")
    exe = llvm.compile(gfn)
    clock.stop("LLVM compile (lower, O3, emit, load)")
    if mode == "store":
        yc.save(yc.default_cache(), key, gfn, llvm, exe)
        clock.stop("store entry")
    _two_calls(clock, exe, args)
    return r


def _two_calls(clock, exe, args):
    """Time the program's first and second call on the arguments' leaves."""
    from yota.program import flatten_args  # (imported already: the trace uses it)

    leaves, _ = flatten_args(args)
    for label in ("first call", "second call"):
        clock.start()
        exe(*leaves)
        clock.stop(label)


def warm_phases(r, clock, tape, fn, args):
    """The phases of a hit: the backend (no LLVM), the traced key, the load by it."""
    from yota import cache as yc
    from yota import pipeline
    from yota.cache import lookup

    clock.start()
    from yota.backends import get_backend

    llvm = get_backend("llvm")
    cache = lookup._usable_cache(llvm)  # the backend's object cache set: host memo, pool
    from yota.backends.llvm.runtime.target import host

    host()
    clock.stop("backend init (import backend, host from its memo: no llvmlite)")
    key = yc.make_traced_key(fn, None, kind="grad", signature=yc.tape_signature(tape),
                             derivation=pipeline.grad_derivation(tape))
    clock.stop("traced key (traced IR, sources digest memo, hash)")
    found = lookup._load_traced(cache, key, llvm)
    assert found is not None, "no cache hit"
    exe = found[0]
    clock.stop("load by traced key (read, check, objload; pool by spec)")
    _two_calls(clock, exe, args)
    r["llvmlite.binding imported"] = float("llvmlite.binding" in sys.modules)
    return r


def end_to_end(mode):
    """One process: import, then the first yota.grad call, as a user sees it."""
    T, C, M = time.perf_counter, time.process_time, time.thread_time
    t0, c0, m0 = T(), C(), M()
    sys.path.insert(0, HERE)
    import mlp  # and NumPy

    t1, c1, m1 = T(), C(), M()
    import yota

    t2, c2, m2 = T(), C(), M()
    args = mlp.example()
    t3, c3, m3 = T(), C(), M()
    yota.grad(mlp.loss, *args, cache=mode != "cold")
    t4, c4, m4 = T(), C(), M()
    yota.grad(mlp.loss, *args)
    t5, c5, m5 = T(), C(), M()
    hit = yota.cache.stats.hits == 1
    out = {}
    for suffix, (a, b, c, d, e, f) in (("", (t0, t1, t2, t3, t4, t5)),
                                       (" (cpu)", (c0, c1, c2, c3, c4, c5)),
                                       (" (thread cpu)", (m0, m1, m2, m3, m4, m5))):
        out.update({"import numpy" + suffix: b - a, "import yota" + suffix: c - b,
                    "first yota.grad" + suffix: e - d, "second yota.grad" + suffix: f - e})
    out["hit"] = hit
    return out


def spawn(kind, mode, cache_dir, python=sys.executable):
    env = {**os.environ, "YOTA_CACHE_DIR": cache_dir}
    env.pop("YOTA_CACHE", None)
    out = subprocess.run([python, __file__, "--child", kind, mode], env=env,
                         capture_output=True, text=True)
    if out.returncode:
        raise RuntimeError(f"{kind} {mode} failed:\n{out.stderr}")
    return json.loads(out.stdout.splitlines()[-1])


def median_table(rows):
    """Each entry's median over the processes (a phase's wall and CPU time apart)."""
    keys = [k for k in rows[0] if k != "hit"]
    return {k: [statistics.median(r[k][i] for r in rows) for i in range(len(rows[0][k]))]
            if isinstance(rows[0][k], list) else statistics.median(r[k] for r in rows)
            for k in keys}


def compare(other, runs):
    """End-to-end warm and cold processes of this interpreter and ``other``, interleaved."""
    rows = {(p, m): [] for p in ("this", "other") for m in ("warm", "cold")}
    with tempfile.TemporaryDirectory() as d:
        for p, py in (("this", sys.executable), ("other", other)):
            spawn("e2e", "warm", os.path.join(d, p), py)  # fill each cache once
        for _ in range(runs):
            for p, py in (("this", sys.executable), ("other", other)):
                for m in ("warm", "cold"):
                    rows[p, m].append(spawn("e2e", m, os.path.join(d, p), py))
    for m in ("warm", "cold"):
        this, base = median_table(rows["this", m]), median_table(rows["other", m])
        print(f"end-to-end/{m} (median of {runs} processes, ms)   this    other")
        for k in this:
            print(f"  {k:<40} {this[k] * 1e3:8.1f} {base[k] * 1e3:8.1f}")


def main():
    runs = int(sys.argv[sys.argv.index("--runs") + 1]) if "--runs" in sys.argv else 7
    if "--compare" in sys.argv:
        return compare(sys.argv[sys.argv.index("--compare") + 1], runs)
    results = {}
    with tempfile.TemporaryDirectory() as d:
        warm = os.path.join(d, "warm")
        spawn("e2e", "warm", warm)  # fill the cache once (and the traced name)
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
        cols = ": wall, calling thread's CPU" if name.startswith("phases") else ""
        print(f"{name} (median of {runs} processes, ms{cols})")
        for k, v in table.items():
            shown = (" ".join(f"{x * 1e3:8.1f}" for x in v) if isinstance(v, list)
                     else f"{'yes' if v else 'no':>8}" if "imported" in k else f"{v * 1e3:8.1f}")
            print(f"  {k:<55} {shown}")


if __name__ == "__main__":
    if "--child" in sys.argv:
        kind, mode = sys.argv[sys.argv.index("--child") + 1:][:2]
        print(json.dumps(child(mode) if kind == "phases" else end_to_end(mode)))
    else:
        main()
