"""``yota.autograd``: AutoGrad.jl's interface, in Python idiom, on Yota's compiler.

``Param`` boxes an array; ``diff(fn, *args)`` runs ``fn``, recording what depends on the
Params it reaches; ``value(result)`` is the loss and ``grad(result, p)`` the gradient of
Param ``p``. The recording is a Yota trace: ``fn`` is compiled once per signature (the
Params it reaches and the argument shapes), cached and guarded like ``yota.grad``, so a
training loop written this way runs native code after its first step.

>>> import numpy as np
>>> from yota.autograd import Param, diff, grad, params, value
>>> w = Param(np.array([1.0, 2.0]))
>>> def loss(x):
...     return np.sum(w * x) ** 2
>>> J = diff(loss, np.array([3.0, 4.0]))
>>> float(value(J))
121.0
>>> grad(J, w)
array([66., 88.])
>>> params(loss) == [w]
True

``grad(f)`` is the function form (composable: ``grad(grad(f))`` is the second derivative
of a scalar function), ``gradloss(f)`` also returns the loss, ``primitive(*grads)``
declares a primitive by its gradients, ``zerograd(f)`` one with zero gradients, and
``result.nodes()`` lists the recorded operations with their values and gradients.
"""

from __future__ import annotations

import dis
import functools
import inspect
import operator
import types
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from yota.ir.autodiff import vjp
from yota.ir.core import Builder, Function, Op, Value
from yota.ir.errors import YotaError
from yota.ir.interpreter import run

from . import rules, structs, tracer
from .grad import Options, run_grad
from .lowering import to_ir
from .primitives import Primitive
from .program import Program, flatten_args
from .sideeffects import _user_code, _user_object
from .tape import Entry, Loc, Tape, Var
from .validate import argnums_tuple, check_callable

__all__ = ["Param", "Result", "Node", "diff", "value", "grad", "gradloss", "params",
           "primitive", "zerograd", "BACKEND"]

BACKEND: str | None = None  # the backend diff and grad(f) compile for (None: llvm)
MAX_OBJECTS = 100_000  # objects walked to find the Params a function reaches, at most


# -- Param -----------------------------------------------------------------------------------
def _v(x: Any) -> Any:
    """The value of a Param; anything else as it is (lists, tuples, dicts walked)."""
    if isinstance(x, Param):
        return x.value
    if isinstance(x, (list, tuple)):
        return type(x)(_v(a) for a in x) if not hasattr(type(x), "_fields") else x
    if isinstance(x, dict):
        return {k: _v(a) for k, a in x.items()}
    return x


def _delegate(name: str) -> Callable[..., Any]:
    def op(self: Param, *args: Any) -> Any:
        return getattr(self.value, name)(*[_v(a) for a in args])

    op.__name__ = name
    return op


def _update(name: str) -> Callable[..., Any]:
    """``p -= g`` updates ``p.value`` (in place for an array) and keeps ``p`` a Param."""
    update = getattr(operator, name)

    def op(self: Param, other: Any) -> Param:
        self.value = update(self.value, _v(other))
        return self

    op.__name__ = f"__{name}__"
    return op


