"""Values a traced function reads from outside its arguments, found before it runs.

Before a trace, ``discover(f, args)`` resolves the access chains of ``f``'s code
(``yota.reads``) on the live objects: globals, closure cells, defaults of parameters not
passed, ``self`` of a bound method, attributes and items reached from them, and, through
calls, the code of the user functions, methods and callable objects they reach (their
parameters bound to the chains passed). Each value found is a ``Read``: a *path* from the
function to it and how a compiled program treats it (``mode``):

- ``"is"``: functions, modules, classes and library objects: guarded by identity;
- ``"eq"``: Python and NumPy scalars, strings, None: guarded by type and value;
- ``"array"``: a small array (at most ``CONST_LIMIT`` elements): a constant of the
  program, guarded by its contents (a change in place or a rebinding retraces);
- ``"input"``: a large array, or a scalar or small array that *changed twice* (promoted):
  the trace sees a traced value there (put in place by ``yota.substitution``), and
  the program reads it at every call;
- ``"shape"``/``"type"``: the structure of a list, tuple or dict (type, length, keys) or
  the type of an object whose contents are read;
- ``"code"``: a function written in Python (or a closure): its code, and what its code
  reads, in turn (a function made again with the same code and equal captured values
  is the same function).

A program is reused only when each read still holds (``yota.guards`` checks them), so no
captured value is ever silently stale. ``discover`` is bounded (``MAX_READS``,
``MAX_ITEMS``): what lies beyond is guarded by the identity of its container.
"""

from __future__ import annotations

import contextlib
import functools
import inspect
import threading
import types
import weakref
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from . import structs
from .reads import Chain, Use, code_uses
from .sideeffects import _user_code, _user_file, _user_object
from .tape import Loc

Step = tuple[Any, ...]
Path = tuple[Step, ...]
CONST_LIMIT = 1024  # arrays up to this many elements are constants guarded by contents
MAX_READS = 4096  # reads recorded per trace, at most
MAX_ITEMS = 256  # items of one container guarded one by one, at most
MAX_DEPTH = 4  # nested containers walked into from one read, at most
_SCALARS = (int, float, bool, complex, str, bytes, type(None), np.generic)
_NUMBERS = (int, float, np.integer, np.floating)  # what a promotion makes an input
_IDENTITY = (types.ModuleType, type, types.FunctionType, types.BuiltinFunctionType,
             np.ufunc, np.dtype, types.MethodWrapperType, types.WrapperDescriptorType)
_MUTATORS = frozenset(("append", "extend", "insert", "clear", "update", "add", "discard",
                       "remove", "sort", "reverse", "__setitem__", "__delitem__"))


@dataclass(eq=False)
class Read:
    """A value read from outside the arguments: its ``path`` from the function (or from
    ``root`` when set), its text (``cfg['lam']``), where the code reads it, how the
    program treats it (see the module's docstring) and the value it was traced with
    (for an ``"array"``, a copy; for an ``"input"``, its type, dtype and shape)."""

    path: Path
    text: str
    loc: Loc | None
    mode: str
    value: Any = None
    root: Any = None  # an object the path starts from (a nested trace's function)
    entry: Any = None  # the tape's captured entry of an input
    kind: str = "global"  # what the path starts at: global, closure, self, default
    anchor: Any = None  # (object, rest of the path): the read without the function
    promotable: bool = True  # False in a primitive's body (traced apart: never an input)

    def describe(self) -> str:
        """``global cfg['lam'] read at model.py:12``."""
        where = f" read at {self.loc}" if self.loc is not None else ""
        return f"{self.kind} {self.text}{where}"


@dataclass
class Policy:
    """How the next trace treats what it reads: ``promoted``, the paths that changed
    twice (inputs now); ``substitute``: False inside a nested trace, or after a trace
    whose substituted values made it fail (everything guarded instead)."""

    promoted: frozenset[Path] = frozenset()
    substitute: bool = True
    used: int = 0  # how many values the trace saw as inputs (set by ``substituted``)


_local = threading.local()


