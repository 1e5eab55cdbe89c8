"""``update_``: write updated values back into arrays and structures, in place."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import Any

import numpy as np

from yota.ir.errors import YotaError

from . import structs


def update_(obj: Any, grads: Any, fn: Callable[[Any, Any], Any] = lambda x, gx: x - gx) -> Any:
    """Set each leaf ``x`` of ``obj`` that has a gradient ``gx`` to ``fn(x, gx)``, in place.

    ``grads`` is what ``yota.grad`` gives for ``obj``: an array for an array, a dict from
    field path to gradient for a structure. Arrays are written in place; float fields are
    reassigned in their (mutable) parent.

    >>> import numpy as np, yota
    >>> w = np.ones(2)
    >>> _ = yota.update_(w, np.array([1.0, 2.0]), lambda x, g: x - 0.5 * g)
    >>> w
    array([0.5, 0. ])
    """
    if grads is None:
        return obj
    if not isinstance(grads, dict):
        _write_array(obj, grads, fn, ())
        return obj
    for path, g in grads.items():
        if g is None:
            continue
        parent = structs.get_path(obj, path[:-1])
        leaf = structs.get_path(parent, path[-1:])
        if isinstance(leaf, np.ndarray):
            _write_array(leaf, g, fn, path)
        else:
            _set_field(parent, path, fn(leaf, g))
    return obj


def _write_array(x: Any, g: Any, fn: Callable[[Any, Any], Any], path: tuple[Any, ...]) -> None:
    if not isinstance(x, np.ndarray):
        raise YotaError(f"update_: {structs.format_path(path) or 'the argument'} is a "
                        f"{type(x).__name__}, not an array; it cannot be updated in place")
    if not x.flags.writeable:
        raise YotaError(f"update_: the array at {structs.format_path(path) or 'the argument'} "
                        "is read-only")
    x[...] = fn(x, g)


def _set_field(parent: Any, path: tuple[Any, ...], value: Any) -> None:
    key = path[-1]
    where = structs.format_path(path)
    frozen = (isinstance(parent, tuple) or dataclasses.is_dataclass(parent)
              and parent.__dataclass_params__.frozen)  # type: ignore[attr-defined]
    if frozen:
        raise YotaError(f"update_: cannot assign {where}: its parent is an immutable "
                        f"{type(parent).__name__}; store an array there (updated in place) or "
                        "use a mutable structure")
    if isinstance(parent, (list, dict)):
        parent[key] = value
    else:
        setattr(parent, key, value)
