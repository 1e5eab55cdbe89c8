"""Differential tests: on hundreds of random programs (``irgen``), the optimized program
gives the unoptimized one's results on the interpreter: bit for bit (NaNs in the same
places) for the exact passes; within both programs' bounds (``precision``) when matrix
products are batched (their sums reassociate); within a tolerance with fast_math, whose
algebraic rewrites are not modelled op by op."""

from __future__ import annotations

from collections import Counter

import numpy as np
import pytest
from support import TESTS, precision
from support.irgen import close_results, random_program, same_results
from yota.ir import Function, GuardFailed, parse, print_function, run
from yota.ir.passes import PassContext, optimize
from yota.ir.passes.fuse import CHEAP, FUSE

EXACT = PassContext(reorder_matmul=False)


def outcome(fn: Function, args: list[np.ndarray]) -> list[np.ndarray] | None:
    """The outputs, or None when a guard fails."""
    try:
        return run(fn, *args)
    except GuardFailed:
        return None


def check(seed: int, ctx: PassContext, tame: bool = False) -> Function:
    fn, args = random_program(np.random.default_rng(seed), tame=tame)
    want = outcome(fn, args)
    opt = optimize(fn, ctx=ctx)
    got = outcome(opt, args)
    assert (want is None) == (got is None), f"seed {seed}: a guard fails on one side only"
    if want is not None and got is not None:
        if ctx.fast_math:  # algebraic rewrites, outside the per-op rule of ``precision``
            why = close_results(want, got)
        elif ctx.reorder_matmul:  # batched matrix products reassociate their sums
            why = precision.programs_mismatch(fn, opt, args)
        else:
            why = same_results(want, got)
        assert why is None, f"seed {seed}: {why}\n{print_function(fn)}\n{print_function(opt)}"
    return opt


@pytest.mark.parametrize("chunk", range(6))
def test_optimized_programs_give_the_same_bits(chunk: int) -> None:
    for seed in range(chunk * 50, (chunk + 1) * 50):
        opt = check(seed, EXACT)
        assert print_function(parse(print_function(opt))) == print_function(opt)


@pytest.mark.parametrize("chunk", range(2))
def test_fast_math_programs_agree_within_tolerance(chunk: int) -> None:
    for seed in range(1000 + chunk * 50, 1000 + (chunk + 1) * 50):
        check(seed, PassContext(fast_math=True, reorder_matmul=False), tame=True)


def test_batched_matmuls_agree_within_tolerance() -> None:
    for seed in range(2000, 2100):
        check(seed, PassContext())


def _work(fn: Function) -> Counter[str]:
    """Ops that compute something, in ``fn`` and its kernel bodies."""
    ops = [op for f in [fn, *fn.callees.values()] for op in f.ops]
    return Counter(op.name for op in ops if op.name not in ("const", "broadcast", "fused"))


def test_fusion_never_duplicates_expensive_ops_or_drops_work() -> None:
    """On random programs and the fuse goldens: every op kept, only cheap ones computed
    twice. Random programs seldom give a cheap value read by a second kernel of its domain
    (none of these 300 seeds do), so the goldens written for recomputation are checked too
    and must recompute something."""
    golden = TESTS / "golden" / "passes" / "fuse"
    programs = [random_program(np.random.default_rng(seed))[0] for seed in range(300)]
    programs += [parse(p.read_text().partition("// expect")[0]) for p in sorted(golden.glob("*.ir"))]
    fused = recomputed = 0
    for i, fn in enumerate(programs):
        before = optimize(fn, ["inline", "simplify", "cse", "dce"])
        want, got = _work(before), _work(FUSE(before))
        for name in want | got:
            assert got[name] >= want[name], f"program {i}: {name} dropped"
            assert name in CHEAP or got[name] == want[name], f"program {i}: {name} twice"
        recomputed += (got - want).total()
        fused += sum(op.name == "fused" for op in FUSE(before).ops)
    assert fused > 100 and recomputed > 0  # fusion had something to do
