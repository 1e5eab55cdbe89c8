"""Wrong arguments to the public API: every failure is a ``yota.YotaError`` whose message
names the argument (and the field path inside a structure), or the user's own exception
(the one ``f`` raises when called plainly); nothing of the caller's data changes."""

from __future__ import annotations

import copy
import dataclasses
import subprocess
import sys
from collections.abc import Callable
from typing import Any

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import yota

NOT_CALLABLE = [np.ones(3), "loss", None, 3, [np.ones(2)], {"f": 1}]
BAD_LEAVES = {
    "object": lambda: np.array([1.0, "a"], dtype=object),
    "float16": lambda: np.ones(3, np.float16),
    "complex": lambda: np.ones(3, np.complex128),
    "uint8": lambda: np.ones(3, np.uint8),
    "datetime": lambda: np.array(["2026-01-01"], dtype="datetime64[D]"),
    "bytes array": lambda: np.array([b"ab"]),
}


@dataclasses.dataclass
class Model:
    W: Any
    b: Any


def _place(bad: Any, where: str) -> tuple[Any, str]:
    """``bad`` inside a structure, and the path a message must name."""
    if where == "direct":
        return bad, "x"
    if where == "dict":
        return {"w": np.ones(2), "bad": bad}, "bad"
    if where == "list":
        return [np.ones(2), bad], "[1]"
    return Model(np.ones(2), bad), "b"


def _loss(x: Any) -> Any:
    return 0.0 * np.sum(np.ones(1))


ENTRY_POINTS: dict[str, Callable[..., Any]] = {
    "grad": lambda f, *a: yota.grad(f, *a),
    "grad dynamic": lambda f, *a: yota.grad(f, *a, dynamic=True),
    "grad interp": lambda f, *a: yota.grad(f, *a, backend="interp"),
    "trace": lambda f, *a: yota.trace(f, *a),
    "compile": lambda f, *a: yota.compile(f, *a),
    "simplegrad": lambda f, *a: yota.simplegrad(f, *a),
}


def _snapshot(x: Any) -> Any:
    return copy.deepcopy(x)


def _same(a: Any, b: Any) -> bool:
    if isinstance(a, np.ndarray):
        return isinstance(b, np.ndarray) and a.dtype == b.dtype and a.shape == b.shape and \
            (a.dtype == object and list(a) == list(b) or a.dtype != object and
             np.array_equal(a, b))
    if dataclasses.is_dataclass(a):
        return all(_same(getattr(a, f.name), getattr(b, f.name))
                   for f in dataclasses.fields(a))
    if isinstance(a, dict):
        return a.keys() == b.keys() and all(_same(a[k], b[k]) for k in a)
    if isinstance(a, (list, tuple)):
        return len(a) == len(b) and all(_same(x, y) for x, y in zip(a, b, strict=True))
    return bool(a == b)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(api=st.sampled_from(sorted(ENTRY_POINTS)), f=st.sampled_from(range(len(NOT_CALLABLE))))
def test_a_non_callable_is_named(api: str, f: int) -> None:
    bad = NOT_CALLABLE[f]
    with pytest.raises(yota.YotaError) as e:
        ENTRY_POINTS[api](bad, np.ones(3))
    assert "callable" in str(e.value) and type(bad).__name__ in str(e.value)


@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(api=st.sampled_from(sorted(ENTRY_POINTS)), kind=st.sampled_from(sorted(BAD_LEAVES)),
       where=st.sampled_from(["direct", "dict", "list", "dataclass"]))
def test_an_unsupported_leaf_is_named_with_its_path(api: str, kind: str, where: str) -> None:
    arg, path = _place(BAD_LEAVES[kind](), where)
    before = _snapshot(arg)
    if kind == "float16" and api.startswith(("grad", "compile")):  # computed in float32
        ENTRY_POINTS[api](_loss, arg)
        assert _same(arg, before)
        return
    with pytest.raises(yota.YotaError) as e:
        ENTRY_POINTS[api](_loss, arg)
    msg = str(e.value)
    assert path in msg, msg
    assert "dtype" in msg or "type" in msg, msg
    assert _same(arg, before)