@contextlib.contextmanager
def policy(p: Policy) -> Iterator[None]:
    """The policy of the traces started by this thread while the block runs (the
    outermost one uses it; nested traces only guard)."""
    saved = getattr(_local, "policy", None)
    _local.policy = p
    try:
        yield
    finally:
        _local.policy = saved


def current_policy() -> Policy:
    return getattr(_local, "policy", None) or Policy()


# -- evaluating a path ------------------------------------------------------------------------
def step_value(x: Any, step: Step) -> Any:
    """The value one step of a path leads to from ``x``."""
    kind = step[0]
    if kind == "attr":
        return getattr(x, step[1])
    if kind == "item":
        return x[step[1]]
    if kind == "global":
        return x.__globals__[step[1]]
    if kind == "cell":
        return x.__closure__[step[1]].cell_contents
    if kind == "contents":
        return x.cell_contents
    if kind == "self":
        return x.__self__
    if kind == "default":
        return x.__defaults__[step[1]]
    if kind == "kwdefault":
        return x.__kwdefaults__[step[1]]
    if kind == "call":
        return type(x).__call__
    raise ValueError(f"unknown path step {step!r}")


def value_at(root: Any, path: Path) -> Any:
    for s in path:
        root = step_value(root, s)
    return root


def path_text(path: Path, names: Sequence[str] = ()) -> str:
    """The path as the user's code writes it (``cfg['lam']``, ``self.layers[0].W``)."""
    out = ""
    for s in path:
        k = s[0]
        if k in ("global", "kwdefault"):
            out = s[1]
        elif k in ("cell", "default"):
            out = s[2] if len(s) > 2 else f"<{k} {s[1]}>"
        elif k == "self":
            out = "self"
        elif k == "attr":
            out += f".{s[1]}"
        elif k == "item":
            out += f"[{s[1]!r}]"
    return out or "the function"


def _root_kind(path: Path) -> str:
    for s in reversed(path):
        if s[0] in ("global", "cell", "self", "default", "kwdefault"):
            return {"global": "global", "cell": "closure variable", "self": "attribute",
                    "default": "default argument", "kwdefault": "default argument"}[s[0]]
    return "attribute"


# -- discovery ------------------------------------------------------------------------------
@dataclass
class Found:
    """What ``discover`` found: the reads by path, and the arrays among them by id
    (``yota.trace_context`` sources an array that meets a traced value by it)."""

    reads: dict[Path, Read] = field(default_factory=dict)
    arrays: dict[int, Read] = field(default_factory=dict)
    complete: bool = True  # False: a bound was reached (something is guarded coarsely)


