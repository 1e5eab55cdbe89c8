"""What ``yota.grad`` returns: gradients shaped like the arguments.

``g[i]`` is the gradient for argument ``i`` in the argument's own shape: an array for an
array, a float for a Python float, a dict with the same keys for a dict, a list, tuple or
NamedTuple of the same type for those, and for a dataclass or any other object a
read-only ``Tangent`` with one attribute per field (Yota.jl's ``Tangent``), nested down
to the arrays. A leaf without a gradient (an int, a string, an integer array, a value the
function does not use, an argument left out by ``argnums``) is None.

``g.flat[i]`` is the same gradient as one dict ``{field path: gradient}`` of the leaves
that have one (the array itself for an array argument), as ``yota.update_`` and the
distributed averaging walk it.

>>> import numpy as np, yota
>>> p = {"W": np.ones((2, 2)), "b": np.zeros(2), "n": 3}
>>> _, g = yota.grad(lambda p, x: np.sum(p["W"] @ x + p["b"]) * p["n"], p, np.ones(2))
>>> sorted(g[0]), g[0]["b"], g[0]["n"]
(['W', 'b', 'n'], array([3., 3.]), None)
>>> g.flat[0][("b",)]
array([3., 3.])
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from yota.ir.core import Function

from . import structs, tracing
from .program import Program
from .tape import Tape, Var


class Tangent:
    """The gradient of an object (a dataclass, an instance of a class): one read-only
    attribute per field, None for a field without a gradient (Yota.jl's ``Tangent``).
    ``t._fields`` is the dict of fields, ``t._type`` the object's class.

    >>> import numpy as np
    >>> from dataclasses import dataclass
    >>> @dataclass
    ... class Linear:
    ...     W: np.ndarray
    >>> t = Tangent(Linear, {"W": np.ones(2)})
    >>> t.W, t
    (array([1., 1.]), Tangent[Linear](W=array([1., 1.])))
    """

    __slots__ = ("_type", "_fields")

    def __init__(self, typ: type, fields: dict[str, Any]) -> None:
        object.__setattr__(self, "_type", typ)
        object.__setattr__(self, "_fields", dict(fields))

    def __getattr__(self, name: str) -> Any:
        fields = object.__getattribute__(self, "_fields")
        if name in fields:
            return fields[name]
        raise AttributeError(f"the gradient of a {self._type.__name__} has no field "
                             f"{name!r} (its fields: {', '.join(map(str, fields))})")

    def __setattr__(self, name: str, value: Any) -> None:
        raise AttributeError("a Tangent (a gradient) is read-only: update the object it is "
                             "the gradient of, e.g. with yota.update_(obj, grad, fn)")

    def __dir__(self) -> list[str]:
        return [str(k) for k in self._fields]

    def __iter__(self) -> Iterator[tuple[str, Any]]:
        """``(field, gradient)`` pairs."""
        return iter(self._fields.items())

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Tangent) or other._type is not self._type or \
                list(other._fields) != list(self._fields):
            return False
        return all(_same(a, b) for a, b in zip(self._fields.values(),
                                               other._fields.values(), strict=True))

    __hash__ = None  # type: ignore[assignment]

    def __repr__(self) -> str:
        inner = ", ".join(f"{k}={_field(v)}" for k, v in self._fields.items())
        return f"Tangent[{self._type.__name__}]({inner})"


def _field(v: Any) -> str:
    """A field of a Tangent: a small array as NumPy shows it, a large one by its type."""
    if isinstance(v, np.ndarray) and v.size > 6:
        return f"array({v.dtype}{list(v.shape)})"
    return " ".join(repr(v).split())


def _same(a: Any, b: Any) -> bool:
    if isinstance(a, np.ndarray) or isinstance(b, np.ndarray):
        return bool(np.array_equal(a, b))
    return bool(a == b)


class GradientResult:
    """Gradients by argument, shaped like the arguments (see ``yota.gradients``):
    ``g[i]``; ``g.flat[i]`` is the flat ``{field path: gradient}`` view."""

    __slots__ = ("_grads", "_fn", "_argnames", "_plan", "__weakref__")  # (the native fast
    # path makes instances with these fields: backends/llvm/runtime/pyentry.py,
    # Plan.new_object)

    def __init__(self, grads: list[Any], fn: Function | Program, argnames: Sequence[str],
                 plan: UnpackPlan | None = None) -> None:
        self._grads = grads  # per argument: the leaf's gradient, or {path: gradient}
        self._fn = fn  # a Program: its IR is read (parsed, after a cache load) on demand
        self._argnames = argnames
        self._plan = plan

    def __getitem__(self, i: int) -> Any:
        g = self._grads[i]
        plan = self._plan
        if type(g) is not dict or plan is None:
            return g
        return _shaped(plan.skeletons[i], (), g)

    def __len__(self) -> int:
        return len(self._grads)

    def __iter__(self) -> Iterator[Any]:
        return (self[i] for i in range(len(self._grads)))

    @property
    def flat(self) -> list[Any]:
        """Per argument: the gradient of an array or float argument, or for a structure a
        dict ``{field path: gradient}`` of the leaves that have one (None: no gradient)."""
        return list(self._grads)

    @property
    def tape(self) -> Function:
        """The gradient program (IR) that computed these gradients."""
        return self._fn.fn if isinstance(self._fn, Program) else self._fn

    def __repr__(self) -> str:
        lines = ["GradientResult("]
        for name, g in zip(self._argnames, self._grads, strict=True):
            if isinstance(g, dict):
                lines.append(f"  {name}: {{")
                for k, v in g.items():
                    lines.append(f"    {structs.format_path(k)}: {_short(v)},")
                lines.append("  },")
            else:
                lines.append(f"  {name}: {_short(g)},")
        return "\n".join(lines + [")"])


def _short(v: Any) -> str:
    if isinstance(v, np.ndarray):
        body = np.array2string(v, threshold=8, precision=4, separator=", ")
        return f"{body.replace(chr(10), ' ')} ({v.dtype}{list(v.shape)})"
    return repr(v)


# -- shaping: the argument's skeleton, with the gradients at its leaves ---------------------
Skeleton = Any  # None: a leaf or a static value; (type, keys, kids): a container


def skeleton(x: Any) -> Skeleton:
    """The containers of argument ``x`` (types and keys), to shape its gradient like it."""
    if structs.is_leaf(x) or structs.is_traced(x):
        return None
    kids = structs.children(x)
    if kids is None:
        return None
    return (type(x), tuple(k for k, _ in kids), tuple(skeleton(v) for _, v in kids))


def _shaped(sk: Skeleton, path: tuple[Any, ...], flat: dict[tuple[Any, ...], Any]) -> Any:
    if sk is None:
        return flat.get(path)
    typ, keys, kids = sk
    vals = [_shaped(k, path + (key,), flat) for key, k in zip(keys, kids, strict=True)]
    if issubclass(typ, dict):
        return dict(zip(keys, vals, strict=True))
    if issubclass(typ, tuple) and hasattr(typ, "_fields"):
        return typ(*vals)
    if issubclass(typ, (tuple, list)):
        return typ(vals) if typ in (tuple, list) else (list if issubclass(typ, list)
                                                       else tuple)(vals)
    return Tangent(typ, dict(zip(keys, vals, strict=True)))


# -- the outputs of a gradient program, as the user gets them --------------------------------
@dataclass(frozen=True)
class UnpackPlan:
    """Where each gradient output goes: (argument, field path or None, output, as float),
    and each argument's skeleton."""

    value_is_float: bool
    leaves: tuple[tuple[int, tuple[Any, ...] | None, int, bool], ...]
    skeletons: tuple[Skeleton, ...] = ()


def grads_of(fn: Function | Program) -> tuple[int, ...]:
    return fn.grads if isinstance(fn, Program) else tuple(fn.attrs.get("grads", ()))


def unpack(fn: Function | Program, tape: Tape, outs: list[Any], args: Sequence[Any]
           ) -> tuple[Any, GradientResult]:
    """The value and gradients as the user gets them, from the outputs of ``fn`` (a
    program's IR, or the ``Program``: its plan is kept on it)."""
    program = fn if isinstance(fn, Program) else None
    plan = unpack_plan(fn, tape, args)
    value = scalar(outs[0], plan.value_is_float)
    if tape.value_shape is not None:  # a loss of one element, returned in its shape
        value = np.reshape(value, tape.value_shape)
    grads: list[Any] = [None] * len(args)
    for argnum, path, j, as_float in plan.leaves:
        g = scalar(outs[j], as_float)
        if path is None:
            grads[argnum] = g
        else:
            if grads[argnum] is None:
                grads[argnum] = {}
            grads[argnum][path] = g
    if tape.has_aux:  # the auxiliary outputs follow the gradients
        aux = tracing.restructure(tape.result[1], outs[1 + len(grads_of(fn)):])
        value = (value, aux)
    return value, GradientResult(grads, program if program is not None else fn,
                                 tape.argnames, plan)


def unpack_plan(fn: Function | Program, tape: Tape, args: Sequence[Any]) -> UnpackPlan:
    program = fn if isinstance(fn, Program) else None
    if program is not None and program.unpack_plan is not None:
        return program.unpack_plan
    out_of = {leaf: j for j, leaf in enumerate(grads_of(fn), start=1)}
    leaves = []
    for i, (argnum, path, _) in enumerate(tape.leaf_vars):
        if i in out_of:
            leaf = structs.get_path(args[argnum], path)
            direct = path == () and (structs.is_leaf(args[argnum])
                                     or structs.is_traced(args[argnum]))
            as_float = type(leaf) is float or structs.is_traced(leaf) and leaf.weak
            leaves.append((argnum, None if direct else path, out_of[i], as_float))
    result = tape.result[0] if tape.has_aux else tape.result
    plan = UnpackPlan(isinstance(result, float) or _weak(result), tuple(leaves),
                      tuple(skeleton(a) for a in args))
    if program is not None:
        program.unpack_plan = plan  # same signature, same plan
    return plan


def _weak(r: Any) -> bool:
    return isinstance(r, Var) and r.weak


def scalar(x: Any, as_float: bool) -> Any:
    """An output as the user gets it: a float for a float, a NumPy scalar for a 0-d array
    (a traced value of an enclosing trace stays as it is)."""
    if structs.is_traced(x):
        return x
    return float(x) if as_float else x[()] if isinstance(x, np.ndarray) and x.ndim == 0 else x
