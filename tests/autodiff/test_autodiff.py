"""The reverse sweep: interface, accumulation, activity, errors, provenance, calls."""

from __future__ import annotations

import doctest
from collections.abc import Iterator

import numpy as np
import pytest
from yota.ir import (
    OPS,
    Builder,
    Function,
    MissingRuleError,
    TensorType,
    Value,
    YotaError,
    parse,
    print_function,
    run,
)
from yota.ir.autodiff import (
    NONDIFF,
    RULES,
    AutodiffError,
    CallRule,
    register_call_rule,
    register_nodiff,
    registry,
    sweep,
    vjp,
)
from yota.ir.autodiff import check as check_module
from yota.ir.autodiff.check import check_grads, grad_dot, weighted_sum
from yota.ir.autodiff.helpers import full_like

F64 = TensorType("f64", (3,))


def grads_of(fn: Function, *args: object) -> list[np.ndarray]:
    return run(vjp(fn), *args)[1:]


def reverse_ops(fn: Function, g: Function) -> list[str]:
    """The printed lines of ``g`` that the sweep added after ``fn``'s ops."""
    lines = print_function(g).splitlines()
    return lines[1 + len(fn.ops):-2]


# -- the interface ------------------------------------------------------------------------
def test_outputs_labels_and_attrs() -> None:
    b = Builder("loss")
    w = b.input(TensorType("f64", (2, 3)), "m.W")
    n = b.input(TensorType("i64", (3,)), "n")
    x = b.input(F64)
    y = b.matmul(w, b.reshape(x, shape=(3, 1)))
    f = b.build([b.sum(b.mul(y, y), axes=(0, 1))], ["loss"])
    g = vjp(f)
    assert g.inputs == f.inputs and g.input_labels == f.input_labels
    assert g.output_labels == ("value", "grad m.W", "grad %2")
    assert g.attrs == {"grads": (0, 2)} and n not in g.outputs
    assert [o.type for o in g.outputs] == [f.outputs[0].type, w.type, x.type]
    assert vjp(f, wrt=[2, 0]).attrs["grads"] == (2, 0)
    assert vjp(f, wrt=[1]).attrs["grads"] == ()


def test_matches_closed_form() -> None:
    b = Builder("f")
    x = b.input(F64, "x")
    f = b.build([b.sum(b.mul(b.sin(x), x), axes=(0,))])
    xv = np.array([0.1, -0.5, 2.0])
    val, gx = run(vjp(f), xv)
    np.testing.assert_allclose(val, np.sum(np.sin(xv) * xv))
    np.testing.assert_allclose(gx, np.cos(xv) * xv + np.sin(xv))


def test_output_is_an_input() -> None:
    b = Builder("id")
    x = b.input(TensorType("f64", ()), "x")
    g = vjp(b.build([x]))
    assert run(g, 3.0)[1] == 1.0 and g.attrs["grads"] == (0,)


@pytest.mark.parametrize("outs", ["two", "vector", "int"])
def test_rejects_non_scalar_outputs(outs: str) -> None:
    b = Builder("f")
    x = b.input(F64, "x")
    s = b.sum(x, axes=(0,))
    out = {"two": [s, s], "vector": [x], "int": [b.argmax(x, axis=0)]}[outs]
    with pytest.raises(AutodiffError, match="0-d float|exactly one output") as e:
        vjp(b.build(out))
    assert isinstance(e.value, YotaError)


def test_rejects_bad_wrt() -> None:
    b = Builder("f")
    x = b.input(F64, "x")
    f = b.build([b.sum(x, axes=(0,))])
    with pytest.raises(AutodiffError, match="wrt index 3"):
        vjp(f, wrt=[3])


# -- accumulation and activity ----------------------------------------------------------
def test_value_used_several_times_accumulates() -> None:
    b = Builder("f")
    x = b.input(F64, "x")
    y = b.mul(x, x)
    f = b.build([b.sum(b.emit("add", b.mul(y, x), x), axes=(0,))])
    xv = np.array([1.0, 2.0, -3.0])
    np.testing.assert_allclose(grads_of(f, xv)[0], 3 * xv**2 + 1)
    assert sum(" = add " in line for line in reverse_ops(f, vjp(f))) == 3  # 4 uses of x


def test_no_gradient_for_unconnected_or_integer_inputs() -> None:
    b = Builder("f")
    x, _, w = b.input(F64, "x"), b.input(F64, "unused"), b.input(F64, "w")
    k = b.input(TensorType("i64", (3,)), "k")
    cut = b.convert_to(b.argmax(b.mul(w, w), axis=0), "f64")  # w only reaches an argmax
    y = b.mul(x, b.convert_to(k, "f64"))
    f = b.build([b.sum(b.mul(y, b.broadcast_to(cut, (3,))), axes=(0,))])
    g = vjp(f)
    assert g.attrs["grads"] == (0,) and g.output_labels == ("value", "grad x")
    assert vjp(f, wrt=[1, 2, 3]).attrs["grads"] == ()
    assert len(vjp(f, wrt=[1, 2, 3]).ops) == len(f.ops)


