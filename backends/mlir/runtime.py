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
    return MLIRExecutable(art, load_object(art.object_code, target, [ENTRY, ENTRY_OBJ]),
                          target)