class _Resolver:
    def __init__(self, f: Any, policy: Policy) -> None:
        self.f = f
        self.policy = policy
        self.found = Found()
        self.visited: set[Any] = set()
        self.walked: set[Path] = set()
        self.guard_only = 0  # inside a primitive's body: traced apart, nothing substituted

    # entry points
    def start(self, nargs: int) -> None:
        f = self.f
        selfp: Path | None = None
        fpath: Path = ()
        given: dict[str, Path] = {}
        if isinstance(f, functools.partial):  # its function, its stored arguments read
            for name in ("args", "keywords"):
                self.read(((("attr", name),)), getattr(f, name), None)
            given = {k: (("attr", "keywords"), ("item", k)) for k in f.keywords}
            func, fpath = f.func, (("attr", "func"),)
            nargs += len(f.args)
        elif isinstance(f, types.MethodType):
            func, selfp = f.__func__, (("self",),)
            nargs += 1
        elif isinstance(f, types.FunctionType):
            func = f
        else:
            func = vars(type(f)).get("__call__")
            selfp, fpath = (), (("call",),)
            nargs += 1
        if not isinstance(func, types.FunctionType):
            return
        bindings = {**_defaults(func, nargs), **given}  # (library code too: its closure)
        code = func.__code__
        if selfp is not None and code.co_argcount:
            bindings[code.co_varnames[0]] = selfp
        self.analyze(func, fpath, bindings)

    def analyze(self, func: types.FunctionType, fpath: Path, bindings: dict[str, Path]
                ) -> None:
        key = (func.__code__, id(func), tuple(sorted(bindings.items(), key=repr)))
        if key in self.visited or len(self.found.reads) >= MAX_READS:
            return
        self.visited.add(key)
        code = func.__code__
        loc = Loc(code.co_filename, code.co_firstlineno, code.co_name)
        for i, name in enumerate(code.co_freevars):  # each is used by the code, somehow
            for path, value, _ in self._walk(fpath + (("cell", i, name),), ()):  # (range(n),
                self.read(path, value, loc)  # getattr(np, name): builtins' arguments too)
        for use in code_uses(code):
            base = self._base(use.chain[0], func, fpath, bindings)
            if base is None:
                continue
            loc = Loc(code.co_filename, use.line, code.co_name)
            for path, value, done in self._walk(base, use.chain[1:]):
                if use.kind == "call" and done:
                    self.call(path, value, use, func, fpath, bindings, loc)
                else:
                    self.read(path, value, loc)
                    if use.kind == "call":  # np.linalg.norm(w): a library call
                        self._arguments(use, func, fpath, bindings, loc)

    def _base(self, root: Step, func: types.FunctionType, fpath: Path,
              bindings: dict[str, Path]) -> Path | None:
        kind, name = root
        if kind == "global":
            if name not in func.__globals__:
                return None  # a builtin (or not defined yet): not guarded
            return fpath + (("global", name),)
        if kind == "free":
            code = func.__code__
            if name not in code.co_freevars or func.__closure__ is None:
                return None
            return fpath + (("cell", code.co_freevars.index(name), name),)
        return bindings.get(name)

    def _walk(self, path: Path, steps: Chain) -> Iterator[tuple[Path, Any, bool]]:
        """(path, value, whole chain followed) for each place the chain leads to (an
        ``each`` step fans out over a list's items)."""
        try:
            value = value_at(self.f, path)
        except Exception:  # noqa: BLE001 - not there (yet): nothing to guard
            return
        yield from self._follow(path, value, steps)

    def _follow(self, path: Path, value: Any, steps: Chain) -> Iterator[tuple[Path, Any, bool]]:
        for i, s in enumerate(steps):
            if _stops(value):
                yield path, value, False
                return
            if s[0] == "each":
                if isinstance(value, (list, tuple)) and len(value) <= MAX_ITEMS:
                    self.read(path, value, None, shallow=True)
                    for j, v in enumerate(value):
                        yield from self._follow(path + (("item", j),), v, steps[i + 1:])
                else:
                    yield path, value, False
                return
            nxt = _static_step(value, s)
            if nxt is _NOT_FOLLOWED:
                yield path, value, False
                return
            path, value = path + (s,), nxt
        yield path, value, True

    # what is done with a value
    def read(self, path: Path, value: Any, loc: Loc | None, depth: int = 0,
             shallow: bool = False) -> None:
        reads = self.found.reads
        if path in self.walked or shallow and path in reads:
            return
        if len(reads) >= MAX_READS:
            self.found.complete = False
            return
        if structs.is_traced(value) or _is_rng(value):
            return
        policy = self.policy if not self.guard_only else Policy(substitute=False)
        mode, kids = _classify(value, policy, path)
        if mode == "code":  # a function: the same code, and what it reads, guarded
            reads.setdefault(path, Read(path, path_text(path), loc, mode, kind=_root_kind(path)))
            self.analyze(value, path, {})
            return
        if isinstance(value, types.MethodType):  # its object's attributes, as it reads them
            target, selfp, fpath = _callee(value, path)
            if target is not None and selfp is not None:
                names = target.__code__.co_varnames[:1]
                self.analyze(target, fpath, dict(zip(names, [selfp], strict=False)))
        if path not in reads:
            reads[path] = Read(path, path_text(path), loc, mode, kind=_root_kind(path),
                               promotable=not self.guard_only)
            if isinstance(value, np.ndarray):
                self.found.arrays[id(value)] = reads[path]
        if shallow or kids is None:
            return
        self.walked.add(path)
        if len(kids) > MAX_ITEMS or depth >= MAX_DEPTH:
            self.found.complete = False
            return
        for step, v in kids:
            self.read(path + (step,), v, loc, depth + 1)

    def call(self, path: Path, value: Any, use: Use, func: types.FunctionType,
             fpath: Path, bindings: dict[str, Path], loc: Loc) -> None:
        """``value`` (at ``path``) is called with the chains ``use`` passes."""
        target, selfp, calledp = _callee(value, path)
        args = [self._base_and_steps(c, func, fpath, bindings) for c in use.args]
        kwargs = {k: self._base_and_steps(c, func, fpath, bindings) for k, c in use.kwargs}
        if target is None:  # a library callable: guarded by identity; its arguments read
            self._library_call(path, value, loc)
            self._arguments(use, func, fpath, bindings, loc)
            self._wrapped(path, value)
            return
        if isinstance(value, types.FunctionType):
            self.read(path, value, loc)
        elif isinstance(value, types.MethodType):
            self.read(path + (("attr", "__func__"),), value.__func__, loc)
        else:
            self.read(path, value, loc, shallow=True)  # its type
        code = target.__code__
        names = list(code.co_varnames[:code.co_argcount + code.co_kwonlyargcount])
        bound: dict[str, Path] = {}
        if selfp is not None and names:
            bound[names.pop(0)] = selfp
        for name, p in zip(names, args, strict=False):
            if p is not None:
                bound[name] = p
        bound.update({k: p for k, p in kwargs.items() if p is not None and k in names})
        self.analyze(target, calledp, bound)

    def _wrapped(self, path: Path, value: Any) -> None:
        """A wrapper of a user function (``@yota.primitive``, ``functools.wraps``): the
        function's reads too, guarded only (a primitive's body is traced apart, later)."""
        inner = getattr(value, "__wrapped__", None)
        if isinstance(inner, types.FunctionType) and _user_code(inner):
            self.guard_only += 1
            try:
                self.analyze(inner, path + (("attr", "__wrapped__"),), {})
            finally:
                self.guard_only -= 1

    def _arguments(self, use: Use, func: types.FunctionType, fpath: Path,
                   bindings: dict[str, Path], loc: Loc) -> None:
        """The chains passed to a library callable are read."""
        for c in [*use.args, *(c for _, c in use.kwargs)]:
            p = self._base_and_steps(c, func, fpath, bindings)
            if p is not None:
                for q, v, _ in self._walk(p, ()):
                    self.read(q, v, loc)

    def _library_call(self, path: Path, value: Any, loc: Loc) -> None:
        last = path[-1] if path else None
        if isinstance(value, types.BuiltinMethodType) and last is not None and \
                last[0] == "attr" and getattr(value, "__self__", None) is not None:
            if last[1] in _MUTATORS:
                return  # lst.append(x): a write
            for q, v, _ in self._walk(path[:-1], ()):
                self.read(q, v, loc)  # W.sum(), cfg.get("lam"): the object is read
            return
        self.read(path, value, loc)

    def _base_and_steps(self, chain: Chain | None, func: types.FunctionType, fpath: Path,
                        bindings: dict[str, Path]) -> Path | None:
        if chain is None or any(s[0] == "each" for s in chain[1:]):
            return None
        base = self._base(chain[0], func, fpath, bindings)
        return None if base is None else base + tuple(chain[1:])


