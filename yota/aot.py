"""Ahead-of-time compilation of gradients: into the cache, into a directory that can be
shipped, or into a shared library with a C header.

    >>> import numpy as np, yota
    >>> r = yota.aot(lambda x: np.sum(x * x), np.ones(3))   # into the user's cache
    >>> len(r.key)
    64

``yota.aot(f, *args, path=DIR)`` writes the entry into ``DIR`` laid out as a cache
directory (with a ``manifest.json`` naming the programs): ship it and point
``YOTA_CACHE_DIR`` at it, and ``yota.grad`` loads instead of compiling (it still traces,
which also checks that the arguments match). ``shared_library=True`` (or
``build_shared_library`` for several programs) links ``DIR/lib<name>.so`` with
``DIR/<name>.h``: one C function per program, callable from C, or from Python with
ctypes and NumPy alone (``load_library``; llvmlite is not imported). The header
documents the array layout; in short, each array is a pointer to a dense row-major
array of the exact shape and element type shown, inputs first, then outputs.
"""

from __future__ import annotations

import ctypes
import json
import os
import re
import shutil
import subprocess
import tempfile
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from yota.backends import get_backend
from yota.ir.core import Function
from yota.ir.errors import YotaError

from . import cache as _cache
from . import pipeline
from .validate import argnums_tuple, check_callable

C_TYPES = {"f4": "float", "f8": "double", "i4": "int32_t", "i8": "int64_t", "b1": "uint8_t"}
WS_ALIGN = 64
_C_KEYWORDS = {"auto", "break", "case", "char", "const", "continue", "default", "do", "double",
               "else", "enum", "extern", "float", "for", "goto", "if", "int", "long",
               "register", "return", "short", "signed", "sizeof", "static", "struct",
               "switch", "typedef", "union", "unsigned", "void", "volatile", "while"}


@dataclass
class AotResult:
    """Where ``yota.aot`` put a program: its key and entry directory (``compiled`` is
    False if an intact entry was already there), or the shared library it built."""

    key: str
    path: Path
    compiled: bool
    library: SharedLibraryBuild | None = None


def aot(f: Callable[..., Any], *example_args: Any, path: str | os.PathLike[str] | None = None,
        shared_library: bool = False, name: str | None = None, backend: str | None = None,
        optimize: bool = True, argnums: int | Sequence[int] | None = None) -> AotResult:
    """Precompile the gradient ``yota.grad(f, *example_args)`` runs (``argnums``: the
    gradient of those arguments only, as ``yota.grad(..., argnums=)``): into the user's
    cache (``path=None``), into the cache-layout directory ``path`` that can be shipped,
    or (``shared_library=True``) into ``path/lib<name>.so`` with a C header."""
    check_callable(f, "aot")
    if shared_library:
        if path is None:
            raise YotaError("yota.aot(..., shared_library=True) needs path= (the output "
                            "directory)")
        lib = build_shared_library([(f, example_args)], path, names=[name] if name else None,
                                   argnums=argnums)
        return AotResult(lib.programs[0]["key"], lib.library, True, lib)
    cache = _cache.DiskCache(path) if path is not None else _cache.default_cache()
    why = cache.problem()
    if why:
        raise YotaError(f"cannot precompile into {cache.root}: {why}")
    fn, sig = _grad_ir(f, example_args, optimize, argnums)
    key = _cache.make_key(fn, backend, kind="grad", signature=sig)
    if key is None:
        raise YotaError(f"backend {backend!r} cannot save compiled code")
    compiled = _ensure_entry(cache, key, fn, backend)
    if path is not None:
        _add_to_manifest(cache.root, key, f)
    return AotResult(key.hex, cache.path(key.hex), compiled)


def _grad_ir(f: Callable[..., Any], args: Sequence[Any], optimize: bool,
             argnums: int | Sequence[int] | None) -> tuple[Function, Any]:
    """The gradient program ``yota.grad(f, *args, argnums=argnums)`` compiles."""
    if argnums is None:
        return pipeline.program_ir(f, args, optimized=optimize)
    wrt = argnums_tuple(argnums, len(args), "aot")
    _, tape = pipeline.trace_grad(f, args, wrt=wrt)
    return pipeline.grad_ir(tape, optimized=optimize), pipeline.tape_signature(tape)


