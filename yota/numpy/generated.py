"""Constants of the trace made from shapes alone, computed by the program, not stored in it.

While a trace runs, the user's ``np.eye``, ``np.identity``, ``np.tri``, ``np.arange``,
``np.linspace`` (and ``np.zeros``, ``np.ones``, ``np.full``... : splats) return constants
of the trace (``yota.aliasing.creations``), and what plain NumPy computes from them with
exact, cheap operations (``EXACT``: arithmetic, comparisons, ``where``, shape ops, views,
``tril``...) is a constant of the trace too. Each such constant remembers how it was made
(a ``Made``: the creation call, or a NumPy-table entry on other ``Made`` constants).

When traced code reads one larger than ``GENERATED_BYTES``, the tape records the calls
that make it (``record``) instead of its data; their lowerings (``creation``) build it
from ``iota`` ops, which kernels compute from their loop indices. So ``K + noise *
np.eye(n)`` is a kernel with no n-by-n operand, and a program's object code and cache
entry hold code, not data. A write into such a constant (``I[0, 0] = 2``) makes it data
again: ``Made`` is valid only for the storage version it was made at (the tracer checks).

Every recipe gives NumPy's values bit for bit: ``EXACT`` holds only IEEE correctly
rounded ops and data movement (the backends round them as NumPy does, without
contraction), and an ``arange`` or ``linspace`` is checked against NumPy's array when it
is first recorded (one of NumPy's rounding paths this code does not follow stays data).
A small ``np.arange``, ``np.linspace`` or ``np.tri`` (``SMALL_PLAIN``) stays a plain NumPy
array, as before: index arithmetic on it runs at NumPy's speed while tracing.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from yota.ir.core import Builder
from yota.ir.interpreter import run
from yota.ir.types import DTYPE_NAMES, TensorType

from ..tape import Entry, Loc, Tape, Var

GENERATED_BYTES = 4096  # larger constants made from shapes are computed by the program
MAX_DEPTH = 32  # longest chain of NumPy calls a recipe replays

# Entries of the NumPy table that are exact (IEEE correctly rounded, or data movement) and
# cost one pass over their operands: computing them in the program gives NumPy's bits.
EXACT = frozenset("""
    absolute add bitwise_and bitwise_or bitwise_xor ceil divide equal floor greater
    greater_equal invert isfinite isinf isnan less less_equal logical_and logical_not
    logical_or logical_xor maximum minimum multiply negative not_equal positive reciprocal
    rint sign sqrt square subtract astype clip copy where broadcast_to expand_dims
    matrix_transpose moveaxis permute_dims ravel reshape squeeze swapaxes transpose getitem
    tril triu flip fliplr flipud rot90 roll diag diagflat diagonal concatenate concat stack
    hstack vstack column_stack tile repeat
""".split())
SPLATS = ("zeros", "ones", "empty", "full", "zeros_like", "ones_like", "empty_like",
          "full_like")
SHAPED = ("eye", "identity", "tri", "arange", "linspace")  # recorded as called
CHECKED = ("arange", "linspace")  # rounded values: compared with NumPy's when recorded
SMALL_PLAIN = ("tri", "arange", "linspace")  # plain NumPy arrays up to GENERATED_BYTES
NOT_TRACED = object()  # what ``made_of`` says of a value that is not traced


class Made:
    """How a constant of the trace was made from shapes alone: the NumPy-table entry
    ``key`` called on ``args`` and ``kwargs``, where each constant it read is its
    ``Made``; ``type`` is the result's, ``depth`` the longest chain of calls to it."""

    __slots__ = ("key", "args", "kwargs", "type", "depth", "loc", "_var")

    def __init__(self, key: str, args: tuple[Any, ...], kwargs: dict[str, Any],
                 type: TensorType, depth: int, loc: Loc | None) -> None:
        self.key, self.args, self.kwargs, self.type = key, args, kwargs, type
        self.depth, self.loc = depth, loc
        self._var: tuple[Tape, Var] | None = None  # where it was last recorded

    def __repr__(self) -> str:
        return f"Made({self.key}, {self.type})"


def _typed(value: Any) -> TensorType | None:
    """The type of an array of a dtype Yota supports, else None."""
    if type(value) is not np.ndarray or value.dtype not in DTYPE_NAMES:
        return None
    return TensorType(value.dtype, value.shape)


def _plain(x: Any) -> bool:
    """A static argument of a creation call: a Python or NumPy scalar, a dtype, a string,
    None, or a tuple or list of those (never an array)."""
    if isinstance(x, (list, tuple)):
        return all(_plain(v) for v in x)
    return x is None or isinstance(x, (int, float, bool, str, np.generic, np.dtype, type))


