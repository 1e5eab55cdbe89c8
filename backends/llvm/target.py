"""The host target: LLVM set-up, target machines, and the external symbols generated code
reaches *by name* (never by a baked-in address): glibc's vector math library (libmvec),
BLAS GEMMs from NumPy's bundled OpenBLAS (as ``yota_sgemm``/``yota_dgemm``), and libc's
``pthread_create``/``pthread_join``.

``host()`` describes the machine once per process; ``Target.key()`` is what a cache key
needs (object code built for one CPU can SIGILL on another).
"""

from __future__ import annotations

import ctypes
import ctypes.util
import glob
import os
import threading
from dataclasses import dataclass
from functools import cache
from typing import Any

import llvmlite
import llvmlite.binding as llvm
import numpy as np

# CPython/NumPy ABI facts the array entry relies on (checked at import by the runtime):
# byte offsets of PyArrayObject's data, nd, dimensions and flags, and the flag bits
# C_CONTIGUOUS | ALIGNED.
ARRAY_ABI = {"data": 16, "nd": 24, "dims": 32, "flags": 64, "need": 0x1 | 0x100}
_lock = threading.Lock()
_ready = False

# Generated code calls these; the loader binds them with llvm.add_symbol.
BLAS_SYMBOLS = {
    "yota_sgemm": ("scipy_cblas_sgemm64_", "cblas_sgemm64_", "cblas_sgemm"),
    "yota_dgemm": ("scipy_cblas_dgemm64_", "cblas_dgemm64_", "cblas_dgemm"),
}


@dataclass(frozen=True)
class Target:
    """What code generation needs to know about the host."""

    triple: str
    cpu: str
    features: str
    vector_bits: int  # widest vector registers: 512 (AVX-512), 256 (AVX2) or 128
    mvec_isas: tuple[str, ...]  # libmvec ISA letters usable here, widest first ("e", "d", "b")
    blas: bool  # yota_sgemm / yota_dgemm are bound
    threads: int  # cores this process may use

    def machine(self, opt: int = 3) -> llvm.TargetMachine:
        """A fresh target machine (an MCJIT engine takes ownership of the one it gets)."""
        t = llvm.Target.from_triple(self.triple)
        return t.create_target_machine(cpu=self.cpu, features=self.features, opt=opt,
                                       codemodel="jitdefault")

    def key(self) -> dict[str, Any]:
        """The target's part of a cache key (with the NumPy array field offsets the
        array entry point reads)."""
        return {"triple": self.triple, "cpu": self.cpu, "features": self.features,
                "llvm": ".".join(map(str, llvm.llvm_version_info)),
                "llvmlite": llvmlite.__version__, "mvec": list(self.mvec_isas),
                "blas": self.blas, "array_abi": dict(ARRAY_ABI)}


def init() -> None:
    """Initialize LLVM's native target once (``llvm.initialize()`` is gone in llvmlite
    0.50) and bind the external symbols."""
    global _ready
    if _ready:
        return
    with _lock:
        if not _ready:
            llvm.initialize_native_target()
            llvm.initialize_native_asmprinter()
            _bind_symbols()
            _ready = True


@cache
def host() -> Target:
    init()
    feats = llvm.get_host_cpu_features()
    flat = feats.flatten()
    has = {k for k, v in feats.items() if v}
    bits = 512 if "avx512f" in has else 256 if "avx2" in has else 128
    isas = tuple(i for i, need in (("e", "avx512f"), ("d", "avx2"), ("b", "sse4.1"))
                 if need in has and _mvec() is not None)
    try:
        ncpu = len(os.sched_getaffinity(0))
    except AttributeError:  # pragma: no cover - non-Linux
        ncpu = os.cpu_count() or 1
    return Target(llvm.get_process_triple(), llvm.get_host_cpu_name(), flat, bits, isas,
                  _blas() is not None, max(1, min(ncpu, 8)))


@cache
def _mvec() -> ctypes.CDLL | None:
    """glibc's libmvec, loaded so that the JIT resolves its symbols, or None."""
    for name in ("libmvec.so.1", ctypes.util.find_library("mvec")):
        if not name:
            continue
        try:
            lib = ctypes.CDLL(name)
            lib._ZGVbN4v_expf  # noqa: B018 - probe one symbol
            llvm.load_library_permanently(name)
            return lib
        except (OSError, AttributeError, RuntimeError):
            continue
    return None


def mvec_has(symbol: str) -> bool:
    lib = _mvec()
    return lib is not None and hasattr(lib, symbol)


@cache
def _blas() -> dict[str, int] | None:
    """Addresses of the GEMMs of the OpenBLAS that NumPy loaded, by our own names."""
    root = os.path.dirname(np.__file__)
    cands = sorted(glob.glob(os.path.join(root, "..", "numpy.libs", "*openblas*.so*"))
                   + glob.glob(os.path.join(root, ".libs", "*openblas*.so*")))
    for path in cands:
        try:
            lib = ctypes.CDLL(path)
        except OSError:
            continue
        found: dict[str, int] = {}
        for ours, names in BLAS_SYMBOLS.items():
            for n in names:
                addr = ctypes.cast(getattr(lib, n), ctypes.c_void_p).value \
                    if hasattr(lib, n) else None
                if addr:
                    found[ours] = addr
                    break
        if len(found) == len(BLAS_SYMBOLS):
            return found
    return None


def _bind_symbols() -> None:
    _mvec()
    for name, addr in (_blas() or {}).items():
        llvm.add_symbol(name, addr)
