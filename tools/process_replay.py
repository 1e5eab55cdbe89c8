"""Process replay for the backends: dump the code they generate, and compare two dumps.

A refactor of ``backends/`` should not change the code it generates. ``dump`` writes, for
a fixed set of programs, the unoptimized LLVM module text of the llvm backend and the
CUDA C module plus the lowered steps of the cuda backend (both need no GPU) into a
directory, one file per program and backend, and the LLVM IR of the llvm backend's
runtime modules (its fork-join pool, for each target triple the pool supports and one
it does not, with and without the tiled GEMMs); ``compare`` diffs two such directories.

    python tools/process_replay.py dump /tmp/replay-before      # on the old code
    python tools/process_replay.py dump /tmp/replay-after       # on the new code
    python tools/process_replay.py compare /tmp/replay-before /tmp/replay-after

The programs: the op programs of the backend tests (``tests/support/cuda_cases.py``'s
``op_programs`` and ``tests/support/backend_cases.py``'s unary/binary programs), random programs
of ``tests/support/irgen.py`` (raw and optimized), and the gradient programs (vjp + optimize) of
the benchmark workloads written as IR in ``tests/support/irgen.py`` (W2, the MLP, the RNN).
Everything is built from IR directly, and ``yota.ir`` / ``yota.backends`` are imported
without running ``yota/__init__.py`` (the front end), so front-end changes (even broken
ones, mid-edit) do not move the dump.
"""

from __future__ import annotations

import argparse
import difflib
import sys
from collections.abc import Callable, Iterator
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests"))


def _bare_yota() -> None:
    """Make ``yota`` a bare package (its subpackages ``ir`` and ``backends`` import as
    usual) instead of running the front end's ``__init__``."""
    import types

    if "yota" not in sys.modules:
        pkg = types.ModuleType("yota")
        pkg.__path__ = [str(ROOT / "yota")]
        sys.modules["yota"] = pkg


def programs(n_random: int) -> Iterator[tuple[str, object]]:
    """(label, ir.Function) pairs, in a fixed order."""
    from support import backend_cases as bc
    from support import irgen
    from support.cuda_cases import op_programs
    from yota.ir.autodiff import vjp
    from yota.ir.passes import optimize

    for j, case in enumerate(op_programs()):
        yield f"ops/{j:03d}_{case.label}", case.fn
    for dt in bc.FLOATS:
        for op in bc.FLOAT_UNARY + bc.TRANSCENDENTAL:
            yield f"unary/{op}_{dt}", bc.unary_program(op, dt)
        for op in bc.FLOAT_BINARY + ["pow", "arctan2"]:
            yield f"binary/{op}_{dt}", bc.binary_program(op, dt)
    for dt in ("i32", "i64"):
        for op in bc.INT_UNARY:
            yield f"unary/{op}_{dt}", bc.unary_program(op, dt)
        for op in bc.INT_BINARY:
            yield f"binary/{op}_{dt}", bc.binary_program(op, dt)
    for op in bc.BOOL_BINARY:
        yield f"binary/{op}_bool", bc.binary_program(op, "bool")
    for seed in range(n_random):
        fn, _ = irgen.random_program(np.random.default_rng(seed))
        yield f"random/{seed:04d}_raw", fn
        yield f"random/{seed:04d}_opt", optimize(fn)
    workloads = {"w2_small": irgen.w2_loss(1000), "w2": irgen.w2_loss(10**6),
                 "mlp_small": irgen.mlp_loss(8, (6, 5, 4, 10)), "mlp": irgen.mlp_loss(),
                 "rnn": irgen.rnn_loss(), "rnn_small": irgen.rnn_loss(3, 8, 4, 5)}
    for name, fn in workloads.items():
        wrt = [i for i, v in enumerate(fn.inputs) if v.dtype.kind == "f"]
        yield f"grad/{name}", optimize(vjp(fn, wrt))


def _llvm(fn: object) -> str:
    from yota.backends import llvm

    return llvm.llvm_ir(fn, threads=1)  # type: ignore[arg-type]


