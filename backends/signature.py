"""The checks a compiled program makes on its arguments, with the reference interpreter's
messages (``yota.ir.interpreter.check_inputs``), shared by the runtimes."""

from __future__ import annotations

from typing import Any

import numpy as np
from yota.ir.errors import SignatureError
from yota.ir.types import TensorType


def check_arity(name: str, expected: int, args: Any) -> None:
    if len(args) != expected:
        raise SignatureError(f"@{name} takes {expected} inputs, got {len(args)}")


def check_input(name: str, label: str, shape: tuple[int, ...], dtype: np.dtype,
                arr: Any) -> None:
    """``arr`` (anything with ``shape`` and ``dtype``) can be input ``label`` of ``@name``,
    of type ``dtype[shape]``: the same shape, a dtype that casts to it within its kind."""
    t = TensorType(dtype, shape)
    if tuple(arr.shape) != shape:
        raise SignatureError(f"@{name}: {label} should have shape {list(shape)} "
                             f"({t}), got {list(arr.shape)}")
    if arr.dtype != dtype and not np.can_cast(arr.dtype, dtype, casting="same_kind"):
        raise SignatureError(f"@{name}: {label} should be {t}, got {arr.dtype}")
