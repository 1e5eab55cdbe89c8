"""The traced array: ``Tracer``, what user code sees of a traced value.

Tracing runs ``f`` on real values (as Yota.jl does): every tracer carries its example
value, so Python control flow sees real numbers. Where Python asks a traced value for
``bool``/``int``/``float``/``__index__``/``item()``, the answer is recorded as a guard.

``Tracer`` declares its whole surface here: Python's operators, the array methods and
properties, and NumPy's ``__array_ufunc__``/``__array_function__`` protocols. Each
dispatches into the NumPy → IR table (``yota.numpy``), whose entry names the operation,
checks its arguments and computes the example value; ``yota.recording.record`` puts the
call on the tape. Writes (``x[i] = v``, ``x += v``, ``np.add.at``, ``out=``, ``np.copyto``...)
are functionalized by ``yota.writes``. A tracer's state on the tape is its base class's,
``yota.traced.TracedValue``; the trace it belongs to is a ``yota.trace_context.TraceContext``.

``yota.tracing.trace`` runs a function on tracers; ``yota.lowering.to_ir`` lowers the tape.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from yota.ir.errors import UnsupportedError

from .aliasing import Storage
from .numpy import registry
from .recording import find_context, record, record_entry, to_value, tracers_in
from .traced import TracedValue
from .userloc import forbid_math, store_error, where
from .writes import MaskedUpdate, assign, assign_mask, stored_shape, write_into


class ConversionError(UnsupportedError):
    """A traced value converted to a plain array (``Tracer.__array__``)."""


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


class Tracer(TracedValue):
    """A traced array: behaves like a NumPy array and records what is done with it."""

    __slots__ = ()

    __array_priority__ = 1000.0

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


# -- NumPy's writes: np.<ufunc>.at, out=, np.copyto, np.put_along_axis, np.put... -------------
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
    vshape = stored_shape(t, key, v)
    const = all(x.is_const for x in tracers_in((key, v)))
    cur = t.value

    def concrete() -> None:
        ufunc.at(cur, to_value(key), to_value(b))

    write_into(t, what, "Write x = x + np.bincount(...) or use a copy (y = x.copy())",
               lambda: record_entry("add_at", t, key, v, vshape=vshape), concrete, const)


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

