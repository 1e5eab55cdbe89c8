"""Custom primitives: functions recorded as one tape entry (lowered by ``yota.lowering``
to an IR ``call`` of their traced body), and *opaque* primitives, whose body is not
traced but called on NumPy arrays when the compiled program runs (``OpaquePrimitive``:
an IR ``call`` of a body that is one ``callback`` op, ``yota.ir.ops.callback``)."""

from __future__ import annotations

import ast
import contextlib
import functools
import hashlib
import inspect
import sys
import types
from collections.abc import Callable, Iterator, Sequence
from typing import Any, overload

import numpy as np

from yota.ir.core import Function, Value, make_op
from yota.ir.errors import TraceError
from yota.ir.ops.callback import CALLBACKS, results_attr
from yota.ir.types import TensorType

from .patching import NumpyPatch
from .recording import find_context, record
from .tape import Entry
from .tracer import Tracer


def primitive_key(fn: Callable[..., Any]) -> str:
    return f"{getattr(fn, '__module__', '?')}.{getattr(fn, '__qualname__', repr(fn))}"


class Primitive:
    """A function traced as a unit: one tape entry, one IR ``call`` of its body.

    >>> import numpy as np, yota
    >>> @yota.primitive
    ... def logistic(x):
    ...     return 1 / (1 + np.exp(-x))
    >>> _, tape = yota.trace(lambda x: np.sum(logistic(x)), np.zeros(3))
    >>> "logistic(%1)" in str(tape)
    True
    """

    opaque = False

    def __init__(self, fn: Callable[..., Any]) -> None:
        functools.update_wrapper(self, fn)
        self.fn = fn
        self.key = primitive_key(fn)

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        if find_context(args) is None:
            return self.fn(*args, **kwargs)
        if find_context(kwargs) is not None:
            raise TraceError(f"primitive {self.key}: keyword arguments must be static "
                             "(ints, floats, strings, tuples), not traced arrays")
        for a in args:
            if not isinstance(a, (Tracer, np.ndarray, np.generic, int, float, bool)):
                raise TraceError(f"primitive {self.key}: positional arguments must be arrays "
                                 f"or scalars, got {type(a).__name__}")
        examples = tuple(a.value if isinstance(a, Tracer) else a for a in args)
        return record(self.key, args, kwargs, self._example, extra=(self, examples),
                      display=getattr(self.fn, "__name__", self.key))

    def _example(self, *args: Any, **kwargs: Any) -> Any:
        return self.fn(*args, **kwargs)

    def __get__(self, obj: Any, objtype: Any = None) -> Any:
        return self if obj is None else functools.partial(self, obj)

    def __repr__(self) -> str:
        return f"<yota.primitive {self.key}>"


