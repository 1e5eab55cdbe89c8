"""The command line (``python tools/bench.py``): the options, the choice of workloads and
systems, ``--threads`` (the process started again with its thread settings), the run of
the suite, its Markdown and JSON; ``--compile`` and ``--transforms`` hand over to
``tools/bench_compile.py`` and ``tools/bench_transforms.py``."""

from __future__ import annotations

import argparse
import dataclasses
import datetime
import os
import platform
import shlex
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import bench
from bench import systems as peers
from bench.load import BusyLoad
from bench.log import log, why
from bench.machine import load_average, machine_name, measure_limits
from bench.report import markdown, write_json
from bench.runner import run_workload
from bench.systems import System, Unavailable
from bench.timing import Timing
from bench.workloads import workloads

ENTRY = Path(__file__).resolve().parent.parent / "bench.py"  # tools/bench.py, the script


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=(bench.__doc__ or "").split("\n\n")[0])
    p.add_argument("--quick", action="store_true", help="tiny sizes and short rounds (smoke run)")
    p.add_argument("--only", default="", help="workloads by name or prefix, comma-separated "
                   "(W3, W1-f32, W2)")
    p.add_argument("--systems", default="", help="systems by name or prefix, comma-separated "
                   "(numpy, yota, autograd, jax, torch, torch.compile); default all")
    p.add_argument("--backend", default="", help="Yota backends, comma-separated; default every "
                   "backend in yota.backends.BACKENDS")
    p.add_argument("--budget", type=float, default=None, help="seconds of timed rounds per "
                   "workload (default 12, quick 0.3)")
    p.add_argument("--json", default="build/bench.json", help="where to write the JSON report")
    p.add_argument("--md", default="", help="also write the Markdown table to this file")
    p.add_argument("--threads", type=int, default=0, help="threads for every system's thread "
                   "pool (OpenBLAS, OpenMP/MKL, XLA when 1; run as a script only); default: each "
                   "library's own default")
    p.add_argument("--load", type=int, default=0, metavar="N", help="run N busy processes "
                   "(an endless Python loop each, like `yes > /dev/null`) during the timed "
                   "workloads, to measure under CPU contention; stopped at the end, on error "
                   "and on Ctrl-C")
    p.add_argument("--settle", type=float, default=0.25, metavar="S", help="before each "
                   "timed sample, wait up to S seconds until no thread of this process runs "
                   "(other libraries' workers still spinning from their own sample); 0: don't")
    p.add_argument("--seed", type=int, default=0)
    args = p.parse_args(argv)
    if args.load < 0:
        p.error("--load takes a number of processes, 0 or more")
    return args


# The busy child: spins, and exits when its parent goes away (PR_SET_PDEATHSIG on Linux,


def _select(items: Sequence[Any], spec: str, what: str) -> list[Any]:
    if not spec:
        return list(items)
    keys = [k.strip() for k in spec.split(",") if k.strip()]
    chosen = [x for x in items if any(x.name == k or x.name.startswith(k + "-")
                                      or x.name.startswith(k + "[") for k in keys)]
    if not chosen:
        raise SystemExit(f"--{what} {spec!r} selects nothing; choose from "
                         + ", ".join(x.name for x in items))
    return chosen


def choose_systems(args: argparse.Namespace) -> list[System]:
    try:
        backends, _ = peers.yota_backends()
    except Exception as e:
        log(f"yota: cannot list backends ({why(e)})")
        backends = []
    if args.backend:
        wanted = [b.strip() for b in args.backend.split(",") if b.strip()]
        for b in wanted:
            if b not in backends:
                log(f"yota[{b}]: not in yota.backends.BACKENDS ({', '.join(backends)})")
        backends = wanted
    return _select(peers.all_systems(backends), args.systems, "systems")


def versions(systems: Sequence[System]) -> dict[str, str]:
    v = {"python": platform.python_version()}
    for s in systems:
        if s.module is not None:
            v[s.dist] = s.version
    if "jax" in v:
        v["jaxlib"] = peers.dist_version("jaxlib")
    return v


THREAD_VARS = ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS")


def limit_threads(n: int) -> None:
    """Keep the process on n cores (sched_setaffinity, which also sizes thread pools that
    count usable cores, such as Yota's) and set the libraries' thread variables. Thread
    pools are sized when a library loads, so start again with them set."""
    if os.environ.get("YOTA_BENCH_THREADS") == str(n):
        return
    if hasattr(os, "sched_setaffinity"):
        os.sched_setaffinity(0, sorted(os.sched_getaffinity(0))[:n])
    env = dict(os.environ, YOTA_BENCH_THREADS=str(n), **{v: str(n) for v in THREAD_VARS})
    if n == 1:
        env["XLA_FLAGS"] = (env.get("XLA_FLAGS", "") + " --xla_cpu_multi_thread_eigen=false "
                            "intra_op_parallelism_threads=1").strip()
    sys.stdout.flush()
    os.execve(sys.executable, [sys.executable, str(ENTRY), *sys.argv[1:]], env)


def run(argv: Sequence[str] | None = None) -> dict[str, Any]:
    """Run the suite; print Markdown on stdout, write the JSON report, and return it."""
    args = parse_args(argv)
    if args.threads:
        if argv is not None:
            raise SystemExit("--threads works only when bench.py runs as a script")
        limit_threads(args.threads)
    timing = (Timing(args.budget if args.budget is not None else 0.3, 2, 20, 0.002,
                     settle_s=0.0)
              if args.quick else
              Timing(args.budget if args.budget is not None else 12.0, 5, 1000, 0.02,
                     settle_s=args.settle))
    chosen = _select(workloads(args.quick), args.only, "only")
    systems = choose_systems(args)
    for s in systems:
        try:
            s.setup()
        except Unavailable as e:
            log(f"{s.name}: skipped: {e}")
    load_start = load_average()
    log("measuring the machine's limits ...")
    limits = measure_limits(args.quick, args.threads or os.cpu_count() or 1)
    results = []
    with BusyLoad(args.load):
        for w in chosen:
            log(f"{w.name}: {w.desc}")
            t0 = time.perf_counter()
            results.append(run_workload(w, systems, timing, limits, args.seed))
            log(f"  done in {time.perf_counter() - t0:.1f} s")
    command = shlex.join(["python", "tools/bench.py",
                          *(sys.argv[1:] if argv is None else argv)])
    report = {"meta": {"date": datetime.date.today().isoformat(), "machine": machine_name(),
                       "cores": os.cpu_count(), "command": command, "quick": args.quick,
                       "threads": args.threads or "library defaults", "load": args.load,
                       "load_start": load_start, "load_end": load_average(),
                       "systems": [s.name for s in systems], "versions": versions(systems),
                       "timing": dataclasses.asdict(timing)},
              "limits": limits, "workloads": results}
    report["markdown"] = markdown(report)
    print(report["markdown"])
    if args.json:
        write_json(report, args.json)
    if args.md:
        with open(args.md, "w") as f:
            f.write(report["markdown"])
    return report


def main(argv: Sequence[str] | None = None) -> None:
    """``--compile``: compile times (tools/bench_compile.py); ``--transforms``: jvp, vmap,
    hessian against JAX (tools/bench_transforms.py); otherwise the suite."""
    args = list(sys.argv[1:] if argv is None else argv)
    if "--compile" in args:
        import bench_compile

        bench_compile.main([a for a in args if a != "--compile"])
    elif "--transforms" in args:
        import bench_transforms

        bench_transforms.main([a for a in args if a != "--transforms"])
    else:
        run(argv)
