"""The MLIR backend op by op: every op of the op table in programs over float32 and
float64 (and the integer and bool dtypes it takes), shapes with 0-d, empty and size-1
axes, special values (0, -0.0, +-inf, NaN, denormals) among the inputs.

- the export of every program parses and verifies in ``mlir-opt-22`` (one run for all);
- the programs, compiled by ``backend="mlir"`` (batched into a few compilations), match
  the reference interpreter within ``precision.py``'s per-op tolerance;
- guards and out-of-range indices raise what the interpreter raises;
- the LAPACK-level ops (library calls) verify, match the interpreter (batched, on views)
  and raise its ``LinAlgError`` at the user's line;
- ops the MLIR renderer has no emitter for: the op-table test lists them (a skip with the
  names, so an op added by another family shows up rather than failing), and exporting
  one raises ``UnsupportedError`` naming it. Ops *with* an emitter must all appear in
  the programs here (a failure otherwise).

Without the MLIR tools (``apt-get install mlir-22-tools``) the tests that run them skip
with that reason.
"""

from __future__ import annotations

import numpy as np
import pytest
from support import (
    irgen,  # noqa: E402
    linalg_cases,  # noqa: E402
)
from support.backend_cases import (  # noqa: E402
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
    sample,
    special_inputs,
    special_programs,
    unary_program,
)
from support.mlir_cases import check_batch, compare, merge, needs_mlir, verify_exports  # noqa: E402
from yota.backends import mlir
from yota.backends.mlir.emit import EMITTERS
from yota.ir import OPS, Builder, Function, TensorType, run
from yota.ir.autodiff import vjp
from yota.ir.core import Op
from yota.ir.errors import LinAlgError, UnsupportedError
from yota.ir.passes import optimize

Program = tuple[str, Function, list[np.ndarray]]


# -- the programs ------------------------------------------------------------------------------
def _elementwise(rng: np.random.Generator) -> list[Program]:
    out: list[Program] = []
    for dt in FLOATS:
        for op in FLOAT_UNARY + TRANSCENDENTAL:
            fn = unary_program(op, dt)
            out.append((f"{op} {dt}", fn, inputs(rng, fn)))
        for op in FLOAT_BINARY + ["pow", "arctan2"]:
            fn = binary_program(op, dt)
            out.append((f"{op} {dt}", fn, inputs(rng, fn)))
    for dt in ["i32", "i64"]:
        for op in INT_UNARY:
            fn = unary_program(op, dt)
            out.append((f"{op} {dt}", fn, inputs(rng, fn)))
        for op in INT_BINARY:
            fn = binary_program(op, dt)
            args = inputs(rng, fn)
            if op == "pow":  # negative integer powers are an error in NumPy
                args = [(np.abs(a) % 7 if i % 2 else a).astype(a.dtype) for i, a in enumerate(args)]
            out.append((f"{op} {dt}", fn, args))
    for dt in FLOATS:
        for op, fn in special_programs(dt):
            out.append((f"{op} {dt} {fn.ops[0].attrs}", fn, special_inputs(rng, op, fn)))
    fn = unary_program("not", "bool")
    out.append(("not", fn, inputs(rng, fn)))
    for op in BOOL_BINARY:
        fn = binary_program(op, "bool")
        out.append((f"{op} bool", fn, inputs(rng, fn)))
    b = Builder("zeros")
    x, y = b.input(TensorType("f64", (4,))), b.input(TensorType("f64", (4,)))
    out.append(("zero signs", b.build([b.maximum(x, y), b.minimum(x, y), b.maximum(y, x),
                                       b.minimum(y, x)]),
                [np.array([0.0, -0.0, np.nan, 1.0]), np.array([-0.0, 0.0, 1.0, np.nan])]))
    return out + _select_convert(rng)