@pytest.mark.parametrize("api", sorted(ENTRY_POINTS))
def test_ragged_nested_lists_are_the_users_own_error_or_named(api: str) -> None:
    arg = [[1.0, 2.0], [3.0]]

    def f(x: Any) -> Any:
        return np.sum(np.asarray(x) * 2.0)

    try:
        f(arg)
        plain: type[BaseException] | None = None
    except Exception as e:  # noqa: BLE001 - what NumPy itself raises
        plain = type(e)
    with pytest.raises((yota.YotaError,) + ((plain,) if plain else ())):
        ENTRY_POINTS[api](f, arg)
    assert arg == [[1.0, 2.0], [3.0]]


@pytest.mark.parametrize("api", sorted(ENTRY_POINTS))
def test_empty_arrays_work(api: str) -> None:
    ENTRY_POINTS[api](lambda x: np.sum(x * 2.0), np.zeros(0))


def test_play_with_the_wrong_signature_names_it() -> None:
    _, tape = yota.trace(lambda x: np.sum(x * 2.0), np.ones(3))
    for bad in (np.ones((2, 2)), np.ones(3, np.float32), "x", None):
        with pytest.raises(yota.YotaError, match="signature"):
            yota.play(tape, bad)


def test_a_compiled_tape_refuses_other_shapes() -> None:
    _, tape = yota.trace(lambda x: np.sum(x * 2.0), np.ones(3))
    cf = yota.compile(tape)
    with pytest.raises(yota.YotaError):
        cf(np.ones(4))


@pytest.mark.parametrize("grads,match", [
    ("g", "gradient"), (np.ones(4), "shape"), ({("W",): np.ones((5,))}, "W"),
    ({("nope",): np.ones(2)}, "nope"), (np.array(["a", "b"]), "dtype")])
def test_update_refuses_gradients_that_do_not_fit(grads: Any, match: str) -> None:
    m = Model(np.ones(2), np.zeros(2)) if isinstance(grads, dict) else None
    target = m if m is not None else np.ones(2)
    before = _snapshot(target)
    with pytest.raises(yota.YotaError, match=match):
        yota.update_(target, grads, lambda x, g: x - g)
    assert _same(target, before)


def test_update_refuses_a_non_callable_rule() -> None:
    w = np.ones(2)
    with pytest.raises(yota.YotaError, match="callable"):
        yota.update_(w, np.ones(2), "sgd")  # type: ignore[arg-type]
    assert w.tolist() == [1.0, 1.0]


def test_to_device_without_a_gpu_is_a_yota_error() -> None:
    from yota.backends import cuda
    from yota.backends.cuda.nvrtc import CudaUnavailable

    reason = cuda.unavailable()
    if reason is None:
        pytest.skip("a CUDA device is usable here: to_device succeeds")
    with pytest.raises(CudaUnavailable, match="to_device"):
        yota.to_device({"w": np.ones(3)}, "cuda")


def test_aot_of_a_non_callable_is_named(tmp_path: Any) -> None:
    with pytest.raises(yota.YotaError, match="callable"):
        yota.aot("loss", np.ones(3), path=tmp_path)  # type: ignore[arg-type]


@pytest.mark.parametrize("argv", [
    ["tape", "nowhere.py:f", "--args", "1"],
    ["tape", "tests/cli_examples/model.py:nope", "--example", "example"],
    ["ir", "tests/cli_examples/model.py:loss", "--args", "'a'"],
    ["check", "tests/cli_examples/model.py:loss", "--args", "None"]])
def test_cli_reports_errors_without_a_traceback(argv: list[str]) -> None:
    r = subprocess.run([sys.executable, "-m", "yota", *argv], capture_output=True, text=True,
                       timeout=120)
    assert r.returncode == 1
    assert "Traceback" not in r.stderr or "your code" in r.stderr.lower(), r.stderr