class Param:
    """A mutable box around an array (AutoGrad.jl's ``Param``): ``p.value``.

    ``diff`` differentiates with respect to every Param its function reaches. A Param is
    used like its array (operators, NumPy functions, methods, indexing). Updating
    ``p.value`` (in place, by assignment, or ``p -= step``) is seen by the next ``diff``.

    >>> p = Param(np.ones(2))
    >>> p * 3.0
    array([3., 3.])
    >>> p -= 0.5
    >>> p
    Param(array([0.5, 0.5]))
    """

    __slots__ = ("value", "__weakref__")
    value: Any

    def __init__(self, value: Any) -> None:
        self.value = value if isinstance(value, (np.ndarray, float)) else np.asarray(value)

    def __repr__(self) -> str:
        return f"Param({self.value!r})"

    def __array_ufunc__(self, ufunc: np.ufunc, method: str, *inputs: Any, **kwargs: Any
                        ) -> Any:
        return getattr(ufunc, method)(*_v(inputs), **_v(kwargs))

    def __array_function__(self, func: Any, types: Any, args: Any, kwargs: Any) -> Any:
        return func(*_v(args), **_v(kwargs))

    def __array__(self, dtype: Any = None, copy: Any = None) -> np.ndarray:
        return np.asarray(self.value, dtype=dtype)

    def __getattr__(self, name: str) -> Any:  # shape, dtype, T, sum(), reshape()...
        if name == "value" or name.startswith("__"):
            raise AttributeError(name)
        return getattr(self.value, name)

    def __len__(self) -> int:
        return len(self.value)

    def __iter__(self) -> Iterator[Any]:
        return iter(self.value)

    def __float__(self) -> float:
        return float(self.value)

    __add__, __radd__ = _delegate("__add__"), _delegate("__radd__")
    __sub__, __rsub__ = _delegate("__sub__"), _delegate("__rsub__")
    __mul__, __rmul__ = _delegate("__mul__"), _delegate("__rmul__")
    __truediv__, __rtruediv__ = _delegate("__truediv__"), _delegate("__rtruediv__")
    __pow__, __rpow__ = _delegate("__pow__"), _delegate("__rpow__")
    __matmul__, __rmatmul__ = _delegate("__matmul__"), _delegate("__rmatmul__")
    __lt__, __le__ = _delegate("__lt__"), _delegate("__le__")
    __gt__, __ge__ = _delegate("__gt__"), _delegate("__ge__")
    __neg__, __pos__, __abs__ = _delegate("__neg__"), _delegate("__pos__"), _delegate("__abs__")
    __getitem__, __setitem__ = _delegate("__getitem__"), _delegate("__setitem__")
    __iadd__, __isub__ = _update("iadd"), _update("isub")
    __imul__, __itruediv__ = _update("imul"), _update("itruediv")


structs.register(static=Param)  # in an argument, a Param is a static value (its identity)
tracer.BOXES.append(Param)  # a traced operation on a Param operates on its value


# -- params: the Params an object graph reaches ----------------------------------------------
_ATOMIC = (np.ndarray, np.generic, int, float, complex, str, bytes, bool, type(None), type,
           types.ModuleType, types.BuiltinFunctionType, types.BuiltinMethodType, range,
           slice, np.ufunc, np.dtype)


def params(obj: Any) -> list[Param]:
    """Every ``Param`` reachable from ``obj``, once each, in a stable order (depth first,
    in attribute, item and key order): through attributes (objects, dataclasses, slots),
    lists, tuples, dicts and sets, and for a function its bound ``self``, closure cells
    and the globals its code names.

    >>> from types import SimpleNamespace
    >>> a, b = Param(np.ones(2)), Param(np.zeros(3))
    >>> m = SimpleNamespace(layers=[{"W": a}, {"W": a, "b": b}])
    >>> params(m) == [a, b]
    True
    """
    found: list[Param] = []
    seen: set[int] = set()
    todo = [obj]
    while todo and len(seen) < MAX_OBJECTS:
        x = todo.pop()
        if isinstance(x, _ATOMIC) or id(x) in seen:
            continue
        seen.add(id(x))
        if isinstance(x, Param):
            found.append(x)
            continue
        todo.extend(reversed(_reach(x)))
    return found


def _reach(x: Any) -> list[Any]:
    """What ``x`` holds, in order."""
    if isinstance(x, (list, tuple)):
        return list(x)
    if isinstance(x, (set, frozenset)):
        return sorted(x, key=id)
    if isinstance(x, dict):
        return list(x.values())
    if isinstance(x, (types.FunctionType, types.MethodType)):
        return _function_reach(x)
    if isinstance(x, types.SimpleNamespace):
        return list(vars(x).values())
    if isinstance(x, functools.partial):
        return [x.func, *x.args, *x.keywords.values()]
    if _user_object(x):
        kids = [v for _, v in structs.children(x) or []]
        return kids + _function_reach(x) if callable(x) else kids
    return []


