"""Names and defaults that both the code generator (``module.py``, ``lower.py``) and the
loading side (``__init__.py``, ``runtime/``) use, in a module that imports nothing, so
that loading a cached program does not import the code generator."""

from __future__ import annotations

ENTRY = "yota_main"  # i32 yota_main(ptr in0, ..., ptr out0, ..., ptr workspace)
ENTRY_OBJ = "yota_main_arrays"  # the same taking PyArrayObject pointers (module.py)
# A program of more pointer arguments (inputs, outputs, workspace) takes them packed in
# one array (``packed``, module.py): its entries then check and pass them in loops over
# tables, where code for each one costs LLVM more than linear time (O3 and object code:
# 0.6 ms an argument at 33, 2.1 at 129, 3.3 at 257, 7 at 1025), and ctypes passes at most
# 1024 arguments. Up to this many, the entries take them one by one, which saves a call
# building the array (81 arguments: 58 against 68 us a call).
MAX_CALL_ARGS = 128


def packed(nptr: int) -> bool:
    """Whether the entries of a program of ``nptr`` pointer arguments take them packed:
    ``yota_main(ptr argv)``, ``argv`` holding them and the workspace once more (the
    status block), and ``yota_main_arrays(ptr argv)``, ``argv`` holding the objects and
    the workspace."""
    return nptr > MAX_CALL_ARGS
PAR_WORK = 2e6  # kernel work (element-operations) above which a kernel is split

# The fork-join pool (``runtime/pool.py`` loads it, ``runtime/pool_ir.py`` builds it):
# generated code calls
# ``void yota_parallel(void (*chunks)(ptr ctx, i64 slot), ptr ctx, i64 nslots)`` and, for
# large products, the tiled GEMMs: CBLAS's arguments, then TILE_EXTRA more
# (nbatch, the batch strides of A, B and C, axis, step, nslots; emit.py passes them).
POOL_SYMBOL = "yota_parallel"
POOL_THREADS = "yota_pool_threads"  # void (i64 n): the most threads a job may use
POOL_RESET = "yota_pool_reset"  # void (): in a fork()ed child
POOL_STATS = "yota_pool_stats"  # void (i64 *out): pool.STATS
GEMM_TILES = {"float32": "yota_sgemm_tiles", "float64": "yota_dgemm_tiles"}
TILE_EXTRA = 7
