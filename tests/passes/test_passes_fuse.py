"""Fusion and matmul batching on the issue's example gradients, and the kernel contract."""

from __future__ import annotations

from collections import Counter

import numpy as np
import pytest
from support import precision
from support.irgen import (
    example_inputs,
    gemm_shapes,
    mlp_loss,
    rnn_loss,
    same_results,
    w2_loss,
)
from yota.ir import VerifyError, parse, run, verify
from yota.ir.autodiff import vjp
from yota.ir.passes import PassContext, optimize

EXACT = PassContext(reorder_matmul=False)


def test_elementwise_gradient_is_one_kernel_reading_each_input_once() -> None:
    g = vjp(w2_loss(1000))
    opt = optimize(g, ctx=EXACT)
    kernels = [op for op in opt.ops if op.name == "fused"]
    assert 1 <= len(kernels) <= 2
    assert [op.name for op in opt.ops if op.name != "const"] == ["fused"] * len(kernels)
    for k in kernels:
        assert len(set(k.operands)) == len(k.operands)
        assert set(k.operands) <= set(g.inputs)
    args = example_inputs(g, np.random.default_rng(1))
    assert same_results(run(g, *args), run(opt, *args)) is None


def test_mlp_gradient_fuses_bias_activation_and_softmax() -> None:
    f = mlp_loss()
    g = vjp(f, list(range(6)))
    opt = optimize(g, ctx=EXACT)
    names = Counter(op.name for op in opt.ops)
    assert names["matmul"] == 8  # 3 forward, 2 input gradients, 3 weight gradients
    assert 6 <= names["fused"] <= 10
    for name in ("tanh", "exp", "sum_to", "broadcast"):
        assert names[name] == 0
    args = example_inputs(f, np.random.default_rng(2))
    assert same_results(run(g, *args), run(opt, *args)) is None


def test_rnn_gradient_batches_input_projections_and_weight_gradients() -> None:
    f = rnn_loss(steps=20, hidden=64, batch=8, inp=32)
    g = vjp(f, [0, 1, 2])
    opt = optimize(g)
    before, after = Counter(gemm_shapes(g)), Counter(gemm_shapes(opt))
    # 20 steps: h @ W.T (20), dh @ W (19), x_t @ U.T (20), x_t.T @ dz_t (20), h.T @ dz_t (20)
    assert before == {"8x64x64": 39, "8x32x64": 20, "32x8x64": 20, "64x8x64": 20}
    assert after == {"8x64x64": 39,  # the recurrence stays step by step
                     "160x32x64": 1,  # x_t @ U.T for all t: one GEMM over T*B rows
                     "32x160x64": 1, "64x160x64": 1}  # dU and dW summed over t: one each
    args = example_inputs(f, np.random.default_rng(3))
    assert precision.programs_mismatch(g, opt, args) is None


KERNEL = """
func @k(%0: f32[4], %1: f32[4,4]) -> ({out}) attributes {{domain = [4]{axes}}} {{
  {body}
  return {ret}
}}

func @f(%0: f32[4], %1: f32[4,4]) -> ({out}) {{
  %2 = fused %0, %1 {{callee = "k"}} : {out}
  return %2
}}
"""


@pytest.mark.parametrize("body, ret, out, axes, message", [
    ("%2 = matmul %1, %1 : f32[4,4]", "%2", "f32[4,4]", "", "domain shape"),
    ("%2 = sum %1 {axes = [0]} : f32[4]", "%2", "f32[4]", ", reduce_axes = [0]", "reduce a"),
    ("%2 = sum %0 {axes = [0]} : f32[]\n  %3 = neg %2 : f32[]", "%3", "f32[]",
     ", reduce_axes = [0]", "reads a reduction"),
    ("%2 = neg %0 : f32[4]", "%0", "f32[4]", "", "returns an input"),
])
def test_verifier_enforces_the_kernel_contract(body: str, ret: str, out: str, axes: str,
                                               message: str) -> None:
    text = KERNEL.format(body=body, ret=ret, out=out, axes=axes)
    with pytest.raises(VerifyError, match=message):
        verify(parse(text))


def test_a_valid_kernel_runs_in_the_interpreter() -> None:
    text = KERNEL.format(body="%2 = neg %0 : f32[4]\n  %3 = sum %2 {axes = [0]} : f32[]",
                         ret="%3", out="f32[]", axes=", reduce_axes = [0]")
    f = verify(parse(text))
    assert run(f, np.arange(4, dtype=np.float32), np.zeros((4, 4), np.float32))[0] == -6
