"""``yota.vmap``: a function over a batch of examples, compiled as one program.

``f`` is traced once, on the first example (the batched leaves' slice 0), and the traced
program is batched by ``yota.ir.vmap``: every op gets the batch axis, weights stay
unbatched, products of batched values by weights become one GEMM over the batch. Random
draws inside ``f`` are drawn per example (as a Python loop over the examples would draw
them, in that order); Python control flow on a batched value must go the same way for
every example (each example is checked; else a ``TransformError`` says where).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from yota.ir.core import Function
from yota.ir.errors import YotaError

from . import structs, tracing
from .lowering import result_leaves
from .program import flatten_args
from .tape import Tape, Var
from .transforms import (
    MISS,
    Request,
    TransformError,
    memo,
    run,
    run_fast,
    tangent_structure,
)
from .validate import check_callable

__all__ = ["vmap"]

Axes = dict[tuple[int, tuple[Any, ...]], "int | None"]  # (argument, path) -> axis


def vmap(f: Callable[..., Any], in_axes: Any = 0, out_axes: Any = 0, *,
         backend: str | None = None) -> Callable[..., Any]:
    """``f`` mapped over a batch: ``vmap(f)(*args)`` is ``f`` applied to each example
    and stacked, computed by one compiled program.

    ``in_axes``: where each argument holds its examples: an int (all arguments), None
    (shared by all examples), or a tuple with one entry per argument, each an int, None,
    or for a structured argument (tuple, list, dict, dataclass) a structure of those
    matching it (a prefix: an int or None applies to everything below it). ``out_axes``:
    where the result's leaves get the batch axis, given likewise over the result's
    structure (None: a leaf that must not depend on the batch).

    It composes with the other transformations and itself:
    ``yota.vmap(yota.autograd.grad(loss), in_axes=(None, 0, 0))(params, X, Y)`` gives
    per-example gradients, one program of batched GEMMs; ``yota.grad`` or ``yota.jvp`` of
    a function calling a vmapped one differentiate through it.

    >>> import numpy as np, yota
    >>> f = yota.vmap(lambda w, x: np.dot(w, x), in_axes=(None, 0))
    >>> f(np.array([1.0, 2.0]), np.array([[1.0, 0.0], [0.0, 1.0], [1.0, 1.0]]))
    array([1., 2., 3.])
    """
    check_callable(f, "vmap")
    table: dict[Any, Any] = {}

    def batched(*args: Any) -> Any:
        key = None
        if tracing.current_context() is None:
            try:
                leaves, key = flatten_args(args)
            except YotaError:
                key = None
            if key is not None:
                out = run_fast(table, key, leaves)
                if out is not MISS:
                    return out
        return _call(f, args, in_axes, out_axes, backend, (table, key) if key else None)

    batched.__name__ = f"vmap_{getattr(f, '__name__', 'f')}".replace("<lambda>", "lambda")
    batched.__yota_source__ = f  # type: ignore[attr-defined]  # (where a trace says f is)
    return batched


def _call(f: Callable[..., Any], args: tuple[Any, ...], in_axes: Any, out_axes: Any,
          backend: str | None, fast: tuple[dict[Any, Any], Any] | None) -> Any:
    values = tracing.detach(args)
    axes = _leaf_axes(values, in_axes)
    size = _batch_size(values, axes)
    example = tuple(structs.rebuild(a, _slicer(i, axes), leaf=structs.is_leaf)
                    for i, a in enumerate(values))
    ordered = [axes[(i, p)] for i, a in enumerate(values) for p, _ in structs.flatten(a)[0]]

    def build(tape: Tape, fn: Function) -> Function:
        from yota.ir.vmap import vmap as ir_vmap

        ins = ordered + [None] * len(tape.captured) + [0] * len(tape.randoms)
        return ir_vmap(fn, ins, size, _out_axes(tape.result, out_axes))

    def finish(tape: Tape, outs: list[Any]) -> Any:
        scalar = memo(tape, f"vmap scalars {out_axes!r}", lambda t: _scalars(t, out_axes))
        if any(scalar):
            outs = [float(v) if sc and isinstance(v, np.ndarray) else v
                    for v, sc in zip(outs, scalar, strict=True)]
        return tangent_structure(tape.result, iter(outs), scalars=False)

    key = ("vmap", size, tuple(ordered), repr(out_axes))
    inputs = [leaf for a in args for _, leaf in structs.flatten(a)[0]] \
        if tracing.current_context() is None else []
    req = Request(f, "vmap", key, example, inputs, build, finish, backend,
                  draws=_draws(size), leaf_args=args, fast=fast)
    return run(req)


def _scalars(tape: Tape, out_axes: Any) -> list[bool]:
    """Which outputs the user gets as Python floats: weak ones that are not batched."""
    oax = _out_axes(tape.result, out_axes)
    weak = [getattr(v, "weak", isinstance(v, float)) for v in result_leaves(tape.result)]
    return [ax is None and w for ax, w in zip(oax, weak, strict=True)]


def _leaf_axes(args: tuple[Any, ...], in_axes: Any) -> Axes:
    """The batch axis (or None) of every dynamic leaf of the arguments."""
    if in_axes is None or isinstance(in_axes, int):
        specs: Sequence[Any] = (in_axes,) * len(args)
    elif isinstance(in_axes, (tuple, list)) and len(in_axes) == len(args):
        specs = in_axes
    else:
        raise TransformError(f"yota.vmap: in_axes must be an int, None, or a tuple with one "
                             f"entry per argument ({len(args)}), not {in_axes!r}")
    out: Axes = {}
    for i, (a, s) in enumerate(zip(args, specs, strict=True)):
        _assign(a, s, i, (), out)
    return out


def _assign(x: Any, spec: Any, argnum: int, path: tuple[Any, ...], out: Axes) -> None:
    if spec is None or (isinstance(spec, int) and not isinstance(spec, bool)):
        for p, _ in structs.flatten(x)[0]:
            out[(argnum, path + p)] = spec
        return
    kids, skids = structs.children(x), structs.children(spec)
    where = structs.format_path(path, f"argument {argnum}")
    if kids is None or skids is None or type(spec) is not type(x) or \
            [k for k, _ in kids] != [k for k, _ in skids]:
        raise TransformError(f"yota.vmap: in_axes for {where} is {spec!r}, which is not an "
                             "int, None, or a structure matching the argument")
    for (k, child), (_, s) in zip(kids, skids, strict=True):
        _assign(child, s, argnum, path + (k,), out)


def _batch_size(args: tuple[Any, ...], axes: Axes) -> int:
    sizes: dict[int, str] = {}
    for (i, path), ax in axes.items():
        if ax is None:
            continue
        leaf = structs.get_path(args[i], path)
        where = structs.format_path(path, f"argument {i}")
        nd = np.ndim(leaf)
        if type(leaf) is float or not -nd <= ax < nd:
            raise TransformError(f"yota.vmap: {where} has {nd} dimensions, no axis {ax} to "
                                 "map over (give None in in_axes for it)")
        sizes.setdefault(np.shape(leaf)[ax], where)
    if not sizes:
        raise TransformError("yota.vmap: no argument is batched (every in_axes is None)")
    if len(sizes) > 1:
        got = ", ".join(f"{w}: {n}" for n, w in sizes.items())
        raise TransformError(f"yota.vmap: the batched arguments have different batch sizes "
                             f"({got})")
    size = next(iter(sizes))
    if size == 0:
        raise TransformError("yota.vmap: the batch is empty (size 0)")
    return size


def _slicer(argnum: int, axes: Axes) -> Callable[[tuple[Any, ...], Any], Any]:
    def first(path: tuple[Any, ...], leaf: Any) -> Any:
        ax = axes.get((argnum, path))
        if ax is None:
            return leaf
        a = np.asarray(leaf)
        return a[(slice(None),) * (ax % a.ndim) + (0,)]
    return first


def _out_axes(result: Any, spec: Any) -> list[int | None]:
    """The batch axis of each output leaf of ``result`` (``out_axes`` over it)."""
    if spec is None or (isinstance(spec, int) and not isinstance(spec, bool)):
        return [spec] * len(result_leaves(result))
    if isinstance(result, (Var, float, int, bool)) or result is None:
        raise TransformError(f"yota.vmap: out_axes {spec!r} is a structure, but the result "
                             "there is one value")
    items = list(result.items()) if isinstance(result, dict) else list(enumerate(result))
    specs = dict(spec.items()) if isinstance(spec, dict) else dict(enumerate(spec)) \
        if isinstance(spec, (list, tuple)) else {}
    if set(specs) != {k for k, _ in items}:
        raise TransformError(f"yota.vmap: out_axes {spec!r} does not match the result's "
                             "structure")
    return [ax for k, r in items for ax in _out_axes(r, specs[k])]


def _draws(size: int) -> Callable[[Tape, bool], list[np.ndarray]]:
    """Random inputs drawn per example, stacked: the trace drew example 0's; each call
    after draws all ``size`` again, example by example."""
    def draws(tape: Tape, first: bool) -> list[np.ndarray]:
        per = [[e.value for e in tape.randoms]] if first else []
        while len(per) < size:
            per.append(tape.draws.replay())
        return [np.stack([p[k] for p in per]) for k in range(len(tape.randoms))]
    return draws
