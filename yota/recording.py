"""Recording: an operation run on the example values and put on the tape.

``record`` runs an entry of the NumPy → IR table on the example values of its operands
and records the call (``to_tape``: the operands as the tape holds them); the results are
new traced values of the trace (``find_context``: the innermost one). A result that shares
memory with an operand (NumPy made a view) shares its storage (``yota.aliasing``), and
remembers how it was made (``ViewLink``) to be derived again after a write
(``yota.writes``).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Sequence
from typing import Any

import numpy as np

from yota.ir.errors import TraceError, UnsupportedError, YotaError
from yota.ir.types import DTYPE_NAMES, TensorType, tensor_type

from .aliasing import Storage, may_share_memory, permutation, positions, shares
from .numpy import generated, registry
from .tape import Entry, Loc, Var
from .traced import Trace, TracedValue, innermost
from .userloc import user_loc, where


def find_context(*objs: Any) -> Trace | None:
    """The trace that records an operation on ``objs``: the innermost active one when a
    tracer of an enclosing trace is used inside a nested trace."""
    ctx = _find_context(*objs)
    return None if ctx is None else innermost(ctx)


def _find_context(*objs: Any) -> Trace | None:
    for o in objs:
        if isinstance(o, TracedValue):
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


def to_tape(ctx: Trace, x: Any) -> Any:
    """Replace tracers by their Vars and arrays by const/captured Vars (lists kept).

    NumPy integer and bool scalars stay as they are: like Python ints they are usually
    axes, sizes or indices, and a lowering reads them as static values."""
    if isinstance(x, TracedValue):
        return x.tape_var if x._ctx is ctx else ctx.foreign_var(x)
    if isinstance(x, np.ndarray) or (
            isinstance(x, np.generic) and not isinstance(x, (np.integer, np.bool_))):
        return ctx.array_var(x)
    if isinstance(x, list):
        return [to_tape(ctx, v) for v in x]
    if isinstance(x, tuple):
        return tuple([to_tape(ctx, v) for v in x])
    if isinstance(x, slice):  # traced bounds are static: NumPy's __index__ guards them
        return slice(*(int(v.value) if isinstance(v, TracedValue) else v
                       for v in (x.start, x.stop, x.step)))
    return x


def to_value(x: Any) -> Any:
    if isinstance(x, TracedValue):
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
    tracers = [x for x in flat if isinstance(x, TracedValue)]
    arrays = [x for x in flat if isinstance(x, (np.ndarray, np.generic))]
    return bool(tracers) and not arrays and all(t.weak for t in tracers)


def tracers_in(x: Any) -> Iterator[TracedValue]:
    if isinstance(x, TracedValue):
        yield x
    elif isinstance(x, (list, tuple)):
        for v in x:
            yield from tracers_in(v)
    elif isinstance(x, dict):
        for v in x.values():
            yield from tracers_in(v)
    elif isinstance(x, slice):
        yield from tracers_in((x.start, x.stop, x.step))


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
        t = ctx.tracer(var, v, (), store, const)
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


def _packed(value: list[Any] | tuple[Any, ...], tracers: list[Any]) -> Any:
    """The tracers of a call's several results, in the container NumPy returned them in."""
    if hasattr(value, "_fields"):  # a named tuple (np.linalg.slogdet's, eigh's...)
        return type(value)(*tracers)
    return type(value)(tracers) if isinstance(value, tuple) else tracers


def _tape_operands(ctx: Trace, ins: list[TracedValue], args: tuple[Any, ...],
                   kwargs: dict[str, Any]) -> tuple[bool, Any, Any]:
    """Whether every traced operand is a constant of the trace (then nothing is recorded);
    else the arguments and keyword arguments as the tape holds them (``to_tape``)."""
    for t in ins:
        if not t.is_const:
            break
    else:
        return True, None, None
    tape_args = tuple([x.tape_var if isinstance(x, TracedValue) and x._ctx is ctx
                       else to_tape(ctx, x) for x in args])
    return False, tape_args, {k: to_tape(ctx, v) for k, v in kwargs.items()} if kwargs else {}


