"""End-to-end gradients: yota.grad against finite differences, caching, update_, rules."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, NamedTuple

import numpy as np
import pytest
from bench.workloads import MLP, loss_w3
from support.gradcheck import check_grad

import yota


@dataclass
class Linear:
    W: np.ndarray
    b: np.ndarray


def linear_loss(m: Linear, X: np.ndarray) -> Any:
    return np.sum(m.W @ X + m.b[:, None])


def test_readme_linear_model_struct_gradient() -> None:
    rng = np.random.default_rng(0)
    m, X = Linear(rng.random((3, 4)), rng.random(3)), rng.random((4, 5))
    val, g = yota.grad(linear_loss, m, X)
    assert np.isclose(val, linear_loss(m, X))
    assert isinstance(g[0], yota.Tangent) and g[0]._type is Linear
    np.testing.assert_allclose(g[0].W, np.ones((3, 5)) @ X.T)
    np.testing.assert_allclose(g[0].b, np.full(3, 5.0))
    assert set(g.flat[0]) == {("W",), ("b",)} and g.flat[0][("W",)] is g[0].W
    np.testing.assert_allclose(g[1], m.W.T @ np.ones((3, 5)))
    assert check_grad(linear_loss, [m, X], g) == 3


mlp_loss = loss_w3(np)  # the benchmark's W3 model: tanh MLP, softmax cross-entropy


def make_mlp(rng: np.random.Generator, sizes: tuple[int, ...], dtype: Any = np.float64) -> MLP:
    ws = []
    for a, b in zip(sizes[:-1], sizes[1:], strict=True):
        ws += [(rng.standard_normal((a, b)) / np.sqrt(a)).astype(dtype),
               (0.1 * rng.standard_normal(b)).astype(dtype)]
    return MLP(*ws)


def test_mlp_softmax_cross_entropy_with_integer_labels() -> None:
    rng = np.random.default_rng(1)
    m = make_mlp(rng, (6, 5, 4, 3))
    X, labels = rng.standard_normal((7, 6)), rng.integers(0, 3, 7)
    val, g = yota.grad(mlp_loss, m, X, labels)
    assert np.isclose(val, mlp_loss(m, X, labels))
    assert g[2] is None  # integer labels get no gradient
    assert check_grad(mlp_loss, [m, X, labels], g) == 7


def test_mlp_float32_matches_float64() -> None:
    rng = np.random.default_rng(2)
    m64 = make_mlp(rng, (6, 5, 4, 3))
    m32 = MLP(*[a.astype(np.float32) for a in vars(m64).values()])
    X, labels = rng.standard_normal((7, 6)), rng.integers(0, 3, 7)
    v32, g32 = yota.grad(mlp_loss, m32, X.astype(np.float32), labels)
    v64, g64 = yota.grad(mlp_loss, m64, X, labels)
    assert g32[0].W1.dtype == np.float32 and np.asarray(v32).dtype == np.float32
    for k, g in g64[0]:
        np.testing.assert_allclose(getattr(g32[0], k), g, rtol=2e-4, atol=2e-6)


def rnn_loss(W: np.ndarray, U: np.ndarray, b: np.ndarray, xs: np.ndarray) -> Any:
    h = np.zeros((W.shape[0], xs.shape[2]))
    for t in range(xs.shape[0]):
        h = np.tanh(W @ h + U @ xs[t] + b[:, None])
    return np.sum(h ** 2)


def test_unrolled_rnn() -> None:
    rng = np.random.default_rng(3)
    W, U, b = 0.5 * rng.standard_normal((4, 4)), rng.standard_normal((4, 3)), rng.standard_normal(4)
    xs = rng.standard_normal((5, 3, 2))
    val, g = yota.grad(rnn_loss, W, U, b, xs)
    assert np.isclose(val, rnn_loss(W, U, b, xs))
    assert check_grad(rnn_loss, [W, U, b, xs], g) == 4


class Pair(NamedTuple):
    a: np.ndarray
    scale: float


@dataclass
class Block:
    lin: Linear
    extra: dict[str, Any] = field(default_factory=dict)


def nested_loss(blk: Block, xs: list[np.ndarray], p: Pair, name: str) -> Any:
    y = blk.lin.W @ xs[0] + blk.lin.b
    y = y * blk.extra["gain"] + np.sum(blk.extra["bias"]["v"]) * p.scale
    if name == "sq":
        y = y ** 2
    return np.sum(y * p.a) + np.sum(xs[1])


def test_nested_dataclasses_dicts_lists_namedtuples() -> None:
    rng = np.random.default_rng(4)
    blk = Block(Linear(rng.random((3, 2)), rng.random(3)),
                {"gain": 1.5, "bias": {"v": rng.random(4)}, "unused": rng.random(2)})
    xs = [rng.random(2), rng.random(5)]
    p = Pair(rng.random(3), 0.7)
    val, g = yota.grad(nested_loss, blk, xs, p, "sq")
    assert np.isclose(val, nested_loss(blk, xs, p, "sq"))
    assert set(g.flat[0]) == {("lin", "W"), ("lin", "b"), ("extra", "gain"),
                              ("extra", "bias", "v")}
    # shaped like the arguments: Tangents of the dataclasses, dicts, lists, the NamedTuple
    assert isinstance(g[0].extra["gain"], float) and g[0].extra["unused"] is None
    assert g[0].lin.W is g.flat[0][("lin", "W")] and g[0].extra["bias"]["v"].shape == (4,)
    assert type(g[1]) is list and len(g[1]) == 2 and type(g[2]) is Pair
    assert g[2].a.shape == (3,) and isinstance(g[2].scale, float)
    assert g[3] is None
    assert check_grad(nested_loss, [blk, xs, p, "sq"], g) == 9  # "unused" checks as zero


def branchy(x: np.ndarray, n: int) -> Any:
    s = np.sum(x)
    y = x * 2.0
    if s > 0:
        y = np.sin(y)
    else:
        y = np.exp(y)
    for _ in range(int(np.round(np.max(np.abs(x)) * 2)) % 3 + n):
        y = y * x
    return np.sum(y)


def test_guards_retrace_and_give_the_other_branch() -> None:
    yota.stats.reset()
    rng = np.random.default_rng(5)
    pos, neg = np.abs(rng.random(4)) + 0.1, -np.abs(rng.random(4)) - 0.1
    for x in (pos, neg, pos, neg * 3):
        val, g = yota.grad(branchy, x, 1)
        assert np.isclose(val, branchy(x, 1))
        check_grad(branchy, [x, 1], g)
    assert yota.stats.guard_failures >= 1
    traces = yota.stats.traces
    yota.grad(branchy, pos, 1)
    assert yota.stats.traces == traces  # both variants are cached


def test_static_cache_hits_and_retraces_on_new_signature() -> None:
    def f(x: np.ndarray, k: int) -> Any:
        return np.sum(x ** k)

    yota.stats.reset()
    yota.grad(f, np.ones(3), 2)
    yota.grad(f, np.full(3, 2.0), 2)
    assert (yota.stats.traces, yota.stats.hits) == (1, 1)
    _, g = yota.grad(f, np.full(4, 2.0), 2)  # new shape
    assert yota.stats.traces == 2
    _, g = yota.grad(f, np.full(4, 2.0), 3)  # new static value
    assert yota.stats.traces == 3
    np.testing.assert_allclose(g[0], 3 * 2.0 ** 2 * np.ones(4))
    yota.grad(f, np.full(4, 2.0).astype(np.float32), 3)  # new dtype
    assert yota.stats.traces == 4


def test_dynamic_graph_sees_fresh_inputs_and_reuses_programs() -> None:
    rng = np.random.default_rng(6)
    noise = rng.standard_normal((2000,))

    def f(x: np.ndarray) -> Any:
        return np.sum(x * noise[: x.shape[0]] ** 2) if x.shape[0] else np.sum(x)

    x = rng.standard_normal(2000)
    yota.stats.reset()
    _, g1 = yota.grad(f, x, dynamic=True)
    _, g2 = yota.grad(f, x, dynamic=True)
    assert yota.stats.traces == 2 and yota.stats.hits == 1
    np.testing.assert_allclose(g1[0], noise ** 2)
    np.testing.assert_allclose(g2[0], g1[0])


def test_dynamic_graph_with_randomness_inside() -> None:
    calls: list[int] = []

    def f(x: np.ndarray) -> Any:
        calls.append(1)  # Python runs on every call of a dynamic graph
        r = np.random.default_rng(len(calls)).standard_normal(x.shape)
        return np.sum(x * r)

    x = np.ones(3)
    _, g1 = yota.grad(f, x, dynamic=True)
    _, g2 = yota.grad(f, x, dynamic=True)
    np.testing.assert_array_equal(g1[0], np.random.default_rng(1).standard_normal(3))
    np.testing.assert_array_equal(g2[0], np.random.default_rng(2).standard_normal(3))


@yota.primitive
def scaled_shift(x: np.ndarray, w: np.ndarray, *, shift: float = 0.0, power: int = 1) -> Any:
    return (x * w + shift) ** power


@yota.diffrule(scaled_shift, "x")
def _scaled_shift_dx(x: Any, w: Any, *, y: Any, dy: Any, shift: float = 0.0,
                     power: int = 1) -> Any:
    return power * (x * w + shift) ** (power - 1) * w * dy


@yota.diffrule(scaled_shift, "w")
def _scaled_shift_dw(x: Any, w: Any, *, y: Any, dy: Any, **kw: Any) -> Any:
    return kw["power"] * (x * w + kw["shift"]) ** (kw["power"] - 1) * x * dy


def test_primitive_with_keyword_arguments_in_rules() -> None:
    def f(x: np.ndarray, w: np.ndarray) -> Any:
        return np.sum(scaled_shift(x, w, shift=0.5, power=3))

    rng = np.random.default_rng(7)
    x, w = rng.random(4), rng.random(4)
    val, g = yota.grad(f, x, w)
    _, tape = yota.trace(f, x, w)
    assert "scaled_shift(%1, %2, shift=0.5, power=3)" in str(tape)
    assert check_grad(f, [x, w], g) == 2


@yota.primitive
def masked_scale(x: np.ndarray, mask: np.ndarray) -> Any:
    return x * mask


@yota.diffrule(masked_scale, "x")
def _masked_scale_dx(x: Any, mask: Any, *, y: Any, dy: Any) -> Any:
    return dy * mask


yota.nodiff(masked_scale, "mask")


def test_nodiff_argument_gets_no_gradient() -> None:
    def f(x: np.ndarray, m: np.ndarray) -> Any:
        return np.sum(masked_scale(x, m) ** 2)

    x, m = np.array([1.0, 2.0, 3.0]), np.array([1.0, 0.0, 2.0])
    _, g = yota.grad(f, x, m)
    np.testing.assert_allclose(g[0], 2 * x * m * m)
    assert g[1] is None


@yota.primitive
def no_rule(x: np.ndarray) -> Any:
    return x * 2


def test_primitive_without_rule_prints_the_stub() -> None:
    def f(x: np.ndarray) -> Any:
        return np.sum(no_rule(x))

    with pytest.raises(yota.MissingRuleError) as e:
        yota.grad(f, np.ones(2))
    msg = str(e.value)
    assert "no_rule" in msg and "f64[2]" in msg and "test_grad.py:" in msg
    assert '@yota.diffrule(no_rule, "x")' in msg and "def _(x, *, y, dy):" in msg


def test_primitive_missing_rule_for_one_argument() -> None:
    def f(x: np.ndarray, w: np.ndarray) -> Any:
        return np.sum(half_ruled(x, w))

    with pytest.raises(yota.MissingRuleError) as e:
        yota.grad(f, np.ones(2), np.ones(2))
    assert '@yota.diffrule(half_ruled, "w")' in str(e.value)
    assert '"x"' not in str(e.value)


@yota.primitive
def half_ruled(x: np.ndarray, w: np.ndarray) -> Any:
    return x * w


@yota.diffrule(half_ruled, "x")
def _half_ruled_dx(x: Any, w: Any, *, y: Any, dy: Any) -> Any:
    return w * dy


def test_grad_needs_a_scalar_output() -> None:
    with pytest.raises(yota.YotaError, match="scalar"):
        yota.grad(lambda x: x * 2, np.ones(3))


def test_update_trains_the_linear_model() -> None:
    rng = np.random.default_rng(8)
    X, T = rng.standard_normal((4, 20)), rng.standard_normal((2, 20))
    m = Linear(0.1 * rng.standard_normal((2, 4)), np.zeros(2))

    def mse(m: Linear, X: np.ndarray, T: np.ndarray) -> Any:
        return np.mean((m.W @ X + m.b[:, None] - T) ** 2)

    W_id = id(m.W)
    losses = []
    for _ in range(30):
        val, g = yota.grad(mse, m, X, T)
        losses.append(float(val))
        yota.update_(m, g[0], lambda x, gx: x - 0.1 * gx)
    assert id(m.W) == W_id  # updated in place
    assert losses[-1] < 0.8 * losses[0]
    assert all(b <= a + 1e-12 for a, b in zip(losses, losses[1:], strict=False))


def test_update_nested_fields_and_immutable_errors() -> None:
    blk = Block(Linear(np.ones((2, 2)), np.ones(2)), {"gain": 2.0})
    yota.update_(blk, {("lin", "W"): np.ones((2, 2)), ("extra", "gain"): 0.5})
    np.testing.assert_array_equal(blk.lin.W, np.zeros((2, 2)))
    assert blk.extra["gain"] == 1.5
    p = Pair(np.ones(2), 1.0)
    yota.update_(p, {("a",): np.ones(2)})  # arrays inside immutable parents: in place
    np.testing.assert_array_equal(p.a, np.zeros(2))
    with pytest.raises(yota.YotaError, match="scale.*immutable Pair"):
        yota.update_(p, {("scale",): 1.0})


def small(x: np.ndarray, w: np.ndarray) -> Any:
    return np.sum(np.tanh(x * w) + w)


SMALL_SOURCE = """\
def small_grad(x, w):
    x0 = x
    x1 = w
    x2 = (x0 * x1)  # test_grad.py:{line}
    x3 = np.tanh(x2)  # test_grad.py:{line}
    x4 = (x3 + x1)  # test_grad.py:{line}
    x5 = np.sum(x4, axis=(0,))  # test_grad.py:{line}
    x6 = np.full((), 1.0, dtype=np.float64)
    x7 = np.reshape(x6, (1,))
    x8 = np.broadcast_to(x7, (3,))
    x9 = np.square(x3)
    x10 = np.full((3,), 1.0, dtype=np.float64)
    x11 = (x10 - x9)
    x12 = (x8 * x11)
    x13 = (x12 * x1)
    x14 = (x12 * x0)
    x15 = (x8 + x14)
    return x5, x13, x15