def _function_reach(f: Any) -> list[Any]:
    """A function's bound ``self``, closure cells and the globals its code names."""
    out: list[Any] = []
    if isinstance(f, types.MethodType):
        out.append(f.__self__)
        f = f.__func__
    elif not isinstance(f, types.FunctionType):
        f = vars(type(f)).get("__call__")
    if not isinstance(f, types.FunctionType) or not _user_code(f):
        return out
    for cell in f.__closure__ or ():
        try:
            out.append(cell.cell_contents)
        except ValueError:  # an empty cell
            continue
    g = f.__globals__
    out += [g[n] for n in _global_names(f.__code__) if n in g]
    out += list(f.__defaults__ or ())
    return out


@functools.lru_cache(maxsize=4096)
def _global_names(code: types.CodeType) -> tuple[str, ...]:
    """The global names ``code`` (and the code nested in it) reads, in order."""
    names = [i.argval for i in dis.get_instructions(code)
             if i.opname in ("LOAD_GLOBAL", "LOAD_NAME")]
    for c in code.co_consts:
        if isinstance(c, types.CodeType):
            names += _global_names(c)
    return tuple(dict.fromkeys(names))


# -- diff and its Result ---------------------------------------------------------------------
def diff(fn: Callable[..., Any], *args: Any, **kwargs: Any) -> Result:
    """Run ``fn(*args, **kwargs)`` (a scalar loss), recording every operation that depends
    on a ``Param`` it reaches (through closures, globals, attributes, containers or the
    arguments); returns a ``Result``: ``value(result)``, ``grad(result, p)``.

    The recording is compiled once per signature (which Params, the arguments' structure,
    dtypes and shapes) and replayed on later calls, with the current values of the Params
    and arguments; Python branches on traced values are guards, as for ``yota.grad``.
    Pass the data a loss reads as arguments (``diff(loss, model, x, y)``): they are inputs
    of the compiled program, where arrays a new closure holds at every call would make a
    new program each time.
    """
    check_callable(fn, "diff")
    ps = tuple(params((fn, args, kwargs)))
    body, owner, key = _body(fn)
    values = tuple(p.value for p in ps)
    call = (key, ps, values, args, kwargs)
    loss, g, program = run_grad(body, call, Options(backend=BACKEND, wrt=(2,), owner=owner))
    grads = {id(p): (g.flat[2] or {}).get((i,)) for i, p in enumerate(ps)}
    snapshot = [np.array(v, copy=True) if isinstance(v, np.ndarray) else v for v in values]
    return Result(loss, ps, grads, program, (key, ps, tuple(snapshot), args, kwargs))


def _body(fn: Callable[..., Any]) -> tuple[Callable[..., Any], Any, Any]:
    """The traced function for ``fn`` (Params swapped for the traced values), the owner its
    programs are cached under (``fn``; for a bound method its object) and the static key
    told apart within that owner (for a bound method its function). The body is made
    anew at each call (a replay does not run it): the cache lives as long as the owner."""
    owner: Any = fn
    key: Any = None
    if isinstance(fn, types.MethodType):
        owner, key = fn.__self__, fn.__func__

    def diffed(key: Any, ps: tuple[Param, ...], values: tuple[Any, ...], args: Any,
               kwargs: Any) -> Any:
        saved = [p.value for p in ps]
        try:
            for p, v in zip(ps, values, strict=True):
                p.value = v
            return _v(fn(*args, **kwargs))  # a Param returned stands for its value
        finally:
            for p, v in zip(ps, saved, strict=True):
                p.value = v

    diffed.__name__ = getattr(fn, "__name__", "fn")
    diffed.__qualname__ = getattr(fn, "__qualname__", diffed.__name__)
    diffed.__yota_source__ = getattr(fn, "__func__", fn)  # type: ignore[attr-defined]
    diffed.__yota_api__ = "yota.autograd.diff"  # type: ignore[attr-defined]
    return diffed, owner, key


