"""What the llvm backend exports for the backends built on it: the mlir backend links its
modules with this backend's array entry (``module``) and LAPACK lowering (``lower``,
``emit``), optimizes and loads them with its JIT, and calls them through its executable.

``backends/mlir`` imports this module and the package itself, no other module of the
package (an import-linter contract in pyproject.toml keeps it so), so what it relies on
is listed here. Importing it imports the code generator.
"""

from __future__ import annotations

from .abi import ENTRY, ENTRY_OBJ
from .emit import EMITTERS
from .loops import loop
from .lower import FnGen, ModuleGen, Options
from .module import array_entry
from .runtime.executable import WS_ALIGN, Artifact, LLVMExecutable
from .runtime.jit import emit_object, load_object, optimize
from .runtime.symbols import bind_callback
from .runtime.target import host, init, mvec_has
from .types import I8, I32, I64, PTR, declare, i64, reg_type

__all__ = [
    # the JIT and the host: LLVM's set-up, optimization, object code, loading
    "host", "init", "mvec_has", "optimize", "emit_object", "load_object", "bind_callback",
    # the calling side: the executable and its artifact, the entry points' names
    "LLVMExecutable", "Artifact", "WS_ALIGN", "ENTRY", "ENTRY_OBJ", "array_entry",
    # the code generator: functions of LAPACK-level ops, and the LLVM IR helpers
    "ModuleGen", "FnGen", "Options", "EMITTERS", "loop",
    "I8", "I32", "I64", "PTR", "declare", "i64", "reg_type",
]
