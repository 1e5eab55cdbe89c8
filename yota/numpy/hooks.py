"""The SciPy functions Yota traces: Yota's version of each, registered by ``@hook``.

A SciPy function is no NumPy function: a traced array reaches it through no protocol.
``yota.foreign`` makes each function registered here answer a call with a traced
argument (while a trace runs) by calling Yota's version, ``fn(api, *args, **kwargs)``,
with the call's own arguments. ``api`` is the tracer's side (this package does not
import the tracer):

- ``api.call(name, *args, **kwargs)``: record entry ``name`` of the NumPy table
  (``registry.register``) on those arguments (what ``np.<function>`` does on tracers);
- ``api.value(x)``: the example value of a traced ``x`` (a plain array), read without
  recording anything: what a version decides from it must be guarded (compare traced
  values and take ``bool`` of the comparison, as user code would);
- ``api.is_traced(x)``: whether ``x`` is a traced value.

A version returns ``NotImplemented`` to let the library's own code run on the call.

Families (one module each) are imported only when the library module they cover is:
``FAMILIES`` maps ``"scipy.linalg"`` to ``yota.numpy.scipy_linalg``.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Protocol

from ..patching import NumpyPatch

Version = Callable[..., Any]

# library module -> Yota's module whose import registers the versions of its functions
FAMILIES: dict[str, str] = {
    "scipy.linalg": "yota.numpy.scipy_linalg",
    "scipy.signal": "yota.numpy.scipy_signal",
    "scipy.special": "yota.numpy.special_funcs",
    "numpy": "yota.numpy.sequences",  # NumPy's functions given lists of traced values
}
HOOKS: dict[tuple[str, str], Version] = {}  # (module, function name) -> Yota's version


class TraceAPI(Protocol):
    """What a version receives as ``api`` (``yota.foreign`` implements it)."""

    def call(self, name: str, *args: Any, **kwargs: Any) -> Any:
        """Record entry ``name`` of the NumPy table on these arguments."""
        ...

    def value(self, x: Any) -> Any:
        """The example value of a traced ``x`` (``x`` itself otherwise)."""
        ...

    def is_traced(self, x: Any) -> bool:
        """Whether ``x`` is a traced value."""
        ...


def library_call(fn: Callable[..., Any]) -> Callable[..., Any]:
    """``fn`` (a library function) as an entry's example function: run on the example
    values with NumPy's creation functions unpatched (the library's own ``np.zeros`` gives
    plain arrays, not constants of the trace)."""
    def forward(*args: Any, **kwargs: Any) -> Any:
        with NumpyPatch.suspended():
            return fn(*args, **kwargs)
    forward.__name__ = getattr(fn, "__name__", "forward")
    return forward


def hook(module: str, *names: str) -> Callable[[Version], Version]:
    """Register the decorated ``fn(api, *args, **kwargs)`` as Yota's version of each
    function ``module.<name>``."""
    def deco(fn: Version) -> Version:
        for name in names:
            HOOKS[(module, name)] = fn
        return fn
    return deco
