"""Tracing: runs a user function on Tracer objects that record every NumPy call on a Tape.

Tracing runs ``f`` on real values (as Yota.jl does): every tracer carries its example
value, so Python control flow sees real numbers. Where Python asks a traced value for
``bool``/``int``/``float``/``__index__``/``item()``, the answer is recorded as a guard.

Arrays from closures and globals are never silently frozen. One with at most
``CONST_LIMIT`` elements becomes a constant of the program, and a compiled program
checks before each call that it did not change in place (if it did, the function is
traced again; ``play`` refuses the stale tape). A larger one is an implicit input, read
at call time; rebinding its global name retraces. What user code computes from such
arrays with plain NumPy (not traced) is a constant of the trace, as are Python numbers
from closures and globals.
"""

from __future__ import annotations

import os
import sys
import threading
from collections.abc import Callable
from typing import Any

import numpy as np

from yota.ir.errors import TraceError, UnsupportedError
from yota.ir.types import DTYPE_NAMES, TensorType

from . import structs
from .tape import Entry, Loc, Tape, Var

CONST_LIMIT = 1024  # arrays up to this many elements met in user code become constants
_YOTA_DIR = os.path.dirname(os.path.abspath(__file__))
_IR_DIR = os.path.join(os.path.dirname(_YOTA_DIR), "ir")
_NUMPY_DIR = os.path.dirname(os.path.abspath(np.__file__))
_SKIP = (_YOTA_DIR + os.sep, _NUMPY_DIR + os.sep, _IR_DIR + os.sep, "<frozen ", "<__array")
_local = threading.local()


def user_loc(depth: int = 1) -> Loc | None:
    """The innermost frame outside Yota and NumPy: the user's code."""
    f = sys._getframe(depth)
    while f is not None:
        fn = f.f_code.co_filename
        if not fn.startswith(_SKIP):
            return Loc(fn, f.f_lineno, f.f_code.co_name)
        f = f.f_back
    return None


def where() -> str:
    """The user's ``file:line in func: source`` for error messages."""
    loc = user_loc(2)
    return loc.describe() if loc is not None else "an unknown place"


def _user_frame() -> Any:
    f = sys._getframe(1)
    while f is not None and f.f_code.co_filename.startswith(_SKIP):
        f = f.f_back
    return f


class TraceContext:
    """The state of one trace: its tape and the tracers of its input leaves."""

    def __init__(self, tape: Tape) -> None:
        self.tape = tape
        self.struct_vars: dict[tuple[Any, ...], Var] = {}
        self.arrays: dict[int, tuple[np.ndarray, Var]] = {}
        self.leaves: list[Tracer] = []
        self.inputs: list[Any] = []

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
        if structs.is_leaf(arg):
            t = Tracer(self, None, _leaf_value(arg), (argnum, ()))
            t._var = self._input_entry(argnum, arg, t.type, t.weak)
            self.leaves.append(t)
            return t
        self._input_entry(argnum, arg, None, False)

        def make(path: tuple[Any, ...], leaf: Any) -> Tracer:
            t = Tracer(self, None, _leaf_value(leaf, path), (argnum, path))
            self.leaves.append(t)
            return t

        return structs.rebuild(arg, make)

    def _input_entry(self, argnum: int, arg: Any, type: TensorType | None, weak: bool) -> Var:
        var = self.tape.new_var(type, weak)
        self.tape.add(Entry("input", [var], value=arg, extra=argnum))
        self.struct_vars[(argnum,)] = var
        return var

    def leaf_var(self, t: Tracer) -> Var:
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
        if a.size <= CONST_LIMIT or isinstance(arr, np.generic):
            entry = Entry("const", [var], value=a.copy(), extra=arr)
            scope, name = _binding_name(arr) if isinstance(arr, np.ndarray) else (None, "")
            if scope is not None:  # a global: rebinding its name makes the tape stale
                self.tape.bound_consts.append((arr, scope, name))
        else:
            entry = Entry("captured", [var], value=arr, extra=_binding_name(arr),
                          loc=user_loc())
            self.tape.captured.append(entry)
        self.tape.add(entry)
        self.arrays[key] = (arr, var)  # keeps arr alive so its id stays unique
        return var

    def guard(self, t: Tracer, kind: str, expected: Any) -> Any:
        self.tape.add(Entry("guard", [], "", (t.tape_var,), value=expected,
                            loc=user_loc(), extra={"kind": kind, "expected": expected}))
        return expected


