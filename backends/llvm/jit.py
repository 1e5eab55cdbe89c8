"""From LLVM IR text to machine code: verify, optimize at O3 with the new pass manager,
emit an object file, and load it into an MCJIT engine.

Compiling always goes through the object file, so a freshly compiled module and one
reloaded from disk in another process run exactly the same code.
"""

from __future__ import annotations

import ctypes
from collections.abc import Callable
from dataclasses import dataclass

import llvmlite.binding as llvm

from .target import Target, init


def optimize(text: str, target: Target, level: int = 3) -> llvm.ModuleRef:
    """Parse, verify and optimize LLVM IR text (loop and SLP vectorization, unrolling)."""
    init()
    mod = llvm.parse_assembly(text)
    mod.verify()
    tm = target.machine(level)
    mod.data_layout = str(tm.target_data)
    pto = llvm.create_pipeline_tuning_options(speed_level=level)
    pto.loop_vectorization = False  # kernels are vectorized explicitly already
    pto.slp_vectorization = level >= 2
    pto.loop_unrolling = level >= 2
    pb = llvm.create_pass_builder(tm, pto)
    pb.getModulePassManager().run(mod, pb)
    mod.verify()
    return mod


def emit_object(mod: llvm.ModuleRef, target: Target) -> bytes:
    return target.machine().emit_object(mod)


def emit_assembly(mod: llvm.ModuleRef, target: Target) -> str:
    return target.machine().emit_assembly(mod)


@dataclass
class Loaded:
    """An engine holding loaded code, and the addresses of its entry points."""

    engine: llvm.ExecutionEngine
    addresses: dict[str, int]


def load_object(obj: bytes, target: Target, symbols: list[str]) -> Loaded:
    """Load object code into a new MCJIT engine; external symbols (BLAS, libmvec,
    libc, and the helper pool once ``pool.ensure_pool()`` bound it) resolve by name."""
    init()
    engine = llvm.create_mcjit_compiler(llvm.parse_assembly(""), target.machine())
    engine.add_object_file(llvm.ObjectFileRef.from_data(obj))
    engine.finalize_object()
    addrs = {s: engine.get_function_address(s) for s in symbols}
    missing = [s for s, a in addrs.items() if not a]
    if missing:
        raise RuntimeError(f"symbols {missing} not found in the object code")
    return Loaded(engine, addrs)


def cfunc(addr: int, nargs: int) -> Callable[..., int]:
    """A ctypes function ``int32 f(void*, ...)`` (ctypes releases the GIL around it)."""
    proto = ctypes.CFUNCTYPE(ctypes.c_int32, *([ctypes.c_void_p] * nargs))
    return proto(addr)
