"""The LAPACK-level ops (``yota.ir.ops.lapack``) on the llvm backend, against the reference
interpreter: every op in float32 and float64, batched and not, on inputs the layout keeps
as non-contiguous views (transposed, strided, a broadcast batch), n = 1 and empty
batches; LAPACK's failures raised from compiled code as the interpreter raises them (the
class, the message, the user's line); NaN inputs as NumPy; compiled objects saved and
loaded in a new process (the routines are bound by name, no address is in the code).

Tolerances, by op:
- ``cholesky``, ``solve``, ``eigh``, ``svd``, ``svdvals``, ``qr`` call the routine NumPy
  calls (``potrf``, ``gesv``, ``syevd``, ``gesdd``, ``geqrf``+``orgqr``) on the same
  column-major float64 data. Often bit for bit, but not always: OpenBLAS's kernels take
  their paths by the alignment of the buffers (ours are in the call's workspace, NumPy's
  from malloc), which reorders the sums inside, so two correct runs differ by a backward
  error of about ``n * eps * |A|``, moved to the results by the op's sensitivity: the
  condition number for factors and solutions, ``1 / (relative gap)`` between singular
  values or eigenvalues for the vectors (Wedin; Davis-Kahan). Seen: 45 ulps in the
  singular vectors of a 5 x 3 matrix with a relative gap of 0.25.
- ``triangular_solve`` (``trsm`` against the interpreter's substitution) and ``lu``
  (``getrf`` against the interpreter's elimination): different orders of the same
  operations, so the backward-error bound ``c * n * eps * cond``; the test matrices are
  diagonally dominant (condition numbers below ~10), ``c = 50``.
"""

from __future__ import annotations

import json
import subprocess
import sys
from typing import Any

import numpy as np
import pytest
from support import TESTS
from support.linalg_cases import (
    F32,
    F64,
    FAILS,
    SAME_ROUTINE,
    ULPS,
    close,
    dominant,
    gp_args,
    gp_nll,
    program,
    sensitivity,
    spd,
)
from yota.backends import llvm as native
from yota.ir import Builder, Function, run
from yota.ir.errors import LinAlgError, YotaError

LAYOUTS = ("plain", "transposed", "strided", "broadcast")


def both(fn: Function, args: list[np.ndarray]) -> tuple[list[np.ndarray], list[np.ndarray]]:
    want = [np.asarray(w) for w in run(fn, *args)]
    got = [np.asarray(g) for g in native.compile(fn)(*args)]
    for w, g in zip(want, got, strict=True):
        assert w.shape == g.shape and w.dtype == g.dtype
    return want, got


@pytest.mark.parametrize("case", sorted(SAME_ROUTINE))
@pytest.mark.parametrize("dtype", [F32, F64], ids=["f32", "f64"])
def test_same_routine_as_numpy(case: str, dtype: np.dtype) -> None:
    make, inputs = SAME_ROUTINE[case]
    rng = np.random.default_rng(len(case))
    for batch, n, layout in [((), 5, "plain"), ((3,), 4, "transposed"), ((2, 2), 3, "strided"),
                             ((3,), 6, "broadcast"), ((2,), 1, "plain"), ((), 40, "plain")]:
        xs = inputs(rng, batch, n, dtype)
        fn, args = program(make, xs, layout)
        want, got = both(fn, args)
        for w, g in zip(want, got, strict=True):
            close(g, w, ULPS * n * sensitivity(case, xs[0]))


@pytest.mark.parametrize("case", sorted(SAME_ROUTINE) + ["lu", "triangular_solve"])
def test_empty_batch(case: str) -> None:
    make, inputs = SAME_ROUTINE.get(case, (None, None))
    rng = np.random.default_rng(0)
    if case == "lu":
        make, xs = (lambda b, a: b.lu(a)), [np.zeros((0, 3, 3))]
    elif case == "triangular_solve":
        make = lambda b, a, c: b.triangular_solve(a, c, lower=True, transpose=False,  # noqa
                                                  unit_diagonal=False)
        xs = [np.zeros((0, 3, 3)), np.zeros((0, 3, 2))]
    else:
        xs = inputs(rng, (0,), 3, F64)
    fn, args = program(make, xs)
    want, got = both(fn, args)
    assert all(w.size == 0 for w in want)


