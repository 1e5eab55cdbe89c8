"""The traced value: ``Tracer``, and the recording of what user code does with it.

Tracing runs ``f`` on real values (as Yota.jl does): every tracer carries its example
value, so Python control flow sees real numbers. Where Python asks a traced value for
``bool``/``int``/``float``/``__index__``/``item()``, the answer is recorded as a guard.

``Tracer`` declares its whole surface here: Python's operators, the array methods and
properties, and NumPy's ``__array_ufunc__``/``__array_function__`` protocols. Each
dispatches into the NumPy → IR table (``yota.numpy``), whose entry names the operation,
checks its arguments and computes the example value; ``record`` puts the call on the tape.

Arrays from closures and globals are never silently frozen. One with at most
``CONST_LIMIT`` elements becomes a constant of the program, and a compiled program
checks before each call that it did not change in place (if it did, the function is
traced again; ``play`` refuses the stale tape). A larger one is an implicit input, read
at call time; rebinding its global name retraces. What user code computes from such
arrays with plain NumPy (not traced) is a constant of the trace, as are Python numbers
from closures and globals.

``yota.tracing.trace`` runs a function on tracers; ``yota.lowering.to_ir`` lowers the tape.
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Callable, Iterable, Iterator, Sequence
from typing import Any

import numpy as np

from yota.ir.errors import TraceError, UnsupportedError, YotaError
from yota.ir.types import DTYPE_NAMES, TensorType, tensor_type

from . import structs
from .aliasing import (
    Storage,
    creations,
    made_here,
    may_share_memory,
    permutation,
    positions,
    shares,
)
from .numpy import generated, registry  # importing yota.numpy registers every family
from .numpy.building import constructors
from .numpy.generated import Made
from .tape import Entry, Loc, Tape, Var
from .userloc import binding_name, forbid_math, store_error, user_loc, where

CONST_LIMIT = 1024  # arrays up to this many elements met in user code become constants
_local = threading.local()


class ConversionError(UnsupportedError):
    """A traced value converted to a plain array (``Tracer.__array__``)."""


class TraceContext:
    """The state of one trace: its tape and the tracers of its input leaves."""

    def __init__(self, tape: Tape) -> None:
        self.tape = tape
        self.struct_vars: dict[tuple[Any, ...], Var] = {}
        self.arrays: dict[int, tuple[np.ndarray | np.generic, Var]] = {}
        self.leaves: list[Tracer] = []
        self.inputs: list[Any] = []
        self.deferred: UnsupportedError | None = None  # raised when the function returns
        self.foreign: dict[int, tuple[Tracer, Var]] = {}  # enclosing traces' tracers used
        self.found: Any = None  # what the function reads from outside (yota.captured.Found)

    def foreign_var(self, t: Tracer) -> Var:
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

    def guard(self, t: Tracer, kind: str, expected: Any,
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
    stack = getattr(_local, "stack", None)
    return stack[-1] if stack else None


@contextlib.contextmanager
def active(ctx: TraceContext) -> Iterator[None]:
    """Make ``ctx`` the current trace of this thread while the block runs."""
    stack = getattr(_local, "stack", None)
    if stack is None:
        stack = _local.stack = []
    stack.append(ctx)
    try:
        with constructors(lambda x: isinstance(x, Tracer), call), \
                creations(lambda a, name, args, kwargs: Tracer(
                    ctx, None, a, store=Storage(const=True)).made_by(
                        generated.leaf(name, args, kwargs, a, user_loc()))):
            yield
    finally:
        stack.pop()


# -- the operations on a Tracer: each one is an entry of the NumPy → IR table ----------------
Method = Callable[..., Any]


BOXES: list[type] = []  # mutable boxes used as their ``value`` (yota.autograd.Param)


def _unbox(x: Any) -> Any:
    """A box's value in place of the box (also in a list or tuple of operands)."""
    if not BOXES:
        return x
    if any(isinstance(x, t) for t in BOXES):
        return x.value
    if isinstance(x, (list, tuple)) and not hasattr(type(x), "_fields") and BOXES:
        return type(x)(_unbox(v) for v in x)
    return x


def call(name: str, *args: Any, **kwargs: Any) -> Any:
    """Trace NumPy-level operation ``name`` (an entry of ``yota.numpy``) on ``args``;
    with ``out=``, the result is then written into that array (``assign``)."""
    if BOXES:
        args, kwargs = _unbox(args), {k: _unbox(v) for k, v in kwargs.items()}
    if kwargs.get("out") is not None:
        return _call_out(name, args, kwargs)
    op = registry.lookup(name, args, kwargs)
    return record(name, args, kwargs, op.forward)