def _binding_name(arr: Any) -> tuple[dict[str, Any] | None, str]:
    """Where the user's frame binds the array: (globals dict or None, name).

    A global binding is re-checked on every call, so rebinding the name retraces."""
    f = _user_frame()
    if f is not None:
        for k, v in f.f_locals.items():
            if v is arr:
                return None, k
        for k, v in f.f_globals.items():
            if v is arr:
                return f.f_globals, k
    return None, "unnamed array"


def _leaf_value(x: Any, path: tuple[Any, ...] = ()) -> Any:
    if type(x) is float:
        return x
    a = np.asarray(x)
    structs.leaf_signature(a, path)
    return a


def current_context() -> TraceContext | None:
    stack = getattr(_local, "stack", None)
    return stack[-1] if stack else None


class Tracer:
    """A traced array: behaves like a NumPy array and records what is done with it."""

    __slots__ = ("_ctx", "_var", "value", "_path", "__weakref__")
    __array_priority__ = 1000.0

    def __init__(self, ctx: TraceContext, var: Var | None, value: Any,
                 path: tuple[Any, ...] = ()) -> None:
        self._ctx = ctx
        self._var = var
        self.value = value
        self._path = path

    @property
    def tape_var(self) -> Var:
        if self._var is None:
            self._var = self._ctx.leaf_var(self)
        return self._var

    @property
    def weak(self) -> bool:
        return isinstance(self.value, (float, int, bool)) and not isinstance(self.value,
                                                                              np.generic)

    @property
    def type(self) -> TensorType:
        if self._var is not None and self._var.type is not None:
            return self._var.type
        a = np.asarray(self.value)
        return TensorType(a.dtype, a.shape)

    shape = property(lambda self: np.shape(self.value))
    ndim = property(lambda self: np.ndim(self.value))
    size = property(lambda self: int(np.size(self.value)))
    dtype = property(lambda self: np.asarray(self.value).dtype)

    def __repr__(self) -> str:
        return f"Tracer({self.tape_var!r}::{self.type}, value={self.value!r})"

    # -- NumPy protocols -------------------------------------------------------------
    def __array_ufunc__(self, ufunc: np.ufunc, method: str, *inputs: Any, **kwargs: Any) -> Any:
        from .numpy_map import call_ufunc

        return call_ufunc(ufunc, method, inputs, kwargs)

    def __array_function__(self, func: Callable[..., Any], types: Any, args: Any,
                           kwargs: Any) -> Any:
        from .numpy_map import call_function

        return call_function(func, args, kwargs)

    def __array__(self, dtype: Any = None, copy: Any = None) -> np.ndarray:
        raise UnsupportedError(
            f"a traced value is converted to a plain NumPy array at {where()} "
            "(np.asarray/np.array, or a library that is not NumPy): the result would be "
            "a constant cut off from the inputs. Use NumPy functions on the value itself, "
            "or wrap the code in a @yota.primitive with a @yota.diffrule"
        )

    # -- Python conversions: guards ------------------------------------------------
    def __bool__(self) -> bool:
        return self._ctx.guard(self, "bool", bool(self.value))

    def __int__(self) -> int:
        _forbid_math("int")
        return self._ctx.guard(self, "int", int(self.value))

    def __index__(self) -> int:
        if np.asarray(self.value).dtype.kind not in "biu":
            raise TypeError("only integer arrays can be used as an index")
        return self._ctx.guard(self, "int", int(self.value))

    def __float__(self) -> float:
        _forbid_math("float")
        return self._ctx.guard(self, "float", float(self.value))

    def item(self) -> Any:
        """The Python number, as ``float()``/``int()``/``bool()`` give it: a guard."""
        value = np.asarray(self.value).item()
        kind = {bool: "bool", int: "int"}.get(type(value), "float")
        return self._ctx.guard(self, kind, value)

    def tolist(self) -> Any:
        raise UnsupportedError(
            f"tolist() of a traced array at {where()} would turn it into Python numbers "
            "(constants of the trace). Iterate over the array, or index it, instead")

    def __len__(self) -> int:
        if self.ndim == 0:
            raise TypeError("len() of a 0-d traced array")
        return self.shape[0]

    def __iter__(self) -> Any:
        if self.ndim == 0:
            raise TypeError("iteration over a 0-d traced array")
        return (self[i] for i in range(self.shape[0]))

    def __setitem__(self, key: Any, value: Any) -> None:
        raise UnsupportedError(
            f"in-place assignment x[...] = ... to a traced array at {where()}: Yota "
            "differentiates pure functions. Build a new array instead (np.where(mask, new, x), "
            "np.concatenate, or arithmetic)"
        )

    __hash__ = object.__hash__


