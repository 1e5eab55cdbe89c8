"""The facts that the native entries (``pyentry.py``) and their generated dispatcher
(``pyentry_ir.py``) share: CPython/NumPy object offsets, opcodes of plans, the C functions
the dispatcher calls, and how many arguments it passes."""

from __future__ import annotations

import platform

NAME = "yota_pyentry"

# CPython object layout (64-bit, GIL build): ob_type, ob_size of a variable-size object,
# the first item of a tuple, the item vector of a list, the bytes of a bytes object.
OB_TYPE, OB_SIZE, TUPLE_ITEMS, LIST_ITEMS, BYTES_DATA = 8, 16, 24, 24, 32
ARRAY_DESCR = 56  # PyArrayObject.descr
METH_FASTCALL = 0x0080
FLOAT_VALUE = 16  # PyFloatObject.ob_fval (a dict's ma_used is at OB_SIZE)
WEAKREF_OBJECT = 16  # PyWeakReference.wr_object (None once the referent is gone)
# the most pointer arguments (inputs, outputs, workspace) of a program called (_Gen._kernel)
EXACT_ARGS = 16
PADDED_ARGS = (32, 64) if platform.machine() in ("x86_64", "AMD64") else ()
MAX_ARGS = max((EXACT_ARGS, *PADDED_ARGS))
HEADER = 5  # plan words before the first op: slots, registers, stack depth, None,
# positional arguments

# opcodes (see pyentry_ir._Gen for each one's operand words)
(SEQ, ITEM_T, ITEM_L, ARRAY, IS, EQ, OUT_NEW, OUT_CALL, OUT_SCRATCH, RUN, PUSH_OUT,
 PUSH_FLOAT, PUSH_SCALAR, PUSH_OBJ, LIST, TUPLE, DICT, CALL, INCR, SETATTR,
 RETURN, NEW_OBJECT, REFERENT, NOT_SET, DICT_ITEMS, FLOAT, CONST, GET) = range(1, 29)

# The Python C API functions the dispatcher calls: name -> signature (result, arguments:
# p pointer, i int32, l int64, d double, v void).
PY_API: dict[str, str] = {
    "Py_IncRef": "v p", "Py_DecRef": "v p", "PyErr_Clear": "v",
    "PyObject_RichCompareBool": "i ppi", "PyFloat_FromDouble": "p d",
    "PyObject_Vectorcall": "p pplp", "PyObject_CallNoArgs": "p p",
    "PyList_New": "p l", "PyList_SetItem": "i plp", "PyList_Append": "i pp",
    "PyTuple_New": "p l", "PyTuple_SetItem": "i plp",
    "PyDict_New": "p", "PyDict_SetItem": "i ppp",
    "PyObject_GetAttr": "p pp", "PyObject_SetAttr": "i ppp", "PyNumber_Add": "p pp",
    "PyLong_AsVoidPtr": "p p", "PyEval_SaveThread": "p", "PyEval_RestoreThread": "v p",
    "PyType_GenericAlloc": "p pl", "PyDict_Next": "i pppp",
    "PyObject_GetItem": "p pp", "PyCell_Get": "p p",
}
# NumPy's C API, from its ``_ARRAY_API`` table: our name -> (index, signature).
NP_API: dict[str, tuple[int, str]] = {
    "yota_npy_NewFromDescr": (94, "p ppipppip"),
    "yota_npy_Scalar": (60, "p ppp"),
}
