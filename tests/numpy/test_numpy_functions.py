"""One table of NumPy functions × argument shapes × axes, in the spirit of HIPS autograd's
and JAX's NumPy test suites: building and joining, shape and data movement, products and
contractions.

Each row is a function of float arrays (axes, counts, indices and modes are constants of
the row). For every row:

- values: ``yota.compile``, traced on one input and run on another, equals NumPy on the
  second (dtype, shape and values): float64 on the interp and llvm backends, and on llvm
  with non-contiguous (transposed or strided) inputs; float32 on the interpreter;
- gradients: ``yota.grad`` of a weighted sum of ``sin`` of the results matches central
  finite differences along a random direction (float64) on llvm; on the interpreter the
  gradient program and its own gradient (Hessian-vector products) do;
- CUDA: the gradient programs of every row are compiled through NVRTC (sm_80) and run
  under the CPU emulation of the kernels, matching the reference interpreter.

Shapes include 0-d, empty, size-1 (broadcast) axes, and negative axes. Besides the
table: ``einsum`` on random subscripts, the forms that are refused (each a ``YotaError``
naming the function and the line), and ``np.array`` & co. being NumPy's own outside
traces.
"""

from __future__ import annotations

import random
import warnings
import zlib
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from support.backend_cases import compare  # noqa: E402
from support.gradcheck import check_grad  # noqa: E402
from yota.backends import cuda
from yota.backends.cuda.emulate import emulation_available
from yota.ir import Function
from yota.ir.autodiff import vjp
from yota.ir.autodiff.check import check_grads
from yota.ir.passes import optimize

import yota

Spec = Any  # a shape tuple (float array), ("int", shape, high) or "weak" (a Python float)


@dataclass(frozen=True)
class Row:
    name: str
    fn: Callable[..., Any]
    specs: tuple[Spec, ...]
    grad: bool = True  # False: the result does not depend smoothly on the inputs


def rows(name: str, fn: Callable[..., Any], *specs: tuple[Spec, ...],
         grad: bool = True) -> list[Row]:
    """One row per argument spec: ``fn`` on arrays of those shapes."""
    return [Row(f"{name}-{_label(s)}", fn, s, grad) for s in specs]


def _label(specs: tuple[Spec, ...]) -> str:
    def one(s: Spec) -> str:
        if s == "weak":
            return "py"
        if s and s[0] == "int":
            return "i" + "x".join(map(str, s[1]))
        return "x".join(map(str, s)) or "0d"

    return "_".join(one(s) for s in specs)


def seed_of(name: str) -> int:
    return zlib.crc32(name.encode())


def by_axis(name: str, make: Callable[[Any], Callable[..., Any]], axes: list[Any],
            *specs: tuple[Spec, ...]) -> list[Row]:
    """One row per axis argument and argument spec."""
    return [Row(f"{name}[{a}]-{_label(s)}", make(a), s) for a in axes for s in specs]


# -- the table ---------------------------------------------------------------------------------
def _iterate(x: Any) -> Any:
    return sum(r * (i + 1) for i, r in enumerate(x))


def _unpack(x: Any) -> Any:
    a, b, c = x
    return a * b - c


