"""Loops: a body function run ``length`` times, threading carried values from one step
to the next and reading / writing one slice of stacked arrays per step.

    %hT, %ys = loop %h0, %xs, %W {callee = "loop_0", carries = 1, length = 400,
                                  reverse = false, stacked = 1} : f64[16,64], f64[400]

The operands are, in order: the ``carries`` initial carried values, the ``stacked``
arrays read one slice per step (axis 0 has ``length`` entries), and the loop-invariant
values every step reads whole. The body ``@loop_0`` takes one input per operand (a
carried value, the step's slice ``xs[i]``, an invariant) and returns the next carried
values, then the step's outputs. The op's results are the carried values after the last
step, then each step output stacked along a new axis 0 (``ys[i]`` is step ``i``'s).

With ``reverse = true`` the steps run ``i = length-1, ..., 0``: slice ``i`` is read and
written at step ``i`` all the same (the reverse sweep of a loop's gradient is one).

A loop of ``length = 0`` returns its initial carried values and empty stacks.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from ..errors import GuardFailed, IRTypeError, VerifyError
from ..types import TensorType
from .table import OpDef, a_bool, a_str, an_int, register, runs_callee


@dataclass(frozen=True)
class LoopShape:
    """How a loop op's operands and results split into carried, stacked and invariant."""

    length: int
    carries: int
    stacked: int
    reverse: bool

    @staticmethod
    def of(attrs: dict[str, Any]) -> LoopShape:
        return LoopShape(int(attrs["length"]), int(attrs["carries"]), int(attrs["stacked"]),
                         bool(attrs["reverse"]))

    def split_operands(self, xs: Sequence[Any]) -> tuple[list[Any], list[Any], list[Any]]:
        """(carried, stacked, invariant) operands (or body inputs)."""
        c, s = self.carries, self.carries + self.stacked
        return list(xs[:c]), list(xs[c:s]), list(xs[s:])

    def steps(self) -> range:
        return range(self.length - 1, -1, -1) if self.reverse else range(self.length)


def _check_counts(shape: LoopShape, body: Any) -> None:
    n_in, n_out = len(body.inputs), len(body.outputs)
    if shape.length < 0 or shape.carries < 0 or shape.stacked < 0:
        raise VerifyError(f"loop of @{body.name}: length, carries and stacked must be >= 0")
    if shape.carries + shape.stacked > n_in or shape.carries > n_out:
        raise VerifyError(f"loop of @{body.name}: {shape.carries} carried and "
                          f"{shape.stacked} stacked operands, but the body takes {n_in} "
                          f"inputs and returns {n_out} outputs")


def loop_types(attrs: dict[str, Any], body: Any
               ) -> tuple[tuple[TensorType, ...], tuple[TensorType, ...]]:
    """The operand types and result types a loop op running ``body`` has."""
    shape = LoopShape.of(attrs)
    _check_counts(shape, body)
    ins, outs = body.input_types, body.output_types
    for k in range(shape.carries):
        if ins[k] != outs[k]:
            raise VerifyError(f"loop of @{body.name}: carried value {k} enters the body as "
                              f"{ins[k]} but leaves it as {outs[k]}")
    n = shape.length
    operands = tuple(TensorType(t.dtype, (n,) + t.shape) if shape.carries <= k <
                     shape.carries + shape.stacked else t for k, t in enumerate(ins))
    results = outs[:shape.carries] + tuple(TensorType(t.dtype, (n,) + t.shape)
                                           for t in outs[shape.carries:])
    return operands, results


def run_loop(attrs: dict[str, Any], body: Any, xs: Sequence[np.ndarray],
             run: Callable[..., list[np.ndarray]]) -> list[np.ndarray]:
    """The reference semantics: ``run(body, *inputs)`` once per step."""
    shape = LoopShape.of(attrs)
    carried, stacked, inv = shape.split_operands(xs)
    outs = body.output_types[shape.carries:]
    ys = [np.empty((shape.length,) + t.shape, dtype=t.dtype) for t in outs]
    for i in shape.steps():
        try:
            res = run(body, *carried, *[s[i] for s in stacked], *inv)
        except GuardFailed as e:
            raise e.in_step(i, shape.length) from None
        carried = list(res[:shape.carries])
        for y, v in zip(ys, res[shape.carries:], strict=True):
            y[i] = v
    return carried + ys


register(OpDef("loop", None, lambda types, attrs: _no_infer(), runs_callee,
               attrs={"callee": a_str, "length": an_int, "carries": an_int,
                      "stacked": an_int, "reverse": a_bool},
               min_in=0, calls=True, callee_types=loop_types, run_callee=run_loop))


def _no_infer() -> TensorType:
    raise IRTypeError("'loop' result types come from its body (the callee); "
                      "build it with yota.ir.loops.loop_op")
