"""What a function's code reads from outside its arguments: access chains from its bytecode.

A *chain* starts at a name the code does not compute itself (a global, a closure variable,
a parameter) and follows attributes, constant subscripts and iteration:
``scale``, ``cfg["lam"]``, ``self.layers[0].W``, ``layer.b`` for ``layer`` in
``self.layers``. ``code_uses(code)`` lists, per code object (cached), what is done with
each chain: *read* (its value is used), or *called* (with the chains passed as its
arguments, so that a callee defined in user code is analysed with its parameters bound
to them). A chain only written into (``self.last = y``, ``buf[i] = v``) is not a read.

The analysis runs the instructions over an abstract stack whose slots hold chains or
nothing; a jump target takes the stack of a jump to it (or falls through). It is an
approximation made to err on the side of reading more: an instruction it does not model
reads every chain on the stack. ``yota.captured`` resolves the chains on live objects.

>>> import numpy as np
>>> cfg = {"lam": 0.5}
>>> def f(x):
...     return np.sum(x) * cfg["lam"]
>>> [u.chain for u in code_uses(f.__code__) if u.kind == "read"]
[(('global', 'cfg'), ('item', 'lam'))]
"""

from __future__ import annotations

import dis
import functools
import sys
import types
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

Step = tuple[Any, ...]  # ("attr", name) | ("item", key) | ("each",)
Chain = tuple[Step, ...]  # (root, *steps); root: ("global"|"free"|"param", name)


@dataclass(frozen=True)
class Use:
    """One use of a chain by a code object: ``kind`` "read" or "call" (then ``args``:
    the chains passed positionally, None where not a chain, and ``kwargs``)."""

    kind: str
    chain: Chain
    line: int
    args: tuple[Chain | None, ...] = ()
    kwargs: tuple[tuple[str, Chain | None], ...] = ()


class _Null:
    """The NULL a call's stack layout holds below a plain callable."""


class _Iter:
    """An iterator over a chain (``GET_ITER``), below the items ``FOR_ITER`` pushes."""

    __slots__ = ("chain",)

    def __init__(self, chain: Chain) -> None:
        self.chain = chain


class _Const:
    __slots__ = ("value",)

    def __init__(self, value: Any) -> None:
        self.value = value


NULL = _Null()
_METHOD_FLAG = sys.version_info >= (3, 12)  # LOAD_ATTR's low bit: a method load (2 values)
_KEYS = (int, str, bytes, bool)  # constant subscripts followed (hashable, printable)

# ops that pop n values (each a read) and push m unknown ones: name -> (pops, pushes);
# a callable gets the instruction's argument
_SIMPLE: dict[str, tuple[Any, int]] = {
    "BINARY_OP": (2, 1), "COMPARE_OP": (2, 1), "IS_OP": (2, 1), "CONTAINS_OP": (2, 1),
    "UNARY_NEGATIVE": (1, 1), "UNARY_POSITIVE": (1, 1), "UNARY_NOT": (1, 1),
    "UNARY_INVERT": (1, 1), "GET_LEN": (0, 1), "RETURN_VALUE": (1, 0), "POP_TOP": (1, 0),
    "STORE_GLOBAL": (1, 0), "STORE_NAME": (1, 0), "LIST_APPEND": (1, 0), "SET_ADD": (1, 0),
    "LIST_EXTEND": (1, 0), "SET_UPDATE": (1, 0), "DICT_UPDATE": (1, 0), "DICT_MERGE": (1, 0),
    "MAP_ADD": (2, 0), "LIST_TO_TUPLE": (1, 1), "LOAD_CLOSURE": (0, 1),
    "LOAD_ASSERTION_ERROR": (0, 1), "PRINT_EXPR": (1, 0), "DELETE_ATTR": (1, 0),
    "BUILD_TUPLE": (lambda n: n, 1), "BUILD_LIST": (lambda n: n, 1),
    "BUILD_SET": (lambda n: n, 1), "BUILD_STRING": (lambda n: n, 1),
    "BUILD_SLICE": (lambda n: n, 1), "BUILD_MAP": (lambda n: 2 * n, 1),
    "BUILD_CONST_KEY_MAP": (lambda n: n + 1, 1),
    "FORMAT_VALUE": (lambda f: 2 if f & 4 else 1, 1),
    "MAKE_FUNCTION": (lambda f: 1 + bin(f & 15).count("1"), 1),
    "RAISE_VARARGS": (lambda n: n, 0),
    "POP_JUMP_FORWARD_IF_FALSE": (1, 0), "POP_JUMP_FORWARD_IF_TRUE": (1, 0),
    "POP_JUMP_BACKWARD_IF_FALSE": (1, 0), "POP_JUMP_BACKWARD_IF_TRUE": (1, 0),
    "POP_JUMP_FORWARD_IF_NONE": (1, 0), "POP_JUMP_FORWARD_IF_NOT_NONE": (1, 0),
    "POP_JUMP_BACKWARD_IF_NONE": (1, 0), "POP_JUMP_BACKWARD_IF_NOT_NONE": (1, 0),
    "POP_JUMP_IF_FALSE": (1, 0), "POP_JUMP_IF_TRUE": (1, 0), "POP_JUMP_IF_NONE": (1, 0),
    "POP_JUMP_IF_NOT_NONE": (1, 0),
}
_NOTHING = frozenset(("RESUME", "NOP", "CACHE", "COPY_FREE_VARS", "MAKE_CELL", "PRECALL",
                      "EXTENDED_ARG", "RETURN_GENERATOR", "JUMP_FORWARD", "JUMP_BACKWARD",
                      "JUMP_BACKWARD_NO_INTERRUPT", "JUMP_ABSOLUTE", "JUMP",
                      "JUMP_NO_INTERRUPT"))