def test_no_gradient_work_for_inactive_values() -> None:
    b = Builder("f")
    x, w = b.input(F64, "x"), b.input(F64, "w")
    f = b.build([b.sum(b.mul(x, b.exp(w)), axes=(0,))])
    rev = reverse_ops(f, vjp(f, wrt=[0]))
    assert not any("rule exp" in line for line in rev)
    assert sum(" = mul " in line for line in rev) == 1  # dx only, not dw
    assert rev[0].endswith("= const {value = 1.0} : f64[]  # adjoint of %4 via rule seed")


def test_nondiff_ops_pass_no_gradient() -> None:
    b = Builder("f")
    x = b.input(F64, "x")
    b.guard(b.sum(x, axes=(0,)), expected=True, kind="bool")
    r = b.emit("round", x)
    f = b.build([b.sum(b.mul(r, b.sign(x)), axes=(0,))])
    assert vjp(f).attrs["grads"] == ()
    g = b.build([b.sum(b.mul(r, x), axes=(0,))])
    np.testing.assert_allclose(grads_of(g, [0.4, 1.6, 2.5])[0], [0.0, 2.0, 2.0])


def test_float32_gradients_stay_float32() -> None:
    b = Builder("f")
    x = b.input(TensorType("f32", (2, 3)), "x")
    y = b.log2(b.pow(b.exp(x), b.maximum(x, b.const(np.float32(0.5), shape=(2, 3)))))
    f = b.build([b.sum(b.tanh(y), axes=(0, 1))])
    xv = np.random.default_rng(0).uniform(-1, 1, (2, 3))
    (g32,) = grads_of(f, xv.astype(np.float32))
    assert g32.dtype == np.float32
    f64 = parse(print_function(f).replace("f32", "f64"))
    np.testing.assert_allclose(g32, grads_of(f64, xv)[0], rtol=1e-4)


def test_every_op_has_a_rule_or_is_nondiff() -> None:
    assert not set(RULES) & NONDIFF
    calls = {name for name, d in OPS.items() if getattr(d, "calls", name == "call")}
    assert set(OPS) - set(RULES) - NONDIFF - calls == set()


# -- JAX semantics at ties, zeros and repeats ---------------------------------------------
def test_max_reduction_splits_ties() -> None:
    b = Builder("f")
    x = b.input(TensorType("f64", (2, 4)), "x")
    f = b.build([b.sum(b.max(x, axes=(1,)), axes=(0,))])
    xv = np.array([[1.0, 3.0, 3.0, 2.0], [5.0, 5.0, 5.0, 5.0]])
    np.testing.assert_allclose(grads_of(f, xv)[0], [[0, 0.5, 0.5, 0], [0.25] * 4])


def test_maximum_and_minimum_split_ties() -> None:
    for name in ("maximum", "minimum"):
        b = Builder("f")
        x, y = b.input(F64, "x"), b.input(F64, "y")
        f = b.build([b.sum(b.emit(name, x, y), axes=(0,))])
        gx, gy = grads_of(f, [1.0, 2.0, 3.0], [1.0, 0.0, 4.0])
        hi = name == "maximum"
        np.testing.assert_allclose(gx, [0.5, 1.0 if hi else 0.0, 0.0 if hi else 1.0])
        np.testing.assert_allclose(gy, [0.5, 0.0 if hi else 1.0, 1.0 if hi else 0.0])


def test_prod_with_zeros() -> None:
    b = Builder("f")
    x = b.input(TensorType("f64", (3, 3)), "x")
    f = b.build([b.sum(b.prod(x, axes=(1,)), axes=(0,))])
    xv = np.array([[2.0, 0.0, 3.0], [0.0, 0.0, 3.0], [2.0, 4.0, 3.0]])
    np.testing.assert_allclose(grads_of(f, xv)[0], [[0, 6, 0], [0, 0, 0], [12, 6, 8]])


def test_pow_exponent_gradient_is_zero_at_zero_base() -> None:
    b = Builder("f")
    x, p = b.input(F64, "x"), b.input(F64, "p")
    f = b.build([b.sum(b.pow(x, p), axes=(0,))])
    gx, gp = grads_of(f, [0.0, 0.0, 2.0], [2.0, 0.0, 3.0])
    np.testing.assert_allclose(gx, [0.0, 0.0, 12.0])
    np.testing.assert_allclose(gp, [0.0, 0.0, 8 * np.log(2.0)])