def _sharing(raw: np.ndarray, ins: list[TracedValue]) -> list[TracedValue]:
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
              ) -> tuple[Trace | None, list[TracedValue], Sequence[Any] | None]:
    """The trace that records a call (``find_context``), the tracers among its arguments
    (``tracers_in``), and the arguments then keyword values as one flat sequence when none
    is a list, tuple or dict (the common case: one scan here serves every later walk of
    the arguments); None then when one is, and the callers walk the arguments instead."""
    leaves = args if not kwargs else (*args, *kwargs.values())
    first: TracedValue | None = None
    ins: list[TracedValue] = []
    for x in leaves:
        if isinstance(x, TracedValue):
            if first is None:
                first = x
            ins.append(x)
        elif isinstance(x, (list, tuple, dict)):
            return find_context(args, kwargs), list(tracers_in((args, kwargs))), None
        elif isinstance(x, slice):
            ins.extend(tracers_in(x))
    return (None if first is None else innermost(first._ctx)), ins, leaves


def _run(forward: Callable[..., Any], args: tuple[Any, ...], kwargs: dict[str, Any],
         flat: bool, what: str, loc: Loc | None) -> Any:
    """``forward`` on the example values (``flat``: no argument is a list or tuple)."""
    vargs: Any
    if flat:
        vargs = [x.value if isinstance(x, TracedValue) else x for x in args]
        vkwargs = {k: x.value if isinstance(x, TracedValue) else x for k, x in kwargs.items()
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
        if isinstance(x, TracedValue):
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
    return x.made if isinstance(x, TracedValue) else generated.NOT_TRACED


def _storage_of(raw: np.ndarray, sharing: list[TracedValue], leaves: Iterable[Any],
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
    if isinstance(a, TracedValue):
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


# -- views derived again after a write --------------------------------------------------------
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

    def __init__(self, parent: TracedValue, key: str, args: tuple[Any, ...],
                 kwargs: dict[str, Any], forward: Callable[..., Any], index: int | None,
                 python_op: bool) -> None:
        self.parent, self.key, self.args, self.kwargs = parent, key, args, kwargs
        self.forward, self.index, self.python_op = forward, index, python_op

    def redo(self) -> Var:
        out = record(self.key, self.args, self.kwargs, self.forward,
                     python_op=self.python_op, link=False)
        t = out[self.index] if self.index is not None else out
        return t.tape_var

    def undo(self, child: TracedValue, new: Var) -> Var:
        p = self.parent
        upd = p._ctx.tracer(new, child.value)
        if self.key == "getitem" and self.index is None and self.args[0] is p:
            return record_entry("setitem", p, self.args[1], upd, vshape=child.shape)
        pos = positions(p.value, child.value)
        if pos is None:
            raise UnsupportedError(f"a write at {where()} goes through a view made by "
                                   f"{self.key}, which Yota cannot write through: write into "
                                   "the array it views instead")
        if pos.size == p.value.size and np.array_equal(pos.ravel(), np.arange(pos.size)):
            return record_entry("reshape", upd, p.shape)
        perm = permutation(p.shape, pos)
        if perm is not None:
            return record_entry("transpose", upd, tuple(int(a) for a in np.argsort(perm)))
        return record_entry("setflat", p, pos, upd)


_WRITE_ENTRIES = ("setitem", "setmask", "add_at", "setflat")


def _unchanged(x: Any, *args: Any, **kwargs: Any) -> Any:
    return x


def record_entry(name: str, *args: Any, **kwargs: Any) -> Var:
    """Record table entry ``name`` (a new version of an array); its tape variable. A
    write's example value is not computed again (the write itself is made on the example
    values): the entry's forward returns ``x``, whose type the new version has."""
    forward = _unchanged if name in _WRITE_ENTRIES else registry.TABLE[name].forward
    out = record(name, args, kwargs, forward, link=False)
    return out.tape_var

