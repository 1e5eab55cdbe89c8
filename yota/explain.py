"""``yota.explain``: why a function's compiled gradient hits or misses the on-disk cache.

It traces the function as ``yota.grad`` would (``yota.pipeline``), computes the cache key
of the program without compiling it, and looks the key up (``yota.cache.explain_key``).
It lives above the pipeline, which itself compiles through ``yota.cache``.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from yota.ir.errors import YotaError

from . import pipeline
from .cache import Explanation, default_cache, explain_key, make_key


def explain(f: Callable[..., Any], *args: Any, backend: str | None = None,
            optimize: bool = True, kind: str = "grad") -> Explanation:
    """Trace ``f`` at ``args`` as ``yota.grad`` would (``kind="forward"``: as
    ``yota.compile``), compute its cache key without compiling, and look it up.

    >>> import numpy as np, yota
    >>> e = yota.explain(lambda x: np.sum(x * x), np.ones(3))
    >>> sorted(e.key.parts) == sorted(yota.cache.KEY_PARTS)
    True
    """
    fn, sig = pipeline.program_ir(f, args, kind=kind, optimized=optimize)
    key = make_key(fn, backend, kind=kind, signature=sig)
    if key is None:
        raise YotaError(f"backend {backend!r} does not save compiled code; nothing is cached")
    return explain_key(key, default_cache())