def test_gather_repeated_indices_accumulate() -> None:
    b = Builder("f")
    x = b.input(TensorType("f64", (4,)), "x")
    g = b.gather(x, b.const(np.array([0, 0, 2, 0])), axis=0)
    f = b.build([b.sum(b.mul(g, b.const(np.array([1.0, 2.0, 3.0, 4.0]))), axes=(0,))])
    np.testing.assert_allclose(grads_of(f, np.ones(4))[0], [7.0, 0.0, 3.0, 0.0])


def test_mod_gradients() -> None:
    b = Builder("f")
    x, y = b.input(F64, "x"), b.input(F64, "y")
    f = b.build([b.sum(b.mod(x, y), axes=(0,))])
    gx, gy = grads_of(f, [7.0, -7.0, 5.5], [2.0, 2.0, -2.0])
    np.testing.assert_allclose(gx, [1, 1, 1])
    np.testing.assert_allclose(gy, -np.floor(np.array([3.5, -3.5, -2.75])))


# -- higher order -------------------------------------------------------------------------
def test_hessian_vector_product_closed_form() -> None:
    b = Builder("f")
    x = b.input(F64, "x")
    f = b.build([b.sum(b.mul(b.mul(x, x), x), axes=(0,))])  # sum x^3: H = diag(6x)
    xv, v = np.array([1.0, -2.0, 0.5]), np.array([0.3, 1.0, -2.0])
    h = vjp(grad_dot(f))
    assert h.attrs["grads"] == (0, 1)
    _, hv, gx = run(h, xv, v)
    np.testing.assert_allclose(hv, 6 * xv * v)
    np.testing.assert_allclose(gx, 3 * xv**2)


def test_third_order_of_a_mixed_program() -> None:
    b = Builder("f")
    a = b.input(TensorType("f64", (2, 3)), "a")
    c = b.input(TensorType("f64", (3, 2)), "c")
    m = b.matmul(b.tanh(a), b.exp(c))
    s = b.max(b.transpose(m, perm=(1, 0)), axes=(1,))
    f = b.build([weighted_sum(b, b.emit("add", b.sum(m, axes=(1,)), s))])
    rng = np.random.default_rng(3)
    check_grads(f, [rng.normal(size=(2, 3)), rng.normal(size=(3, 2))], order=3)