_NO_FALL = frozenset(("RETURN_VALUE", "RETURN_CONST", "RAISE_VARARGS", "RERAISE",
                      "JUMP_FORWARD", "JUMP_BACKWARD", "JUMP_BACKWARD_NO_INTERRUPT",
                      "JUMP_ABSOLUTE", "JUMP", "JUMP_NO_INTERRUPT"))


class _Sim:
    """The abstract run of one code object."""

    def __init__(self, code: types.CodeType) -> None:
        self.code = code
        self.stack: list[Any] = []
        self.locals: dict[str, Any] = {
            n: (("param", n),) for n in code.co_varnames[:_nparams(code)]}
        self.uses: list[Use] = []
        self.line = code.co_firstlineno
        self.kwnames: tuple[str, ...] = ()
        self.pending: dict[int, list[Any]] = {}  # jump target -> the stack of a jump there

    # the stack
    def push(self, v: Any) -> None:
        self.stack.append(v)

    def pop(self) -> Any:
        return self.stack.pop() if self.stack else None

    def read(self, v: Any) -> None:
        if isinstance(v, tuple):
            self.uses.append(Use("read", v, self.line))
        elif isinstance(v, _Iter):
            self.uses.append(Use("read", v.chain, self.line))

    def flush(self) -> None:
        """An instruction not modelled: everything on the stack is read, and the stack
        is unknown from here."""
        for v in self.stack:
            self.read(v)
        self.stack = []

    def run(self) -> tuple[Use, ...]:
        fall = True
        for ins in dis.get_instructions(self.code):
            pos = getattr(ins, "positions", None)
            line = pos.lineno if pos is not None else ins.starts_line
            if isinstance(line, int) and not isinstance(line, bool):
                self.line = line
            if ins.is_jump_target:
                if not fall:
                    self.stack = list(self.pending.get(ins.offset, []))
            elif not fall:
                self.stack = []
            self.step(ins)
            fall = ins.opname not in _NO_FALL
        self.flush()
        return tuple(dict.fromkeys(self.uses))

    def step(self, ins: dis.Instruction) -> None:
        op = ins.opname
        if op in _NOTHING:
            self._jump(ins)
            return
        simple = _SIMPLE.get(op)
        if simple is not None:
            pops, pushes = simple
            n = pops(ins.arg or 0) if callable(pops) else pops
            if ins.opname.startswith("POP_JUMP"):
                self.read(self.pop())
                self._jump(ins)
                return
            for _ in range(n):
                self.read(self.pop())
            for _ in range(pushes):
                self.push(None)
            return
        handler = _HANDLERS.get(op)
        if handler is None:
            self.flush()
        else:
            handler(self, ins)

    def _jump(self, ins: dis.Instruction) -> None:
        if ins.opcode in dis.hasjrel or ins.opcode in dis.hasjabs:
            self.pending.setdefault(int(ins.argval), list(self.stack))

    # chains
    def load_name(self, root: str, name: str) -> None:
        self.push(((root, name),))

    def load_local(self, name: str) -> None:
        self.push(self.locals.get(name))

    def attr(self, name: str) -> None:
        c = self.pop()
        self.push(c + (("attr", name),) if isinstance(c, tuple) else None)
        if not isinstance(c, tuple):
            self.read(c)

    def call(self, n: int) -> None:
        items = [self.pop() for _ in range(n + 2)][::-1]
        kw = self.kwnames
        self.kwnames = ()
        head, second, args = items[0], items[1], items[2:]
        callee = head if second is _SELF else second  # LOAD_METHOD: [method, self]
        npos = len(args) - len(kw)
        pos = tuple(a if isinstance(a, tuple) else None for a in args[:npos])
        kws = tuple((k, a if isinstance(a, tuple) else None)
                    for k, a in zip(kw, args[npos:], strict=True))
        if isinstance(callee, tuple):
            self.uses.append(Use("call", callee, self.line, pos, kws))
        for a in args:
            if not isinstance(a, tuple):
                self.read(a)
        self.push(None)