@pytest.mark.parametrize("full", [True, False])
@pytest.mark.parametrize("shape", [(3, 0), (0, 4)])
def test_svd_of_an_empty_matrix(full: bool, shape: tuple[int, int]) -> None:
    """No singular values: NumPy's full factors are identities."""
    fn, args = program(lambda b, a: b.svd(a, full_matrices=full), [np.zeros((2,) + shape)])
    want, got = both(fn, args)
    for w, g in zip(want, got, strict=True):
        np.testing.assert_array_equal(g, w)


@pytest.mark.parametrize("flags", range(8))
@pytest.mark.parametrize("dtype", [F32, F64], ids=["f32", "f64"])
def test_triangular_solve(flags: int, dtype: np.dtype) -> None:
    lower, trans, unit = bool(flags & 1), bool(flags & 2), bool(flags & 4)
    rng = np.random.default_rng(flags)

    def make(b: Builder, a: Any, c: Any) -> Any:
        return b.triangular_solve(a, c, lower=lower, transpose=trans, unit_diagonal=unit)
    for batch, n, k, layout in [((), 4, 3, "plain"), ((3,), 5, 1, "transposed"),
                                ((2, 2), 3, 2, "strided"), ((3,), 4, 2, "broadcast"),
                                ((), 1, 1, "plain"), ((2,), 33, 5, "plain")]:
        xs = [dominant(rng, batch + (n, n), dtype),
              rng.standard_normal(batch + (n, k)).astype(dtype)]
        fn, args = program(make, xs, layout)
        (want,), (got,) = both(fn, args)
        close(got, want, 50 * n)


def test_triangular_solve_reads_a_transposed_factor_in_place() -> None:
    """``L^T`` (a view, stored column-major) is handed to ``trsm`` as it is."""
    rng = np.random.default_rng(1)
    a, c = dominant(rng, (2, 6, 6), F64), rng.standard_normal((2, 6, 3))
    for lower in (True, False):
        def make(b: Builder, x: Any, y: Any, lower: bool = lower) -> Any:
            xt = b.transpose(b.cholesky(b.matmul(x, b.transpose(x, perm=(0, 2, 1)))),
                             perm=(0, 2, 1))
            return b.triangular_solve(xt, y, lower=lower, transpose=not lower,
                                      unit_diagonal=False)
        fn, args = program(make, [a, c])
        (want,), (got,) = both(fn, args)
        close(got, want, 50 * 6)


@pytest.mark.parametrize("dtype", [F32, F64], ids=["f32", "f64"])
def test_lu(dtype: np.dtype) -> None:
    rng = np.random.default_rng(3)
    for batch, n, layout in [((), 5, "plain"), ((3,), 4, "transposed"), ((2, 2), 3, "strided"),
                             ((3,), 6, "broadcast"), ((2,), 1, "plain"), ((), 30, "plain")]:
        x = rng.standard_normal(batch + (n, n)).astype(dtype)
        if layout == "broadcast":
            x = np.broadcast_to(x[0], x.shape)
        fn, args = program(lambda b, a: b.lu(a), [x], layout)
        (lu_w, p_w), (lu_g, p_g) = both(fn, args)
        np.testing.assert_array_equal(p_g, p_w)
        close(lu_g, lu_w, 50 * n * 10)  # growth of partial pivoting on random matrices
        low = np.tril(lu_g, -1) + np.eye(n, dtype=dtype)
        close(low @ np.triu(lu_g), np.take_along_axis(x, p_g[..., None], -2), 50 * n * 10)


