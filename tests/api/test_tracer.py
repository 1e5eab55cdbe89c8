"""The tracer: argument structures, closures and globals, loops, guards, primitives.

Each program is traced on example arguments; ``yota.play`` and ``yota.compile`` on new
arguments of the same signature must give what calling the function gives.
"""

from __future__ import annotations

import dataclasses
import inspect
import os
from collections.abc import Callable
from typing import Any, NamedTuple

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from support import ROOT
from yota.ir import parse, print_function

import yota
import yota.trace_context
import yota.tracer

HERE = os.path.basename(__file__)
SETTINGS = settings(max_examples=5, deadline=None, derandomize=True)


def line_of(fn: Callable[..., Any], text: str) -> int:
    """The line number of the first line of ``fn``'s source containing ``text``."""
    lines, start = inspect.getsourcelines(fn)
    return start + next(i for i, s in enumerate(lines) if text in s)


def assert_tree_equal(got: Any, want: Any) -> None:
    if isinstance(want, (list, tuple, dict)):
        assert type(got) is type(want) and len(got) == len(want)
        for k in (want if isinstance(want, dict) else range(len(want))):
            assert_tree_equal(got[k], want[k])
        return
    if type(want) in (float, int, bool):
        assert type(got) is type(want)
    g, w = np.asarray(got), np.asarray(want)
    assert g.dtype == w.dtype and g.shape == w.shape
    np.testing.assert_array_equal(g, w)


def replays(f: Callable[..., Any], ex: tuple[Any, ...], new: tuple[Any, ...]) -> yota.Tape:
    """trace(f, *ex) → play and compile on ``new`` equal f(*new); returns the tape."""
    val, tape = yota.trace(f, *ex)
    assert_tree_equal(val, f(*ex))
    want = f(*new)
    assert_tree_equal(yota.play(tape, *new), want)
    assert_tree_equal(yota.compile(f, *ex, backend="interp")(*new), want)
    print_function(parse(print_function(yota.to_ir(tape))))  # the IR round-trips
    return tape


# -- structures -------------------------------------------------------------------------------
@dataclasses.dataclass
class Linear:
    W: np.ndarray
    b: np.ndarray


@dataclasses.dataclass(frozen=True)
class FrozenLinear:
    W: np.ndarray
    b: np.ndarray
    act: str = "tanh"


class PlainLinear:
    def __init__(self, W: np.ndarray, b: np.ndarray, scale: float) -> None:
        self.W, self.b, self.scale = W, b, scale


class SlotsLinear:
    __slots__ = ("W", "b")

    def __init__(self, W: np.ndarray, b: np.ndarray) -> None:
        self.W, self.b = W, b


@dataclasses.dataclass(frozen=True, slots=True)
class SlotsDataclass:
    W: np.ndarray
    b: np.ndarray


class NTLinear(NamedTuple):
    W: np.ndarray
    b: np.ndarray


@dataclasses.dataclass
class MLP:
    layers: list[Any]
    act: str
    eps: float


def linear(m: Any, X: np.ndarray) -> Any:
    return np.sum(m.W @ X + m.b[:, None])


def mlp(m: MLP, x: np.ndarray) -> Any:
    for layer in m.layers:
        x = layer.W @ x + layer.b[:, None]
        x = np.tanh(x) if m.act == "tanh" else np.maximum(x, 0.0)
    return np.mean(x * x) + m.eps


def _rand(rng: np.random.Generator, *shape: int) -> np.ndarray:
    return rng.standard_normal(shape)


def _mlp(rng: np.random.Generator, act: str = "tanh") -> MLP:
    return MLP([Linear(_rand(rng, 4, 3), _rand(rng, 4)),
                FrozenLinear(_rand(rng, 2, 4), _rand(rng, 2)),
                NTLinear(_rand(rng, 1, 2), _rand(rng, 1))], act, float(rng.uniform()))


