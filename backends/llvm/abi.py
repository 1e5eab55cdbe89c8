"""Names and defaults that both the code generator (``module.py``, ``lower.py``) and the
loading side (``__init__.py``, ``runtime.py``) use, in a module that imports nothing, so
that loading a cached program does not import the code generator."""

from __future__ import annotations

ENTRY = "yota_main"  # i32 yota_main(ptr in0, ..., ptr out0, ..., ptr workspace)
ENTRY_OBJ = "yota_main_arrays"  # the same taking PyArrayObject pointers (module.py)
PAR_WORK = 2e6  # kernel work (element-operations) above which a kernel is split
