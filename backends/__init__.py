"""Backends: turn an ``ir.Function`` into something that runs.

Each backend module has ``compile(fn) -> executable``; an executable is called with
arrays of the function's input types and returns the list of its outputs.

The compiled backends share one kernel layer and differ only in how they render it:

- ``kernel``: the kernel model (accesses, nodes, stores, reductions), ``normalize``,
  fill/copy/combine kernels;
- ``layout``: where each value of a memory-planned function lives (storages, locations,
  views; the view ops are ``plan_memory``'s), with a builder each target gives its rules;
- ``lowering``: walking a function's ops through an emitter table (kernel arguments,
  copies, scratch, output copies);
- ``emit``: the emitters that are the same for every target (elementwise, fused,
  reductions, ``sum_to``, shape-op copies, constants, guard records);
- ``program``: the lowered program as steps (launch, memset, GEMM, call) for targets
  that replay it (cuda);
- ``artifact``: the on-disk container of compiled code.

``llvm/`` renders kernels as vectorized LLVM loop nests in one native module; ``cuda/``
renders them as CUDA C kernels plus steps; ``interp`` runs the reference interpreter.
"""

from __future__ import annotations

import importlib
from typing import Any

from yota.ir.errors import YotaError

BACKENDS = {"interp": "yota.backends.interp", "llvm": "yota.backends.llvm",
            "cuda": "yota.backends.cuda", "mlir": "yota.backends.mlir"}
DEFAULT_BACKEND = "llvm"


def get_backend(name: str | None) -> Any:
    name = name or DEFAULT_BACKEND
    if name not in BACKENDS:
        raise YotaError(f"unknown backend {name!r}; available: {', '.join(sorted(BACKENDS))}")
    return importlib.import_module(BACKENDS[name])
