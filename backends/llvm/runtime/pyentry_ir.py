"""The native dispatcher of ``pyentry.py``, generated as LLVM IR: a loop over a plan's
ops (a ``switch`` on each opcode), with the CPython calling convention ``METH_FASTCALL``:
``ptr yota_pyentry(ptr self, ptr *args, i64 nargs)``."""

from __future__ import annotations

from collections.abc import Callable

import llvmlite.ir as ir

from ..types import F32, F64, I1, I8, I32, I64, PTR, VOID, i64
from .pyabi import (
    ARRAY,
    ARRAY_DESCR,
    BYTES_DATA,
    CALL,
    CONST,
    DICT,
    DICT_ITEMS,
    EQ,
    EXACT_ARGS,
    FLOAT,
    FLOAT_VALUE,
    GET,
    HEADER,
    INCR,
    IS,
    ITEM_L,
    ITEM_T,
    LIST,
    LIST_ITEMS,
    MAX_ARGS,
    NAME,
    NEW_OBJECT,
    NOT_SET,
    NP_API,
    OB_SIZE,
    OB_TYPE,
    OUT_CALL,
    OUT_NEW,
    OUT_SCRATCH,
    PADDED_ARGS,
    PUSH_FLOAT,
    PUSH_OBJ,
    PUSH_OUT,
    PUSH_SCALAR,
    PY_API,
    REFERENT,
    RETURN,
    RUN,
    SEQ,
    SETATTR,
    TUPLE,
    TUPLE_ITEMS,
    WEAKREF_OBJECT,
)
from .target import ARRAY_ABI

_TYPES = {"p": PTR, "i": I32, "l": I64, "d": F64, "v": VOID}


def _signature(sig: str) -> ir.FunctionType:
    ret, _, args = sig.partition(" ")
    return ir.FunctionType(_TYPES[ret], [_TYPES[c] for c in args])


def module(triple: str) -> ir.Module:
    """The dispatcher's LLVM module: ``ptr yota_pyentry(ptr self, ptr args)``."""
    m = ir.Module(name=NAME)
    m.triple = triple
    _Gen(m).build()
    return m