_NOT_FOLLOWED = object()


def _stops(value: Any) -> bool:
    """A value whose parts are not followed: an array, a library module's contents."""
    return isinstance(value, np.ndarray) or structs.is_traced(value) or (
        isinstance(value, types.ModuleType) and not _user_module(value))


def _static_step(value: Any, s: Step) -> Any:
    """One chain step on a live value, without running user code: an attribute the object,
    its class or a user module holds (a method becomes a bound method; a property or
    another descriptor is not followed), an item of a list, tuple or dict."""
    if s[0] == "item":
        if isinstance(value, (list, tuple, dict)):
            try:
                return value[s[1]]
            except (KeyError, IndexError, TypeError):
                return _NOT_FOLLOWED
        return _NOT_FOLLOWED
    if s[0] != "attr":
        return _NOT_FOLLOWED
    name = s[1]
    if isinstance(value, types.ModuleType):
        return getattr(value, name, _NOT_FOLLOWED)
    try:
        attr = inspect.getattr_static(value, name)
    except AttributeError:
        return _NOT_FOLLOWED
    if isinstance(attr, (staticmethod, classmethod)) or type(attr).__name__ in (
            "member_descriptor", "getset_descriptor", "method_descriptor",
            "classmethod_descriptor", "wrapper_descriptor"):  # (no user code runs)
        return getattr(value, name, _NOT_FOLLOWED)
    if isinstance(attr, types.FunctionType):
        return attr if isinstance(value, type) else types.MethodType(attr, value)
    if hasattr(type(attr), "__get__"):  # a property or another descriptor: not run
        return _NOT_FOLLOWED
    return attr