JOINING = [
    *by_axis("concatenate", lambda ax: lambda a, b: np.concatenate([a, b], axis=ax),
             [0, -1], ((2, 3), (2, 3)), ((1, 3), (1, 3))),
    *by_axis("concatenate", lambda ax: lambda a, b: np.concatenate((a, b), axis=ax),
             [None], ((2, 3), (4,)), ((), ())),
    *rows("concatenate_empty", lambda a, b: np.concatenate([a, b, a[:0]]), ((0, 3), (2, 3)),
          ((0,), (0,))),
    *rows("concatenate_const", lambda a: np.concatenate([a, np.ones((1, 3))], axis=0), ((2, 3),)),
    *by_axis("stack", lambda ax: lambda a, b: np.stack([a, b], axis=ax), [0, 1, -1],
             ((2, 3), (2, 3))),
    *rows("stack_0d", lambda a, b: np.stack((a, b, a)), ((), ())),
    *rows("vstack", lambda a, b: np.vstack([a, b]), ((3,), (3,)), ((2, 3), (1, 3)), ((), ()),
          ((0, 3), (2, 3))),
    *rows("row_stack", lambda a, b: np.row_stack([a, b]), ((3,), (3,))),
    *rows("hstack", lambda a, b: np.hstack((a, b)), ((3,), (2,)), ((2, 3), (2, 1)), ((), ()),
          ((2, 0), (2, 2))),
    *rows("dstack", lambda a, b: np.dstack([a, b]), ((3,), (3,)), ((2, 3), (2, 3)),
          ((2, 3, 1), (2, 3, 2)), ((), ())),
    *rows("column_stack", lambda a, b: np.column_stack([a, b]), ((3,), (3,)), ((3,), (3, 2)),
          ((), ())),
    *by_axis("append", lambda ax: lambda a, b: np.append(a, b, axis=ax), [None],
             ((2, 3), (4,)), ((), (2,))),
    *by_axis("append", lambda ax: lambda a, b: np.append(a, b, axis=ax), [0, -1],
             ((2, 3), (2, 3))),
    *by_axis("split", lambda ax: lambda x: np.split(x, 2, axis=ax), [0, -1], ((4, 6),)),
    *rows("split_indices", lambda x: np.split(x, [1, 1, 4]), ((5, 2),)),
    *rows("array_split", lambda x: np.array_split(x, 3), ((7,),), ((5, 2),), ((2,),)),
    *rows("array_split_axis", lambda x: np.array_split(x, [2, 10], axis=1), ((2, 5),)),
    *rows("hsplit", lambda x: np.hsplit(x, 2), ((4, 6),), ((6,),)),
    *rows("vsplit", lambda x: np.vsplit(x, [1]), ((3, 2),)),
    *rows("dsplit", lambda x: np.dsplit(x, 2), ((2, 1, 4),)),
    *by_axis("concat", lambda ax: lambda a, b: np.concat([a, b], axis=ax), [0, -1, None],
             ((2, 3), (2, 3))),
    *by_axis("unstack", lambda ax: lambda x: np.unstack(x, axis=ax), [0, -1], ((2, 3),),
             ((3, 0),)),
    *rows("atleast_1d", np.atleast_1d, ((),), ((3,),)),
    *rows("atleast_2d", np.atleast_2d, ((),), ((3,),), ((2, 3),)),
    *rows("atleast_3d", np.atleast_3d, ((),), ((3,),), ((2, 3),), ((1, 2, 3),)),
    *rows("atleast_2d_many", lambda a, b: np.atleast_2d(a, b), ((), (3,))),
    *rows("broadcast_arrays", lambda a, b: np.broadcast_arrays(a, b), ((3, 1), (4,)),
          ((), (2,)), ((1, 0), (3, 1))),
    *rows("meshgrid", lambda a, b: np.meshgrid(a, b), ((3,), (4,)), ((1,), ())),
    *rows("meshgrid_ij", lambda a, b, c: np.meshgrid(a, b, c, indexing="ij"),
          ((2,), (3,), (4,))),
    *rows("meshgrid_sparse", lambda a, b: np.meshgrid(a, b, sparse=True), ((3,), (2, 2))),
    *rows("block", lambda a, b: np.block([[a, b], [b, a]]), ((2, 2), (2, 2)), ((), ())),
    *rows("block_1d", lambda a, b: np.block([a, b, 1.0]), ((2,), (3,)), ((0,), ())),
    *rows("block_deep", lambda a, b: np.block([[[a, b]], [[b, a]]]), ((2, 1), (2, 2))),
    *rows("block_rows", lambda a, b: np.block([[a], [b]]), ((3,), (3,))),
    *rows("r_", lambda a, b: np.r_[a, 1.5, b], ((3,), (2,)), ((), ())),
    *rows("r_axis", lambda a, b: np.r_["-1", a, b], ((2, 3), (2, 1))),
    *rows("r_slice", lambda a: np.r_[a, 0:3], ((2,),)),
    *rows("c_", lambda a, b: np.c_[a, b], ((3,), (3,)), ((2, 2), (2,))),
    *rows("array_list", lambda a: np.array([a[0], 2.0, a[-1] * 3]), ((4,),)),
    *rows("array_nested", lambda a, b: np.array([[a, b], [b, 2 * a]]), ((3,), (3,)), ((), ())),
    *rows("array_tuple", lambda a: np.array((a, np.ones(2))), ((2,),)),
    *rows("array_dtype", lambda a: np.array([a, a], dtype=np.float64), ((2,),)),
    *rows("array_ndmin", lambda a: np.array(a, ndmin=3), ((2,),)),
    *rows("asarray", lambda a: np.asarray(a) * 2, ((2, 3),)),
    *rows("asarray_list", lambda a: np.asarray([a, a + 1]), ((),)),
    *rows("asarray_python_float", lambda x, a: np.asarray(a) * x, ((3,), "weak")),
    *rows("array_python_floats", lambda x, a: np.array([a, 2 * a, 1]) * x, ((3,), "weak")),
    *rows("r_python_float", lambda x, a: np.r_[a, x, 1.5], ((3,), "weak")),
    *rows("array_copy", lambda a: np.array(a) + np.ascontiguousarray(a), ((2, 3),)),
    *rows("ascontiguousarray_0d", lambda a: (np.ascontiguousarray(a), np.asanyarray(a)), ((),)),
    *rows("shape_queries", lambda x: x * (np.ndim(x) + np.size(x) + np.shape(x)[0] + len(x)),
          ((3, 2),)),
    *rows("iterate", _iterate, ((3, 2),)),
    *rows("unpack", _unpack, ((3, 2),)),
]

