"""The LAPACK routines that generated code calls, as native code sees them: each routine's
arguments (``SIGNATURES``), Yota's names for them (``symbol``), the workspace sizes asked
of the library at compile time (``query``), and the C shim that binds them in an AOT
shared library (``aot_shim``). The emitters that call them: the llvm backend's
``lapack.py``.

Which LAPACK: the one in the OpenBLAS that ``blas.py`` binds the GEMMs to: Yota's own
single-threaded instance of the ``scipy-openblas64`` wheel when it is installed (see
``blas.py``: it exists so that Yota controls its BLAS threading under contention), else
the one inside NumPy's own bundled OpenBLAS (``numpy.libs/libscipy_openblas64_*.so``),
the library ``np.linalg`` itself calls. Both are the same project's ILP64 build of the
same code (the wheel a newer release: 0.3.34 against NumPy 2.4's 0.3.31, same
``DYNAMIC_ARCH`` kernels) and export the Fortran LAPACK entry points with a prefix and
suffix (``scipy_dpotrf_64_``). For LAPACK alone the wheel would not have been worth its
27 MB and its second copy of OpenBLAS in the process: no speed difference, measured on the
development machine (2 cores, heavily loaded, one thread, medians of 60 calls through
ctypes), ``dpotrf`` on 512 x 512 took 3.2-10.4 ms from NumPy's library and 5.9-10.3 ms
from the wheel's, run to run; ``np.linalg.cholesky`` 19-26 ms and Yota's compiled op
10-12 ms on the same matrix (two transposed 2 MB copies included, see below); a batch of
64 16 x 16 solves with 16 right-hand sides 0.26-0.28 ms in ``np.linalg.solve`` and 0.25 ms
(0.45 ms in a noisy run) compiled, the native batch loop paying no per-matrix call cost
(a Python loop over ctypes: 0.8 ms). Calls reach the routines *by name*: generated code
calls ``yota_dpotrf`` and friends (``blas.LAPACK_SYMBOLS``), bound by name when an object
is loaded (``blas.bind_libraries``), or by the shim of an AOT shared library
(``aot_shim`` below, through ``yota/aot.py``), so object code holds no address and stays
cacheable.
"""

from __future__ import annotations

import ctypes

import numpy as np

from .blas import LAPACK_ROUTINES, LAPACK_SYMBOLS, lapack_address

# routine -> (arguments, of which characters (their hidden lengths follow), the index of
# ``info`` or None): what the calls pass, and what an AOT library's shim forwards
SIGNATURES: dict[str, tuple[int, int, int | None]] = {
    "potrf": (5, 1, 4), "trsm": (11, 4, None), "getrf": (6, 0, 5), "gesv": (8, 0, 7),
    "syevd": (11, 2, 10), "gesdd": (14, 1, 13), "geqrf": (8, 0, 7), "orgqr": (9, 0, 8)}
assert set(SIGNATURES) == set(LAPACK_ROUTINES)


def symbol(routine: str, dt: np.dtype) -> str:
    """Yota's name of ``routine`` in ``dt``'s precision (``yota_spotrf``, ``yota_dpotrf``)."""
    return f"yota_{'s' if np.dtype(dt).itemsize == 4 else 'd'}{routine}"


def query(routine: str, dt: np.dtype, args: list[str | int | None], outs: tuple[int, ...]
          ) -> list[int]:
    """Workspace sizes from a ``lwork = -1`` query made now, through ctypes: the first
    element of each array at argument positions ``outs``. ``args``: characters,
    integers, and None for an array (16 bytes; the first ``outs`` position is read as a
    ``dt`` work size, the others as an int64 ``iwork`` size)."""
    addr = lapack_address(symbol(routine, dt))
    if addr is None:
        return [0] * len(outs)
    keep: list[np.ndarray] = []
    cargs: list[object] = []
    nchar = 0
    for a in args:
        if isinstance(a, str):
            cargs.append(ctypes.create_string_buffer(a.encode(), 1))
            nchar += 1
            continue
        if a is None:
            buf = np.zeros(2, np.int64)
        else:
            buf = np.array([a], np.int64)
        keep.append(buf)
        cargs.append(ctypes.c_void_p(buf.ctypes.data))
    proto = ctypes.CFUNCTYPE(None, *([ctypes.c_void_p] * len(args)
                                     + [ctypes.c_size_t] * nchar))
    proto(addr)(*cargs, *([1] * nchar))
    got = []
    for j, k in enumerate(outs):
        v = cargs[k]
        assert isinstance(v, ctypes.c_void_p) and v.value is not None
        arr = next(x for x in keep if x.ctypes.data == v.value)
        size = float(arr.view(dt)[0]) if j == 0 else float(arr[0])
        # a float32 size may have been rounded down: a little more, never less
        got.append(int(np.ceil(size * (1 + 4 * float(np.finfo(dt).eps)))))
    return got