class _SelfSlot:
    """The ``self`` that ``LOAD_METHOD`` pushes above the method (not an argument)."""


_SELF = _SelfSlot()


def _nparams(code: types.CodeType) -> int:
    n = code.co_argcount + code.co_kwonlyargcount
    return n + bool(code.co_flags & 4) + bool(code.co_flags & 8)


def _load_global(s: _Sim, ins: dis.Instruction) -> None:
    if ins.opname == "LOAD_GLOBAL" and (ins.arg or 0) & 1:
        s.push(NULL)
    name = ins.argval if isinstance(ins.argval, str) else ins.argrepr.split(" + ")[-1]
    s.load_name("global", name)


def _load_deref(s: _Sim, ins: dis.Instruction) -> None:
    name = ins.argval
    if name in s.code.co_freevars:
        s.load_name("free", name)
    else:
        s.load_local(name)


def _store_local(s: _Sim, ins: dis.Instruction) -> None:
    v = s.pop()
    s.locals[ins.argval] = v if isinstance(v, tuple) else None


def _load_const(s: _Sim, ins: dis.Instruction) -> None:
    s.push(_Const(ins.argval))


def _load_attr(s: _Sim, ins: dis.Instruction) -> None:
    name = ins.argval
    if ins.opname == "LOAD_METHOD" or (_METHOD_FLAG and (ins.arg or 0) & 1):
        c = s.pop()
        s.push(c + (("attr", name),) if isinstance(c, tuple) else None)
        s.push(_SELF)
        return
    s.attr(name)


def _subscr(s: _Sim, ins: dis.Instruction) -> None:
    key, c = s.pop(), s.pop()
    if isinstance(c, tuple) and isinstance(key, _Const) and isinstance(key.value, _KEYS):
        s.push(c + (("item", key.value),))
        return
    s.read(c)
    s.read(key)
    s.push(None)


def _store_subscr(s: _Sim, ins: dis.Instruction) -> None:
    key, _container, value = s.pop(), s.pop(), s.pop()  # the container is written
    s.read(key)
    s.read(value)


def _delete_subscr(s: _Sim, ins: dis.Instruction) -> None:
    s.read(s.pop())
    s.pop()


def _store_attr(s: _Sim, ins: dis.Instruction) -> None:
    s.pop()  # the object written into
    s.read(s.pop())


def _push_null(s: _Sim, ins: dis.Instruction) -> None:
    s.push(NULL)


def _kw_names(s: _Sim, ins: dis.Instruction) -> None:
    names = ins.argval if isinstance(ins.argval, tuple) else s.code.co_consts[ins.arg or 0]
    s.kwnames = tuple(names) if isinstance(names, tuple) else ()