PADS = [1, ((1, 2), (0, 3)), ((3, 4), (2, 5))]
MOVEMENT = [
    *by_axis("pad", lambda w: lambda x: np.pad(x, w), PADS, ((3, 4),)),
    *rows("pad_1d", lambda x: np.pad(x, (2, 1)), ((3,),), ((0,),)),
    *rows("pad_0d", lambda x: np.pad(x, 0), ((),)),
    *rows("pad_values", lambda x: np.pad(x, ((1, 2), (2, 1)), constant_values=((1, 2), (3, 4))),
          ((3, 4),)),
    *rows("pad_traced_value", lambda x: np.pad(x, 1, constant_values=np.mean(x)), ((2, 3),)),
    *rows("pad_traced_values", lambda x: np.pad(x, ((1, 0), (2, 1)), constant_values=(
        (np.min(x), 1.0), (np.max(x), x[0, 0]))), ((2, 3),)),
    *rows("pad_traced_pair", lambda x, v: np.pad(x, 2, constant_values=v), ((2, 3), (2,))),
    *[r for mode in ("edge", "reflect", "symmetric", "wrap") for r in by_axis(
        f"pad_{mode}", lambda w, mode=mode: lambda x: np.pad(x, w, mode=mode), PADS,
        ((3, 4),))],
    *rows("pad_reflect_1", lambda x: np.pad(x, 2, mode="reflect"), ((1, 3),)),
    *by_axis("repeat", lambda ax: lambda x: np.repeat(x, 2, axis=ax), [None, 0, -1], ((2, 3),)),
    *rows("repeat_counts", lambda x: np.repeat(x, [1, 0, 3], axis=1), ((2, 3),)),
    *rows("repeat_counts_flat", lambda x: np.repeat(x, [2, 1, 0, 1]), ((2, 2),)),
    *rows("repeat_0d", lambda x: np.repeat(x, 3), ((),)),
    *rows("repeat_method", lambda x: x.repeat(2, axis=0), ((2, 3),), ((0, 3),)),
    *rows("tile", lambda x: np.tile(x, 2), ((3,),), ((),), ((2, 3),)),
    *rows("tile_reps", lambda x: np.tile(x, (2, 1, 3)), ((2, 3),), ((3,),)),
    *rows("tile_zero", lambda x: np.tile(x, (2, 0)), ((2, 3),)),
    *by_axis("roll", lambda ax: lambda x: np.roll(x, 2, axis=ax), [None, 0, -1],
             ((3, 4),)),
    *rows("roll_many", lambda x: np.roll(x, (1, -5), axis=(0, 1)), ((3, 4),)),
    *rows("roll_same_axis", lambda x: np.roll(x, (1, 2), axis=(1, 1)), ((3, 4),)),
    *rows("roll_empty", lambda x: np.roll(x, 1, axis=0), ((0, 3),)),
    *rows("roll_traced_shift", lambda x: np.roll(x, np.argmax(x)), ((3, 4),)),
    *rows("roll_traced_shift_axis", lambda x: np.roll(x, np.argmin(x[0]) - 2, axis=-1),
          ((3, 4),)),
    *by_axis("flip", lambda ax: lambda x: np.flip(x, ax), [None, 0, -1, (0, 2)], ((2, 3, 4),)),
    *rows("flip_0d", np.flip, ((),)),
    *rows("fliplr", np.fliplr, ((3, 4),), ((2, 1, 2),)),
    *rows("flipud", np.flipud, ((3, 4),), ((3,),)),
    *by_axis("rot90", lambda k: lambda x: np.rot90(x, k), [1, 2, 3, -1], ((3, 4),)),
    *rows("rot90_axes", lambda x: np.rot90(x, 1, axes=(2, 0)), ((2, 3, 4),)),
    *by_axis("rollaxis", lambda a: lambda x: np.rollaxis(x, *a), [(2,), (0, 3), (-1, 1)],
             ((2, 3, 4),)),
    *by_axis("moveaxis", lambda a: lambda x: np.moveaxis(x, *a), [(0, -1), ((0, 1), (2, 0))],
             ((2, 3, 4),)),
    *by_axis("swapaxes", lambda a: lambda x: np.swapaxes(x, *a), [(0, -1)], ((2, 3, 4),)),
    *by_axis("squeeze", lambda a: lambda x: np.squeeze(x, a), [None, 0, (0, -1)],
             ((1, 3, 1),)),
    *by_axis("expand_dims", lambda a: lambda x: np.expand_dims(x, a), [0, -1, (0, 2)],
             ((2, 3),)),
    *rows("expand_dims_0d", lambda x: np.expand_dims(x, (0, -1)), ((),)),
    *rows("permute_dims", lambda x: np.permute_dims(x, (2, 0, 1)), ((2, 3, 4),)),
    *rows("matrix_transpose", lambda x: (np.matrix_transpose(x), np.linalg.matrix_transpose(x)),
          ((2, 3, 4),), ((3, 1),)),
    *rows("linalg.diagonal", lambda x: np.linalg.diagonal(x, offset=-1), ((2, 3, 4),)),
    *rows("linalg.trace", lambda x: np.linalg.trace(x, offset=1), ((2, 3, 4),)),
    *rows("ravel_flatten", lambda x: (np.ravel(x), x.ravel(), x.flatten()), ((2, 3),)),
    *by_axis("tril", lambda k: lambda x: np.tril(x, k), [0, 1, -1], ((3, 4),), ((2, 3, 3),),
             ((4,),)),
    *rows("tril_traced_k", lambda x: np.tril(x, np.argmax(x[0]) - 1), ((3, 4),), ((2, 3, 3),)),
    *rows("triu_traced_k", lambda x: np.triu(x, np.argmin(x[0]) - 1), ((3, 4),)),
    *by_axis("triu", lambda k: lambda x: np.triu(x, k), [0, 2, -1], ((3, 4),), ((1, 2, 2),)),
    *by_axis("diag", lambda k: lambda x: np.diag(x, k), [0, 2, -1], ((3,),), ((3, 4),),
             ((0,),)),
    *by_axis("diagflat", lambda k: lambda x: np.diagflat(x, k), [0, -1], ((2, 2),), ((),)),
    *by_axis("diagonal", lambda a: lambda x: np.diagonal(x, *a), [(), (1,), (-1, 2, 0),
                                                                  (0, -1, -2)], ((2, 3, 4),)),
    *rows("diagonal_method", lambda x: x.diagonal(1), ((3, 4),)),
    *by_axis("trace", lambda a: lambda x: np.trace(x, *a), [(), (1,), (-1,), (0, 1, 2)],
             ((3, 3, 2),)),
    *rows("trace_method", lambda x: x.trace(), ((3, 4),)),
    *by_axis("take", lambda ax: lambda x: np.take(x, [0, 2, -1, 2], axis=ax), [None, 0, -1],
             ((3, 4),)),
    *rows("take_2d_index", lambda x: np.take(x, [[0, 3], [1, 1]], axis=1), ((3, 4),)),
    *rows("take_scalar", lambda x: np.take(x, 1, axis=-1), ((3, 4),)),
    *by_axis("take_mode", lambda m: lambda x: np.take(x, [5, -7, 1], axis=0, mode=m),
             ["wrap", "clip"], ((3, 2),)),
    *rows("take_method", lambda x: x.take([1, 0]), ((2, 2),)),
    *rows("take_traced_index", lambda x: np.take(x, np.argmax(x, axis=0), axis=0), ((3, 4),)),
    *rows("take_int_input", lambda x, i: np.take(x, i, axis=1), ((3, 4), ("int", (2, 2), 4))),
    *by_axis("take_along_axis", lambda ax: lambda x: np.take_along_axis(
        x, np.array([[0, 2], [1, 1], [2, 0]]), axis=ax), [1, -1], ((3, 4),)),
    *rows("take_along_axis_0", lambda x: np.take_along_axis(x, np.array([[2, 0, 1, -1]]), 0),
          ((3, 4),)),
    *rows("take_along_axis_none", lambda x: np.take_along_axis(x, np.array([5, 0]), None),
          ((2, 3),)),
    *rows("take_along_axis_bcast", lambda x: np.take_along_axis(x, np.array([[[1]], [[0]]]), 1),
          ((2, 3, 4),)),
    *rows("take_along_argsort", lambda x: np.take_along_axis(
        x, np.argmax(x, axis=1, keepdims=True), axis=1), ((3, 4),)),
    *by_axis("delete", lambda ax: lambda x: np.delete(x, [0, 2], axis=ax), [None, 1, -1],
             ((3, 4),)),
    *rows("delete_slice", lambda x: np.delete(x, slice(None, None, 2), axis=0), ((5, 2),)),
    *rows("delete_all", lambda x: np.delete(x, [0, 1], axis=0), ((2, 3),)),
    *rows("insert", lambda x, v: np.insert(x, 1, v), ((2, 3), ()), ((1,), ())),
    *rows("insert_empty", lambda x, v: np.insert(x, 0, v), ((0,), (2,))),
    *rows("insert_many", lambda x, v: np.insert(x, [1, 1, 3], v, axis=1), ((2, 3), (3,))),
    *rows("insert_row", lambda x, v: np.insert(x, -1, v, axis=0), ((3, 2), (2,))),
    *rows("insert_const", lambda x: np.insert(x, slice(0, 2), 7.0, axis=-1), ((2, 3),)),
    *rows("resize", lambda x: np.resize(x, (3, 4)), ((2, 3),), ((1,),), ((0,),)),
    *by_axis("compress", lambda ax: lambda x: np.compress([True, False, True], x, axis=ax),
             [None, 1], ((2, 3),)),
    *rows("select", lambda x, y: np.select([x > 0, y > 1], [x, x * y], default=-1.0),
          ((3, 4), (3, 4)), ((3, 1), (4,)), ((), ())),
    *rows("select_traced_default", lambda x, y: np.select([x < 0], [y], x * 2), ((2, 3), (3,))),
    *rows("choose", lambda x, y: np.choose(np.array([[0, 1, 2]]), [x, y, np.ones(3)]),
          ((2, 3), (2, 3)), ((), (3,))),
    *rows("choose_wrap", lambda x, y: np.choose(np.array([3, -1]), (x, y), mode="wrap"),
          ((2,), (2,))),
    *rows("choose_array", lambda x: np.choose(np.array([1, 0, 1]), x), ((2, 3),)),
    *rows("where3", lambda x, y: np.where(x > y, x, y * 2), ((3, 4), (4,)), ((), (2,))),
]