def _callee(value: Any, path: Path) -> tuple[types.FunctionType | None, Path | None, Path]:
    """The user function a call of ``value`` (at ``path``) runs, the path its ``self``
    is bound to, and the path of the function (for its globals and cells)."""
    if isinstance(value, types.FunctionType):
        return (value, None, path) if _user_code(value) else (None, None, path)
    if isinstance(value, types.MethodType):
        func = value.__func__
        if not isinstance(func, types.FunctionType) or not _user_code(func):
            return None, None, path
        last = path[-1] if path else None
        selfp = path[:-1] if last is not None and last[0] == "attr" else path + (("self",),)
        return func, selfp, path
    if isinstance(value, type) or not _user_object(value):
        return None, None, path
    call = None
    for cls in type(value).__mro__:
        call = vars(cls).get("__call__")
        if call is not None:
            break
    if not isinstance(call, types.FunctionType) or not _user_code(call):
        return None, None, path
    return call, path, path + (("call",),)


def _classify(value: Any, policy: Policy, path: Path
              ) -> tuple[str, list[tuple[Step, Any]] | None]:
    """How a read value is treated, and the parts of it read in turn."""
    if isinstance(value, np.ndarray):
        if value.dtype.kind not in "biuf":
            return "is", None
        big = value.size > CONST_LIMIT or path in policy.promoted
        return ("input" if big and policy.substitute else "array"), None
    if isinstance(value, types.FunctionType) and (value.__closure__ or _user_code(value)):
        return "code", None
    if isinstance(value, (types.MethodType, types.BuiltinMethodType, range, slice)):
        return "eq", None  # (a new bound method at each obj.method: equal, not the same)
    if isinstance(value, _SCALARS):
        promote = path in policy.promoted and isinstance(value, _NUMBERS) and \
            not isinstance(value, (bool, np.bool_)) and policy.substitute
        return ("input" if promote else "eq"), None
    if structs.is_static_box(value) or isinstance(value, _IDENTITY):
        return "is", None
    if isinstance(value, (list, tuple)):
        return "shape", [(("item", i), v) for i, v in enumerate(value)]
    if isinstance(value, dict):
        keys = list(value)
        if not all(isinstance(k, (int, str)) for k in keys):
            return "is", None
        return "shape", [(("item", k), value[k]) for k in keys]
    if _user_object(value) and not hasattr(type(value), "__array__"):
        d = getattr(value, "__dict__", None)
        if isinstance(d, dict):
            return "type", [(("attr", k), v) for k, v in d.items()
                            if isinstance(k, str) and not k.startswith("__")]
    return "is", None


def _user_module(m: types.ModuleType) -> bool:
    path = getattr(m, "__file__", None)
    return path is not None and _user_file(path)


def _is_rng(x: Any) -> bool:
    from .randomness import rng_types

    return isinstance(x, rng_types())


