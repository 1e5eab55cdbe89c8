"""Names and defaults that both the code generator (``module.py``, ``lower.py``) and the
loading side (``__init__.py``, ``runtime.py``) use, in a module that imports nothing, so
that loading a cached program does not import the code generator."""

from __future__ import annotations

ENTRY = "yota_main"  # i32 yota_main(ptr in0, ..., ptr out0, ..., ptr workspace)
ENTRY_OBJ = "yota_main_arrays"  # the same taking PyArrayObject pointers (module.py)
# ctypes passes at most 1024 arguments: a program with more pointer arguments (inputs,
# outputs, workspace) takes them packed in one array (``packed``, module.py)
MAX_CALL_ARGS = 1000


def packed(nptr: int) -> bool:
    """Whether the entries of a program of ``nptr`` pointer arguments take them packed:
    ``yota_main(ptr argv)``, ``argv`` holding them and the workspace once more (the
    status block), and ``yota_main_arrays(ptr argv)``, ``argv`` holding the objects and
    the workspace."""
    return nptr > MAX_CALL_ARGS
PAR_WORK = 2e6  # kernel work (element-operations) above which a kernel is split
