"""Every error path names the culprit (the NumPy function, the operation, the argument),
the user's function and its ``file:line``, and what to do instead."""

from __future__ import annotations

import inspect
import math
import os
from collections.abc import Callable
from typing import Any

import numpy as np
import pytest

import yota
from yota.recording import OperandError

HERE = os.path.basename(__file__)


def where(f: Callable[..., Any], text: str) -> str:
    """``test_errors.py:<line>`` of the first line of ``f``'s source containing ``text``."""
    lines, start = inspect.getsourcelines(f)
    return f"{HERE}:{start + next(i for i, s in enumerate(lines) if text in s)}"


def trace_error(f: Callable[..., Any], *args: Any, kind: type = yota.YotaError,
                to_ir: bool = False) -> str:
    """The message of the error tracing (and lowering) ``f`` raises."""
    with pytest.raises(kind) as err:
        _, tape = yota.trace(f, *args)
        if to_ir:
            yota.to_ir(tape)
    assert isinstance(err.value, yota.YotaError)
    return str(err.value)


def assert_names(msg: str, *parts: str) -> None:
    for p in parts:
        assert p in msg, f"{p!r} not in {msg!r}"


# -- unsupported NumPy -------------------------------------------------------------------------
def uses_fft(x: np.ndarray) -> Any:
    return np.fft.fft(x)


def uses_eig(x: np.ndarray) -> Any:
    return np.linalg.eig(x)[0] @ x  # general (complex) eigenvalues are not traced


def uses_histogram(x: np.ndarray) -> Any:
    return np.histogram(x)[0] * 2


def uses_accumulate(x: np.ndarray) -> Any:
    return np.add.accumulate(x)


@pytest.mark.parametrize("f, arg, name", [
    (uses_fft, np.ones(4), "np.fft.fft"),
    (uses_eig, np.eye(3), "np.linalg.eig"),
    (uses_histogram, np.ones(3), "np.histogram"),
    (uses_accumulate, np.ones(3), "np.add.accumulate"),
], ids=["fft", "eig", "histogram", "ufunc_method"])
def test_unsupported_numpy_function(f: Callable[..., Any], arg: np.ndarray, name: str) -> None:
    msg = trace_error(f, arg, kind=yota.UnsupportedError)
    assert_names(msg, name, where(f, "return"), f"in {f.__name__}", "not supported")
    if not name.endswith("accumulate"):
        assert "@yota.primitive" in msg and "@yota.diffrule" in msg


def masked_prod(x: np.ndarray) -> Any:
    return np.prod(x, where=x > 0)  # masked sums and means are traced; products not


def fortran_reshape(x: np.ndarray) -> Any:
    return np.reshape(x, (2, 2), order="F")


def out_argument(x: np.ndarray) -> Any:
    return np.exp(x, out=x)


@pytest.mark.parametrize("f, parts", [
    (masked_prod, ["np.prod(..., where=...)", "np.where(mask, x, 0)"]),
    (fortran_reshape, ["np.reshape(..., order='F')", "C (row-major)"]),
    (out_argument, ["np.exp(..., out=...)", "mutate"]),
], ids=["where", "order", "out"])
def test_unsupported_keyword(f: Callable[..., Any], parts: list[str]) -> None:
    msg = trace_error(f, np.ones(4), kind=yota.UnsupportedError)
    assert_names(msg, *parts, where(f, "return"), f"in {f.__name__}")


def _pad_ones(vector: np.ndarray, width: Any, axis: int, kwargs: Any) -> None:
    vector[:width[0]] = 1.0


def pad_function(x: np.ndarray) -> Any:
    return np.pad(x, 1, mode=_pad_ones)


def where_one_argument(x: np.ndarray) -> Any:
    return np.where(x > 0)


def int_bitwise(x: np.ndarray) -> Any:
    return x & 1


@pytest.mark.parametrize("f, arg, part", [
    (pad_function, np.ones((2, 2)), "np.pad with a function as the mode"),
    (where_one_argument, np.ones(3), "np.where(condition)"),
    (int_bitwise, np.ones(3, np.int64), "bitwise"),
], ids=["pad_function", "where_1", "bitwise_int"])
def test_unsupported_forms_found_when_lowering(f: Callable[..., Any], arg: np.ndarray,
                                               part: str) -> None:
    msg = trace_error(f, arg, kind=yota.UnsupportedError, to_ir=True)
    assert_names(msg, part, where(f, "return"), f"in {f.__name__}")


# -- Python's math on traced values ------------------------------------------------------------
def math_exp(x: np.ndarray) -> Any:
    return x * math.exp(x[0])


def math_sqrt(x: np.ndarray) -> Any:
    s = np.sum(x)
    return math.sqrt(s)


@pytest.mark.parametrize("f, name, fix", [(math_exp, "math.exp", "np.exp"),
                                          (math_sqrt, "math.sqrt", "np.sqrt")])
def test_python_math_on_a_traced_value(f: Callable[..., Any], name: str, fix: str) -> None:
    msg = trace_error(f, np.ones(3), kind=yota.UnsupportedError)
    assert_names(msg, f"{name}()", where(f, name), f"in {f.__name__}", fix)


# -- mutation and escaping the trace -----------------------------------------------------------
def setitem(x: np.ndarray) -> Any:
    x[0] = 1.0
    return x


def iadd(x: np.ndarray) -> Any:
    x += 1
    return x


def imul(x: np.ndarray) -> Any:
    y = x[1:]  # a view of the argument: writing it would change the caller's x
    y *= x[1:]
    return y