def _ensure_entry(cache: _cache.DiskCache, key: _cache.Key, fn: Function,
                  backend: str | None) -> bool:
    mod = get_backend(backend)
    if _cache.load(cache, key, mod) is not None:
        return False
    exe = mod.compile(fn)
    _cache.stats.compiles += 1
    if not _cache.save(cache, key, fn, mod, exe) and cache.read_meta(key.hex) is None:
        raise YotaError(f"could not write the entry for @{fn.name} into {cache.root}")
    return True


def _add_to_manifest(root: Path, key: _cache.Key, f: Callable[..., Any]) -> None:
    """``manifest.json``: which function each entry of a shipped directory is for."""
    path = root / "manifest.json"
    try:
        manifest = json.loads(path.read_text())
    except (OSError, ValueError):
        manifest = {"format": _cache.FORMAT, "programs": {}}
    manifest["programs"][key.hex] = {
        "function": f"{getattr(f, '__module__', '?')}.{getattr(f, '__qualname__', '?')}",
        "kind": key.parts["kind"], "signature": key.parts["signature"],
        "target": key.parts["target"], "yota": key.parts["yota"]}
    _atomic_write(path, json.dumps(manifest, indent=1, sort_keys=True).encode())


def _atomic_write(path: Path, data: bytes) -> None:
    fd, tmp = tempfile.mkstemp(prefix=path.name + ".", dir=path.parent)
    try:
        with os.fdopen(fd, "wb") as fh:
            fh.write(data)
        os.replace(tmp, path)
    finally:
        if os.path.exists(tmp):
            os.unlink(tmp)


# -- shared libraries -----------------------------------------------------------------------
@dataclass
class SharedLibraryBuild:
    """The files ``build_shared_library`` wrote and a description of each program."""

    library: Path
    header: Path
    manifest: Path
    programs: list[dict[str, Any]]


def build_shared_library(programs: Sequence[tuple[Callable[..., Any], Sequence[Any]]],
                         path: str | os.PathLike[str], *, lib_name: str | None = None,
                         names: Sequence[str] | None = None, cc: str | None = None,
                         optimize: bool = True, argnums: int | Sequence[int] | None = None
                         ) -> SharedLibraryBuild:
    """Link the gradients of ``programs`` (``[(f, example_args), ...]``) into
    ``path/lib<lib_name>.so`` with ``path/<lib_name>.h`` and ``path/<lib_name>.json``.

    Each program becomes ``int NAME(inputs..., outputs...)`` (default NAME:
    ``<function>_grad``) and ``int NAME_ws(inputs..., outputs..., workspace)``. Needs a C
    compiler (``cc``, default ``$CC`` or ``gcc``)."""
    from yota.backends import llvm as native

    out = Path(path).absolute()
    out.mkdir(parents=True, exist_ok=True)
    descs, objects = [], []
    used: set[str] = set()
    for i, (f, args) in enumerate(programs):
        fn, sig = _grad_ir(f, tuple(args), optimize, argnums)
        cname = _unique(c_identifier(names[i] if names else
                                     f"{getattr(f, '__name__', 'f')}_grad"), used)
        art = native.shared_object(fn, f"{cname}_ws")
        key = _cache.make_key(fn, "llvm", kind="grad", signature=sig)
        descs.append(_describe(cname, fn, art.meta, key, f))
        objects.append(art.object_code)
    lib = c_identifier(lib_name or descs[0]["name"])
    files = _write_library_sources(out, lib, descs, objects)
    so = out / f"lib{lib}.so"
    _link(cc, files, so)
    return SharedLibraryBuild(so, out / f"{lib}.h", out / f"{lib}.json", descs)


def c_identifier(text: str) -> str:
    s = re.sub(r"\W+", "_", text).strip("_") or "x"
    s = s if not s[0].isdigit() else f"_{s}"
    return f"{s}_" if s in _C_KEYWORDS else s


def _unique(name: str, used: set[str]) -> str:
    base, k = name, 1
    while name in used:
        k += 1
        name = f"{base}_{k}"
    used.add(name)
    return name


