"""Native Python entry points: a compiled program called from Python without a Python
frame of its own.

A call of a compiled program through Python code costs microseconds: the arguments are
checked one by one, output arrays are made by ``np.empty``, the native code is reached
through ctypes, and the result objects are built by the interpreter. Here one native
function does all of it, with the CPython calling convention (``METH_FASTCALL``): a builtin
function object made by ``PyCFunction_NewEx`` whose ``self`` is a tuple holding a *plan*
(a ``bytes`` object of 64-bit words) and every Python object the plan refers to.

The plan is a small program that the native *dispatcher* interprets: it checks the
argument tuple (types, dtypes, shapes, contiguity and alignment of arrays, constants,
lengths of tuples and lists), allocates the outputs (through NumPy's C API, or a Python
callable such as a recycler), takes a workspace from a Python list (or makes one with a
Python callable), calls the program's ``yota_main`` entry (``module.py``), and builds
the result objects on a stack (floats, NumPy scalars, lists, tuples, dicts, calls of
Python callables, attribute updates). Whatever does not fit the plan (another type,
shape or layout, an allocation that fails, a nonzero return code of the program) returns
``None`` with no exception set, after releasing everything it made: the caller then runs
its general path, which repeats the call there and reports errors as usual.

The dispatcher is one LLVM module compiled once per process and kept in the object cache
(``jit.cached_object``); it refers to Python's and NumPy's C functions by name (bound with
``target.bind_symbol`` at load time) and to Python objects only through the plan, so no
address is part of any cached code. ``available()`` checks the CPython and NumPy object
layouts the dispatcher reads directly; where they differ, nothing here is used.
"""

from __future__ import annotations

import ctypes
import os
import sys
import sysconfig
import threading
import weakref
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from .pyabi import (
    ARRAY,
    ARRAY_DESCR,
    BYTES_DATA,
    CALL,
    CONST,
    DICT,
    DICT_ITEMS,
    EQ,
    FLOAT,
    FLOAT_VALUE,
    GET,
    INCR,
    IS,
    ITEM_L,
    ITEM_T,
    LIST,
    LIST_ITEMS,
    MAX_ARGS,
    METH_FASTCALL,
    NAME,
    NEW_OBJECT,
    NOT_SET,
    NP_API,
    OB_SIZE,
    OB_TYPE,
    OUT_CALL,
    OUT_NEW,
    OUT_SCRATCH,
    PUSH_FLOAT,
    PUSH_OBJ,
    PUSH_OUT,
    PUSH_SCALAR,
    PY_API,
    REFERENT,
    RETURN,
    RUN,
    SEQ,
    SETATTR,
    TUPLE,
    TUPLE_ITEMS,
    WEAKREF_OBJECT,
)
from .target import ARRAY_ABI

_NP_TYPE_INDEX = 2  # PyArray_API[2] is &PyArray_Type


# -- the layout checks ------------------------------------------------------------------------
def _numpy_api() -> int | None:
    """The address of NumPy's C API table (``_ARRAY_API``), or None."""
    try:
        from numpy._core import _multiarray_umath as mu  # type: ignore[attr-defined]
    except ImportError:  # pragma: no cover - NumPy 1.x
        from numpy.core import _multiarray_umath as mu
    cap = getattr(mu, "_ARRAY_API", None)
    if cap is None:  # pragma: no cover
        return None
    get = ctypes.pythonapi.PyCapsule_GetPointer
    get.restype, get.argtypes = ctypes.c_void_p, [ctypes.py_object, ctypes.c_char_p]
    try:
        return get(cap, None)
    except ValueError:  # pragma: no cover
        return None


def _np_function(table: int, index: int) -> int:
    return ctypes.c_void_p.from_address(table + 8 * index).value or 0


