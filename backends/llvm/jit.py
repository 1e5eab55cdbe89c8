"""From LLVM IR text to machine code: verify, optimize at O3 with the new pass manager,
emit an object file, and load it into an MCJIT engine.

Compiling always goes through the object file, so a freshly compiled module and one
reloaded from disk in another process run exactly the same code.
"""

from __future__ import annotations

import contextlib
import ctypes
import hashlib
import json
import os
import stat
import tempfile
import threading
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import llvmlite
import llvmlite.binding as llvm

from .target import Target, init


def optimize(text: str, target: Target, level: int = 3,
             loop_vectorize: bool = False) -> llvm.ModuleRef:
    """Parse, verify and optimize LLVM IR text (SLP vectorization and unrolling; LLVM's
    loop vectorizer only when asked: the llvm backend's kernels are vectorized already)."""
    init()
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


# -- the object cache of runtime modules ----------------------------------------------------
# Modules that every process needs before its first call (the helper-thread pool) are
# compiled once and their object code kept on disk, in a directory the front end names
# (``set_object_cache``: the on-disk cache's ``objects/``), keyed by the SHA-256 of their
# LLVM IR text, the optimization level, the target and the LLVM/llvmlite versions: the
# same text on the same machine gives the same object, so the key is exact.
OBJ_MAGIC = b"YOTARTO1"
_object_dir: Path | None = None
_object_lock = threading.Lock()


def set_object_cache(path: str | os.PathLike[str] | None) -> None:
    """Keep compiled runtime modules in ``path`` (created owner-only; None: keep none)."""
    global _object_dir
    _object_dir = None if path is None else Path(path)


def object_key(text: str, target: Target, level: int) -> str:
    """The key of the object code of LLVM IR ``text`` at ``level`` for ``target``."""
    h = hashlib.sha256(b"yota-runtime-object/1\n")
    h.update(json.dumps({"level": level, "target": target.key(),
                         "llvm": ".".join(map(str, llvm.llvm_version_info)),
                         "llvmlite": llvmlite.__version__}, sort_keys=True).encode())
    h.update(b"\n" + text.encode())
    return h.hexdigest()


def cached_object(text: str, target: Target, level: int = 3) -> bytes:
    """The object code of LLVM IR ``text`` optimized at ``level``: read from the object
    cache (checked: magic, size and SHA-256 of the code) when one is set and holds it,
    else compiled and stored there (a write that fails is ignored)."""
    d = _object_dir
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


def _safe_dir(d: Path) -> bool:
    st = os.stat(d)
    return stat.S_ISDIR(st.st_mode) and st.st_uid in (os.getuid(), 0) \
        and not st.st_mode & 0o022


def _read_object(path: Path) -> bytes | None:
    try:
        if not _safe_dir(path.parent):
            return None
        raw = path.read_bytes()
    except OSError:
        return None
    head = len(OBJ_MAGIC) + 64
    obj = raw[head:]
    if raw[:len(OBJ_MAGIC)] != OBJ_MAGIC or \
            raw[len(OBJ_MAGIC):head].decode("ascii", "replace") != hashlib.sha256(obj).hexdigest():
        with contextlib.suppress(OSError):
            path.unlink()  # damaged: compiled again and rewritten
        return None
    return obj


def _write_object(d: Path, key: str, obj: bytes) -> None:
    if not d.is_dir():
        d.mkdir(mode=0o700, parents=True, exist_ok=True)
        os.chmod(d, 0o700)
    if not _safe_dir(d):
        return
    fd, tmp = tempfile.mkstemp(prefix=".tmp.", dir=d)
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(OBJ_MAGIC + hashlib.sha256(obj).hexdigest().encode() + obj)
        os.replace(tmp, d / f"{key}.o")
    finally:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
