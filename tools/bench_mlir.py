"""The mlir backend against the llvm backend on tools/bench.py's workloads, timed
alternately in one process (round after round, each backend's call right after the
other's), so both see the same machine load: the medians and their ratio.

    python tools/bench_mlir.py W1-f64 W2-1e6 W3 W4-f32 W5 W6 --rounds 7
"""

from __future__ import annotations

import argparse
import time

import numpy as np
from bench.systems import prepare_yota
from bench.workloads import find


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("workloads", nargs="+", help="workload names of tools/bench.py (full sizes)")
    p.add_argument("--rounds", type=int, default=7)
    p.add_argument("--calls", type=int, default=2, help="calls per timed sample")
    args = p.parse_args(argv)
    import yota

    for name in args.workloads:
        w = find(name)
        inputs = w.make(np.random.default_rng(0))
        steps = {b: prepare_yota(b)(yota, w, inputs)[0] for b in ("llvm", "mlir")}
        for step in steps.values():
            step()  # compile (or load from the cache) and warm up
        times: dict[str, list[float]] = {b: [] for b in steps}
        for _ in range(args.rounds):
            for b, step in steps.items():
                t = time.perf_counter()
                for _ in range(args.calls):
                    step()
                times[b].append((time.perf_counter() - t) / args.calls)
        med = {b: float(np.median(v)) for b, v in times.items()}
        print(f"{name}: llvm {med['llvm'] * 1e3:.3f} ms, mlir {med['mlir'] * 1e3:.3f} ms, "
              f"mlir/llvm {med['mlir'] / med['llvm']:.2f}")


if __name__ == "__main__":
    main()