def _select_convert(rng: np.random.Generator) -> list[Program]:
    out: list[Program] = []
    for dt in ["f32", "f64", "i32", "i64", "bool"]:
        b = Builder(f"sel_{dt}")
        outs = []
        for s in SHAPES:
            c, x, y = (b.input(TensorType("bool", s)), b.input(TensorType(dt, s)),
                       b.input(TensorType(dt, s)))
            outs.append(b.select(c, x, y))
        fn = b.build(outs)
        out.append((f"select {dt}", fn, inputs(rng, fn)))
        b = Builder(f"conv_{dt}")
        x = b.input(TensorType(dt, (37,)))
        fn = b.build([b.convert(x, dtype=d) for d in ["f32", "f64", "i32", "i64", "bool"]
                      if d != dt])
        x0 = sample(rng, (37,), dt, special=False)
        if x0.dtype.kind == "f":
            x0[:4] = [0.0, -0.0, 1e-40, -2.5]
        out.append((f"convert {dt}", fn, [x0]))
    return out


RED_CASES = [((37,), (0,)), ((3, 5), (0,)), ((3, 5), (1,)), ((3, 5), (0, 1)), ((2, 1, 9), (2,)),
             ((2, 1, 9), (0, 2)), ((4, 0), (0,)), ((4, 0), (1,)), ((), ()), ((300, 3), (0,)),
             ((3, 300), (1,))]


def _reductions(rng: np.random.Generator) -> list[Program]:
    out: list[Program] = []
    for op in ["sum", "prod", "max", "min"]:
        for dt in ["f32", "f64", "i32", "i64", "bool"]:
            cases = [(s, a) for s, a in RED_CASES
                     if not (op in ("max", "min") and any(s[i] == 0 for i in a))]
            b = Builder(f"{op}_{dt}")
            fn = b.build([b.emit(op, b.input(TensorType(dt, s)), axes=a) for s, a in cases])
            args = [sample(rng, s, dt, special=op in ("max", "min")) for s, _ in cases]
            if op == "prod" and dt[0] == "f":
                args = [np.clip(np.abs(a), 0.9, 1.1).astype(a.dtype) for a in args]
            out.append((f"{op} {dt}", fn, args))
    for op in ["argmax", "argmin"]:
        for dt in ["f32", "f64", "i32", "bool"]:
            cases = [((37,), 0), ((3, 5), 0), ((3, 5), 1), ((2, 1, 9), 2), ((1,), 0)]
            b = Builder(f"{op}_{dt}")
            fn = b.build([b.emit(op, b.input(TensorType(dt, s)), axis=a) for s, a in cases])
            args = [sample(rng, s, dt) for s, _ in cases]
            if dt[0] == "f":
                args[0][[3, 9]] = np.nan  # the first NaN wins
            out.append((f"{op} {dt}", fn, args))
    b = Builder("negzero")
    x = b.input(TensorType("f64", (3, 4)))
    out.append(("sum of -0.0", b.build([b.sum(x, axes=(0,)), b.sum(x, axes=(0, 1))]),
                [np.full((3, 4), -0.0)]))
    return out


def _shapes(rng: np.random.Generator) -> list[Program]:
    out: list[Program] = []
    for dt in ["f32", "f64", "i32", "bool"]:
        b = Builder(f"shape_{dt}")
        x = b.input(TensorType(dt, (3, 4, 5)))
        y = b.input(TensorType(dt, (4, 1)))
        z = b.input(TensorType(dt, ()))
        outs = [
            b.reshape(x, shape=(12, 5)), b.reshape(x, shape=(60,)), b.reshape(z, shape=(1, 1)),
            b.reshape(b.reshape(z, shape=(1,)), shape=()), b.transpose(x, perm=(2, 0, 1)),
            b.broadcast(y, shape=(3, 4, 5)), b.broadcast(z, shape=(2, 3)),
            b.broadcast(b.reshape(y, shape=(1, 4, 1)), shape=(2, 4, 3)),
            b.slice(x, start=(1, 0, 1), stop=(3, 4, 5), step=(1, 2, 3)),
            b.slice(x, start=(3, 0, 0), stop=(3, 4, 5), step=(1, 1, 1)),
            b.flip(x, axes=(0, 2)), b.pad(y, low=(1, 2), high=(0, 1), interior=(1, 0)),
            b.pad(z, low=(), high=(), interior=()), b.concatenate(x, x, axis=1),
            b.reshape(b.transpose(x, perm=(1, 0, 2)), shape=(4, 15)),
        ]
        if dt[0] in "fi":
            outs += [b.sum_to(x, shape=(4, 1)), b.sum_to(x, shape=(1, 1, 5)),
                     b.sum_to(x, shape=(3, 4, 5)), b.sum_to(x, shape=())]
        fn = b.build(outs)
        out.append((f"shape ops {dt}", fn, [sample(rng, v.shape, dt) for v in fn.inputs]))
    b = Builder("empty")
    x = b.input(TensorType("f32", (0, 3)))
    y = b.input(TensorType("f32", (3, 0)))
    fn = b.build([b.exp(x), b.sum(x, axes=(0,)), b.matmul(y, x), b.transpose(x, perm=(1, 0)),
                  b.concatenate(x, x, axis=0), b.matmul(x, y), b.reshape(y, shape=(0, 3, 1)),
                  b.const(np.zeros((0, 2), np.float32)), b.slice(y, start=(1, 0), stop=(1, 0),
                                                              step=(1, 1))])
    out.append(("empty shapes", fn, [np.zeros((0, 3), np.float32), np.zeros((3, 0), np.float32)]))
    return out


