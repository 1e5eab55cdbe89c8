"""From the executable MLIR module to a loaded program: ``PIPELINE`` and
``mlir-translate``, the llvm backend's array entry point linked in, optimization and
object code by the llvm backend's JIT, and its executable class for the calling side
(argument checks, output arrays, workspace = the status words, failure records)."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

import llvmlite.binding as llvm
import llvmlite.ir as lir
from yota.ir.core import Function
from yota.ir.errors import YotaError

from ..llvm.jit import emit_object, load_object, optimize
from ..llvm.module import ENTRY, ENTRY_OBJ, _array_entry
from ..llvm.runtime import Artifact as LLVMArtifact
from ..llvm.runtime import LLVMExecutable
from ..llvm.target import host, init
from ..llvm.types import I32, PTR
from . import tools
from .render import executable

STATUS_BYTES = 16  # the status words: failure code, offending value (byte 8)


class Artifact(LLVMArtifact):
    MAGIC = b"YOTAMLR1"
    KIND = "Yota MLIR object"


class MLIRExecutable(LLVMExecutable):
    """A function compiled by the ``mlir`` backend: called as an llvm executable.
    ``mlir`` holds the executable module's text (when compiled in this process)."""

    backend = "mlir"
    mlir: str | None = None

    def __repr__(self) -> str:
        return f"<MLIRExecutable @{self.name}: {len(self._in)} inputs, {len(self._out)} outputs>"


_bound: list[str] = []


def bind_runtime() -> None:
    """Make MLIR's runtime helpers (``memrefCopy``) resolvable by the JIT (once)."""
    if _bound:
        return
    lib = tools.runtime_library()
    if lib is not None:
        llvm.load_library_permanently(lib)
    _bound.append(lib or "")


def check_symbols(mod: llvm.ModuleRef) -> None:
    """Every function the module declares resolves in this process (libm, libc, MLIR's
    runtime helpers): an unresolved one would crash the call, so it is an error here."""
    bind_runtime()
    missing = [f.name for f in mod.functions if f.is_declaration
               and not f.name.startswith("llvm.") and not llvm.address_of_symbol(f.name)]
    if missing:
        raise YotaError(f"the MLIR-lowered code calls {', '.join(missing)}, which this "
                        "process does not provide (MLIR's libmlir_c_runner_utils, from the "
                        "libmlir-22 package, provides memrefCopy)")


def llvm_module(fn: Function, text: str) -> llvm.ModuleRef:
    """The LLVM IR of the executable module ``text`` with the array entry linked in."""
    init()
    target = host()
    mod = llvm.parse_assembly(tools.translate(tools.lower(text)))
    wrapper = lir.Module(name="yota.mlir.entry")
    wrapper.triple = target.triple
    nptr = len(fn.inputs) + len(fn.outputs) + 1
    entry = lir.Function(wrapper, lir.FunctionType(I32, [PTR] * nptr), ENTRY)
    _array_entry(SimpleNamespace(module=wrapper), fn, entry)  # type: ignore[arg-type]
    mod.triple = target.triple
    check_symbols(mod)
    mod.link_in(llvm.parse_assembly(str(wrapper)))
    return mod


def build(fn: Function, target_key: dict[str, Any], opt_level: int) -> MLIRExecutable:
    target = host()
    text, failures = executable(fn)
    ll = str(llvm_module(fn, text))
    mod = optimize(ll, target, opt_level)
    obj = emit_object(mod, target)
    meta = {
        "format": 1,
        "name": fn.name,
        "inputs": [[list(v.shape), v.dtype.str] for v in fn.inputs],
        "outputs": [[list(v.shape), v.dtype.str] for v in fn.outputs],
        "input_labels": list(fn.input_labels),
        "ws_bytes": STATUS_BYTES,
        "failures": failures,
        "target": target_key,
    }
    art = Artifact(obj, meta)
    exe = MLIRExecutable(art, load_object(obj, target, [ENTRY, ENTRY_OBJ]), target, fn, ll,
                         str(mod))
    exe.mlir = text
    return exe


def load_code(art: Artifact) -> MLIRExecutable:
    target = host()
    bind_runtime()
    return MLIRExecutable(art, load_object(art.object_code, target, [ENTRY, ENTRY_OBJ]),
                          target)
