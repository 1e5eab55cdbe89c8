"""Golden text of the printed tape and of its IR (``yota.to_ir(tape)``) for a few programs.

In the expected text ``@n`` stands for ``test_tape_golden.py:<line>``, the line ``n``
lines below the program's ``def``: the goldens hold the real source locations and stay
right when the programs move within this file.
"""

from __future__ import annotations

import inspect
import os
import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np
import pytest
from yota.ir import parse, print_function

import yota

HERE = os.path.basename(__file__)


@dataclass
class Linear:
    W: np.ndarray
    b: np.ndarray


@dataclass
class MLP:
    l1: Linear
    l2: Linear


def loss(m, X):  # the README's example, as users write it
    return np.sum(m.W @ X + m.b[:, None])


def mlp(m: MLP, x: np.ndarray, labels: np.ndarray) -> Any:
    h = np.tanh(m.l1.W @ x + m.l1.b[:, None])
    logits = m.l2.W @ h + m.l2.b[:, None]
    logp = logits - np.log(np.sum(np.exp(logits), axis=0, keepdims=True))
    return -np.mean(logp[labels, np.arange(x.shape[1])])


def rnn(W: np.ndarray, xs: np.ndarray, h: np.ndarray) -> Any:
    for x in xs:
        h = np.tanh(W @ h + x)
    return np.sum(h**2)


def guarded(x: np.ndarray, a: float) -> Any:
    if np.max(x) > a:
        x = x / np.max(x)
    return float(np.sum(x)) * a if a > 1.0 else x.mean()


def _f32(*shape: int) -> np.ndarray:
    return np.ones(shape, np.float32)


EXAMPLES: dict[str, tuple[Callable[..., Any], tuple[Any, ...]]] = {
    "linear": (loss, (Linear(np.ones((3, 4)), np.ones(3)), np.ones((4, 5)))),
    "mlp": (mlp, (MLP(Linear(_f32(4, 3), _f32(4)), Linear(_f32(2, 4), _f32(2))), _f32(3, 5),
                  np.array([0, 1, 1, 0, 1]))),
    "loop": (rnn, (np.eye(3), np.ones((2, 3)), np.zeros(3))),
    "guard": (guarded, (np.arange(3.0), 2.0)),
}

TAPES = {
    "linear": """\
Tape for loss (@0)
  inp %1::Linear
  inp %2::f64[4,5]
  %3 = getattr(%1, 'W')::f64[3,4]
  %4 = matmul(%3, %2)::f64[3,5]  # @1
  %5 = getattr(%1, 'b')::f64[3]
  %6 = getitem(%5, (:, None))::f64[3,1]  # @1
  %7 = add(%4, %6)::f64[3,5]  # @1
  %8 = sum(%7)::f64[]  # @1
  return %8""",
    "mlp": """\
Tape for mlp (@0)
  inp %1::MLP
  inp %2::f32[3,5]
  inp %3::i64[5]
  %4 = getattr(%1, 'l1')::Linear
  %5 = getattr(%4, 'W')::f32[4,3]
  %6 = matmul(%5, %2)::f32[4,5]  # @1
  %7 = getattr(%4, 'b')::f32[4]
  %8 = getitem(%7, (:, None))::f32[4,1]  # @1
  %9 = add(%6, %8)::f32[4,5]  # @1
  %10 = tanh(%9)::f32[4,5]  # @1
  %11 = getattr(%1, 'l2')::Linear
  %12 = getattr(%11, 'W')::f32[2,4]
  %13 = matmul(%12, %10)::f32[2,5]  # @2
  %14 = getattr(%11, 'b')::f32[2]
  %15 = getitem(%14, (:, None))::f32[2,1]  # @2
  %16 = add(%13, %15)::f32[2,5]  # @2
  %17 = exp(%16)::f32[2,5]  # @3
  %18 = sum(%17, axis=0, keepdims=True)::f32[1,5]  # @3
  %19 = log(%18)::f32[1,5]  # @3
  %20 = subtract(%16, %19)::f32[2,5]  # @3
  %21 = const(array([0, 1, 2, 3, 4]))::i64[5]
  %22 = getitem(%20, (%3, %21))::f32[5]  # @4
  %23 = mean(%22)::f32[]  # @4
  %24 = negative(%23)::f32[]  # @4
  return %24""",
    "loop": """\
Tape for rnn (@0)
  inp %1::f64[3,3]
  inp %2::f64[2,3]
  inp %3::f64[3]
  %4 = getitem(%2, 0)::f64[3]  # @1
  %5 = matmul(%1, %3)::f64[3]  # @2
  %6 = add(%5, %4)::f64[3]  # @2
  %7 = tanh(%6)::f64[3]  # @2
  %8 = getitem(%2, 1)::f64[3]  # @1
  %9 = matmul(%1, %7)::f64[3]  # @2
  %10 = add(%9, %8)::f64[3]  # @2
  %11 = tanh(%10)::f64[3]  # @2
  %12 = power(%11, 2)::f64[3]  # @3
  %13 = sum(%12)::f64[]  # @3
  return %13""",
    "guard": """\
Tape for guarded (@0)
  inp %1::f64[3]
  inp %2::f64[]{weak}
  %3 = max(%1)::f64[]  # @1
  %4 = greater(%3, %2)::bool[]  # @1
  guard bool(%4) == False  # @1
  %5 = greater(%2, 1.0)::bool[]{weak}  # @3
  guard bool(%5) == True  # @3
  %6 = sum(%1)::f64[]  # @3
  guard float(%6) == 3.0  # @3
  %7 = multiply(3.0, %2)::f64[]{weak}  # @3
  return %7""",
}