class Result:
    """What ``diff`` recorded: ``value`` (the loss), the ``params`` it reached, their
    gradients (``grad(result, p)``) and, for inspection, ``nodes()``."""

    def __init__(self, value: Any, ps: tuple[Param, ...], grads: dict[int, Any],
                 program: Program | None, call: tuple[Any, ...]) -> None:
        self.value = value
        self.params = list(ps)
        self._grads = grads
        self._program = program
        self._call = call
        self._asked = False  # grad was called: nodes() shows gradients

    def grad(self, p: Param) -> Any:
        """The gradient of the loss with respect to ``p`` (None if the loss does not
        depend on it)."""
        if not isinstance(p, Param):
            raise YotaError(f"grad(result, p): p must be a Param, got {type(p).__name__}")
        self._asked = True
        return self._grads.get(id(p))

    def nodes(self) -> Nodes:
        """The recorded operations in order (the Params first): each with its op, the
        user's file:line, its value, its parents and, once ``grad`` was called, the
        gradient of the loss with respect to it. ``print(result.nodes())`` shows a table.
        """
        if self._program is None:
            raise YotaError("nodes(): this result was computed inside a traced function; "
                            "its operations belong to the enclosing program")
        return _nodes(self._program, self._call,
                      [self._grads.get(id(p)) for p in self.params] if self._asked else None)

    def __float__(self) -> float:
        return float(self.value)

    def __repr__(self) -> str:
        return f"Result(value={self.value!r}, params={len(self.params)})"


def value(x: Any) -> Any:
    """The loss of a ``Result``, the array of a ``Param``, anything else as it is."""
    if isinstance(x, Result):
        return x.value
    return x.value if isinstance(x, Param) else x


def grad(x: Any, p: Any = None, argnum: int = 0, *,
         argnums: int | Sequence[int] | None = None) -> Any:
    """``grad(result, p)``: the gradient of Param ``p`` in a ``Result``.
    ``grad(f, argnum=0)``: the function computing the gradient of scalar ``f`` with respect
    to argument ``argnum`` (compiled like ``yota.grad``; called inside a traced function it
    traces through, so ``grad(grad(f))`` is the second derivative). ``argnums`` (JAX's: an
    index, or a tuple of indices for a tuple of gradients) in place of ``argnum``; the
    other arguments are constants of the call (no gradient is computed for them). Each
    gradient is shaped like its argument (``yota.gradients``).

    >>> grad(lambda x: x ** 3)(2.0)
    12.0
    >>> grad(grad(lambda x: x ** 3))(2.0)
    12.0
    >>> grad(lambda a, x: a * np.sum(x), argnums=(0, 1))(2.0, np.ones(2))
    (2.0, array([2., 2.]))
    """
    if isinstance(x, Result):
        return x.grad(p)
    if not callable(x):
        raise YotaError(f"grad: expected a Result (grad(result, param)) or a function "
                        f"(grad(f, argnum)), got {type(x).__name__}")
    f = x
    if isinstance(p, int) and argnum == 0:  # grad(f, 1)
        argnum = p
    nums: Any = argnum if argnums is None else argnums

    def gradient(*args: Any, **kwargs: Any) -> Any:
        return _grad_and_loss(f, nums, args, kwargs)[0]

    gradient.__name__ = f"grad_{getattr(f, '__name__', 'f')}".replace("<lambda>", "lambda")
    return gradient


def gradloss(f: Callable[..., Any], argnum: int = 0, *,
             argnums: int | Sequence[int] | None = None) -> Callable[..., Any]:
    """The function returning ``(gradient, loss)`` of scalar ``f`` with respect to argument
    ``argnum`` (AutoGrad.jl's ``gradloss``; ``argnums`` as in ``grad``).

    >>> gradloss(lambda x: x ** 2)(3.0)
    (6.0, 9.0)
    """
    nums: Any = argnum if argnums is None else argnums

    def gradient_and_loss(*args: Any, **kwargs: Any) -> Any:
        return _grad_and_loss(f, nums, args, kwargs)

    return gradient_and_loss


def _grad_and_loss(f: Callable[..., Any], argnums: int | Sequence[int], args: tuple[Any, ...],
                   kwargs: dict[str, Any]) -> tuple[Any, Any]:
    nums = argnums_tuple(argnums, len(args), "autograd.grad")
    if kwargs:
        call = lambda kw, *a: f(*a, **kw)
        loss, g, _ = run_grad(call, (kwargs, *args), Options(
            backend=BACKEND, wrt=tuple(i + 1 for i in nums), owner=f))
        got = [g[i + 1] for i in nums]
    else:
        loss, g, _ = run_grad(f, args, Options(backend=BACKEND, wrt=nums))
        got = [g[i] for i in nums]
    return (got[0] if isinstance(argnums, int) else tuple(got)), _float(loss)


