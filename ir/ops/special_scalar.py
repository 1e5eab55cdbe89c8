"""The scalar language the special functions are written in, once for every backend.

An algorithm (``lgamma``, ``erfcx``...) is a Python function of ``F`` values: float64
scalars with operators (``+ - * /``, comparisons giving ``B`` masks) and the functions
below (``exp``, ``log``, ``where``...). Straight-line code: no loops over data, no
branches, every lane computes every path and ``where`` picks. A *renderer* (``Emit``)
gives the values meaning: ``NumpyEmit`` here runs an algorithm on float64 arrays (the
interpreter's reference); the llvm backend renders it as vector IR, the CUDA backend as
a C device function, the MLIR export as ``arith``/``math`` ops. So every backend runs the
same operations in the same order, and results differ only by the ulps of ``exp``/``log``
implementations.

All arithmetic is float64; a float32 op converts in and out (the result is then the
float64 one rounded once). Horner's rule uses a separate multiply and add (no fused
multiply-add): NumPy has none, and the renderings then round identically.

>>> import numpy as np
>>> x = NumpyEmit.lift(np.array([1.0, 4.0]))
>>> (sqrt(x) * 2.0 + 1.0).v.tolist()
[3.0, 5.0]
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any, Protocol

import numpy as np


class Emit(Protocol):
    """A renderer: makes values of its own kind for each primitive operation."""

    def const(self, v: float) -> Any: ...

    def unary(self, name: str, a: Any) -> Any:
        """``neg abs sqrt exp log log1p floor rint sin tan``."""
        ...

    def binary(self, name: str, a: Any, b: Any) -> Any:
        """``add sub mul div``."""
        ...

    def compare(self, pred: str, a: Any, b: Any) -> Any:
        """``lt le gt ge eq`` (false on NaN) and ``ne`` (true on NaN); a mask."""
        ...

    def logic(self, name: str, a: Any, b: Any | None) -> Any:
        """``and or`` of two masks, ``not`` of one (``b`` None)."""
        ...

    def select(self, c: Any, a: Any, b: Any) -> Any: ...

    def isnan(self, a: Any) -> Any: ...


class B:
    """A mask (one bool per lane)."""

    __slots__ = ("e", "v")

    def __init__(self, e: Emit, v: Any) -> None:
        self.e, self.v = e, v

    def __and__(self, o: B) -> B:
        return B(self.e, self.e.logic("and", self.v, o.v))

    def __or__(self, o: B) -> B:
        return B(self.e, self.e.logic("or", self.v, o.v))

    def __invert__(self) -> B:
        return B(self.e, self.e.logic("not", self.v, None))


class F:
    """A float64 value (one per lane) of renderer ``e``."""

    __slots__ = ("e", "v")

    def __init__(self, e: Emit, v: Any) -> None:
        self.e, self.v = e, v

    def k(self, c: F | float) -> F:
        """``c`` as a value of this renderer."""
        return c if isinstance(c, F) else F(self.e, self.e.const(float(c)))

    def _bin(self, name: str, a: F | float, b: F | float) -> F:
        return F(self.e, self.e.binary(name, self.k(a).v, self.k(b).v))

    def __add__(self, o: F | float) -> F:
        return self._bin("add", self, o)

    def __radd__(self, o: float) -> F:
        return self._bin("add", o, self)

    def __sub__(self, o: F | float) -> F:
        return self._bin("sub", self, o)

    def __rsub__(self, o: float) -> F:
        return self._bin("sub", o, self)

    def __mul__(self, o: F | float) -> F:
        return self._bin("mul", self, o)

    def __rmul__(self, o: float) -> F:
        return self._bin("mul", o, self)

    def __truediv__(self, o: F | float) -> F:
        return self._bin("div", self, o)

    def __rtruediv__(self, o: float) -> F:
        return self._bin("div", o, self)

    def __neg__(self) -> F:
        return F(self.e, self.e.unary("neg", self.v))

    def _cmp(self, pred: str, o: F | float) -> B:
        return B(self.e, self.e.compare(pred, self.v, self.k(o).v))

    def __lt__(self, o: F | float) -> B:
        return self._cmp("lt", o)

    def __le__(self, o: F | float) -> B:
        return self._cmp("le", o)

    def __gt__(self, o: F | float) -> B:
        return self._cmp("gt", o)

    def __ge__(self, o: F | float) -> B:
        return self._cmp("ge", o)

    def eq(self, o: F | float) -> B:
        return self._cmp("eq", o)

    def ne(self, o: F | float) -> B:
        return self._cmp("ne", o)


def _un(name: str) -> Callable[[F], F]:
    def f(x: F) -> F:
        return F(x.e, x.e.unary(name, x.v))

    f.__name__ = name
    return f


sqrt, exp, log, log1p = _un("sqrt"), _un("exp"), _un("log"), _un("log1p")
floor, rint, sin, tan, fabs = _un("floor"), _un("rint"), _un("sin"), _un("tan"), _un("abs")


def where(c: B, a: F | float, b: F | float) -> F:
    """``a`` where ``c``, else ``b``."""
    def v(z: F | float) -> Any:
        return z.v if isinstance(z, F) else c.e.const(float(z))

    return F(c.e, c.e.select(c.v, v(a), v(b)))


def isnan(x: F) -> B:
    return B(x.e, x.e.isnan(x.v))


def isinf(x: F) -> B:
    return fabs(x).eq(np.inf)


def polyval(coefs: Sequence[float], t: F) -> F:
    """``coefs[0] t^n + ... + coefs[n]`` by Horner's rule."""
    acc = t.k(coefs[0])
    for a in coefs[1:]:
        acc = acc * t + a
    return acc


