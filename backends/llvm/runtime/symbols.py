"""The names that Yota itself provides to generated code, bound when code is loaded: the
helper pool's (``pool.py``, loaded on first reference) and ``yota_callback``, the way out
of native code into Python (``backends/callback.py``). Generated code reaches them by
name, as it reaches BLAS and LAPACK (``blas.py``) and libmvec and libc
(``target.resolve``), so its object code holds no address."""

from __future__ import annotations


def ensure_runtime() -> None:
    """Bind the helper pool's symbols (once per process: ``pool.ensure_pool``) and
    ``yota_callback``: for code that refers to them (``jit.load_object``)."""
    from . import objload, pool

    bind_callback()
    pool.ensure_pool()
    for name, addr in getattr(pool, "_addresses", {}).items():
        if name not in objload.SYMBOLS:  # bound for MCJIT only (llvm.add_symbol)
            objload.bind(name, addr)


def bind_callback() -> None:
    """Bind ``yota_callback`` (opaque primitives' calls out to Python, ``backends/callback``)
    for native code, once per process, without importing the code generator."""
    from ... import callback
    from .objload import SYMBOLS
    from .target import bind_symbol

    if callback.SYMBOL not in SYMBOLS:
        bind_symbol(callback.SYMBOL, callback.ADDRESS)
