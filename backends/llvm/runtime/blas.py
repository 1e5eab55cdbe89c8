"""The BLAS and LAPACK that generated code calls: Yota's own OpenBLAS instance, and the
routines' addresses under Yota's names (``yota_sgemm``, ``yota_dpotrf``...), which the
loaders bind (``bind_libraries``; the routines' calling facts: ``lapack.py``).

Yota's own BLAS instance: a separate copy of OpenBLAS whose threading Yota controls.

NumPy's bundled OpenBLAS runs its GEMMs on its own worker threads, which busy-wait for
work; when other processes keep the cores busy those workers are descheduled and every
GEMM waits for them (the MLP gradient went from 2.5 ms to 70-100 ms with two busy
processes on two cores). Setting that library's thread count would change the threading
of the user's own NumPy calls (OpenBLAS's pthread build has no per-thread setting: its
``openblas_set_num_threads_local`` writes a process-wide variable).

So generated code calls the GEMMs and LAPACK routines of a *second* OpenBLAS, the
``scipy-openblas64`` wheel (the same ILP64 build, loaded ``RTLD_LOCAL`` under its own
file name, so it is a separate instance with its own thread pool and settings), kept at
one thread: Yota splits large GEMMs itself into tiles that its own helper pool
(``pool.py``) and the calling thread claim one at a time, so a descheduled helper delays
at most one tile. Generated code reaches the library by the names ``yota_sgemm`` etc.
(``bind_libraries`` binds them), so compiled objects stay cacheable; without the wheel
the names are bound to NumPy's library and GEMMs run unsplit, as before.

``YOTA_OWN_BLAS=0`` turns the own instance off (NumPy's library is used).
"""

from __future__ import annotations

import ctypes
import importlib.util
import os
from functools import cache

import numpy as np

from . import objload

WHEEL = "scipy_openblas64"
LIBRARY = "libscipy_openblas64_.so"
ENV_THREADS = "OPENBLAS_NUM_THREADS"  # read by OpenBLAS while it loads

# Generated code calls these; the loaders bind them by name (objload.bind, llvm.add_symbol).
BLAS_SYMBOLS: dict[str, tuple[str, ...]] = {
    "yota_sgemm": ("scipy_cblas_sgemm64_", "cblas_sgemm64_", "cblas_sgemm"),
    "yota_dgemm": ("scipy_cblas_dgemm64_", "cblas_dgemm64_", "cblas_dgemm"),
}
# The LAPACK routines the llvm backend's ``lapack.py`` calls (Fortran ABI, ILP64: 64-bit
# integers by reference), bound the same way: ``yota_<s|d><routine>`` -> the library's
# name for it (their calling facts: ``lapack.py`` here).
LAPACK_ROUTINES = ("potrf", "trsm", "getrf", "gesv", "syevd", "gesdd", "geqrf", "orgqr")
LAPACK_SYMBOLS: dict[str, tuple[str, ...]] = {f"yota_{p}{r}": (f"scipy_{p}{r}_64_", f"{p}{r}_64_")
                  for p in "sd" for r in LAPACK_ROUTINES}


def _path() -> str | None:
    """The wheel's library file, found without importing the wheel's package."""
    spec = importlib.util.find_spec(WHEEL)
    if spec is None or not spec.submodule_search_locations:
        return None
    for root in spec.submodule_search_locations:
        p = os.path.join(root, "lib", LIBRARY)
        if os.path.exists(p):
            return p
    return None


@cache
def own_library() -> str | None:
    """Load Yota's own OpenBLAS (single-threaded) and return its path, or None when the
    wheel is not installed, cannot be loaded, or ``YOTA_OWN_BLAS=0``."""
    if os.environ.get("YOTA_OWN_BLAS", "1") == "0":
        return None
    path = _path()
    if path is None:
        return None
    try:
        lib = _open_single_threaded(path)
        setter = lib.scipy_openblas_set_num_threads64_
    except (OSError, AttributeError):
        return None
    setter.argtypes = [ctypes.c_int]
    setter.restype = None
    setter(1)  # this instance serves only Yota's calls: Yota splits the work itself
    return path