def _forbid_math(conv: str) -> None:
    """Raise when the conversion comes from a ``math``/``cmath`` call on a traced value."""
    frame = _user_frame()
    if frame is None:
        return
    loc = Loc(frame.f_code.co_filename, frame.f_lineno, frame.f_code.co_name)
    import re

    for name in re.findall(r"([A-Za-z_][\w.]*)\s*\(", loc.source_line()):
        obj = _resolve(name, frame)
        if getattr(obj, "__module__", None) in ("math", "cmath") or (
                getattr(obj, "__self__", None) is sys.modules.get("math")):
            raise UnsupportedError(
                f"Python's {name}() is applied to a traced value at {loc.describe()}: "
                f"it would turn the value into a constant {conv}. Use the NumPy function "
                f"(np.{name.split('.')[-1]}) instead"
            )


def _resolve(dotted: str, frame: Any) -> Any:
    head, *rest = dotted.split(".")
    scope = {**frame.f_builtins, **frame.f_globals, **frame.f_locals}
    obj = scope.get(head)
    for part in rest:
        obj = getattr(obj, part, None)
    return obj


# -- in-place operators: mutation is not traced -----------------------------------------
def _inplace(op: str) -> Callable[..., Any]:
    def method(self: Tracer, other: Any) -> Any:
        raise UnsupportedError(
            f"in-place '{op}' on a traced array at {where()}: it would mutate an array "
            f"that the program reads elsewhere. Write x = x {op[:-1]} y instead"
        )

    return method


for _name, _op in [("__iadd__", "+="), ("__isub__", "-="), ("__imul__", "*="),
                   ("__itruediv__", "/="), ("__ipow__", "**="), ("__imatmul__", "@=")]:
    setattr(Tracer, _name, _inplace(_op))


# -- recording ------------------------------------------------------------------------
def find_context(*objs: Any) -> TraceContext | None:
    for o in objs:
        if isinstance(o, Tracer):
            return o._ctx
        if isinstance(o, (list, tuple)):
            c = find_context(*o)
            if c is not None:
                return c
        elif isinstance(o, dict):
            c = find_context(*o.values())
            if c is not None:
                return c
    return None