def _layout_ok() -> bool:
    """Whether this interpreter and NumPy have the object layout the dispatcher reads."""
    if sys.implementation.name != "cpython" or sys.version_info < (3, 9) \
            or ctypes.sizeof(ctypes.c_void_p) != 8 or sysconfig.get_config_var("Py_GIL_DISABLED"):
        return False
    word = lambda addr: ctypes.c_void_p.from_address(addr).value or 0  # noqa: E731
    t, lst, b = (object(), 7), [object(), 8], b"plan words"
    a = np.zeros((2, 3))
    wr = weakref.ref(_layout_ok)
    d, f = {1: 2, 3: 4}, 2.5
    table = _numpy_api()
    return (table is not None and _np_function(table, _NP_TYPE_INDEX) == id(np.ndarray)
            and word(id(t) + OB_TYPE) == id(tuple) and word(id(t) + OB_SIZE) == 2
            and word(id(t) + TUPLE_ITEMS) == id(t[0]) and word(id(lst) + OB_SIZE) == 2
            and word(word(id(lst) + LIST_ITEMS)) == id(lst[0])
            and ctypes.string_at(id(b) + BYTES_DATA, len(b)) == b
            and word(id(a) + ARRAY_DESCR) == id(a.dtype)
            and word(id(wr) + WEAKREF_OBJECT) == id(_layout_ok)
            and word(id(d) + OB_SIZE) == 2
            and ctypes.c_double.from_address(id(f) + FLOAT_VALUE).value == f
            and word(id(a) + ARRAY_ABI["data"]) == a.ctypes.data)


_lock = threading.Lock()
_state: dict[str, Any] = {}


def _new_lock() -> None:  # a child forked while another thread held the lock
    global _lock
    _lock = threading.Lock()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_new_lock)


def available() -> bool:
    """Whether native entries can be made in this process (checked once)."""
    ok = _state.get("ok")
    if ok is None:
        try:
            ok = _layout_ok()
        except (ValueError, OSError, AttributeError):  # pragma: no cover
            ok = False
        _state["ok"] = ok
    return bool(ok)


def _dispatcher() -> int:
    """The address of the compiled dispatcher (compiled or loaded once per process)."""
    addr = _state.get("addr")
    if addr is not None:
        return int(addr)
    with _lock:
        if "addr" not in _state:
            from . import jit
            from . import target as target_mod

            for name in PY_API:  # (bound for both loaders: objload's and LLVM's)
                target_mod.bind_symbol(name, ctypes.cast(getattr(ctypes.pythonapi, name),
                                                         ctypes.c_void_p).value or 0)
            table = _numpy_api()
            assert table is not None
            for name, (index, _) in NP_API.items():
                target_mod.bind_symbol(name, _np_function(table, index))
            target = target_mod.host()
            loaded = _load_dispatcher(jit, target)
            _state["engine"] = loaded.engine  # the code lives as long as the process
            _state["addr"] = loaded.addresses[NAME]
    return int(_state["addr"])


def _load_dispatcher(jit: Any, target: Any) -> Any:
    """The dispatcher's object code, from the object cache by its spec and sources (no
    IR built, no llvmlite needed), else compiled and kept there."""
    def build() -> str:
        from .pyentry_ir import module

        return str(module(target.triple))
    here = os.path.dirname(os.path.abspath(__file__))
    spec = {"name": NAME, "triple": target.triple, "max_args": MAX_ARGS}
    sources = [os.path.join(here, f) for f in ("pyentry.py", "pyentry_ir.py", "pyabi.py")]
    return jit.runtime_module(spec, sources, build, target, [NAME])


