"""The MLIR backend on random programs (``irgen``: float32, float64 and int32 programs
of elementwise ops, broadcasts, reductions, shape ops, matrix products, gathers,
concatenations, selects, conversions, calls and guards), as generated and after the
default pass pipeline (fusion, batching, memory plan):

- their exports parse and verify in ``mlir-opt-22`` (a few runs for all of them);
- ``backend="mlir"`` matches the reference interpreter (``precision.py``'s tolerance;
  the same error with the same message where the interpreter raises): batched into a
  few compilations at LLVM ``opt_level`` 0, and some alone at the default level 3.

``-m slow`` runs 1000 more programs.
"""

from __future__ import annotations

import numpy as np
import pytest
from support import irgen  # noqa: E402
from support.mlir_cases import check_batch, compare, needs_mlir, verify_exports  # noqa: E402
from yota.ir import Function
from yota.ir.passes import optimize

Program = tuple[str, Function, list[np.ndarray]]


def programs(seeds: range) -> list[Program]:
    out: list[Program] = []
    for seed in seeds:
        fn, args = irgen.random_program(np.random.default_rng(seed))
        out += [(f"seed {seed} raw", fn, args), (f"seed {seed} optimized", optimize(fn), args)]
    return out


def test_programs_cover_float32_and_float64() -> None:
    dtypes = {v.dtype.name for _, f, _ in programs(range(40)) for v in f.inputs}
    assert {"float32", "float64"} <= dtypes


@needs_mlir
@pytest.mark.parametrize("block", range(2))
def test_random_exports_verify(block: int) -> None:
    """150 programs per block, raw and optimized: 600 functions."""
    fns = [f for _, f, _ in programs(range(block * 150, block * 150 + 150))]
    errors = verify_exports(fns)
    assert not errors, f"{len(errors)} exports do not verify; first:\n{errors[0]}"


@needs_mlir
@pytest.mark.parametrize("block", range(3))
def test_random_programs_match_the_interpreter(block: int) -> None:
    """60 programs per block, raw and optimized (360 functions), batched."""
    bad = check_batch(programs(range(1000 + block * 60, 1000 + block * 60 + 60)))
    assert not bad, f"{len(bad)} mismatches; first:\n{bad[0]}"


@needs_mlir
def test_random_programs_at_full_optimization() -> None:
    bad = [f"{label}: {msg}\n{f}" for label, f, args in programs(range(2000, 2012))
           if (msg := compare(f, args))]
    assert not bad, f"{len(bad)} mismatches; first:\n{bad[0]}"


@needs_mlir
@pytest.mark.slow
def test_many_random_programs() -> None:
    bad = check_batch(programs(range(3000, 4000)))
    assert not bad, f"{len(bad)} mismatches; first:\n{bad[0]}"