STRUCTS: dict[str, Callable[[np.random.Generator], Any]] = {
    "dataclass": lambda r: Linear(_rand(r, 3, 4), _rand(r, 3)),
    "frozen_dataclass": lambda r: FrozenLinear(_rand(r, 3, 4), _rand(r, 3)),
    "object": lambda r: PlainLinear(_rand(r, 3, 4), _rand(r, 3), 1.0),
    "namedtuple": lambda r: NTLinear(_rand(r, 3, 4), _rand(r, 3)),
    "slots_object": lambda r: SlotsLinear(_rand(r, 3, 4), _rand(r, 3)),
    "slots_dataclass": lambda r: SlotsDataclass(_rand(r, 3, 4), _rand(r, 3)),
}


@pytest.mark.parametrize("kind", sorted(STRUCTS))
@SETTINGS
@given(seed=st.integers(0, 2**32 - 1))
def test_attribute_structs(kind: str, seed: int) -> None:
    rng = np.random.default_rng(seed)
    make = STRUCTS[kind]
    tape = replays(linear, (make(rng), _rand(rng, 4, 5)), (make(rng), _rand(rng, 4, 5)))
    text = str(tape)
    assert "getattr(%1, 'W')::f64[3,4]" in text and "getattr(%1, 'b')::f64[3]" in text
    assert '"m.W"' in str(yota.to_ir(tape)) and '"m.b"' in str(yota.to_ir(tape))


CONTAINERS: dict[str, tuple[Callable[..., Any], Callable[[np.random.Generator], Any]]] = {
    "tuple": (lambda p, x: p[0] @ x + p[1][:, None], lambda r: (_rand(r, 3, 4), _rand(r, 3))),
    "list": (lambda p, x: p[1] * (p[0] @ x).T, lambda r: [_rand(r, 3, 4), _rand(r, 3)]),
    "dict": (lambda p, x: np.tanh(p["W"] @ x) - p["b"][:, None],
             lambda r: {"W": _rand(r, 3, 4), "b": _rand(r, 3)}),
    "nested": (lambda p, x: p["layers"][1].W @ np.tanh(p["layers"][0][0] @ x) * p["s"],
               lambda r: {"layers": [(_rand(r, 3, 4),), Linear(_rand(r, 2, 3), _rand(r, 2))],
                          "s": float(r.uniform())}),
    "float_leaf": (lambda a, x: a * x + a**2, lambda r: float(r.uniform())),
    "static_leaves": (lambda p, x: x * p["k"] if p["flag"] else x[: p["k"]],
                      lambda r: {"k": 2, "flag": True, "name": "n", "none": None}),
}


@pytest.mark.parametrize("kind", sorted(CONTAINERS))
@SETTINGS
@given(seed=st.integers(0, 2**32 - 1))
def test_container_structs(kind: str, seed: int) -> None:
    f, make = CONTAINERS[kind]
    rng = np.random.default_rng(seed)
    replays(f, (make(rng), _rand(rng, 4, 5)), (make(rng), _rand(rng, 4, 5)))


@SETTINGS
@given(seed=st.integers(0, 2**32 - 1), act=st.sampled_from(["tanh", "relu"]))
def test_nested_model(seed: int, act: str) -> None:
    rng = np.random.default_rng(seed)
    tape = replays(mlp, (_mlp(rng, act), _rand(rng, 3, 5)), (_mlp(rng, act), _rand(rng, 3, 5)))
    labels = yota.to_ir(tape).input_labels
    assert labels == ("m.layers[0].W", "m.layers[0].b", "m.layers[1].W", "m.layers[1].b",
                      "m.layers[2].W", "m.layers[2].b", "m.eps", "x")
    text = str(tape)
    assert "getattr(%1, 'layers')::list" in text and "getitem(%3, 0)::Linear" in text
    assert "getattr(%1, 'eps')::f64[]{weak}" in text


def test_structure_leaves_are_read_once_and_args_not_mutated() -> None:
    rng = np.random.default_rng(0)
    m = FrozenLinear(_rand(rng, 3, 4), _rand(rng, 3))
    val, tape = yota.trace(lambda m: m.W.sum() + m.W.max() + m.b.sum(), m)
    assert str(tape).count("getattr(%1, 'W')") == 1
    assert isinstance(m.W, np.ndarray) and isinstance(m.b, np.ndarray)  # not tracers


