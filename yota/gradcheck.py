"""``yota.grad`` against finite differences, over argument structures.

The comparisons are those of the one checker, ``yota.ir.autodiff.check``; this module
only walks the float leaves of the arguments (arrays, floats, fields of structures) and
rebuilds the arguments with one leaf replaced. ``yota.check_rule``, ``yota-ir check``
and the tests use it.

>>> import numpy as np, yota
>>> f = lambda x: float(np.sum(x ** 3))
>>> x = np.array([1.0, 2.0])
>>> _, g = yota.grad(lambda x: np.sum(x ** 3), x)
>>> [round(c.relative_error(), 6) for c in directional(f, [x], g, np.random.default_rng(0))]
[0.0]
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from yota.ir.autodiff import check as fd
from yota.ir.types import TensorType

from . import structs


@dataclass(frozen=True)
class Leaf:
    """A float leaf of the arguments: argument number, field path (``()``: the argument
    itself), and its value."""

    argnum: int
    path: tuple[Any, ...]
    value: Any


def float_leaves(args: Sequence[Any]) -> list[Leaf]:
    """Every float leaf of ``args``, in order."""
    out = []
    for argnum, arg in enumerate(args):
        leaves, _ = structs.flatten(arg)
        out += [Leaf(argnum, path, leaf) for path, leaf in leaves
                if np.asarray(leaf).dtype.kind == "f"]
    return out


def with_leaf(args: Sequence[Any], leaf: Leaf, value: Any) -> list[Any]:
    """``args`` with ``leaf`` replaced by ``value`` (structures rebuilt, not mutated)."""
    new = list(args)
    new[leaf.argnum] = structs.rebuild(args[leaf.argnum],
                                       lambda p, x: value if p == leaf.path else x)
    return new


def gradient_of(g: Any, leaf: Leaf) -> Any:
    """The gradient of ``leaf`` in a ``GradientResult`` (None: no gradient)."""
    flat = g.flat if hasattr(g, "flat") else g
    return flat[leaf.argnum] if leaf.path == () else (flat[leaf.argnum] or {}).get(leaf.path)


def _value_at(f: Callable[..., Any], args: Sequence[Any],
              leaves: Sequence[Leaf]) -> fd.ValueAt:
    def value_at(i: int, x: Any) -> float:
        return float(np.asarray(f(*with_leaf(args, leaves[i], x))))

    return value_at


def directional(f: Callable[..., Any], args: Sequence[Any], g: Any,
                rng: np.random.Generator, *, eps: float = 1e-6,
                leaves: Sequence[Leaf] | None = None) -> list[fd.Comparison]:
    """``fd.directional`` over the float leaves of ``args`` (or ``leaves``): one random
    direction per leaf; ``Comparison.index`` indexes the leaves."""
    leaves = float_leaves(args) if leaves is None else leaves
    return fd.directional(_value_at(f, args, leaves), [lf.value for lf in leaves],
                          [gradient_of(g, lf) for lf in leaves], rng, eps)


@dataclass
class LeafCheck:
    """The element-by-element check of one float leaf of one argument."""

    arg: str
    leaf: str
    type: str
    checked: int
    size: int
    error: float


def elementwise(f: Callable[..., Any], args: Sequence[Any], g: Any, argnames: Sequence[str],
                *, eps: float | None, max_elements: int, rng: np.random.Generator
                ) -> list[LeafCheck]:
    """``fd.elementwise`` on up to ``max_elements`` elements of every float leaf (step
    ``eps``, default 1e-6, scaled by ``max(1, |x|)``). The differences are taken in
    float64: ``f`` runs on the arguments with their float32 leaves made float64, so a
    float32 model's gradient is compared with accurate differences, not with float32
    ones (a step of 1e-2 in float32 is wrong in the third digit)."""
    leaves = float_leaves(args)
    wide = [structs.rebuild(a, lambda _, x: _float64(x)) for a in args]
    wide_leaves = float_leaves(wide)
    value_at = _value_at(f, wide, wide_leaves)
    out = []
    for i, lf in enumerate(leaves):
        arr = np.asarray(lf.value)
        picks = fd.sample(arr.size, max_elements, rng)
        step = eps if eps is not None else 1e-6
        c = fd.elementwise(value_at, i, wide_leaves[i].value, gradient_of(g, lf), picks, step)
        name = argnames[lf.argnum]
        out.append(LeafCheck(name, structs.format_path(lf.path, name), leaf_type(lf.value),
                             c.checked, int(arr.size), c.relative_error()))
    return out


def _float64(x: Any) -> Any:
    """A float32 leaf as float64 (other leaves as they are)."""
    if isinstance(x, (np.ndarray, np.generic)) and x.dtype == np.float32:
        return x.astype(np.float64)
    return x


def leaf_type(leaf: Any) -> str:
    """``float`` or the leaf's IR type (``f64[3,4]``)."""
    if type(leaf) is float:
        return "float"
    a = np.asarray(leaf)
    return str(TensorType(a.dtype, a.shape))


def no_float_reason(arg: Any) -> str | None:
    """Why argument ``arg`` is not differentiable (None if it has float leaves)."""
    leaves, _ = structs.flatten(arg)
    if any(np.asarray(x).dtype.kind == "f" for _, x in leaves):
        return None
    if not leaves:
        return f"not differentiable ({type(arg).__name__}: a constant of the trace)"
    types = ", ".join(sorted({leaf_type(x) for _, x in leaves}))
    return f"not differentiable (no float leaves: {types})"