class OpaquePrimitive(Primitive):
    """A function Yota does not trace: called on NumPy arrays when the compiled program
    runs (JAX's ``pure_callback``), on every backend (a call out of native code; on CUDA,
    through host memory). Its gradient is its ``@yota.diffrule``'s, which is traced
    (and may call opaque primitives itself).

    It must be a pure function of its arguments: arrays and floats (positional), with
    ints, bools and keyword arguments as constants of the program. It returns an array,
    a float, or a tuple of them, of the same shapes and dtypes at every call.

    >>> import numpy as np, yota
    >>> @yota.primitive(opaque=True)
    ... def cube(x):
    ...     return np.asarray(x) ** 3      # any code: SciPy, C, Fortran
    >>> @yota.diffrule(cube, "x")
    ... def _(x, *, y, dy):
    ...     return 3 * x ** 2 * dy
    >>> val, g = yota.grad(lambda x: np.sum(cube(x)), np.array([1.0, 2.0]))
    >>> float(val), g[0].tolist()
    (9.0, [3.0, 12.0])
    """

    opaque = True

    def __init__(self, fn: Callable[..., Any]) -> None:
        super().__init__(fn)
        self.callback_key = f"{self.key}#{code_digest(fn)}"
        CALLBACKS[self.callback_key] = self._run

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        if find_context(args) is None:
            return self.fn(*args, **kwargs)
        return super().__call__(*args, **kwargs)

    def _example(self, *args: Any, **kwargs: Any) -> Any:
        with NumpyPatch.suspended():  # the body's own NumPy calls make plain arrays
            out = self.fn(*args, **kwargs)
        # remembered for tracing its diffrule on these values, not on ones (rules.py)
        arrays = [np.asarray(a) for a in args if not _static_arg(a)]
        results = [np.asarray(r) for r in (out if isinstance(out, (tuple, list)) else [out])]
        types = tuple(TensorType(a.dtype, a.shape) for a in arrays + results)
        EXAMPLES[(self.key, types)] = arrays + results
        return out

    def _run(self, static: Any, arrays: list[np.ndarray]) -> Sequence[Any]:
        """Call the function at run time: constants from ``static``, arrays in between
        (those that were Python floats while tracing as floats again)."""
        n, fixed, floats, kwargs = static
        it = iter(arrays)
        args = [fixed[i] if i in fixed else next(it) for i in range(n)]
        for i in floats:
            args[i] = float(args[i])
        out = self.fn(*args, **kwargs)
        return list(out) if isinstance(out, (tuple, list)) else [out]

    def ir_body(self, e: Entry, dyn: list[int], operands: list[TensorType]) -> Function:
        """The IR body of the call recorded as ``e``: one ``callback`` op (``dyn``: the
        positions of the arguments that are operands, of types ``operands``)."""
        names = param_names(self.fn, len(e.args))
        fixed = {i: _plain(a) for i, a in enumerate(e.args) if i not in dyn}
        floats = [i for i in dyn if isinstance(e.args[i], float) or (
            getattr(e.args[i], "weak", False) and e.args[i].type.dtype.kind == "f")]
        kwargs = {k: _plain(v) for k, v in e.kwargs.items()}
        static = repr((len(e.args), fixed, floats, kwargs))
        try:
            ast.literal_eval(static)
        except (ValueError, SyntaxError):
            raise TraceError(f"opaque primitive {self.key}: its constant arguments must be "
                             f"Python literals (numbers, strings, tuples); got {static}") from None
        ins = [Value(t) for t in operands]
        outs = [v.type for v in e.outs if v.type is not None]
        op = make_op("callback", ins, {"fn": self.callback_key, "static": static,
                                       "results": results_attr(outs)})
        attrs: dict[str, Any] = {"primitive": self.key, "argnames": tuple(names[i] for i in dyn)}
        consts = {names[i]: fixed[i] for i in fixed} | kwargs
        if consts:
            attrs["kwargs"] = tuple((k, static_attr(v)) for k, v in consts.items())
        name = getattr(self.fn, "__name__", "opaque")
        return Function(name, ins, [op], list(op.results), attrs=attrs)


# (primitive key, operand and result types) -> example values of the last traced call
EXAMPLES: dict[tuple[str, tuple[TensorType, ...]], list[np.ndarray]] = {}


def _plain(v: Any) -> Any:
    """NumPy scalars as Python numbers (their ``repr`` is a Python literal)."""
    return v.item() if isinstance(v, np.generic) else v


def _static_arg(a: Any) -> bool:
    """An argument the call's IR takes as a constant (``lowering._is_static``)."""
    return isinstance(a, (int, bool)) and not isinstance(a, np.generic)


def code_digest(fn: Callable[..., Any]) -> str:
    """A digest of what ``fn`` runs: its code (constants and nested code included), its
    defaults, and what its closure holds (plain values and arrays by value, other objects
    by identity: such a primitive's compiled programs are this process's)."""
    h = hashlib.sha256()
    code = getattr(fn, "__code__", None)
    h.update(_code_bytes(code) if code is not None else repr(fn).encode())
    for part in (getattr(fn, "__defaults__", None), getattr(fn, "__kwdefaults__", None)):
        h.update(_value_bytes(part))
    for cell in getattr(fn, "__closure__", None) or ():
        try:
            h.update(_value_bytes(cell.cell_contents))
        except ValueError:  # an empty cell
            h.update(b"<empty>")
    return h.hexdigest()[:16]