def to_tape(ctx: TraceContext, x: Any) -> Any:
    """Replace tracers by their Vars and arrays by const/captured Vars (lists kept).

    NumPy integer and bool scalars stay as they are: like Python ints they are usually
    axes, sizes or indices, and a lowering reads them as static values."""
    if isinstance(x, Tracer):
        return x.tape_var
    if isinstance(x, np.ndarray) or (
            isinstance(x, np.generic) and not isinstance(x, (np.integer, np.bool_))):
        return ctx.array_var(x)
    if isinstance(x, list):
        return [to_tape(ctx, v) for v in x]
    if isinstance(x, tuple):
        return tuple(to_tape(ctx, v) for v in x)
    if isinstance(x, slice):  # traced bounds are static: NumPy's __index__ guards them
        return slice(*(int(v.value) if isinstance(v, Tracer) else v
                       for v in (x.start, x.stop, x.step)))
    return x


def to_value(x: Any) -> Any:
    if isinstance(x, Tracer):
        return x.value
    if isinstance(x, list):
        return [to_value(v) for v in x]
    if isinstance(x, tuple):
        return tuple(to_value(v) for v in x)
    return x


def _all_weak(args: Any) -> bool:
    flat: list[Any] = []

    def walk(x: Any) -> None:
        if isinstance(x, (list, tuple)):
            for v in x:
                walk(v)
        else:
            flat.append(x)

    walk(args)
    tracers = [x for x in flat if isinstance(x, Tracer)]
    arrays = [x for x in flat if isinstance(x, (np.ndarray, np.generic))]
    return bool(tracers) and not arrays and all(t.weak for t in tracers)


def record(key: str, args: tuple[Any, ...], kwargs: dict[str, Any],
           forward: Callable[..., Any], extra: Any = None, display: str | None = None,
           python_op: bool = False) -> Any:
    """Run ``forward`` on the example values and record it on the tape as ``key``.

    The result is weak (a Python scalar, NEP 50) when every traced input is weak and
    the operation is a Python operator or returns a Python scalar itself; NumPy
    functions return strong NumPy scalars (``np.exp(1.0)`` is an ``np.float64``)."""
    ctx = find_context(args, kwargs)
    if ctx is None:
        return forward(*args, **kwargs)
    loc = user_loc(2)
    tape_args = to_tape(ctx, args)
    tape_kwargs = {k: to_tape(ctx, v) for k, v in kwargs.items()}
    try:
        with np.errstate(all="ignore"):
            value = forward(*to_value(args), **{k: to_value(v) for k, v in kwargs.items()})
    except ValueError as e:
        at = loc.describe() if loc is not None else "an unknown place"
        raise OperandError(f"{display or key} at {at}: {e} (operands: "
                           f"{', '.join(_describe(a) for a in args)})") from e
    weak = _all_weak((args, list(kwargs.values()))) and (
        python_op or type(value) in (float, int, bool))
    multi = isinstance(value, (list, tuple))
    values = list(value) if multi else [value]
    outs, tracers = [], []
    for v in values:
        v = _normalize_output(v, weak, key, loc)
        var = ctx.tape.new_var(TensorType(np.asarray(v).dtype, np.shape(v)), weak)
        outs.append(var)
        tracers.append(Tracer(ctx, var, v))
    ctx.tape.add(Entry("call", outs, display or key, tape_args, tape_kwargs,
                       value=[t.value for t in tracers] if multi else tracers[0].value,
                       loc=loc, extra=extra))
    if multi:
        return type(value)(tracers) if isinstance(value, tuple) else tracers
    return tracers[0]


class OperandError(TraceError, ValueError):
    """NumPy refused a traced call's operands (shapes that do not match, bad values)."""


def _describe(a: Any) -> str:
    if isinstance(a, Tracer):
        return str(a.type)
    if isinstance(a, (np.ndarray, np.generic)):
        if a.dtype in DTYPE_NAMES:
            return str(TensorType(a.dtype, np.shape(a)))
        return f"{a.dtype}{list(np.shape(a))}"
    if isinstance(a, (list, tuple)):
        inner = ", ".join(_describe(v) for v in a)
        return f"[{inner}]" if isinstance(a, list) else f"({inner})"
    return type(a).__name__ if isinstance(a, dict) else repr(a)


