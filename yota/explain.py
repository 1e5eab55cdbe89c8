"""``yota.explain``: why a function has the compiled programs it has.

``explain(f)`` lists the programs ``yota.grad`` keeps in memory for ``f`` (and for
functions with its code), per argument signature, and why each one exists: the first
trace, a value read from outside the arguments that changed (or was promoted to a
run-time input), a guard that went another way, new argument shapes.

``explain(f, *args)`` traces the function as ``yota.grad`` would (``yota.pipeline``),
computes the on-disk cache key of the program without compiling it, and looks the key up
(``yota.cache.explain_key``): why it hits or misses the on-disk cache. It lives above the
pipeline, which itself compiles through ``yota.cache``.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from yota.ir.errors import YotaError

from . import pipeline
from .cache import Explanation, default_cache, explain_key, make_key
from .variants import describe_variants


def explain(f: Callable[..., Any], *args: Any, backend: str | None = None,
            optimize: bool = True, kind: str = "grad") -> Explanation | Variants:
    """Without ``args``: the programs ``yota.grad`` (or a ``yota.compile``'d function
    ``f``) keeps for ``f``, and why each exists (``Variants``). With ``args``: trace ``f``
    at ``args`` as ``yota.grad`` would (``kind="forward"``: as ``yota.compile``), compute
    its cache key without compiling, and look it up (``Explanation``).

    >>> import numpy as np, yota
    >>> e = yota.explain(lambda x: np.sum(x * x), np.ones(3))
    >>> sorted(e.key.parts) == sorted(yota.cache.KEY_PARTS)
    True
    >>> def sq(x):
    ...     return np.sum(x * x)
    >>> _ = yota.grad(sq, np.ones(3))
    >>> print(yota.explain(sq))  # doctest: +ELLIPSIS
    sq (...): 1 program
      signature x: f64[3]: 1 variant
        #1 first trace
          checks: np (identity)
    """
    if not args:
        return Variants.of(f)
    fn, sig = pipeline.program_ir(f, args, kind=kind, optimized=optimize)
    key = make_key(fn, backend, kind=kind, signature=sig)
    if key is None:
        raise YotaError(f"backend {backend!r} does not save compiled code; nothing is cached")
    return explain_key(key, default_cache())


class Variants:
    """What ``explain(f)`` prints: ``f``'s compiled programs per signature, newest first,
    each with why it exists, what it reads at each call and what it checks."""

    def __init__(self, lines: list[str]) -> None:
        self.lines = lines

    @classmethod
    def of(cls, f: Any) -> Variants:
        from .compile import CompiledFunction
        from .grad import variants_of

        if isinstance(f, CompiledFunction):
            return cls(describe_variants(f.f, f.variants))
        return cls(describe_variants(f, variants_of(f)))

    def __str__(self) -> str:
        return "\n".join(self.lines)

    def __repr__(self) -> str:
        return str(self)
