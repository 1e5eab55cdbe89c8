"""Algebraic simplification: the rewrite patterns of ``patterns`` (exact in IEEE
arithmetic; more with ``fast_math``, among them ``diagonal``'s) applied to a fixed point.
Patterns are pure; only this driver changes the program."""

from __future__ import annotations

from ..core import Function, Op, Value
from .base import Pass, PassContext, rebuild, remap, resolve
from .diagonal import FAST_MATH_DIAGONAL
from .patterns import FAST_MATH_PATTERNS, PATTERNS, Pattern, Rewrite, View


def patterns_for(name: str, fast_math: bool) -> list[Pattern]:
    fast = FAST_MATH_PATTERNS.get(name, []) + FAST_MATH_DIAGONAL.get(name, []) \
        if fast_math else []
    return fast + PATTERNS.get(name, [])


class _Sweep:
    """One pass over the ops, rewriting each (and the ops rewrites create) until no
    pattern matches it."""

    def __init__(self, ctx: PassContext) -> None:
        self.view = View({}, ctx.fast_math)
        self.subst: dict[Value, Value] = {}
        self.ops: list[Op] = []
        self.fired = 0

    def emit(self, op: Op, depth: int = 0) -> None:
        op = remap(op, self.subst)
        if len(op.results) == 1 and depth < 64:
            for pattern in patterns_for(op.name, self.view.fast_math):
                rewrite = pattern(op, self.view)
                if rewrite is not None:
                    self.fired += 1
                    self._replace(op, rewrite, depth)
                    return
        self.ops.append(op)
        self.view.producers.update((r, op) for r in op.results)

    def _replace(self, op: Op, rewrite: Rewrite, depth: int) -> None:
        new_ops, value = ([], rewrite) if isinstance(rewrite, Value) else rewrite
        for n in new_ops:
            self.emit(n, depth + 1)
        self.subst[op.result] = resolve(value, self.subst)


def simplify(fn: Function, ctx: PassContext) -> Function:
    for _ in range(ctx.max_sweeps):
        sweep = _Sweep(ctx)
        for op in fn.ops:
            sweep.emit(op)
        if not sweep.fired:
            return fn
        fn = rebuild(fn, sweep.ops, sweep.subst)
    return fn


SIMPLIFY = Pass("simplify", "apply exact algebraic rewrites (x*1, neg neg x, transpose of "
                "transpose, sum of a broadcast...) to a fixed point", simplify)
