"""Rolling: repeated steps of a traced program become one ``loop`` op with a body.

A Python loop traces unrolled: ``T`` copies of the same ops, each reading the previous
step's results. ``roll`` finds such runs and folds each back into a loop (see
``yota.ir.ops.loop``), so that everything after it (differentiation, the passes, code
generation) works on one step instead of ``T``.

Finding them, in O(n log n): every non-constant op gets a signature (name, operand and
result types, attributes but those ``roll_steps.VARYING`` lets differ). Scanning the
sequence of signatures from the left, a position ``i`` tries as its period ``p`` the
distances to the next few ops with its signature, and to the next few runs of ``GRAM``
ops equal to the run starting at ``i`` (a step made of common ops, all adds of one shape,
has a period that no single op shows); with prefix hashes, the length ``L``
of the run where the sequence equals itself ``p`` later is found by binary search, and
``L >= p`` means at least two steps. ``roll_steps.Steps`` then checks the steps one by
one (every operand keeps one role: same step, previous step, or from before the loop)
and the loop covers the steps that hold. What does not verify stays unrolled, so the
rolled program computes exactly what the unrolled one does, op for op.

A loop is only made where it saves ``PassContext.roll_min_saved`` ops (32) or more that
compute (ops that only move data, ``DATA_OPS``, do not count). Loops in loops take one
round each: once the inner steps are loop ops, the outer steps repeat too (a loop op's
signature holds its body's structure, not its name); the bodies of the loops made are
rolled in turn.
"""

from __future__ import annotations

import re
from collections.abc import Hashable

import numpy as np

from ..core import Function, Value
from .base import Pass, PassContext
from .bodies import in_bodies
from .cse import attr_key
from .dce import dce
from .roll_build import build_rolled, strided_view
from .roll_steps import Program, Steps, make_program

# ops that only move data: a step of those alone is not worth a loop
DATA_OPS = frozenset({"reshape", "transpose", "broadcast", "slice", "concatenate", "pad",
                      "flip"})
MAX_TRIES = 4  # periods tried at one position: distances to the next equal signatures
GRAM = 16  # ... and to the next equal runs of this many signatures
MAX_ROUNDS = 4  # loops in loops: one round per level
_MOD = (1 << 61) - 1
_BASE = 1_000_003


class _Hashes:
    """Prefix hashes of a sequence of ints: ``lce(i, j)``, the length of the longest
    common run starting at ``i`` and at ``j``, in O(log lce)."""

    def __init__(self, xs: list[int]) -> None:
        n = len(xs)
        self.n = n
        self.h = [0] * (n + 1)
        self.pw = [1] * (n + 1)
        for k, x in enumerate(xs):
            self.h[k + 1] = (self.h[k] * _BASE + x + 1) % _MOD
            self.pw[k + 1] = self.pw[k] * _BASE % _MOD

    def window(self, i: int, length: int) -> int:
        """The hash of ``xs[i:i + length]``."""
        return (self.h[i + length] - self.h[i] * self.pw[length]) % _MOD

    _get = window

    def lce(self, i: int, j: int) -> int:
        """Galloping then bisecting: O(log lce), short where the runs differ soon."""
        top, lo, step = self.n - max(i, j), 0, 1
        while lo + step <= top and self._get(i, lo + step) == self._get(j, lo + step):
            lo, step = lo + step, step * 2
        hi = min(lo + step, top + 1) - 1
        while lo < hi:
            mid = (lo + hi + 1) // 2
            if self._get(i, mid) == self._get(j, mid):
                lo = mid
            else:
                hi = mid - 1
        return lo


class _CalleeKeys:
    """A callee's structure as a key (its text, callee names replaced by their keys),
    so that loops of equal bodies have equal signatures."""

    def __init__(self, fn: Function) -> None:
        self.callees = fn.all_callees()
        self.keys: dict[str, Hashable] = {}

    def __call__(self, name: str) -> Hashable:
        if name not in self.keys:
            from ..printer import print_function

            body = self.callees[name]
            text = print_function(body.replace(name="_"), with_callees=False)
            self.keys[name] = re.sub(r'callee = "([^"]*)"',
                                     lambda m: f"callee = {self(m.group(1))!r}", text)
        return self.keys[name]


def _next_equal(keys: list[int]) -> list[int]:
    """For each position, the next position with an equal key (-1: none)."""
    nxt = [-1] * len(keys)
    last: dict[int, int] = {}
    for k in range(len(keys) - 1, -1, -1):
        nxt[k] = last.get(keys[k], -1)
        last[keys[k]] = k
    return nxt


def find_loops(prog: Program, min_saved: int = 32) -> list[Steps]:
    """The loops to make, left to right, each checked (its roles found)."""
    n = len(prog.loose)
    hashes = _Hashes(prog.loose)
    # next equal op, and next equal run of GRAM ops: a step whose ops all have common
    # signatures (many adds of one shape) still has runs of ops that occur once a step
    grams = [hashes.window(k, GRAM) for k in range(n - GRAM + 1)]
    nexts = (_next_equal(prog.loose), _next_equal(grams) + [-1] * (n - len(grams)))
    found: list[Steps] = []
    failed_until: dict[int, int] = {}  # period -> position before which it failed
    uses: dict[Value, int] = {}
    for op in prog.fn.ops:
        for v in op.operands:
            uses[v] = uses.get(v, 0) + 1
    for v in prog.fn.outputs:
        uses[v] = uses.get(v, 0) + 1
    i = 0
    while i < n - 1:
        loop = _loop_at(prog, hashes, nexts, i, failed_until, min_saved, uses)
        if loop is None:
            i += 1
            continue
        found.append(loop)
        i = loop.s + loop.p * loop.m
    return found