def _indexing(rng: np.random.Generator) -> list[Program]:
    out: list[Program] = []
    for dt in ["f32", "i64", "bool"]:
        b = Builder(f"idx_{dt}")
        x = b.input(TensorType(dt, (5, 4, 3)))
        i = b.input(TensorType("i64", (2, 3)))
        j = b.input(TensorType("i32", (2, 3)))
        u = b.input(TensorType(dt, (5, 2, 3, 3)))
        k = b.input(TensorType("i64", ()))
        outs = [b.gather(x, i, axis=0), b.gather(x, i, j, axis=0), b.gather(x, j, axis=1),
                b.gather(x, k, axis=2), b.scatter_add(u, i, j, axis=1, shape=(5, 5, 4, 3))]
        fn = b.build(outs)
        iv = np.array([[0, -1, 4], [2, 2, -5]])  # negative, repeated
        jv = np.array([[1, 3, -1], [0, 0, 2]], np.int32)
        out.append((f"gather/scatter_add {dt}", fn,
                    [sample(rng, (5, 4, 3), dt, False), iv, jv,
                     sample(rng, (5, 2, 3, 3), dt, False), np.array(-2)]))
    return out


def _writes(rng: np.random.Generator) -> list[Program]:
    """The functional forms of in-place writes: pure data movement, compared exactly."""
    out: list[Program] = []
    for dt in ["f64", "i32", "bool"]:
        b = Builder(f"writes_{dt}")
        x = b.input(TensorType(dt, (5, 4, 3)))
        i = b.input(TensorType("i64", (2, 3)))
        w = b.input(TensorType(dt, (2, 3, 4, 3)))
        k = b.input(TensorType(dt, ()))
        outs = [b.scatter(x, w, i, axis=0),  # repeated indices: the last write wins
                b.update_slice(x, b.slice(x, start=(0, 0, 0), stop=(2, 4, 3), step=(1, 2, 1)),
                               start=(3, 1, 0), stop=(5, 4, 3), step=(1, 2, 1)),
                b.update_slice(k, k, start=(), stop=(), step=())]
        fn = b.build(outs)
        out.append((f"writes {dt}", fn, [sample(rng, (5, 4, 3), dt), np.array([[0, -1, 4], [2, 2, -5]]),
                                         sample(rng, (2, 3, 4, 3), dt), sample(rng, (), dt)]))
    return out


def _products(rng: np.random.Generator) -> list[Program]:
    out: list[Program] = []
    for dt in ["f32", "f64", "i32", "i64"]:
        b = Builder(f"mm_{dt}")
        a = b.input(TensorType(dt, (7, 5)))
        c = b.input(TensorType(dt, (5, 3)))
        p = b.input(TensorType(dt, (2, 4, 5)))
        q = b.input(TensorType(dt, (2, 5, 6)))
        r = b.input(TensorType(dt, (2, 2, 3, 4)))
        s = b.input(TensorType(dt, (2, 2, 4, 2)))
        outs = [b.matmul(a, c), b.matmul(p, q), b.matmul(r, s),
                b.matmul(b.transpose(c, perm=(1, 0)), b.transpose(a, perm=(1, 0))),
                b.matmul(b.slice(a, start=(1, 0), stop=(7, 5), step=(2, 1)), c),
                b.matmul(b.flip(a, axes=(1,)), c)]
        fn = b.build(outs)
        out.append((f"matmul {dt}", fn, [sample(rng, v.shape, dt, special=False)
                                         for v in fn.inputs]))
    return out


