"""Array creation from a template: ``zeros_like``, ``ones_like``, ``empty_like`` (zeros,
so results are reproducible) and ``full_like``."""

from __future__ import annotations

from typing import Any

import numpy as np

from yota.ir.core import Value
from yota.ir.types import TensorType

from .registry import Lower, LoweringContext, register


def _fill(value: float | None) -> Lower:
    def lower(L: LoweringContext, outs: list[TensorType], a: Any, fill_value: Any = None, dtype: Any = None,
              order: Any = None, subok: Any = None, shape: Any = None) -> Value:
        o = outs[0]
        v = value if value is not None else fill_value
        if L.is_traced(v):
            return L.b.broadcast_to(L.operand(v, o.dtype, None), o.shape)
        return L.b.const(v, o.dtype, o.shape)

    return lower


register("zeros_like", np.zeros_like, np.zeros_like)(_fill(0))
register("ones_like", np.ones_like, np.ones_like)(_fill(1))
register("empty_like", np.zeros_like, np.empty_like)(_fill(0))
register("full_like", np.full_like, np.full_like)(_fill(None))
