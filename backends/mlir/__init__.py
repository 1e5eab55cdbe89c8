"""The MLIR backend: an ``ir.Function`` rendered in upstream MLIR dialects, and run by
lowering that module with ``mlir-opt`` / ``mlir-translate`` to LLVM IR that the llvm
backend's JIT and calling path load.

    >>> import numpy as np
    >>> from yota.ir import parse
    >>> from yota.backends import mlir
    >>> f = parse('''
    ... func @f(%0: f32[4]) -> (f32[]) {
    ...   %1 = exp %0 : f32[4]
    ...   %2 = sum %1 {axes = [0]} : f32[]
    ...   return %2
    ... }''')
    >>> print(mlir.export(f).splitlines()[2])
      func.func @f(%arg0: tensor<4xf32>) -> (tensor<f32>) {
    >>> [float(v) for v in mlir.compile(f)(np.zeros(4, np.float32))]  # doctest: +SKIP
    [4.0]

Public API
----------
``export(fn) -> str``
    The module: ``func``, ``arith``, ``math``, ``tensor``, ``linalg`` (``scf`` loops for
    ``scatter_add``, ``cf.assert`` for guards), each op located at Yota's provenance
    (``loc("model.py":12:0)``). ``mlir-opt-22`` parses and verifies it. The LAPACK-level
    ops are library calls, not upstream ops: ``func.call @yota_linalg_<op>_<dtype>...``
    of a declared external function (``linalg.py``). An op it cannot express raises
    ``UnsupportedError`` naming the op.
``lowered(fn) -> str``
    The executable module after ``PIPELINE`` (the LLVM dialect).
``compile(fn, *, opt_level=3) -> MLIRExecutable``
    The backend interface: the executable module (the same functions, returning a
    failure status instead of asserting, plus a ``@yota_main`` entry on memrefs) lowered
    by ``PIPELINE`` (one-shot bufferization, linalg to loops, scf to cf, math to libm and
    LLVM intrinsics, everything to the LLVM dialect with bare-pointer memref arguments),
    translated to LLVM IR, and loaded by the llvm backend's JIT with its array entry,
    workspace and failure handling: called exactly as an llvm executable.
``save(exe)`` / ``load(data)``, ``target_key()``, ``options_key()``
    The on-disk cache's interface; the target key includes the MLIR tools' version.
``tools``
    Finding ``mlir-opt-22`` / ``mlir-translate-22`` (``tools.missing()`` says why not).

In the executable module, float matrix products call the llvm backend's BLAS GEMMs (on
contiguous buffers), the LAPACK-level ops call functions the llvm backend's own lowering
of each op defines (``linalg.py``), and libm calls carry their libmvec vector variants for
LLVM's loop vectorizer; integer products are ``linalg.matmul`` loops. The README's MLIR section says
where this backend stands against the llvm one.
"""

from __future__ import annotations

from typing import Any

from yota.ir.core import Function
from yota.ir.errors import YotaError
from yota.ir.verifier import maybe_verify

from . import tools
from .render import ENTRY, executable, export
from .runtime import Artifact, MLIRExecutable, build, load_code

__all__ = ["export", "executable", "lowered", "compile", "save", "load", "target_key",
           "options_key", "tools", "MLIRExecutable", "Artifact", "PIPELINE", "ENTRY"]

PIPELINE = tools.PIPELINE
BUILDS_ON = ("llvm",)  # its JIT, entry, GEMM and LAPACK lowering: in the cache key's sources
stats = {"compiles": 0, "loads": 0}


def lowered(fn: Function) -> str:
    """The LLVM-dialect module ``compile`` builds for ``fn``: its executable module after
    ``PIPELINE`` (float matrix products as calls of ``yota_mlir_gemm_N``, which
    ``compile`` defines on the llvm backend's BLAS; LAPACK-level ops as calls of
    ``yota_linalg_<op>_<dtype>..._K``, which it defines by the llvm backend's lowering)."""
    from ..llvm.exported import host

    return tools.lower(executable(fn, blas=host().blas)[0])


def compile(fn: Function, *, opt_level: int = 3) -> MLIRExecutable:
    """Compile ``fn`` through MLIR to native code (see the module docstring)."""
    stats["compiles"] += 1
    maybe_verify(fn)
    return build(fn, target_key(), opt_level)


def save(exe: MLIRExecutable) -> bytes:
    return exe.artifact.to_bytes()


def load(data: bytes | Artifact) -> MLIRExecutable:
    """An executable from ``save``'s bytes, for this machine's target and MLIR tools."""
    stats["loads"] += 1
    art = data if isinstance(data, Artifact) else Artifact.from_bytes(data)
    if art.meta.get("target") != target_key():
        raise YotaError("this object code was built for another target or toolchain "
                        f"({art.meta.get('target')}); recompile it")
    return load_code(art)


def target_key() -> dict[str, Any]:
    """The llvm backend's target (CPU, features, LLVM) plus the MLIR tools' version and
    the pipeline: what the object code depends on."""
    from ..llvm import target_key as llvm_target_key

    return {**llvm_target_key(), "mlir": tools.version(), "pipeline": tools.PIPELINE}


def options_key(opt_level: int = 3) -> dict[str, Any]:
    return {"opt_level": opt_level}


def cacheable() -> bool:
    """Compiled code can be cached where the MLIR tools are installed."""
    return tools.missing() is None