def _misc(rng: np.random.Generator) -> list[Program]:
    b = Builder("consts")
    x = b.input(TensorType("f64", (2, 3)))
    k = b.const(np.arange(6.0).reshape(2, 3))
    outs = [b.add(x, k), k, b.const(7.0, "f64", (2, 3)), b.const(np.arange(4), np.int32),
            b.const(np.array([True, False])), b.const(np.array([np.nan, -0.0, 1e-310, np.inf])),
            b.const(np.float32(0.1), "f32"), b.matmul(b.const(1.0, "f64", (4, 2)), x)]
    progs: list[Program] = [("constants", b.build(outs), [np.ones((2, 3))])]
    for fn in (irgen.w2_loss(1000), irgen.mlp_loss(8, (6, 5, 4, 10)), irgen.rnn_loss(3, 6, 4, 5)):
        g = optimize(vjp(fn, [i for i, v in enumerate(fn.inputs) if v.dtype.kind == "f"]))
        assert any(op.name == "fused" for op in g.ops)
        progs.append((f"fused {fn.name}", g, irgen.example_inputs(g, rng)))
    progs.append(("call and guard", _call_guard(), [_CALL_GOOD]))
    from yota.ir.ops.callback import CALLBACKS

    CALLBACKS["tests.mlir_twice#0"] = lambda static, xs: [xs[0] * 2.0, xs[0].sum()]
    b = Builder("cb")
    x = b.input(TensorType("f64", (3, 2)))
    y = b.callback(b.transpose(x, perm=(1, 0)), fn="tests.mlir_twice#0", static="",
                   results=(("float64", (2, 3)), ("float64", ())))
    progs.append(("callback", b.build([b.exp(y[0]), y[1]]), [rng.standard_normal((3, 2))]))
    for dt in FLOATS:  # iota alone, and fused into eye, tri, arange and trace kernels
        fn = iota_program(dt)
        progs += [(f"iota {dt}", fn, inputs(rng, fn)), (f"iota fused {dt}", optimize(fn),
                                                         inputs(rng, fn))]
    return progs


_CALL_GOOD = np.array([[0.5, 1.0], [1.0, 1.0], [2.9, 1.0]])


def _call_guard() -> Function:
    sb = Builder("inner")
    u = sb.input(TensorType("f64", (3,)))
    sb.guard(sb.sum(u, axes=(0,)), expected=True, kind="bool")
    inner = sb.build([sb.exp(u), sb.sum(u, axes=(0,))])
    b = Builder("outer")
    x = b.input(TensorType("f64", (3, 2)))
    column = b.slice(b.transpose(x, perm=(1, 0)), start=(0, 0), stop=(1, 3), step=(1, 1))
    r = b.call(inner, b.reshape(column, shape=(3,)))
    b.guard(b.max(x, axes=(0, 1)), expected=2, kind="int")
    return b.build([r[0], r[1]])


# -- LAPACK-level ops: library calls (tolerances as test_linalg_native.py's) ------------------
LapackCase = tuple[str, int, Function, list[np.ndarray], list[np.ndarray]]  # case, n, fn, args, xs
CONFIGS = [((), 5, "plain"), ((3,), 4, "transposed"), ((2, 2), 3, "strided"),
           ((3,), 6, "broadcast")]