"""


def test_simplegrad_source_is_golden_and_matches_grad() -> None:
    import inspect

    line = inspect.getsourcelines(small)[1] + 1
    x, w = np.array([0.1, -0.2, 0.3]), np.array([1.0, 2.0, -1.0])
    sg = yota.simplegrad(small, x, w)
    assert sg.source == SMALL_SOURCE.format(line=line)
    val, gx, gw = sg(x, w)
    v2, g = yota.grad(small, x, w)
    assert np.isclose(val, v2)
    np.testing.assert_allclose(gx, g[0])
    np.testing.assert_allclose(gw, g[1])


def test_check_rule_on_builtins() -> None:
    for fn, shapes in [(np.tanh, [(3, 2)]), (np.multiply, [(3, 1), (1, 4)]),
                       (lambda a, b: a @ b, [(2, 3), (3, 4)]),
                       (lambda a: np.max(a, axis=0), [(4, 3)])]:
        errs = yota.check_rule(fn, *shapes)
        assert all(e < 1e-5 for e in errs.values())


def test_float_argument_is_weak_and_differentiable() -> None:
    def f(x: np.ndarray, a: float) -> Any:
        return np.sum(x * a)

    val, g = yota.grad(f, np.ones(3, np.float32), 2.0)
    assert np.asarray(val).dtype == np.float32 and g[0].dtype == np.float32
    assert isinstance(g[1], float) and g[1] == 3.0
