"""Backends: turn an ``ir.Function`` into something that runs.

Each backend module has ``compile(fn) -> executable``; an executable is called with
arrays of the function's input types and returns the list of its outputs.
"""

from __future__ import annotations

import importlib
from typing import Any

from yota.ir.errors import YotaError

BACKENDS = {"interp": "yota.backends.interp", "llvm": "yota.backends.llvm",
            "cuda": "yota.backends.cuda"}
DEFAULT_BACKEND = "llvm"


def get_backend(name: str | None) -> Any:
    name = name or DEFAULT_BACKEND
    if name not in BACKENDS:
        raise YotaError(f"unknown backend {name!r}; available: {', '.join(sorted(BACKENDS))}")
    return importlib.import_module(BACKENDS[name])
