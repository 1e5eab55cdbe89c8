"""Building the rolled program: each checked loop (``roll_steps.Steps``) becomes the
ops before it, one ``loop`` op and its body, and reads of its results after it.

Around the loop, in the enclosing function:
- the constants of the loop's steps stay (a carried value's initial value may be one);
- hoisted positions' ops stay, one per step, and their results are a sequence;
- each sequence is stacked into one array: a strided slice when its values are slices
  of one array at evenly spaced starts (``xs[t]``), else a ``concatenate``;
- after the loop, a value of the last step is a carried value's final value (a value
  nothing in the loop reads is carried all the same, from a zero), and a value of an
  earlier step is that step's slice of a stacked step output.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from ..core import Function, Op, Value, make_op
from ..loops import loop_op
from .base import fresh_names, remap, resolve
from .roll_steps import Program, Ref, Slot, Steps

View = tuple[Value, tuple[int, ...], tuple[int, ...], tuple[int, ...], int]


def strided_view(ops: list[Op]) -> View | None:
    """(source, start, stop, step, axis) of the one slice whose entries along ``axis``
    are ``ops``' results, when ``ops`` are one-wide slices of one array at evenly spaced
    starts along that axis (``xs[t]``); else None (stacking them copies)."""
    if len(ops) < 2 or any(op.name != "slice" for op in ops):
        return None
    first = ops[0]
    src, start = first.operands[0], first.attrs["start"]
    d = [b - a for a, b in zip(start, ops[1].attrs["start"], strict=True)]
    axes = [a for a, x in enumerate(d) if x]
    if len(axes) != 1 or d[axes[0]] < 0 or first.result.shape[axes[0]] != 1:
        return None
    a, m = axes[0], len(ops)
    for j, op in enumerate(ops):
        want = tuple(s + j * x for s, x in zip(start, d, strict=True))
        if op.operands[0] is not src or op.attrs["start"] != want or \
                op.attrs["step"] != first.attrs["step"]:
            return None
    stop = list(first.attrs["stop"])
    stop[a] = start[a] + (m - 1) * d[a] + 1
    step = list(first.attrs["step"])
    step[a] = d[a]
    return src, tuple(start), tuple(stop), tuple(step), a


def build_rolled(prog: Program, loops: list[Steps]) -> Function:
    """``prog.fn`` with each of ``loops`` (left to right, not overlapping) rolled."""
    fn = prog.fn
    last_use = _last_uses(fn)
    ops: list[Op] = []
    subst: dict[Value, Value] = {}
    callees = dict(fn.callees)
    names = fresh_names("loop", set(fn.all_callees()))
    i = 0
    for st in loops:
        first = prog.seq[st.s]
        last = prog.seq[st.s + st.m * st.p - 1]
        ops.extend(remap(op, subst) for op in fn.ops[i:first])
        body = _Loop(prog, st, subst, next(names)).build(fn.ops[first:last + 1], last_use,
                                                        last, ops)
        callees[body.name] = body
        i = last + 1
    ops.extend(remap(op, subst) for op in fn.ops[i:])
    return fn.replace(ops=ops, outputs=tuple(resolve(v, subst) for v in fn.outputs),
                      callees=callees)


def _last_uses(fn: Function) -> dict[Value, int]:
    """Each value's last reader (``len(fn.ops)`` for an output)."""
    last: dict[Value, int] = {}
    for i, op in enumerate(fn.ops):
        for v in op.operands:
            last[v] = i
    for v in fn.outputs:
        last[v] = len(fn.ops)
    return last


@dataclass
class _Body:
    """The body under construction: its inputs by role, and each position's values."""

    carry_in: dict[Ref, Value] = field(default_factory=dict)
    seq_in: dict[tuple[object, ...], tuple[Value, list[Value]]] = field(default_factory=dict)
    inv_in: dict[Value, Value] = field(default_factory=dict)
    consts: dict[object, Value] = field(default_factory=dict)
    env: dict[Ref, Value] = field(default_factory=dict)
    ops: list[Op] = field(default_factory=list)