def test_static_fields_are_part_of_the_signature() -> None:
    rng = np.random.default_rng(1)
    m, x = _mlp(rng, "tanh"), _rand(rng, 3, 5)
    _, tape = yota.trace(mlp, m, x)
    relu = dataclasses.replace(m, act="relu")
    with pytest.raises(yota.SignatureError):
        yota.play(tape, relu, x)
    with pytest.raises(yota.SignatureError):
        yota.play(tape, m, x[:, :4])  # another shape
    with pytest.raises(yota.SignatureError):
        yota.play(tape, m, x.astype(np.float32))  # another dtype
    cf = yota.compile(mlp, m, x, backend="interp")
    assert_tree_equal(cf(relu, x), mlp(relu, x))  # a new signature retraces
    assert_tree_equal(cf(m, x), mlp(m, x))
    assert len(cf.programs) == 2


class Pair(NamedTuple):
    a: Any
    b: Any


RESULTS: dict[str, Callable[..., Any]] = {
    "argument_leaf": lambda m, x: m["W"],
    "input": lambda m, x: x,
    "leaf_and_number": lambda m, x: (m["W"], m["s"] * 2.0, 3),
    "none_inside": lambda m, x: {"a": None, "b": [x * m["s"], None]},
    "none": lambda m, x: None,
    "namedtuple": lambda m, x: Pair(np.sum(m["W"]), x.T),
    "constant_array": lambda m, x: np.arange(3.0),
}


@pytest.mark.parametrize("kind", sorted(RESULTS))
def test_results(kind: str) -> None:
    rng = np.random.default_rng(2)
    args = lambda: ({"W": _rand(rng, 2, 3), "s": float(rng.uniform())}, _rand(rng, 3, 2))
    replays(RESULTS[kind], args(), args())


def test_tracer_attributes() -> None:
    seen: dict[str, Any] = {}

    def f(x: Any) -> Any:
        seen.update(shape=x.shape, ndim=x.ndim, dtype=x.dtype, size=x.size, len=len(x))
        return x

    yota.trace(f, np.zeros((2, 3), np.float32))
    assert seen == {"shape": (2, 3), "ndim": 2, "dtype": np.float32, "size": 6, "len": 2}


def test_tape_entries_hold_example_values() -> None:
    x = np.arange(4.0)
    val, tape = yota.trace(lambda x: np.exp(x) * 2.0, x)
    calls = [e for e in tape.entries if e.kind == "call"]
    np.testing.assert_array_equal(calls[0].value, np.exp(x))
    np.testing.assert_array_equal(calls[1].value, val)
    np.testing.assert_array_equal(val, np.exp(x) * 2.0)


# -- closures and globals ----------------------------------------------------------------------
SMALL = np.arange(3.0)
BIG = np.arange(float(yota.trace_context.CONST_LIMIT + 5))


def uses_small(x: np.ndarray) -> Any:
    return x * SMALL


def uses_big(x: np.ndarray) -> Any:
    return np.sum(x * BIG)


def test_small_global_is_a_constant_and_a_change_retraces() -> None:
    global SMALL
    SMALL = np.arange(3.0)
    x = np.ones(3)
    _, tape = yota.trace(uses_small, x)
    assert "const(array([0., 1., 2.]))::f64[3]" in str(tape)
    assert len(yota.to_ir(tape).inputs) == 1  # a constant, not an input
    cf = yota.compile(uses_small, x, backend="interp")
    SMALL[0] = 10.0  # an in-place change is detected: the program is retraced
    assert_tree_equal(cf(x), uses_small(x))
    assert len(cf.programs[next(iter(cf.programs))]) == 2


def test_small_global_rebinding_retraces() -> None:
    global SMALL
    SMALL = np.arange(3.0)
    x = np.ones(3)
    cf = yota.compile(uses_small, x, backend="interp")
    _, tape = yota.trace(uses_small, x)
    SMALL = np.arange(3.0) + 5
    assert_tree_equal(cf(x), uses_small(x))
    with pytest.raises(yota.TraceError, match="stale"):
        yota.play(tape, x)