def _loop_at(prog: Program, hashes: _Hashes, nexts: tuple[list[int], ...], i: int,
             failed_until: dict[int, int], min_saved: int, uses: dict[Value, int]
             ) -> Steps | None:
    """The loop starting at position ``i``, if any: of the candidate periods, the one
    that would save the most ops and whose steps check (a longer step first: a loop in a
    loop is rolled as the outer loop, its body's inner loop by the body's own round)."""
    for _, p, m in sorted(_candidates(hashes, nexts, i, failed_until, min_saved),
                          reverse=True):
        st = Steps(prog, i, p, m)
        steps = st.check()
        if steps < 2:
            failed_until[p] = i + p
            continue
        if steps < m:  # its roles, without the step that failed
            st = Steps(prog, i, p, steps)
            st.check()
        if (steps - 1) * _work(prog, st) >= min_saved and \
                _writes_only_written(prog, st, uses) and _stacks_fit(prog, st):
            return st
        # steps that check but are not worth a loop: a later start in them is no better
        failed_until[p] = i + steps * p
    return None


def _candidates(hashes: _Hashes, nexts: tuple[list[int], ...], i: int,
                failed_until: dict[int, int], min_saved: int) -> set[tuple[int, int, int]]:
    """(ops saved, period, steps) of each period worth checking at ``i``: distances to
    the next equal signatures (or runs of signatures) over which the sequence repeats."""
    out = set()
    for nxt in nexts:
        j, tries = nxt[i], 0
        while j >= 0 and tries < MAX_TRIES and (j - i) * 2 <= hashes.n - i:
            p, tries = j - i, tries + 1
            if failed_until.get(p, -1) <= i:
                m = 1 + hashes.lce(i, j) // p
                if m >= 2 and (m - 1) * p >= min_saved:
                    out.add(((m - 1) * p, p, m))
            j = nxt[j]
    return out


def _writes_only_written(prog: Program, st: Steps, uses: dict[Value, int]) -> bool:
    """A written buffer's versions before the last step are read only by the next
    step's write (the buffer is made after the loop)."""
    for q in st.roles.written:
        for j in range(st.m - 1):
            if uses.get(prog.op(st.s + j * st.p + q).results[0], 0) != 1:
                return False
    return True


def _stacks_fit(prog: Program, st: Steps) -> bool:
    """The slices a step reads (hoisted) are a view of their array when stacked, or
    their stack is no larger than the array: rolling overlapping windows (``x[k:k+n]``
    for each ``k``) would copy the array once per step, where the unrolled ops fuse."""
    r = st.roles
    fed = {ref[0] for slot, ref in r.local.items()
           if slot[0] not in r.hoisted and ref[0] in r.hoisted}
    for q in fed:
        ops = [prog.op(st.s + j * st.p + q) for j in range(st.m)]
        if ops[0].name != "slice" or strided_view(ops) is not None:
            continue
        if st.m * _nbytes(ops[0].result) > _nbytes(ops[0].operands[0]):
            return False
    return True


def _nbytes(v: Value) -> int:
    return int(np.prod(v.type.shape, dtype=np.int64)) * v.type.dtype.itemsize


def _work(prog: Program, st: Steps) -> int:
    """The ops of a step that compute (not hoisted, not only moving data)."""
    return sum(q not in st.roles.hoisted and prog.op(st.s + q).name not in DATA_OPS
               for q in range(st.p))


def roll(fn: Function, ctx: PassContext | None = None) -> Function:
    """``fn`` with its repeated steps rolled into ``loop`` ops (``fn`` itself if none).

    Where ``fn`` writes into arrays, reads of what a write stored read the value written
    first (the ``writes`` pass, exact): a buffer filled step by step is then a chain of
    writes that rolls (``roll_steps.Steps._write``)."""
    ctx = ctx or PassContext()
    src = fn
    if any(op.name == "update_slice" for op in fn.ops):
        from .writes import writes

        fn = dce(writes(fn, ctx), ctx)
    rolled = fn
    for _ in range(MAX_ROUNDS):
        prog = make_program(rolled, _CalleeKeys(rolled), attr_key)
        loops = find_loops(prog, ctx.roll_min_saved)
        if not loops:
            break
        rolled = dce(build_rolled(prog, loops), ctx)
    if rolled is fn:
        return src
    return in_bodies(lambda body: roll(body, ctx), rolled)


def _apply(fn: Function, ctx: PassContext) -> Function:
    return roll(fn, ctx)


ROLL = Pass("roll", "fold repeated steps (a Python loop, traced unrolled) into loop ops",
            _apply)

__all__ = ["ROLL", "roll", "find_loops"]

