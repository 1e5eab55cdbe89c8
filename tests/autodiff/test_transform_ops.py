"""Forward mode (``yota.ir.autodiff.jvp``) and batching (``yota.ir.vmap``) over every op of
the op table: tangents against central differences, batches against a loop over the
examples, on the reference interpreter and (a selection) on the llvm backend; an op
without a rule fails with an error naming it. ``test_every_op_is_covered`` fails when
an op has neither a case in ``transform_cases.py`` nor a reason to be refused.
"""

from __future__ import annotations

import numpy as np
import pytest
from support.transform_cases import CASES, JVP_REFUSED, VMAP_REFUSED, Case, cases_of
from yota.backends import get_backend
from yota.ir import OPS, Builder, Function, MissingRuleError, TensorType, make_op, run, verify
from yota.ir.autodiff.jvp import jvp
from yota.ir.vmap import VmapError, vmap

PARAMS = [pytest.param(c, id=c.name) for op in sorted(OPS) for c in cases_of(op)]
N = 3  # examples per batch


def test_every_op_is_covered() -> None:
    missing = [op for op in sorted(OPS) if not cases_of(op) and op not in JVP_REFUSED]
    assert not missing, f"ops without a case in tests/support/transform_cases.py: {missing}"


def _is_float(a: np.ndarray) -> bool:
    return a.dtype.kind == "f"


def _f32(fn: Function) -> bool:
    return any(r.dtype == np.float32 for op in fn.ops for r in op.results)


def check_jvp(c: Case, backend: str = "interp") -> None:
    rng = np.random.default_rng(0)
    args = c.sample(rng)
    fn = verify(c.build(args))
    j = jvp(fn)
    ts = [rng.standard_normal(a.shape) for a in args if _is_float(a)]
    ex = get_backend(backend).compile(j) if backend != "interp" else \
        (lambda *xs: run(j, *xs))
    out = ex(*args, *ts)
    eps, rtol = (1e-3, 1e-3) if _f32(fn) else (1e-6, 1e-5)
    it = iter(ts)
    dirs = [next(it) if _is_float(a) else None for a in args]
    plus = run(fn, *[a if d is None else a + eps * d for a, d in zip(args, dirs, strict=True)])
    minus = run(fn, *[a if d is None else a - eps * d for a, d in zip(args, dirs, strict=True)])
    n = len(fn.outputs)
    assert j.attrs["tangent_outputs"] == tuple(k for k, v in enumerate(fn.outputs)
                                               if v.dtype.kind == "f")
    for k, o in enumerate(j.attrs["tangent_outputs"]):
        fd = (plus[o].astype(np.float64) - minus[o]) / (2 * eps)
        np.testing.assert_allclose(out[n + k], fd, rtol=rtol, atol=rtol / 10,
                                   err_msg=f"tangent of output {o} of {c.name}")
        np.testing.assert_allclose(out[o], run(fn, *args)[o], rtol=1e-12)


@pytest.mark.parametrize("c", PARAMS)
def test_jvp_matches_finite_differences(c: Case) -> None:
    if c.op in JVP_REFUSED:  # refused by design, with an error that names the op
        with pytest.raises(MissingRuleError, match=c.op):
            check_jvp(c)
        return
    check_jvp(c)


def _batch(c: Case, mixed: bool) -> tuple[list[list[np.ndarray]], list[int | None]]:
    rng = np.random.default_rng(1)
    samples = [c.sample(rng) for _ in range(N)]
    k = len(samples[0])
    axes: list[int | None] = [0] * k
    if mixed:
        axes = [None if i == 0 and k > 1 else samples[0][i].ndim for i in range(k)]
    return samples, axes


def check_vmap(c: Case, mixed: bool, backend: str = "interp") -> None:
    samples, axes = _batch(c, mixed)
    fn = verify(c.build(samples[0]))
    batched = [samples[0][i] if ax is None else np.stack([s[i] for s in samples], axis=ax)
               for i, ax in enumerate(axes)]
    v = vmap(fn, axes, N)
    out = get_backend(backend).compile(v)(*batched) if backend != "interp" else \
        run(v, *batched)
    for e in range(N):
        ex = [samples[0][i] if ax is None else samples[e][i] for i, ax in enumerate(axes)]
        for j, ref in enumerate(run(fn, *ex)):
            np.testing.assert_allclose(out[j][e], ref, rtol=1e-10, atol=1e-12,
                                       err_msg=f"output {j}, example {e} of {c.name}")


@pytest.mark.parametrize("mixed", [False, True], ids=["axis0", "mixed"])
@pytest.mark.parametrize("c", PARAMS)
def test_vmap_matches_a_loop(c: Case, mixed: bool) -> None:
    if c.op in VMAP_REFUSED:
        pytest.skip(f"refused by design: {VMAP_REFUSED[c.op]}")
    check_vmap(c, mixed)


LLVM = [c.name for c in CASES if c.name in (
    "matmul", "gather-2", "scatter", "loop", "solve", "eigh", "guard", "call", "max", "sum_to",
    "broadcast-0d", "callback", "cholesky", "select")]


@pytest.mark.parametrize("name", LLVM)
def test_llvm_runs_the_transformed_programs(name: str) -> None:
    c = next(c for c in CASES if c.name == name)
    if c.op not in JVP_REFUSED:
        check_jvp(c, "llvm")
    check_vmap(c, True, "llvm")


def test_jvp_of_an_op_without_a_rule_names_it() -> None:
    """A bare callback (its opaque primitive's rule lives on the call around it)."""
    c = next(c for c in CASES if c.op == "callback")
    args = c.sample(np.random.default_rng(0))
    with pytest.raises(MissingRuleError, match="opaque primitive .*double.* callback"):
        jvp(c.build(args))


def _fused_fn() -> Function:
    kb = Builder("fused_0")
    x = kb.input(TensorType("f64", (3,)))
    kernel = kb.build([kb.sin(x)], attrs={"domain": [3]})
    b = Builder("f")
    y = b.input(TensorType("f64", (3,)))
    b.callees[kernel.name] = kernel
    op = b.append(make_op(
        "fused", [y], {"callee": "fused_0"}, result_types=kernel.output_types))
    return b.build(list(op.results))


def test_fused_kernels_are_refused_with_the_reason() -> None:
    fn = _fused_fn()
    with pytest.raises(MissingRuleError, match="'fused'"):
        jvp(fn)
    with pytest.raises(VmapError, match="before fusion"):
        vmap(fn, [0], 2)