def _describe(cname: str, fn: Function, meta: dict[str, Any], key: _cache.Key | None,
              f: Callable[..., Any]) -> dict[str, Any]:
    used: set[str] = set()

    def arrays(values: Sequence[Any], labels: Sequence[str | None], kind: str
               ) -> list[dict[str, Any]]:
        return [{"name": _unique(c_identifier(lab or f"{kind}{j}"), used), "label": lab,
                 "dtype": np.dtype(v.dtype).str[1:], "shape": list(v.shape)}
                for j, (v, lab) in enumerate(zip(values, labels, strict=True))]

    ws = -(-int(meta["ws_bytes"]) // WS_ALIGN) * WS_ALIGN + WS_ALIGN  # + the status block
    return {"name": cname, "symbol": meta["symbol"], "function": fn.name,
            "source": f"{getattr(f, '__module__', '?')}.{getattr(f, '__qualname__', '?')}",
            "key": key.hex if key else None,
            "signature": key.parts["signature"] if key else None,
            "inputs": arrays(fn.inputs, fn.input_labels, "in"),
            "outputs": arrays(fn.outputs, fn.output_labels, "out"),
            "workspace_bytes": ws, "failures": meta["failures"], "target": meta["target"]}


def _write_library_sources(out: Path, lib: str, descs: list[dict[str, Any]],
                           objects: list[bytes]) -> list[Path]:
    objdir = out / "obj"
    objdir.mkdir(exist_ok=True)
    paths = []
    for d, obj in zip(descs, objects, strict=True):
        p = objdir / f"{d['name']}.o"
        p.write_bytes(obj)
        paths.append(p)
    (out / f"{lib}.h").write_text(c_header(lib, descs))
    shim = out / f"{lib}_shim.c"
    shim.write_text(c_shim(lib, descs))
    (out / f"{lib}.json").write_text(json.dumps(
        {"format": 1, "library": f"lib{lib}.so", "set_blas": f"{lib}_set_blas",
         "use_lapack": f"{lib}_use_lapack", "functions": descs}, indent=1, sort_keys=True))
    return [shim] + paths


def _link(cc: str | None, files: list[Path], so: Path) -> None:
    compiler = cc or os.environ.get("CC") or "gcc"
    if shutil.which(compiler) is None:
        raise YotaError(f"a C compiler is needed to link {so.name}: {compiler!r} was not "
                        "found (set CC or pass cc=)")
    cmd = [compiler, "-shared", "-fPIC", "-O2", "-o", str(so), *map(str, files),
           "-Wl,-z,defs", "-Wl,--as-needed", "-lmvec", "-lm", "-ldl"]
    run = subprocess.run(cmd, capture_output=True, text=True)
    if run.returncode:
        raise YotaError(f"linking {so.name} failed:\n{' '.join(cmd)}\n{run.stderr.strip()}")


# -- C text ---------------------------------------------------------------------------------
LAYOUT_DOC = """\
 * Arrays: every argument is a pointer to the first element of a dense, C-contiguous
 * (row-major) array of exactly the element type and shape shown; element [i0, ..., ik]
 * of an array of shape [d0, ..., dk] is at index ((i0*d1 + i1)*d2 + ...)*dk + ik, and a
 * 0-d array (shape []) is a pointer to one element. Element types: f32 float, f64 double,
 * i32 int32_t, i64 int64_t, bool uint8_t (0 or 1). Pointers must be aligned to the
 * element size. Inputs are only read; outputs are written in full and must not overlap
 * the inputs or each other. Inputs come first, in the order of the arguments' leaves
 * (structure fields in declaration order), then arrays the function read from globals
 * or closures; outputs are the value, then the gradient of each float input.
 *
 * Return value: 0 on success; -1 if the workspace could not be allocated; k > 0 when
 * check k failed (listed per function): a guard (the inputs take another path through
 * the Python code than the example arguments did, so this code does not apply to them:
 * compile again for them) or an index out of range. Outputs are then unspecified.
 *
 * NAME(...) allocates its workspace on each call; NAME_ws(..., workspace) takes one of
 * NAME_WORKSPACE_BYTES bytes aligned to 64 (one per concurrent call). Functions may be
 * called from several threads at once.
 *
 * Matrix products go through a portable loop nest unless a BLAS is provided: call
 * LIB_set_blas(sgemm, dgemm) with ILP64 CBLAS routines (OpenBLAS's cblas_sgemm64_ /
 * cblas_dgemm64_), or set YOTA_BLAS to the path of a library that exports them.
 *
 * np.linalg functions call LAPACK (ILP64 Fortran routines, OpenBLAS's dpotrf_64_ or
 * NumPy's bundled scipy_dpotrf_64_...): call LIB_use_lapack(path) with the path of such a
 * library, set YOTA_BLAS, or load one into the process; without one those calls fail."""


def c_header(lib: str, descs: list[dict[str, Any]]) -> str:
    guard = f"YOTA_{lib.upper()}_H"
    t = descs[0]["target"]
    lines = [f"/* lib{lib}.so: gradients compiled ahead of time by Yota.",
             " *",
             f" * Target: {t['triple']}, CPU {t['cpu']}; the code uses that CPU's "
             "instructions:",
             " * run it only on a compatible CPU.", " *",
             LAYOUT_DOC.replace("LIB_", f"{lib}_"), " */",
             f"#ifndef {guard}", f"#define {guard}", "",
             "#include <stddef.h>", "#include <stdint.h>", "",
             "#ifdef __cplusplus", 'extern "C" {', "#endif", "",
             "/* Use these ILP64 CBLAS GEMMs (NULL: the portable loops). */",
             f"void {lib}_set_blas(void *sgemm, void *dgemm);",
             "/* Take LAPACK routines from the library at path (0, or -1 if it cannot be "
             "opened). */", f"int {lib}_use_lapack(const char *path);", ""]
    for d in descs:
        lines += _c_declarations(d)
    lines += ["#ifdef __cplusplus", "}", "#endif", f"#endif /* {guard} */", ""]
    return "\n".join(lines)


def _c_params(d: dict[str, Any], more: bool) -> list[str]:
    """The parameter lines of a function, each with its type comment; ``more``: another
    parameter follows the last."""
    params = [(f"const {C_TYPES[a['dtype']]} *{a['name']}", "in", a) for a in d["inputs"]]
    params += [(f"{C_TYPES[a['dtype']]} *{a['name']}", "out", a) for a in d["outputs"]]
    lines = []
    for i, (p, kind, a) in enumerate(params):
        p += "," if more or i < len(params) - 1 else ""
        lines.append(f"    {p:<36} /* {kind:<3} {_type_str(a)} {json.dumps(a['label'])} */")
    return lines


def _type_str(a: dict[str, Any]) -> str:
    names = {"f4": "f32", "f8": "f64", "i4": "i32", "i8": "i64", "b1": "bool"}
    return f"{names[a['dtype']]}[{','.join(map(str, a['shape']))}]"


def _c_declarations(d: dict[str, Any]) -> list[str]:
    name, upper = d["name"], d["name"].upper()
    doc = [f"/* {name}: value and gradients of {d['source']} (IR @{d['function']}),",
           f" * traced with arguments {d['signature']}"]
    doc += [f" * returns {k}: {_failure_text(rec)}" for k, rec in enumerate(d["failures"], 1)]
    ws = f"    {'void *workspace':<36} /* {upper}_WORKSPACE_BYTES bytes, 64-byte aligned */"
    return doc + [" */", f"#define {upper}_WORKSPACE_BYTES {d['workspace_bytes']}",
                  f"int {name}(", *_c_params(d, False), ");",
                  f"int {name}_ws(", *_c_params(d, True), ws, ");",
                  f"size_t {name}_workspace_bytes(void);", ""]


def _failure_text(rec: dict[str, Any]) -> str:
    if rec.get("kind") == "linalg":
        from yota.ir.ops.lapack import FAILURES

        what = FAILURES.get(rec.get("op", ""), "")
        return (f"LAPACK {rec.get('routine')} failed in np.linalg '{rec.get('op')}' at "
                f"{rec.get('loc') or '?'}{': ' + what if what else ''} (or no LAPACK was "
                "found)")
    if rec.get("kind") == "guard":
        attrs = rec.get("attrs", {})
        return (f"guard at {rec.get('loc') or '?'} (expected {attrs.get('expected')!r}): "
                "these inputs take another branch")
    return f"index out of range on axis {rec.get('axis')} (size {rec.get('size')})"


SHIM_HEAD = r"""/* Generated by Yota: BLAS binding and per-call workspaces for lib@LIB@.so. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <stdint.h>
#include <stdlib.h>
#include "@LIB@.h"

#define HIDDEN __attribute__((visibility("hidden")))
#define ROW_MAJOR 101
#define NO_TRANS 111

#define GEMM_LOOPS(T, NAME)                                                              \
static void NAME(int32_t order, int32_t ta, int32_t tb, int64_t m, int64_t n, int64_t k, \
                 T alpha, const T *a, int64_t lda, const T *b, int64_t ldb, T beta,     \
                 T *c, int64_t ldc) {                                                    \
    if (order != ROW_MAJOR) { /* column-major C = AB is row-major C^T = B^T A^T */       \
        NAME(ROW_MAJOR, tb, ta, n, m, k, alpha, b, ldb, a, lda, beta, c, ldc);          \
        return;                                                                          \
    }                                                                                    \
    for (int64_t i = 0; i < m; i++) {                                                    \
        T *ci = c + i * ldc;                                                             \
        for (int64_t j = 0; j < n; j++) ci[j] = beta == 0 ? (T)0 : beta * ci[j];        \
        for (int64_t p = 0; p < k; p++) {                                                \
            T x = alpha * (ta == NO_TRANS ? a[i * lda + p] : a[p * lda + i]);            \
            if (tb == NO_TRANS) {                                                        \
                const T *bp = b + p * ldb;                                               \
                for (int64_t j = 0; j < n; j++) ci[j] += x * bp[j];                      \
            } else {                                                                     \
                for (int64_t j = 0; j < n; j++) ci[j] += x * b[j * ldb + p];             \
            }                                                                            \
        }                                                                                \
    }                                                                                    \
}

GEMM_LOOPS(float, loops_sgemm)
GEMM_LOOPS(double, loops_dgemm)

typedef void (*sgemm_fn)(int32_t, int32_t, int32_t, int64_t, int64_t, int64_t, float,
                         const float *, int64_t, const float *, int64_t, float, float *,
                         int64_t);
typedef void (*dgemm_fn)(int32_t, int32_t, int32_t, int64_t, int64_t, int64_t, double,
                         const double *, int64_t, const double *, int64_t, double, double *,
                         int64_t);

static sgemm_fn sgemm_impl;
static dgemm_fn dgemm_impl;

static void *find_blas(const char *const *names) {
    const char *path = getenv("YOTA_BLAS");
    void *lib = path && *path ? dlopen(path, RTLD_NOW | RTLD_LOCAL) : NULL;
    for (const char *const *n = names; *n; n++) {
        void *f = lib ? dlsym(lib, *n) : NULL;
        if (!f) f = dlsym(RTLD_DEFAULT, *n);
        if (f) return f;
    }
    return NULL;
}

static const char *const SGEMM_NAMES[] = {"scipy_cblas_sgemm64_", "cblas_sgemm64_", 0};
static const char *const DGEMM_NAMES[] = {"scipy_cblas_dgemm64_", "cblas_dgemm64_", 0};

void @LIB@_set_blas(void *sgemm, void *dgemm) {
    __atomic_store_n(&sgemm_impl, sgemm ? (sgemm_fn)sgemm : loops_sgemm, __ATOMIC_RELEASE);
    __atomic_store_n(&dgemm_impl, dgemm ? (dgemm_fn)dgemm : loops_dgemm, __ATOMIC_RELEASE);
}

HIDDEN void yota_sgemm(int32_t o, int32_t ta, int32_t tb, int64_t m, int64_t n, int64_t k,
                       float al, const float *a, int64_t lda, const float *b, int64_t ldb,
                       float be, float *c, int64_t ldc) {
    sgemm_fn f = __atomic_load_n(&sgemm_impl, __ATOMIC_ACQUIRE);
    if (!f) {
        f = (sgemm_fn)find_blas(SGEMM_NAMES);
        if (!f) f = loops_sgemm;
        __atomic_store_n(&sgemm_impl, f, __ATOMIC_RELEASE);
    }
    f(o, ta, tb, m, n, k, al, a, lda, b, ldb, be, c, ldc);
}

HIDDEN void yota_dgemm(int32_t o, int32_t ta, int32_t tb, int64_t m, int64_t n, int64_t k,
                       double al, const double *a, int64_t lda, const double *b, int64_t ldb,
                       double be, double *c, int64_t ldc) {
    dgemm_fn f = __atomic_load_n(&dgemm_impl, __ATOMIC_ACQUIRE);
    if (!f) {
        f = (dgemm_fn)find_blas(DGEMM_NAMES);
        if (!f) f = loops_dgemm;
        __atomic_store_n(&dgemm_impl, f, __ATOMIC_RELEASE);
    }
    f(o, ta, tb, m, n, k, al, a, lda, b, ldb, be, c, ldc);
}
"""


def c_shim(lib: str, descs: list[dict[str, Any]]) -> str:
    from yota.backends.llvm.runtime.lapack import aot_shim

    parts = [SHIM_HEAD.replace("@LIB@", lib), aot_shim(lib)]
    for d in descs:
        name, upper = d["name"], d["name"].upper()
        names = [a["name"] for a in d["inputs"] + d["outputs"]]
        params = [f"const {C_TYPES[a['dtype']]} *{a['name']}" for a in d["inputs"]] + \
                 [f"{C_TYPES[a['dtype']]} *{a['name']}" for a in d["outputs"]]
        parts.append(
            f"size_t {name}_workspace_bytes(void) {{ return {upper}_WORKSPACE_BYTES; }}\n\n"
            f"int {name}({', '.join(params) or 'void'}) {{\n"
            f"    void *ws = aligned_alloc({WS_ALIGN}, {upper}_WORKSPACE_BYTES);\n"
            f"    if (!ws) return -1;\n"
            f"    int rc = {name}_ws({', '.join(names + ['ws'])});\n"
            f"    free(ws);\n"
            f"    return rc;\n}}\n")
    return "\n".join(parts)


# -- loading from Python (ctypes and NumPy only) ----------------------------------------------
class LibraryFunction:
    """One function of a library built by ``build_shared_library``; call it with arrays
    (converted to the declared dtype, C order) and get the list of outputs."""

    def __init__(self, lib: ctypes.CDLL, desc: dict[str, Any]) -> None:
        self.desc = desc
        self.name = desc["name"]
        n = len(desc["inputs"]) + len(desc["outputs"])
        self._fn = getattr(lib, desc["name"])
        self._fn.argtypes = [ctypes.c_void_p] * n
        self._fn.restype = ctypes.c_int

    def __call__(self, *args: Any) -> list[np.ndarray]:
        ins = self.desc["inputs"]
        if len(args) != len(ins):
            raise TypeError(f"{self.name} takes {len(ins)} arrays, got {len(args)}")
        arrs = []
        for a, spec in zip(args, ins, strict=True):
            arr = np.asarray(a, dtype=np.dtype(spec["dtype"]), order="C")  # 0-d stays 0-d
            if list(arr.shape) != spec["shape"]:
                raise ValueError(f"{self.name}: {spec['label']} must have shape "
                                 f"{spec['shape']}, got {list(arr.shape)}")
            arrs.append(arr)
        outs = [np.empty(o["shape"], np.dtype(o["dtype"])) for o in self.desc["outputs"]]
        rc = self._fn(*[x.ctypes.data for x in arrs + outs])
        if rc:
            fails = self.desc["failures"]
            what = _failure_text(fails[rc - 1]) if 0 < rc <= len(fails) else "out of memory"
            raise RuntimeError(f"{self.name} returned {rc}: {what}")
        return outs


def _use_numpy_lapack(lib: ctypes.CDLL, desc: dict[str, Any]) -> None:
    """Hand the library NumPy's bundled OpenBLAS for its LAPACK calls (np.linalg)."""
    use = getattr(lib, desc.get("use_lapack", ""), None) if desc.get("use_lapack") else None
    if use is None:
        return
    import glob

    root = os.path.dirname(np.__file__)
    for path in sorted(glob.glob(os.path.join(root, "..", "numpy.libs", "*openblas*.so*"))):
        use.argtypes = [ctypes.c_char_p]
        if use(os.fsencode(path)) == 0:
            return


def load_library(path: str | os.PathLike[str]) -> dict[str, LibraryFunction]:
    """The functions of a library built by ``build_shared_library``, by C name (``path``:
    the ``.so`` or its ``.json``). Uses ctypes and NumPy only: no compiler is loaded."""
    p = Path(path)
    desc_path = p if p.suffix == ".json" else p.with_name(p.name[3:-3] + ".json")
    desc = json.loads(desc_path.read_text())
    lib = ctypes.CDLL(str(desc_path.with_name(desc["library"])))
    _use_numpy_lapack(lib, desc)
    return {d["name"]: LibraryFunction(lib, d) for d in desc["functions"]}
