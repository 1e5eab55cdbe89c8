"""Yota's own BLAS instance: a separate copy of OpenBLAS whose threading Yota controls.

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
(``target.py`` binds them), so compiled objects stay cacheable; without the wheel the
names are bound to NumPy's library and GEMMs run unsplit, as before.

``YOTA_OWN_BLAS=0`` turns the own instance off (NumPy's library is used).
"""

from __future__ import annotations

import ctypes
import importlib.util
import os
from functools import cache

WHEEL = "scipy_openblas64"
LIBRARY = "libscipy_openblas64_.so"
ENV_THREADS = "OPENBLAS_NUM_THREADS"  # read by OpenBLAS while it loads


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