def _code_bytes(code: types.CodeType) -> bytes:
    """A code object's content, field by field (``marshal``'s bytes depend on reference
    counts, so they differ between processes for the same code)."""
    parts = [code.co_code, repr((code.co_name, code.co_names, code.co_varnames,
                                 code.co_freevars, code.co_cellvars, code.co_argcount,
                                 code.co_kwonlyargcount, code.co_flags)).encode()]
    for c in code.co_consts:
        parts.append(_code_bytes(c) if isinstance(c, types.CodeType) else _value_bytes(c))
    return b"\0".join(parts)


def _value_bytes(v: Any) -> bytes:
    if v is None or isinstance(v, (bool, int, float, complex, str, bytes)):
        return repr(v).encode()
    if isinstance(v, (tuple, list)):
        return b"(" + b",".join(_value_bytes(x) for x in v) + b")"
    if isinstance(v, (set, frozenset)):  # in an order that does not depend on hashing
        return b"{" + b",".join(sorted(_value_bytes(x) for x in v)) + b"}"
    if isinstance(v, dict):
        return b"{" + b",".join(_value_bytes(k) + b":" + _value_bytes(x)
                                for k, x in v.items()) + b"}"
    if isinstance(v, np.ndarray):
        return f"{v.dtype}{v.shape}".encode() + v.tobytes()
    if isinstance(v, types.FunctionType):
        return code_digest(v).encode()
    return f"<{type(v).__qualname__} at {id(v):x}>".encode()


def param_names(fn: Callable[..., Any], n: int) -> list[str]:
    try:
        names = [p.name for p in inspect.signature(fn).parameters.values()]
    except (TypeError, ValueError):
        names = []
    return (names + [f"arg{i}" for i in range(len(names), n)])[:n]


def static_attr(v: Any) -> Any:
    if isinstance(v, (list, tuple)):
        return tuple(static_attr(x) for x in v)
    if isinstance(v, (int, float, bool, str)):
        return v
    return repr(v)


@overload
def primitive(fn: Callable[..., Any], *, opaque: bool = False) -> Primitive: ...


@overload
def primitive(fn: None = None, *, opaque: bool = False
              ) -> Callable[[Callable[..., Any]], Primitive]: ...


def primitive(fn: Callable[..., Any] | None = None, *, opaque: bool = False) -> Any:
    """Mark ``fn`` as a primitive: traced as one entry; its body still runs for the value.
    ``@yota.primitive(opaque=True)``: its body is not traced at all but called on NumPy
    arrays when the compiled program runs (``OpaquePrimitive``): any SciPy, C or Fortran
    code can be used this way.

    Give it a derivative with ``@yota.diffrule(fn, "x")``.
    """
    if fn is None:
        return lambda f: primitive(f, opaque=opaque)
    if isinstance(fn, Primitive):
        if bool(opaque) == isinstance(fn, OpaquePrimitive):
            return fn
        fn = fn.fn
    return OpaquePrimitive(fn) if opaque else Primitive(fn)


@contextlib.contextmanager
def temporary_primitives(f: Callable[..., Any], fns: Any) -> Iterator[None]:
    """Treat ``fns`` as primitives for one trace, by rebinding the names that ``f``'s
    module and the functions' own modules use for them (restored afterwards)."""
    if not fns:
        yield
        return
    patches: list[tuple[dict[str, Any], str, Any]] = []
    scopes = [getattr(f, "__globals__", {})]
    for fn in fns:
        mod = sys.modules.get(getattr(fn, "__module__", ""), None)
        if mod is not None:
            scopes.append(vars(mod))
    for fn in fns:
        wrapped = primitive(fn)
        for scope in scopes:
            for name, v in list(scope.items()):
                if v is fn:
                    patches.append((scope, name, v))
                    scope[name] = wrapped
    try:
        yield
    finally:
        for scope, name, v in reversed(patches):
            scope[name] = v