def test_big_global_is_read_at_call_time() -> None:
    global BIG
    BIG = np.arange(float(yota.trace_context.CONST_LIMIT + 5))
    x = np.ones(BIG.size)
    _, tape = yota.trace(uses_big, x)
    assert f"captured(BIG)::f64[{BIG.size}]" in str(tape)
    fn = yota.to_ir(tape)
    assert fn.input_labels == ("x", "captured BIG")
    cf = yota.compile(uses_big, x, backend="interp")
    BIG[0] = 1000.0  # read at call time: no retrace needed
    assert_tree_equal(cf(x), uses_big(x))
    assert len(cf.programs[next(iter(cf.programs))]) == 1
    assert_tree_equal(yota.play(tape, x), uses_big(x))  # play reads it too
    BIG = BIG * 2  # rebinding the global: read at call time too, nothing to retrace
    assert_tree_equal(cf(x), uses_big(x))
    assert len(cf.programs[next(iter(cf.programs))]) == 1
    assert_tree_equal(yota.play(tape, x), uses_big(x))
    BIG = np.arange(3.0)  # another shape: retraced
    assert_tree_equal(cf(np.ones(3)), uses_big(np.ones(3)))
    with pytest.raises(yota.TraceError, match="stale"):
        yota.play(tape, np.ones(BIG.size + yota.trace_context.CONST_LIMIT + 2))  # cannot retrace


def test_play_refuses_a_stale_constant() -> None:
    w = np.arange(3.0)
    _, tape = yota.trace(lambda x: x * w, np.ones(3))
    w[1] = 5.0
    with pytest.raises(yota.TraceError, match="uses_small|<lambda>.*stale"):
        yota.play(tape, np.ones(3))


def _closure(n: int) -> tuple[Callable[..., Any], np.ndarray]:
    w = np.arange(float(n))

    def f(x: np.ndarray) -> Any:
        return np.sum(x * w) + x[:3] * w[:3]

    return f, w


@pytest.mark.parametrize("n", [3, yota.trace_context.CONST_LIMIT + 1])
def test_closure_arrays_are_not_frozen(n: int) -> None:
    """A small captured array is a constant checked before each call; a large one is an
    implicit input: either way an in-place change shows in the next result."""
    f, w = _closure(n)
    x = np.ones(n)
    cf = yota.compile(f, x, backend="interp")
    assert_tree_equal(cf(x), f(x))
    w[:] = w * 3 + 1
    assert_tree_equal(cf(x), f(x))
    inputs = len(yota.to_ir(yota.trace(f, x)[1]).inputs)
    assert inputs == (1 if n <= yota.trace_context.CONST_LIMIT else 2)


# -- Python control flow -----------------------------------------------------------------------
def loop(x: np.ndarray, n: int) -> Any:
    acc = np.zeros_like(x)
    for i in range(n):
        acc = acc * 0.5 + np.sin(x * i)
    k = 0
    while k < len(x):
        acc = acc + x[k]
        k += 1
    return acc


@SETTINGS
@given(seed=st.integers(0, 2**32 - 1), n=st.integers(0, 4))
def test_python_loops(seed: int, n: int) -> None:
    rng = np.random.default_rng(seed)
    tape = replays(loop, (_rand(rng, 3), n), (_rand(rng, 3), n))
    assert str(tape).count("sin(") == n


def branchy(x: np.ndarray) -> Any:
    if np.sum(x) > 0:
        return x * 2.0
    return -x


def int_guard(x: np.ndarray) -> Any:
    k = int(np.argmax(x))
    return x[: k + 1].sum()


def float_guard(x: np.ndarray) -> Any:
    return x * float(x[0])


def index_guard(x: np.ndarray) -> Any:
    return [x[i] for i in range(np.argmax(x))]


def slice_guard(x: np.ndarray) -> Any:
    return x[: np.argmax(x)] * 2.0


def item_guard(x: np.ndarray) -> Any:
    return x * x.sum().item()