class _Gen:
    """Generates the dispatcher: a loop over the plan's ops (a ``switch`` on each)."""

    def __init__(self, m: ir.Module) -> None:
        self.m = m
        self.api = {n: ir.Function(m, _signature(sig), n) for n, sig in PY_API.items()}
        for n, (_, sig) in NP_API.items():
            self.api[n] = ir.Function(m, _signature(sig), n)
        self.f = ir.Function(m, ir.FunctionType(PTR, [PTR, PTR, I64]), NAME)
        self.vars = ir.IRBuilder(self.f.append_basic_block("entry"))  # fixed-size allocas
        self.start = self.f.append_basic_block("start")
        self.b = ir.IRBuilder(self.start)

    def var(self, ty: ir.Type) -> ir.Value:
        """A local variable (allocated once, in the entry block: promoted to registers)."""
        return self.vars.alloca(ty)

    # helpers
    def call(self, name: str, *args: ir.Value) -> ir.Value:
        return self.b.call(self.api[name], list(args))

    def at(self, base: ir.Value, offset: ir.Value | int) -> ir.Value:
        off = i64(offset) if isinstance(offset, int) else offset
        return self.b.gep(base, [off], source_etype=I8)

    def load(self, base: ir.Value, offset: ir.Value | int, ty: ir.Type = PTR) -> ir.Value:
        return self.b.load(self.at(base, offset), typ=ty)

    def elem(self, base: ir.Value, index: ir.Value, ty: ir.Type = PTR) -> ir.Value:
        return self.b.gep(base, [index], source_etype=ty)

    def word(self, k: int, ty: ir.Type = I64) -> ir.Value:
        """Operand word ``k`` of the current op (0: the opcode)."""
        pc = self.b.load(self.pc, typ=I64)
        w = self.b.load(self.elem(self.plan, self.b.add(pc, i64(k)), I64), typ=I64)
        return self.b.inttoptr(w, PTR) if ty is PTR else w

    def reg(self, k: int) -> ir.Value:
        return self.b.load(self.elem(self.regs, self.word(k)), typ=PTR)

    def advance(self, n: ir.Value | int) -> None:
        pc = self.b.load(self.pc, typ=I64)
        self.b.store(self.b.add(pc, i64(n) if isinstance(n, int) else n), self.pc)

    def next_or_fail(self, ok: ir.Value) -> None:
        self.b.cbranch(ok, self.loop, self.fail)

    def null(self, v: ir.Value) -> ir.Value:
        return self.b.icmp_unsigned("==", v, ir.Constant(PTR, None))

    def push_value(self, v: ir.Value) -> None:
        sp = self.b.load(self.sp, typ=I64)
        self.b.store(v, self.elem(self.stack, sp))
        self.b.store(self.b.add(sp, i64(1)), self.sp)

    def set_out(self, slot: ir.Value, arr: ir.Value) -> None:
        self.b.store(arr, self.elem(self.objs, slot))
        self.b.store(self.load(arr, ARRAY_ABI["data"]), self.elem(self.slots, slot))

    def block(self, name: str) -> ir.Block:
        return self.f.append_basic_block(name)

    def for_range(self, n: ir.Value, body: Callable[[ir.Value], None], name: str) -> None:
        """``for k in range(n): body(k)``, continuing after the loop."""
        b = self.b
        k = self.var(I64)
        b.store(i64(0), k)
        head, inner, done = self.block(f"{name}.head"), self.block(name), self.block(f"{name}.done")
        b.branch(head)
        b.position_at_end(head)
        kv = b.load(k, typ=I64)
        b.cbranch(b.icmp_signed("<", kv, n), inner, done)
        b.position_at_end(inner)
        body(kv)
        b.store(b.add(b.load(k, typ=I64), i64(1)), k)
        b.branch(head)
        b.position_at_end(done)

    # the function
    def build(self) -> None:
        b = self.b
        self_, args, nargs = self.f.args
        plan_obj = self.load(self_, TUPLE_ITEMS)
        self.plan = self.at(plan_obj, BYTES_DATA)
        head = lambda k: b.load(self.elem(self.plan, i64(k), I64), typ=I64)  # noqa: E731
        nslots, nregs, depth = head(0), head(1), head(2)
        self.none = b.inttoptr(head(3), PTR)
        arity_ok, wrong = self.block("arity.ok"), self.block("arity.wrong")
        b.cbranch(b.icmp_signed("==", b.and_(nargs, i64(0xFFFFFFFF)), head(4)), arity_ok, wrong)
        b.position_at_end(wrong)  # (nothing made yet)
        self.call("Py_IncRef", self.none)
        b.ret(self.none)
        b.position_at_end(arity_ok)
        self.slots = b.alloca(PTR, i64(MAX_ARGS))
        self.objs = b.alloca(PTR, nslots)
        self.regs = b.alloca(PTR, nregs)
        self.stack = b.alloca(PTR, b.add(depth, i64(1)))
        scratch = b.alloca(ir.ArrayType(I64, 2), nslots)
        scratch.align = 64
        self.scratch = b.inttoptr(b.ptrtoint(scratch, I64), PTR)  # (an untyped pointer)
        self.pc, self.sp = self.var(I64), self.var(I64)
        b.store(i64(HEADER), self.pc)
        b.store(i64(0), self.sp)
        self.for_range(head(4), lambda k: b.store(b.load(self.elem(args, k), typ=PTR),
                                                  self.elem(self.regs, k)), "args")
        self.for_range(nslots, lambda k: b.store(ir.Constant(PTR, None),
                                                 self.elem(self.objs, k)), "clear")
        self.loop, self.fail = self.block("loop"), self.block("fail")
        b.branch(self.loop)
        b.position_at_end(self.loop)
        op = self.word(0)
        sw = b.switch(op, self.fail)
        for code, gen in [(SEQ, self.op_seq), (ITEM_T, self.op_item_t),
                          (ITEM_L, self.op_item_l), (ARRAY, self.op_array), (IS, self.op_is),
                          (EQ, self.op_eq), (OUT_NEW, self.op_out_new),
                          (OUT_CALL, self.op_out_call), (OUT_SCRATCH, self.op_out_scratch),
                          (RUN, self.op_run), (PUSH_OUT, self.op_push_out),
                          (PUSH_FLOAT, self.op_push_float), (PUSH_SCALAR, self.op_push_scalar),
                          (PUSH_OBJ, self.op_push_obj), (LIST, self.op_list),
                          (TUPLE, self.op_tuple), (DICT, self.op_dict), (CALL, self.op_call),
                          (INCR, self.op_incr), (SETATTR, self.op_setattr),
                          (RETURN, self.op_return), (NEW_OBJECT, self.op_new_object),
                          (REFERENT, self.op_referent), (NOT_SET, self.op_not_set),
                          (DICT_ITEMS, self.op_dict_items), (FLOAT, self.op_float),
                          (CONST, self.op_const), (GET, self.op_get)]:
            blk = self.block(gen.__name__)
            sw.add_case(i64(code), blk)
            b.position_at_end(blk)
            gen()
        b.position_at_end(self.fail)
        self.cleanup(nslots)
        self.call("PyErr_Clear")
        self.call("Py_IncRef", self.none)
        b.ret(self.none)
        self.vars.branch(self.start)

    def cleanup(self, nslots: ir.Value) -> None:
        """Release the outputs not handed on and everything on the stack."""
        b = self.b

        def drop(p: ir.Value) -> None:
            v = b.load(p, typ=PTR)
            some, after = self.block("drop"), self.block("dropped")
            b.cbranch(self.null(v), after, some)
            b.position_at_end(some)
            self.call("Py_DecRef", v)
            b.branch(after)
            b.position_at_end(after)
        self.for_range(nslots, lambda k: drop(self.elem(self.objs, k)), "objs")
        self.for_range(b.load(self.sp, typ=I64), lambda k: drop(self.elem(self.stack, k)),
                       "stack")

    # argument checks
    def op_seq(self) -> None:  # SEQ reg, type, n
        b = self.b
        o = self.reg(1)
        ok = b.and_(b.icmp_unsigned("==", self.load(o, OB_TYPE), self.word(2, PTR)),
                    b.icmp_signed("==", self.load(o, OB_SIZE, I64), self.word(3)))
        self.advance(4)
        self.next_or_fail(ok)

    def op_dict_items(self) -> None:  # DICT_ITEMS reg, n, first register, key1, ..., keyn
        """The dict's items in order (after SEQ checked its type and size): key ``k``
        equal to ``key_k``, its value into register ``first + k``."""
        b = self.b
        d, n, first = self.reg(1), self.word(2), self.word(3)
        pc = b.load(self.pc, typ=I64)
        pos, key, val = self.var(I64), self.var(PTR), self.var(PTR)
        same = self.var(I1)
        b.store(i64(0), pos)
        b.store(ir.Constant(I1, 1), same)

        def item(k: ir.Value) -> None:
            more = self.call("PyDict_Next", d, pos, key, val)
            want = b.inttoptr(b.load(self.elem(self.plan, b.add(pc, b.add(k, i64(4))), I64),
                                     typ=I64), PTR)
            got = b.load(key, typ=PTR)
            ok = b.and_(b.load(same, typ=I1), b.icmp_signed("!=", more, ir.Constant(I32, 0)))
            with b.if_then(ok):
                eq = self.call("PyObject_RichCompareBool", got, want, ir.Constant(I32, 2))
                typed = b.icmp_unsigned("==", self.load(got, OB_TYPE), self.load(want, OB_TYPE))
                b.store(b.and_(typed, b.icmp_signed("==", eq, ir.Constant(I32, 1))), same)
            b.store(b.and_(b.load(same, typ=I1), ok), same)
            b.store(b.load(val, typ=PTR), self.elem(self.regs, b.add(first, k)))
        self.for_range(n, item, "dict_item")
        self.advance(b.add(n, i64(4)))
        ok = b.load(same, typ=I1)
        cleared = self.block("dict_items.cleared")
        b.cbranch(ok, self.loop, cleared)
        b.position_at_end(cleared)  # (a comparison may have raised)
        self.call("PyErr_Clear")
        b.branch(self.fail)

    def op_float(self) -> None:  # FLOAT reg, float type, slot, is_f32: a Python float input
        b = self.b
        o = self.reg(1)
        typed = self.block("float.typed")
        b.cbranch(b.icmp_unsigned("==", self.load(o, OB_TYPE), self.word(2, PTR)), typed,
                  self.fail)
        b.position_at_end(typed)
        slot = self.word(3)
        p = self.at(self.scratch, b.mul(slot, i64(16)))
        v = self.load(o, FLOAT_VALUE, F64)
        with b.if_else(b.icmp_signed("!=", self.word(4), i64(0))) as (f32, f64):
            with f32:
                b.store(b.fptrunc(v, F32), p)
            with f64:
                b.store(v, p)
        b.store(p, self.elem(self.slots, slot))
        self.advance(5)
        b.branch(self.loop)

    def op_const(self) -> None:  # CONST dst, obj: an object of the plan into a register
        self.b.store(self.word(2, PTR), self.elem(self.regs, self.word(1)))
        self.advance(3)
        self.b.branch(self.loop)

    def op_get(self) -> None:  # GET dst, src, key, kind (0 attr, 1 item, 2 cell), hold slot
        """``getattr(src, key)``, ``src[key]`` or a cell's contents into register ``dst``,
        the new reference held in slot ``hold`` (released with the outputs not handed
        on): what a function reads from outside its arguments, checked or passed."""
        b = self.b
        o, key, kind = self.reg(2), self.word(3, PTR), self.word(4)
        out = self.var(PTR)
        with b.if_else(b.icmp_signed("==", kind, i64(0))) as (attr, other):
            with attr:
                b.store(self.call("PyObject_GetAttr", o, key), out)
            with other:
                with b.if_else(b.icmp_signed("==", kind, i64(1))) as (item, cell):
                    with item:
                        b.store(self.call("PyObject_GetItem", o, key), out)
                    with cell:
                        b.store(self.call("PyCell_Get", o), out)
        r = b.load(out, typ=PTR)
        got = self.block("get.got")
        b.cbranch(self.null(r), self.fail, got)
        b.position_at_end(got)
        b.store(r, self.elem(self.objs, self.word(5)))
        b.store(r, self.elem(self.regs, self.word(1)))
        self.advance(6)
        b.branch(self.loop)

    def _item(self, items: ir.Value) -> None:
        self.b.store(self.b.load(self.elem(items, self.word(3)), typ=PTR),
                     self.elem(self.regs, self.word(1)))
        self.advance(4)
        self.b.branch(self.loop)

    def op_item_t(self) -> None:  # ITEM_T dst, src, i
        self._item(self.at(self.reg(2), TUPLE_ITEMS))

    def op_item_l(self) -> None:  # ITEM_L dst, src, i
        self._item(self.load(self.reg(2), LIST_ITEMS))

    def op_array(self) -> None:  # ARRAY reg, ndarray type, descr, nd, slot, dims...
        b = self.b
        o = self.reg(1)
        nd = self.word(4)
        need = ir.Constant(I32, ARRAY_ABI["need"])
        flags = self.load(o, ARRAY_ABI["flags"], I32)
        ok = b.and_(b.icmp_unsigned("==", self.load(o, OB_TYPE), self.word(2, PTR)),
                    b.icmp_unsigned("==", self.load(o, ARRAY_DESCR), self.word(3, PTR)))
        ok = b.and_(ok, b.icmp_signed("==", b.sext(self.load(o, ARRAY_ABI["nd"], I32), I64),
                                      nd))
        ok = b.and_(ok, b.icmp_unsigned("==", b.and_(flags, need), need))
        same = self.var(I1)
        b.store(ok, same)
        dims_ok, bad = self.block("array.dims"), self.fail
        b.cbranch(ok, dims_ok, bad)
        b.position_at_end(dims_ok)
        dims = self.load(o, ARRAY_ABI["dims"])
        pc = b.load(self.pc, typ=I64)

        def check(k: ir.Value) -> None:
            want = b.load(self.elem(self.plan, b.add(pc, b.add(k, i64(6))), I64), typ=I64)
            got = b.load(self.elem(dims, k, I64), typ=I64)
            b.store(b.and_(b.load(same, typ=I1), b.icmp_signed("==", got, want)), same)
        self.for_range(nd, check, "dim")
        self.b.store(self.load(o, ARRAY_ABI["data"]), self.elem(self.slots, self.word(5)))
        self.advance(b.add(nd, i64(6)))
        self.next_or_fail(b.load(same, typ=I1))

    def op_is(self) -> None:  # IS reg, obj
        ok = self.b.icmp_unsigned("==", self.reg(1), self.word(2, PTR))
        self.advance(3)
        self.next_or_fail(ok)

    def op_referent(self) -> None:  # REFERENT reg, weakref: the weakref refers to reg
        ok = self.b.icmp_unsigned("==", self.load(self.word(2, PTR), WEAKREF_OBJECT),
                                  self.reg(1))
        self.advance(3)
        self.next_or_fail(ok)

    def op_not_set(self) -> None:  # NOT_SET obj, name, list type: obj.name missing, None, []
        b = self.b
        v = self.call("PyObject_GetAttr", self.word(1, PTR), self.word(2, PTR))
        is_list = self.word(3, PTR)
        self.advance(4)
        some, missing = self.block("not_set.some"), self.block("not_set.missing")
        b.cbranch(self.null(v), missing, some)
        b.position_at_end(missing)  # (AttributeError: cleared)
        self.call("PyErr_Clear")
        b.branch(self.loop)
        b.position_at_end(some)
        empty_list = b.and_(b.icmp_unsigned("==", self.load(v, OB_TYPE), is_list),
                            b.icmp_signed("==", self.load(v, OB_SIZE, I64), i64(0)))
        ok = b.or_(b.icmp_unsigned("==", v, self.none), empty_list)
        self.call("Py_DecRef", v)
        self.next_or_fail(ok)

    def op_eq(self) -> None:  # EQ reg, type, obj
        b = self.b
        o = self.reg(1)
        typed, cmp = self.block("eq.typed"), self.fail
        b.cbranch(b.icmp_unsigned("==", self.load(o, OB_TYPE), self.word(2, PTR)), typed, cmp)
        b.position_at_end(typed)
        r = self.call("PyObject_RichCompareBool", o, self.word(3, PTR), ir.Constant(I32, 2))
        self.advance(4)
        self.next_or_fail(b.icmp_signed("==", r, ir.Constant(I32, 1)))

    # outputs and the call
    def op_out_new(self) -> None:  # OUT_NEW slot, ndarray type, descr, nd, dims...
        b = self.b
        descr = self.word(3, PTR)
        self.call("Py_IncRef", descr)  # NewFromDescr steals it
        pc = b.load(self.pc, typ=I64)
        dims = self.elem(self.plan, b.add(pc, i64(5)), I64)
        nd = self.word(4)
        null = ir.Constant(PTR, None)
        arr = self.call("yota_npy_NewFromDescr", self.word(2, PTR), descr, b.trunc(nd, I32),
                        dims, null, null, ir.Constant(I32, 0), null)
        got = self.block("out_new.got")
        b.cbranch(self.null(arr), self.fail, got)
        b.position_at_end(got)
        self.set_out(self.word(1), arr)
        self.advance(b.add(nd, i64(5)))
        b.branch(self.loop)

    def op_out_call(self) -> None:  # OUT_CALL slot, callable
        b = self.b
        arr = self.call("PyObject_CallNoArgs", self.word(2, PTR))
        got = self.block("out_call.got")
        b.cbranch(self.null(arr), self.fail, got)
        b.position_at_end(got)
        self.set_out(self.word(1), arr)
        self.advance(3)
        b.branch(self.loop)

    def op_out_scratch(self) -> None:  # OUT_SCRATCH slot
        slot = self.word(1)
        p = self.at(self.scratch, self.b.mul(slot, i64(16)))
        self.b.store(p, self.elem(self.slots, slot))
        self.advance(2)
        self.b.branch(self.loop)

    def op_run(self) -> None:  # RUN entry, ws slot, pool list, workspace maker, release GIL
        b = self.b
        pool = self.word(3, PTR)
        ws = self.var(PTR)
        n = self.load(pool, OB_SIZE, I64)
        pop, make, have = self.block("run.pop"), self.block("run.make"), self.block("run.have")
        b.cbranch(b.icmp_signed(">", n, i64(0)), pop, make)
        b.position_at_end(pop)  # list.pop(): the list's reference becomes ours
        last = b.sub(n, i64(1))
        b.store(b.load(self.elem(self.load(pool, LIST_ITEMS), last), typ=PTR), ws)
        b.store(last, self.at(pool, OB_SIZE))
        b.branch(have)
        b.position_at_end(make)
        made = self.call("PyObject_CallNoArgs", self.word(4, PTR))
        b.store(made, ws)
        b.cbranch(self.null(made), self.fail, have)
        b.position_at_end(have)
        w = b.load(ws, typ=PTR)
        addr = self.call("PyLong_AsVoidPtr", self.load(w, TUPLE_ITEMS + 8))
        nargs = b.add(self.word(2), i64(1))
        b.store(addr, self.elem(self.slots, self.word(2)))
        entry = b.inttoptr(self.word(1), PTR)
        release = b.icmp_signed("!=", self.word(5), i64(0))
        rc = self.var(I32)
        with b.if_else(release) as (free, held):
            with free:
                ts = self.call("PyEval_SaveThread")
                self._kernel(entry, nargs, rc)
                self.call("PyEval_RestoreThread", ts)
            with held:
                self._kernel(entry, nargs, rc)
        self.call("PyList_Append", pool, w)  # (cannot fail: the list had room for it)
        self.call("Py_DecRef", w)
        self.advance(6)
        self.next_or_fail(b.icmp_signed("==", b.load(rc, typ=I32), ir.Constant(I32, 0)))

    def _kernel(self, entry: ir.Value, nargs: ir.Value, rc: ir.Value) -> None:
        """``*rc = entry(slots[0], ..., slots[nargs - 1])``: the program's ``yota_main``.
        One call per count up to ``EXACT_ARGS``; above, up to ``MAX_ARGS`` on x86-64, a call
        with 32 or 64 pointers, the ones past ``nargs`` unused: under the System V calling
        convention the caller passes and removes arguments, and the callee reads only its
        own (``slots`` has room for ``MAX_ARGS``)."""
        b = self.b
        done = self.block("kernel.done")
        b.store(ir.Constant(I32, -1), rc)
        sw = b.switch(nargs, done)
        for k in [*range(1, EXACT_ARGS + 1), *PADDED_ARGS]:
            blk = self.block(f"kernel.{k}")
            for n in range(k // 2 + 1, k + 1) if k > EXACT_ARGS else [k]:
                sw.add_case(i64(n), blk)
            b.position_at_end(blk)
            ptrs = [b.load(self.elem(self.slots, i64(i)), typ=PTR) for i in range(k)]
            b.store(b.call(_Callee(entry, k), ptrs), rc)
            b.branch(done)
        b.position_at_end(done)

    # the result
    def op_push_out(self) -> None:  # PUSH_OUT slot
        p = self.elem(self.objs, self.word(1))
        self.push_value(self.b.load(p, typ=PTR))
        self.b.store(ir.Constant(PTR, None), p)
        self.advance(2)
        self.b.branch(self.loop)

    def op_push_float(self) -> None:  # PUSH_FLOAT slot, is_f32
        b = self.b
        data = b.load(self.elem(self.slots, self.word(1)), typ=PTR)
        f32 = b.icmp_signed("!=", self.word(2), i64(0))
        v = b.select(f32, b.fpext(b.load(data, typ=F32), F64), b.load(data, typ=F64))
        self._push_new(self.call("PyFloat_FromDouble", v), 3)

    def op_push_scalar(self) -> None:  # PUSH_SCALAR slot, descr
        data = self.b.load(self.elem(self.slots, self.word(1)), typ=PTR)
        self._push_new(self.call("yota_npy_Scalar", data, self.word(2, PTR),
                                 ir.Constant(PTR, None)), 3)

    def _push_new(self, v: ir.Value, size: int) -> None:
        got = self.block("push.got")
        self.b.cbranch(self.null(v), self.fail, got)
        self.b.position_at_end(got)
        self.push_value(v)
        self.advance(size)
        self.b.branch(self.loop)

    def op_push_obj(self) -> None:  # PUSH_OBJ obj
        o = self.word(1, PTR)
        self.call("Py_IncRef", o)
        self.push_value(o)
        self.advance(2)
        self.b.branch(self.loop)

    def _sequence(self, new: str, set_item: str) -> None:  # LIST n / TUPLE n
        b = self.b
        n = self.word(1)
        seq = self.call(new, n)
        got = self.block(f"{new}.got")
        b.cbranch(self.null(seq), self.fail, got)
        b.position_at_end(got)
        base = b.sub(b.load(self.sp, typ=I64), n)
        self.for_range(n, lambda k: self.call(  # steals the item
            set_item, seq, k, b.load(self.elem(self.stack, b.add(base, k)), typ=PTR)), "set")
        b.store(base, self.sp)
        self.push_value(seq)
        self.advance(2)
        b.branch(self.loop)

    def op_list(self) -> None:
        self._sequence("PyList_New", "PyList_SetItem")

    def op_tuple(self) -> None:
        self._sequence("PyTuple_New", "PyTuple_SetItem")

    def op_dict(self) -> None:  # DICT n (n key/value pairs)
        b = self.b
        n = self.word(1)
        d = self.call("PyDict_New")
        got = self.block("dict.got")
        b.cbranch(self.null(d), self.fail, got)
        b.position_at_end(got)
        base = b.sub(b.load(self.sp, typ=I64), b.mul(n, i64(2)))
        bad = self.var(I32)
        b.store(ir.Constant(I32, 0), bad)

        def put(k: ir.Value) -> None:
            at = b.add(base, b.mul(k, i64(2)))
            key = b.load(self.elem(self.stack, at), typ=PTR)
            val = b.load(self.elem(self.stack, b.add(at, i64(1))), typ=PTR)
            b.store(b.or_(b.load(bad, typ=I32), self.call("PyDict_SetItem", d, key, val)), bad)
        self.for_range(n, put, "put")
        ok, failed = self.block("dict.ok"), self.block("dict.failed")
        b.cbranch(b.icmp_signed("==", b.load(bad, typ=I32), ir.Constant(I32, 0)), ok, failed)
        b.position_at_end(failed)
        self.call("Py_DecRef", d)
        b.branch(self.fail)
        b.position_at_end(ok)
        self._drop_top(b.mul(n, i64(2)))
        self.push_value(d)
        self.advance(2)
        b.branch(self.loop)

    def _drop_top(self, n: ir.Value) -> None:
        """Release the top ``n`` stack items and pop them."""
        b = self.b
        base = b.sub(b.load(self.sp, typ=I64), n)
        self.for_range(n, lambda k: self.call(
            "Py_DecRef", b.load(self.elem(self.stack, b.add(base, k)), typ=PTR)), "release")
        b.store(base, self.sp)

    def op_new_object(self) -> None:  # NEW_OBJECT type, n, offset1, ..., offsetn
        """A new instance of a class whose fields are slots at those offsets (``__init__``
        is not called): the top ``n`` stack items move into it."""
        b = self.b
        n = self.word(2)
        obj = self.call("PyType_GenericAlloc", self.word(1, PTR), i64(0))
        got = self.block("new_object.got")
        b.cbranch(self.null(obj), self.fail, got)
        b.position_at_end(got)
        base = b.sub(b.load(self.sp, typ=I64), n)
        pc = b.load(self.pc, typ=I64)

        def put(k: ir.Value) -> None:
            off = b.load(self.elem(self.plan, b.add(pc, b.add(k, i64(3))), I64), typ=I64)
            b.store(b.load(self.elem(self.stack, b.add(base, k)), typ=PTR), self.at(obj, off))
        self.for_range(n, put, "fields")
        b.store(base, self.sp)
        self.push_value(obj)
        self.advance(b.add(n, i64(3)))
        b.branch(self.loop)

    def op_call(self) -> None:  # CALL n: stack [..., callable, arg1, ..., argn]
        b = self.b
        n = self.word(1)
        sp = b.load(self.sp, typ=I64)
        fn = b.load(self.elem(self.stack, b.sub(sp, b.add(n, i64(1)))), typ=PTR)
        r = self.call("PyObject_Vectorcall", fn, self.elem(self.stack, b.sub(sp, n)), n,
                      ir.Constant(PTR, None))
        got = self.block("call.got")
        b.cbranch(self.null(r), self.fail, got)
        b.position_at_end(got)
        self._drop_top(b.add(n, i64(1)))
        self.push_value(r)
        self.advance(2)
        b.branch(self.loop)

    def op_incr(self) -> None:  # INCR obj, name, one: obj.name += one
        b = self.b
        obj, name = self.word(1, PTR), self.word(2, PTR)
        v = self.call("PyObject_GetAttr", obj, name)
        got, added = self.block("incr.got"), self.block("incr.added")
        b.cbranch(self.null(v), self.fail, got)
        b.position_at_end(got)
        w = self.call("PyNumber_Add", v, self.word(3, PTR))
        self.call("Py_DecRef", v)
        b.cbranch(self.null(w), self.fail, added)
        b.position_at_end(added)
        r = self.call("PyObject_SetAttr", obj, name, w)
        self.call("Py_DecRef", w)
        self.advance(4)
        self.next_or_fail(b.icmp_signed("==", r, ir.Constant(I32, 0)))

    def op_setattr(self) -> None:  # SETATTR obj, name, value
        r = self.call("PyObject_SetAttr", self.word(1, PTR), self.word(2, PTR),
                      self.word(3, PTR))
        self.advance(4)
        self.next_or_fail(self.b.icmp_signed("==", r, ir.Constant(I32, 0)))

    def op_return(self) -> None:  # RETURN: the top of the stack
        b = self.b
        sp = b.sub(b.load(self.sp, typ=I64), i64(1))
        r = b.load(self.elem(self.stack, sp), typ=PTR)
        b.store(sp, self.sp)
        self.cleanup(self.nslots_value())
        b.ret(r)

    def nslots_value(self) -> ir.Value:
        return self.b.load(self.elem(self.plan, i64(0), I64), typ=I64)


class _Callee(ir.Value):
    """An opaque pointer called as ``i32 (ptr, ...)`` (llvmlite's ``call`` wants to see a
    function type on its callee)."""

    def __init__(self, ptr: ir.Value, nargs: int) -> None:
        self.ptr = ptr
        self.function_type = ir.FunctionType(I32, [PTR] * nargs)
        self.type = ir.PointerType(self.function_type)

    def get_reference(self) -> str:
        return str(self.ptr.get_reference())

    def __str__(self) -> str:
        return f"ptr {self.get_reference()}"