# -- plans ------------------------------------------------------------------------------------
class Plan:
    """A plan under construction: ``words`` and the objects they refer to (``keep``).

    Registers hold borrowed references to the positional arguments (registers ``0`` to
    ``nargs - 1``; a call with another count is declined) and to parts of them; slots are
    the pointers the program gets (inputs, outputs, workspace); the stack holds new
    references while the result is built."""

    def __init__(self, nslots: int, nargs: int = 1) -> None:
        self.nslots, self.nargs = nslots, nargs
        self.words: list[int] = []
        self.keep: list[Any] = []
        self.nregs = nargs
        self.depth = self.max_depth = 0

    def ref(self, obj: Any) -> int:
        self.keep.append(obj)
        return id(obj)

    def _op(self, *words: int, push: int = 0) -> None:
        self.words.extend(int(w) for w in words)
        self.depth += push
        self.max_depth = max(self.max_depth, self.depth)

    # argument checks
    def seq(self, reg: int, typ: type, n: int) -> list[int]:
        """Check that register ``reg`` holds a ``typ`` (tuple or list) of ``n`` items; the
        registers its items are loaded into."""
        self._op(SEQ, reg, self.ref(typ), n)
        regs: list[int] = []
        for i in range(n):
            regs.append(self.nregs)
            self._op(ITEM_T if typ is tuple else ITEM_L, self.nregs, reg, i)
            self.nregs += 1
        return regs

    def dict_items(self, reg: int, keys: Sequence[Any]) -> list[int]:
        """Check that register ``reg`` holds a dict (exactly) whose keys are ``keys`` in
        this order (equal, of the same types); the registers its values are loaded into."""
        self._op(SEQ, reg, self.ref(dict), len(keys))
        first = self.nregs
        self.nregs += len(keys)
        self._op(DICT_ITEMS, reg, len(keys), first, *[self.ref(k) for k in keys])
        return list(range(first, first + len(keys)))

    def float_input(self, reg: int, slot: int, dtype: np.dtype) -> None:
        """Check that register ``reg`` holds a Python float (exactly); its value, as a 0-d
        float32 or float64, is input ``slot``."""
        assert dtype in (np.float32, np.float64)
        self._op(FLOAT, reg, self.ref(float), slot, int(dtype == np.float32))

    def array(self, reg: int, dtype: np.dtype, shape: tuple[int, ...], slot: int) -> None:
        """Check that register ``reg`` holds an ndarray (exactly) of ``dtype`` (the
        same descriptor object) and ``shape``, C-contiguous and aligned; its data goes to
        ``slot``."""
        self._op(ARRAY, reg, self.ref(np.ndarray), self.ref(dtype), len(shape), slot, *shape)

    def const(self, obj: Any) -> int:
        """A new register holding ``obj`` (kept alive by the plan)."""
        reg = self.nregs
        self.nregs += 1
        self._op(CONST, reg, self.ref(obj))
        return reg

    def get(self, src: int, key: Any, kind: str) -> int:
        """A new register holding ``getattr(r, key)`` (``kind`` "attr"), ``r[key]``
        ("item") or the contents of cell ``r`` ("cell"), ``r`` the object in register
        ``src``; the reference is held until the call returns (a slot of its own)."""
        reg, hold = self.nregs, self.nslots
        self.nregs += 1
        self.nslots += 1
        code = {"attr": 0, "item": 1, "cell": 2}[kind]
        self._op(GET, reg, src, self.ref(sys.intern(key) if isinstance(key, str) else key),
                 code, hold)
        return reg

    def referent(self, reg: int, ref: Any) -> None:
        """Check that weak reference ``ref`` refers to the object in register ``reg``."""
        self._op(REFERENT, reg, self.ref(ref))

    def not_set(self, obj: Any, name: str) -> None:
        """Check that ``getattr(obj, name, None)`` is None or an empty list (``obj`` may
        be a ``threading.local``: this thread's attribute)."""
        self._op(NOT_SET, self.ref(obj), self.ref(sys.intern(name)), self.ref(list))

    def is_(self, reg: int, obj: Any) -> None:
        self._op(IS, reg, self.ref(obj))

    def equal(self, reg: int, obj: Any) -> None:
        """Check that register ``reg`` holds a ``type(obj)`` (exactly) equal to ``obj``."""
        self._op(EQ, reg, self.ref(type(obj)), self.ref(obj))

    # outputs and the call
    def out_new(self, slot: int, dtype: np.dtype, shape: tuple[int, ...]) -> None:
        self._op(OUT_NEW, slot, self.ref(np.ndarray), self.ref(dtype), len(shape), *shape)

    def out_call(self, slot: int, make: Callable[[], np.ndarray]) -> None:
        """An output array made by ``make()`` (a C-contiguous array of the right shape and
        dtype, e.g. a recycled one)."""
        self._op(OUT_CALL, slot, self.ref(make))

    def out_scratch(self, slot: int) -> None:
        """An output of at most 16 bytes written to a scratch buffer (read by
        ``push_float``/``push_scalar``)."""
        self._op(OUT_SCRATCH, slot)

    def run(self, entry: int, ws_slot: int, pool: list[Any],
            new_workspace: Callable[[], tuple[Any, int]], release_gil: bool) -> None:
        """Call the program's ``i32 yota_main(ptr in0, ..., ptr out0, ..., ptr ws)`` at
        ``entry`` on slots ``0..ws_slot`` (``ws_slot < MAX_ARGS``), with a workspace
        ``(buffer, address)`` popped from ``pool`` (or made) and pushed back after."""
        assert ws_slot < MAX_ARGS
        self._op(RUN, entry, ws_slot, self.ref(pool), self.ref(new_workspace),
                 int(release_gil))

    # the result
    def push_out(self, slot: int) -> None:
        self._op(PUSH_OUT, slot, push=1)

    def push_float(self, slot: int, dtype: np.dtype) -> None:
        assert dtype in (np.float32, np.float64)
        self._op(PUSH_FLOAT, slot, int(dtype == np.float32), push=1)

    def push_scalar(self, slot: int, dtype: np.dtype) -> None:
        self._op(PUSH_SCALAR, slot, self.ref(dtype), push=1)

    def push(self, obj: Any) -> None:
        self._op(PUSH_OBJ, self.ref(obj), push=1)

    def build(self, kind: type, n: int) -> None:
        """Replace the top ``n`` items (``n`` key/value pairs for a dict) by a list, tuple
        or dict of them."""
        op = LIST if kind is list else TUPLE if kind is tuple else DICT
        self._op(op, n, push=1 - (2 * n if kind is dict else n))

    @staticmethod
    def can_make(cls: type, names: Sequence[str]) -> bool:
        """Whether ``new_object`` can make ``cls`` instances: a plain class keeping
        exactly the fields ``names`` in slots."""
        return slot_offsets(cls, names) is not None

    def new_object(self, cls: type, names: Sequence[str]) -> None:
        """Replace the top ``len(names)`` items by a new ``cls`` instance holding them as
        its attributes ``names`` (``__init__`` is not called; ``can_make`` must hold)."""
        offsets = slot_offsets(cls, names)
        assert offsets is not None
        self._op(NEW_OBJECT, self.ref(cls), len(names), *offsets, push=1 - len(names))

    def call(self, n: int) -> None:
        """Replace a callable and ``n`` arguments on top of the stack by its result."""
        self._op(CALL, n, push=-n)

    def incr(self, obj: Any, name: str) -> None:
        self._op(INCR, self.ref(obj), self.ref(sys.intern(name)), self.ref(1))

    def setattr(self, obj: Any, name: str, value: Any) -> None:
        self._op(SETATTR, self.ref(obj), self.ref(sys.intern(name)), self.ref(value))

    def finish(self) -> Callable[[Any], Any]:
        """The native entry: a builtin function of ``nargs`` positional arguments."""
        assert self.depth == 1, "the plan must leave exactly the result on the stack"
        self._op(RETURN)
        return make_entry([self.nslots, self.nregs, self.max_depth, self.ref(None),
                           self.nargs] + self.words, self.keep)


