"""Differential tests of the llvm backend on random programs (``irgen``), as generated and
after the default pass pipeline (fusion, batching, memory plan), against the interpreter.

Results must be equal within a tolerance that depends on what the program computes:
exactly for integer outputs; for floats, ``irgen.close_results``'s tolerance, or a
float32 one when the program computes anything in float32 (a transcendental one ulp off
in float32 is 1e-7 relative in a float64 output). Errors (guards that fail, say) must
be the same error with the same message.
"""

from __future__ import annotations

import numpy as np
import pytest
from support import (
    backend_cases,  # noqa: E402
    irgen,  # noqa: E402
)
from yota.backends import llvm as native
from yota.ir import Function
from yota.ir.passes import optimize


def compare(fn: Function, args: list[np.ndarray], **opts: object) -> str | None:
    def exe(*a: np.ndarray) -> list[np.ndarray]:
        return native.compile(fn, **opts)(*a)  # type: ignore[arg-type]

    return backend_cases.compare(fn, args, exe, backend="llvm")


def _run(seeds: range, **opts: object) -> None:
    bad = []
    for seed in seeds:
        fn, args = irgen.random_program(np.random.default_rng(seed))
        for label, f in (("raw", fn), ("optimized", optimize(fn))):
            msg = compare(f, args, **opts)
            if msg:
                bad.append(f"seed {seed} ({label}): {msg}\n{f}")
    assert not bad, f"{len(bad)} mismatches; first:\n" + bad[0]


@pytest.mark.parametrize("block", range(3))
def test_random_programs(block: int) -> None:
    """120 programs (240 compilations) by default; ``-m slow`` runs 1000 more."""
    _run(range(block * 40, block * 40 + 40))


def test_random_programs_split_over_threads() -> None:
    """Every kernel split over 3 threads (partial reductions, uneven chunks)."""
    _run(range(500, 530), threads=3, par_work=0)


def test_large_kernels_split_over_threads() -> None:
    from yota.ir import Builder, TensorType

    b = Builder("big")
    x = b.input(TensorType("f32", (1001, 67)))
    y = b.input(TensorType("f64", (5003,)))
    e = b.exp(b.neg(b.square(x)))
    outs = [b.sum(e, axes=(0,)), b.sum(e, axes=(1,)), b.sum(e, axes=(0, 1)), b.max(x, axes=(0,)),
            b.min(b.transpose(x, perm=(1, 0)), axes=(1,)), b.tanh(y), b.sum(b.tanh(y), axes=(0,)),
            b.prod(b.convert(b.gt(y, b.const(-3.0, "f64", (5003,))), dtype="i32"), axes=(0,))]
    fn = b.build(outs)
    rng = np.random.default_rng(0)
    args = [rng.standard_normal((1001, 67)).astype(np.float32), rng.standard_normal(5003)]
    for threads in (2, 3, 8):
        assert compare(fn, args, threads=threads, par_work=0) is None
        assert compare(optimize(fn), args, threads=threads, par_work=0) is None


@pytest.mark.slow
def test_many_random_programs() -> None:
    _run(range(1000, 2000))
