"""The llvm backend as a whole: end-to-end gradients, memory safety against guard pages,
calls from several threads, object code reloaded in another process, inspection hooks."""

from __future__ import annotations

import gc
import os
import subprocess
import sys
import textwrap
import threading
import weakref
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pytest
from bench.workloads import loss_w4
from support import (
    ROOT,
    irgen,  # noqa: E402
    precision,  # noqa: E402
)
from yota.backends import BACKENDS
from yota.backends import llvm as native
from yota.ir import run
from yota.ir.autodiff import vjp
from yota.ir.passes import optimize

import yota


def _grad_fn(fn):  # the optimized value-and-gradient function of an example program
    return optimize(vjp(fn, [i for i, v in enumerate(fn.inputs) if v.dtype.kind == "f"]))


# -- end to end ---------------------------------------------------------------------------------
@dataclass
class MLP:
    W1: np.ndarray
    b1: np.ndarray
    W2: np.ndarray
    b2: np.ndarray


def mlp_loss(m: MLP, X: np.ndarray, Y: np.ndarray) -> float:
    h = np.tanh(X @ m.W1 + m.b1)
    out = h @ m.W2 + m.b2
    return np.sum((out - Y) ** 2) / X.shape[0]


rnn_loss = loss_w4(np)  # the benchmark's W4: h = tanh(h @ W.T + x_t @ U.T + b), sum(h_T**2)


def test_llvm_is_registered() -> None:
    assert BACKENDS["llvm"] == "yota.backends.llvm" and "interp" in BACKENDS


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_grad_mlp_matches_interpreter(dtype: type) -> None:
    rng = np.random.default_rng(0)
    m = MLP(*(rng.standard_normal(s).astype(dtype) * 0.3 for s in [(6, 8), (8,), (8, 3), (3,)]))
    X, Y = rng.standard_normal((5, 6)).astype(dtype), rng.standard_normal((5, 3)).astype(dtype)
    v1, g1 = yota.grad(mlp_loss, m, X, Y, backend="llvm")
    v2, g2 = yota.grad(mlp_loss, m, X, Y, backend="interp")
    tol = 1e-5 if dtype == np.float32 else 1e-12
    assert np.isclose(v1, v2, rtol=tol)
    for k in g2.flat[0]:
        np.testing.assert_allclose(g1.flat[0][k], g2.flat[0][k], rtol=tol, atol=tol)
    np.testing.assert_allclose(g1[1], g2[1], rtol=tol, atol=tol)


def test_grad_rnn_matches_interpreter() -> None:
    rng = np.random.default_rng(1)
    args = [rng.standard_normal((8, 8)) * 0.3, rng.standard_normal((8, 5)) * 0.3,
            rng.standard_normal(8), rng.standard_normal((4, 3, 5))]
    v1, g1 = yota.grad(rnn_loss, *args, backend="llvm")
    v2, g2 = yota.grad(rnn_loss, *args, backend="interp")
    assert np.isclose(v1, v2, rtol=1e-12)
    for a, b in zip(g1, g2, strict=True):
        np.testing.assert_allclose(a, b, rtol=1e-10, atol=1e-12)