def test_guard_is_recorded_with_its_line() -> None:
    _, tape = yota.trace(branchy, np.ones(3))
    line = line_of(branchy, "if np.sum")
    assert f"guard bool(%3) == True  # {HERE}:{line}" in str(tape)
    assert f"guard %3 {{expected = true, kind = \"bool\"}}  # {HERE}:{line}" in str(yota.to_ir(tape))


@pytest.mark.parametrize("f, ex, other", [
    (branchy, np.ones(3), -np.ones(3)),
    (int_guard, np.array([0.0, 2.0, 1.0]), np.array([3.0, 2.0, 1.0])),
    (float_guard, np.array([2.0, 1.0]), np.array([3.0, 1.0])),
    (index_guard, np.array([0.0, 2.0, 1.0]), np.array([0.0, 1.0, 2.0])),
    (slice_guard, np.array([0.0, 2.0, 1.0]), np.array([0.0, 1.0, 2.0])),
    (item_guard, np.array([0.0, 2.0]), np.array([1.0, 2.0])),
], ids=["bool", "int", "float", "index", "slice", "item"])
def test_failed_guard(f: Callable[..., Any], ex: np.ndarray, other: np.ndarray) -> None:
    _, tape = yota.trace(f, ex)
    assert_tree_equal(yota.play(tape, ex * 1.0), f(ex))  # same branch: fine
    src = inspect.getsource(f).splitlines()
    guarded = next(s.strip() for s in src if any(k in s for k in ("if ", "int(", "float(",
                                                                    "range(", "[:", ".item()")))
    with pytest.raises(yota.GuardFailed) as err:
        yota.play(tape, other)
    msg = str(err.value)
    assert f"{HERE}:{line_of(f, guarded)}" in msg and guarded in msg and f.__name__ in msg
    cf = yota.compile(f, ex, backend="interp")
    assert_tree_equal(cf(other), f(other))  # retraced on the failed guard
    assert_tree_equal(cf(ex), f(ex))  # and both branches stay compiled
    assert sum(len(p) for p in cf.programs.values()) == 2
    guard_ops = [op for op in yota.to_ir(tape).ops if op.name == "guard"]
    assert len(guard_ops) == len(tape.guards) == 1  # one guard each, recorded once


def test_static_arguments_need_no_guard() -> None:
    _, tape = yota.trace(lambda x, n: x * n if n > 1 else x, np.ones(2), 3)
    assert not tape.guards


# -- primitives --------------------------------------------------------------------------------
@yota.primitive
def logistic(x: Any) -> Any:
    return 1 / (1 + np.exp(-x))


def helper(x: Any, k: int = 2) -> Any:
    return np.tanh(x) * k


def uses_primitives(x: np.ndarray) -> Any:
    return np.sum(logistic(x) * logistic(2.0 * x) + helper(x))


def test_primitive_is_one_entry_and_one_call() -> None:
    x = np.linspace(-1.0, 1.0, 4)
    tape = replays(uses_primitives, (x,), (x * 3,))
    assert "%2 = logistic(%1)::f64[4]" in str(tape)
    assert "exp(" not in str(tape)  # the body is not on the tape
    fn = yota.to_ir(tape)
    calls = [op for op in fn.ops if op.name == "call"]
    assert [op.attrs["callee"] for op in calls] == ["logistic", "logistic"]
    body = fn.callees["logistic"]
    assert body.attrs["primitive"].endswith("logistic")
    assert [op.name for op in body.ops] == ["neg", "exp", "const", "add", "const", "div"]
    assert "tanh" in [op.name for op in fn.ops]  # helper is traced through


def test_primitives_argument_records_a_plain_helper() -> None:
    x = np.linspace(-1.0, 1.0, 4)
    val, tape = yota.trace(uses_primitives, x, primitives=[helper])
    assert "= helper(%1)::f64[4]" in str(tape) and "tanh(" not in str(tape)
    fn = yota.to_ir(tape)
    assert sorted(fn.callees) == ["helper", "logistic"]
    assert [op.name for op in fn.callees["helper"].ops] == ["tanh", "const", "mul"]
    assert_tree_equal(yota.play(tape, x * 2), uses_primitives(x * 2))
    assert globals()["helper"] is helper  # the binding is restored after the trace
    _, again = yota.trace(uses_primitives, x)
    assert "tanh(" in str(again)


