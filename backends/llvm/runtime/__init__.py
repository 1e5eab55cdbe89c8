"""The llvm backend's runtime: what loading and running compiled code needs, and nothing of
the code generator (a process that loads a cached program imports only this, the
package's ``__init__`` and ``abi``). Parts of it are native code that Yota generates as
LLVM IR itself, compiled once and kept in the object cache like any program.

- ``target``: the host (CPU, features, libraries) and LLVM's set-up; how external symbols
  resolve.
- ``jit``: LLVM IR text to object code (optimize, emit), and loading it; runtime modules
  kept in the object cache by spec (``objcache``: its directory and files).
- ``objload``: Yota's own ELF loader (no LLVM needed to load an object).
- ``executable``: the Python side of a compiled program (argument checks, outputs,
  workspaces, failures as exceptions), and its on-disk artifact.
- ``pyentry`` (``pyentry_ir``, ``pyabi``): the native Python entry, a dispatcher generated
  as LLVM IR that runs a program's call without a Python frame.
- ``pool`` (``pool_ir``): the fork-join pool that splits kernels and GEMM tiles over
  helper threads, generated as LLVM IR.
- ``blas``, ``lapack``: Yota's own OpenBLAS instance, and the BLAS and LAPACK routines
  generated code calls by name (addresses, calling facts, the AOT shim).
- ``symbols``: the names Yota provides itself (the pool's, ``yota_callback``), bound on
  load.
"""
