"""Golden-text tests of the optimization passes: IR text in, IR text out.

Each file under ``tests/golden/passes/<pass>/`` holds a header, the input function(s),
a line ``// expect``, and the expected printed result:

    # passes: simplify, dce
    # options: fast_math, fold_limit=8
    # why: one line saying what the case shows
    func @f(...) { ... }
    // expect
    func @f(...) { ... }

Run with ``YOTA_UPDATE_GOLDEN=1`` to rewrite the expected parts (then read the diff).
"""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np
import pytest
from support import TESTS, precision
from support.irgen import example_inputs, same_results
from yota.ir import GuardFailed, YotaError, parse, print_function, run
from yota.ir.passes import PASSES, PIPELINE, PassContext, optimize

GOLDEN = TESTS / "golden" / "passes"
CASES = sorted(GOLDEN.glob("*/*.ir"))
SEP = "// expect"


def _header(text: str) -> tuple[list[str], PassContext]:
    passes: list[str] = []
    opts: dict[str, object] = {}
    for line in text.splitlines():
        if line.startswith("# passes:"):
            passes = [p.strip() for p in line.split(":", 1)[1].split(",")]
        elif line.startswith("# options:"):
            for o in line.split(":", 1)[1].split(","):
                key, _, val = o.strip().partition("=")
                opts[key] = int(val) if val else True
    return passes, PassContext(**opts)  # type: ignore[arg-type]


def _check_same_meaning(before: str, after: str, exact: bool) -> None:
    """The interpreter gives the same results before and after: bit for bit when the
    passes are exact, within both programs' bounds (``precision``) where they reorder
    float sums."""
    f, g = parse(before), parse(after)
    args = example_inputs(f, np.random.default_rng(0))
    try:
        want = run(f, *args)
    except GuardFailed:
        return
    if exact:
        assert same_results(want, run(g, *args)) is None
    else:
        assert precision.programs_mismatch(f, g, args) is None


@pytest.mark.parametrize("path", CASES, ids=[f"{p.parent.name}/{p.stem}" for p in CASES])
def test_golden(path: Path) -> None:
    text = path.read_text()
    source, _, expected = text.partition(SEP + "\n")
    passes, ctx = _header(source)
    got = print_function(optimize(parse(source), passes, ctx=ctx))
    if os.environ.get("YOTA_UPDATE_GOLDEN"):
        path.write_text(source + SEP + "\n" + got + "\n")
        return
    assert got == expected.strip()
    assert print_function(parse(got)) == got
    if not ctx.fast_math:  # fast-math rewrites may move NaNs (exp(log x) for x < 0)
        reorders = ctx.reorder_matmul and bool({"batch_matmul", "loops"} & set(passes))
        _check_same_meaning(source, got, exact=not reorders)


def test_every_pass_has_golden_cases() -> None:
    covered = {p.parent.name for p in CASES}
    assert set(PASSES) - {"inline"} <= covered


def test_pipeline_lists_registered_passes_with_reasons() -> None:
    for name, reason in PIPELINE:
        assert name in PASSES and reason and "\n" not in reason
    for p in PASSES.values():
        assert p.reason and p.name


def test_trace_stages_shows_each_pass_and_which_changed() -> None:
    f = parse("""
func @f(%0: f32[3]) -> (f32[3]) {
  %1 = neg %0 : f32[3]
  %2 = neg %1 : f32[3]
  %3 = exp %2 : f32[3]
  return %3
}""")
    stages = optimize(f, ["simplify", "dce", "cse"], trace_stages=True)
    assert [n for n, _ in stages] == ["input", "simplify", "dce", "cse"]
    assert stages[0][1] is f
    assert stages[3][1] is stages[2][1]  # cse found nothing: the same function
    assert print_function(stages[2][1]).count("\n") == 3


def test_unknown_pass_is_a_clear_error() -> None:
    f = parse("func @f(%0: f32[]) -> (f32[]) {\n  return %0\n}")
    with pytest.raises(YotaError, match="unknown pass 'fusion'.*fuse"):
        optimize(f, ["fusion"])


def test_passes_do_not_mutate_their_input() -> None:
    text = (GOLDEN / "simplify" / "mul_one.ir").read_text().partition(SEP)[0]
    f = parse(text)
    before = print_function(f)
    optimize(f)
    assert print_function(f) == before


def test_inline_then_fuse_sees_through_calls() -> None:
    f = parse("""
func @logistic(%0: f32[8]) -> (f32[8]) {
  %1 = neg %0 : f32[8]
  %2 = exp %1 : f32[8]
  %3 = const {value = 1.0} : f32[8]
  %4 = add %3, %2 : f32[8]
  %5 = div %3, %4 : f32[8]
  return %5
}

func @f(%0: f32[8]) -> (f32[8]) {
  %1 = tanh %0 : f32[8]
  %2 = call %1 {callee = "logistic"} : f32[8]
  return %2
}""")
    g = optimize(f)
    assert [op.name for op in g.ops] == ["fused"]
    assert list(g.callees) == ["fused_0"]
    x = np.linspace(-3, 3, 8, dtype=np.float32)
    assert same_results(run(f, x), run(g, x)) is None
