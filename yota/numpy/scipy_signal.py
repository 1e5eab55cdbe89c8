"""``scipy.signal``'s ``convolve``, ``correlate`` (N-d; every ``method``: computed
directly, see ``convolve``), ``fftconvolve``/``oaconvolve`` (``axes=None``) and
``convolve2d``/``correlate2d`` (every ``boundary``: ``'fill'`` with any ``fillvalue``,
``'wrap'``, ``'symm'``), with SciPy's results as the trace's examples.

Imported only once the user's code has imported ``scipy.signal`` (``hooks.FAMILIES``).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import scipy.signal as ss

from yota.ir.core import Value
from yota.ir.errors import UnsupportedError
from yota.ir.types import TensorType

from ..userloc import where
from .convolve import correlation_2d, nd_correlation
from .hooks import hook, library_call
from .registry import LoweringContext, register
from .static import static_value


def _entry(name: str) -> Callable[[Any], Any]:
    """The decorated lowering as entry ``scipy.signal.<name>``, SciPy's function as its
    example, and ``scipy.signal.<name>`` passing its calls on to it."""
    key = f"scipy.signal.{name}"

    def deco(lower: Any) -> Any:
        register(key, library_call(getattr(ss, name)))(lower)
        hook("scipy.signal", name)(lambda api, *a, **k: api.call(key, *a, **k))
        return lower
    return deco


def _static(L: LoweringContext, a: Any, what: str) -> Any:
    return static_value(L, a, f"scipy.signal's {what}", "Yota compiles one case of it")


@_entry("convolve")
def _convolve(L: LoweringContext, outs: list[TensorType], in1: Any, in2: Any,
              mode: str = "full", method: str = "auto") -> Value:
    return nd_correlation(L, outs[0], in1, in2, _static(L, mode, "mode"), True,
                          "scipy.signal.convolve")


@_entry("correlate")
def _correlate(L: LoweringContext, outs: list[TensorType], in1: Any, in2: Any,
               mode: str = "full", method: str = "auto") -> Value:
    return nd_correlation(L, outs[0], in1, in2, _static(L, mode, "mode"), False,
                          "scipy.signal.correlate")


def _fft_like(name: str) -> None:
    @_entry(name)
    def lower(L: LoweringContext, outs: list[TensorType], in1: Any, in2: Any,
              mode: str = "full", axes: Any = None) -> Value:
        if _static(L, axes, "axes") is not None:
            raise UnsupportedError(f"scipy.signal.{name}(..., axes=...) at {where()}: "
                                   "Yota convolves over every axis (axes=None)")
        return nd_correlation(L, outs[0], in1, in2, _static(L, mode, "mode"), True,
                              f"scipy.signal.{name}")


_fft_like("fftconvolve")
_fft_like("oaconvolve")


@_entry("convolve2d")
def _convolve2d(L: LoweringContext, outs: list[TensorType], in1: Any, in2: Any,
                mode: str = "full", boundary: str = "fill", fillvalue: Any = 0) -> Value:
    return correlation_2d(L, outs[0], in1, in2, _static(L, mode, "mode"),
                          _static(L, boundary, "boundary"), fillvalue, True,
                          "scipy.signal.convolve2d")


@_entry("correlate2d")
def _correlate2d(L: LoweringContext, outs: list[TensorType], in1: Any, in2: Any,
                 mode: str = "full", boundary: str = "fill", fillvalue: Any = 0) -> Value:
    return correlation_2d(L, outs[0], in1, in2, _static(L, mode, "mode"),
                          _static(L, boundary, "boundary"), fillvalue, False,
                          "scipy.signal.correlate2d")

