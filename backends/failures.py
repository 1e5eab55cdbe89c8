"""Failure records: what generated code reports when a guard does not hold, an index is
out of range or a LAPACK routine fails on its values (``"linalg"``: ``info > 0``, a
matrix that is singular or not positive definite, an eigen/SVD iteration that did not
converge), and the error each one raises.

Lowering numbers the records of a program (code ``k`` is record ``k - 1``); at run time
the code stops at the first failure and leaves its code and the offending value in the
status words (the value at byte 8); ``raise_failure`` turns them into the exception the
reference interpreter raises, with the same message.
"""

from __future__ import annotations

from typing import Any, NoReturn

import numpy as np
from yota.ir.core import Op
from yota.ir.errors import GuardFailed, YotaError
from yota.ir.interpreter import _guard_message
from yota.ir.ops.lapack import linalg_error

LAPACK_MISSING = -1000  # the info an AOT library's LAPACK shim reports: no LAPACK found
STEP_WORD = 16  # where a failure inside loops finds its steps (outermost first, i64 each)


class IndexOutOfRange(YotaError, IndexError):
    """A ``gather``/``scatter_add`` index is outside its axis."""


def guard_record(op: Op, op_index: int) -> dict[str, Any]:
    """The record of guard ``op`` (the ``op_index``-th op of its function)."""
    return {"kind": "guard", "attrs": {"kind": op.attrs["kind"],
                                       "expected": _plain(op.attrs["expected"])},
            "loc": op.loc, "index": op_index, "dtype": op.operands[0].dtype.str}


def index_record(op: Op, op_index: int, m: int) -> dict[str, Any]:
    """The record of index array ``m`` of ``gather``/``scatter_add`` ``op``."""
    axis = op.attrs["axis"] + m
    big = op.result if op.name == "scatter_add" else op.operands[0]
    return {"kind": "index", "axis": axis, "size": big.shape[axis], "loc": op.loc,
            "index": op_index}


# routines that report a NaN in their input as an illegal argument: (routine, info)
NAN_INFO = {"gesdd": -4}


def linalg_record(op: Op, op_index: int, routine: str) -> dict[str, Any]:
    """The record of LAPACK ``routine`` called for linear-algebra ``op``; the value is
    the routine's ``info``."""
    return {"kind": "linalg", "op": op.name, "routine": routine, "loc": op.loc,
            "index": op_index, "nan_info": NAN_INFO.get(routine, 0)}


def linalg_failure(rec: dict[str, Any], info: int) -> YotaError:
    """The error of a failed LAPACK call: ``info > 0`` is the interpreter's
    ``LinAlgError``, and so is the ``info`` of a NaN input (``gesdd``'s -4: NumPy
    raises on every nonzero ``info``); another negative ``info`` is an argument LAPACK
    rejected (a bug here)."""
    if info > 0 or (info < 0 and info == rec.get("nan_info")):
        return linalg_error(rec["op"], rec["loc"])
    where = f" at {rec['loc']}" if rec.get("loc") else ""
    if info == LAPACK_MISSING:
        return YotaError(f"np.linalg '{rec['op']}'{where}: no LAPACK routine "
                         f"{rec['routine']} was found (set YOTA_BLAS to an ILP64 OpenBLAS, "
                         "such as NumPy's bundled libscipy_openblas64_)")
    return YotaError(f"LAPACK {rec['routine']} rejected its argument {-info} "
                     f"(np.linalg '{rec['op']}'{where}): a bug in Yota, please report it")


def raise_failure(rec: dict[str, Any], status: Any) -> NoReturn:
    """Raise the error record ``rec`` describes; ``status``: the status words (bytes or a
    uint8 array), the offending value at byte 8."""
    if rec["kind"] == "linalg":
        raise linalg_failure(rec, int(np.frombuffer(status, np.int64, count=1, offset=8)[0]))
    if rec["kind"] == "callback":  # an opaque primitive raised: its kept exception
        from .callback import failure

        raise failure(rec, int(np.frombuffer(status, np.int64, count=1, offset=8)[0]))
    if rec["kind"] == "guard":
        value = np.frombuffer(status, np.dtype(rec["dtype"]), count=1, offset=8)[0]
        e = GuardFailed(_guard_message(rec["attrs"], value, rec["loc"]),
                        guard_index=rec["index"], value=value)
        loops = rec.get("loops") or []
        steps = np.frombuffer(status, np.int64, count=len(loops), offset=STEP_WORD)
        for n, i in reversed(list(zip(loops, steps.tolist(), strict=True))):
            e = e.in_step(i, n)
        raise e
    value = int(np.frombuffer(status, np.int64, count=1, offset=8)[0])
    where = f" (at {rec['loc']})" if rec.get("loc") else ""
    raise IndexOutOfRange(f"index {value} is out of bounds for axis {rec['axis']} "
                          f"with size {rec['size']}{where}")


def _plain(v: Any) -> Any:
    return v.item() if isinstance(v, np.generic) else v