EINSUMS = [
    ("ij,jk->ik", (2, 3), (3, 4)), ("ij,jk", (2, 3), (3, 4)), ("bij,bjk->bki", (5, 2, 3), (5, 3, 4)),
    ("ii", (3, 3)), ("ii->i", (3, 3)), ("iji->j", (3, 2, 3)), ("ij->", (3, 4)),
    ("ij->j", (3, 4)), ("ij", (3, 4)), ("ji", (3, 4)), ("i,j->ij", (3,), (4,)),
    ("i,i", (3,), (3,)), ("ij,ij->ij", (3, 4), (3, 4)), ("ij,ji->", (3, 4), (4, 3)),
    ("...ij,...jk->...ik", (2, 1, 3, 4), (5, 4, 2)), ("i...,i...", (3, 2), (3, 1)),
    ("...", ()), (",i->i", (), (3,)), ("i->", (0,)), ("ij,jk", (2, 0), (0, 3)),
    ("ij,jk,kl->il", (2, 3), (3, 4), (4, 5)), ("abc,cd,bd->ad", (2, 3, 4), (4, 5), (3, 5)),
    ("ab,cd->dbca", (2, 1), (3, 2)), ("iij->ji", (2, 2, 3)), ("ijk,ikl->ijl", (2, 1, 3), (1, 3, 2)),
]
CONTRACTIONS = [
    *rows("dot", np.dot, ((2, 3, 4), (5, 4, 6)), ((2, 3, 4), (4,)), ((4,), (2, 4, 3)),
          ((), (2, 3)), ((3,), (3,)), ((2, 3), (3, 4)), ((0, 3), (3, 2)), ((2, 3), ())),
    *rows("dot_method", lambda a, b: a.dot(b), ((2, 3), (3,))),
    *rows("matmul", np.matmul, ((2, 1, 3, 4), (5, 4, 2)), ((4,), (2, 4, 3)), ((3, 4), (4,))),
    *rows("vdot", np.vdot, ((2, 3), (3, 2)), ((1,), (1,))),
    *rows("inner", np.inner, ((2, 3, 4), (5, 4)), ((4,), (2, 3, 4)), ((), (2, 3)),
          ((3,), (3,))),
    *rows("outer", np.outer, ((3,), (4,)), ((2, 2), ()), ((0,), (2,))),
    *rows("tensordot", np.tensordot, ((2, 3, 4), (3, 4, 5))),
    *by_axis("tensordot", lambda ax: lambda a, b: np.tensordot(a, b, axes=ax),
             [0, 1, ([0, 2], [2, 0]), (-1, 0)], ((2, 3, 4), (4, 3, 2))),
    *rows("kron", np.kron, ((2, 3), (4, 5)), ((3,), (2, 2)), ((), (2,)), ((2, 1, 2), (3,))),
    *rows("cross", np.cross, ((3,), (3,)), ((4, 3), (3,)), ((2,), (4, 3)), ((1, 3), (2, 1, 3))),
    *rows("cross_2d", np.cross, ((4, 2), (4, 2))),
    *rows("cross_axes", lambda a, b: np.cross(a, b, axisa=0, axisb=1, axisc=0),
          ((3, 4), (4, 3))),
    *rows("cross_axis", lambda a, b: np.cross(a, b, axis=0), ((3, 2), (3, 2))),
    *rows("vecdot", np.vecdot, ((2, 3), (3,)), ((1,), (4, 1)), ((0, 2), (1, 2))),
    *rows("vecdot_axis", lambda a, b: np.vecdot(a, b, axis=0), ((3, 2), (3, 1))),
    *rows("matvec", np.matvec, ((2, 3, 4), (4,)), ((3, 4), (2, 4))),
    *rows("vecmat", np.vecmat, ((3,), (2, 3, 4)), ((2, 3), (3, 1))),
    *rows("linalg.matmul", np.linalg.matmul, ((2, 3), (3, 4))),
    *rows("linalg.vecdot", lambda a, b: np.linalg.vecdot(a, b, axis=-2), ((3, 2), (3, 2))),
    *rows("linalg.tensordot", lambda a, b: np.linalg.tensordot(a, b, axes=1), ((2, 3), (3, 4))),
    *rows("linalg.outer", np.linalg.outer, ((2,), (3,))),
    *rows("linalg.multi_dot", lambda a, b, c: np.linalg.multi_dot([a, b, c]),
          ((2, 3), (3, 4), (4, 2)), ((3,), (3, 4), (4,))),
    *by_axis("linalg.matrix_power", lambda n: lambda a: np.linalg.matrix_power(a, n),
             [0, 1, 2, 5], ((3, 3),), ((2, 2, 2),)),
    *rows("linalg.cross", np.linalg.cross, ((2, 3), (3,))),
    *[Row(f"einsum[{s}]-{_label(tuple(shapes))}", lambda *a, s=s: np.einsum(s, *a),
          tuple(shapes))
      for s, *shapes in EINSUMS],
    *rows("einsum_optimize", lambda a, b, c: np.einsum("ij,jk,kl->li", a, b, c, optimize=True),
          ((2, 3), (3, 4), (4, 5))),
    *rows("einsum_optimal", lambda a, b, c: np.einsum("abc,cd,bd->ad", a, b, c,
                                                      optimize="optimal"),
          ((2, 3, 4), (4, 5), (3, 5))),
    *rows("einsum_sublists", lambda a, b: np.einsum(a, [0, 1], b, [1, 2], [0, 2]),
          ((2, 3), (3, 4))),
    *rows("einsum_sublist_ellipsis", lambda a, b: np.einsum(a, [Ellipsis, 1], b, [1]),
          ((2, 3), (3,))),
]