def polyval_pieces(pieces: Sequence[tuple[B | None, Sequence[float]]], t: F) -> F:
    """Horner's rule on the coefficients of the piece whose mask holds (the last piece's
    mask is ignored: it is the default). Shorter lists are padded with leading zeros.
    One evaluation per lane, whatever the number of pieces: the coefficients are picked
    with selects."""
    n = max(len(c) for _, c in pieces)
    padded = [[0.0] * (n - len(c)) + list(c) for _, c in pieces]

    def coef(i: int) -> F:
        acc = t.k(padded[-1][i])
        for (mask, _), cs in zip(pieces[-2::-1], padded[-2::-1], strict=True):
            assert mask is not None
            acc = where(mask, cs[i], acc)
        return acc

    acc = coef(0)
    for i in range(1, n):
        acc = acc * t + coef(i)
    return acc


# -- the NumPy rendering: the interpreter's reference ----------------------------------------
class NumpyEmit:
    """Runs an algorithm on float64 arrays (elementwise, broadcasting)."""

    _UNARY: dict[str, Callable[[Any], Any]] = {
        "neg": np.negative, "abs": np.abs, "sqrt": np.sqrt, "exp": np.exp, "log": np.log,
        "log1p": np.log1p, "floor": np.floor, "rint": np.rint, "sin": np.sin, "tan": np.tan}
    _BINARY: dict[str, Callable[[Any, Any], Any]] = {
        "add": np.add, "sub": np.subtract, "mul": np.multiply, "div": np.divide,
        "lt": np.less, "le": np.less_equal, "gt": np.greater, "ge": np.greater_equal,
        "eq": np.equal, "ne": np.not_equal, "and": np.logical_and, "or": np.logical_or}

    def const(self, v: float) -> Any:
        return np.float64(v)

    def unary(self, name: str, a: Any) -> Any:
        return self._UNARY[name](a)

    def binary(self, name: str, a: Any, b: Any) -> Any:
        return self._BINARY[name](a, b)

    compare = binary

    def logic(self, name: str, a: Any, b: Any | None) -> Any:
        return np.logical_not(a) if b is None else self._BINARY[name](a, b)

    def select(self, c: Any, a: Any, b: Any) -> Any:
        return np.where(c, a, b)

    def isnan(self, a: Any) -> Any:
        return np.isnan(a)

    @classmethod
    def lift(cls, x: Any) -> F:
        return F(cls(), np.asarray(x, dtype=np.float64))


Algorithm = Callable[..., F]


def run_numpy(algorithm: Algorithm, *xs: Any, **params: Any) -> np.ndarray:
    """``algorithm`` on arrays ``xs`` (computed in float64), in the dtype of the first
    float operand (float32 results are the float64 ones rounded once)."""
    dtype = np.result_type(*[np.asarray(x).dtype for x in xs])
    if dtype.kind != "f" or dtype.itemsize > 8:
        dtype = np.dtype(np.float64)
    e = NumpyEmit()
    with np.errstate(all="ignore"):
        args = [F(e, np.asarray(x, dtype=np.float64)) for x in xs]
        out = algorithm(*args, **params).v
        return np.asarray(np.broadcast_to(out, np.broadcast_shapes(
            *[np.shape(x) for x in xs])), dtype=dtype)
