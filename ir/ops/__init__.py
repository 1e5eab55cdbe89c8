"""The op table: for every op its arity, attributes, type inference, and NumPy reference.

``table`` holds ``OpDef`` and the registry; the families live in their own modules
(``elementwise``, ``reduce``, ``shape``, ``index``, ``linalg``, ``lapack``, ``misc``,
``fused``, ``callback``, ``special``) and each registers its ops with :func:`register`.
Importing this package imports them all.
"""

from __future__ import annotations

from . import (  # noqa: F401 - registers
    callback,
    elementwise,
    fused,
    index,
    iota,
    lapack,
    linalg,
    loop,
    misc,
    reduce,
    shape,
    special,
)
from .table import (
    OPS,
    OpDef,
    a_bool,
    a_str,
    an_int,
    anything,
    get_opdef,
    register,
    runs_callee,
    tuple_of_ints,
    types_str,
)

__all__ = ["OPS", "OpDef", "a_bool", "a_str", "an_int", "anything", "get_opdef", "register",
           "runs_callee", "tuple_of_ints", "types_str"]