# -- memory safety ------------------------------------------------------------------------------
GUARD_SCRIPT = r"""
import ctypes, mmap, sys
import numpy as np
from support import irgen  # tests/ on PYTHONPATH
from yota.ir import Builder, TensorType, run
from yota.ir.autodiff import vjp
from yota.ir.passes import optimize
from yota.backends import llvm as native

PAGE = mmap.PAGESIZE
libc = ctypes.CDLL(None)
libc.mprotect.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int]
keep = []

def guarded(a, at_end):
    '''A copy of ``a`` whose data touches a PROT_NONE page (after it, or before it).'''
    a = np.array(a, order='C')
    n = max(a.nbytes, 1)
    body = -(-n // PAGE) * PAGE
    mm = mmap.mmap(-1, body + 2 * PAGE)
    base = ctypes.addressof(ctypes.c_char.from_buffer(mm))
    assert libc.mprotect(base, PAGE, 0) == 0
    assert libc.mprotect(base + PAGE + body, PAGE, 0) == 0
    off = PAGE + body - a.nbytes if at_end else PAGE
    out = np.frombuffer(mm, dtype=a.dtype, count=a.size, offset=off).reshape(a.shape)
    out[...] = a
    keep.append(mm)
    return out

def check(fn, args, tol):
    exe = native.compile(fn)
    want = run(fn, *args)
    for at_end in (True, False):
        g_args = [guarded(a, at_end) for a in args]
        outs = [guarded(np.empty_like(w), at_end) for w in want]
        got = exe(*g_args, out=outs)
        for g, w in zip(got, want):
            assert g.shape == w.shape
            if w.dtype.kind == "f":
                assert np.allclose(g, w, rtol=tol, atol=tol, equal_nan=True), (fn.name, g, w)
            else:
                assert np.array_equal(g, w), (fn.name, g, w)

if len(sys.argv) > 1:  # self-check: reading one element past a guarded array must crash
    a = guarded(np.zeros(3), True)
    ctypes.c_double.from_address(a.ctypes.data + 3 * 8).value
    print("NOT PROTECTED")
    sys.exit(0)
rng = np.random.default_rng(0)
for n in (1, 7, 37, 1001):
    g = optimize(vjp(irgen.w2_loss(n), [0, 1]))
    check(g, irgen.example_inputs(g, rng), 1e-4)
for f in (irgen.mlp_loss(5, (7, 6, 5, 10)), irgen.rnn_loss(3, 5, 2, 4)):
    g = optimize(vjp(f, [i for i, v in enumerate(f.inputs) if v.dtype.kind == "f"]))
    check(g, irgen.example_inputs(g, rng), 1e-4)
b = Builder("views")
x = b.input(TensorType("f64", (9, 13)))
i = b.input(TensorType("i64", (5,)))
c = b.input(TensorType("i32", (3, 1)))
outs = [b.exp(b.transpose(x, perm=(1, 0))), b.sum(x, axes=(0,)), b.max(x, axes=(1,)),
        b.flip(x, axes=(0, 1)), b.gather(x, i, axis=1), b.neg(b.broadcast(c, shape=(3, 11))),
        b.slice(x, start=(1, 2), stop=(9, 13), step=(3, 4)), b.argmax(x, axis=0),
        b.matmul(x, b.transpose(x, perm=(1, 0))), b.concatenate(x, x, axis=1),
        b.pad(b.convert(c, dtype="bool"), low=(1, 0), high=(2, 3), interior=(1, 0))]
check(b.build(outs), [rng.standard_normal((9, 13)), np.array([0, 12, -1, 5, 3]),
                      np.arange(3, dtype=np.int32).reshape(3, 1)], 1e-9)
for seed in range(40):
    fn, args = irgen.random_program(np.random.default_rng(seed))
    try:
        run(fn, *args)
    except Exception:
        continue
    check(optimize(fn), args, 1e-3)
print("OK")
"""


def test_no_access_outside_arrays_next_to_guard_pages() -> None:
    """Inputs and outputs placed against PROT_NONE pages (after the data, then before it):
    any out-of-bounds access kills the subprocess with SIGSEGV."""
    code, env = GUARD_SCRIPT, {**os.environ, "PYTHONPATH": str(ROOT / "tests")}
    probe = subprocess.run([sys.executable, "-c", code, "probe"], capture_output=True,
                           text=True, timeout=120, env=env)
    assert probe.returncode < 0 and "NOT PROTECTED" not in probe.stdout  # the guard works
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                       timeout=600, env=env)
    assert r.returncode == 0 and "OK" in r.stdout, (r.returncode, r.stdout, r.stderr[-3000:])


