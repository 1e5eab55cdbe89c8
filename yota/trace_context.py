"""The state of one trace: ``TraceContext``, and ``active``, which makes it the trace of
this thread while the traced function runs.

A trace holds its tape and the tracers of its input leaves. The arguments' leaves become
``input`` entries, materialized into the getattr/getitem chains that reach them when
first used; arrays the function meets that are not traced (globals, closures, arrays it
makes) become constants or implicit inputs; guards record what Python took from a traced
value.

Arrays from closures and globals are never silently frozen. One with at most
``CONST_LIMIT`` elements becomes a constant of the program, and a compiled program
checks before each call that it did not change in place (if it did, the function is
traced again; ``play`` refuses the stale tape). A larger one is an implicit input, read
at call time; rebinding its global name retraces. What user code computes from such
arrays with plain NumPy (not traced) is a constant of the trace, as are Python numbers
from closures and globals.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import Any

import numpy as np

from yota.ir.errors import TraceError, UnsupportedError
from yota.ir.types import DTYPE_NAMES, TensorType

from . import structs
from .aliasing import Storage, creations, made_here
from .numpy import generated
from .numpy.building import constructors
from .numpy.generated import Made
from .recording import to_tape
from .tape import Entry, Tape, Var
from .traced import TracedValue, traces
from .tracer import Tracer, call
from .userloc import binding_name, user_loc, where

CONST_LIMIT = 1024  # arrays up to this many elements met in user code become constants


class TraceContext:
    """The state of one trace: its tape and the tracers of its input leaves."""

    def __init__(self, tape: Tape) -> None:
        self.tape = tape
        self.struct_vars: dict[tuple[Any, ...], Var] = {}
        self.arrays: dict[int, tuple[np.ndarray | np.generic, Var]] = {}
        self.leaves: list[Tracer] = []
        self.inputs: list[Any] = []
        self.deferred: UnsupportedError | None = None  # raised when the function returns
        self.foreign: dict[int, tuple[TracedValue, Var]] = {}  # enclosing traces' tracers used
        self.found: Any = None  # what the function reads from outside (yota.captured.Found)
        self.recorder: Any = None  # its random events (yota.randomness.Recorder)

    def tracer(self, var: Var | None, value: Any, path: tuple[Any, ...] = (),
               store: Storage | None = None, const: bool = False) -> Tracer:
        """A new traced value of this trace (``yota.recording.record`` makes its
        results here)."""
        return Tracer(self, var, value, path, store, const)

    def foreign_var(self, t: TracedValue) -> Var:
        """A tracer of an enclosing trace used in this one (a nested ``yota.grad`` whose
        function closes over it): an implicit input of this tape, fed by the enclosing
        trace when the nested program is inlined there (``yota.tracing.inline``)."""
        if id(t) not in self.foreign:
            var = self.tape.new_var(t.type, t.weak)
            entry = Entry("captured", [var], value=t.value, extra=(None, "enclosing trace"),
                          loc=user_loc())
            self.tape.captured.append(entry)
            self.tape.add(entry)
            self.foreign[id(t)] = (t, var)
        return self.foreign[id(t)][1]

    # -- inputs -------------------------------------------------------------------------
    def input(self, argnum: int, arg: Any) -> Any:
        """The argument as user code sees it: leaves replaced by tracers."""
        try:
            return self._input(argnum, arg)
        except TraceError as e:
            tape = self.tape
            raise TraceError(f"argument {tape.argnames[argnum]!r} of {tape.fname} "
                             f"(defined at {tape.loc}): {e}") from None

    def _input(self, argnum: int, arg: Any) -> Any:
        owner = f"argument {self.tape.argnames[argnum]!r}" if argnum < len(
            self.tape.argnames) else f"argument {argnum}"
        if structs.is_leaf(arg):
            t = Tracer(self, None, _leaf_value(arg), (argnum, ()), _caller(owner))
            t._var = self._input_entry(argnum, arg, t.type, t.weak)
            self.leaves.append(t)
            return t
        self._input_entry(argnum, arg, None, False)

        def make(path: tuple[Any, ...], leaf: Any) -> Tracer:
            t = Tracer(self, None, _leaf_value(leaf, path), (argnum, path), _caller(owner))
            self.leaves.append(t)
            return t

        return structs.rebuild(arg, make)

    def _input_entry(self, argnum: int, arg: Any, type: TensorType | None, weak: bool) -> Var:
        var = self.tape.new_var(type, weak)
        self.tape.add(Entry("input", [var], value=arg, extra=argnum))
        self.struct_vars[(argnum,)] = var
        return var

    def leaf_var(self, t: TracedValue) -> Var:
        """Materialize a structure leaf: record the getattr/getitem chain that reaches it."""
        argnum, path = t._path
        parent = self.struct_vars[(argnum,)]
        obj = self.inputs[argnum]
        for i, key in enumerate(path):
            prefix = (argnum,) + path[: i + 1]
            last = i == len(path) - 1
            attr = structs.is_attr_container(obj) and isinstance(key, str)
            obj = getattr(obj, key) if attr else obj[key]
            if prefix not in self.struct_vars:
                var = self.tape.new_var(t.type if last else None, t.weak and last)
                kind = "getattr" if attr else "getitem"
                self.tape.add(Entry(kind, [var], kind,
                                    (parent, key), value=t.value if last else obj))
                self.struct_vars[prefix] = var
            parent = self.struct_vars[prefix]
        return parent

    # -- arrays met in user code ------------------------------------------------------
    def array_var(self, arr: np.ndarray | np.generic) -> Var:
        key = id(arr)
        if key in self.arrays:
            return self.arrays[key][1]
        a = np.asarray(arr)
        if a.dtype not in DTYPE_NAMES:
            raise TraceError(f"an array of dtype {a.dtype} is used at {where()}; Yota "
                             "supports float32, float64, int32, int64 and bool: convert it")
        var = self.tape.new_var(TensorType(a.dtype, a.shape))
        read = self._read_of(arr)
        if read is None and made_here(arr):  # np.arange(n) in the function: a constant
            entry = Entry("const", [var], value=a.copy())
        elif read is not None:  # found where the function reads it: that read is guarded
            entry = Entry("const", [var], value=a.copy(), extra=read) if a.size <= \
                CONST_LIMIT else Entry("captured", [var], value=arr,
                                       extra=(None, read.text), loc=user_loc())
            if entry.kind == "captured":
                self.tape.captured.append(entry)
        elif a.size <= CONST_LIMIT or isinstance(arr, np.generic):
            self.tape.held = True
            entry = Entry("const", [var], value=a.copy(), extra=arr)
            scope, name = binding_name(arr) if isinstance(arr, np.ndarray) else (None, "")
            if scope is not None:  # a global: rebinding its name makes the tape stale
                self.tape.bound_consts.append((arr, scope, name))
        else:
            self.tape.held = True
            entry = Entry("captured", [var], value=arr, extra=binding_name(arr),
                          loc=user_loc())
            self.tape.captured.append(entry)
        self.tape.add(entry)
        self.arrays[key] = (arr, var)  # keeps arr alive so its id stays unique
        return var

    def _read_of(self, arr: Any) -> Any:
        """The read (``yota.captured``) that finds array ``arr`` or the array it views."""
        if self.found is None:
            return None
        for _ in range(4):
            read = self.found.arrays.get(id(arr))
            if read is not None or arr is None:
                return read
            arr = getattr(arr, "base", None)
        return None

    def source_input(self, read: Any, value: Any) -> Tracer:
        """The traced value standing for ``value``, which the function reads from outside
        its arguments at ``read`` (a ``yota.captured.Read``) and which the program reads
        at every call: an implicit input (``captured`` entry) the function cannot write."""
        weak = type(value) in (float, int)
        a = np.asarray(value)
        var = self.tape.new_var(TensorType(a.dtype, a.shape), weak)
        entry = Entry("captured", [var], value=value, extra=(None, read.text), loc=read.loc)
        self.tape.captured.append(entry)
        self.tape.add(entry)
        read.entry = entry
        owner = f"an array from outside the function ({read.kind} {read.text})"
        return Tracer(self, var, value, store=Storage(const=False, owner=owner))

    def const_var(self, value: Any, weak: bool = False, made: Made | None = None) -> Var:
        """A constant of the trace made by the function itself (a fresh array and what was
        computed from fresh arrays only): its current value, copied; or, for a large one
        made from shapes alone (``made``), the calls that compute it."""
        if made is not None and generated.computed(value):
            return generated.record(made, self.tape, lambda x: to_tape(self, x), value)
        a = np.array(value, copy=True)
        var = self.tape.new_var(TensorType(a.dtype, a.shape), weak)
        self.tape.add(Entry("const", [var], value=a))
        return var

    def guard(self, t: TracedValue, kind: str, expected: Any,
              error: UnsupportedError | None = None) -> Any:
        """Record that Python took ``expected`` from ``t``. ``error``: the conversion is
        not allowed (a store into a plain array); it is raised when ``f`` returns, since
        NumPy would replace an exception raised here by its own."""
        if error is not None:
            self.deferred = self.deferred or error
            return expected
        self.tape.add(Entry("guard", [], "", (t.tape_var,), value=expected,
                            loc=user_loc(), extra={"kind": kind, "expected": expected}))
        return expected


def _caller(owner: str) -> Storage | None:
    return Storage(const=False, owner=owner)


def _leaf_value(x: Any, path: tuple[Any, ...] = ()) -> Any:
    if type(x) is float:
        return x
    a = np.asarray(x)
    structs.leaf_signature(a, path)
    return a


def current_context() -> TraceContext | None:
    """The innermost trace running in this thread (None outside a trace)."""
    stack = getattr(traces, "stack", None)
    return stack[-1] if stack else None


@contextlib.contextmanager
def active(ctx: TraceContext) -> Iterator[None]:
    """Make ``ctx`` the current trace of this thread while the block runs."""
    stack = getattr(traces, "stack", None)
    if stack is None:
        stack = traces.stack = []
    stack.append(ctx)
    try:
        with constructors(lambda x: isinstance(x, Tracer), call), \
                creations(lambda a, name, args, kwargs: Tracer(
                    ctx, None, a, store=Storage(const=True)).made_by(
                        generated.leaf(name, args, kwargs, a, user_loc()))):
            yield
    finally:
        stack.pop()

