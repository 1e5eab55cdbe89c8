"""Programs for the CUDA backend's tests and ``tools/gpu_check.py``: ``op_programs``, which
cover every op of the op table (float32 and float64, the integer and bool dtypes each op
takes, 0-d, empty, size-1 and odd shapes, special values among the inputs), the random
programs of ``irgen`` raw and optimized, the comparison with the interpreter, and the CPU
emulation of the kernels (``emulator``)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np
from yota.backends import cuda
from yota.ir import Builder, Function, TensorType, run
from yota.ir.autodiff import vjp
from yota.ir.passes import optimize

from support import backend_cases, irgen
from support.backend_cases import (
    BOOL_BINARY,
    FLOAT_BINARY,
    FLOAT_UNARY,
    FLOATS,
    INT_BINARY,
    INT_UNARY,
    SHAPES,
    TRANSCENDENTAL,
    binary_program,
    inputs,
    iota_program,
    loop_programs,
    mismatch,
    sample,
    special_inputs,
    special_programs,
    unary_program,
)


@dataclass
class Case:
    label: str
    fn: Function
    args: list[np.ndarray]
    ops: tuple[str, ...]


# -- programs -------------------------------------------------------------------------------------
def _elementwise_cases(rng: np.random.Generator) -> list[Case]:
    return (_float_cases(rng) + _special_cases(rng) + _int_and_bool_cases(rng)
            + _select_and_convert_cases(rng))


def _float_cases(rng: np.random.Generator) -> list[Case]:
    out = []
    for dt in FLOATS:
        for ops, program in ((FLOAT_UNARY, unary_program), (TRANSCENDENTAL, unary_program),
                             (FLOAT_BINARY, binary_program), (("pow", "arctan2"), binary_program)):
            for op in ops:
                fn = program(op, dt)
                out.append(Case(f"{op}_{dt}", fn, inputs(rng, fn), (op,)))
    return out


def _special_cases(rng: np.random.Generator) -> list[Case]:
    return [Case(f"{op}_{dt}_{fn.ops[0].attrs.get('n', '')}", fn,
                 special_inputs(rng, op, fn), (op,))
            for dt in FLOATS for op, fn in special_programs(dt)]


def _int_and_bool_cases(rng: np.random.Generator) -> list[Case]:
    out = []
    for dt in ("i32", "i64"):
        for op in INT_UNARY:
            fn = unary_program(op, dt)
            out.append(Case(f"{op}_{dt}", fn, inputs(rng, fn), (op,)))
        for op in INT_BINARY:
            fn = binary_program(op, dt)
            args = inputs(rng, fn)
            if op == "pow":  # negative integer powers are an error in NumPy
                args = [(np.abs(a) % 7 if i % 2 else a).astype(a.dtype) for i, a in
                        enumerate(args)]
            out.append(Case(f"{op}_{dt}", fn, args, (op,)))
    fn = unary_program("not", "bool")
    out.append(Case("not", fn, inputs(rng, fn), ("not",)))
    for op in BOOL_BINARY:
        fn = binary_program(op, "bool")
        out.append(Case(f"{op}_bool", fn, inputs(rng, fn), (op,)))
    return out


def _select_and_convert_cases(rng: np.random.Generator) -> list[Case]:
    out = []
    for dt in ("f32", "f64", "i32", "i64", "bool"):
        b = Builder(f"select_{dt}")
        outs = [b.select(b.input(TensorType("bool", s)), b.input(TensorType(dt, s)),
                         b.input(TensorType(dt, s))) for s in SHAPES]
        fn = b.build(outs)
        out.append(Case(f"select_{dt}", fn, inputs(rng, fn), ("select",)))
    for src in ("f32", "f64", "i32", "i64", "bool"):
        b = Builder(f"convert_{src}")
        x = b.input(TensorType(src, (37,)))
        fn = b.build([b.convert(x, dtype=d) for d in ("f32", "f64", "i32", "i64", "bool")
                      if d != src])
        x0 = sample(rng, (37,), src, special=False)
        if x0.dtype.kind == "f":
            x0[:4] = [0.0, -0.0, 1e-40, -2.5]
        out.append(Case(f"convert_{src}", fn, [x0], ("convert",)))
    return out


RED_CASES = [((37,), (0,)), ((3, 5), (0,)), ((3, 5), (1,)), ((3, 5), (0, 1)), ((2, 1, 9), (2,)),
             ((2, 1, 9), (0, 2)), ((4, 0), (0,)), ((4, 0), (1,)), ((), ()), ((1000, 3), (0,)),
             ((3, 1000), (1,)), ((5000,), (0,)), ((3, 40, 7), (0, 2)), ((6, 300), (0,))]


def _reduction_cases(rng: np.random.Generator) -> list[Case]:
    out = []
    for op in ("sum", "prod", "max", "min"):
        for dt in ("f32", "f64", "i32", "i64", "bool"):
            cases = [(s, a) for s, a in (RED_CASES if dt[0] == "f" else RED_CASES[::3])
                     if not (op in ("max", "min") and any(s[i] == 0 for i in a))]
            b = Builder(f"{op}_{dt}")
            fn = b.build([b.emit(op, b.input(TensorType(dt, s)), axes=a) for s, a in cases])
            args = [sample(rng, s, dt, special=op in ("max", "min")) for s, _ in cases]
            if op == "prod" and dt[0] == "f":
                args = [np.clip(np.abs(a), 0.9, 1.1).astype(a.dtype) for a in args]
            out.append(Case(f"{op}_{dt}", fn, args, (op,)))
    for op in ("argmax", "argmin"):
        for dt in ("f32", "f64", "i32", "bool"):
            b = Builder(f"{op}_{dt}")
            cases = [((37,), 0), ((3, 5), 0), ((3, 5), 1), ((2, 1, 9), 2), ((1,), 0)]
            fn = b.build([b.emit(op, b.input(TensorType(dt, s)), axis=a) for s, a in cases])
            args = [sample(rng, s, dt) for s, _ in cases]
            if dt[0] == "f":
                args[0][[3, 9]] = np.nan
            out.append(Case(f"{op}_{dt}", fn, args, (op,)))
    return out


def _shape_cases(rng: np.random.Generator) -> list[Case]:
    out = []
    for dt in ("f32", "f64", "i32", "bool"):
        b = Builder(f"shape_{dt}")
        x = b.input(TensorType(dt, (3, 4, 5)))
        y = b.input(TensorType(dt, (4, 1)))
        t = b.transpose(x, perm=(0, 2, 1))
        outs = [
            b.reshape(x, shape=(12, 5)), b.transpose(x, perm=(2, 0, 1)),
            b.broadcast(y, shape=(3, 4, 5)),
            b.slice(x, start=(1, 0, 1), stop=(3, 4, 5), step=(1, 2, 3)),
            b.flip(x, axes=(0, 2)), b.pad(y, low=(1, 2), high=(0, 1), interior=(1, 0)),
            b.concatenate(x, x, axis=1),
            b.reshape(b.transpose(x, perm=(1, 0, 2)), shape=(4, 15)),
            b.emit("add" if dt != "bool" else "xor", t, t),
            b.slice(b.transpose(x, perm=(2, 1, 0)), start=(4, 0, 0), stop=(5, 4, 3),
                    step=(1, 1, 1)),
            b.reshape(b.slice(x, start=(0, 1, 0), stop=(3, 2, 5), step=(1, 1, 1)), shape=(15,)),
            b.broadcast(b.reshape(y, shape=(4,)), shape=(2, 4)),
        ]
        if dt[0] in "fi":
            outs += [b.sum_to(x, shape=(4, 1)), b.sum_to(x, shape=(1, 1, 5)),
                     b.sum_to(x, shape=(3, 4, 5))]
        fn = b.build(outs)
        out.append(Case(f"shape_{dt}", fn, [sample(rng, (3, 4, 5), dt), sample(rng, (4, 1), dt)],
                        ("reshape", "transpose", "broadcast", "slice", "flip", "pad",
                         "concatenate", "sum_to")))
    b = Builder("concat_pad")
    x = b.input(TensorType("f32", (2, 3)))
    z = b.input(TensorType("f32", (2, 0)))
    t = b.transpose(b.input(TensorType("f32", (3, 2))), perm=(1, 0))
    fn = b.build([b.concatenate(*([x, z, t, x] * 8), axis=1),  # more parts than one kernel takes
                  b.concatenate(x, b.neg(x), axis=0),
                  b.pad(x, low=(1, 0), high=(2, 3), interior=(2, 1)),
                  b.pad(t, low=(0, 2), high=(1, 0), interior=(0, 3)),
                  b.pad(z, low=(1, 1), high=(0, 2), interior=(1, 1))])
    out.append(Case("concat_pad", fn, [sample(rng, v.shape, "f32") for v in fn.inputs],
                    ("concatenate", "pad")))
    b = Builder("empty")
    x, y = b.input(TensorType("f32", (0, 3))), b.input(TensorType("f32", (3, 0)))
    fn = b.build([b.exp(x), b.sum(x, axes=(0,)), b.matmul(y, x), b.transpose(x, perm=(1, 0)),
                  b.concatenate(x, x, axis=0), b.matmul(x, y)])
    out.append(Case("empty", fn, [np.zeros((0, 3), np.float32), np.zeros((3, 0), np.float32)], ()))
    return out


def _index_cases(rng: np.random.Generator) -> list[Case]:
    out = []
    for dt in ("f32", "f64", "i64"):
        b = Builder(f"idx_{dt}")
        x = b.input(TensorType(dt, (5, 4, 3)))
        i = b.input(TensorType("i64", (2, 3)))
        j = b.input(TensorType("i32", (2, 3)))
        u = b.input(TensorType(dt, (5, 2, 3, 3)))
        w = b.input(TensorType(dt, (2, 3, 4, 3)))
        # scatter: rows [[0, 4], [2, -2]] of x replaced (no repeats: on a GPU, which of
        # repeated writes wins is unspecified, as NumPy leaves it)
        rows = b.const(np.array([[0, 4], [2, -2]]))
        col = b.slice(w, start=(0, 0, 0, 0), stop=(2, 2, 1, 3), step=(1, 1, 1, 1))
        scat = b.scatter(x, b.broadcast(col, shape=(2, 2, 4, 3)), rows, axis=0)
        # update_slice: rows 1 and 3 of x replaced by w[0, :2]
        band = b.reshape(b.slice(w, start=(0, 0, 0, 0), stop=(1, 2, 4, 3), step=(1, 1, 1, 1)),
                         shape=(2, 4, 3))
        upd_slice = b.update_slice(x, band, start=(1, 0, 0), stop=(5, 4, 3), step=(2, 1, 1))
        fn = b.build([b.gather(x, i, axis=0), b.gather(x, i, j, axis=0), b.gather(x, j, axis=1),
                      b.scatter_add(u, i, j, axis=1, shape=(5, 5, 4, 3)), scat, upd_slice])
        iv = np.array([[0, -1, 4], [2, 2, -5]])
        jv = np.array([[1, 3, -1], [0, 0, 2]], np.int32)
        args = [sample(rng, (5, 4, 3), dt, False), iv, jv, sample(rng, (5, 2, 3, 3), dt, False),
                sample(rng, (2, 3, 4, 3), dt, False)]
        out.append(Case(f"idx_{dt}", fn, args, ("gather", "scatter_add", "scatter",
                                                   "update_slice")))
    return out


def _matmul_cases(rng: np.random.Generator) -> list[Case]:
    out = []
    for dt in ("f32", "f64", "i32", "i64"):
        b = Builder(f"mm_{dt}")
        a, c = b.input(TensorType(dt, (7, 5))), b.input(TensorType(dt, (5, 3)))
        p, q = b.input(TensorType(dt, (2, 4, 5))), b.input(TensorType(dt, (2, 5, 6)))
        fn = b.build([
            b.matmul(a, c), b.matmul(b.transpose(c, perm=(1, 0)), b.transpose(a, perm=(1, 0))),
            b.matmul(p, q), b.matmul(b.transpose(q, perm=(0, 2, 1)), b.transpose(p, perm=(0, 2, 1))),
            b.matmul(b.slice(a, start=(1, 0), stop=(7, 5), step=(2, 1)), c),
            b.matmul(b.flip(a, axes=(1,)), c), b.matmul(b.reshape(a, shape=(5, 7)), a),
            b.matmul(b.broadcast(b.reshape(b.transpose(c, perm=(1, 0)), shape=(1, 3, 5)),
                                 shape=(2, 3, 5)), q)])
        args = [sample(rng, v.shape, dt, special=False) for v in fn.inputs]
        out.append(Case(f"matmul_{dt}", fn, args, ("matmul",)))
    return out


def _lapack_cases(rng: np.random.Generator) -> list[Case]:
    """The LAPACK-level ops (cuSOLVER steps through CuPy) on well-conditioned matrices,
    batched, with a transposed operand."""
    out = []
    for dt in (np.dtype(np.float32), np.dtype(np.float64)):
        b = Builder(f"lapack_{dt}")
        s, r = b.input(TensorType(dt, (2, 4, 4))), b.input(TensorType(dt, (2, 4, 3)))
        w = b.input(TensorType(dt, (3, 5)))
        st = b.transpose(s, perm=(0, 2, 1))
        fn = b.build([b.cholesky(st), b.solve(s, r), *b.eigh(st, lower=True),
                      b.triangular_solve(s, r, lower=True, transpose=True, unit_diagonal=False),
                      *b.lu(s), *b.svd(w, full_matrices=True), b.svdvals(r), *b.qr(r),
                      b.pivots(b.lu(s)[1])])
        x = rng.standard_normal((2, 4, 4))
        spd = (x @ np.swapaxes(x, -1, -2) + 4 * np.eye(4)).astype(dt)
        out.append(Case(f"lapack_{dt.name}", fn, [spd, rng.standard_normal((2, 4, 3)).astype(dt),
                                             rng.standard_normal((3, 5)).astype(dt)],
                        ("cholesky", "solve", "eigh", "triangular_solve", "lu", "svd",
                         "svdvals", "qr", "pivots")))
    return out


def _misc_cases(rng: np.random.Generator) -> list[Case]:
    out = []
    b = Builder("c")
    x = b.input(TensorType("f64", (2, 3)))
    k = b.const(np.arange(6.0).reshape(2, 3))
    fn = b.build([b.add(x, k), k, b.const(7.0, "f64", (2, 3)), b.const(np.arange(4), np.int32),
                  b.matmul(b.const(1.0, "f64", (4, 2)), x)])
    out.append(Case("const", fn, [np.ones((2, 3))], ("const",)))
    sb = Builder("inner")
    u = sb.input(TensorType("f64", (3,)))
    sb.guard(sb.sum(u, axes=(0,)), expected=True, kind="bool")
    inner = sb.build([sb.exp(u), sb.sum(u, axes=(0,))])
    b = Builder("outer")
    x = b.input(TensorType("f64", (3, 2)))
    column = b.slice(b.transpose(x, perm=(1, 0)), start=(0, 0), stop=(1, 3), step=(1, 1))
    r = b.call(inner, b.reshape(column, shape=(3,)))
    b.guard(b.max(x, axes=(0, 1)), expected=2, kind="int")
    fn = b.build([r[0], r[1]])
    x0 = np.array([[0.5, 1.0], [1.0, 1.0], [2.9, 1.0]])
    out.append(Case("call_guard", fn, [x0], ("call", "guard")))
    from yota.ir.ops.callback import CALLBACKS

    CALLBACKS["tests.cuda_twice#0"] = lambda static, xs: [xs[0] * 2.0]
    b = Builder("cb")
    x = b.input(TensorType("f64", (3, 2)))
    y = b.callback(b.transpose(x, perm=(1, 0)), fn="tests.cuda_twice#0", static="",
                   results=(("float64", (2, 3)),))
    out.append(Case("callback", b.build([b.add(y, b.const(1.0, "f64", (2, 3)))]),
                    [rng.standard_normal((3, 2))], ("callback",)))
    fns = [irgen.w2_loss(1000), irgen.mlp_loss(8, (6, 5, 4, 10))]
    fns += [_logsumexp(s, a, dt) for s, a, dt in [((300, 37), 1, "f32"), ((300, 37), 0, "f64"),
                                                  ((5, 3000), 1, "f64"), ((3000, 5), 0, "f32")]]
    for fn0 in fns:
        g = optimize(vjp(fn0, [i for i, v in enumerate(fn0.inputs) if v.dtype.kind == "f"]))
        out.append(Case(f"fused_{fn0.name}", g, irgen.example_inputs(g, rng), ("fused",)))
    return out


def _logsumexp(shape: tuple[int, int], axis: int, dt: str) -> Function:
    """``sum(logsumexp(X + b, axis))``: its gradient fuses reductions with elementwise
    outputs, over rows or columns, with few or many kept indices."""
    b = Builder(f"lse{axis}_{shape[0]}x{shape[1]}_{dt}")
    x = b.input(TensorType(dt, shape), "X")
    bias = b.input(TensorType(dt, (shape[1 - axis],)), "b")
    bb = b.broadcast(bias if axis == 0 else b.reshape(bias, shape=(shape[0], 1)), shape=shape)
    z = b.add(x, bb)
    kept = (shape[0], 1) if axis == 1 else (1, shape[1])
    m = b.max(z, axes=(axis,))
    e = b.exp(b.sub(z, b.broadcast(b.reshape(m, shape=kept), shape=shape)))
    lse = b.add(b.log(b.sum(e, axes=(axis,))), m)
    return b.build([b.sum(lse, axes=(0,))])


def _iota_cases(rng: np.random.Generator) -> list[Case]:
    out = []
    for dt in FLOATS:
        fn = iota_program(dt)
        out += [Case(f"iota_{dt}", fn, inputs(rng, fn), ("iota",)),
                Case(f"iota_fused_{dt}", optimize(fn), inputs(rng, fn), ("iota", "fused"))]
    return out


def _loop_cases(rng: np.random.Generator) -> list[Case]:
    return [Case(label, fn, inputs(rng, fn, special=False), ("loop",))
            for label, fn in loop_programs()]


def op_programs(seed: int = 0) -> list[Case]:
    """Programs covering every op of the op table, with inputs."""
    rng = np.random.default_rng(seed)
    return (_elementwise_cases(rng) + _reduction_cases(rng) + _shape_cases(rng)
            + _index_cases(rng) + _matmul_cases(rng) + _lapack_cases(rng) + _misc_cases(rng)
            + _iota_cases(rng) + _loop_cases(rng))


# -- comparison ------------------------------------------------------------------------------------
def run_case(exe: Callable[..., list], case: Case, to_host: Callable = np.asarray) -> str | None:
    want = run(case.fn, *case.args)
    got = [to_host(x) for x in exe(*case.args)]
    return mismatch(case.fn, case.args, got, want)


def emulator(fns: list[Function]) -> object:
    """An ``EmuDevice`` with every kernel of ``fns`` built into one library (one g++ run)."""
    from yota.backends.cuda.emulate import EmuDevice
    from yota.backends.cuda.lower import module_source

    dev = EmuDevice()
    mods = [cuda.lower(fn, config=dev.cfg) for fn in fns]
    kernels = {n: s for m in mods for n, s in m.kernels.items()}
    dev.build(module_source(kernels.values()), list(kernels))
    return dev


def compare(fn: Function, args: list[np.ndarray], exe: Callable[..., list[Any]],
            to_host: Callable[[Any], np.ndarray] = np.asarray) -> str | None:
    """None if ``exe`` (a compiled ``fn``) agrees with the interpreter on ``args``."""
    return backend_cases.compare(fn, args, exe, to_host, "cuda")


def emulated_mismatches(progs: list[tuple[str, Function, list[np.ndarray]]]) -> list[str]:
    """Each named program compiled for the CPU emulation (one library for all) and run
    against the interpreter (``compare``): ``"name: what differs"`` for each that disagrees.
    Skips the calling test where the emulation cannot run."""
    import pytest
    from yota.backends.cuda.emulate import emulation_available

    why = emulation_available()
    if why:
        pytest.skip(why)
    dev = emulator([fn for _, fn, _ in progs])
    return [f"{name}: {msg}" for name, fn, args in progs
            if (msg := compare(fn, args, cuda.compile(fn, device=dev)))]


def nvrtc_compiles(fns: list[Function]) -> None:
    """Where NVRTC runs (no GPU needed): every kernel of ``fns`` compiles for sm_80."""
    if cuda.nvrtc_available() is not None:
        return
    from yota.backends.cuda.lower import module_source

    kernels = {n: s for fn in fns for n, s in cuda.lower(fn).kernels.items()}
    cubins = cuda.compile_archs(module_source(kernels.values()), ("sm_80",), fast_compile=True)
    assert cubins and all(len(c) > 0 for c in cubins.values())


def programs(seeds: range) -> list[tuple[int, str, Function, list[np.ndarray]]]:
    out = []
    for seed in seeds:
        fn, args = irgen.random_program(np.random.default_rng(seed))
        out += [(seed, "raw", fn, args), (seed, "optimized", optimize(fn), args)]
    return out


NVRTC_PROGRAMS = range(100)  # test_cuda_nvrtc.py compiles their kernels


# -- models: gradients against the CPU backend, the front end on device arrays ---------------
@dataclass
class Linear:
    W: Any
    b: Any


def linear_loss(m: Linear, X: Any) -> Any:
    """A tanh layer's sum of squares (the front end's tests on device arrays)."""
    return np.sum(np.tanh(m.W @ X + m.b[:, None]) ** 2)


def linear_model(rng: np.random.Generator) -> tuple[Linear, np.ndarray]:
    return Linear(rng.standard_normal((3, 4)), rng.standard_normal(3)), rng.standard_normal((4, 5))


def _grad_fn(fn: Any) -> Any:
    return optimize(vjp(fn, [i for i, v in enumerate(fn.inputs) if v.dtype.kind == "f"]))


EXAMPLE_MODELS = {
    "w2": lambda: irgen.w2_loss(3000, "f32"),
    "mlp": lambda: irgen.mlp_loss(16, (20, 12, 8, 10)),
    "rnn": lambda: irgen.rnn_loss(steps=4, hidden=16, batch=4, inp=8),
}


def model_gradients_match(device: Any, name: str, to_host: Any = np.asarray) -> str | None:
    """None if the gradient program of example model ``name`` gives the CPU backend's
    results on ``device`` (tools/gpu_check.py runs it on a GPU)."""
    from yota.backends import llvm

    g = _grad_fn(EXAMPLE_MODELS[name]())
    args = irgen.example_inputs(g, np.random.default_rng(4))
    want = llvm.compile(g)(*args)
    got = [to_host(x) for x in cuda.compile(g, device=device)(*args)]
    for i, (a, b) in enumerate(zip(got, want, strict=True)):
        tol = 1e-4 if a.dtype == np.float32 else 1e-10
        if not np.allclose(a, b, rtol=tol, atol=tol * max(1.0, float(np.abs(b).max(initial=0)))):
            return f"{name}: output {i} differs by {float(np.abs(a - b).max()):.3g}"
    return None
