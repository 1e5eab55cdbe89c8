"""Yota: a reverse-mode automatic-differentiation compiler for NumPy code.

>>> import numpy as np, yota
>>> val, g = yota.grad(lambda x: np.sum(x * x), np.arange(3.0))
>>> g[0]
array([0., 2., 4.])

Importing Yota loads what ``yota.grad`` needs (the tracer, the IR, the on-disk cache);
the rest of the API is imported on first use (module ``__getattr__``): the native
backends and llvmlite when a program is first compiled or loaded, CuPy for CuPy arrays,
mpi4py for ``comm=``, and ``aot``, ``autograd``, ``compile``, ``distributed``,
``explain``, ``graph``, ``simplegrad``, ``to_device``... when first read.
``dir(yota)`` and ``from yota import X`` see every name either way.
"""

from __future__ import annotations

import gc as _gc
import importlib
import os
import sys
import types
from typing import TYPE_CHECKING, Any

# The import creates ~30,000 long-lived objects and no garbage: the collections their
# allocations trigger (about ten, ~2 ms) would only traverse them, so the cyclic
# collector is paused while the package's modules load (then as it was before).
_collecting = _gc.isenabled()
_gc.disable()
try:
    from yota.ir.errors import (
        GuardFailed,
        LinAlgError,
        MissingRuleError,
        SignatureError,
        TraceError,
        UnsupportedError,
        YotaError,
    )

    from .grad import GradientResult, RetraceWarning, Tangent, grad, stats
    from .pipeline import trace  # traces through when called inside a trace
    from .primitives import primitive
    from .tape import Tape
finally:
    if _collecting:
        _gc.enable()

if TYPE_CHECKING:
    from . import autograd, cache, distributed
    from .aot import aot
    from .compile import CompiledFunction, compile, play
    from .device import to_device
    from .explain import explain
    from .graphview import Graph, graph
    from .lowering import to_ir
    from .profile import Profile, profile
    from .rules import check_rule, diffrule, nodiff
    from .simplegrad import simplegrad
    from .update import update_

__version__ = "0.1.0"

# name -> (module, attribute; None: the module itself), imported on first access
_LAZY: dict[str, tuple[str, str | None]] = {
    "cache": ("yota.cache", None),  # the on-disk cache of compiled programs
    "distributed": ("yota.distributed", None),  # data-parallel gradients over MPI
    "autograd": ("yota.autograd", None),  # AutoGrad.jl's interface (Param, diff, grad...)
    "aot": ("yota.aot", "aot"),  # ahead-of-time compilation
    "CompiledFunction": ("yota.compile", "CompiledFunction"),
    "compile": ("yota.compile", "compile"),
    "play": ("yota.compile", "play"),
    "to_device": ("yota.device", "to_device"),
    "explain": ("yota.explain", "explain"),  # why a gradient hits or misses the cache
    "Graph": ("yota.graphview", "Graph"),  # IR graphs, with values and gradients
    "graph": ("yota.graphview", "graph"),
    "to_ir": ("yota.lowering", "to_ir"),
    "check_rule": ("yota.rules", "check_rule"),
    "diffrule": ("yota.rules", "diffrule"),
    "nodiff": ("yota.rules", "nodiff"),
    "simplegrad": ("yota.simplegrad", "simplegrad"),
    "update_": ("yota.update", "update_"),
    "Profile": ("yota.profile", "Profile"),  # per-step timing of compiled programs
    "profile": ("yota.profile", "profile"),
    "jvp": ("yota.transforms", "jvp"),  # forward mode (tangents of the result)
    "hvp": ("yota.transforms", "hvp"),  # Hessian-vector products (forward over reverse)
    "jacobian": ("yota.jacobians", "jacobian"),  # whole Jacobians, fwd or rev, one program
    "hessian": ("yota.jacobians", "hessian"),
    "vmap": ("yota.vmapping", "vmap"),  # batching: per-example programs as one
    "scan": ("yota.loops", "scan"),  # a loop whose step is traced once
    "fori_loop": ("yota.loops", "fori_loop"),
    # the native backend's threads per job (default: YOTA_NUM_THREADS, else the cores)
    "set_num_threads": ("yota.backends.llvm.runtime.pool", "set_num_threads"),
    "num_threads": ("yota.backends.llvm.runtime.pool", "num_threads"),
}
# submodules named like the function they define: the package attribute is the function
_SHADOWED = {name for name, (mod, attr) in _LAZY.items() if mod == f"yota.{name}" and attr}


def __getattr__(name: str) -> Any:
    spec = _LAZY.get(name)
    if spec is None:
        raise AttributeError(f"module 'yota' has no attribute {name!r}")
    mod = importlib.import_module(spec[0])
    value = mod if spec[1] is None else getattr(mod, spec[1])
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_LAZY))


class _Package(types.ModuleType):
    """The ``yota`` module: importing a submodule named like a public function
    (``yota.compile``, ``yota.profile``...) binds the function, not the submodule, as
    ``from yota.compile import compile`` in an eager ``__init__`` would."""

    def __setattr__(self, name: str, value: Any) -> None:
        if name in _SHADOWED and isinstance(value, types.ModuleType) \
                and value.__name__ == f"yota.{name}":
            value = getattr(value, _LAZY[name][1])  # type: ignore[arg-type]
        super().__setattr__(name, value)


sys.modules[__name__].__class__ = _Package

if os.environ.get("YOTA_PROFILE", "").strip():
    from .profile import from_env as _profile_from_env

    _profile_from_env()  # YOTA_PROFILE=1: profile the whole process, print the table at exit

__all__ = [
    "GuardFailed", "LinAlgError", "MissingRuleError", "SignatureError", "TraceError", "UnsupportedError",
    "YotaError", "Tape", "primitive", "trace", "to_ir", "grad", "GradientResult", "stats",
    "CompiledFunction", "compile", "play", "check_rule", "diffrule", "nodiff", "simplegrad",
    "update_", "to_device", "cache", "distributed", "aot", "explain", "profile", "Profile",
    "graph", "Graph", "autograd", "Tangent", "RetraceWarning", "set_num_threads", "num_threads",
]
