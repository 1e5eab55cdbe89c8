"""Which traced arrays share memory, and how a write through one reaches the others.

While tracing, every traced array holds its example value, a real NumPy array; NumPy
itself decides whether an operation's result is a *view* of an operand (the two share
memory) or a new array, and writes are performed on the example values too, so what
user code sees while tracing is exactly what NumPy shows.

On the tape, arrays are values in SSA form. Each traced array carries a ``Storage``
record, shared by an array and all its views: a version number, bumped by every write,
whether its content is still a constant of the trace, and who owns it (the function, or
the caller: an argument's memory is never written). A view also remembers how it was made
from its parent (``ViewLink``): a view whose version is older than its storage's is
derived again from its parent when it is next read, and a write through a view makes a
new version of each array up the chain to the base (``ViewLink.undo``).

``creations`` makes ``np.zeros``, ``np.ones``, ``np.empty``, ``np.full`` (and their
``*_like`` forms on plain arrays), ``np.eye``, ``np.identity``, ``np.tri``, ``np.arange``
and ``np.linspace`` return traced constants while a trace runs, so that the function may
write traced values into them, and so that one made from shapes alone is computed by the
program rather than stored in it (``yota.numpy.generated``).
"""

from __future__ import annotations

import contextlib
import dis
import functools
import sys
import threading
import types
from collections.abc import Callable, Iterator
from typing import Any

import numpy as np

from yota.ir.types import DTYPE_NAMES

from . import structs
from .numpy.generated import GENERATED_BYTES, SMALL_PLAIN
from .patching import NumpyPatch


class Storage:
    """The memory shared by an array and its views: its version (one per write), whether
    its content is a constant of the trace, and its owner when the function does not own
    it (a description for error messages, e.g. "argument 'x'")."""

    __slots__ = ("version", "const", "owner")

    def __init__(self, const: bool, owner: str | None = None) -> None:
        self.version = 0
        self.const = const
        self.owner = owner


# np.may_share_memory without its __array_function__ dispatch (a third of its cost), for
# two plain ndarrays (no override to dispatch to): the tracer asks once per operand per op
may_share_memory: Callable[[np.ndarray, np.ndarray], bool] = getattr(
    np.may_share_memory, "_implementation", np.may_share_memory)


def shares(a: Any, b: Any) -> bool:
    """Whether NumPy arrays ``a`` and ``b`` (example values) share memory."""
    if type(a) is np.ndarray and type(b) is np.ndarray:
        return a.size > 0 and b.size > 0 and bool(may_share_memory(a, b))
    return (isinstance(a, np.ndarray) and isinstance(b, np.ndarray) and a.size > 0
            and b.size > 0 and np.may_share_memory(a, b))


def _byte_offsets(a: np.ndarray, origin: int) -> np.ndarray:
    """The byte address of each element of ``a`` minus ``origin``."""
    out = np.ndarray(a.shape, np.int64)
    out[...] = a.__array_interface__["data"][0] - origin
    for k, (n, s) in enumerate(zip(a.shape, a.strides, strict=True)):
        shape = [1] * a.ndim
        shape[k] = n
        out += (np.arange(n, dtype=np.int64) * s).reshape(shape)
    return out


def positions(parent: np.ndarray, child: np.ndarray) -> np.ndarray | None:
    """The flat (C-order) index into ``parent`` of each element of ``child``, a view of
    ``parent``'s memory; None if some element of ``child`` is not one of ``parent``'s."""
    origin = parent.__array_interface__["data"][0]
    po = _byte_offsets(parent, origin).ravel()
    co = _byte_offsets(child, origin)
    order = np.argsort(po, kind="stable")
    sp = po[order]
    j = np.searchsorted(sp, co)
    if np.any(j >= sp.size) or np.any(sp[np.minimum(j, sp.size - 1)] != co):
        return None
    return order[j]