def _float(x: Any) -> Any:
    return float(x) if isinstance(x, np.floating) else x


# -- primitives -----------------------------------------------------------------------------
def primitive(*grads: Callable[..., Any] | None) -> Callable[[Callable[..., Any]], Primitive]:
    """Declare a primitive by the gradients of its positional arguments (AutoGrad.jl's
    ``@primitive f(x),dy,y expr``): each ``lambda dy, y, *args: ...`` returns the gradient
    of its argument given the output's cotangent ``dy``, the output ``y`` and the
    arguments; None: no gradient flows into that argument. The primitive is traced as one
    unit and its gradients are ordinary traced code (differentiable again).

    >>> @primitive(lambda dy, y, x: dy * y * (1 - y))
    ... def sigm(x):
    ...     return 1 / (1 + np.exp(-x))
    >>> grad(lambda x: np.sum(sigm(x)))(np.zeros(2))
    array([0.25, 0.25])
    """
    def deco(fn: Callable[..., Any]) -> Primitive:
        prim = BoxedPrimitive(fn.fn if isinstance(fn, Primitive) else fn)
        names = _positional(prim.fn)
        if len(grads) > len(names):
            raise YotaError(f"primitive: {len(grads)} gradients for {prim.key.rsplit('.')[-1]}, which "
                            f"has {len(names)} positional arguments ({', '.join(names)})")
        for name, g in zip(names, grads, strict=False):
            if g is None:
                rules.nodiff(prim, name)
            else:
                rules.diffrule(prim, name)(_rule(g, names))
        return prim

    return deco


class BoxedPrimitive(Primitive):
    """A primitive that takes Params for their values."""

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        return super().__call__(*[_v(a) for a in args], **kwargs)


def zerograd(fn: Callable[..., Any]) -> Primitive:
    """A primitive whose gradients are zeros (AutoGrad.jl's ``@zerograd``): arrays of
    zeros of each argument's shape, so the gradient of a Param used only through it is
    zeros, not None."""
    names = _positional(fn.fn if isinstance(fn, Primitive) else fn)
    return primitive(*[_zeros(i) for i in range(len(names))])(fn)


def _zeros(i: int) -> Callable[..., Any]:
    return lambda dy, y, *args: np.zeros_like(args[i])


def _positional(fn: Callable[..., Any]) -> list[str]:
    return [p.name for p in inspect.signature(fn).parameters.values()
            if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]


def _rule(g: Callable[..., Any], names: list[str]) -> Callable[..., Any]:
    """A ``yota.diffrule`` rule (positional primal arguments, keyword-only y and dy) that
    calls the AutoGrad-style gradient ``g(dy, y, *args)``."""
    def rule(*args: Any, y: Any, dy: Any, **kwargs: Any) -> Any:
        return g(dy, y, *args)

    P = inspect.Parameter
    rule.__signature__ = inspect.Signature(  # type: ignore[attr-defined]
        [P(n, P.POSITIONAL_OR_KEYWORD) for n in names]
        + [P("y", P.KEYWORD_ONLY), P("dy", P.KEYWORD_ONLY)])
    return rule


# -- inspection: the recorded nodes -----------------------------------------------------------
@dataclass
class Node:
    """One recorded operation: ``index`` (Params are ``P0``, ``P1``...), ``op``, ``loc``
    (the user's file:line), ``value``, ``parents`` (node names, argument names or
    ``const``) and ``grad`` (the loss's gradient with respect to it; None before ``grad``
    was called, or when no gradient reaches it)."""

    name: str
    op: str
    loc: Loc | None
    value: Any
    parents: tuple[str, ...]
    grad: Any = None


class Nodes(list[Node]):
    """The nodes of a ``Result``; prints as a table."""

    def __str__(self) -> str:
        rows = [("node", "op", "where", "value", "parents", "grad")]
        rows += [(n.name, n.op, str(n.loc) if n.loc else "", _summary(n.value),
                  ", ".join(n.parents), _summary(n.grad)) for n in self]
        widths = [max(len(r[i]) for r in rows) for i in range(6)]
        return "\n".join("  ".join(c.ljust(w) for c, w in zip(r, widths, strict=True)).rstrip()
                         for r in rows)