class _Loop:
    """One loop: its body, and the ops around it in the enclosing function."""

    def __init__(self, prog: Program, st: Steps, subst: dict[Value, Value],
                 name: str) -> None:
        self.prog, self.st, self.subst, self.name = prog, st, subst, name
        self.r = st.roles
        self.b = _Body()
        self.outer: list[Op] = []
        self.made: dict[Value, Op] = {}  # result -> op, for the ops in ``outer``

    def value(self, j: int, ref: Ref) -> Value:
        """Result ``ref`` of step ``j``'s op, in the enclosing function."""
        v = self.prog.op(self.st.s + j * self.st.p + ref[0]).results[ref[1]]
        return resolve(v, self.subst)

    def build(self, region: list[Op], last_use: dict[Value, int], last: int,
              ops: list[Op]) -> Function:
        st = self.st
        for op in region:
            if op.name == "const":
                self._add(op)
        for j in range(st.m):
            for q in sorted(self.r.hoisted):
                self._add(remap(self.prog.op(st.s + j * st.p + q), self.subst))
        for q in range(st.p):
            if q not in self.r.hoisted and q not in self.r.written:
                self._copy(q)
        writes = [self._operand((q, 1), self.prog.op(st.s + q).operands[1])
                  for q in sorted(self.r.written)]
        finals, ys = self._exports(last_use, last)
        carries = [ref for ref in dict.fromkeys([*self.r.carry.values(), *finals])
                   if ref[0] not in self.r.written]
        body = self._function(carries, ys, writes)
        operands = [self._init(ref) for ref in carries]
        operands += [self._stack(vals) for _, vals in self.b.seq_in.values()]
        operands += list(self.b.inv_in)
        loop = loop_op(body, operands, length=st.m, carries=len(carries),
                       stacked=len(self.b.seq_in), loc=_loc(self.b.ops))
        self._add(loop)
        self._read_results(loop, carries, ys, finals, last_use, last)
        self._read_writes(loop.results[len(loop.results) - len(writes):])
        ops.extend(self.outer)
        return body

    # -- the body ---------------------------------------------------------------------
    def _copy(self, q: int) -> None:
        op = self.prog.op(self.st.s + q)
        operands = [self._operand((q, k), v) for k, v in enumerate(op.operands)]
        new = op.replace(operands=operands, results=[Value(r.type) for r in op.results])
        self.b.ops.append(new)
        for k, r in enumerate(new.results):
            self.b.env[(q, k)] = r

    def _operand(self, slot: Slot, v: Value) -> Value:
        r = self.r
        if slot in r.local:
            ref = r.local[slot]
            if ref[0] in r.hoisted:
                return self._seq([self.value(j, ref) for j in range(self.st.m)])
            return self.b.env[ref]
        if slot in r.carry:
            ref = r.carry[slot]
            if ref not in self.b.carry_in:
                self.b.carry_in[ref] = Value(v.type)
            return self.b.carry_in[ref]
        vals = [resolve(x, self.subst) for x in r.outer[slot]]
        keys = [self.prog.outer_key(x) for x in r.outer[slot]]
        if any(k != keys[0] for k in keys):
            return self._seq(vals)
        if keys[0][0] == "const":
            return self._const(keys[0], r.outer[slot][0])
        if vals[0] not in self.b.inv_in:
            self.b.inv_in[vals[0]] = Value(vals[0].type)
        return self.b.inv_in[vals[0]]

    def _seq(self, vals: list[Value]) -> Value:
        key = tuple(self.prog.outer_key(v) for v in vals)
        if key not in self.b.seq_in:
            self.b.seq_in[key] = (Value(vals[0].type), vals)
        return self.b.seq_in[key][0]

    def _const(self, key: tuple[object, ...], v: Value) -> Value:
        if key not in self.b.consts:
            op = self.prog.fn.ops[self.prog.const_at[v]]
            new = op.replace(results=[Value(v.type)])
            self.b.ops.append(new)
            self.b.consts[key] = new.result
        return self.b.consts[key]

    def _function(self, carries: list[Ref], ys: list[Ref], writes: list[Value]) -> Function:
        b = self.b
        for ref in carries:
            if ref not in b.carry_in:  # carried out only: nothing in the body reads it
                b.carry_in[ref] = Value(b.env[ref].type)
        labels = self._input_labels(carries)
        inputs = [b.carry_in[ref] for ref in carries]
        inputs += [v for v, _ in b.seq_in.values()] + list(b.inv_in.values())
        outputs = [b.env[ref] for ref in carries] + [b.env[ref] for ref in ys] + writes
        consts = [op for op in b.ops if op.name == "const"]
        ops = consts + [op for op in b.ops if op.name != "const"]
        return Function(self.name, inputs, ops, outputs, labels, None,
                        self._callees(ops))

    def _input_labels(self, carries: list[Ref]) -> list[str | None]:
        fn = self.prog.fn
        label = dict(zip(fn.inputs, fn.input_labels, strict=True))
        out: list[str | None] = [f"carry {k}" for k in range(len(carries))]
        out += [self._step_label(vals, label, k)
                for k, (_, vals) in enumerate(self.b.seq_in.values())]
        out += [label.get(v) for v in self.b.inv_in]
        return out

    def _step_label(self, vals: list[Value], label: dict[Value, str | None], k: int) -> str:
        """``xs[i]`` for the steps' slices of an input ``xs``, ``step k`` otherwise."""
        op = self._producer(vals[0])
        src = op.operands[0] if op is not None and op.name == "slice" else None
        name = label.get(src) if src is not None else None
        return f"{name}[i]" if name else f"step {k}"

    def _callees(self, ops: list[Op]) -> dict[str, Function]:
        have = self.prog.fn.all_callees()
        return {op.attrs["callee"]: have[op.attrs["callee"]] for op in ops
                if "callee" in op.attrs}

    # -- around the loop ---------------------------------------------------------------
    def _init(self, ref: Ref) -> Value:
        init = self.r.init.get(ref)
        if init is not None:
            return resolve(init, self.subst)
        t = self.b.env[ref].type
        zero = make_op("const", [], {"value": np.broadcast_to(np.zeros((), t.dtype), t.shape)})
        return self._add(zero).result

    def _stack(self, vals: list[Value]) -> Value:
        """One array ``[m, *shape]`` whose entry ``j`` is ``vals[j]``."""
        view = self._strided(vals)
        if view is not None:
            return view
        t = vals[0].type
        parts = [self._emit("reshape", [v], shape=(1,) + t.shape) for v in vals]
        return self._emit("concatenate", parts, axis=0)

    def _strided(self, vals: list[Value]) -> Value | None:
        """``vals`` as a strided view, when they are one-wide slices of one array at
        evenly spaced starts along one axis."""
        found = [self._producer(v) for v in vals]
        ops = [op for op in found if op is not None]
        view = strided_view(ops) if len(ops) == len(vals) else None
        if view is None:
            return None
        src, start, stop, step, a = view
        v = src
        if stop != src.shape or any(start) or any(x != 1 for x in step):
            v = self._emit("slice", [src], start=start, stop=stop, step=step)
        if a:
            v = self._emit("transpose", [v], perm=(a,) + tuple(k for k in range(v.ndim)
                                                                if k != a))
        return self._emit("reshape", [v], shape=(len(vals),) + vals[0].shape)

    def _producer(self, v: Value) -> Op | None:
        if v in self.made:
            return self.made[v]
        return self.prog.producer(v)

    def _add(self, op: Op) -> Op:
        self.outer.append(op)
        self.made.update((r, op) for r in op.results)
        return op

    def _emit(self, name: str, operands: list[Value], **attrs: object) -> Value:
        return self._add(make_op(name, operands, attrs, _loc(self.b.ops))).result

    def _exports(self, last_use: dict[Value, int], last: int) -> tuple[list[Ref], list[Ref]]:
        """The positions whose last-step value (``finals``) or earlier steps' values
        (``ys``) something after the loop reads."""
        finals: dict[Ref, None] = {}
        ys: dict[Ref, None] = {}
        st = self.st
        for j in range(st.m):
            for q in range(st.p):
                if q in self.r.hoisted or q in self.r.written:
                    continue
                for k, v in enumerate(self.prog.op(st.s + j * st.p + q).results):
                    if last_use.get(v, -1) > last:
                        (finals if j == st.m - 1 else ys)[(q, k)] = None
        return list(finals), list(ys)

    def _read_results(self, loop: Op, carries: list[Ref], ys: list[Ref], finals: list[Ref],
                      last_use: dict[Value, int], last: int) -> None:
        st = self.st
        for ref in finals:
            v = self.prog.op(st.s + (st.m - 1) * st.p + ref[0]).results[ref[1]]
            self.subst[v] = loop.results[carries.index(ref)]
        for n, ref in enumerate(ys):
            stacked = loop.results[len(carries) + n]
            for j in range(st.m - 1):
                v = self.prog.op(st.s + j * st.p + ref[0]).results[ref[1]]
                if last_use.get(v, -1) > last:
                    self.subst[v] = self._step_slice(stacked, j)

    def _read_writes(self, stacks: tuple[Value, ...]) -> None:
        """Each written buffer after the loop: its initial value with every step's
        update written at once (the stacked updates moved to the written axis)."""
        st = self.st
        for q, u in zip(sorted(self.r.written), stacks, strict=True):
            a, stride = self.r.written[q]
            first = self.prog.op(st.s + q)
            shape = u.shape[1:]
            flat = self._emit("reshape", [u], shape=(st.m,) + shape[:a] + shape[a + 1:])
            perm = tuple(range(1, a + 1)) + (0,) + tuple(range(a + 1, len(shape)))
            moved = self._emit("transpose", [flat], perm=perm) if a else flat
            start, step = first.attrs["start"], list(first.attrs["step"])
            stop = list(first.attrs["stop"])
            stop[a] = start[a] + (st.m - 1) * stride + 1
            step[a] = stride
            init = resolve(self.r.init[(q, 0)], self.subst)
            final = self._emit("update_slice", [init, moved], start=start, stop=tuple(stop),
                               step=tuple(step))
            last = self.prog.op(st.s + (st.m - 1) * st.p + q).results[0]
            self.subst[last] = final

    def _step_slice(self, stacked: Value, j: int) -> Value:
        shape = stacked.shape
        part = self._emit("slice", [stacked], start=(j,) + (0,) * (len(shape) - 1),
                          stop=(j + 1,) + shape[1:], step=(1,) * len(shape))
        return self._emit("reshape", [part], shape=shape[1:])


def _loc(ops: list[Op]) -> str | None:
    return next((op.loc for op in ops if op.loc), None)