# -- issue 30: lists holding traced values, one array where a sequence goes, traced ends ---------
def _ufunc_at(name: str, idx: Any, unary: bool = False) -> Callable[..., Any]:
    """``np.<name>.at`` on a copy of ``x`` (repeated indices applied in NumPy's order)."""
    def f(x: Any, *v: Any) -> Any:
        y = np.exp(x) if name == "power" else x * 1.0
        getattr(np, name).at(y, idx, *v)
        return y

    return f


ODD_PADS = [2, ((1, 2), (0, 3)), ((5, 7), (2, 9))]
REST = [
    *rows("vstack_one", np.vstack, ((3, 2),), ((3,),), ((1, 0),)),
    *rows("hstack_one", np.hstack, ((3, 2),), ((3,),), ((2, 3, 4),)),
    *rows("row_stack_one", lambda x: getattr(np, "row_stack", np.vstack)(x), ((3, 2),)),
    *rows("column_stack_one", np.column_stack, ((3, 2),), ((3,),), ((2, 3, 4),)),
    *rows("dstack_one", np.dstack, ((3, 2),)),
    *rows("stack_one", np.stack, ((3, 2),)),
    *by_axis("concatenate_one", lambda ax: lambda x: np.concatenate(x, axis=ax), [0, -1, None],
             ((3, 2, 4),), ((1, 2, 0),)),
    *rows("mean_list", lambda a, b: np.mean([a, b]), ((3,), (3,)), ((), ())),
    *rows("mean_list_empty", lambda a, b: np.mean([a, b], axis=0), ((0,), (0,))),
    *rows("mean_list_axis", lambda a, b: np.mean([a, 2 * b], axis=-1), ((2, 3), (2, 3))),
    *rows("std_list", lambda a, b: np.std([a, b, 1.5], axis=0), ((), ())),
    *rows("var_list_nested", lambda a, b: np.var([[a, b], [b, a * b]], ddof=1), ((3,), (3,))),
    *rows("norm_list", lambda a, b: np.linalg.norm([a, b]), ((), ()), ((3,), (3,))),
    *rows("norm_list_axis", lambda a, b: np.linalg.norm((a, b, a + b), ord=3, axis=0),
          ((2,), (2,))),
    *rows("sum_list", lambda a, b: np.sum([a, b], axis=0, keepdims=True), ((2, 3), (2, 3))),
    *rows("prod_max_list", lambda a, b: (np.prod((a, b, a)), np.max([a, b], axis=-1)),
          ((2,), (2,))),
    *rows("average_list", lambda a, b: np.average([a, b], axis=0, weights=[0.3, 0.7]),
          ((3,), (3,))),
    *rows("det_list", lambda a, b: np.linalg.det([[a, b], [2 * b, a + 3.0]]), ((), ())),
    *rows("ufunc_list", lambda a, b: (np.exp([a, b]), np.add([a, b], [b, 1.0]),
                                      np.maximum([a, b], 0.5)), ((), ())),
    *rows("ufunc_list_arrays", lambda a, b: (np.exp((a, b)), np.multiply([a, b], [[b], [a]])),
          ((2,), (2,))),
    *rows("take_list", lambda a, b: np.take([a, b, a * b], [2, 0]), ((), ())),
    *rows("take_list_traced_index", lambda a, b: np.take([a, b], np.argmax([a, b])), ((), ())),
    *rows("append_nested", lambda a, b: np.append([[a, b]], [[b, 1.0]], axis=0), ((), ())),
    *rows("append_nested_rows", lambda a, b: np.append(a, [[b[0], 2.0]], axis=0),
          ((2, 2), (2,))),
    *rows("append_flat", lambda a, b: np.append([a, b], [[1.0, b]]), ((), ())),
    *rows("linspace", lambda a, b: np.linspace(a, b, 5), ((), ()), ("weak", ()),
          ((2,), (3, 1))),
    *rows("linspace_noend_axis", lambda a, b: np.linspace(a, b, 4, endpoint=False, axis=-1),
          ((2,), ())),
    *rows("linspace_0_1", lambda a, b: (np.linspace(a, b, 0), np.linspace(a, b, 1)),
          ((), ())),
    *rows("linspace_retstep", lambda a, b: np.linspace(a, b, 3, retstep=True), ((), ())),
    *rows("linspace_start_only", lambda a: np.linspace(a, 2.0, 3, dtype=np.float64), ((),)),
    *rows("logspace", lambda a, b: np.logspace(a, b, 4), ((), ())),
    *rows("logspace_base", lambda a, b: np.logspace(a, b, 3, base=2.0, axis=-1), ((2,), ())),
    *rows("logspace_traced_base", lambda a, b: np.logspace(0.5, 1.5, 3, base=np.exp(b) + a * a),
          ((), ())),
    *rows("geomspace", lambda a, b: np.geomspace(np.exp(a), np.exp(b), 4), ((), ()),
          ((2,), ())),
    *rows("geomspace_negative", lambda a, b: np.geomspace(-np.exp(a), -np.exp(b), 3,
                                                         endpoint=False), ((), ())),
    *[r for mode in ("linear_ramp", "maximum", "minimum", "mean", "median") for r in by_axis(
        f"pad_{mode}", lambda w, mode=mode: lambda x: np.pad(x, w, mode=mode), PADS,
        ((3, 4),))],
    *[r for mode in ("linear_ramp", "mean", "median") for r in rows(
        f"pad_{mode}_1d", lambda x, mode=mode: np.pad(x, (2, 3), mode=mode), ((3,),), ((1,),))],
    *rows("pad_stat_length", lambda x: np.pad(x, ((1, 2), (3, 1)), mode="mean",
                                              stat_length=((1, 2), (2, 3))), ((3, 4),)),
    *rows("pad_maximum_stat_length", lambda x: np.pad(x, 2, "maximum", stat_length=2),
          ((3, 4),)),
    *rows("pad_ramp_end_values", lambda x: np.pad(x, ((2, 1), (1, 3)), "linear_ramp",
                                                  end_values=((1.0, -2.0), (0.5, 3.0))),
          ((3, 4),)),
    *rows("pad_ramp_traced_end", lambda x, e: np.pad(x, 2, "linear_ramp", end_values=(e, 1.0)),
          ((3, 4), ())),
    *[r for mode in ("reflect", "symmetric") for r in by_axis(
        f"pad_{mode}_odd", lambda w, mode=mode: lambda x: np.pad(x, w, mode, reflect_type="odd"),
        ODD_PADS, ((3, 4),), ((1, 3),))],
    *rows("multiply_at", _ufunc_at("multiply", [0, 2, 0, 0]), ((4,), (4,)), ((4, 2), (2,))),
    *rows("divide_at_2d", _ufunc_at("divide", ([0, 1, 0], [2, 2, 2])), ((2, 3), (3,))),
    *rows("minimum_at", _ufunc_at("minimum", [1, 1, 3]), ((4,), ())),
    *rows("maximum_at_slice", _ufunc_at("maximum", (slice(None), [0, 0])), ((3, 2), (3, 2))),
    *rows("power_at", _ufunc_at("power", [2, 0, 2]), ((3,), (3,))),
    *rows("negative_at", _ufunc_at("negative", [1, 1, 2], unary=True), ((3,),)),
    *rows("multiply_at_empty", _ufunc_at("multiply", []), ((3,), (0,))),
]

