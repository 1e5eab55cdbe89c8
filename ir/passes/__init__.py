"""Optimization passes on the IR, one per module, and the default pipeline.

    >>> from yota.ir import parse
    >>> from yota.ir.passes import optimize
    >>> f = parse('''
    ... func @f(%0: f32[3]) -> (f32[3]) {
    ...   %1 = neg %0 : f32[3]
    ...   %2 = neg %1 : f32[3]
    ...   return %2
    ... }''')
    >>> print(optimize(f, ["simplify", "dce"]))
    func @f(%0: f32[3]) -> (f32[3]) {
      return %0
    }

``optimize(fn, trace_stages=True)`` returns every stage, ``[("input", fn), (pass name,
fn after it), ...]``, for the CLI to print. With ``YOTA_VERIFY=1`` (the tests set it) the
verifier checks the function after every pass.
"""

from __future__ import annotations

import functools
from collections.abc import Sequence
from typing import Literal, overload

from ..core import Function
from ..errors import YotaError
from ..verifier import maybe_verify
from .base import Pass, PassContext
from .batch_matmul import BATCH_MATMUL
from .bodies import apply_nested
from .cse import CSE
from .dce import DCE
from .fold import FOLD
from .fuse import FUSE
from .inline import INLINE
from .loops import LOOPS
from .plan_memory import PLAN_MEMORY, MemoryPlan, without_plan
from .roll import ROLL
from .simplify import SIMPLIFY
from .tile import TILE
from .writes import WRITES

PASSES: dict[str, Pass] = {p.name: p for p in [
    INLINE, FOLD, SIMPLIFY, CSE, DCE, BATCH_MATMUL, WRITES, FUSE, TILE, PLAN_MEMORY, ROLL,
    LOOPS,
]}

# The default pipeline, top to bottom: (pass, why it runs at this point).
PIPELINE: list[tuple[str, str]] = [
    ("inline", "primitive bodies become ordinary ops the passes below can see"),
    ("fold", "ops on constants (seeds, literals) become constants"),
    ("simplify", "remove algebraic no-ops the derivative rules leave (x*1, transposes)"),
    ("cse", "the backward part recomputes forward values: compute each once"),
    ("fold", "simplify and cse expose new ops on constants"),
    ("dce", "drop what the rewrites above left unread"),
    ("loops", "a loop's invariant ops run once; running sums and products of step slices "
     "are computed over all steps at once; unread loop results are dropped"),
    ("batch_matmul", "many small GEMMs over a shared operand become one large GEMM"),
    ("simplify", "batching leaves slices of concatenations to clean up"),
    ("cse", "batching can make equal concatenations"),
    ("dce", "drop the unbatched products"),
    ("loops", "batching inside a loop's body can concatenate invariants: run them once"),
    ("writes", "reads of a region just written read the value; padded cotangents are "
     "added into their region only, so buffers filled step by step update in place"),
    ("dce", "drop the buffer versions and pads the writes pass left unread"),
    ("fuse", "elementwise chains and their reduction become one kernel each"),
    ("tile", "runs of kernels over the same rows run block by block of rows, what they "
     "pass each other staying in cache"),
    ("plan_memory", "reuse buffers by liveness; give backends the plan and peak bytes"),
]

Stages = list[tuple[str, Function]]


@overload
def optimize(fn: Function, passes: Sequence[str | Pass] | None = ..., *,
             fast_math: bool = ..., trace_stages: Literal[False] = ...,
             ctx: PassContext | None = ...) -> Function: ...


@overload
def optimize(fn: Function, passes: Sequence[str | Pass] | None = ..., *,
             fast_math: bool = ..., trace_stages: Literal[True],
             ctx: PassContext | None = ...) -> Stages: ...


def optimize(fn: Function, passes: Sequence[str | Pass] | None = None, *,
             fast_math: bool = False, trace_stages: bool = False,
             ctx: PassContext | None = None) -> Function | Stages:
    """Run ``passes`` (names or ``Pass`` objects; default: ``PIPELINE``) over ``fn``.

    Returns the optimized function, or with ``trace_stages=True`` the list of stages
    ``[("input", fn), (name, fn after that pass), ...]``; a stage whose function ``is``
    the previous one was left unchanged by its pass. ``ctx`` overrides all options
    (``fast_math`` is then ignored).
    """
    ctx = ctx or PassContext(fast_math=fast_math)
    chosen = [_lookup(p) for p in (passes if passes is not None else [n for n, _ in PIPELINE])]
    stages: Stages = [("input", fn)]
    for p in chosen:
        fn = maybe_verify(apply_nested(functools.partial(_apply, p, ctx=ctx), fn))
        stages.append((p.name, fn))
    return stages if trace_stages else fn


def _apply(p: Pass, fn: Function, *, ctx: PassContext) -> Function:
    out = p.apply(fn, ctx)
    if out is not fn and p is not PLAN_MEMORY:
        out = without_plan(out)  # the ops changed: a plan made before is stale
    return out


def _lookup(p: str | Pass) -> Pass:
    if isinstance(p, Pass):
        return p
    if p not in PASSES:
        raise YotaError(f"unknown pass {p!r}; the passes are {', '.join(PASSES)}")
    return PASSES[p]


__all__ = ["PASSES", "PIPELINE", "Pass", "PassContext", "MemoryPlan", "optimize"]