# -- ahead-of-time libraries -------------------------------------------------------------------
SHIM_HEAD = r"""
/* LAPACK for the np.linalg ops (Fortran ABI, ILP64), looked up by name at the first call:
 * in the library given to @LIB@_use_lapack, then as the GEMMs are (YOTA_BLAS, the
 * process). Not found: the routine's info is set to -1000 (the call fails), and a
 * triangular solve (no info) leaves NaNs. */
#include <dlfcn.h>
#include <math.h>
#include <stddef.h>
#include <stdint.h>
#define LAPACK_MISSING (-1000)
static void *lapack_handle;

int @LIB@_use_lapack(const char *path) {
    void *h = dlopen(path, RTLD_NOW | RTLD_LOCAL);
    if (!h) return -1;
    __atomic_store_n(&lapack_handle, h, __ATOMIC_RELEASE);
    return 0;
}

static void *find_lapack(const char *const *names) {
    void *h = __atomic_load_n(&lapack_handle, __ATOMIC_ACQUIRE);
    for (const char *const *n = names; h && *n; n++) {
        void *f = dlsym(h, *n);
        if (f) return f;
    }
    return find_blas(names);
}
"""


def _shim_routine(ours: str, names: tuple[str, ...]) -> str:
    routine, ctype = ours[6:], "float" if ours[5] == "s" else "double"
    nargs, nchar, info = SIGNATURES[routine]
    types = ["void *"] * nargs + ["size_t"] * nchar
    params = [f"void *a{i}" for i in range(nargs)] + [f"size_t c{i}" for i in range(nchar)]
    args = [f"a{i}" for i in range(nargs)] + [f"c{i}" for i in range(nchar)]
    if info is not None:
        missing = f"*(int64_t *)a{info} = LAPACK_MISSING;"
    else:  # trsm: B (a9, m x n, leading dimension a10) becomes NaN
        missing = (f"for (int64_t j = 0; j < *(int64_t *)a5; j++) for (int64_t i = 0; i < "
                   f"*(int64_t *)a4; i++) (({ctype} *)a9)[i + j * *(int64_t *)a10] = NAN;")
    quoted = ", ".join(f'"{n}"' for n in names)
    return f"""
typedef void (*{ours}_fn)({", ".join(types)});
static {ours}_fn {ours}_impl;
static const char *const {ours}_names[] = {{{quoted}, 0}};
HIDDEN void {ours}({", ".join(params)}) {{
    {ours}_fn f = __atomic_load_n(&{ours}_impl, __ATOMIC_ACQUIRE);
    if (!f) {{
        f = ({ours}_fn)find_lapack({ours}_names);
        if (!f) {{ {missing} return; }}
        __atomic_store_n(&{ours}_impl, f, __ATOMIC_RELEASE);
    }}
    f({", ".join(args)});
}}
"""


def aot_shim(lib: str) -> str:
    """C for an AOT library's shim (after its BLAS part, which defines ``HIDDEN`` and
    ``find_blas``): ``<lib>_use_lapack(path)`` and one wrapper per ``yota_*`` routine."""
    return SHIM_HEAD.replace("@LIB@", lib) + "".join(
        _shim_routine(ours, names) for ours, names in LAPACK_SYMBOLS.items())