def slot_offsets(cls: type, names: Sequence[str]) -> list[int] | None:
    """The byte offsets of slots ``names`` in a ``cls`` instance, found by setting them in
    one; None unless ``cls`` is a plain class with exactly those slots (and maybe
    ``__weakref__``), no ``__dict__``, and object's ``__new__``."""
    slots = {n for c in cls.__mro__ for n in c.__dict__.get("__slots__", ())}
    if cls.__new__ is not object.__new__ or cls.__dictoffset__ or cls.__itemsize__ \
            or slots - {"__weakref__"} != set(names) or cls.__mro__[-1] is not object \
            or len(cls.__mro__) != 2:
        return None
    obj: Any = object.__new__(cls)
    marks = [object() for _ in names]
    for name, mark in zip(names, marks, strict=True):
        setattr(obj, name, mark)
    words = {ctypes.c_void_p.from_address(id(obj) + off).value: off
             for off in range(16, cls.__basicsize__, 8)}
    found = [words.get(id(m)) for m in marks]
    return None if None in found else [int(f) for f in found if f is not None]


class _MethodDef(ctypes.Structure):
    _fields_ = [("ml_name", ctypes.c_char_p), ("ml_meth", ctypes.c_void_p),
                ("ml_flags", ctypes.c_int), ("ml_doc", ctypes.c_char_p)]


def make_entry(words: Sequence[int], keep: Sequence[Any]) -> Callable[[Any], Any]:
    """A builtin function running the plan ``words``; it holds ``keep`` alive."""
    plan = np.array(words, dtype=np.int64).tobytes()
    mdef = _MethodDef(b"yota_native_call", _dispatcher(), METH_FASTCALL, None)
    keeper = (plan, mdef, tuple(keep))
    new = ctypes.pythonapi.PyCFunction_NewEx
    new.restype = ctypes.py_object
    new.argtypes = [ctypes.c_void_p, ctypes.py_object, ctypes.c_void_p]
    return new(ctypes.addressof(mdef), keeper, None)


