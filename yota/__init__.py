"""Yota: a reverse-mode automatic-differentiation compiler for NumPy code.

>>> import numpy as np, yota
>>> val, g = yota.grad(lambda x: np.sum(x * x), np.arange(3.0))
>>> g[0]
array([0., 2., 4.])
"""

from yota.ir.errors import (
    GuardFailed,
    LinAlgError,
    MissingRuleError,
    SignatureError,
    TraceError,
    UnsupportedError,
    YotaError,
)

# yota.cache: the on-disk cache of compiled programs; yota.distributed: data-parallel
# gradients over MPI (mpi4py is imported on first use); yota.autograd: AutoGrad.jl's
# interface (Param, diff, grad, params...)
from . import autograd, cache, distributed
from .aot import aot  # ahead-of-time compilation
from .compile import CompiledFunction, compile, play
from .device import to_device
from .explain import explain  # why a compiled gradient hits or misses the on-disk cache
from .grad import GradientResult, grad, stats
from .graphview import Graph, graph  # IR graphs, with values and gradients
from .lowering import to_ir
from .pipeline import trace  # traces through when called inside a trace
from .primitives import primitive
from .profile import Profile, profile  # per-step timing of compiled programs
from .profile import from_env as _profile_from_env
from .rules import check_rule, diffrule, nodiff
from .simplegrad import simplegrad
from .tape import Tape
from .update import update_

__version__ = "0.1.0"

_profile_from_env()  # YOTA_PROFILE=1: profile the whole process, print the table at exit

__all__ = [
    "GuardFailed", "LinAlgError", "MissingRuleError", "SignatureError", "TraceError", "UnsupportedError",
    "YotaError", "Tape", "primitive", "trace", "to_ir", "grad", "GradientResult", "stats",
    "CompiledFunction", "compile", "play", "check_rule", "diffrule", "nodiff", "simplegrad",
    "update_", "to_device", "cache", "distributed", "aot", "explain", "profile", "Profile",
    "graph", "Graph", "autograd",
]