TABLE = JOINING + MOVEMENT + CONTRACTIONS + REST


# -- inputs and checks ----------------------------------------------------------------------------
def _noncontiguous(a: np.ndarray) -> np.ndarray:
    """``a``'s values in a transposed (2-d and up) or strided (1-d) view."""
    if a.ndim >= 2:
        return np.ascontiguousarray(np.swapaxes(a, 0, -1)).swapaxes(0, -1)
    if a.ndim == 1:
        big = np.zeros(2 * a.shape[0] + 1, a.dtype)
        big[1::2] = a
        return big[1::2]
    return a


def make_args(row: Row, rng: np.random.Generator, dtype: Any = np.float64,
              contiguous: bool = True) -> list[Any]:
    out: list[Any] = []
    for s in row.specs:
        if s == "weak":  # a Python float: traced, and weak in NumPy's promotion
            out.append(float(rng.uniform(0.5, 2.0)))
            continue
        if s and s[0] == "int":
            out.append(rng.integers(0, s[2], s[1]))
            continue
        a = (rng.standard_normal(s) * 1.5).astype(dtype)
        out.append(a if contiguous else _noncontiguous(a))
    return out


def leaves(x: Any) -> list[Any]:
    return [v for item in x for v in leaves(item)] if isinstance(x, (list, tuple)) else [x]


