"""``parse(print_function(f))`` prints identically (and computes the same) for every op of
the op table and for traced programs, raw and optimized."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import Any

import numpy as np
import pytest
from support.op_families import (
    BINARY,
    COMPARE,
    FLOAT_UNARY,
    LOGIC,
    NUMERIC_UNARY,
    PREDICATES,
    REDUCTIONS,
    kernel_body,
    two_output_callee,
)
from yota.ir import (
    OPS,
    Builder,
    Function,
    GuardFailed,
    TensorType,
    Value,
    make_op,
    parse,
    parse_module,
    print_function,
    run,
    verify,
)
from yota.ir.ops.callback import CALLBACKS

import yota

F32, F64 = np.dtype(np.float32), np.dtype(np.float64)
I32, I64, BOOL = np.dtype(np.int32), np.dtype(np.int64), np.dtype(np.bool_)


def t(dtype: np.dtype, *shape: int) -> TensorType:
    return TensorType(dtype, shape)


def inputs_for(fn: Function, seed: int = 0) -> list[np.ndarray]:
    rng = np.random.default_rng(seed)
    out = []
    for v in fn.inputs:
        if v.dtype == BOOL:
            out.append(rng.random(v.shape) < 0.5)
        elif v.dtype.kind == "i":
            out.append(rng.integers(0, 2, v.shape).astype(v.dtype))
        else:
            out.append(rng.uniform(0.1, 2.0, v.shape).astype(v.dtype))
    return out


def assert_round_trips(fn: Function) -> Function:
    """Print, parse, print again: the same text; the parsed function verifies and runs
    to the same outputs (bit for bit)."""
    text = print_function(fn)
    again = parse(text)
    assert print_function(again) == text
    verify(again)
    args = inputs_for(fn)
    ours, theirs = outcome(fn, args), outcome(again, args)
    if isinstance(ours, str):  # a guard failed on these inputs: the same way in both
        assert ours == theirs
        return again
    for a, b in zip(ours, theirs, strict=True):
        assert a.dtype == b.dtype and a.shape == b.shape
        assert a.tobytes() == b.tobytes()
    return again


def outcome(fn: Function, args: list[np.ndarray]) -> list[np.ndarray] | str:
    try:
        with np.errstate(all="ignore"):
            return run(fn, *args)
    except GuardFailed as e:
        return str(e)


# -- one function per op -----------------------------------------------------------------------
def one_op(build: Callable[[Builder], Any], *types: TensorType, loc: str | None = None,
           labels: bool = True) -> Function:
    b = Builder("f")
    vals = [b.input(ty, f"x{i}" if labels else None) for i, ty in enumerate(types)]
    with b.at(loc):
        res = build(b, *vals)
    res = list(res) if isinstance(res, (tuple, list)) else [res]
    return verify(b.build(res, [f"out{i}" for i in range(len(res))] if labels else None))


CASES: dict[str, list[Function]] = {}


def case(op: str, build: Callable[..., Any], *types: TensorType, **kw: Any) -> None:
    CASES.setdefault(op, []).append(one_op(build, *types, **kw))


def _emit(op: str, **attrs: Any) -> Callable[..., Any]:
    return lambda b, *v: b.emit(op, *v, **attrs)


for _op in FLOAT_UNARY:
    case(_op, _emit(_op), t(F32, 2, 3), loc="model.py:7")
    case(_op, _emit(_op), t(F64))
for _op in NUMERIC_UNARY:
    case(_op, _emit(_op), t(I64, 4))
    case(_op, _emit(_op), t(F32, 0, 2))
for _op in PREDICATES:
    case(_op, _emit(_op), t(F64, 3))
case("not", _emit("not"), t(BOOL, 1, 2))
for _op in ("lgamma", "digamma", "erf", "erfc", "erfcx", "erfinv", "erfcinv", "i0", "i0e", "i1",
            "i1e"):
    case(_op, _emit(_op), t(F32, 2, 3), loc="model.py:8")
    case(_op, _emit(_op), t(F64))
case("polygamma", _emit("polygamma", n=3), t(F64, 4), loc="model.py:9")
for _op in BINARY:
    case(_op, _emit(_op), t(F32, 3), t(F32, 3), loc="a.py:1")
    case(_op, _emit(_op), t(F64), t(F64), labels=False)
for _op in COMPARE:
    case(_op, _emit(_op), t(I32, 2), t(I32, 2))
for _op in LOGIC:
    case(_op, _emit(_op), t(BOOL, 2), t(BOOL, 2))
case("select", _emit("select"), t(BOOL, 2), t(F32, 2), t(F32, 2))
for _dt in (BOOL, I32, I64, F32, F64):
    case("convert", _emit("convert", dtype=_dt), t(F32, 2))

for _value in [np.array([np.nan, np.inf, -np.inf, -0.0, 0.0, 1e-300]),
               np.array([0.1, 1e-45, 3.4028235e38, -0.0], np.float32),
               np.full((2, 3), -0.0), np.full((4,), np.nan, np.float32), np.array(np.inf),
               np.full((2, 2), 0.1, np.float32), np.array([-(2**62), 2**62 + 1]),
               np.arange(6, dtype=np.int32).reshape(3, 2), np.array([True, False]),
               np.full((3,), True), np.zeros((0, 2)), np.zeros((2, 0), np.int64), np.array(7),
               np.array(-0.0, np.float32), np.array(1.0000000000000002)]:
    case("const", (lambda v: lambda b: b.emit("const", value=v))(_value))

for _dt, _shape, _axis in [(I64, (3, 4), 0), (F32, (2, 0, 5), 2), (I32, (1,), 0),
                           (F64, (2, 3), 1)]:
    case("iota", _emit("iota", shape=_shape, axis=_axis, dtype=_dt))

for _kind, _expected in [("bool", True), ("bool", False), ("int", -3), ("float", 0.5),
                         ("float", float("nan")), ("float", -0.0), ("float", float("-inf"))]:
    def _guard(b: Builder, v: Value, kind: str = _kind, expected: Any = _expected) -> Value:
        b.guard(v, expected=expected, kind=kind)
        return v
    case("guard", _guard, t(F64, 1, 1), loc="g.py:3")

case("call", lambda b, x, y: b.call(two_output_callee(), x, y), t(F64, 2, 3), t(F64, 3))


def _fused(b: Builder, x: Value, y: Value) -> tuple[Value, ...]:
    body = kernel_body()
    b.callees[body.name] = body
    return b.append(make_op("fused", [x, y], {"callee": body.name},
                            result_types=body.output_types)).results


case("fused", _fused, t(F32, 2, 3), t(F32, 3))
case("reshape", _emit("reshape", shape=(3, 1, 2)), t(F32, 2, 3))
case("reshape", _emit("reshape", shape=()), t(F32, 1, 1))
case("transpose", _emit("transpose", perm=(2, 0, 1)), t(F64, 2, 3, 4))
case("broadcast", _emit("broadcast", shape=(4, 2, 3)), t(F32, 1, 3))
case("sum_to", _emit("sum_to", shape=(1, 3)), t(F32, 4, 2, 3))
case("slice", _emit("slice", start=(1, 0), stop=(4, 3), step=(2, 1)), t(F32, 5, 3))
case("flip", _emit("flip", axes=(0, 1)), t(I64, 2, 2))
case("flip", _emit("flip", axes=()), t(F32))
case("pad", _emit("pad", low=(1, 0), high=(0, 2), interior=(1, 0)), t(F32, 2, 3))
case("concatenate", _emit("concatenate", axis=1), t(F32, 2, 1), t(F32, 2, 0), t(F32, 2, 3))
case("gather", _emit("gather", axis=1), t(F32, 2, 3, 4), t(I64, 5), t(I64, 5))
case("scatter_add", _emit("scatter_add", axis=0, shape=(3, 2)), t(F64, 4, 2), t(I32, 4))
case("scatter", _emit("scatter", axis=1), t(F32, 2, 3), t(F32, 2, 4), t(I64, 4))
case("update_slice", _emit("update_slice", start=(1, 0), stop=(4, 3), step=(2, 1)),
     t(F32, 5, 3), t(F32, 2, 3))
case("matmul", _emit("matmul"), t(F32, 2, 3, 4), t(F32, 2, 4, 5))
case("cholesky", lambda b, x: b.cholesky(b.add(b.matmul(x, b.transpose(x, perm=(1, 0))),
                                                b.const(3 * np.eye(3)))), t(F64, 3, 3),
     loc="gp.py:4")
for _lo, _tr, _unit in [(True, False, False), (False, True, True)]:
    case("triangular_solve", _emit("triangular_solve", lower=_lo, transpose=_tr,
                                   unit_diagonal=_unit), t(F32, 2, 3, 3), t(F32, 2, 3, 1))
case("lu", _emit("lu"), t(F64, 2, 4, 4))
case("pivots", _emit("pivots"), t(I64, 2, 4))
CALLBACKS["tests.f#0"] = lambda static, xs: [xs[0] * 2.0, np.int64(xs[1] > 0)]
case("callback", _emit("callback", fn="tests.f#0", static="(2, {}, [1], {'k': 'a b'})",
                       results=(("float32", (2, 3)), ("int64", ()))), t(F32, 2, 3), t(F64))
case("solve", _emit("solve"), t(F64, 3, 3), t(F64, 3, 2))
case("eigh", _emit("eigh", lower=False), t(F32, 3, 3))
case("svd", _emit("svd", full_matrices=True), t(F64, 2, 4, 3))
case("svd", _emit("svd", full_matrices=False), t(F32, 2, 3))
case("svdvals", _emit("svdvals"), t(F64, 1, 3, 5))
case("qr", _emit("qr"), t(F64, 5, 3))
for _op in REDUCTIONS:
    case(_op, _emit(_op, axes=(0, 2)), t(F32, 2, 3, 4))
    case(_op, _emit(_op, axes=()), t(F64, 3))
for _op in ("argmax", "argmin"):
    case(_op, _emit(_op, axis=1), t(F64, 2, 3))


def _step_body(name: str = "step") -> Function:
    """(h, x, w) -> (tanh(h * w + x), sum(h)): one carried value, one step slice, one
    invariant, one step output."""
    b = Builder(name)
    h, x, w = b.input(t(F64, 3), "h"), b.input(t(F64, 3), "x[i]"), b.input(t(F64, 3), "w")
    with b.at("rnn.py:4"):
        nh = b.tanh(b.add(b.mul(h, w), x))
    return b.build([nh, b.sum(h, axes=(0,))])


def _loop(length: int, reverse: bool) -> Callable[..., Any]:
    def build(b: Builder, h0: Value, xs: Value, w: Value) -> tuple[Value, ...]:
        from yota.ir.loops import loop_op

        body = _step_body()
        b.callees[body.name] = body
        return b.append(loop_op(body, [h0, xs, w], length=length, carries=1, stacked=1,
                                reverse=reverse)).results
    return build


case("loop", _loop(4, False), t(F64, 3), t(F64, 4, 3), t(F64, 3), loc="rnn.py:3")
case("loop", _loop(4, True), t(F64, 3), t(F64, 4, 3), t(F64, 3))
case("loop", _loop(0, False), t(F64, 3), t(F64, 0, 3), t(F64, 3))


def _nested_guarded(b: Builder, x: Value) -> Value:
    """A loop whose body runs a loop, with a guard in the inner body."""
    from yota.ir.loops import loop_op

    ib = Builder("inner")
    c = ib.input(t(F64, 2))
    ib.guard(ib.sum(c, axes=(0,)), expected=True, kind="bool")
    inner = ib.build([ib.sin(c)])
    ob = Builder("outer")
    c = ob.input(t(F64, 2))
    ob.callees["inner"] = inner
    (r,) = ob.append(loop_op(inner, [c], length=3, carries=1, stacked=0)).results
    outer = ob.build([ob.exp(r)])
    b.callees["outer"] = outer
    return b.append(loop_op(outer, [x], length=2, carries=1, stacked=0)).results[0]


case("loop", _nested_guarded, t(F64, 2))


@pytest.mark.parametrize("op", sorted(CASES))
def test_every_op_round_trips(op: str) -> None:
    for fn in CASES[op]:
        assert_round_trips(fn)


def test_every_op_has_a_round_trip_case() -> None:
    assert not set(OPS) - set(CASES), f"ops without a round-trip case: {set(OPS) - set(CASES)}"


def test_special_constants_keep_their_bits() -> None:
    fn = CASES["const"][0]
    parsed = parse(print_function(fn))
    value = parsed.ops[0].attrs["value"]
    np.testing.assert_array_equal(np.signbit(value), [False, False, True, True, False, False])
    assert np.isnan(value[0]) and value[5] == 1e-300


def test_labels_locations_and_attributes_round_trip() -> None:
    b = Builder("f.odd-name")
    x = b.input(t(F32, 2), 'm.layers[0]["W \\"quoted\\""]')
    with b.at("/some dir/model.py:12"):
        y = b.exp(x)
    fn = b.build([y, x], ["grad m.W", None],
                 attrs={"primitive": "mod.fn", "argnames": ("x",), "kwargs": (("k", 2),)})
    again = assert_round_trips(fn)
    assert again.input_labels == fn.input_labels and again.output_labels == fn.output_labels
    assert again.ops[0].loc == "/some dir/model.py:12"


def test_module_with_callees_parses_in_order() -> None:
    fn = CASES["call"][0]
    funcs = parse_module(print_function(fn))
    assert [f.name for f in funcs] == ["two", "f"]


# -- traced programs --------------------------------------------------------------------------
@dataclasses.dataclass
class Linear:
    W: np.ndarray
    b: np.ndarray


def model(m: Any, X: np.ndarray) -> Any:
    return np.sum(m.W @ X + m.b[:, None])


def mlp(layers: list[Linear], x: np.ndarray, labels: np.ndarray) -> Any:
    for layer in layers[:-1]:
        x = np.maximum(layer.W @ x + layer.b[:, None], 0.0)
    logits = layers[-1].W @ x + layers[-1].b[:, None]
    logp = logits - np.log(np.sum(np.exp(logits), axis=0, keepdims=True))
    return -np.mean(logp[labels, np.arange(x.shape[1])])


def loop(W: np.ndarray, xs: np.ndarray) -> Any:
    h = np.zeros(W.shape[0])
    for x in xs:
        h = np.tanh(W @ h + x)
    return h


def guards(x: np.ndarray, a: float) -> Any:
    if np.sum(x) > a:
        x = x[::-1] * a
    return x.mean() if int(np.argmax(x)) == 0 else x.max()


@yota.primitive
def softplus(x: Any) -> Any:
    return np.log1p(np.exp(x))


def with_primitive(x: np.ndarray) -> Any:
    return np.sum(softplus(x) * softplus(2.0 * x))


def _layers(rng: np.random.Generator) -> list[Linear]:
    return [Linear(rng.standard_normal((4, 3)), rng.standard_normal(4)),
            Linear(rng.standard_normal((3, 4)), rng.standard_normal(3))]


_rng = np.random.default_rng(0)
PROGRAMS: dict[str, tuple[Callable[..., Any], tuple[Any, ...]]] = {
    "struct_model": (model, (Linear(np.ones((3, 4)), np.ones(3)), np.ones((4, 5)))),
    "mlp": (mlp, (_layers(_rng), _rng.standard_normal((3, 6)).astype(np.float64),
                  np.array([0, 1, 2, 2, 1, 0]))),
    "loop": (loop, (np.eye(3) * 0.5, np.ones((4, 3)))),
    "guards": (guards, (np.arange(3.0), 1.0)),
    "primitive": (with_primitive, (np.linspace(-1, 1, 5),)),
}


@pytest.mark.parametrize("name", sorted(PROGRAMS))
def test_traced_programs_round_trip(name: str) -> None:
    f, args = PROGRAMS[name]
    _, tape = yota.trace(f, *args)
    assert_round_trips(yota.to_ir(tape))


@pytest.mark.parametrize("name", sorted(PROGRAMS))
def test_optimized_programs_round_trip(name: str) -> None:
    f, args = PROGRAMS[name]
    assert_round_trips(yota.compile(f, *args, backend="interp").ir)
