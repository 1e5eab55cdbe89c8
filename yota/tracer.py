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
from collections.abc import Callable, Iterator
from typing import Any

import numpy as np

from yota.ir.errors import TraceError, UnsupportedError, YotaError
from yota.ir.types import DTYPE_NAMES, TensorType

from . import structs
from .numpy import registry  # importing yota.numpy registers every family
from .numpy.building import constructors
from .tape import Entry, Loc, Tape, Var
from .userloc import binding_name, forbid_math, store_error, user_loc, where

CONST_LIMIT = 1024  # arrays up to this many elements met in user code become constants
_local = threading.local()


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
            scope, name = binding_name(arr) if isinstance(arr, np.ndarray) else (None, "")
            if scope is not None:  # a global: rebinding its name makes the tape stale
                self.tape.bound_consts.append((arr, scope, name))
        else:
            entry = Entry("captured", [var], value=arr, extra=binding_name(arr),
                          loc=user_loc())
            self.tape.captured.append(entry)
        self.tape.add(entry)
        self.arrays[key] = (arr, var)  # keeps arr alive so its id stays unique
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
        with constructors(lambda x: isinstance(x, Tracer), call):  # np.array([traced, ...])
            yield
    finally:
        stack.pop()


# -- the operations on a Tracer: each one is an entry of the NumPy → IR table ----------------
Method = Callable[..., Any]


BOXES: list[type] = []  # mutable boxes used as their ``value`` (yota.autograd.Param)


def _unbox(x: Any) -> Any:
    """A box's value in place of the box (also in a list or tuple of operands)."""
    if any(isinstance(x, t) for t in BOXES):
        return x.value
    if isinstance(x, (list, tuple)) and not hasattr(type(x), "_fields") and BOXES:
        return type(x)(_unbox(v) for v in x)
    return x


def call(name: str, *args: Any, **kwargs: Any) -> Any:
    """Trace NumPy-level operation ``name`` (an entry of ``yota.numpy``) on ``args``."""
    if BOXES:
        args, kwargs = _unbox(args), {k: _unbox(v) for k, v in kwargs.items()}
    op = registry.lookup(name, args, kwargs)
    return record(name, args, kwargs, op.forward)


def call_operator(name: str, *args: Any) -> Any:
    """Trace a Python operator (``+``, ``-x``, ``abs``...): on Python floats it gives a
    Python float, which stays weak (NEP 50), where the NumPy function gives np.float64."""
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


def _inplace(op: str) -> Method:
    def method(self: Tracer, other: Any) -> Any:
        raise UnsupportedError(
            f"in-place '{op}' on a traced array at {where()}: it would mutate an array "
            f"that the program reads elsewhere. Write x = x {op[:-1]} y instead"
        )

    return method


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

    # -- NumPy protocols: np.<ufunc>(x) and np.<function>(x) --------------------------------
    def __array_ufunc__(self, ufunc: np.ufunc, method: str, *inputs: Any, **kwargs: Any) -> Any:
        name, inputs, kwargs = registry.resolve_ufunc(ufunc, method, inputs, kwargs)
        return call(name, *inputs, **kwargs)

    def __array_function__(self, func: Callable[..., Any], types: Any, args: Any,
                           kwargs: Any) -> Any:
        query = registry.QUERIES.get(func)
        if query is not None:  # np.shape, np.ndim, np.size: Python values, as x.shape
            return query(*to_value(args), **kwargs)
        return call(registry.resolve_function(func), *args, **kwargs)

    def __array__(self, dtype: Any = None, copy: Any = None) -> np.ndarray:
        raise UnsupportedError(
            f"a traced value is converted to a plain NumPy array at {where()}: the result "
            "would be a constant cut off from the inputs. This happens when a ufunc gets a "
            "list holding traced values (write np.exp(np.array([a, b]))), when a plain "
            "array is indexed by a traced index (write np.take(X, idx, axis=0)), with "
            "numpy functions imported by name before the call (from numpy import array), "
            "or in a library that is not NumPy (wrap that code in a @yota.primitive with a "
            "@yota.diffrule)"
        )

    def __getattr__(self, name: str) -> Any:
        """Only reached for names the class does not define: an ndarray method or attribute
        that is not traced is a clear error (still an ``AttributeError`` for ``hasattr``)."""
        if name.startswith("__") or not hasattr(np.ndarray, name):
            raise AttributeError(f"'Tracer' object has no attribute {name!r}")
        raise UnsupportedAttribute(
            f"ndarray.{name} is used on a traced value at {where()}, and Yota does not trace "
            f"it: use the NumPy function (np.{name}(x, ...)) if Yota supports it, or wrap the "
            "code in a @yota.primitive with a @yota.diffrule")

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

    # in-place operators would mutate an array the program reads elsewhere: refused
    __iadd__, __isub__, __imul__ = _inplace("+="), _inplace("-="), _inplace("*=")
    __itruediv__, __ipow__, __imatmul__ = _inplace("/="), _inplace("**="), _inplace("@=")

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
        key = _constant_masks_as_indices(_ranges_as_arrays(key))
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
        raise UnsupportedError(
            f"in-place assignment x[...] = ... to a traced array at {where()}: Yota "
            "differentiates pure functions. Build a new array instead (np.where(mask, new, x), "
            "np.concatenate, or arithmetic)"
        )

    # -- Python conversions: guards ------------------------------------------------------
    def __bool__(self) -> bool:
        return self._ctx.guard(self, "bool", bool(self.value), store_error("bool"))

    def __int__(self) -> int:
        forbid_math("int")
        return self._ctx.guard(self, "int", int(self.value), store_error("int"))

    def __index__(self) -> int:
        if np.asarray(self.value).dtype.kind not in "biu":
            raise TypeError("only integer arrays can be used as an index")
        return self._ctx.guard(self, "int", int(self.value))

    def __float__(self) -> float:
        forbid_math("float")
        return self._ctx.guard(self, "float", float(self.value), store_error("float"))

    def __complex__(self) -> complex:
        raise UnsupportedError(f"complex() of a traced value at {where()}: Yota "
                               "differentiates real-valued code")

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


class MaskSelection:
    """``x[mask]`` with a traced mask: a value whose shape depends on the data. Its size,
    shape and length can be read (the number of True entries is a guard, like ``int()``:
    a replay with another count retraces); anything else is an error naming the line,
    since no compiled program can hold it."""

    def __init__(self, x: Tracer, mask: Tracer) -> None:
        n = int(call("count_nonzero", mask))
        self.shape = (n, *x.shape[mask.ndim:])
        self.ndim = len(self.shape)
        self.size = int(np.prod(self.shape))
        self.dtype = x.dtype
        self._loc = where()

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


# -- recording ------------------------------------------------------------------------
def find_context(*objs: Any) -> TraceContext | None:
    """The trace that records an operation on ``objs``: the innermost active one when a
    tracer of an enclosing trace is used inside a nested trace."""
    ctx = _find_context(*objs)
    stack = getattr(_local, "stack", None)
    if ctx is not None and stack and stack[-1] is not ctx and ctx in stack:
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
    except YotaError:  # already says what and where (np.linalg's LinAlgError is a ValueError)
        raise
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
        if hasattr(value, "_fields"):  # a named tuple (np.linalg.slogdet's, eigh's...)
            return type(value)(*tracers)
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