def leaf(name: str, args: tuple[Any, ...], kwargs: dict[str, Any], value: Any,
         loc: Loc | None) -> Made | None:
    """The recipe of ``value``, made by the user's call ``np.<name>(*args, **kwargs)``,
    or None when it cannot be one (array arguments, a splat creation that is not a splat,
    values a recipe does not reproduce)."""
    t = _typed(value)
    if t is None:
        return None
    if name in SPLATS:
        if not _scalar_fill(name, args, kwargs):
            return None
        fill = value.reshape(-1)[0] if value.size else np.zeros((), value.dtype)
        return Made("full", (value.shape, fill.item()), {"dtype": value.dtype}, t, 0, loc)
    if name not in SHAPED or not (_plain(args) and _plain(list(kwargs.values()))):
        return None
    return Made(name, tuple(args), dict(kwargs), t, 0, loc)


def _scalar_fill(name: str, args: tuple[Any, ...], kwargs: dict[str, Any]) -> bool:
    """Whether a splat creation fills with one value (``np.full``'s fill may be an array
    that broadcasts to rows)."""
    if name not in ("full", "full_like"):
        return True
    fill = args[1] if len(args) > 1 else kwargs.get("fill_value")
    return isinstance(fill, (int, float, bool, np.generic))


class _Builds:
    """The one thing a creation lowering reads from its lowering context: the builder."""

    def __init__(self, b: Builder) -> None:
        self.b = b


def _reproduces(made: Made) -> bool:
    """Whether the lowering of ``made`` computes NumPy's array bit for bit (interpreted)."""
    from .registry import TABLE

    value = TABLE[made.key].forward(*made.args, **made.kwargs)
    b = Builder("check")
    try:
        v = TABLE[made.key].lower(_Builds(b), [made.type], *made.args, **made.kwargs)
        (got,) = run(b.build([v]))
    except (ValueError, TypeError, ArithmeticError):
        return False
    return bool(got.dtype == value.dtype and got.shape == value.shape
                and got.tobytes() == value.tobytes())


def derive(key: str, args: tuple[Any, ...], kwargs: dict[str, Any], value: Any,
           loc: Loc | None, made_of: Callable[[Any], Any]) -> Made | None:
    """The recipe of ``value``, computed by NumPy-table entry ``key`` from constants of
    the trace: None unless ``key`` is ``EXACT`` and every traced argument has a recipe
    (``made_of(x)``: its ``Made``, None, or ``NOT_TRACED`` for a plain value)."""
    t = _typed(value)
    if key not in EXACT or t is None:
        return None
    depth = [0]

    def sub(x: Any) -> Any:
        m = made_of(x)
        if m is None or (m is NOT_TRACED and isinstance(x, np.ndarray)):
            raise _NoRecipe
        if m is NOT_TRACED:
            if isinstance(x, (list, tuple)) and not hasattr(type(x), "_fields"):
                return type(x)(sub(v) for v in x)
            return x
        depth[0] = max(depth[0], m.depth + 1)
        return m

    try:
        margs = tuple(sub(a) for a in args)
        mkw = {k: sub(v) for k, v in kwargs.items()}
    except _NoRecipe:
        return None
    if not 0 < depth[0] <= MAX_DEPTH:
        return None
    return Made(key, margs, mkw, t, depth[0], loc)


class _NoRecipe(Exception):
    """An argument of the call has no recipe."""


def record(made: Made, tape: Tape, to_tape: Callable[[Any], Any], value: Any = None) -> Var:
    """Record on ``tape`` the calls that make ``made`` (each once: a recipe read twice is
    recorded once), converting plain arguments with ``to_tape``; its variable."""
    if made._var is not None and made._var[0] is tape:
        return made._var[1]
    if made.key in CHECKED and not _reproduces(made):  # NumPy's array itself, then
        from .registry import TABLE

        return to_tape(TABLE[made.key].forward(*made.args, **made.kwargs))

    def sub(x: Any) -> Any:
        if isinstance(x, Made):
            return record(x, tape, to_tape)
        if isinstance(x, (list, tuple)) and not hasattr(type(x), "_fields"):
            return type(x)(sub(v) for v in x)
        return to_tape(x)

    args = tuple(sub(a) for a in made.args)
    kwargs = {k: sub(v) for k, v in made.kwargs.items()}
    var = tape.new_var(made.type)
    tape.add(Entry("call", [var], made.key, args, kwargs, value=value, loc=made.loc))
    made._var = (tape, var)
    return var


def computed(value: Any) -> bool:
    """Whether a constant of the trace is large enough to be computed by the program when
    it has a recipe."""
    return isinstance(value, np.ndarray) and value.nbytes > GENERATED_BYTES
