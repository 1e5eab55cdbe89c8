"""The MLIR backend: an ``ir.Function`` rendered in upstream MLIR dialects (``export``),
and run by lowering that module with ``mlir-opt`` / ``mlir-translate`` to LLVM IR that
the llvm backend's JIT loads (``compile``)."""

from __future__ import annotations

from .render import executable, export

__all__ = ["export", "executable"]
