"""The host target: LLVM set-up, target machines, and the external symbols generated code
reaches *by name* (never by a baked-in address): glibc's vector math library (libmvec),
BLAS GEMMs from NumPy's bundled OpenBLAS (as ``yota_sgemm``/``yota_dgemm``), the LAPACK
routines of that same library (as ``yota_dpotrf``, ``yota_sgesdd``...: ``LAPACK_SYMBOLS``,
used by ``lapack.py``), and libc's ``pthread_create``/``pthread_join``.

``host()`` describes the machine once per process; ``Target.key()`` is what a cache key
needs (object code built for one CPU can SIGILL on another).
"""

from __future__ import annotations

import ctypes
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
BLAS_SYMBOLS: dict[str, tuple[str, ...]] = {
    "yota_sgemm": ("scipy_cblas_sgemm64_", "cblas_sgemm64_", "cblas_sgemm"),
    "yota_dgemm": ("scipy_cblas_dgemm64_", "cblas_dgemm64_", "cblas_dgemm"),
}
# The LAPACK routines ``lapack.py`` calls (Fortran ABI, ILP64: 64-bit integers by
# reference), bound the same way: ``yota_<s|d><routine>`` -> the library's name for it.
LAPACK_ROUTINES = ("potrf", "trsm", "getrf", "gesv", "syevd", "gesdd", "geqrf", "orgqr")
LAPACK_SYMBOLS: dict[str, tuple[str, ...]] = {f"yota_{p}{r}": (f"scipy_{p}{r}_64_", f"{p}{r}_64_")
                  for p in "sd" for r in LAPACK_ROUTINES}


@dataclass(frozen=True)
class Target:
    """What code generation needs to know about the host."""

    triple: str
    cpu: str
    features: str
    vector_bits: int  # widest vector registers: 512 (AVX-512), 256 (AVX2) or 128
    mvec_isas: tuple[str, ...]  # libmvec ISA letters usable here, widest first ("e", "d", "b")
    blas: bool  # yota_sgemm / yota_dgemm are bound
    lapack: bool  # the LAPACK_SYMBOLS are bound
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
                "blas": self.blas, "lapack": self.lapack, "array_abi": dict(ARRAY_ABI)}


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
                  _blas() is not None, _lapack() is not None, max(1, min(ncpu, 8)))


@cache
def _mvec() -> ctypes.CDLL | None:
    """glibc's libmvec, loaded so that the JIT resolves its symbols, or None."""
    for k, name in enumerate(("libmvec.so.1", None)):
        if k:  # ctypes.util's search runs programs (ldconfig, gcc): only if needed
            from ctypes.util import find_library

            name = find_library("mvec")
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


def _libraries() -> list[str]:
    """Yota's own single-threaded OpenBLAS (``blas.py``) when installed, then NumPy's
    bundled OpenBLAS (the library its ``np.linalg`` already loaded)."""
    from .blas import own_library

    own = own_library()
    root = os.path.dirname(np.__file__)
    bundled = sorted(glob.glob(os.path.join(root, "..", "numpy.libs", "*openblas*.so*"))
                     + glob.glob(os.path.join(root, ".libs", "*openblas*.so*")))
    return ([own] if own else []) + bundled


def _find(table: dict[str, tuple[str, ...]]) -> dict[str, int] | None:
    """Addresses of every routine of ``table`` (our name -> the library's names) in the
    first bundled library that has them all, by our own names; None if none has."""
    for path in _libraries():
        try:
            lib = ctypes.CDLL(path)
        except OSError:
            continue
        found: dict[str, int] = {}
        for ours, names in table.items():
            for n in names:
                addr = ctypes.cast(getattr(lib, n), ctypes.c_void_p).value \
                    if hasattr(lib, n) else None
                if addr:
                    found[ours] = addr
                    break
        if len(found) == len(table):
            return found
    return None


@cache
def _blas() -> dict[str, int] | None:
    """Addresses of the GEMMs of the OpenBLAS that NumPy loaded, by our own names."""
    return _find(BLAS_SYMBOLS)


@cache
def _lapack() -> dict[str, int] | None:
    """Addresses of the LAPACK routines of the OpenBLAS that NumPy loaded (all or none),
    by our own names: also what ``lapack.py`` calls at compile time for workspace sizes."""
    return _find(LAPACK_SYMBOLS)


def lapack_address(name: str) -> int | None:
    """The address of ``yota_<s|d><routine>`` in this process (compile-time queries only:
    generated code reaches it by name)."""
    return (_lapack() or {}).get(name)


def _bind_symbols() -> None:
    _mvec()
    for name, addr in {**(_blas() or {}), **(_lapack() or {})}.items():
        llvm.add_symbol(name, addr)