def _normalize_output(v: Any, weak: bool, key: str, loc: Loc | None) -> Any:
    if weak:
        return np.asarray(v).item()
    a = np.asarray(v)
    if a.dtype not in DTYPE_NAMES:
        at = loc.describe() if loc is not None else "an unknown place"
        raise TraceError(f"'{key}' at {at} produced dtype {a.dtype}, which Yota does not "
                         "support (float32, float64, int32, int64, bool)")
    return a


# -- trace -------------------------------------------------------------------------------
def trace(f: Callable[..., Any], *args: Any, primitives: Any = None) -> tuple[Any, Tape]:
    """Run ``f(*args)`` on tracers; returns ``(value, tape)``.

    ``value`` is the real result. Arrays, Python floats, and structures of them
    (dataclasses, objects, NamedTuples, tuples, lists, dicts) are traced; ints, bools,
    strings and None are constants of the trace.

    >>> import numpy as np, yota
    >>> val, tape = yota.trace(lambda x: np.sum(x * 2.0), np.ones(3))
    >>> float(val)
    6.0
    """
    from .primitives import temporary_primitives

    name = getattr(f, "__name__", type(f).__name__)
    code = getattr(f, "__code__", None)
    loc = Loc(code.co_filename, code.co_firstlineno, name) if code else None
    tape = Tape(name, loc)
    tape.argnames = _argnames(f, len(args))
    ctx = TraceContext(tape)
    ctx.inputs = list(args)
    traced_args = [ctx.input(i, a) for i, a in enumerate(args)]
    stack = getattr(_local, "stack", None)
    if stack is None:
        stack = _local.stack = []
    stack.append(ctx)
    try:
        with temporary_primitives(f, primitives):
            result = f(*traced_args)
    finally:
        stack.pop()
    tape.result = _result_to_tape(ctx, result)  # may read leaves: before leaf_vars
    tape.leaf_vars = [(t._path[0], t._path[1], t._var) for t in ctx.leaves]
    return _result_value(result), tape


def _argnames(f: Callable[..., Any], n: int) -> list[str]:
    import inspect

    try:
        params = list(inspect.signature(f).parameters.values())
    except (TypeError, ValueError):
        params = []
    names = [p.name for p in params if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
    if any(p.kind == p.VAR_POSITIONAL for p in params) or len(names) < n:
        names += [f"arg{i}" for i in range(len(names), n)]
    return names[:n]


def _result_to_tape(ctx: TraceContext, r: Any) -> Any:
    if isinstance(r, Tracer):
        if r._ctx is not ctx:
            raise TraceError("the function returned a value traced by another trace")
        return r.tape_var
    if isinstance(r, (np.ndarray, np.generic)):
        return ctx.array_var(r)
    if isinstance(r, (list, tuple)):
        return rebuild_sequence(r, [_result_to_tape(ctx, v) for v in r])
    if isinstance(r, dict):
        return {k: _result_to_tape(ctx, v) for k, v in r.items()}
    if isinstance(r, (float, int, bool)) or r is None:
        return r
    raise TraceError(f"{ctx.tape.fname} (defined at {ctx.tape.loc}) returned a "
                     f"{type(r).__name__}: a traced function returns arrays, floats, or "
                     "tuples, NamedTuples, lists and dicts of them")


def rebuild_sequence(like: list[Any] | tuple[Any, ...], items: list[Any]) -> Any:
    """``items`` in a sequence of ``like``'s type (a list, tuple or NamedTuple)."""
    return type(like)(*items) if hasattr(type(like), "_fields") else type(like)(items)


def _result_value(r: Any) -> Any:
    if isinstance(r, Tracer):
        return r.value
    if isinstance(r, (list, tuple)):
        return rebuild_sequence(r, [_result_value(v) for v in r])
    if isinstance(r, dict):
        return {k: _result_value(v) for k, v in r.items()}
    return r
