"""Fused kernels: ``%a, %b = fused %x, %y {callee = "fused_0"} : f32[128,512], f32[512]``.

A ``fused`` op runs its kernel body, a function in ``fn.callees`` named by ``callee``, on
its operands; its results are the body's outputs (the reference interpreter simply runs
the body). The ``fuse`` pass creates them; the CPU and CUDA backends render each body as
one loop nest / one kernel. A kernel body obeys this contract (``check_kernel``):

- ``attributes {domain = [d0, ...]}`` is the index space the kernel iterates over, and
  ``reduce_axes = [...]`` (present only if the body reduces) the domain axes it sums
  (or maxes, mins) over.
- Each body op is one of:
  - ``const`` with a splat value (every element equal), typed at the domain shape: a
    scalar literal;
  - ``broadcast`` of a body *input* to the domain shape: how that input maps onto the
    index space (NumPy broadcasting rules; an input already of the domain shape is read
    directly at the same index);
  - an elementwise op (unary, binary, ``select``, ``convert``) whose operands and result
    have the domain shape;
  - a reduction ``sum``/``max``/``min`` of a domain-shaped value over ``reduce_axes``;
    a reduction's result is only a body output, never read by another body op.
- Outputs are op results: domain-shaped values, written once per domain element, and
  reduction results, written once per kept index.

So a backend reads each input once per domain element (through its broadcast map),
computes the elementwise ops in registers, and accumulates the reductions.
"""

from __future__ import annotations

from typing import Any

from ..errors import IRTypeError, VerifyError
from ..types import TensorType
from .misc import splat_scalar
from .table import OPS, OpDef, a_str, register, runs_callee

REDUCTIONS = ("sum", "max", "min")


def _fused_infer(types: list[TensorType], attrs: dict[str, Any]) -> TensorType:
    raise IRTypeError("'fused' result types come from its kernel body (the callee)")


register(OpDef("fused", None, _fused_infer, runs_callee, attrs={"callee": a_str}, min_in=0,
               calls=True))


def kernel_domain(body: Any) -> tuple[tuple[int, ...], tuple[int, ...] | None]:
    """The (domain, reduce_axes or None) a kernel body declares."""
    axes = body.attrs.get("reduce_axes")
    return tuple(body.attrs.get("domain", ())), (tuple(axes) if axes is not None else None)


def check_kernel(body: Any) -> None:
    """Raise ``VerifyError`` if ``body`` breaks the kernel-body contract above."""
    if "domain" not in body.attrs:
        raise VerifyError(f"kernel @{body.name} has no 'domain' attribute")
    domain, axes = kernel_domain(body)
    inputs = set(body.inputs)
    reduced = set()
    for op in body.ops:
        where = f"kernel @{body.name}, op '{op.name}'"
        if any(v in reduced for v in op.operands):
            raise VerifyError(f"{where} reads a reduction result")
        _check_kernel_op(op, domain, axes, inputs, where)
        if op.name in REDUCTIONS:
            reduced.update(op.results)
    for v in body.outputs:
        if v in inputs:
            raise VerifyError(f"kernel @{body.name} returns an input")


def _check_kernel_op(op: Any, domain: tuple[int, ...], axes: tuple[int, ...] | None,
                     inputs: set[Any], where: str) -> None:
    if op.name in REDUCTIONS:
        if axes is None or op.attrs["axes"] != axes or op.operands[0].shape != domain:
            raise VerifyError(f"{where} must reduce a {list(domain)} value over "
                              f"reduce_axes {list(axes or ())}")
        return
    if any(r.shape != domain for r in op.results):
        raise VerifyError(f"{where} must give values of the domain shape {list(domain)}")
    if op.name == "broadcast":
        if op.operands[0] not in inputs:
            raise VerifyError(f"{where} must broadcast a kernel input")
    elif op.name == "const":
        if op.attrs["value"].size and splat_scalar(op.attrs["value"]) is None:
            raise VerifyError(f"{where} must be a splat")
    elif not OPS[op.name].elementwise:
        raise VerifyError(f"{where} is not elementwise")