def _open_single_threaded(path: str) -> ctypes.CDLL:
    """Load the library (``RTLD_LOCAL``) so that it starts no worker thread.

    OpenBLAS reads its thread count from the environment while it loads and starts one
    worker per core, which spins about 0.1 s before it sleeps (setting one thread
    afterwards does not stop it). A new process's first gradient loads this library, so
    its own work shared the cores with that spinning thread: the MLP's first gradient
    from a warm cache took 55 ms wall against 31 ms without it (median of 9 interleaved
    processes on this 2-core VM). So ``OPENBLAS_NUM_THREADS=1`` is set around the
    ``dlopen`` only and restored at once (removed if it was unset); ``dlopen`` is called
    with the GIL held, so no other Python thread runs, or starts a process that would
    inherit the variable, during the load itself (it may at the two bytecode steps
    around it). NumPy's OpenBLAS read its setting when NumPy was imported: its threading
    is unchanged."""
    libc = ctypes.PyDLL(None)  # (a PyDLL's calls keep the GIL)
    dlopen, dlerror = libc.dlopen, libc.dlerror
    dlopen.argtypes, dlopen.restype = [ctypes.c_char_p, ctypes.c_int], ctypes.c_void_p
    dlerror.argtypes, dlerror.restype = [], ctypes.c_char_p
    old = os.environ.get(ENV_THREADS)
    os.environ[ENV_THREADS] = "1"
    try:
        handle = dlopen(os.fsencode(path), os.RTLD_NOW | os.RTLD_LOCAL)
    finally:
        if old is None:
            os.environ.pop(ENV_THREADS, None)
        else:
            os.environ[ENV_THREADS] = old
    if not handle:
        raise OSError((dlerror() or b"dlopen failed").decode(errors="replace"))
    return ctypes.CDLL(path, mode=ctypes.RTLD_LOCAL, handle=handle)


def single_threaded() -> bool:
    """True when the ``yota_*`` BLAS names are bound to Yota's own single-threaded
    instance, so that concurrent tile calls from Yota's helpers are the way to use
    several cores."""
    return own_library() is not None


# -- the routines by Yota's names ----------------------------------------------------------
def _libraries() -> list[str]:
    """Yota's own single-threaded OpenBLAS when installed, then NumPy's bundled OpenBLAS
    (the library its ``np.linalg`` already loaded)."""
    own = own_library()
    root = os.path.dirname(np.__file__)
    bundled = sorted(_openblas_files(os.path.join(root, "..", "numpy.libs"))
                     + _openblas_files(os.path.join(root, ".libs")))
    return ([own] if own else []) + bundled


def _openblas_files(folder: str) -> list[str]:
    """The files of ``folder`` that ``glob`` pattern ``*openblas*.so*`` matches (names
    with "openblas" and after it ".so", not hidden), without compiling the pattern."""
    try:
        names = os.listdir(folder)
    except OSError:
        return []
    return [os.path.join(folder, n) for n in names if not n.startswith(".")
            and (i := n.find("openblas")) >= 0 and n.find(".so", i + 8) >= 0]


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
def blas_addresses() -> dict[str, int] | None:
    """Addresses of the GEMMs of the OpenBLAS that NumPy loaded, by our own names."""
    return _find(BLAS_SYMBOLS)


@cache
def lapack_addresses() -> dict[str, int] | None:
    """Addresses of the LAPACK routines of the OpenBLAS that NumPy loaded (all or none),
    by our own names: also what ``lapack.query`` calls at compile time for workspace sizes."""
    return _find(LAPACK_SYMBOLS)


def lapack_address(name: str) -> int | None:
    """The address of ``yota_<s|d><routine>`` in this process (compile-time queries only:
    generated code reaches it by name)."""
    return (lapack_addresses() or {}).get(name)


def bind_libraries() -> None:
    """Record the BLAS and LAPACK routines' addresses under Yota's names (objload's
    table; ``target.init`` hands the table to LLVM)."""
    for name, addr in {**(blas_addresses() or {}), **(lapack_addresses() or {})}.items():
        objload.bind(name, addr)