def test_primitive_with_static_argument() -> None:
    x = np.arange(3.0)
    _, tape = yota.trace(lambda x: helper(x, 3) + helper(x, 4), x, primitives=[helper])
    fn = yota.to_ir(tape)
    assert len(fn.callees) == 2  # the static argument is part of the callee
    assert_tree_equal(yota.play(tape, x + 1), helper(x + 1, 3) + helper(x + 1, 4))


def test_primitive_outside_a_trace_is_the_function() -> None:
    x = np.arange(3.0)
    np.testing.assert_array_equal(logistic(x), 1 / (1 + np.exp(-x)))


@yota.primitive
def branchy_primitive(x: Any) -> Any:
    if np.sum(x) > 0:
        return x * 2.0
    return -x


def test_primitive_with_a_branch_replays_the_traced_branch() -> None:
    """The callee is the body as traced on the example arguments, however often the tape
    is replayed (a replay frees the tape's example values)."""
    f = lambda x: branchy_primitive(x) + 1.0
    x = np.ones(3)
    _, tape = yota.trace(f, x)
    for _ in range(2):
        assert_tree_equal(yota.play(tape, x * 3), f(x * 3))
    with pytest.raises(yota.GuardFailed, match=f"{HERE}:{line_of(branchy_primitive, 'if')}"):
        yota.play(tape, -x)
    cf = yota.compile(f, x, backend="interp")
    for arg in (x, -x, x):
        assert_tree_equal(cf(arg), f(arg))


# -- the front end's layout ------------------------------------------------------------------
def test_tracer_declares_its_whole_surface() -> None:
    """Operators, array methods and properties are attributes of the class as declared,
    not patched in by the NumPy table; each dispatches into the table's registry."""
    from yota.numpy.registry import TABLE
    from yota.tracer import Tracer

    surface = ["__add__", "__radd__", "__matmul__", "__rmatmul__", "__truediv__", "__pow__",
               "__divmod__", "__lt__", "__eq__", "__neg__", "__abs__", "__invert__",
               "__getitem__", "__iadd__", "sum", "mean", "max", "argmax", "std", "reshape",
               "transpose", "T", "mT", "flatten", "clip", "astype", "round", "dot"]
    for name in surface:
        attr = vars(Tracer)[name]
        assert isinstance(attr, property) or attr.__module__ == "yota.tracer", name
    for name in ("add", "matmul", "sum", "getitem", "reshape", "clip", "divmod"):
        assert name in TABLE, name


def test_to_ir_lowers_a_tape_once_per_name() -> None:
    _, tape = yota.trace(lambda x: np.sum(np.tanh(x)), np.ones(3))
    fn = yota.to_ir(tape)
    assert yota.to_ir(tape) is fn
    assert yota.to_ir(tape, "other").name == "other"
    assert not hasattr(tape, "to_ir")  # a function of the lowering, not a method of the tape


FRONT_END = ("yota.tracer", "yota.traced", "yota.recording", "yota.writes",
             "yota.trace_context", "yota.tracing", "yota.tape", "yota.lowering",
             "yota.primitives", "yota.structs", "yota.program", "yota.userloc", "yota.numpy")


def test_the_front_end_has_no_import_cycles() -> None:
    """tools/import_cycles.py counts imports inside functions too."""
    import subprocess
    import sys

    script = os.path.join(str(ROOT), "tools", "import_cycles.py")
    r = subprocess.run([sys.executable, script, "--only", "yota"], capture_output=True,
                       text=True, timeout=120)
    cycles = [line for line in r.stdout.splitlines() if line.startswith("cycle of")]
    for line in cycles:
        members = line.split(": ", 1)[1].split(", ")
        assert not [m for m in members if m.startswith(FRONT_END)], line
    assert r.stdout.rstrip().endswith("cycle(s)"), r.stderr
