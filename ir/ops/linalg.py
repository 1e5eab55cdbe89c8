"""Matrix products. ``matmul`` takes ``[..., m, k]`` and ``[..., k, n]`` with equal batch
dimensions (the tracer reshapes 1-D operands and broadcasts batch dimensions)."""

from __future__ import annotations

from typing import Any

import numpy as np

from ..errors import IRTypeError
from ..types import TensorType
from .table import OpDef, register


def _matmul_infer(types: list[TensorType], attrs: dict[str, Any]) -> TensorType:
    a, b = types
    if (a.dtype != b.dtype or a.ndim < 2 or a.ndim != b.ndim or a.shape[:-2] != b.shape[:-2]
            or a.shape[-1] != b.shape[-2] or a.dtype.kind == "b"):
        raise IRTypeError(
            f"'matmul' needs [..., m, k] and [..., k, n] of one numeric dtype with equal batch "
            f"dimensions; got {a} and {b}"
        )
    return a.with_shape(a.shape[:-1] + b.shape[-1:])


register(OpDef("matmul", 2, _matmul_infer, np.matmul, source="({0} @ {1})"))