def _llvm_threads(fn: object) -> str:
    """Every kernel split over 3 threads (the chunk runners and partial reductions)."""
    from yota.backends.llvm import _options, lower_module
    from yota.backends.llvm.runtime.target import host

    opts = _options(3, 0.0)
    return str(lower_module(fn, host(), opts).module)  # type: ignore[arg-type]


def _cuda(fn: object) -> str:
    from yota.backends import cuda

    mod = cuda.lower(fn)  # type: ignore[arg-type]
    plans = "\n".join(f"{name}: ws={p.ws_bytes}\n  storages={p.storages}\n"
                      + "".join(f"  {s}\n" for s in p.steps) for name, p in mod.plans.items())
    return f"{mod.source()}\n// -- steps --\n{plans}// failures: {mod.failures}\n"


BACKENDS: dict[str, Callable[[object], str]] = {"llvm": _llvm, "cuda": _cuda}
POOL_TRIPLES = ("x86_64-unknown-linux-gnu", "aarch64-unknown-linux-gnu", "x86_64-apple-darwin")


def runtime_modules() -> Iterator[tuple[str, str]]:
    """(label, LLVM IR) of the llvm backend's runtime modules: the pool (``pool._ir``)
    for each of ``POOL_TRIPLES``, without BLAS, with BLAS unsplit and with tiled GEMMs."""
    from yota.backends.llvm.runtime import pool

    for triple in POOL_TRIPLES:
        for blas, tiles in ((False, False), (True, False), (True, True)):
            label = f"pool/{triple}{'_blas' if blas else ''}{'_tiles' if tiles else ''}"
            yield label, pool._ir(triple, blas, tiles)


def dump(out: Path, n_random: int) -> int:
    out.mkdir(parents=True, exist_ok=True)
    count = 0
    for label, fn in programs(n_random):
        jobs = dict(BACKENDS)
        if label.startswith(("random/", "grad/")) and (
                not label.startswith("random/") or int(label[7:11]) < 60):
            jobs["llvm_threads"] = _llvm_threads
        for backend, render in jobs.items():
            path = out / backend / f"{label}.txt"
            path.parent.mkdir(parents=True, exist_ok=True)
            try:
                text = render(fn)
            except Exception as e:  # noqa: BLE001 - a failure is part of the record
                text = f"!! {type(e).__name__}: {e}\n"
            path.write_text(text)
            count += 1
    for label, text in runtime_modules():
        path = out / "llvm_runtime" / f"{label}.txt"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
        count += 1
    print(f"{count} files written to {out}")
    return 0


def compare(a: Path, b: Path, context: int) -> int:
    fa = {p.relative_to(a) for p in a.rglob("*.txt")}
    fb = {p.relative_to(b) for p in b.rglob("*.txt")}
    bad = 0
    for p in sorted(fa ^ fb):
        print(f"only in {'first' if p in fa else 'second'}: {p}")
        bad += 1
    same = 0
    for p in sorted(fa & fb):
        x, y = (a / p).read_text(), (b / p).read_text()
        if x == y:
            same += 1
            continue
        bad += 1
        print(f"== {p}")
        sys.stdout.writelines(difflib.unified_diff(
            x.splitlines(True), y.splitlines(True), str(a / p), str(b / p), n=context))
    print(f"{same} identical, {bad} different or missing, of {len(fa | fb)} files")
    return 1 if bad else 0


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    sub = ap.add_subparsers(dest="cmd", required=True)
    d = sub.add_parser("dump", help="write the generated code of every program")
    d.add_argument("out", type=Path)
    d.add_argument("--random", type=int, default=300, help="random programs (seeds 0..N-1)")
    c = sub.add_parser("compare", help="diff two dumps")
    c.add_argument("a", type=Path)
    c.add_argument("b", type=Path)
    c.add_argument("--context", type=int, default=2)
    args = ap.parse_args(argv)
    if args.cmd == "dump":
        _bare_yota()
        return dump(args.out, args.random)
    return compare(args.a, args.b, args.context)


if __name__ == "__main__":
    sys.exit(main())