@pytest.mark.parametrize("f, part, fix", [
    (setitem, "x[...] = ...", "np.where"),
    (iadd, "in-place '+='", "x = x + y"),
    (imul, "in-place '*='", "x = x * y"),
], ids=["setitem", "iadd", "imul"])
def test_in_place_mutation(f: Callable[..., Any], part: str, fix: str) -> None:
    line = {"setitem": "x[0] =", "iadd": "x +=", "imul": "y *="}[f.__name__]
    x = np.ones(3)
    msg = trace_error(f, x, kind=yota.UnsupportedError)
    assert_names(msg, part, where(f, line), f"in {f.__name__}", fix)
    np.testing.assert_array_equal(x, np.ones(3))  # the argument was not changed


_EXP = np.exp  # bound before any trace: the ufunc itself, not np.exp's stand-in


def ufunc_of_list(x: np.ndarray) -> Any:
    return _EXP([x[0], x[1]])  # NumPy converts the list itself (np.exp([...]) is traced)


@pytest.mark.parametrize("f", [ufunc_of_list])
def test_conversion_to_a_plain_array(f: Callable[..., Any]) -> None:
    msg = trace_error(f, np.ones(3), kind=yota.UnsupportedError)
    assert_names(msg, "converted to a plain NumPy array", where(f, "return"),
                 f"in {f.__name__}", "@yota.primitive")


def to_list(x: np.ndarray) -> Any:
    return sum(x.tolist())


def test_tolist() -> None:
    msg = trace_error(to_list, np.ones(3), kind=yota.UnsupportedError)
    assert_names(msg, "tolist()", where(to_list, "return"), "in to_list", "Iterate")


def bool_mask(x: np.ndarray) -> Any:
    return np.sum(x[x > 0])


def test_boolean_mask_selection_used_in_the_computation() -> None:
    """x[mask] with a traced mask can only be measured (tests/numpy/test_masks.py); a constant
    mask selects like NumPy."""
    msg = trace_error(bool_mask, np.ones(3), kind=yota.UnsupportedError)
    assert_names(msg, "x[mask]", where(bool_mask, "return"), "in bool_mask", "np.where")


def returns_string(x: np.ndarray) -> Any:
    return "done"


def test_unsupported_result() -> None:
    msg = trace_error(returns_string, np.ones(2), kind=yota.TraceError)
    assert_names(msg, "returns_string", where(returns_string, "def "), "returned a str")


# -- shapes and dtypes -------------------------------------------------------------------------
def bad_matmul(x: np.ndarray, y: np.ndarray) -> Any:
    return np.tanh(x @ y)


def bad_broadcast(x: np.ndarray, y: np.ndarray) -> Any:
    return x + y


@pytest.mark.parametrize("f, op, shape", [(bad_matmul, "matmul", (2, 3)),
                                          (bad_broadcast, "add", (3, 2))])
def test_shape_mismatch_names_both_operands(f: Callable[..., Any], op: str,
                                            shape: tuple[int, ...]) -> None:
    y = np.ones(shape, np.float32)
    msg = trace_error(f, np.ones((2, 3)), y, kind=OperandError)
    assert_names(msg, op, where(f, "return"), f"in {f.__name__}",
                 f"f64[2,3], f32[{shape[0]},{shape[1]}]")
    with pytest.raises(ValueError):  # still the ValueError NumPy code expects
        yota.trace(f, np.ones((2, 3)), y)


def test_float16_argument() -> None:
    msg = trace_error(bad_broadcast, np.ones(2), np.ones(2, np.float16), kind=yota.TraceError)
    assert_names(msg, "argument 'y'", "bad_broadcast", where(bad_broadcast, "def "),
                 "float16", "float32")


def test_float16_inside_a_structure() -> None:
    msg = trace_error(lambda m: m["W"] * 2, {"W": np.ones(2, np.float16)},
                      kind=yota.TraceError)
    assert_names(msg, "argument 'm'", "W has dtype float16", "<lambda>")


def to_float16(x: np.ndarray) -> Any:
    return x.astype(np.float16)


def float16_constant(x: np.ndarray) -> Any:
    return x + np.zeros(2, np.float16)


@pytest.mark.parametrize("f, part", [(to_float16, "'astype'"),
                                     (float16_constant, "an array of dtype float16")])
def test_float16_made_inside(f: Callable[..., Any], part: str) -> None:
    msg = trace_error(f, np.ones(2, np.float32), kind=yota.TraceError)
    assert_names(msg, part, "float16", where(f, "return"), f"in {f.__name__}")


# -- gradients and replays ---------------------------------------------------------------------
def not_scalar(x: np.ndarray) -> Any:
    return x * 2


def test_grad_of_a_non_scalar() -> None:
    with pytest.raises(yota.TraceError) as err:
        yota.grad(not_scalar, np.ones(3))
    assert_names(str(err.value), "not_scalar", "f64[3]", "np.sum")


def branch(x: np.ndarray) -> Any:
    if x[0] > 0:
        return x
    return -x


def test_guard_failure_names_the_branch() -> None:
    _, tape = yota.trace(branch, np.ones(2))
    with pytest.raises(yota.GuardFailed) as err:
        yota.play(tape, -np.ones(2))
    assert_names(str(err.value), "branch", where(branch, "if x[0]"), "if x[0] > 0:")


def test_play_with_another_signature() -> None:
    _, tape = yota.trace(branch, np.ones(2))
    with pytest.raises(yota.SignatureError, match="branch"):
        yota.play(tape, np.ones(3))
