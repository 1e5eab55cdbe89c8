"""yota.grad(f, *args, has_aux=True): f returns (loss, aux); the result is
((loss, aux), grads), computed by one compiled program. Values are compared exactly
with eager NumPy where the ops are the same (sums of a few terms may round differently
in compiled code: 1e-12 relative)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, NamedTuple

import numpy as np
import pytest
from support.gradcheck import check_grad

import yota

BACKENDS = ["interp", "llvm"]


class Metrics(NamedTuple):
    mse: Any
    preds: Any


@dataclass
class Model:
    W: np.ndarray
    b: np.ndarray


def model_loss(m: Model, X: Any, y: Any) -> Any:
    preds = np.tanh(X @ m.W + m.b)
    err = preds - y
    loss = np.mean(err ** 2) + 0.01 * np.sum(m.W ** 2)
    aux = {"metrics": Metrics(np.mean(err ** 2), preds), "step": 3, "labels": y,
           "extra": [np.max(np.abs(err)), None]}
    return loss, aux


def data(seed: int = 0) -> tuple[Model, Any, Any]:
    rng = np.random.default_rng(seed)
    return (Model(rng.normal(size=(4, 2)), rng.normal(size=2)), rng.normal(size=(5, 4)),
            rng.normal(size=(5, 2)))


@pytest.mark.parametrize("backend", BACKENDS)
def test_loss_aux_and_gradients(backend: str) -> None:
    m, X, y = data()
    (loss, aux), g = yota.grad(model_loss, m, X, y, backend=backend, has_aux=True)
    eager_loss, eager_aux = model_loss(m, X, y)
    np.testing.assert_allclose(loss, eager_loss, rtol=1e-12)
    assert isinstance(aux["metrics"], Metrics) and aux["step"] == 3
    np.testing.assert_allclose(aux["metrics"].mse, eager_aux["metrics"].mse, rtol=1e-12)
    np.testing.assert_allclose(aux["metrics"].preds, eager_aux["metrics"].preds, rtol=1e-12)
    np.testing.assert_array_equal(aux["labels"], y)
    np.testing.assert_allclose(aux["extra"][0], eager_aux["extra"][0], rtol=1e-12)
    assert aux["extra"][1] is None
    only_loss = lambda m, X, y: model_loss(m, X, y)[0]
    assert check_grad(only_loss, [m, X, y], g) == 4
    _, plain = yota.grad(only_loss, m, X, y, backend=backend)  # the same gradients
    for k in plain.flat[0]:
        np.testing.assert_allclose(g.flat[0][k], plain.flat[0][k], rtol=1e-12)


def test_one_program_computes_value_gradients_and_aux() -> None:
    m, X, y = data()
    _, g = yota.grad(model_loss, m, X, y, has_aux=True)
    labels = g.tape.output_labels
    assert labels[0] == "value" and labels[1].startswith("grad ")
    assert [lb for lb in labels if lb.startswith("aux")] == [f"aux {i}" for i in range(5)]


@pytest.mark.parametrize("backend", BACKENDS)
def test_replays_on_new_inputs_give_their_aux(backend: str) -> None:
    m, X, y = data(1)
    yota.grad(model_loss, m, X, y, backend=backend, has_aux=True)
    yota.stats.reset()
    m2, X2, y2 = data(2)
    (loss, aux), g = yota.grad(model_loss, m2, X2, y2, backend=backend, has_aux=True)
    assert yota.stats.traces == 0 and yota.stats.hits == 1
    eager_loss, eager_aux = model_loss(m2, X2, y2)
    np.testing.assert_allclose(loss, eager_loss, rtol=1e-12)
    np.testing.assert_allclose(aux["metrics"].preds, eager_aux["metrics"].preds, rtol=1e-12)
    np.testing.assert_array_equal(aux["labels"], y2)  # an input returned as it is


def test_has_aux_and_plain_calls_are_cached_apart() -> None:
    def f(x: Any) -> Any:
        return np.sum(x * x), x * 3.0

    x = np.array([1.0, 2.0])
    (v, aux), g = yota.grad(f, x, has_aux=True)
    np.testing.assert_allclose(aux, 3 * x)
    with pytest.raises(yota.TraceError, match="scalar float"):
        yota.grad(f, x)  # without the flag the pair is not a scalar


@pytest.mark.parametrize("dynamic", [False, True])
def test_weak_floats_and_dynamic_graphs(dynamic: bool) -> None:
    def f(x: Any, s: float) -> Any:
        return np.sum(x * s), {"s2": s * 2.0, "n": 7.5}

    (v, aux), g = yota.grad(f, np.array([1.0, 2.0]), 1.5, has_aux=True, dynamic=dynamic)
    assert v == 4.5 and aux == {"s2": 3.0, "n": 7.5}
    assert type(aux["s2"]) is float and type(g[1]) is float and g[1] == 3.0


@pytest.mark.parametrize("bad, got", [
    (lambda x: np.sum(x), r"an array of shape \(\)"),
    (lambda x: (np.sum(x), x, x), "a tuple of length 3"),
    (lambda x: [np.sum(x)], "a list of length 1"),
])
def test_not_a_pair_is_a_clear_error(bad: Any, got: str) -> None:
    with pytest.raises(yota.TraceError, match=rf"has_aux=True.*pair \(loss, aux\).*{got}"):
        yota.grad(bad, np.ones(2), has_aux=True)


def test_a_loss_that_is_not_scalar_is_a_clear_error() -> None:
    with pytest.raises(yota.TraceError, match="scalar float"):
        yota.grad(lambda x: (x * 2, x), np.ones(2), has_aux=True)