def _lapack_cases(rng: np.random.Generator, dt: np.dtype) -> list[LapackCase]:
    """Every LAPACK-level op (both triangles, both SVD shapes, every triangular-solve
    flag...) on operands that are views in the program (transposed, strided, a broadcast
    batch), batched and not, an empty batch and an SVD of an empty matrix."""
    out: list[LapackCase] = []
    for i, case in enumerate(sorted(linalg_cases.SAME_ROUTINE)):
        make, inputs = linalg_cases.SAME_ROUTINE[case]
        for batch, n, layout in (CONFIGS[i % 4], CONFIGS[(i + 1) % 4]):
            xs = inputs(rng, batch, n, dt)
            out.append((case, n, *linalg_cases.program(make, xs, layout), xs))
    for flags in range(8):
        def tri(b: Builder, a: object, c: object, f: int = flags) -> object:
            return b.triangular_solve(a, c, lower=bool(f & 1), transpose=bool(f & 2),
                                      unit_diagonal=bool(f & 4))
        batch, n, layout = CONFIGS[flags % 4]
        xs = [linalg_cases.dominant(rng, batch + (n, n), dt),
              rng.standard_normal(batch + (n, 2)).astype(dt)]
        out.append(("triangular_solve", n, *linalg_cases.program(tri, xs, layout), xs))
    for batch, n, layout in CONFIGS[:3]:
        xs = [rng.standard_normal(batch + (n, n)).astype(dt)]
        out.append(("lu", n, *linalg_cases.program(
            lambda b, a: (*b.lu(a), b.pivots(b.lu(a)[1])), xs, layout), xs))
    xs = [np.zeros((0, 3, 3), dt)]
    out.append(("empty", 3, *linalg_cases.program(lambda b, a: b.cholesky(a), xs), xs))
    xs = [np.zeros((2, 3, 0), dt)]
    out.append(("empty", 3, *linalg_cases.program(
        lambda b, a: b.svd(a, full_matrices=True), xs), xs))
    return out


def _lapack(rng: np.random.Generator) -> list[Program]:
    return [(f"{case} n={n} {dt}", fn, args) for dt in (linalg_cases.F32, linalg_cases.F64)
            for case, n, fn, args, _ in _lapack_cases(rng, dt)]


def _loops(rng: np.random.Generator) -> list[Program]:
    return [(label, fn, inputs(rng, fn, special=False)) for label, fn in loop_programs()]


def all_programs() -> list[Program]:
    rng = np.random.default_rng(0)
    return (_elementwise(rng) + _reductions(rng) + _shapes(rng) + _indexing(rng)
            + _writes(rng) + _products(rng) + _misc(rng) + _lapack(rng) + _loops(rng))


def _ops(fn: Function) -> set[str]:
    names = {op.name for op in fn.ops}
    for c in fn.all_callees().values():
        names |= {op.name for op in c.ops}
    return names


# -- the tests ------------------------------------------------------------------------------------
def test_every_exported_op_has_a_program() -> None:
    covered: set[str] = set()
    for _, fn, _ in all_programs():
        covered |= _ops(fn)
    assert set(EMITTERS) - covered == set()


def test_ops_without_an_emitter_are_named() -> None:
    """Ops of the table the renderer cannot express (e.g. ops added since) raise
    ``UnsupportedError`` naming the op; the list is reported, not failed on."""
    missing = sorted(set(OPS) - set(EMITTERS))
    for name in missing:
        b = Builder("f")
        x = b.input(TensorType("f64", (2,)))
        y = b.neg(x)
        fn = b.build([y])
        fn.ops.append(Op(name, [x], {}, [], "model.py:3"))
        with pytest.raises(UnsupportedError, match=f"cannot express op '{name}'.*model.py:3"):
            mlir.export(fn)
    if missing:
        pytest.skip(f"ops the MLIR backend does not express yet: {', '.join(missing)}")


@needs_mlir
def test_exports_verify() -> None:
    """Every program's export parses and verifies (one mlir-opt run)."""
    errors = verify_exports([fn for _, fn, _ in all_programs()])
    assert not errors, f"{len(errors)} exports do not verify; first:\n{errors[0]}"


@needs_mlir
@pytest.mark.parametrize("group", ["_elementwise", "_reductions", "_shapes", "_indexing",
                                   "_products", "_misc"])