def _call_out(name: str, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
    out = kwargs.pop("out")
    what = f"np.{name}(..., out=...)"
    dst = _destination(out[0] if isinstance(out, tuple) and len(out) == 1 else out, what)
    r = call(name, *args, **kwargs)
    _check_cast(r, dst, name)
    assign(dst, Ellipsis, r, what, "Use the returned value")
    return dst


def call_operator(name: str, *args: Any) -> Any:
    """Trace a Python operator (``+``, ``-x``, ``abs``...): on Python floats it gives a
    Python float, which stays weak (NEP 50), where the NumPy function gives np.float64."""
    if BOXES:
        args = _unbox(args)
    op = registry.lookup(name, args, {})
    return record(name, args, {}, op.forward, python_op=True)


def _binary(name: str, reflected: bool = False) -> Method:
    """A binary operator: ``name`` on (self, other), or (other, self) when reflected."""

    def op(self: Tracer, other: Any) -> Any:
        if isinstance(other, str):
            return NotImplemented
        return call_operator(name, *((other, self) if reflected else (self, other)))

    return op


def _unary(name: str) -> Method:
    def op(self: Tracer) -> Any:
        return call_operator(name, self)

    return op


def _method(name: str) -> Method:
    """An array method that is the NumPy function of the same name: ``x.sum(axis=0)``."""

    def method(self: Tracer, *args: Any, **kwargs: Any) -> Any:
        return call(name, self, *args, **kwargs)

    method.__name__ = name
    return method


def _inplace(name: str, op: str) -> Method:
    """``x op= y``: NumPy computes ``x op y`` into ``x`` (same-kind casting); on an
    immutable scalar (a NumPy scalar, a Python number) it rebinds the name instead."""

    def method(self: Tracer, other: Any) -> Any:
        if isinstance(other, str):
            return NotImplemented
        r = call_operator(name, self, other)
        if self._store is None:
            return r
        _check_cast(r, self, name)
        assign(self, Ellipsis, r, f"in-place '{op}'",
                      f"Write x = x {op[:-1]} y instead, or operate on a copy (x.copy())")
        return self

    return method


def _check_cast(r: Any, dst: Tracer, name: str) -> None:
    rt = np.asarray(r.value if isinstance(r, Tracer) else r).dtype
    if not np.can_cast(rt, dst.dtype, casting="same_kind"):
        raise TypeError(f"Cannot cast ufunc '{name}' output from {rt!r} to {dst.dtype!r} "
                        f"with casting rule 'same_kind' (at {where()})")


def _plain_keys(key: Any) -> Any:
    """Constants of the trace in an index are the plain values NumPy would see."""
    if isinstance(key, tuple):
        return tuple(_plain_keys(k) for k in key)
    if isinstance(key, Tracer) and key.is_const:
        v = key.value
        return int(v) if np.ndim(v) == 0 and v.dtype.kind in "iu" else v
    return key


def _ranges_as_arrays(key: Any) -> Any:
    """A ``range`` in an index is the integer array NumPy makes of it."""
    if isinstance(key, range):
        return np.arange(key.start, key.stop, key.step)
    if isinstance(key, tuple):
        return tuple(_ranges_as_arrays(k) for k in key)
    return key


def _constant_masks_as_indices(key: Any) -> Any:
    """A boolean mask that is not traced (a constant of the trace) indexes as the integer
    arrays of its True positions, as in NumPy."""
    def bools(k: Any) -> Any:  # a list of Python bools is a mask, as in NumPy
        return np.array(k) if isinstance(k, list) and k and all(
            isinstance(v, (bool, np.bool_)) for v in k) else k

    key = tuple(bools(k) for k in key) if isinstance(key, tuple) else bools(key)
    keys = key if isinstance(key, tuple) else (key,)
    if not any(isinstance(k, np.ndarray) and k.dtype.kind == "b" and k.ndim > 0
               for k in keys):
        return key
    out: list[Any] = []
    for k in keys:
        if isinstance(k, np.ndarray) and k.dtype.kind == "b" and k.ndim > 0:
            out.extend(np.nonzero(k))
        else:
            out.append(k)
    return tuple(out)


def _is_mask(k: Any) -> bool:
    if isinstance(k, (Tracer, np.ndarray)):
        return k.dtype.kind == "b"
    if isinstance(k, list):
        return bool(k) and all(_is_mask(v) for v in k)
    return isinstance(k, (bool, np.bool_))


class UnsupportedAttribute(UnsupportedError, AttributeError):
    """An ndarray method or attribute that Yota does not trace."""


class Tracer:
    """A traced array: behaves like a NumPy array and records what is done with it."""

    __slots__ = ("_ctx", "_var", "value", "_path", "_store", "_link", "_ver", "_cst",
                 "_made", "__weakref__")
    __array_priority__ = 1000.0

    def __init__(self, ctx: TraceContext, var: Var | None, value: Any,
                 path: tuple[Any, ...] = (), store: Storage | None = None,
                 const: bool = False) -> None:
        self._ctx = ctx
        self._var = var
        self.value = value
        self._path = path
        # the memory this array shares with its views (None: an immutable scalar); by
        # default a new array the function owns (a random draw, say)
        self._store = (store or Storage(const=False)) if isinstance(value, np.ndarray) \
            else None
        self._link: ViewLink | None = None  # how this view is made from its parent
        self._ver = 0  # the storage version _var is of
        self._cst = const  # a scalar that is a constant of the trace
        self._made: tuple[Made, int] | None = None  # how a constant was made, at a version

    @property
    def tape_var(self) -> Var:
        s = self._store
        if s is not None and self._ver != s.version:  # written since: derive it again
            self._ver = s.version
            if s.const:
                self._var = None
            elif self._link is not None:
                self._var = self._link.redo()
        if self._var is None:
            if self.is_const:
                self._var = self._ctx.const_var(self.value, self.weak, self.made)
            else:
                self._var = self._ctx.leaf_var(self)
        return self._var

    def made_by(self, made: Made | None) -> Tracer:
        """Remember that this constant of the trace is made from shapes alone by ``made``
        (``yota.numpy.generated``), as its storage is now."""
        if made is not None and self._store is not None:
            self._made = (made, self._store.version)
        return self

    @property
    def made(self) -> Made | None:
        """How this constant was made from shapes alone, while nothing wrote into it."""
        m, s = self._made, self._store
        return m[0] if m is not None and s is not None and s.version == m[1] else None

    @property
    def is_const(self) -> bool:
        """Whether the value is a constant of the trace (made from no traced input)."""
        s = self._store
        return s.const if s is not None else self._cst

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

    # -- NumPy protocols: np.<ufunc>(x) and np.<function>(x) --------------------------------
    def __array_ufunc__(self, ufunc: np.ufunc, method: str, *inputs: Any, **kwargs: Any) -> Any:
        if method == "at":
            return ufunc_at(ufunc, *inputs)
        out = kwargs.pop("out", None)
        if out is not None:
            return ufunc_out(self, ufunc, method, inputs, kwargs, out)
        name, inputs, kwargs = registry.resolve_ufunc(ufunc, method, inputs, kwargs)
        return call(name, *inputs, **kwargs)

    def __array_function__(self, func: Callable[..., Any], types: Any, args: Any,
                           kwargs: Any) -> Any:
        query = registry.QUERIES.get(func)
        if query is not None:  # np.shape, np.ndim, np.size: Python values, as x.shape
            return query(*to_value(args), **kwargs)
        write = WRITE_FUNCTIONS.get(func)
        if write is not None:  # np.copyto, np.put_along_axis, np.put: writes
            return write(*args, **kwargs)
        composed = registry.COMPOSED.get(func)
        if composed is not None:  # np.linspace & co.: NumPy calls on the traced values
            out = composed(*args, **kwargs)
            if out is not NotImplemented:  # (declined: the entry's case)
                return out
        return call(registry.resolve_function(func), *args, **kwargs)

    def __array__(self, dtype: Any = None, copy: Any = None) -> np.ndarray:
        if self.is_const:  # a constant of the trace is the plain array it holds
            return np.asarray(self.value, dtype=dtype)
        if dtype is not None and np.dtype(dtype).kind in "iu":  # np.int64(x)
            if self.ndim == 0:  # Python's int of it: a guard, as int(x)
                return np.asarray(self._ctx.guard(self, "int", int(self.value)), dtype)
            raise ConversionError(f"np.{np.dtype(dtype).name}(x) of a traced array at "
                                  f"{where()}: write x.astype(np.{np.dtype(dtype).name})")
        raise ConversionError(
            f"a traced value is converted to a plain NumPy array at {where()}: the result "
            "would be a constant cut off from the inputs. This happens with numpy "
            "functions and ufuncs imported by name before the call (from numpy import exp: "
            "write np.exp, or np.exp(np.array([a, b])) for a list holding traced values), "
            "when an array made by the function is indexed by a traced index (write "
            "np.take(X, idx, axis=0)), or in a library that is not NumPy (wrap that code in a function decorated "
            "@yota.primitive(opaque=True): it is called on plain arrays when the program "
            "runs, and its @yota.diffrule gives its gradient)"
        )

    @property
    def __array_interface__(self) -> dict[str, Any]:
        """A constant's memory, as its array's; a traced value has none to give (NumPy
        reads it for ``as_strided``, buffers and ctypes): a clear error."""
        if self.is_const:
            return dict(np.asarray(self.value).__array_interface__)
        raise AttributeError("__array_interface__")  # (NumPy then tries __array__)

    def __getattr__(self, name: str) -> Any:
        """Only reached for names the class does not define: an ndarray method or attribute
        that is not traced is a clear error (still an ``AttributeError`` for ``hasattr``)."""
        if name == "__array_interface__":  # (an AttributeError: NumPy then tries __array__)
            raise UnsupportedAttribute(
                f"np.lib.stride_tricks.as_strided (or a buffer, or ctypes) reads the memory "
                f"of a traced value at {where()}: a compiled program has no such array. Use "
                "np.lib.stride_tricks.sliding_window_view or indexing instead, or wrap the "
                "code in a @yota.primitive(opaque=True) function")
        if name.startswith("__") or not hasattr(np.ndarray, name):
            raise AttributeError(f"'Tracer' object has no attribute {name!r}")
        raise UnsupportedAttribute(
            f"ndarray.{name} is used on a traced value at {where()}, and Yota does not trace "
            f"it: use the NumPy function (np.{name}(x, ...)) if Yota supports it, or wrap the "
            "code in a @yota.primitive(opaque=True) function with a @yota.diffrule")

    # -- Python operators: NumPy's ufuncs, with Python's weak scalars -----------------------
    __add__, __radd__ = _binary("add"), _binary("add", reflected=True)
    __sub__, __rsub__ = _binary("subtract"), _binary("subtract", reflected=True)
    __mul__, __rmul__ = _binary("multiply"), _binary("multiply", reflected=True)
    __truediv__, __rtruediv__ = _binary("divide"), _binary("divide", reflected=True)
    __floordiv__ = _binary("floor_divide")
    __rfloordiv__ = _binary("floor_divide", reflected=True)
    __mod__, __rmod__ = _binary("remainder"), _binary("remainder", reflected=True)
    __divmod__, __rdivmod__ = _binary("divmod"), _binary("divmod", reflected=True)
    __pow__, __rpow__ = _binary("power"), _binary("power", reflected=True)
    __matmul__, __rmatmul__ = _binary("matmul"), _binary("matmul", reflected=True)
    __and__, __rand__ = _binary("bitwise_and"), _binary("bitwise_and", reflected=True)
    __or__, __ror__ = _binary("bitwise_or"), _binary("bitwise_or", reflected=True)
    __xor__, __rxor__ = _binary("bitwise_xor"), _binary("bitwise_xor", reflected=True)
    __lt__, __le__ = _binary("less"), _binary("less_equal")
    __gt__, __ge__ = _binary("greater"), _binary("greater_equal")
    __eq__, __ne__ = _binary("equal"), _binary("not_equal")
    __hash__ = object.__hash__
    __neg__, __pos__ = _unary("negative"), _unary("positive")
    __abs__, __invert__ = _unary("absolute"), _unary("invert")

    # in-place operators: a new version of the array (``assign`` below)
    __iadd__, __isub__ = _inplace("add", "+="), _inplace("subtract", "-=")
    __imul__, __itruediv__ = _inplace("multiply", "*="), _inplace("divide", "/=")
    __ifloordiv__, __imod__ = _inplace("floor_divide", "//="), _inplace("remainder", "%=")
    __ipow__, __imatmul__ = _inplace("power", "**="), _inplace("matmul", "@=")
    __iand__, __ior__ = _inplace("bitwise_and", "&="), _inplace("bitwise_or", "|=")
    __ixor__ = _inplace("bitwise_xor", "^=")

    # -- array methods and properties --------------------------------------------------------
    sum, mean, prod = _method("sum"), _method("mean"), _method("prod")
    max, min = _method("max"), _method("min")
    argmax, argmin = _method("argmax"), _method("argmin")
    var, std = _method("var"), _method("std")
    any, all = _method("any"), _method("all")
    cumsum, cumprod = _method("cumsum"), _method("cumprod")
    argsort = _method("argsort")
    ravel, squeeze, swapaxes = _method("ravel"), _method("squeeze"), _method("swapaxes")
    dot, astype, copy, round = _method("dot"), _method("astype"), _method("copy"), _method("round")
    repeat, take, diagonal, trace = (_method("repeat"), _method("take"), _method("diagonal"),
                                     _method("trace"))

    def reshape(self, *shape: Any, order: str = "C") -> Any:
        if len(shape) == 1 and not isinstance(shape[0], (int, np.integer)):
            shape = tuple(shape[0])
        return call("reshape", self, shape, order=order)

    def transpose(self, *axes: Any) -> Any:
        if len(axes) == 1 and not isinstance(axes[0], (int, np.integer)):
            axes = tuple(axes[0]) if axes[0] is not None else ()
        return call("transpose", self, axes or None)

    @property
    def T(self) -> Any:
        return call("transpose", self)

    @property
    def mT(self) -> Any:
        return call("swapaxes", self, -1, -2)

    def flatten(self, order: str = "C") -> Any:
        return call("ravel", self)

    def clip(self, min: Any = None, max: Any = None, **kw: Any) -> Any:
        return call("clip", self, min, max, **kw)  # ndarray.clip: either bound may be left out

    def __getitem__(self, key: Any) -> Any:
        if type(key) is int or type(key) is slice:  # x[i], x[a:b]: nothing to rewrite
            return call("getitem", self, key)
        key = _constant_masks_as_indices(_ranges_as_arrays(_plain_keys(key)))
        if isinstance(key, Tracer) and key.dtype.kind == "b" and key.shape == \
                self.shape[:key.ndim]:
            return MaskSelection(self, key)  # only its size can be read: a guard
        for k in key if isinstance(key, tuple) else (key,):
            if _is_mask(k):
                raise UnsupportedError(
                    f"boolean mask indexing at {where()}: the result's shape would depend on "
                    "the data. Use np.where(mask, x, 0) or integer indices instead")
        return call("getitem", self, key)

    def __setitem__(self, key: Any, value: Any) -> None:
        """``x[key] = value``: a new version of ``x`` (and of the arrays sharing its
        memory), as ``assign`` describes."""
        key = _constant_masks_as_indices(_ranges_as_arrays(_plain_keys(key)))
        if isinstance(key, Tracer) and key.dtype.kind == "b" and key.ndim > 0:
            assign_mask(self, key, value)
            return
        for k in key if isinstance(key, tuple) else (key,):
            if _is_mask(k):
                raise UnsupportedError(
                    f"boolean mask assignment with a traced mask inside a tuple index at "
                    f"{where()}: use x[mask] = v with one mask, or np.where(mask, v, x)")
        if isinstance(value, MaskedUpdate):
            raise UnsupportedError(f"x[mask] op= v is written back with another index at "
                                   f"{where()}: write x[mask] = np.where(...) instead")
        if isinstance(value, (list, tuple)) and find_context(value) is not None:
            value = np.array(value)  # traced: np.array of traced values is recorded
        assign(self, key, value, "x[...] = ...", "Write into a copy (y = x.copy(); "
                      "y[...] = ...), or build a new array (np.where(mask, new, x), "
                      "np.concatenate, arithmetic)")

    def fill(self, value: Any) -> None:
        assign(self, Ellipsis, value, "x.fill(...)", "Use np.full_like(x, value)")

    itemsize = property(lambda self: self.dtype.itemsize)
    nbytes = property(lambda self: self.size * self.dtype.itemsize)

    # -- Python conversions: guards ------------------------------------------------------
    def __bool__(self) -> bool:
        if self.is_const:
            return bool(self.value)
        return self._ctx.guard(self, "bool", bool(self.value), store_error("bool"))

    def __int__(self) -> int:
        if self.is_const:
            return int(self.value)
        forbid_math("int")
        return self._ctx.guard(self, "int", int(self.value), store_error("int"))

    def __index__(self) -> int:
        if np.asarray(self.value).dtype.kind not in "biu":
            raise TypeError("only integer arrays can be used as an index")
        if self.is_const:
            return int(self.value)
        return self._ctx.guard(self, "int", int(self.value))

    def __float__(self) -> float:
        if self.is_const:
            return float(self.value)
        forbid_math("float")
        return self._ctx.guard(self, "float", float(self.value), store_error("float"))

    def __complex__(self) -> complex:
        raise UnsupportedError(f"complex() of a traced value at {where()}: Yota "
                               "differentiates real-valued code")

    def item(self, *args: Any) -> Any:
        """The Python number, as ``float()``/``int()``/``bool()`` give it: a guard.
        ``x.item(i)`` (a flat index) and ``x.item(i, j)`` read one element, as NumPy."""
        if args:
            key = args[0] if len(args) == 1 else args
            if isinstance(key, tuple):
                return self[key].item()
            try:
                np.asarray(self.value).item(key)  # NumPy's IndexError/TypeError
            except IndexError as e:
                raise IndexError(f"{e} (x.item at {where()})") from None
            return self.reshape(-1)[int(key)].item()
        value = np.asarray(self.value).item()
        if self.is_const:
            return value
        kind = {bool: "bool", int: "int"}.get(type(value), "float")
        return self._ctx.guard(self, kind, value)

    def tolist(self) -> Any:
        if self.is_const:
            return np.asarray(self.value).tolist()
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


class MaskSelection:
    """``x[mask]`` with a traced mask: a value whose shape depends on the data. Its size,
    shape and length can be read (the number of True entries is a guard, like ``int()``:
    a replay with another count retraces); ``x[mask] op= v`` writes ``x`` where the mask
    holds; anything else is an error naming the line, since no compiled program can hold
    it."""

    def __init__(self, x: Tracer, mask: Tracer) -> None:
        self.x, self.mask = x, mask
        self.dtype = x.dtype
        self._loc = where()

    @property
    def shape(self) -> tuple[int, ...]:
        n = int(call("count_nonzero", self.mask))
        return (n, *self.x.shape[self.mask.ndim:])

    ndim = property(lambda self: self.x.ndim - self.mask.ndim + 1)
    size = property(lambda self: int(np.prod(self.shape)))

    def __len__(self) -> int:
        return self.shape[0]

    def _refuse(self, *args: Any, **kwargs: Any) -> Any:
        raise UnsupportedError(
            f"x[mask] at {self._loc} is used in a computation, but its shape depends on the "
            "data (only its size, shape and length can be read). Use np.where(mask, x, 0) "
            "(and np.sum(mask) to count)")

    def __getattr__(self, name: str) -> Any:
        self._refuse()

    __array_ufunc__ = __array_function__ = __array__ = _refuse
    __add__ = __radd__ = __sub__ = __rsub__ = __mul__ = __rmul__ = __truediv__ = _refuse
    __rtruediv__ = __pow__ = __matmul__ = __rmatmul__ = __neg__ = __getitem__ = _refuse
    __iter__ = __float__ = __int__ = __bool__ = __lt__ = __gt__ = __le__ = __ge__ = _refuse


def _masked(name: str) -> Method:
    """``x[mask] op= v``: ``x op v`` where the mask holds (``v`` broadcast over the
    selected rows), written back by the ``x[mask] = ...`` that Python runs next."""

    def method(self: MaskSelection, other: Any) -> Any:
        rest = self.x.shape[self.mask.ndim:]
        oshape = np.shape(other.value if isinstance(other, Tracer) else other)
        if len(oshape) > len(rest) and not (len(oshape) == len(rest) + 1 and oshape[0] == 1):
            raise UnsupportedError(
                f"x[mask] op= v at {where()} with one value per selected element: the number "
                "of selected elements depends on the data. Write x = np.where(mask, x op v, x) "
                "with v of x's shape")
        return MaskedUpdate(self.x, self.mask, call_operator(name, self.x, other))

    return method


for _op, _name in [("add", "add"), ("sub", "subtract"), ("mul", "multiply"),
                   ("truediv", "divide"), ("floordiv", "floor_divide"), ("mod", "remainder"),
                   ("pow", "power"), ("and", "bitwise_and"), ("or", "bitwise_or"),
                   ("xor", "bitwise_xor")]:
    setattr(MaskSelection, f"__i{_op}__", _masked(_name))


class MaskedUpdate:
    """The value of ``x[mask] op= v`` before it is stored back: ``x op v`` everywhere."""

    def __init__(self, x: Tracer, mask: Tracer, full: Tracer) -> None:
        self.x, self.mask, self.full = x, mask, full


# -- recording ------------------------------------------------------------------------
def find_context(*objs: Any) -> TraceContext | None:
    """The trace that records an operation on ``objs``: the innermost active one when a
    tracer of an enclosing trace is used inside a nested trace."""
    ctx = _find_context(*objs)
    return None if ctx is None else _innermost(ctx)


def _innermost(ctx: TraceContext) -> TraceContext:
    """``ctx``, or the innermost active trace when ``ctx`` is an enclosing one."""
    stack = getattr(_local, "stack", None)
    if stack and stack[-1] is not ctx and ctx in stack:
        return stack[-1]
    return ctx


def _find_context(*objs: Any) -> TraceContext | None:
    for o in objs:
        if isinstance(o, Tracer):
            return o._ctx
        if isinstance(o, (list, tuple)):
            c = _find_context(*o)
            if c is not None:
                return c
        elif isinstance(o, dict):
            c = _find_context(*o.values())
            if c is not None:
                return c
    return None


def to_tape(ctx: TraceContext, x: Any) -> Any:
    """Replace tracers by their Vars and arrays by const/captured Vars (lists kept).

    NumPy integer and bool scalars stay as they are: like Python ints they are usually
    axes, sizes or indices, and a lowering reads them as static values."""
    if isinstance(x, Tracer):
        return x.tape_var if x._ctx is ctx else ctx.foreign_var(x)
    if isinstance(x, np.ndarray) or (
            isinstance(x, np.generic) and not isinstance(x, (np.integer, np.bool_))):
        return ctx.array_var(x)
    if isinstance(x, list):
        return [to_tape(ctx, v) for v in x]
    if isinstance(x, tuple):
        return tuple([to_tape(ctx, v) for v in x])
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


def _tracers(x: Any) -> Iterator[Tracer]:
    if isinstance(x, Tracer):
        yield x
    elif isinstance(x, (list, tuple)):
        for v in x:
            yield from _tracers(v)
    elif isinstance(x, dict):
        for v in x.values():
            yield from _tracers(v)
    elif isinstance(x, slice):
        yield from _tracers((x.start, x.stop, x.step))


def record(key: str, args: tuple[Any, ...], kwargs: dict[str, Any],
           forward: Callable[..., Any], extra: Any = None, display: str | None = None,
           python_op: bool = False, link: bool = True) -> Any:
    """Run ``forward`` on the example values and record it on the tape as ``key``.

    The result is weak (a Python scalar, NEP 50) when every traced input is weak and
    the operation is a Python operator or returns a Python scalar itself; NumPy
    functions return strong NumPy scalars (``np.exp(1.0)`` is an ``np.float64``).

    When every traced input is a constant of the trace (made by the function from no
    input), nothing is recorded: the result is a constant too. A result that shares memory
    with an input (NumPy made a view) shares its storage (``yota.aliasing``); ``link``:
    remember how to derive it again after a write (off for replays and writes)."""
    ctx, ins, leaves = _operands(args, kwargs)
    if ctx is None:
        return forward(*args, **kwargs)
    loc = user_loc(2)
    const, tape_args, tape_kwargs = _tape_operands(ctx, ins, args, kwargs)
    value = _run(forward, args, kwargs, leaves is not None, display or key, loc)
    weak = (python_op or type(value) in (float, int, bool)) and (
        _all_weak((args, list(kwargs.values()))) if leaves is None else _weak_leaves(leaves))
    multi = isinstance(value, (list, tuple))
    outs, tracers = [], []
    for j, raw in enumerate(value if multi else (value,)):
        v = _normalize_output(raw, weak, key, loc)
        var = None if const else ctx.tape.new_var(_type_of(v), weak)
        outs.append(var)
        store, sharing = None, []
        if isinstance(raw, np.ndarray) and isinstance(v, np.ndarray):
            sharing = _sharing(raw, ins)
            store = _storage_of(raw, sharing, _flat((args, kwargs)) if leaves is None
                                else leaves, const)
        t = Tracer(ctx, var, v, (), store, const)
        if store is None:
            t._store = None  # a NumPy scalar or a Python number: immutable
        else:
            t._ver = store.version
            if const:
                t.made_by(generated.derive(key, args, kwargs, t.value, loc, _made_of))
            if link and store.owner is None and sharing:
                t._link = ViewLink(sharing[0], key, args, kwargs, forward,
                                   j if multi else None, python_op)
        tracers.append(t)
    if tape_args is not None and tape_kwargs is not None:  # not a constant
        ctx.tape.add(Entry("call", [v for v in outs if v is not None], display or key,
                           tape_args, tape_kwargs,
                           value=[t.value for t in tracers] if multi else tracers[0].value,
                           loc=loc, extra=extra))
    return _packed(value, tracers) if multi else tracers[0]


def _packed(value: list[Any] | tuple[Any, ...], tracers: list[Tracer]) -> Any:
    """The tracers of a call's several results, in the container NumPy returned them in."""
    if hasattr(value, "_fields"):  # a named tuple (np.linalg.slogdet's, eigh's...)
        return type(value)(*tracers)
    return type(value)(tracers) if isinstance(value, tuple) else tracers


def _tape_operands(ctx: TraceContext, ins: list[Tracer], args: tuple[Any, ...],
                   kwargs: dict[str, Any]) -> tuple[bool, Any, Any]:
    """Whether every traced operand is a constant of the trace (then nothing is recorded);
    else the arguments and keyword arguments as the tape holds them (``to_tape``)."""
    for t in ins:
        if not t.is_const:
            break
    else:
        return True, None, None
    tape_args = tuple([x.tape_var if isinstance(x, Tracer) and x._ctx is ctx
                       else to_tape(ctx, x) for x in args])
    return False, tape_args, {k: to_tape(ctx, v) for k, v in kwargs.items()} if kwargs else {}


def _sharing(raw: np.ndarray, ins: list[Tracer]) -> list[Tracer]:
    """The traced operands whose example values share memory with result ``raw``."""
    if type(raw) is not np.ndarray:
        return [x for x in ins if shares(raw, x.value)]
    if not raw.size:
        return []
    out = []
    for x in ins:  # shares(raw, x.value), its checks on raw made once above
        v = x.value
        if type(v) is np.ndarray:
            if v.size and may_share_memory(raw, v):
                out.append(x)
        elif shares(raw, v):
            out.append(x)
    return out


def _operands(args: tuple[Any, ...], kwargs: dict[str, Any]
              ) -> tuple[TraceContext | None, list[Tracer], Sequence[Any] | None]:
    """The trace that records a call (``find_context``), the tracers among its arguments
    (``_tracers``), and the arguments then keyword values as one flat sequence when none
    is a list, tuple or dict (the common case: one scan here serves every later walk of
    the arguments); None then when one is, and the callers walk the arguments instead."""
    leaves = args if not kwargs else (*args, *kwargs.values())
    first: Tracer | None = None
    ins: list[Tracer] = []
    for x in leaves:
        if isinstance(x, Tracer):
            if first is None:
                first = x
            ins.append(x)
        elif isinstance(x, (list, tuple, dict)):
            return find_context(args, kwargs), list(_tracers((args, kwargs))), None
        elif isinstance(x, slice):
            ins.extend(_tracers(x))
    return (None if first is None else _innermost(first._ctx)), ins, leaves


def _run(forward: Callable[..., Any], args: tuple[Any, ...], kwargs: dict[str, Any],
         flat: bool, what: str, loc: Loc | None) -> Any:
    """``forward`` on the example values (``flat``: no argument is a list or tuple)."""
    vargs: Any
    if flat:
        vargs = [x.value if isinstance(x, Tracer) else x for x in args]
        vkwargs = {k: x.value if isinstance(x, Tracer) else x for k, x in kwargs.items()
                   } if kwargs else {}
    else:
        vargs, vkwargs = to_value(args), {k: to_value(v) for k, v in kwargs.items()}
    try:
        return _quietly(forward, vargs, vkwargs)
    except YotaError:  # already says what and where (np.linalg's LinAlgError is a ValueError)
        raise
    except ValueError as e:
        at = loc.describe() if loc is not None else "an unknown place"
        raise OperandError(f"{what} at {at}: {e} (operands: "
                           f"{', '.join(_describe(a) for a in args)})") from e


@np.errstate(all="ignore")  # one decorated call: cheaper than a with-block per op
def _quietly(forward: Callable[..., Any], args: Any, kwargs: dict[str, Any]) -> Any:
    """``forward(*args, **kwargs)`` with NumPy's floating-point warnings off."""
    return forward(*args, **kwargs)


def _weak_leaves(leaves: Sequence[Any]) -> bool:
    """``_all_weak`` of flat arguments: some tracer, every tracer weak, and no array."""
    some = False
    for x in leaves:
        if isinstance(x, Tracer):
            if not x.weak:
                return False
            some = True
        elif isinstance(x, (np.ndarray, np.generic)):
            return False
    return some


def _type_of(v: Any) -> TensorType:
    """The type of a result's example value (an array, or a weak Python scalar)."""
    if type(v) is np.ndarray:
        return tensor_type(v.dtype, v.shape)
    return tensor_type(np.asarray(v).dtype, np.shape(v))


def _made_of(x: Any) -> Any:
    """A tracer's recipe (None without one); ``generated.NOT_TRACED`` for other values."""
    return x.made if isinstance(x, Tracer) else generated.NOT_TRACED


def _storage_of(raw: np.ndarray, sharing: list[Tracer], leaves: Iterable[Any],
                const: bool) -> Storage:
    """The storage of a new result: its operand's if NumPy made a view of it (``sharing``:
    the traced operands whose memory it shares), a storage owned by the caller if it views
    a plain array from outside (among the arguments' ``leaves``), else a new one."""
    for x in sharing:
        if x._store is not None:
            return x._store
    for a in leaves:
        if isinstance(a, np.ndarray) and shares(raw, a):
            return Storage(const=const, owner="an array from outside the function")
    return Storage(const=const)


def _flat(x: Any) -> Iterator[Any]:
    if isinstance(x, (list, tuple)):
        for v in x:
            yield from _flat(v)
    elif isinstance(x, dict):
        for v in x.values():
            yield from _flat(v)
    else:
        yield x


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
    if type(v) is np.ndarray and not weak and v.dtype in DTYPE_NAMES:
        return v  # an array of a supported dtype: np.asarray would return it
    if weak:
        return np.asarray(v).item()
    a = np.asarray(v)
    if a.dtype not in DTYPE_NAMES:
        at = loc.describe() if loc is not None else "an unknown place"
        raise TraceError(f"'{key}' at {at} produced dtype {a.dtype}, which Yota does not "
                         "support (float32, float64, int32, int64, bool)")
    return a


# -- writes: functionalized in-place assignment ---------------------------------------------------
# A write into a traced array ``t`` (``t[key] = v``, ``t += v``, ``np.add.at``, ``out=``...)
# is performed on the example values (NumPy's own semantics, views included) and recorded
# as a new SSA version of ``t``: a ``setitem``/``setmask``/``add_at`` entry whose result
# is the whole array after the write. Up the chain of views to the base, each parent gets a
# new version too (``ViewLink.undo``); the storage's version is bumped, so every other view
# of the memory is derived again from its parent when it is next read (``ViewLink.redo``).
# Arrays the caller owns (arguments and views of them) are never written.
class ViewLink:
    """How a view was made from its parent: the recorded call, replayed to derive the view
    again after a write (``redo``), and the write that stores a new value of the view
    into the parent (``undo``)."""

    __slots__ = ("parent", "key", "args", "kwargs", "forward", "index", "python_op")

    def __init__(self, parent: Tracer, key: str, args: tuple[Any, ...],
                 kwargs: dict[str, Any], forward: Callable[..., Any], index: int | None,
                 python_op: bool) -> None:
        self.parent, self.key, self.args, self.kwargs = parent, key, args, kwargs
        self.forward, self.index, self.python_op = forward, index, python_op

    def redo(self) -> Var:
        out = record(self.key, self.args, self.kwargs, self.forward,
                     python_op=self.python_op, link=False)
        t = out[self.index] if self.index is not None else out
        return t.tape_var

    def undo(self, child: Tracer, new: Var) -> Var:
        p = self.parent
        upd = Tracer(p._ctx, new, child.value)
        if self.key == "getitem" and self.index is None and self.args[0] is p:
            return _entry("setitem", p, self.args[1], upd, vshape=child.shape)
        pos = positions(p.value, child.value)
        if pos is None:
            raise UnsupportedError(f"a write at {where()} goes through a view made by "
                                   f"{self.key}, which Yota cannot write through: write into "
                                   "the array it views instead")
        if pos.size == p.value.size and np.array_equal(pos.ravel(), np.arange(pos.size)):
            return _entry("reshape", upd, p.shape)
        perm = permutation(p.shape, pos)
        if perm is not None:
            return _entry("transpose", upd, tuple(int(a) for a in np.argsort(perm)))
        return _entry("setflat", p, pos, upd)


_WRITE_ENTRIES = ("setitem", "setmask", "add_at", "setflat")


def _unchanged(x: Any, *args: Any, **kwargs: Any) -> Any:
    return x


def _entry(name: str, *args: Any, **kwargs: Any) -> Var:
    """Record table entry ``name`` (a new version of an array); its tape variable. A
    write's example value is not computed again (the write itself is made on the example
    values): the entry's forward returns ``x``, whose type the new version has."""
    forward = _unchanged if name in _WRITE_ENTRIES else registry.TABLE[name].forward
    out = record(name, args, kwargs, forward, link=False)
    return out.tape_var


def _write(t: Tracer, what: str, fix: str, new_var: Callable[[], Var],
           concrete: Callable[[], None], const: bool) -> None:
    """Write into ``t``: ``new_var()`` records its new version, ``concrete()`` writes the
    example values; ``const``: the value written is a constant of the trace."""
    s = t._store
    if s is None:
        raise TypeError(f"'{type(t.value).__name__}' object does not support item "
                        f"assignment (a NumPy scalar, at {where()})")
    if s.owner is not None:
        raise UnsupportedError(
            f"{what} at {where()} would mutate {s.owner}, an array the caller owns: Yota "
            f"never changes the caller's arrays. {fix}")
    if not t.value.flags.writeable:
        raise ValueError(f"assignment destination is read-only (at {where()})")
    if s.const:
        if const:  # constants stay constants: nothing to record
            concrete()
            s.version += 1
            return
        root = t
        while root._link is not None:
            root = root._link.parent
        made = root.made
        s.const = False
        s.version += 1  # every view is derived from the root again
        root._var, root._ver = t._ctx.const_var(root.value, made=made), s.version
    chain = [(t, new_var())]
    child = t
    while child._link is not None:
        chain.append((child._link.parent, child._link.undo(child, chain[-1][1])))
        child = child._link.parent
    concrete()
    s.version += 1
    for tr, var in chain:
        tr._var, tr._ver = var, s.version


def _probe(t: Tracer, key: Any, value: Any) -> tuple[int, ...]:
    """The shape of ``t[key]``; a NumPy error (as OperandError) if ``value`` cannot be
    stored there."""
    region = t.value[to_value(key)]
    probe = np.ndarray(np.shape(region), t.dtype)
    try:
        probe[...] = to_value(value)
    except ValueError as e:
        raise OperandError(f"x[...] = value at {where()}: {e}") from e
    return probe.shape


def _same_region(v: Any, region: Any) -> bool:
    return (isinstance(v, np.ndarray) and isinstance(region, np.ndarray)
            and v.__array_interface__["data"] == region.__array_interface__["data"]
            and v.shape == region.shape and v.strides == region.strides)


def assign(t: Tracer, key: Any, value: Any, what: str, fix: str) -> None:
    """``t[key] = value`` (a basic or integer-array index), NumPy's casting included."""
    if isinstance(value, Tracer) and value._store is not None and \
            value._store is t._store and value._ver == value._store.version and \
            _same_region(value.value, t.value[to_value(key)]):
        return  # x[i] += v: the view x[i] was written already
    vshape = _probe(t, key, value)
    const = all(x.is_const for x in _tracers((key, value)))
    cur = t.value

    def concrete() -> None:
        cur[to_value(key)] = to_value(value)

    _write(t, what, fix, lambda: _entry("setitem", t, key, value, vshape=vshape), concrete,
           const)


def assign_mask(t: Tracer, mask: Tracer, value: Any, left: bool = True) -> None:
    """``t[mask] = value`` with a traced boolean mask (``left``: the mask indexes the
    leading axes, as ``x[mask]`` does; else it broadcasts as ``where=`` does)."""
    if left and mask.shape != t.shape[:mask.ndim]:
        raise IndexError(f"boolean index of shape {mask.shape} does not match the indexed "
                         f"array of shape {t.shape} (at {where()})")
    full = isinstance(value, MaskedUpdate)
    v = value.full if isinstance(value, MaskedUpdate) else value
    vs = np.shape(to_value(v))
    rest = t.shape[mask.ndim:] if left else t.shape
    trimmed = vs[1:] if left and len(vs) == len(rest) + 1 and vs[:1] == (1,) else vs
    if not full and (len(trimmed) > len(rest) or np.broadcast_shapes(trimmed, rest) != rest):
        raise UnsupportedError(
            f"x[mask] = v at {where()} with v of shape {vs}: one value per selected element "
            "depends on the data. Write x = np.where(mask, v, x) with v of x's shape, or "
            "store one value (or one row) for every selected element")
    const = all(x.is_const for x in _tracers((mask, v)))
    cur = t.value

    def concrete() -> None:
        m = np.broadcast_to(np.asarray(mask.value).reshape(
            mask.shape + (1,) * (t.ndim - mask.ndim)) if left else mask.value, t.shape)
        np.copyto(cur, np.broadcast_to(np.asarray(to_value(v)), t.shape), casting="unsafe",
                  where=m)

    _write(t, "x[mask] = ...", "Use np.where(mask, v, x)",
           lambda: _entry("setmask", t, mask, v, left=left), concrete, const)


def _destination(dst: Any, what: str) -> Tracer:
    if not isinstance(dst, Tracer):
        raise UnsupportedError(
            f"{what} at {where()} writes traced values into a plain NumPy array: the "
            "function would keep a constant cut off from its inputs. Create the array inside "
            "the function (np.zeros, np.empty, x.copy()) or use the returned value")
    return dst


def ufunc_at(ufunc: np.ufunc, a: Any, indices: Any, b: Any = None) -> None:
    """``np.add.at(a, indices, b)`` (and ``np.subtract.at``): repeated indices accumulate;
    other ufuncs: ``yota.numpy.ufunc_at``. (By name: ``np.add`` is a stand-in while tracing.)"""
    what = f"np.{ufunc.__name__}.at"
    t = _destination(a, what)
    if ufunc.__name__ not in ("add", "subtract") or b is None:
        from .numpy.ufunc_at import ufunc_at_rounds
        return ufunc_at_rounds(ufunc, t, indices, b, what)
    key = _constant_masks_as_indices(_ranges_as_arrays(_plain_keys(indices)))
    v = -b if ufunc.__name__ == "subtract" else b
    vshape = _probe(t, key, v)
    const = all(x.is_const for x in _tracers((key, v)))
    cur = t.value

    def concrete() -> None:
        ufunc.at(cur, to_value(key), to_value(b))

    _write(t, what, "Write x = x + np.bincount(...) or use a copy (y = x.copy())",
           lambda: _entry("add_at", t, key, v, vshape=vshape), concrete, const)


def ufunc_out(self: Tracer, ufunc: np.ufunc, method: str, inputs: tuple[Any, ...],
              kwargs: dict[str, Any], out: Any) -> Any:
    """``np.<ufunc>(..., out=y)``: the result is computed, then written into ``y``."""
    outs = out if isinstance(out, tuple) else (out,)
    what = f"np.{ufunc.__name__}(..., out=...)"
    if len(outs) != 1:
        raise UnsupportedError(f"{what} with several outputs at {where()} is not supported")
    dst = _destination(outs[0], what)
    mask = kwargs.pop("where", True)
    r = self.__array_ufunc__(ufunc, method, *inputs, **kwargs)
    _check_cast(r, dst, ufunc.__name__)
    if mask is True:
        assign(dst, Ellipsis, r, what, "Use the returned value")
    else:
        assign_mask(dst, mask if isinstance(mask, Tracer) else _const_tracer(dst, mask), r,
                    left=False)
    return dst


def _const_tracer(like: Tracer, value: Any) -> Tracer:
    return Tracer(like._ctx, None, np.asarray(value), store=Storage(const=True))


def _copyto(dst: Any, src: Any, casting: str = "same_kind", where: Any = True) -> None:
    t = _destination(dst, "np.copyto")
    sv = src.value if isinstance(src, Tracer) else src
    if not isinstance(sv, (int, float, bool)) and not np.can_cast(
            np.asarray(sv).dtype, t.dtype, casting=casting):  # type: ignore[arg-type]
        raise TypeError(f"Cannot cast array data from {np.asarray(sv).dtype!r} to "
                        f"{t.dtype!r} according to the rule {casting!r}")
    if where is True:
        assign(t, Ellipsis, src, "np.copyto", "Use the returned value of np.where")
    else:
        m = where if isinstance(where, Tracer) else _const_tracer(t, where)
        assign_mask(t, m, src, left=False)


def _put_along_axis(arr: Any, indices: Any, values: Any, axis: int | None) -> None:
    t = _destination(arr, "np.put_along_axis")
    if axis is None:
        t, axis = t.reshape(-1), 0
    nd = t.ndim
    axis = axis % nd if -nd <= axis < nd else axis
    ishape = np.shape(to_value(indices))
    key: list[Any] = []
    for d in range(nd):
        if d == axis:
            key.append(indices)
        else:
            shape = [1] * nd
            shape[d] = ishape[d] if d < len(ishape) else 1
            key.append(np.arange(shape[d]).reshape(shape))
    assign(t, tuple(key), values, "np.put_along_axis", "Use a copy (y = x.copy())")


def _cycled(v: Any, n: int) -> Any:
    """``v`` flattened and repeated to ``n`` values, as ``np.put`` and
    ``np.fill_diagonal`` use their values (a scalar stays a scalar)."""
    if np.ndim(to_value(v)) == 0:
        return v
    flat = v.reshape(-1) if isinstance(v, Tracer) else np.ravel(v)
    size = int(np.size(to_value(flat)))
    return flat if size == n else flat[np.arange(n) % size]


def _put(a: Any, ind: Any, v: Any, mode: str = "raise") -> None:
    t = _destination(a, "np.put")
    if mode != "raise":
        raise UnsupportedError(f"np.put(..., mode={mode!r}) at {where()} is not supported")
    flat = t.reshape(-1)
    if flat._store is not t._store:
        raise UnsupportedError(f"np.put at {where()} into an array whose flattening is a "
                               "copy: make it contiguous first")
    idx = ind.reshape(-1) if isinstance(ind, Tracer) else np.ravel(ind)
    assign(flat, idx, _cycled(v, int(np.size(to_value(idx)))), "np.put",
           "Use a copy (y = x.copy())")


def _fill_diagonal(a: Any, val: Any, wrap: bool = False) -> None:
    t = _destination(a, "np.fill_diagonal")
    shape = t.shape
    if t.ndim < 2 or (t.ndim > 2 and len(set(shape)) != 1):
        raise ValueError("All dimensions of input must be of equal length")
    if wrap and t.ndim == 2 and shape[0] > shape[1] + 1:
        raise UnsupportedError(f"np.fill_diagonal(..., wrap=True) of a tall matrix at "
                               f"{where()} is not supported")
    k = min(shape)
    idx = np.arange(k)
    assign(t, (idx,) * t.ndim, _cycled(val, k), "np.fill_diagonal",
           "Use a copy (y = x.copy())")


WRITE_FUNCTIONS: dict[Any, Callable[..., Any]] = {
    np.copyto: _copyto,
    np.put_along_axis: _put_along_axis,
    np.put: _put,
    np.fill_diagonal: _fill_diagonal,
}