# -- threads --------------------------------------------------------------------------------------
@pytest.mark.parametrize("threads", [1, 2])
def test_one_gradient_called_from_several_threads(threads: int) -> None:
    g = _grad_fn(irgen.w2_loss(200_003))
    exe = native.compile(g, threads=threads)
    rng = np.random.default_rng(2)
    inputs = [irgen.example_inputs(g, rng) for _ in range(6)]
    want = [run(g, *a) for a in inputs]
    errors: list[str] = []

    def work(k: int) -> None:
        checked: list[bytes] = []  # results already within precision's bounds, as bytes
        for _ in range(5):
            got = exe(*inputs[k])
            raw = b"".join(np.ascontiguousarray(v).tobytes() for v in got)
            if raw in checked:  # the same bits as a checked result: no need to bound again
                continue
            msg = precision.mismatch(g, inputs[k], got, want[k])
            if msg:
                errors.append(f"thread {k}: {msg}")
            checked.append(raw)

    ts = [threading.Thread(target=work, args=(k,)) for k in range(len(inputs))]
    for t in ts:
        t.start()
    for t in ts:
        t.join()
    assert not errors, errors[0]


def test_mlp_gradient_from_several_threads() -> None:
    g = _grad_fn(irgen.mlp_loss(16, (20, 12, 8, 10)))
    exe = native.compile(g)
    rng = np.random.default_rng(3)
    inputs = [irgen.example_inputs(g, rng) for _ in range(4)]
    want = [run(g, *a) for a in inputs]
    results: dict[int, list[np.ndarray]] = {}

    def work(k: int) -> None:
        for _ in range(20):
            results[k] = exe(*inputs[k])

    ts = [threading.Thread(target=work, args=(k,)) for k in range(len(inputs))]
    for t in ts:
        t.start()
    for t in ts:
        t.join()
    for k in range(len(inputs)):
        assert precision.mismatch(g, inputs[k], results[k], want[k]) is None


# -- object code in another process ---------------------------------------------------------------
RELOAD_SCRIPT = r"""
import sys
import numpy as np
from yota.backends import llvm as native
from yota.ir import GuardFailed
exe = native.load(open(sys.argv[1], "rb").read())
args = list(np.load(sys.argv[2], allow_pickle=False).values())
outs = exe(*args)
np.savez(sys.argv[3], *outs)
try:
    exe(*[np.full_like(a, -1.0) if a.dtype.kind == "f" else a for a in args])
except GuardFailed as e:
    print("GUARD", e)
"""