def loss_of(fn: Callable[..., Any]) -> Callable[..., Any]:
    """A scalar that depends on every float element of ``fn``'s results (weights fixed)."""
    def loss(*args: Any) -> Any:
        total: Any = 0.0
        for k, out in enumerate(leaves(fn(*args))):
            if np.asarray(getattr(out, "value", out)).dtype.kind == "f":
                size = int(np.prod(np.shape(out)))  # fixed weights (no draws: f is traced)
                w = (1.0 + 0.5 * np.cos(np.arange(size) * 0.7 + k)).reshape(np.shape(out))
                total = total + np.sum(np.sin(out) * w)
        return total

    return loss


def assert_like_numpy(got: Any, want: Any, rtol: float, where: str) -> None:
    got_l, want_l = leaves(got), leaves(want)
    assert len(got_l) == len(want_l), where
    for i, (g, w) in enumerate(zip(got_l, want_l, strict=True)):
        g, w = np.asarray(g), np.asarray(w)
        assert g.dtype == w.dtype, f"{where}[{i}]: dtype {g.dtype} != {w.dtype}"
        assert g.shape == w.shape, f"{where}[{i}]: shape {g.shape} != {w.shape}"
        np.testing.assert_allclose(g, w, rtol=rtol, atol=rtol, err_msg=f"{where}[{i}]")


IDS = [r.name for r in TABLE]


def test_table_names_are_unique() -> None:
    assert len(set(IDS)) == len(IDS), [n for n in IDS if IDS.count(n) > 1]


@pytest.mark.filterwarnings("ignore::DeprecationWarning")
@pytest.mark.parametrize("row", TABLE, ids=IDS)
def test_values_match_numpy(row: Row) -> None:
    rng = np.random.default_rng(seed_of(row.name))
    # dtypes are decided by the lowering (the interpreter shows them), layouts matter to
    # the native backend
    for dtype, rtol, contiguous, backends in (
            (np.float64, 1e-12, True, ("interp", "llvm")), (np.float64, 1e-12, False, ("llvm",)),
            (np.float32, 1e-5, False, ("interp",))):
        ex = make_args(row, rng, dtype, contiguous)
        new = make_args(row, rng, dtype, contiguous)
        want = row.fn(*new)
        for backend in backends:
            got = yota.compile(row.fn, *ex, backend=backend)(*new)
            assert_like_numpy(got, want, rtol, f"{backend} {np.dtype(dtype)} "
                                               f"{'c' if contiguous else 'nc'}")


GRAD_ROWS = [r for r in TABLE if r.grad]


@pytest.mark.filterwarnings("ignore::DeprecationWarning")
@pytest.mark.parametrize("row", GRAD_ROWS, ids=[r.name for r in GRAD_ROWS])
def test_gradients_match_finite_differences(row: Row) -> None:
    rng = np.random.default_rng(seed_of(row.name))
    args = make_args(row, rng, np.float64, contiguous=False)
    loss = loss_of(row.fn)
    _, g = yota.grad(loss, *args, backend="llvm")  # the interpreter's: test_second_order
    check_grad(loss, args, g)


@pytest.mark.filterwarnings("ignore::DeprecationWarning")
@pytest.mark.parametrize("row", GRAD_ROWS, ids=[r.name for r in GRAD_ROWS])
def test_second_order(row: Row) -> None:
    """The gradient program (on the interpreter), and it differentiated again
    (Hessian-vector products), against finite differences."""
    args = make_args(row, np.random.default_rng(seed_of(row.name) + 1), np.float64)
    _, tape = yota.trace(loss_of(row.fn), *args)
    fn = yota.to_ir(tape)
    wrt = [i for i, v in enumerate(fn.inputs) if v.dtype.kind == "f"]
    check_grads(fn, [np.asarray(a) for a in args], wrt, order=2)


# -- CUDA: every row's gradient program through NVRTC and the CPU emulation ----------------------------
def gradient_program(row: Row) -> tuple[Function, list[np.ndarray]]:
    args = make_args(row, np.random.default_rng(7), np.float64)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        _, tape = yota.trace(loss_of(row.fn), *args)
    fn = yota.to_ir(tape)
    wrt = [i for i, v in enumerate(fn.inputs) if v.dtype.kind == "f"]
    return optimize(vjp(fn, wrt)), [np.asarray(a) for a in args]


@pytest.fixture(scope="module")
def programs() -> list[tuple[str, Function, list[np.ndarray]]]:
    return [(r.name, *gradient_program(r)) for r in GRAD_ROWS]


EMU = emulation_available()
NVRTC = cuda.nvrtc_available()


@pytest.mark.skipif(EMU is not None, reason=f"no CPU emulation of CUDA kernels: {EMU}")
def test_cuda_kernels_emulated_match_interpreter(programs: Any) -> None:
    from yota.backends.cuda.emulate import EmuDevice
    from yota.backends.cuda.lower import module_source

    dev = EmuDevice()
    mods = [cuda.lower(fn, config=dev.cfg) for _, fn, _ in programs]
    kernels = {n: s for m in mods for n, s in m.kernels.items()}
    dev.build(module_source(kernels.values()), list(kernels))
    bad = []
    for name, fn, args in programs:
        msg = compare(fn, args, cuda.compile(fn, device=dev), backend="cuda (emulated)")
        if msg:
            bad.append(f"{name}: {msg}")
    assert not bad, f"{len(bad)} mismatches:\n" + "\n".join(bad[:10])