IRS = {
    "linear": """\
func @loss(%0: f64[3,4] "m.W", %1: f64[3] "m.b", %2: f64[4,5] "X") -> (f64[]) {
  %3 = matmul %0, %2 : f64[3,5]  # @1
  %4 = reshape %1 {shape = [3, 1]} : f64[3,1]  # @1
  %5 = broadcast %4 {shape = [3, 5]} : f64[3,5]  # @1
  %6 = add %3, %5 : f64[3,5]  # @1
  %7 = sum %6 {axes = [0, 1]} : f64[]  # @1
  return %7
}""",
    "mlp": """\
func @mlp(%0: f32[4,3] "m.l1.W", %1: f32[4] "m.l1.b", %2: f32[2,4] "m.l2.W", \
%3: f32[2] "m.l2.b", %4: f32[3,5] "x", %5: i64[5] "labels") -> (f32[]) {
  %6 = matmul %0, %4 : f32[4,5]  # @1
  %7 = reshape %1 {shape = [4, 1]} : f32[4,1]  # @1
  %8 = broadcast %7 {shape = [4, 5]} : f32[4,5]  # @1
  %9 = add %6, %8 : f32[4,5]  # @1
  %10 = tanh %9 : f32[4,5]  # @1
  %11 = matmul %2, %10 : f32[2,5]  # @2
  %12 = reshape %3 {shape = [2, 1]} : f32[2,1]  # @2
  %13 = broadcast %12 {shape = [2, 5]} : f32[2,5]  # @2
  %14 = add %11, %13 : f32[2,5]  # @2
  %15 = exp %14 : f32[2,5]  # @3
  %16 = sum %15 {axes = [0]} : f32[5]  # @3
  %17 = reshape %16 {shape = [1, 5]} : f32[1,5]  # @3
  %18 = log %17 : f32[1,5]  # @3
  %19 = broadcast %18 {shape = [2, 5]} : f32[2,5]  # @3
  %20 = sub %14, %19 : f32[2,5]  # @3
  %21 = const {value = [0, 1, 2, 3, 4]} : i64[5]
  %22 = gather %20, %5, %21 {axis = 0} : f32[5]  # @4
  %23 = sum %22 {axes = [0]} : f32[]  # @4
  %24 = const {value = 5.0} : f32[]  # @4
  %25 = div %23, %24 : f32[]  # @4
  %26 = neg %25 : f32[]  # @4
  return %26
}""",
    "loop": """\
func @rnn(%0: f64[3,3] "W", %1: f64[2,3] "xs", %2: f64[3] "h") -> (f64[]) {
  %3 = slice %1 {start = [0, 0], step = [1, 1], stop = [1, 3]} : f64[1,3]  # @1
  %4 = reshape %3 {shape = [3]} : f64[3]  # @1
  %5 = reshape %2 {shape = [3, 1]} : f64[3,1]  # @2
  %6 = matmul %0, %5 : f64[3,1]  # @2
  %7 = reshape %6 {shape = [3]} : f64[3]  # @2
  %8 = add %7, %4 : f64[3]  # @2
  %9 = tanh %8 : f64[3]  # @2
  %10 = slice %1 {start = [1, 0], step = [1, 1], stop = [2, 3]} : f64[1,3]  # @1
  %11 = reshape %10 {shape = [3]} : f64[3]  # @1
  %12 = reshape %9 {shape = [3, 1]} : f64[3,1]  # @2
  %13 = matmul %0, %12 : f64[3,1]  # @2
  %14 = reshape %13 {shape = [3]} : f64[3]  # @2
  %15 = add %14, %11 : f64[3]  # @2
  %16 = tanh %15 : f64[3]  # @2
  %17 = square %16 : f64[3]  # @3
  %18 = sum %17 {axes = [0]} : f64[]  # @3
  return %18
}""",
    "guard": """\
func @guarded(%0: f64[3] "x", %1: f64[] "a") -> (f64[]) {
  %2 = max %0 {axes = [0]} : f64[]  # @1
  %3 = gt %2, %1 : bool[]  # @1
  guard %3 {expected = false, kind = "bool"}  # @1
  %4 = const {value = 1.0} : f64[]  # @3
  %5 = gt %1, %4 : bool[]  # @3
  guard %5 {expected = true, kind = "bool"}  # @3
  %6 = sum %0 {axes = [0]} : f64[]  # @3
  guard %6 {expected = 3.0, kind = "float"}  # @3
  %7 = const {value = 3.0} : f64[]  # @3
  %8 = mul %7, %1 : f64[]  # @3
  return %8
}""",
}