def permutation(parent_shape: tuple[int, ...], pos: np.ndarray) -> tuple[int, ...] | None:
    """``perm`` with ``pos == arange(size).reshape(parent_shape).transpose(perm)``, if any."""
    if pos.ndim != len(parent_shape):
        return None
    ar = np.arange(int(np.prod(parent_shape)), dtype=np.int64).reshape(parent_shape)
    cstr = [int(s) // 8 for s in ar.strides]
    perm: list[int] = []
    for k, n in enumerate(pos.shape):
        step = 0
        if n > 1:
            at = [0] * pos.ndim
            at[k] = 1
            step = int(pos[tuple(at)] - pos.flat[0])
        cands = [j for j in range(len(parent_shape)) if j not in perm
                 and parent_shape[j] == n and (n <= 1 or cstr[j] == step)]
        if not cands:
            return None
        perm.append(cands[0])
    t = tuple(perm)
    return t if np.array_equal(ar.transpose(t), pos) else None


# -- fresh arrays from NumPy's creation functions ---------------------------------------------
_CREATIONS = ("zeros", "ones", "empty", "full", "zeros_like", "ones_like", "empty_like",
              "full_like", "eye", "identity", "tri", "arange", "linspace")
_PATCH = NumpyPatch(_CREATIONS)
_ORIGINAL = _PATCH.original


def _wrapper(name: str) -> Callable[..., Any]:
    original = _ORIGINAL[name]
    empty = name.startswith("empty")
    source = _ORIGINAL["zeros_like" if name.endswith("_like") else "zeros"] if empty else None

    def create(*args: Any, **kwargs: Any) -> Any:
        hook = _PATCH.top()
        if hook is None or not _called_by_user(name):
            return original(*args, **kwargs)
        if name in ("full", "full_like") and _traced_fill(args, kwargs):
            return _full(name, *args, **kwargs)
        value = (source or original)(*args, **kwargs)  # np.empty: zeros, as good as any
        if type(value) is not np.ndarray or value.dtype not in DTYPE_NAMES:
            return value  # float16 and others stay plain: mixed with traced values, an error
        if name in SMALL_PLAIN and value.nbytes <= GENERATED_BYTES:
            made = getattr(_made, "arrays", None)
            if made is not None:  # made by the function: a constant, nothing to check
                made[id(value)] = value
            return value  # a small index array: plain NumPy, fast (yota.numpy.generated)
        return hook(value, name, args, kwargs)

    create.__name__ = original.__name__
    create.__doc__ = original.__doc__
    create.__wrapped__ = original  # type: ignore[attr-defined]
    return create


def _traced_fill(args: tuple[Any, ...], kwargs: dict[str, Any]) -> bool:
    fill = args[1] if len(args) > 1 else kwargs.get("fill_value")
    return structs.is_traced(fill)


def _full(name: str, a: Any, fill_value: Any, dtype: Any = None, order: str = "C",
          **kwargs: Any) -> Any:
    """``np.full(shape, v)`` / ``np.full_like(a, v)`` with a traced fill value: ``v``
    broadcast to the shape, as a new array the function owns."""
    if name == "full_like":
        dtype = dtype if dtype is not None else a.dtype
        shape = kwargs.get("shape") or np.shape(a)
    else:
        shape = a
    out = np.broadcast_to(fill_value, shape)
    if dtype is not None:
        out = out.astype(dtype)
    return out.copy()


_PATCH.wrap({name: _wrapper(name) for name in _CREATIONS})


def _internal(module: str) -> bool:
    """Calls from NumPy itself and from Yota's own code get plain arrays."""
    return module.split(".")[0] in ("numpy", "yota")


_LOADS = ("LOAD_METHOD", "LOAD_ATTR", "LOAD_GLOBAL", "LOAD_NAME", "LOAD_FAST", "LOAD_DEREF")


@functools.lru_cache(maxsize=4096)
def _callee(code: types.CodeType, lasti: int) -> str | None:
    """The name the call at ``lasti`` in ``code`` loads its function by (``np.zeros(...)``:
    ``zeros``), or None if the bytecode does not say plainly. C code (NumPy's random
    generators, other extensions) calls ``np.empty`` & co. through the module too, from
    inside a call the user's frame makes: only a user's own call of a creation function may
    get a traced array, never such an inner one."""
    ins = list(dis.get_instructions(code))
    at = max((i for i, x in enumerate(ins) if x.offset <= lasti), default=None)  # its caches
    if at is None or ins[at].opname != "CALL" or not isinstance(ins[at].arg, int):
        return None
    n, depth, i = ins[at].arg, 0, at - 1
    while i >= 0 and ins[i].opname in ("PRECALL", "KW_NAMES", "CACHE"):
        i -= 1
    while i >= 0 and depth != n:
        x = ins[i]
        if x.is_jump_target or "JUMP" in x.opname or x.opname.startswith("POP_JUMP"):
            return None
        try:
            depth += dis.stack_effect(x.opcode, x.arg, jump=False) if x.opcode >= \
                dis.HAVE_ARGUMENT else dis.stack_effect(x.opcode)
        except ValueError:
            return None
        i -= 1
    if i < 0 or depth != n or ins[i].opname not in _LOADS:
        return None
    return str(ins[i].argval)


def _called_by_user(name: str) -> bool:
    frame = sys._getframe(2)
    if _internal(frame.f_globals.get("__name__", "")):
        return False
    return _callee(frame.f_code, frame.f_lasti) == name


@contextlib.contextmanager
def creations(fresh: Callable[..., Any]) -> Iterator[None]:
    """While the block runs, NumPy's creation functions called from this thread by the
    user's code return ``fresh(array, name, args, kwargs)`` (a traced constant the function
    may write into, made by ``np.<name>(*args, **kwargs)``); calls from NumPy, from Yota's
    own modules (this docstring's examples among them) and from C extensions get plain
    arrays.

    >>> with creations(lambda a, *call: ("fresh", a.shape)):
    ...     type(np.zeros((2, 3))).__name__
    'ndarray'
    """
    saved = getattr(_made, "arrays", None)
    _made.arrays = {}
    try:
        with _PATCH.active(fresh):
            yield
    finally:
        _made.arrays = saved


_made = threading.local()  # id -> plain array a creation function made in this trace


def made_here(a: Any) -> bool:
    """Whether plain array ``a`` was made by a creation function the traced function
    called (a small ``np.arange``...): a constant of the trace, not a value from outside."""
    made = getattr(_made, "arrays", None)
    for _ in range(4):  # (a view of one too: np.arange(n).reshape(...))
        if made is None or a is None:
            return False
        if made.get(id(a)) is a:
            return True
        a = getattr(a, "base", None)
    return False