def test_lu_of_a_singular_matrix_is_no_failure() -> None:
    x = np.array([[1.0, 2.0, 3.0], [2.0, 4.0, 6.0], [1.0, 0.0, 1.0]])
    fn, args = program(lambda b, a: b.lu(a), [x])
    (lu_w, p_w), (lu_g, p_g) = both(fn, args)
    np.testing.assert_array_equal(p_g, p_w)
    close(lu_g, lu_w, 64)
    assert np.min(np.abs(np.diag(lu_g))) < 1e-15  # U has its zero pivot


# -- failures -------------------------------------------------------------------------------
@pytest.mark.parametrize("op", sorted(FAILS))
@pytest.mark.parametrize("dtype", [F32, F64], ids=["f32", "f64"])
def test_failures_raise_the_interpreters_linalg_error(op: str, dtype: np.dtype) -> None:
    make, xs, text = FAILS[op]
    fn, args = program(make, [x.astype(dtype) for x in xs], loc="model.py:12")
    with pytest.raises(LinAlgError) as want:
        run(fn, *args)
    exe = native.compile(fn)
    with pytest.raises(LinAlgError) as got:
        exe(*args)
    assert str(got.value) == str(want.value)
    assert text in str(got.value) and "model.py:12" in str(got.value)
    assert isinstance(got.value, np.linalg.LinAlgError) and isinstance(got.value, YotaError)
    good = [np.broadcast_to(np.eye(x.shape[-2], x.shape[-1], dtype=dtype), x.shape).copy()
            if x.shape[-1] == x.shape[-2] or op.startswith("svd") else np.ones_like(x)
            for x in args]
    exe(*good)  # the executable is not left broken by a failure


@pytest.mark.parametrize("dtype", [F32, F64], ids=["f32", "f64"])
def test_nan_inputs_propagate_as_in_numpy(dtype: np.dtype) -> None:
    """NumPy's OpenBLAS does not take a NaN pivot for a failure: NaNs come out."""
    x = np.eye(3, dtype=dtype)
    x[1, 1] = np.nan
    for make, xs in [(lambda b, a: b.cholesky(a), [x]),
                     (lambda b, a, c: b.solve(a, c), [x, np.ones((3, 2), dtype)]),
                     (lambda b, a: b.cholesky(a), [np.full((2, 2), np.nan, dtype)]),
                     (lambda b, a: b.qr(a), [np.full((3, 2), np.nan, dtype)])]:
        fn, args = program(make, xs)
        want, got = both(fn, args)
        for w, g in zip(want, got, strict=True):
            if w.dtype.kind == "f":
                np.testing.assert_array_equal(np.isnan(g), np.isnan(w))
                close(np.nan_to_num(g), np.nan_to_num(w), ULPS)
    # lu: NumPy has none; getrf spreads the NaN through U (the interpreter's elimination
    # spreads it further: 0 / NaN multipliers, where getrf's scaling keeps the zeros)
    fn, args = program(lambda b, a: b.lu(a), [x])
    lu, perm = native.compile(fn)(*args)
    assert np.isnan(lu[1, 1]) and sorted(perm) == [0, 1, 2]


# -- the code reaches LAPACK by name ----------------------------------------------------------
def _gp(b: Builder, k: Any, y: Any) -> Any:
    """A Gaussian-process style program: Cholesky, two triangular solves, log-det."""
    low = b.cholesky(k)
    z = b.triangular_solve(low, y, lower=True, transpose=False, unit_diagonal=False)
    alpha = b.triangular_solve(low, z, lower=True, transpose=True, unit_diagonal=False)
    return alpha, b.svdvals(low)