def _call(s: _Sim, ins: dis.Instruction) -> None:
    s.call(ins.arg or 0)


def _call_ex(s: _Sim, ins: dis.Instruction) -> None:
    n = 3 + ((ins.arg or 0) & 1)
    items = [s.pop() for _ in range(n)][::-1]
    callee = items[1] if items[0] is NULL or items[0] is None else items[0]
    if isinstance(callee, tuple):
        s.uses.append(Use("call", callee, s.line))
    for v in items[2:]:
        s.read(v)
    s.push(None)


def _get_iter(s: _Sim, ins: dis.Instruction) -> None:
    c = s.pop()
    s.push(_Iter(c) if isinstance(c, tuple) else None)


def _for_iter(s: _Sim, ins: dis.Instruction) -> None:
    it = s.stack[-1] if s.stack else None
    s.pending.setdefault(int(ins.argval), s.stack[:-1])
    s.push(it.chain + (("each",),) if isinstance(it, _Iter) else None)


def _unpack(s: _Sim, ins: dis.Instruction) -> None:
    c = s.pop()
    n = ins.arg or 0
    for i in reversed(range(n)):
        s.push(c + (("item", i),) if isinstance(c, tuple) else None)
    if not isinstance(c, tuple):
        s.read(c)


def _copy(s: _Sim, ins: dis.Instruction) -> None:
    n = ins.arg or 1
    s.push(s.stack[-n] if len(s.stack) >= n else None)


def _swap(s: _Sim, ins: dis.Instruction) -> None:
    n = ins.arg or 2
    if len(s.stack) >= n:
        s.stack[-1], s.stack[-n] = s.stack[-n], s.stack[-1]


def _jump_or_pop(s: _Sim, ins: dis.Instruction) -> None:
    s.pending.setdefault(int(ins.argval), list(s.stack))
    s.read(s.pop())


_HANDLERS: dict[str, Callable[[_Sim, dis.Instruction], None]] = {
    "LOAD_GLOBAL": _load_global, "LOAD_NAME": _load_global,
    "LOAD_DEREF": _load_deref, "LOAD_CLASSDEREF": _load_deref,
    "LOAD_FAST": lambda s, i: s.load_local(i.argval),
    "LOAD_FAST_CHECK": lambda s, i: s.load_local(i.argval),
    "STORE_FAST": _store_local, "STORE_DEREF": _store_local,
    "DELETE_FAST": lambda s, i: s.locals.pop(i.argval, None),
    "LOAD_CONST": _load_const, "LOAD_ATTR": _load_attr, "LOAD_METHOD": _load_attr,
    "BINARY_SUBSCR": _subscr, "STORE_SUBSCR": _store_subscr,
    "DELETE_SUBSCR": _delete_subscr, "STORE_ATTR": _store_attr, "PUSH_NULL": _push_null,
    "KW_NAMES": _kw_names, "CALL": _call, "CALL_FUNCTION_EX": _call_ex,
    "GET_ITER": _get_iter, "FOR_ITER": _for_iter, "UNPACK_SEQUENCE": _unpack,
    "COPY": _copy, "SWAP": _swap, "JUMP_IF_TRUE_OR_POP": _jump_or_pop,
    "JUMP_IF_FALSE_OR_POP": _jump_or_pop,
}


@functools.lru_cache(maxsize=4096)
def code_uses(code: types.CodeType) -> tuple[Use, ...]:
    """The uses of chains in ``code`` and in the code nested in it (comprehensions,
    lambdas and functions defined inside: their globals, and the closure variables that
    are ``code``'s own), in order, each once."""
    uses = list(_Sim(code).run())
    for c in code.co_consts:
        if isinstance(c, types.CodeType):
            uses += [u for u in code_uses(c) if _outer(u.chain, code, c)]
    return tuple(dict.fromkeys(uses))


def _outer(chain: Chain, code: types.CodeType, nested: types.CodeType) -> bool:
    """Whether a nested code object's chain is rooted outside ``code``'s frame: a global,
    or a closure variable that is one of ``code``'s own closure variables."""
    kind, name = chain[0]
    return kind == "global" or kind == "free" and name in code.co_freevars