def expand(golden: str, f: Callable[..., Any]) -> str:
    """Replace each ``@n`` by ``test_tape_golden.py:<the def line of f + n>``."""
    start = inspect.getsourcelines(f)[1]
    return re.sub(r"@(\d+)\b", lambda m: f"{HERE}:{start + int(m.group(1))}", golden)


@pytest.mark.parametrize("name", sorted(EXAMPLES))
def test_tape_text(name: str) -> None:
    f, args = EXAMPLES[name]
    _, tape = yota.trace(f, *args)
    assert str(tape) == expand(TAPES[name], f)


@pytest.mark.parametrize("name", sorted(EXAMPLES))
def test_ir_text(name: str) -> None:
    f, args = EXAMPLES[name]
    _, tape = yota.trace(f, *args)
    text = print_function(yota.to_ir(tape))
    assert text == expand(IRS[name], f)
    assert print_function(parse(text)) == text


def test_locations_point_at_the_source() -> None:
    """The line numbers in the goldens are the lines holding the code."""
    f = EXAMPLES["mlp"][0]
    lines, start = inspect.getsourcelines(f)
    assert "np.log(np.sum(np.exp(logits)" in lines[3]
    _, tape = yota.trace(f, *EXAMPLES["mlp"][1])
    log_entry = next(e for e in tape.entries if e.fn == "log")
    assert (log_entry.loc.line, log_entry.loc.func) == (start + 3, "mlp")
    assert "np.log(np.sum(np.exp(logits)" in log_entry.loc.source_line()


def test_every_entry_prints_on_one_line() -> None:
    _, tape = yota.trace(lambda x: x @ np.eye(2) + np.full((2, 2, 2), 0.5), np.ones((2, 2)))
    lines = str(tape).splitlines()
    assert len(lines) == len(tape.entries) + 2  # the header and the return
    assert "const(array([[1., 0.], [0., 1.]]))::f64[2,2]" in lines[2]
