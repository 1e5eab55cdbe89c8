"""The on-disk cache of compiled programs, keyed by what the code *is*.

``yota.grad`` and ``yota.compile`` consult it by default (``cache=False`` turns it off
for one call, ``YOTA_CACHE=0`` for the process). A new process still traces (that is how
guards, captured arrays and the signature are known); it then asks the cache by the
traced program (``make_traced_key``: ``traced/<key>.json`` names the entry that program
was built into), so a hit skips differentiation, the passes and the native compilation,
and loads the object code (``stats.hits``; ``stats.compiles`` counts the compilations it
did make). Programs that call a user primitive (their ``diffrule`` is user code) are found
by the built program's key only, after differentiation and optimization.

    >>> import numpy as np, yota
    >>> val, g = yota.grad(lambda x: np.sum(np.tanh(x)), np.zeros(3))  # stored on a miss
    >>> print(yota.explain(lambda x: np.sum(np.tanh(x)), np.zeros(3)))  # doctest: +SKIP

The key is the SHA-256 of named, versioned parts (``KEY_PARTS``): the canonical printed
IR of the optimized program with its callees (so every callee, in any file, and every
rule used is covered; provenance comments name files by base name and line), the
argument signature, the backend and its options, the target (triple, CPU, features),
the LLVM and llvmlite versions, Yota's version with a hash of every source that shapes
the generated code (``source_files``: the front end, the IR package, the shared backend
modules and the backend's own package), and the cache format. ``explain`` shows the parts, and on a miss the nearest
stored entry and the parts that differ.

Layout, in ``$YOTA_CACHE_DIR`` (else ``$XDG_CACHE_HOME/yota``, else ``~/.cache/yota``),
created owner-only::

    entries/<key>/meta.json     JSON (never pickle): parts, inputs, outputs, memory plan,
                                guards, the backend's load description, file sizes, and a
                                SHA-256 checksum over itself and the two files below
    entries/<key>/object.o      the object code
    entries/<key>/program.yir   the printed IR the key was computed from
    traced/<traced key>.json    JSON: the entry a traced program was built into, the
                                traced key's parts, facts a call needs, a checksum
    objects/<key>.o             object code of the backend's runtime modules (the llvm
                                helper-thread pool), keyed by their LLVM IR and target
    sources/<id>.json           the sources digest with each file's mtime, size, inode
    tmp/                        entries being written

An entry is written into a fresh directory under ``tmp/`` and moved into place with one
``os.replace``: readers see a whole entry or none, and of two processes writing the same
key one wins and the other discards its copy. Entries are read through one directory
descriptor, checked (format, sizes, checksum, key, IR text) before any object code is
loaded, and a bad one is moved out of the way and rebuilt with a ``CacheWarning``. A
directory that another user owns or others can write is refused (loading object code
is running code). The least recently used entries are evicted beyond
``YOTA_CACHE_MAX_BYTES`` (default 1 GiB).

Modules: ``key`` (the keys and their parts), ``traced`` (names of entries by traced
program), ``store`` (a cache directory: atomic writes,
checked reads, eviction), ``lookup`` (compiling through the cache), ``explanation``
(``explain_key``; ``yota.explain`` traces a function and calls it), ``config`` (environment variables, counters, warnings).
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from .config import (
    DEFAULT_MAX_BYTES,
    BadEntry,
    CacheStats,
    CacheWarning,
    cache_dir,
    enabled,
    max_bytes,
    stats,
)

if TYPE_CHECKING:
    from . import traced
    from .explanation import Explanation, explain_key, iter_parts
    from .key import (
        FORMAT,
        KEY_PARTS,
        TRACED_KEY_PARTS,
        Key,
        _source_hashes,
        _yota_version,
        builtin_code_only,
        describe_signature,
        make_key,
        make_traced_key,
        source_files,
        tape_signature,
    )
    from .lookup import compile_cached, compile_traced, load, lookup_or_compile, save
    from .store import (
        FILES,
        TMP_MAX_AGE,
        DiskCache,
        StoredEntry,
        checksum,
        clear,
        default_cache,
        entries,
        entry_meta,
        info,
        verify,
    )

# The rest is imported on first use (module ``__getattr__``): importing Yota loads only
# ``config``; the first gradient loads the keys, the store and the lookup (hashlib,
# json); ``explanation`` (difflib) only for ``explain``.
_LAZY: dict[str, str] = {
    **dict.fromkeys(("FORMAT", "KEY_PARTS", "TRACED_KEY_PARTS", "Key", "_source_hashes",
                     "_yota_version", "builtin_code_only", "describe_signature", "make_key",
                     "make_traced_key", "source_files", "tape_signature"), "key"),
    **dict.fromkeys(("compile_cached", "compile_traced", "load", "lookup_or_compile",
                     "save"), "lookup"),
    **dict.fromkeys(("FILES", "TMP_MAX_AGE", "DiskCache", "StoredEntry", "checksum",
                     "clear", "default_cache", "entries", "entry_meta", "info", "verify"),
                    "store"),
    **dict.fromkeys(("Explanation", "explain_key", "iter_parts"), "explanation"),
}


def __getattr__(name: str) -> Any:
    if name == "traced":
        return importlib.import_module(f"{__name__}.traced")
    mod = _LAZY.get(name)
    if mod is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(f"{__name__}.{mod}"), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_LAZY) | {"traced"})


__all__ = [
    "DEFAULT_MAX_BYTES", "FILES", "FORMAT", "KEY_PARTS", "TRACED_KEY_PARTS", "TMP_MAX_AGE",
    "BadEntry", "builtin_code_only", "compile_traced", "make_traced_key", "traced",
    "CacheStats", "CacheWarning", "DiskCache", "Explanation", "Key", "StoredEntry",
    "cache_dir", "checksum", "clear", "compile_cached", "default_cache", "describe_signature",
    "enabled", "entries", "entry_meta", "explain_key", "info", "iter_parts",
    "load", "lookup_or_compile", "make_key", "max_bytes", "save",
    "source_files", "stats", "tape_signature", "verify", "_source_hashes",
    "_yota_version",
]