def _defaults(func: types.FunctionType, nargs: int) -> dict[str, Path]:
    """The parameters a call with ``nargs`` positional arguments leaves to their defaults,
    bound to the paths of those defaults."""
    code = func.__code__
    out: dict[str, Path] = {}
    defaults = func.__defaults__ or ()
    first = code.co_argcount - len(defaults)
    for i in range(len(defaults)):
        name = code.co_varnames[first + i]
        if first + i >= nargs:
            out[name] = (("default", i, name),)
    for name in (func.__kwdefaults__ or {}):
        out[name] = (("kwdefault", name),)
    return out


def discover(f: Callable[..., Any], nargs: int, policy: Policy | None = None) -> Found:
    """The reads of ``f`` called with ``nargs`` positional arguments (see the module's
    docstring).

    >>> import numpy as np
    >>> scale = 2.0
    >>> def f(x):
    ...     return np.sum(x) * scale
    >>> f.__globals__["scale"] = scale
    >>> sorted((r.text, r.mode) for r in discover(f, 1).reads.values())
    [('np', 'is'), ('scale', 'eq')]
    """
    r = _Resolver(f, policy or Policy())
    r.start(nargs)
    return r.found


# -- after the trace: the values as a program checks them ---------------------------------
def settle(found: Found, f: Any) -> list[Read]:
    """The reads as a program checks them, after the trace: each one's value as the trace
    left it (a function's own writes, ``self.calls += 1``, are not changes from outside)."""
    out: list[Read] = []
    for r in found.reads.values():
        try:
            v = value_at(r.root if r.root is not None else f, r.path)
        except Exception:  # noqa: BLE001 - removed by the function itself
            continue
        if structs.is_traced(v):
            continue
        r.value = seen_value(r.mode, v)
        r.anchor = _anchor(r.root if r.root is not None else f, r.path)
        out.append(r)
    return out


def _anchor(f: Any, path: Path) -> tuple[Any, Path]:
    """The read as an object other than the function and the rest of its path (a globals
    dict, a closure cell, the bound object...), so that it can be checked after the
    function object is gone (a tape replayed by ``yota.play``)."""
    if not path:
        return f, path
    step, rest = path[0], path[1:]
    kind = step[0]
    if kind == "global":
        return f.__globals__, (("item", step[1]),) + rest
    if kind == "cell":
        return f.__closure__[step[1]], (("contents",),) + rest
    if kind == "self":
        return f.__self__, rest
    if kind == "default":
        return f.__defaults__, (("item", step[1]),) + rest
    if kind == "kwdefault":
        return f.__kwdefaults__, (("item", step[1]),) + rest
    return f, path


def seen_value(mode: str, v: Any) -> Any:
    """What a read's check compares with, for value ``v``."""
    if mode == "array":
        return np.array(v, copy=True)
    if mode == "shape":  # (the keys of a dict of at most MAX_ITEMS: in order)
        keys = tuple(v) if isinstance(v, dict) and len(v) <= MAX_ITEMS else None
        return (type(v), len(v), keys)
    if mode == "type":
        return type(v)
    if mode == "code":
        return v.__code__
    if mode == "input":
        return (type(v), v.dtype, v.shape) if isinstance(v, np.ndarray) else (type(v), None, None)
    return v


def handle(f: Any) -> Callable[[], Any]:
    """A weak handle on function ``f``: called, ``f`` (for a bound method, one of the same
    function on the same object), or None once it is gone."""
    if isinstance(f, types.MethodType):
        func = f.__func__
        try:
            obj = weakref.ref(f.__self__)
        except TypeError:
            strong = f.__self__
            return lambda: types.MethodType(func, strong)
        return lambda: None if obj() is None else types.MethodType(func, obj())
    try:
        return weakref.ref(f)
    except TypeError:
        return lambda: f


def same_function(a: Any, b: Any) -> bool:
    """``a`` and ``b`` are one function (bound methods: the same function and object)."""
    if isinstance(a, types.MethodType) and isinstance(b, types.MethodType):
        return a.__func__ is b.__func__ and a.__self__ is b.__self__
    return a is b
