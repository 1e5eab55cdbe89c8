"""``update_``: write updated values back into arrays and structures, in place."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Iterator
from typing import Any

import numpy as np

from yota.ir.errors import YotaError

from . import structs
from .gradients import Tangent


def update_(obj: Any, grads: Any, fn: Callable[[Any, Any], Any] = lambda x, gx: x - gx) -> Any:
    """Set each leaf ``x`` of ``obj`` that has a gradient ``gx`` to ``fn(x, gx)``, in place.

    ``grads`` is what ``yota.grad`` gives for ``obj``: an array for an array, and for a
    structure the gradient shaped like it (dicts, lists, tuples, NamedTuples and
    ``yota.Tangent`` objects, with None where a leaf has none) or its flat view
    ``{field path: gradient}`` (``grads.flat[i]``). Arrays are written in place; float
    fields are reassigned in their (mutable) parent.

    >>> import numpy as np, yota
    >>> w = np.ones(2)
    >>> _ = yota.update_(w, np.array([1.0, 2.0]), lambda x, g: x - 0.5 * g)
    >>> w
    array([0.5, 0. ])
    """
    if not callable(fn):
        raise YotaError(f"update_: the rule must be callable as fn(x, gx), got a "
                        f"{type(fn).__name__}")
    if grads is None:
        return obj
    items = [(path, obj if not path else _leaf_at(obj, path), g)
             for path, g in _leaves(obj, grads, ())]
    # every new value is computed and checked before the first write: on an error, nothing
    # of the caller's data has changed
    writes = [(path, x, _new_value(x, g, fn, path, obj)) for path, x, g in items]
    for path, x, new in writes:
        if isinstance(x, np.ndarray):
            x[...] = new
        else:
            _set_field(structs.get_path(obj, path[:-1]), path, new)
    return obj


def _leaves(obj: Any, grads: Any, path: tuple[Any, ...]) -> Iterator[tuple[Any, Any]]:
    """(field path, gradient) of each leaf of ``grads`` (shaped like ``obj``, or flat)."""
    if grads is None:
        return
    if isinstance(grads, Tangent):
        for k, g in grads:
            yield from _leaves(obj, g, path + (k,))
    elif isinstance(grads, dict):
        here = obj if not path else _leaf_at(obj, path)
        flat = grads and all(isinstance(k, tuple) for k in grads) and not (
            isinstance(here, dict) and all(k in here for k in grads))
        for k, g in grads.items():
            if not flat:
                yield from _leaves(obj, g, path + (k,))
            elif g is not None:
                yield path + k, g
    elif isinstance(grads, (list, tuple)) and not hasattr(grads, "shape"):
        for i, g in enumerate(grads):
            yield from _leaves(obj, g, path + (i,))
    else:
        yield path, grads


def _where(path: tuple[Any, ...]) -> str:
    return structs.format_path(path) or "the argument"


def _leaf_at(obj: Any, path: tuple[Any, ...]) -> Any:
    if not isinstance(path, tuple) or not path:
        raise YotaError(f"update_: gradient keys are field paths (tuples) as yota.grad gives "
                        f"them, got {path!r}")
    try:
        return structs.get_path(obj, path)
    except (AttributeError, KeyError, IndexError, TypeError):
        raise YotaError(f"update_: {type(obj).__name__} has no field {_where(path)} (the "
                        "gradients belong to another structure)") from None


def _new_value(x: Any, g: Any, fn: Callable[[Any, Any], Any], path: tuple[Any, ...],
               obj: Any) -> Any:
    parent = structs.get_path(obj, path[:-1]) if path else None
    if isinstance(x, np.ndarray):
        if not x.flags.writeable:
            raise YotaError(f"update_: the array at {_where(path)} is read-only")
    elif type(x) is not float or not path:
        raise YotaError(f"update_: {_where(path)} is a {type(x).__name__}, not an array; it "
                        "cannot be updated in place")
    else:
        _check_settable(parent, path)
    ga = np.asarray(g) if not isinstance(g, str) else None
    if ga is None or ga.dtype.kind not in "fiub":
        raise YotaError(f"update_: the gradient for {_where(path)} is a {type(g).__name__}"
                        f"{f' of dtype {ga.dtype}' if ga is not None else ''}, not a numeric "
                        "array")
    if ga.shape != np.shape(x):
        raise YotaError(f"update_: the gradient for {_where(path)} has shape {ga.shape}, "
                        f"the value has shape {np.shape(x)}")
    new = fn(x, g)
    if np.shape(new) != np.shape(x):
        raise YotaError(f"update_: fn(x, gx) for {_where(path)} returned shape "
                        f"{np.shape(new)}, not the value's shape {np.shape(x)}")
    if isinstance(x, np.ndarray):
        return np.array(new, dtype=x.dtype, copy=True)
    return new


def _check_settable(parent: Any, path: tuple[Any, ...]) -> None:
    params = getattr(parent, "__dataclass_params__", None) if dataclasses.is_dataclass(parent) \
        else None
    frozen = isinstance(parent, tuple) or bool(params is not None and params.frozen)
    if frozen:
        raise YotaError(f"update_: cannot assign {_where(path)}: its parent is an immutable "
                        f"{type(parent).__name__}; store an array there (updated in place) or "
                        "use a mutable structure")


def _set_field(parent: Any, path: tuple[Any, ...], value: Any) -> None:
    key = path[-1]
    if isinstance(parent, (list, dict)):
        parent[key] = value
    else:
        setattr(parent, key, value)