def test_programs_match_the_interpreter(group: str) -> None:
    progs = globals()[group](np.random.default_rng(1))
    bad = check_batch(progs)
    assert not bad, f"{len(bad)} mismatches; first:\n{bad[0]}"


@needs_mlir
def test_writes_are_exact() -> None:
    for label, fn, args in _writes(np.random.default_rng(2)):
        got, want = mlir.compile(fn)(*args), run(fn, *args)
        for g, w in zip(got, want, strict=True):
            assert g.dtype == w.dtype and np.array_equal(g, w, equal_nan=g.dtype.kind == "f"), label


@needs_mlir
def test_guard_failures_raise_as_the_interpreter() -> None:
    fn = _call_guard()
    exe = mlir.compile(fn)
    assert compare(fn, [_CALL_GOOD], exe) is None
    assert compare(fn, [np.ascontiguousarray(_CALL_GOOD.T).T], exe) is None
    for bad in (np.zeros((3, 2)), _CALL_GOOD + 5):
        with pytest.raises(Exception) as got:
            exe(bad)
        with pytest.raises(Exception) as want:
            run(fn, bad)
        assert type(got.value) is type(want.value) and str(got.value) == str(want.value)
        assert got.value.guard_index == want.value.guard_index  # type: ignore[attr-defined]


@needs_mlir
@pytest.mark.parametrize("kind,expected,dt,good,bad", [
    ("bool", False, "f32", 0.0, np.nan), ("int", 3, "f64", 3.7, 4.0), ("int", -2, "i32", -2, 2),
    ("float", 0.5, "f32", 0.5, 0.25), ("float", float("nan"), "f64", np.nan, 1.0),
    ("bool", True, "bool", True, False), ("int", 1, "bool", True, False)])
def test_guard_kinds(kind: str, expected: object, dt: str, good: object, bad: object) -> None:
    b = Builder("g")
    x = b.input(TensorType(dt, (1,)))
    b.guard(x, expected=expected, kind=kind)
    fn = b.build([b.reshape(x, shape=())])
    exe = mlir.compile(fn)
    for v in (good, bad):
        assert compare(fn, [np.array([v], dtype=fn.inputs[0].dtype)], exe) is None


@needs_mlir
def test_index_out_of_range_raises() -> None:
    b = Builder("oob")
    x = b.input(TensorType("f32", (5,)))
    i = b.input(TensorType("i64", (3,)))
    u = b.input(TensorType("f32", (3,)))
    fn = b.build([b.gather(x, i, axis=0), b.scatter_add(u, i, axis=0, shape=(5,))])
    exe = mlir.compile(fn)
    x0, u0 = np.arange(5, dtype=np.float32), np.ones(3, np.float32)
    with pytest.raises(IndexError, match="index 5 is out of bounds for axis 0 with size 5"):
        exe(x0, np.array([0, 5, 1]), u0)
    with pytest.raises(IndexError, match="index -6"):
        exe(x0, np.array([-6, 0, 7]), u0)
    got = exe(x0, np.array([-1, 0, 4]), u0)
    assert got[0].tolist() == [4, 0, 4] and got[1].tolist() == [1, 0, 0, 0, 2]


@needs_mlir
def test_signature_and_out_arrays() -> None:
    from yota.ir.errors import SignatureError

    b = Builder("s")
    x = b.input(TensorType("f32", (3,)), "x")
    exe = mlir.compile(b.build([b.neg(x)]))
    with pytest.raises(SignatureError, match="should have shape"):
        exe(np.zeros(4, np.float32))
    out = np.empty(3, np.float32)
    assert exe(np.ones(3, np.float32), out=[out])[0] is out and out.tolist() == [-1, -1, -1]
    assert exe(np.arange(6.0)[::2]) [0].tolist() == [-0.0, -2.0, -4.0]