def _summary(x: Any) -> str:
    if x is None:
        return ""
    a = np.asarray(x)
    if a.ndim == 0:
        return f"{a[()]:.6g}" if a.dtype.kind == "f" else str(a[()])
    body = np.array2string(a.ravel(), threshold=4, edgeitems=2, precision=4,
                           separator=" ").replace("\n", "")
    return f"{a.dtype}{list(a.shape)} {body}"


def _nodes(program: Program, call: tuple[Any, ...], param_grads: list[Any] | None) -> Nodes:
    tape = program.tape
    fn = to_ir(tape)
    env = tape.ir_values
    entries = [e for e in tape.entries if e.kind == "call" and all(v in env for v in e.outs)]
    names = _node_names(tape, entries)
    inputs = flatten_args(call)[0] + [obj for obj, _, _ in program.captured]
    if tape.randoms:
        inputs += program.tape_draws()
    watched = [env[v] for e in entries for v in e.outs]
    values = run(fn.replace(outputs=tuple(watched), output_labels=None), *inputs)
    value_of = dict(zip(watched, values, strict=True))
    grad_of = _node_grads(fn, watched, inputs) if param_grads is not None else {}
    out = Nodes()
    for i, (argnum, path, var) in enumerate(tape.leaf_vars):
        if argnum == 2 and var is not None:
            g = param_grads[path[0]] if param_grads is not None else None
            out.append(Node(names[var], "Param", None, inputs[i], (), g))
    for e in entries:
        for j, v in enumerate(e.outs):
            op = e.fn if len(e.outs) == 1 else f"{e.fn}[{j}]"
            out.append(Node(names[v], op, e.loc, value_of[env[v]], _parents(e, names),
                            grad_of.get(env[v])))
    return out


def _node_names(tape: Tape, entries: list[Entry]) -> dict[Var, str]:
    names: dict[Var, str] = {}
    for argnum, path, var in tape.leaf_vars:
        if var is None:
            continue
        if argnum == 2:
            names[var] = f"P{path[0]}"
        elif argnum == 3:  # fn's positional arguments
            names[var] = f"args[{path[0]}]" + structs.format_path(path[1:], "_")[1:]
        else:  # its keyword arguments
            names[var] = structs.format_path(path)
    k = 0
    for e in entries:
        for v in e.outs:
            k += 1
            names[v] = f"#{k}"
    return names


def _parents(e: Entry, names: dict[Var, str]) -> tuple[str, ...]:
    out: list[str] = []

    def walk(a: Any) -> None:
        if isinstance(a, Var):
            out.append(names.get(a, "const"))
        elif isinstance(a, (list, tuple)):
            for b in a:
                walk(b)

    walk(e.args)
    walk(list(e.kwargs.values()))
    return tuple(out)


def _node_grads(fn: Function, watched: Sequence[Value], inputs: list[Any]) -> dict[Value, Any]:
    """The gradient of ``fn``'s first output (the loss) with respect to each watched value:
    each one gets a zero added to it, an input, whose gradient is the value's."""
    b = Builder(f"{fn.name}_nodes")
    env: dict[Value, Value] = {v: b.input(v.type, lb or "") for v, lb in
                               zip(fn.inputs, fn.input_labels, strict=True)}
    b.callees = dict(fn.callees)
    watch = {v for v in watched if v.dtype.kind == "f"}
    zero_of: dict[Value, int] = {}
    for op in fn.ops:
        new = Op(op.name, tuple(env[x] for x in op.operands), op.attrs,
                 [Value(r.type) for r in op.results], op.loc)
        b.append(new)
        for r, nr in zip(op.results, new.results, strict=True):
            env[r] = nr
            if r in watch:
                zero_of[r] = len(b.inputs)
                env[r] = b.add(nr, b.input(r.type, "zero"))
    g = vjp(b.build([env[fn.outputs[0]]]), list(zero_of.values()))
    zeros = [np.zeros(v.shape, v.dtype) for v in zero_of]  # inputs after fn's, in order
    outs = run(g, *inputs, *zeros)
    got = dict(zip(g.attrs["grads"], outs[1:], strict=True))
    return {r: got[i] for r, i in zero_of.items() if i in got}
