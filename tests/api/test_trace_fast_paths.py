"""The shortcuts that make tracing and lowering cheap per op (shared locations and types,
a call shape checked once per table entry, one scan of flat arguments, the ``x[i]``
lowering, the builder's emitters) give exactly what the general paths give."""

from __future__ import annotations

import numpy as np
import pytest
from yota.ir.core import Builder
from yota.ir.errors import IRTypeError, UnsupportedError
from yota.ir.types import TensorType, as_dtype, tensor_type

import yota
from yota.lowering import to_ir


def _calls(tape: yota.Tape) -> list:
    return [e for e in tape.entries if e.kind == "call"]


def _helper(x: np.ndarray) -> np.ndarray:
    return x * 2.0  # every call of the helper records this line


def test_a_line_traced_from_two_call_sites_keeps_each_callers_lines() -> None:
    def f(x: np.ndarray) -> np.ndarray:
        a = _helper(x)
        b = np.exp(a)
        c = _helper(b)
        return np.sum(c)

    _, tape = yota.trace(f, np.ones(3))
    mul1, exp, mul2, total = _calls(tape)
    helper_line = _helper.__code__.co_firstlineno + 1
    first = f.__code__.co_firstlineno
    assert (mul1.loc.line, mul2.loc.line) == (helper_line, helper_line)
    assert mul1.loc.func == mul2.loc.func == "_helper"
    assert (exp.loc.line, exp.loc.func) == (first + 2, "f")
    assert (total.loc.line, total.loc.func) == (first + 4, "f")
    assert mul1.loc == mul2.loc and mul1.loc != exp.loc


def test_the_same_line_number_in_two_functions_of_one_file_are_two_places() -> None:
    src = "def {name}(x):\n    return x * 3.0\n"
    fns = {}
    for name in ("first", "second"):
        scope: dict = {}
        exec(compile(src.format(name=name), "same_file.py", "exec"), scope)
        fns[name] = scope[name]
    locs = [_calls(yota.trace(fns[n], np.ones(2))[1])[0].loc for n in ("first", "second")]
    assert [(loc.file, loc.line) for loc in locs] == [("same_file.py", 2)] * 2
    assert [loc.func for loc in locs] == ["first", "second"]


def test_shared_tensor_types_equal_new_ones_and_are_normalized() -> None:
    t = tensor_type(np.float64, (np.int64(2), 3))
    assert t == TensorType(np.dtype("f8"), (2, 3)) and t is tensor_type(np.float64, (2, 3))
    assert all(type(s) is int for s in t.shape)
    assert TensorType("f32", [4]) == TensorType(np.float32, (4,))  # a list: not cached
    assert str(tensor_type(float, [1, 2])) == "f64[1,2]"
    with pytest.raises(IRTypeError, match="negative dimension"):
        tensor_type(np.float64, (2, -1))
    for _ in range(2):  # a refused dtype stays refused (it is never remembered)
        with pytest.raises(IRTypeError, match="not supported"):
            as_dtype(np.float16)


def test_a_call_shape_checked_once_does_not_admit_other_shapes() -> None:
    def ok(x: np.ndarray) -> np.ndarray:
        return np.sum(np.max(x, axis=0))

    def bad_kwarg(x: np.ndarray) -> np.ndarray:
        return np.sum(np.max(x, axis=0, initial=0.0))

    def bad_arity(x: np.ndarray) -> np.ndarray:
        return np.sum(np.tanh(x, x, x, x))

    x = np.ones((2, 3))
    for _ in range(2):  # the same shapes again, once remembered
        yota.trace(ok, x)
        with pytest.raises(UnsupportedError, match="initial"):
            yota.trace(bad_kwarg, x)
        with pytest.raises((UnsupportedError, TypeError)):
            yota.trace(bad_arity, x)


def test_a_view_of_an_outside_array_made_beside_a_traced_operand_is_not_writable() -> None:
    outside = np.arange(2000.0)  # large: an implicit input, never written

    def f(x: np.ndarray) -> np.ndarray:
        view, _ = np.broadcast_arrays(outside, x)
        view[0] = 1.0
        return np.sum(x)

    with pytest.raises(UnsupportedError, match="an array from outside the function"):
        yota.trace(f, np.ones(2000))
    assert outside[0] == 0.0


def test_traced_bounds_of_a_slice_are_guarded() -> None:
    def f(x: np.ndarray) -> np.ndarray:
        return np.sum(x[1:np.sum(x > 0)])

    _, tape = yota.trace(f, np.array([1.0, 2.0, -1.0, 3.0]))
    guards = [e for e in tape.entries if e.kind == "guard"]
    assert [(g.extra["kind"], g.extra["expected"]) for g in guards] == [("int", 3)]
    assert _calls(tape)[-2].args[1] == slice(1, 3)


def test_weak_python_scalars_follow_nep50_through_the_flat_path() -> None:
    def f(x: np.ndarray, s: float) -> np.ndarray:
        a = s * 2.0  # Python operator on a Python float: a weak result
        b = np.exp(s)  # a NumPy function: a strong float64
        c = x * a  # with an array: strong
        return np.sum(c) + b

    _, tape = yota.trace(f, np.ones(2, np.float32), 0.5)
    assert [(e.fn, e.outs[0].weak, str(e.outs[0].type)) for e in _calls(tape)] == [
        ("multiply", True, "f64[]"), ("exp", False, "f64[]"), ("multiply", False, "f32[2]"),
        ("sum", False, "f32[]"), ("add", False, "f64[]")]


@pytest.mark.parametrize("shape", [(3, 4), (1, 4), (5,), (3, 0), (2, 1, 3)])
@pytest.mark.parametrize("i", [0, -1, 1])
def test_x_of_i_lowers_as_the_general_index_does(shape: tuple[int, ...], i: int) -> None:
    if not -shape[0] <= i < shape[0]:
        pytest.skip("out of range for this shape")
    x = np.arange(float(np.prod(shape))).reshape(shape)

    def index(x: np.ndarray, key: object) -> np.ndarray:
        return x[key] * 1.0

    fast = to_ir(yota.trace(lambda x: index(x, i), x)[1])
    general = to_ir(yota.trace(lambda x: index(x, (i,)), x)[1])  # a tuple: the general path
    assert str(fast) == str(general)


def test_builder_emitters_emit_on_every_builder_and_refuse_unknown_ops() -> None:
    t = TensorType(np.float64, (2,))
    for _ in range(2):
        b = Builder("g")
        x = b.input(t)
        y = b.add(x, b.neg(x))
        assert [op.name for op in b.ops] == ["neg", "add"] and y.type == t
    assert not hasattr(Builder("h"), "no_such_op")
    with pytest.raises(AttributeError):
        Builder("h").no_such_op  # noqa: B018