@needs_mlir
@pytest.mark.parametrize("dt", [np.float32, np.float64], ids=["f32", "f64"])
def test_lapack_ops_match_the_interpreter(dt: type) -> None:
    """All the LAPACK-level programs of a dtype merged into one compilation; each result
    within test_linalg_native.py's tolerance of the interpreter's (the same routines on
    the same column-major float64 copies: ``ULPS * n * sensitivity``; the
    triangular solve and LU against the interpreter's own algorithms: ``50 n``, and
    ``x 10`` for LU's pivot growth; permutations exactly)."""
    cases = _lapack_cases(np.random.default_rng(5), np.dtype(dt))
    got = iter(mlir.compile(merge([fn for _, _, fn, _, _ in cases]))(
        *[a for _, _, _, args, _ in cases for a in args]))
    for case, n, fn, args, xs in cases:
        for w in run(fn, *args):
            g = next(got)
            assert g.shape == w.shape and g.dtype == w.dtype, case
            if case == "lu" and w.dtype.kind == "i":
                np.testing.assert_array_equal(g, w)
            elif case in ("lu", "triangular_solve"):
                linalg_cases.close(g, w, 50 * n * (10 if case == "lu" else 1))
            elif case == "empty":  # SVD without singular values: identities, exactly
                np.testing.assert_array_equal(g, w)
            else:
                linalg_cases.close(g, w, linalg_cases.ULPS * n
                                    * linalg_cases.sensitivity(case, xs[0]))
    assert next(got, None) is None


def test_lapack_ops_export_as_library_calls() -> None:
    """A call of a declared ``@yota_linalg_<op>_<dtype><attributes>`` on unranked
    tensors, at the op's location; one declaration per name."""
    b = Builder("f")
    a = b.input(TensorType("f32", (2, 3, 3)))
    c = b.input(TensorType("f32", (3, 3)))
    with b.at("model.py:4"):
        x = b.triangular_solve(a, a, lower=True, transpose=False, unit_diagonal=True)
        y = b.triangular_solve(c, c, lower=True, transpose=False, unit_diagonal=True)
        w, v = b.eigh(c, lower=False)
    text = mlir.export(b.build([x, y, w, v]))
    name = "yota_linalg_triangular_solve_f32_lower1_transpose0_unit_diagonal1"
    assert text.count(f"func.func private @{name}(tensor<*xf32>, tensor<*xf32>) -> "
                      "(tensor<*xf32>)") == 1
    assert text.count(f"func.call @{name}(") == 2
    assert "func.call @yota_linalg_eigh_f32_lower0(" in text
    assert all('loc("model.py":4:0)' in line for line in text.splitlines() if "call" in line)


@needs_mlir
@pytest.mark.parametrize("case", ["cholesky", "solve", "svdvals"])
def test_lapack_failures_raise_as_the_interpreter(case: str) -> None:
    """``info > 0`` (not positive definite, singular; a NaN in an SVD) raises the
    interpreter's ``LinAlgError`` (message, the user's line); the executable stays
    usable."""
    make, xs, message = linalg_cases.FAILS[case]
    fn, args = linalg_cases.program(make, xs, loc="model.py:12")
    exe = mlir.compile(fn)
    with pytest.raises(LinAlgError) as got:
        exe(*args)
    with pytest.raises(LinAlgError) as want:
        run(fn, *args)
    assert str(got.value) == str(want.value)
    assert message in str(got.value) and "model.py:12" in str(got.value)
    good = [np.broadcast_to(np.eye(*x.shape[-2:]), x.shape) if i == 0 else x
            for i, x in enumerate(args)]
    for g, w in zip(exe(*good), run(fn, *good), strict=True):
        np.testing.assert_allclose(g, w, atol=1e-12)


@needs_mlir
def test_the_first_lapack_failure_is_reported() -> None:
    """Two failing ops (a singular solve, then a non-PD Cholesky): the first one's error,
    as the interpreter stops there."""
    b = Builder("f")
    a = b.input(TensorType("f64", (3, 3)))
    with b.at("model.py:5"):
        x = b.solve(a, a)
    with b.at("model.py:6"):
        y = b.cholesky(b.neg(a))
    fn = b.build([x, y])
    with pytest.raises(LinAlgError, match=r"^Singular matrix \(np.linalg 'solve' at model.py:5\)$"):
        mlir.compile(fn)(np.ones((3, 3)))
    with pytest.raises(LinAlgError, match="not positive definite.*model.py:6"):
        mlir.compile(fn)(np.eye(3))