def test_checker_catches_a_wrong_rule(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(RULES, "sin", lambda b, op, dy: [b.mul(dy, b.sin(op.operands[0]))])
    b = Builder("f")
    x = b.input(F64, "x")
    f = b.build([weighted_sum(b, b.sin(x))])
    with pytest.raises(AssertionError, match="finite differences"):
        check_grads(f, [np.array([0.1, 0.2, 0.3])])


# -- errors and provenance -----------------------------------------------------------------
def test_missing_op_rule_message(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delitem(RULES, "sinh")
    b = Builder("f")
    x = b.input(F64, "x")
    with b.at("model.py:7"):
        y = b.sinh(x)
    f = b.build([b.sum(y, axes=(0,))])
    with pytest.raises(MissingRuleError) as e:
        vjp(f)
    assert "op 'sinh' (operands: f64[3]) at model.py:7" in str(e.value)
    assert vjp(f, wrt=[]).attrs["grads"] == ()  # not needed, no error


def test_provenance_of_every_reverse_op() -> None:
    b = Builder("f")
    x, y = b.input(F64, "x"), b.input(F64, "y")
    with b.at("model.py:3"):
        z = b.mul(x, b.exp(y))
    f = b.build([b.sum(z, axes=(0,))])
    text = print_function(vjp(f))
    assert "= exp %1 : f64[3]  # model.py:3" in text
    assert "%8 = mul %7, %2 : f64[3]  # adjoint of %3 via rule mul" in text
    assert "# adjoint of %2 via rule exp" in text
    assert all("# adjoint of %" in line for line in reverse_ops(f, vjp(f)))


def test_print_parse_round_trip() -> None:
    b = Builder("f")
    x = b.input(TensorType("f64", (2, 3)), "m.W")
    k = b.input(TensorType("i64", (2,)), "k")
    with b.at("model.py:9"):
        g = b.gather(b.pad(x, low=(0, 1), high=(1, 0), interior=(0, 1)), k, axis=0)
        y = b.max(b.maximum(g, b.const(np.linspace(0, 1, 12).reshape(2, 6))), axes=(1,))
    f = b.build([b.sum(b.prod(b.concatenate(y, y, axis=0), axes=(0,)), axes=())])
    for fn in (vjp(f), vjp(grad_dot(f))):
        text = print_function(fn)
        assert print_function(parse(text)) == text


# -- calls of user primitives ----------------------------------------------------------------
def logistic_body(key: str) -> Function:
    """A primitive ``logistic(x, s) = 1 / (1 + exp(-x * s))``."""
    b = Builder(key.replace(".", "_"))
    x, s = b.input(F64, "x"), b.input(F64, "s")
    one = full_like(b, x, 1.0)
    y = b.reciprocal(b.emit("add", one, b.exp(b.neg(b.mul(x, s)))))
    return b.build([y], attrs={"primitive": key, "argnames": ("x", "s")})


def calling(callee: Function, s_value: np.ndarray | None = None) -> Function:
    """``sum(w * callee(x * x, s))``; ``s`` is an input, or a constant when given."""
    b = Builder("model")
    x = b.input(F64, "x")
    s = b.input(F64, "s") if s_value is None else b.const(s_value)
    with b.at("model.py:12"):
        (y,) = b.call(callee, b.mul(x, x), s)
    return b.build([weighted_sum(b, y)])


@pytest.fixture
def clean_registry() -> Iterator[None]:
    rules, nodiff = dict(registry.CALL_RULES), dict(registry.NODIFF_ARGS)
    yield
    registry.CALL_RULES.clear()
    registry.CALL_RULES.update(rules)
    registry.NODIFF_ARGS.clear()
    registry.NODIFF_ARGS.update(nodiff)


def logistic_rule(b: Builder, op: object, callee: Function, dys: list[Value]) -> list[Value]:
    (y,), (_, s) = op.results, op.operands  # type: ignore[attr-defined]
    dy = dys[0]
    dydx = b.mul(b.mul(y, b.sub(full_like(b, y, 1.0), y)), s)
    return [b.mul(dy, dydx), None]


def test_call_rule_and_nodiff_arg(clean_registry: None) -> None:
    rule: CallRule = logistic_rule  # type: ignore[assignment]
    register_call_rule("tests.logistic", rule)
    register_nodiff("tests.logistic", 1)
    f = calling(logistic_body("tests.logistic"))
    rng = np.random.default_rng(0)
    x, s = rng.normal(size=3), rng.normal(size=3)
    g = check_grads(f, [x, s])
    assert g.attrs["grads"] == (0,)
    # second order: the rule's ops and the call inside them are differentiated again
    check_grads(calling(logistic_body("tests.logistic"), s), [x], order=2)
    assert "# adjoint of %3 via rule tests.logistic" in print_function(g)
    text = print_function(g)
    assert print_function(parse(text)) == text


def test_call_without_rule_names_primitive_and_prints_stub(clean_registry: None) -> None:
    f = calling(logistic_body("mymod.logistic"))
    with pytest.raises(MissingRuleError) as e:
        vjp(f)
    assert str(e.value) == (
        "no derivative rule for primitive 'mymod.logistic' (operands: f64[3], f64[3]) "
        "at model.py:12\nwrite one per argument:\n\n"
        '    @yota.diffrule(logistic, "x")\n'
        "    def _(x, s, *, y, dy):\n"
        "        return ...  # the cotangent of x, given output y and its cotangent dy\n\n"
        '    @yota.diffrule(logistic, "s")\n'
        "    def _(x, s, *, y, dy):\n"
        "        return ...  # the cotangent of s, given output y and its cotangent dy")
    register_nodiff("mymod.logistic", 1)
    with pytest.raises(MissingRuleError, match='write one:\n\n    @yota.diffrule'):
        vjp(f)
    register_nodiff("mymod.logistic", "x")  # by name
    assert vjp(f).attrs["grads"] == ()  # every argument is nodiff: no rule needed


def test_stub_lists_primitive_kwargs(clean_registry: None) -> None:
    body = logistic_body("m.scaled").replace(attrs={
        "primitive": "m.scaled", "argnames": ("x", "s"), "kwargs": {"alpha": 2.0}})
    register_nodiff("m.scaled", 1)
    with pytest.raises(MissingRuleError, match=r"def _\(x, s, \*, alpha, y, dy\):"):
        vjp(calling(body))


def test_call_rule_with_a_wrong_cotangent_type(clean_registry: None) -> None:
    register_call_rule("tests.bad", lambda b, op, callee, dys: [b.sum(dys[0], axes=(0,)),
                                                                dys[0]])
    with pytest.raises(AutodiffError, match="'tests.bad' gave a cotangent of type f64"):
        vjp(calling(logistic_body("tests.bad")))


def test_docstring_examples() -> None:
    for mod in (sweep, registry, check_module):
        assert doctest.testmod(mod).failed == 0
