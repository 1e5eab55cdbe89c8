"""From LLVM IR text to machine code: verify, optimize at O3 with the new pass manager,
emit an object file, and load it (``objload``, Yota's own loader, else an MCJIT engine).

Compiling always goes through the object file, so a freshly compiled module and one
reloaded from disk in another process run exactly the same code. llvmlite is imported
only to compile, or to load what ``objload`` declines: a process that only loads cached
programs (and the helper pool, ``load_pool``) never imports it.
"""

from __future__ import annotations

import contextlib
import ctypes
import hashlib
import json
import os
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from . import objload
from .objcache import (
    _object_lock,
    _read_object,
    _write_object,
    object_cache_dir,
    set_object_cache,  # noqa: F401 - the backend's hook (``llvm.set_object_cache``)
    sources_digest,
)
from .target import Target, bind_symbol, init, resolve

if TYPE_CHECKING:
    import llvmlite.binding as llvm


def optimize(text: str, target: Target, level: int = 3,
             loop_vectorize: bool = False) -> llvm.ModuleRef:
    """Parse, verify and optimize LLVM IR text (SLP vectorization and unrolling; LLVM's
    loop vectorizer only when asked: the llvm backend's kernels are vectorized already)."""
    init()
    import llvmlite.binding as llvm

    mod = llvm.parse_assembly(text)
    mod.verify()
    tm = target.machine(level)
    mod.data_layout = str(tm.target_data)
    pto = llvm.create_pipeline_tuning_options(speed_level=level)
    pto.loop_vectorization = loop_vectorize and level >= 2
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


class Loaded:
    """What holds loaded code (an ``objload.Image`` or an MCJIT engine), and the
    addresses of its entry points. (A plain class: creating a dataclass costs a new
    process ~0.3 ms.)"""

    __slots__ = ("engine", "addresses")

    def __init__(self, engine: Any, addresses: dict[str, int]) -> None:
        self.engine, self.addresses = engine, addresses

    def __repr__(self) -> str:
        return f"Loaded({type(self.engine).__name__}, {sorted(self.addresses)})"


def load_object(obj: bytes, target: Target, symbols: list[str],
                runtime: Callable[[], None] | None = None) -> Loaded:
    """Load object code; external symbols (BLAS, libmvec, libc, the helper pool) resolve
    by name. ``objload`` loads it when it can, else a new MCJIT engine. ``runtime``
    binds the helper pool's symbols: called when the code refers to them (objload), or
    before loading (MCJIT, which needs every symbol bound beforehand)."""
    def lookup(name: str) -> int | None:
        if runtime is not None and name.startswith("yota_") and name not in objload.SYMBOLS:
            runtime()  # the pool's names (and BLAS/LAPACK's, bound already by host())
        return resolve(name)

    image = objload.load(obj, symbols, lookup)
    if image is not None:
        return Loaded(image, image.addresses)
    if runtime is not None:
        runtime()
    return _mcjit(obj, target, symbols)


def _mcjit(obj: bytes, target: Target, symbols: list[str]) -> Loaded:
    init()
    import llvmlite.binding as llvm

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


# -- the object cache of runtime modules ----------------------------------------------------
# Modules that every process needs before its first call (the helper-thread pool) are
# compiled once and their object code kept on disk, in a directory the front end names
# (``set_object_cache``: the on-disk cache's ``objects/``), keyed by the SHA-256 of their
# LLVM IR text, the optimization level, the target and the LLVM/llvmlite versions: the
# same text on the same machine gives the same object, so the key is exact. The directory
# and its files: ``objcache``.
def object_key(text: str, target: Target, level: int) -> str:
    """The key of the object code of LLVM IR ``text`` at ``level`` for ``target``."""
    h = hashlib.sha256(b"yota-runtime-object/1\n")
    h.update(json.dumps({"level": level, "target": target.key(),
                         "llvm": target.llvm_version, "llvmlite": target.llvmlite_version},
                        sort_keys=True).encode())
    h.update(b"\n" + text.encode())
    return h.hexdigest()


def cached_object(text: str, target: Target, level: int = 3) -> bytes:
    """The object code of LLVM IR ``text`` optimized at ``level``: read from the object
    cache (checked: magic, size and SHA-256 of the code) when one is set and holds it,
    else compiled and stored there (a write that fails is ignored)."""
    d = object_cache_dir()
    key = object_key(text, target, level) if d is not None else ""
    if d is not None:
        obj = _read_object(d / f"{key}.o")
        if obj is not None:
            return obj
    obj = emit_object(optimize(text, target, level), target)
    if d is not None:
        with _object_lock, contextlib.suppress(OSError):
            _write_object(d, key, obj)
    return obj


# -- runtime modules by spec: loaded without building their IR ---------------------------------
# A runtime module's LLVM IR (the helper pool's, ``pool_ir.module``) is a function of a few
# facts (its spec: triple, flags), of the sources that generate it (this package's) and of
# llvmlite's IR printer (its version is in the target's key): its object code is kept
# under the SHA-256 of those, so a later process finds it without building the IR (no
# llvmlite.binding, no IR building) and loads it with ``objload``.
def package_sources() -> list[str]:
    """The backend package's source files, ``runtime/`` included (what can shape a
    runtime module's IR)."""
    runtime = os.path.dirname(os.path.abspath(__file__))
    here = os.path.dirname(runtime)
    return [os.path.join(d, n) for d in (here, runtime) for n in sorted(os.listdir(d))
            if n.endswith(".py")]


def runtime_key(spec: dict[str, Any], sources: list[str], target: Target,
                level: int = 3) -> str:
    """The key of a runtime module's object code by its spec and generating sources."""
    h = hashlib.sha256(b"yota-runtime-spec/1\n")
    h.update(json.dumps({"spec": spec, "level": level, "target": target.key(),
                         "sources": sources_digest(sources)}, sort_keys=True).encode())
    return h.hexdigest()


def runtime_module(spec: dict[str, Any], sources: list[str] | None,
                   build: Callable[[], str], target: Target, names: list[str],
                   level: int = 3) -> Loaded:
    """Load a runtime module and bind its symbols ``names`` for generated code, in both
    loaders: its object code read from the object cache by ``spec`` and ``sources`` (the
    files that generate its IR; None: ``package_sources()``; ``runtime_key``), else
    compiled from ``build()``'s LLVM IR and stored there."""
    d = object_cache_dir()
    key = runtime_key(spec, package_sources() if sources is None else sources, target,
                      level) if d is not None else ""
    obj = _read_object(d / f"{key}.o") if d is not None else None
    if obj is None:
        obj = emit_object(optimize(build(), target, level), target)
        if d is not None:
            with _object_lock, contextlib.suppress(OSError):
                _write_object(d, key, obj)
    loaded = load_object(obj, target, names)
    for name in names:
        bind_symbol(name, loaded.addresses[name])
    return loaded
