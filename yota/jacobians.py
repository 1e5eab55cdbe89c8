"""``yota.jacobian`` and ``yota.hessian``: whole derivative matrices, each one compiled
program (``yota.ir.autodiff.jacobian``: basis vectors pushed forward or pulled back, all
at once through vmap), cached and replayed like ``yota.grad``'s (``yota.transforms``)."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from yota.ir.core import Function

from . import structs, tracing
from .tape import Tape
from .transforms import (
    MISS,
    Request,
    TransformError,
    _leaves,
    argnums_of,
    check_scalar,
    fast_call,
    is_float_leaf,
    leaf_paths,
    output_floats,
    run,
    tangent_structure,
)
from .validate import check_callable

__all__ = ["jacobian", "hessian"]

MODES = ("auto", "fwd", "rev")
Paths = list[tuple[int, tuple[Any, ...], Any]]


def jacobian(f: Callable[..., Any], *args: Any, argnums: int | Sequence[int] = 0,
             mode: str = "auto", backend: str | None = None) -> Any:
    """The Jacobian of ``f`` at ``args`` with respect to ``args[argnums]``: for an array
    result and an array argument, an array of shape ``result.shape + arg.shape``.

    A structured argument gives its structure with a block at each float leaf (None at
    the others); a structured result gives its structure of those; a tuple of
    ``argnums`` gives a tuple, one per argument. ``mode``: ``"fwd"`` pushes one basis
    tangent per element of the arguments through ``f`` (a batched jvp), ``"rev"`` pulls
    one basis cotangent per element of the result back (a batched vjp); both are one
    compiled program. ``"auto"`` (default) picks the one with fewer basis vectors.

    >>> import numpy as np, yota
    >>> yota.jacobian(lambda x: x ** 2, np.array([1.0, 2.0]))
    array([[2., 0.],
           [0., 4.]])
    """
    check_callable(f, "jacobian")
    if mode not in MODES:
        raise TransformError(f"yota.jacobian: mode must be one of {MODES}, not {mode!r}")
    nums = argnums_of(argnums, len(args), "jacobian")
    done, fast = fast_call(f, ("jacobian", nums, mode, backend), args)
    if done is not MISS:
        return done
    paths = leaf_paths(tracing.detach(args))
    wrt = _wrt(paths, nums)

    def build(tape: Tape, fn: Function) -> Function:
        from yota.ir.autodiff.jacobian import jacfwd, jacrev

        outs = _float_outputs(tape, "jacobian")
        n_in = sum(fn.inputs[i].type.size for i in wrt)
        n_out = sum(fn.outputs[o].type.size for o in outs)
        fwd = mode == "fwd" or (mode == "auto" and n_in <= n_out)
        return (jacfwd if fwd else jacrev)(fn, wrt, outs)

    def finish(tape: Tape, outs: list[Any]) -> Any:
        flt = output_floats(tape)
        it = iter(outs)
        blocks = [{i: next(it) for i in wrt} if fl else None for fl in flt]
        per_out = [None if b is None else _per_args(args, nums, paths, b, argnums)
                   for b in blocks]
        return tangent_structure(tape.result, iter(per_out), scalars=False)

    req = Request(f, "jacobian", ("jacobian", tuple(wrt), mode), args, _leaves(args), build,
                  finish, backend, fast=fast)
    return run(req)


def hessian(f: Callable[..., Any], *args: Any, argnums: int | Sequence[int] = 0,
            backend: str | None = None) -> Any:
    """The Hessian of scalar ``f`` at ``args`` with respect to ``args[argnums]``: for an
    array argument, an array of shape ``arg.shape + arg.shape``; for a structured one,
    its structure whose leaves are structures of blocks (``H[leaf_i][leaf_j]``); a tuple
    of ``argnums`` gives, as JAX's ``jacfwd(jacrev(f, argnums), argnums)``, a tuple over
    the arguments of structures whose leaves are tuples over the arguments of structures
    of blocks. Forward over reverse: the Jacobian of the gradient by batched jvps, one
    compiled program.

    >>> import numpy as np, yota
    >>> yota.hessian(lambda x: np.sum(x ** 3), np.array([1.0, 2.0]))
    array([[ 6.,  0.],
           [ 0., 12.]])
    """
    check_callable(f, "hessian")
    nums = argnums_of(argnums, len(args), "hessian")
    done, fast = fast_call(f, ("hessian", nums, backend), args)
    if done is not MISS:
        return done
    paths = leaf_paths(tracing.detach(args))
    wrt = _wrt(paths, nums)

    def build(tape: Tape, fn: Function) -> Function:
        from yota.ir.autodiff.jacobian import hessian as ir_hessian

        check_scalar(tape, "hessian")
        return ir_hessian(fn, wrt)

    def finish(tape: Tape, outs: list[Any]) -> Any:
        it = iter(outs)
        rows = {i: {k: next(it) for k in wrt} for i in wrt}
        per = {i: _per_args(args, nums, paths, rows[i], argnums) for i in wrt}
        return _per_args(args, nums, paths, per, argnums)

    req = Request(f, "hessian", ("hessian", tuple(wrt)), args, _leaves(args), build, finish,
                  backend, fast=fast)
    return run(req)


def _wrt(paths: Paths, nums: tuple[int, ...]) -> list[int]:
    wrt = [k for k, (a, _, leaf) in enumerate(paths) if a in nums and is_float_leaf(leaf)]
    if not wrt:
        raise TransformError(f"argument(s) {list(nums)} have no float leaf to differentiate "
                             "with respect to")
    return wrt


def _float_outputs(tape: Tape, what: str) -> list[int]:
    outs = [j for j, fl in enumerate(output_floats(tape)) if fl]
    if not outs:
        raise TransformError(f"yota.{what}: {tape.fname} returns no float array")
    return outs


def _per_args(args: tuple[Any, ...], nums: tuple[int, ...], paths: Paths,
              values: dict[int, Any], argnums: int | Sequence[int]) -> Any:
    """For each argument in ``nums``, its structure with ``values[leaf index]`` at each
    leaf (None where absent); one structure for an int ``argnums``, else a tuple."""
    index = {(a, p): k for k, (a, p, _) in enumerate(paths)}
    res = tuple(structs.rebuild(args[a], _filler(a, index, values), leaf=_leaf)
                for a in nums)
    return res[0] if isinstance(argnums, int) else res


def _filler(a: int, index: dict[tuple[int, Any], int], values: dict[int, Any]
            ) -> Callable[[Any, Any], Any]:
    return lambda path, _: values.get(index.get((a, path), -1))


def _leaf(x: Any) -> bool:
    return structs.is_leaf(x) or structs.is_traced(x)
