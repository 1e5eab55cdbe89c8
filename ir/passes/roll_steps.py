"""What ``roll`` knows about a candidate loop: ``p`` ops repeated as consecutive steps,
checked step by step (``Steps.check``) into the roles of every operand.

The ops are numbered in the *sequence* of the function's ops without constants (a
``const`` has no operands: it is a value like an input, wherever it stands). Step ``j``
is sequence positions ``s + j*p .. s + (j+1)*p``; ``q`` is a position within a step.
Operand ``k`` of the op at ``q`` (a *slot*) is, in every step:

- ``local``: the result of an earlier op of the same step (the same ``q`` in every step);
- ``carry``: the result of an op of the previous step; in step 0 a value from before the
  loop, the carried value's initial value (every slot reading that carry agrees on it);
- ``outer``: a value from before the loop: ``invariant`` if it is the same value in
  every step (constants compared by value), else a *sequence* stacked into one array.

A position whose op differs between steps only in attributes that ``VARYING`` lists
(the start of ``xs[t]``'s slice) is *hoisted*: its ops stay outside the loop, one per
step, and their results are a sequence; its operands must be outer values or results of
hoisted positions. An ``update_slice`` of its own previous result at a start moving by
a fixed stride (a buffer filled step by step) is *written*: the values written are
stacked, and the buffer is made after the loop (nothing else in the loop may read it).
Anything else that differs between steps (other attributes, a value read from two steps
back, a carry without one initial value) ends the loop before that step. ``check``
returns how many steps hold.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ..core import Function, Op, Value

Slot = tuple[int, int]  # (position, operand number)
Ref = tuple[int, int]  # (position, result number)

# Attributes that may differ between the steps of a hoisted position (op name -> names).
VARYING: dict[str, tuple[str, ...]] = {"slice": ("start", "stop"),
                                        "update_slice": ("start", "stop")}


@dataclass
class Program:
    """The function being rolled, indexed once."""

    fn: Function
    seq: list[int]  # op indices of the non-constant ops
    pos_of: dict[Value, tuple[int, int]]  # such an op's result -> (sequence position, number)
    const_at: dict[Value, int]  # a constant's value -> its op's index
    loose: list[int]  # per sequence entry: its signature without VARYING attributes
    strict: list[tuple[Any, ...]]  # per sequence entry: the rest of its attributes
    const_key: dict[Value, tuple[Any, ...]]  # a constant's value as a key

    def op(self, pos: int) -> Op:
        return self.fn.ops[self.seq[pos]]

    def producer(self, v: Value) -> Op | None:
        """The op making ``v`` (None for an input)."""
        at = self.pos_of.get(v)
        if at is not None:
            return self.op(at[0])
        i = self.const_at.get(v)
        return None if i is None else self.fn.ops[i]

    def outer_key(self, v: Value) -> tuple[Any, ...]:
        """Equal for the same value, and for constants of equal value."""
        k = self.const_key.get(v)
        return ("value", id(v)) if k is None else k


@dataclass
class Roles:
    """The roles found so far; ``keys[slot][j]``: the outer value of step ``j``."""

    local: dict[Slot, Ref] = field(default_factory=dict)
    carry: dict[Slot, Ref] = field(default_factory=dict)
    outer: dict[Slot, list[Value]] = field(default_factory=dict)
    init: dict[Ref, Value] = field(default_factory=dict)
    hoisted: set[int] = field(default_factory=set)
    # written buffers: position of an update_slice -> (axis, stride) of its moving start
    written: dict[int, tuple[int, int]] = field(default_factory=dict)


class Steps:
    """Checks the steps of a candidate loop at sequence position ``s`` with ``p`` ops per
    step, at most ``m`` steps."""

    def __init__(self, prog: Program, s: int, p: int, m: int) -> None:
        self.prog, self.s, self.p, self.m = prog, s, p, m
        self.roles = Roles()

    def step_of(self, v: Value) -> tuple[int, Ref] | None:
        """(step, (position, result)) of a value made inside the candidate, else None."""
        at = self.prog.pos_of.get(v)
        if at is None or not self.s <= at[0] < self.s + self.m * self.p:
            return None
        j, q = divmod(at[0] - self.s, self.p)
        return j, (q, at[1])

    def check(self) -> int:
        """The number of steps, from the first, whose operands keep one role (the roles
        are those of these steps only when all ``m`` hold: else check again with ``m``
        set to what this returns)."""
        for j in range(self.m):
            for q in range(self.p):
                if not self._check_op(j, q):
                    return j
        return self.m

    def _check_op(self, j: int, q: int) -> bool:
        prog = self.prog
        pos = self.s + j * self.p + q
        op = prog.op(pos)
        for k, v in enumerate(op.operands):
            if not self._check_slot(j, (q, k), v):
                return False
        if j and prog.strict[pos] != prog.strict[self.s + q]:
            return self._hoist(q) or self._write(j, q)
        return q not in self.roles.written or self._write(j, q)

    def _check_slot(self, j: int, slot: Slot, v: Value) -> bool:
        r = self.roles
        at = self.step_of(v)
        if j == 0:
            if at is None:
                r.outer[slot] = [v]
            else:
                r.local[slot] = at[1]
            return at is None or at[0] == 0
        if slot in r.local:
            return at is not None and at == (j, r.local[slot])
        if slot in r.carry:
            return at is not None and at == (j - 1, r.carry[slot])
        if at is None:
            r.outer[slot].append(v)
            return True
        return j == 1 and at[0] == 0 and self._make_carry(slot, at[1])

    def _make_carry(self, slot: Slot, ref: Ref) -> bool:
        """Slot ``slot`` read an outer value in step 0 and ``ref`` of the previous step in
        step 1: a carry, if its initial value agrees with other slots reading it."""
        r = self.roles
        if ref[0] in r.hoisted or slot[0] in r.hoisted:
            return False
        init = r.outer.pop(slot)[0]
        have = r.init.get(ref)
        if have is not None and self.prog.outer_key(have) != self.prog.outer_key(init):
            return False
        r.init[ref] = init
        r.carry[slot] = ref
        return True

    def _hoist(self, q: int) -> bool:
        """Make position ``q`` hoisted (its attributes differ between steps), if it can
        be: its op is one ``VARYING`` allows and it reads outer values or results of
        hoisted positions only."""
        r = self.roles
        if q in r.hoisted:
            return True
        op = self.prog.op(self.s + q)
        if op.name not in VARYING:
            return False
        for k in range(len(op.operands)):
            slot = (q, k)
            if slot in r.carry or (slot in r.local and r.local[slot][0] not in r.hoisted):
                return False
        if any(ref[0] == q for ref in r.carry.values()):
            return False
        r.hoisted.add(q)
        return True

    def _write(self, j: int, q: int) -> bool:
        """Position ``q`` writes a buffer step by step (``states[:, t + 1] = h``): an
        ``update_slice`` of its own previous result, one wide along one axis, at a start
        that moves by the same stride every step. Its buffer is carried only to be
        written: the loop stacks the written values, and one write of all of them after
        the loop makes the buffer (``Roles.written``)."""
        r = self.roles
        op0, op = self.prog.op(self.s + q), self.prog.op(self.s + j * self.p + q)
        if op.name != "update_slice" or r.carry.get((q, 0)) != (q, 0):
            return False
        d = [b - a for a, b in zip(op0.attrs["start"], op.attrs["start"], strict=True)]
        axes = [a for a, x in enumerate(d) if x]
        if j == 0 or len(axes) != 1 or d[axes[0]] % j or op.operands[1].shape[axes[0]] != 1:
            return False
        a, stride = axes[0], d[axes[0]] // j
        if stride <= 0 or r.written.setdefault(q, (a, stride)) != (a, stride) or \
                op.attrs["step"] != op0.attrs["step"]:
            return False
        return all(ref != (q, 0) or slot == (q, 0) for slot, ref in r.carry.items()) and \
            (q, 0) not in r.local.values()


_PLAIN = (int, bool, str, tuple, np.dtype)  # attribute values that are their own key


def make_program(fn: Function, callee_key: Callable[[str], Hashable],
                 attr_key: Callable[[Any], Hashable]) -> Program:
    """Index ``fn`` for rolling: sequence, producers, signatures."""
    prog = Program(fn, [], {}, {}, [], [], {})
    ids: dict[Hashable, int] = {}
    for i, op in enumerate(fn.ops):
        if op.name == "const":
            r = op.results[0]
            prog.const_at[r] = i
            prog.const_key[r] = ("const", attr_key(op.attrs["value"]), r.type)
            continue
        k = len(prog.seq)
        prog.seq.append(i)
        for n, r in enumerate(op.results):
            prog.pos_of[r] = (k, n)
        fixed, varying = _attr_keys(op, callee_key, attr_key)
        sig = (op.name, fixed, *[v.type for v in op.operands], None,
               *[r.type for r in op.results])
        prog.loose.append(ids.setdefault(sig, len(ids)))
        prog.strict.append(varying)
    return prog


def _attr_keys(op: Op, callee_key: Callable[[str], Hashable],
               attr_key: Callable[[Any], Hashable]) -> tuple[tuple[Any, ...], tuple[Any, ...]]:
    """(the attributes a signature holds, those ``VARYING`` lets differ between steps)."""
    if not op.attrs:
        return (), ()
    vary = VARYING.get(op.name, ())
    fixed: list[tuple[str, Any]] = []
    varying: list[tuple[str, Any]] = []
    for a, v in sorted(op.attrs.items()):
        key = callee_key(v) if a == "callee" else v if type(v) in _PLAIN else attr_key(v)
        (varying if a in vary else fixed).append((a, key))
    return tuple(fixed), tuple(varying)