@pytest.mark.skipif(NVRTC is not None, reason=f"NVRTC unavailable: {NVRTC}")
def test_cuda_kernels_compile_with_nvrtc(programs: Any) -> None:
    from yota.backends.cuda.lower import module_source

    kernels = {n: s for _, fn, _ in programs for n, s in cuda.lower(fn).kernels.items()}
    assert kernels
    cubins = cuda.compile_archs(module_source(kernels.values()), ("sm_80",), fast_compile=True)
    assert all(len(c) > 0 for c in cubins.values())


# -- what is refused, and how ---------------------------------------------------------------------
_EXP = np.exp  # bound before the trace: the ufunc itself (np.exp([a, b]) is traced)


def _multiply_at_argmax(x: Any) -> Any:
    y = x * 1.0
    np.multiply.at(y, np.argmax(x), 2.0)
    return y


REFUSED: list[tuple[str, Callable[..., Any], str]] = [
    ("repeat_traced_counts", lambda x: np.repeat(x, np.argmax(x) + 1), "np.repeat's repeats"),
    ("pad_traced_width", lambda x: np.pad(x, np.argmax(x)), "np.pad's pad_width"),
    ("tile_traced_reps", lambda x: np.tile(x, np.argmax(x) + 1), "np.tile's reps"),
    ("pad_function_mode", lambda x: np.pad(x, 1, mode=lambda v, w, ax, kw: None),
     "a function as the mode"),
    ("multiply_at_traced_indices", _multiply_at_argmax, "traced indices"),
    ("int64_of_an_array", lambda x: np.int64(x), "x.astype(np.int64)"),
    ("r_matrix", lambda x: np.r_["r", x, x], "np.r_['r', ...]"),
    ("where_one_argument", lambda x: x[np.where(x > 0)[0]], "np.where(condition)"),
    ("einsum_subscripts", lambda x: np.einsum("i->j", x), "einsum"),
    ("ufunc_of_list", lambda x: _EXP([x[0], x[1]]), "converted to a plain NumPy array"),
    ("traced_axis", lambda x: np.concatenate([x, x], axis=np.argmax(x[:1])),
     "the axis must be a Python int"),
    ("pad_dict", lambda x: np.pad(x, {0: (1, 1)}), "np.pad with a dict"),
    ("rot90_traced_k", lambda x: np.rot90(np.outer(x, x), np.argmax(x)), "np.rot90's k"),
    ("tensordot_traced_axes", lambda x: np.tensordot(x, x, np.argmax(x[:1]) + 1),
     "np.tensordot's axes"),
    ("diagonal_traced_offset", lambda x: np.diagonal(np.outer(x, x), np.argmax(x[:1])),
     "np.diagonal's offset"),
    ("matrix_power_traced_n", lambda x: np.linalg.matrix_power(np.diag(x + 5),
                                                                np.argmax(x[:1]) + 1),
     "np.linalg.matrix_power's n"),
]


@pytest.mark.parametrize("name, fn, part", REFUSED, ids=[r[0] for r in REFUSED])
def test_refused_with_a_clear_error(name: str, fn: Callable[..., Any], part: str) -> None:
    """A YotaError naming the function and the user's line (at trace or lowering time)."""
    x = np.arange(3.0)
    with pytest.raises(yota.YotaError) as err:
        yota.grad(lambda x: np.sum(fn(x)), x)
    msg = str(err.value)
    assert part in msg and f"{Path(__file__).name}:" in msg, msg


def test_numpy_constructors_are_numpys_outside_traces() -> None:
    """np.array & co. are wrapped only while a trace runs, also when it fails."""
    originals = (np.array, np.asarray, np.r_, np.c_)

    def fails(x: Any) -> Any:
        assert np.array is not originals[0]  # wrapped while tracing
        raise ValueError("boom")

    with pytest.raises(ValueError, match="boom"):
        yota.trace(fails, np.ones(2))
    yota.trace(lambda x: np.array([x, x]), np.ones(2))
    assert (np.array, np.asarray, np.r_, np.c_) == originals


# -- einsum on random subscripts ----------------------------------------------------------------------
def random_einsum(rnd: random.Random) -> tuple[str, list[tuple[int, ...]]]:
    """Subscripts over a few labels (repeats, sums over one operand, implicit or explicit
    output, ellipses of 0-2 broadcast axes) and operand shapes that fit them."""
    size = {c: rnd.randint(1, 3) for c in "abcde"}
    terms = ["".join(rnd.choice("abcde") for _ in range(rnd.randint(0, 3)))
             for _ in range(rnd.randint(1, 3))]
    ell = rnd.random() < 0.3
    specs = ["..." + t if ell and rnd.random() < 0.7 else t for t in terms]
    shapes = []
    for s in specs:
        lead = tuple(rnd.choice([1, 2]) for _ in range(rnd.randint(0, 2))) if "..." in s else ()
        shapes.append(lead + tuple(size[c] for c in s.replace("...", "")))
    if rnd.random() < 0.4:
        return ",".join(specs), shapes
    out = [c for c in sorted(set("".join(terms))) if rnd.random() < 0.5]
    rnd.shuffle(out)
    return ",".join(specs) + "->" + ("..." if ell else "") + "".join(out), shapes


def test_einsum_random_subscripts() -> None:
    rnd, checked = random.Random(15), 0
    while checked < 100:
        sub, shapes = random_einsum(rnd)
        args = [np.random.default_rng(checked).standard_normal(s) for s in shapes]
        opt = rnd.choice([False, True, "optimal"])
        f = lambda *a: np.einsum(sub, *a, optimize=opt)  # noqa: B023, E731
        try:
            want = f(*args)
        except ValueError:  # ellipses that NumPy cannot broadcast
            continue
        checked += 1
        assert_like_numpy(yota.compile(f, *args, backend="interp")(*args), want, 1e-10, sub)
        loss = loss_of(f)
        _, g = yota.grad(loss, *args, backend="interp")
        check_grad(loss, args, g)