def test_no_address_in_the_code_and_a_new_process_runs_the_saved_object(tmp_path) -> None:
    rng = np.random.default_rng(5)
    fn, args = program(_gp, [spd(rng, (8, 8), F64), rng.standard_normal((8, 2))])
    exe = native.compile(fn)
    text = exe.llvm_ir
    assert 'declare void @"yota_dpotrf"(ptr' in text and '@"yota_dtrsm"' in text
    assert "inttoptr (i64" not in text  # no baked-in address
    want = [np.asarray(w) for w in exe(*args)]
    (tmp_path / "exe.bin").write_bytes(native.save(exe))
    np.savez(tmp_path / "in.npz", *args)
    code = ("import sys, numpy as np\nfrom yota.backends import llvm as native\n"
            "d = sys.argv[1]\nexe = native.load(open(d + '/exe.bin', 'rb').read())\n"
            "a = np.load(d + '/in.npz')\nouts = exe(*[a[f'arr_{i}'] for i in range(2)])\n"
            "np.savez(d + '/out.npz', *outs)\n"
            "print(native.stats['compiles'], native.stats['loads'])\n")
    proc = subprocess.run([sys.executable, "-c", code, str(tmp_path)], capture_output=True,
                          text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.split() == ["0", "1"]
    out = np.load(tmp_path / "out.npz")
    for j, w in enumerate(want):
        np.testing.assert_array_equal(out[f"arr_{j}"], w)


def test_failure_records_survive_save_and_load() -> None:
    make, xs, _ = FAILS["cholesky"]
    fn, args = program(make, xs, loc="model.py:7")
    exe = native.load(native.save(native.compile(fn)))
    with pytest.raises(LinAlgError, match=r"not positive definite .*model\.py:7"):
        exe(*args)
    assert json.loads(json.dumps(exe.artifact.meta["failures"]))[0]["kind"] == "linalg"


# -- the cuda backend: cuSOLVER steps through CuPy, checked under the CPU emulation ------------
def _emulator() -> Any:
    from yota.backends.cuda.emulate import EmuDevice, emulation_available

    why = emulation_available()
    if why:
        pytest.skip(why)
    return EmuDevice()


def test_cuda_steps_under_emulation() -> None:
    """Every op, and every failure, through the cuda backend's steps (one emulated
    module for all: one g++ run)."""
    from yota.backends import cuda

    dev = _emulator()
    rng = np.random.default_rng(2)
    progs = [program(make, inputs(rng, (2,), 4, F32), "transposed")
             for make, inputs in SAME_ROUTINE.values()]
    fails = [program(make, xs, loc="model.py:12") for make, xs, _ in FAILS.values()]
    exes = cuda.compile_many([fn for fn, _ in progs + fails], device=dev)
    for (fn, args), exe in zip(progs, exes, strict=False):
        for w, g in zip(run(fn, *args), exe(*args), strict=True):
            close(np.asarray(g), np.asarray(w), ULPS)
    for (fn, args), exe in zip(fails, exes[len(progs):], strict=True):
        with pytest.raises(LinAlgError) as want:
            run(fn, *args)
        with pytest.raises(LinAlgError) as got:
            exe(*args)
        assert str(got.value) == str(want.value)


def test_cuda_module_with_linalg_steps_round_trips_through_json() -> None:
    from yota.backends import cuda
    from yota.backends.cuda.artifact import Artifact, pack, unpack
    from yota.backends.program import Linalg

    fn, _ = program(_gp, [np.eye(4), np.ones((4, 2))], loc="gp.py:3")
    mod = cuda.lower(fn)
    assert {s.op for p in mod.plans.values() for s in p.steps if isinstance(s, Linalg)} == {
        "cholesky", "triangular_solve", "svdvals"}
    back = unpack(Artifact.from_bytes(pack(mod, b"cubin", {"arch": "sm_90"}).to_bytes()))
    assert {n: p.steps for n, p in back.plans.items()} == {
        n: p.steps for n, p in mod.plans.items()}
    assert back.failures == mod.failures


def _fake_lu_factor(m: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """SciPy's ``lu_factor`` (row interchanges, 0-based) from the reference ``lu``."""
    from yota.ir.ops.lapack import lu

    f, perm = lu(m)
    cur, piv = list(range(len(perm))), []
    for i, p in enumerate(perm):
        j = cur.index(int(p))
        piv.append(j)
        cur[i], cur[j] = cur[j], cur[i]
    return f, np.array(piv)


def test_cupy_calls_with_numpy_stand_ins() -> None:
    """What the device runs (``runtime.cupy_linalg``), with NumPy in CuPy's place: the
    batch loops, the permutation from ``lu_factor``'s interchanges, the argument
    mapping of ``solve_triangular``."""
    from types import SimpleNamespace

    from yota.backends.cuda.runtime import cupy_linalg
    from yota.ir.ops.lapack import triangular_solve

    cp = SimpleNamespace(linalg=np.linalg, tril=np.tril, stack=np.stack, asnumpy=np.asarray,
                         asarray=np.asarray)

    def solve_triangular(a: np.ndarray, b: np.ndarray, trans: int, lower: bool,
                         unit_diagonal: bool) -> np.ndarray:
        return triangular_solve(a, b, lower=lower, transpose=bool(trans),
                                unit_diagonal=unit_diagonal)
    cxl = SimpleNamespace(lu_factor=_fake_lu_factor, solve_triangular=solve_triangular)
    rng = np.random.default_rng(4)
    a, c = dominant(rng, (2, 3, 5, 5), F64), rng.standard_normal((2, 3, 5, 2))
    cases = [("cholesky", {}, [spd(rng, (2, 4, 4), F64)]), ("solve", {}, [a, c]),
             ("eigh", {"lower": False}, [spd(rng, (3, 4, 4), F64)]),
             ("svd", {"full_matrices": True}, [c]), ("svdvals", {}, [c]), ("qr", {}, [c]),
             ("lu", {}, [a]),
             ("triangular_solve", {"lower": True, "transpose": True, "unit_diagonal": False},
              [a, c])]
    from yota.ir.ops import get_opdef

    for name, attrs, xs in cases:
        got = cupy_linalg(cp, name, attrs, xs, cxl)
        want = get_opdef(name).impl(*xs, **attrs)
        want = list(want) if isinstance(want, tuple) else [want]
        for g, w in zip(got, want, strict=True):
            np.testing.assert_allclose(g, w, rtol=0, atol=1e-12)


# -- through yota.grad: the disk cache and ahead-of-time libraries ---------------------------
@pytest.mark.skipif(not __import__("shutil").which("gcc"), reason="needs gcc")
def test_aot_library_calls_lapack(tmp_path) -> None:
    """A shared library with np.linalg inside: LAPACK reached by name through the shim
    (NumPy's bundled OpenBLAS, handed over by load_library), the results of yota.grad;
    a matrix that is not positive definite is the failure return code."""
    import yota
    from yota.aot import load_library

    args = gp_args()
    val, g = yota.grad(gp_nll, *args, cache=False)
    r = yota.aot(gp_nll, *args, path=tmp_path / "lib", shared_library=True, name="gp")
    assert "gp_use_lapack" in r.library.header.read_text()
    assert "LAPACK potrf failed in np.linalg 'cholesky'" in r.library.header.read_text()
    fns = load_library(r.library.library)
    out = fns["gp"](*args)
    np.testing.assert_allclose(out[0], val, rtol=1e-12)
    for got, want in zip(out[1:], g, strict=True):
        np.testing.assert_allclose(got, want, rtol=1e-10, atol=1e-12)
    r2 = yota.aot(chol_sum, np.eye(3), path=tmp_path / "lib2", shared_library=True,
                  name="chol")
    with pytest.raises(RuntimeError, match="not positive definite"):
        load_library(r2.library.library)["chol"](-np.eye(3))


def chol_sum(a: Any) -> Any:
    return np.sum(np.linalg.cholesky(a))


def test_user_line_in_the_error_from_compiled_code() -> None:
    import inspect

    import yota

    line = inspect.getsourcelines(chol_sum)[1] + 1  # the np.linalg.cholesky line
    yota.grad(chol_sum, np.eye(3), backend="llvm", cache=False)  # traced on a PD matrix
    with pytest.raises(LinAlgError, match=rf"not positive definite .*test_linalg_native\.py:{line}"):
        yota.grad(chol_sum, -np.eye(3), backend="llvm", cache=False)


CACHED = """
import json, sys
import numpy as np, yota
from yota.backends import llvm
from support.linalg_cases import gp_args, gp_nll
val, g = yota.grad(gp_nll, *gp_args())
print(json.dumps({"compiles": llvm.stats["compiles"], "loads": llvm.stats["loads"],
                  "val": float(val), "g": float(np.sum(g[1]))}))
"""


def test_a_program_with_lapack_calls_goes_through_the_disk_cache(tmp_path) -> None:
    import os

    env = {**os.environ, "YOTA_CACHE_DIR": str(tmp_path / "cache"),
           "PYTHONDONTWRITEBYTECODE": "1", "PYTHONPATH": str(TESTS)}
    env.pop("YOTA_CACHE", None)
    runs = []
    for _ in range(2):
        p = subprocess.run([sys.executable, "-c", CACHED], capture_output=True, text=True,
                           env=env, timeout=300)
        assert p.returncode == 0, p.stderr
        runs.append(json.loads(p.stdout.strip().splitlines()[-1]))
    assert (runs[0]["compiles"], runs[1]["compiles"], runs[1]["loads"]) == (1, 0, 1)
    assert runs[0]["val"] == runs[1]["val"] and runs[0]["g"] == runs[1]["g"]


def test_without_lapack_the_compile_error_names_the_op(monkeypatch) -> None:
    import yota.backends.llvm.lapack as lapack

    monkeypatch.setattr(lapack, "lapack_address", lambda name: None)
    fn, _ = program(lambda b, a: b.cholesky(a), [np.eye(3)], loc="model.py:4")
    with pytest.raises(YotaError, match=r"np.linalg 'cholesky' \(at model.py:4\) needs LAPACK"):
        native.compile(fn)


NO_LAPACK = """
import ctypes, json, sys
import numpy as np
lib = ctypes.CDLL(sys.argv[1])
desc = json.load(open(sys.argv[2]))["functions"][0]
fn = getattr(lib, desc["name"])
fn.restype = ctypes.c_int
a, outs = np.eye(3), [np.empty(o["shape"]) for o in desc["outputs"]]
print(fn(ctypes.c_void_p(a.ctypes.data), *[ctypes.c_void_p(o.ctypes.data) for o in outs]))
"""


@pytest.mark.skipif(not __import__("shutil").which("gcc"), reason="needs gcc")
def test_aot_library_without_lapack_fails_its_call(tmp_path) -> None:
    """No LAPACK handed over, none in the process: the call returns its failure code (the
    record says LAPACK was not found), it does not crash."""
    import os

    from yota.backends.failures import LAPACK_MISSING, linalg_failure

    import yota

    r = yota.aot(chol_sum, np.eye(3), path=tmp_path / "lib", shared_library=True, name="c")
    env = {k: v for k, v in os.environ.items() if k != "YOTA_BLAS"}
    p = subprocess.run([sys.executable, "-c", NO_LAPACK, str(r.library.library),
                        str(r.library.manifest)], capture_output=True, text=True, env=env,
                       timeout=60)
    assert p.returncode == 0, p.stderr
    rc = int(p.stdout.strip())
    rec = r.library.programs[0]["failures"][rc - 1]
    assert rec["kind"] == "linalg" and rec["routine"] == "potrf"
    assert "no LAPACK routine potrf was found" in str(linalg_failure(rec, LAPACK_MISSING))


def test_concurrent_calls_share_nothing() -> None:
    """LAPACK's work arrays live in each call's workspace: calls from several threads at
    once give each its own answer."""
    from concurrent.futures import ThreadPoolExecutor

    rng = np.random.default_rng(9)
    fn, _ = program(_gp, [np.eye(16), np.ones((16, 2))])
    exe = native.compile(fn)
    inputs = [(spd(rng, (16, 16), F64), rng.standard_normal((16, 2))) for _ in range(8)]
    want = [[np.asarray(v) for v in exe(*xs)] for xs in inputs]
    with ThreadPoolExecutor(4) as pool:
        got = list(pool.map(lambda xs: exe(*xs), inputs * 4))
    for k, outs in enumerate(got):
        for g, w in zip(outs, want[k % len(inputs)], strict=True):
            np.testing.assert_array_equal(np.asarray(g), w)
