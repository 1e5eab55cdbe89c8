"""Special functions as elementwise ops: ``lgamma`` (``log|Gamma|``), ``digamma``,
``polygamma`` (attribute ``n >= 1``), ``erf``, ``erfc``, ``erfcx``, ``erfinv``,
``erfcinv``, ``i0``, ``i0e``, ``i1``, ``i1e``, on float32 and float64 operands.

Each is one algorithm of the scalar language (``special_scalar``), written once in
``special_gamma``, ``special_erf`` and ``special_bessel``; ``ALGORITHMS`` maps an op to
it. Here the algorithm runs on NumPy float64 arrays (the reference implementation, so
the interpreter needs neither SciPy nor mpmath, and its results are what every backend
computes: they render the same algorithm as native code). Accuracy against the exact
values (mpmath, 40 digits): within 4 ulps in float64 except near the zeros of
``lgamma``, ``digamma`` and ``polygamma`` on the negative axis, where the reflection
formula cancels (as SciPy's does); float32 results are the float64 ones rounded once.

>>> import numpy as np
>>> float(OPS["lgamma"].impl(np.array(5.0)))  # log(4!)
3.1780538303479458
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from ..errors import IRTypeError
from ..types import TensorType
from . import special_bessel, special_erf, special_gamma
from .special_scalar import F, run_numpy
from .table import OPS, OpDef, an_int, register

ALGORITHMS: dict[str, Callable[..., F]] = {
    "lgamma": special_gamma.lgamma, "digamma": special_gamma.digamma,
    "polygamma": special_gamma.polygamma,
    "erf": special_erf.erf, "erfc": special_erf.erfc, "erfcx": special_erf.erfcx,
    "erfinv": special_erf.erfinv, "erfcinv": special_erf.erfcinv,
    "i0": special_bessel.i0, "i0e": special_bessel.i0e, "i1": special_bessel.i1,
    "i1e": special_bessel.i1e,
}
ATTRS: dict[str, dict[str, Callable[[Any], Any]]] = {"polygamma": {"n": an_int}}


def algorithm(name: str, attrs: dict[str, Any]) -> Callable[[F], F]:
    """The scalar algorithm of special op ``name`` with its attributes bound."""
    fn = ALGORITHMS[name]
    return (lambda x: fn(x, **attrs)) if attrs else fn


def _op(name: str) -> None:
    def infer(types: list[TensorType], attrs: dict[str, Any]) -> TensorType:
        if types[0].dtype.kind != "f":
            raise IRTypeError(f"'{name}' needs a float operand, got {types[0]}")
        if name == "polygamma" and attrs["n"] < 1:
            raise IRTypeError(f"'polygamma' needs n >= 1 (digamma is n = 0), got {attrs['n']}")
        return types[0]

    def impl(x: np.ndarray, **attrs: Any) -> np.ndarray:
        return run_numpy(algorithm(name, attrs), x)

    register(OpDef(name, 1, infer, impl, attrs=ATTRS.get(name, {}), elementwise=True))


for _name in ALGORITHMS:
    _op(_name)

__all__ = ["ALGORITHMS", "OPS", "algorithm"]