def test_object_code_reloads_in_another_process(tmp_path: Path) -> None:
    from yota.ir import Builder

    g = _grad_fn(irgen.mlp_loss(8, (6, 5, 4, 10)))
    b = Builder("guarded")
    ins = [b.input(v.type) for v in g.inputs]
    outs = b.call(g, *ins)
    b.guard(b.gt(b.max(ins[0], axes=(0, 1)), b.const(0.0, ins[0].dtype)), expected=True,
            kind="bool")
    fn = b.build(list(outs))
    exe = native.compile(fn, threads=2, par_work=0)  # split kernels: the pool resolves too
    args = irgen.example_inputs(fn, np.random.default_rng(4))
    (tmp_path / "f.yo").write_bytes(native.save(exe))
    np.savez(tmp_path / "args.npz", *args)
    r = subprocess.run([sys.executable, "-c", RELOAD_SCRIPT, str(tmp_path / "f.yo"),
                        str(tmp_path / "args.npz"), str(tmp_path / "outs.npz")],
                       capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    got = list(np.load(tmp_path / "outs.npz").values())
    assert irgen.same_results(got, exe(*args)) is None
    assert precision.mismatch(fn, args, got, run(fn, *args)) is None
    with pytest.raises(yota.ir.GuardFailed) as e:
        exe(*[np.full_like(a, -1.0) if a.dtype.kind == "f" else a for a in args])
    assert r.stdout.strip() == f"GUARD {e.value}"


def test_artifact_for_another_target_is_refused() -> None:
    from yota.backends.llvm.runtime.executable import Artifact

    exe = native.compile(irgen.w2_loss(8))
    art = Artifact(exe.artifact.object_code, {**exe.artifact.meta, "target": {"cpu": "other"}})
    with pytest.raises(yota.YotaError, match="another target"):
        native.load(art.to_bytes())


# -- inspection hooks -------------------------------------------------------------------------------
def test_inspection_hooks() -> None:
    fn = _grad_fn(irgen.w2_loss(64))
    before = native.llvm_ir(fn)
    after = native.llvm_ir(fn, optimized=True)
    asm = native.assembly(fn)
    assert "define i32 @\"yota_main\"" in before and "yota.kernel" in before
    assert "define" in after and "<8 x float>" in after or "<16 x float>" in after
    assert "yota_main" in asm and "ret" in asm
    exe = native.compile(fn)
    assert exe.llvm_ir == before and "ret" in exe.assembly() and exe.optimized_ir


def test_bench_script_runs_quickly() -> None:
    r = subprocess.run([sys.executable, str(ROOT / "tools" / "bench_llvm.py"), "--quick"],
                       capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr
    assert "W2" in r.stdout and "MLP" in r.stdout and "overhead" in r.stdout




# -- output recycling ---------------------------------------------------------------------------
def test_released_large_outputs_are_recycled_held_ones_never() -> None:
    from yota.ir import Builder, TensorType

    n = 1 << 19  # 2 MB of float32: recycled
    b = Builder("big")
    x = b.input(TensorType("f32", (n,)))
    exe = native.compile(b.build([b.neg(x), b.sum(x, axes=(0,))]))
    ones = np.ones(n, np.float32)
    first = exe(ones)[0]
    view = exe(2 * ones)[0][::2]  # only a view of the second result is kept
    third = exe(3 * ones)[0]
    assert first[0] == -1 and view[0] == -2 and third[0] == -3  # nothing overwritten
    addr = third.ctypes.data
    del third
    fourth = exe(4 * ones)[0]
    assert fourth[-1] == -4 and fourth.ctypes.data == addr  # released: reused
    assert first[-1] == -1 and view[-1] == -2


def test_compiled_function_outputs_live_only_as_long_as_the_caller_holds_them() -> None:
    """``yota.compile``'s results (a structure of outputs) keep no reference of their own:
    with the cyclic garbage collector off, a dropped small output is freed at once and a
    dropped large one is handed out again by the next call (a reference cycle once kept
    them until the collector ran, so every call faulted fresh pages in)."""
    n = 1 << 19  # 2 MB of float32: recycled
    big = np.ones(n, np.float32)
    small = np.ones(5)
    f_big = yota.compile(lambda x: {"neg": -x, "parts": [x.sum(), 2.0]}, big, backend="llvm")
    f_small = yota.compile(lambda x: (x * 3.0, float(x.size)), small, backend="llvm")
    enabled = gc.isenabled()
    gc.disable()
    try:
        out = f_small(small)
        assert out[1] == 5.0 and isinstance(out[1], float)
        ref = weakref.ref(out[0])
        del out
        assert ref() is None
        first = f_big(big)
        assert first["parts"][0] == n and first["parts"][1] == 2.0
        addr = first["neg"].ctypes.data
        del first
        second = f_big(2 * big)
        assert second["neg"].ctypes.data == addr and second["neg"][-1] == -2
    finally:
        if enabled:
            gc.enable()


def test_split_kernels_survive_unloading_their_code() -> None:
    """Helper threads never run a module's code after its call returned, so dropping
    the executable right after a call is safe (run in a subprocess: a crash is SIGSEGV)."""
    code = textwrap.dedent("""
        import gc
        import numpy as np
        from yota.ir import Builder, TensorType
        from yota.backends import llvm as native
        x = np.random.default_rng(0).standard_normal((300, 70))
        for i in range(60):
            b = Builder(f"k{i}")
            v = b.input(TensorType("f64", (300, 70)))
            exe = native.compile(b.build([b.sum(b.tanh(v), axes=(i % 2,))]), threads=3,
                                 par_work=0)
            got = exe(x)[0]
            assert np.allclose(got, np.tanh(x).sum(axis=i % 2))
            del exe
            gc.collect()
        print("OK")
    """)
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)
    assert r.returncode == 0 and "OK" in r.stdout, (r.returncode, r.stderr[-2000:])


def test_docstring_examples() -> None:
    """The examples of the llvm backend and of the shared kernel layer run as written."""
    import doctest

    import yota.backends.kernel as kernel
    import yota.ir.passes.view_safety as view_safety

    for mod in (native, kernel, view_safety):
        assert doctest.testmod(mod).failed == 0, mod.__name__
