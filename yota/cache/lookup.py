"""Compiling through the cache: load a stored executable, or compile and store it."""

from __future__ import annotations

from typing import Any

from yota.backends import get_backend
from yota.ir.core import Function

from .config import BadEntry, _warn, _warn_once, enabled, log, stats
from .key import Key, make_key
from .store import DiskCache, default_cache


def compile_cached(fn: Function, backend: str | None, *, kind: str, signature: Any = None,
                   use_cache: bool = True) -> Any:
    """``get_backend(backend).compile(fn)``, through the cache when it can be used."""
    mod = get_backend(backend)  # an unknown or broken backend raises as it always did
    key = None
    if use_cache and enabled():
        try:
            key = make_key(fn, backend, kind=kind, signature=signature)
        except Exception as e:  # the cache must never be why a program does not run
            _warn_once(f"cannot compute a cache key for @{fn.name} ({type(e).__name__}: "
                       f"{e}); compiling without the cache")
    cache = default_cache() if key is not None else None
    if cache is None or not cache.usable():
        return mod.compile(fn)
    return lookup_or_compile(cache, key, fn, backend)  # type: ignore[arg-type]


def lookup_or_compile(cache: DiskCache, key: Key, fn: Function, backend: str | None) -> Any:
    """The executable for ``key``: loaded from ``cache``, else compiled and stored."""
    mod = get_backend(backend)
    exe = load(cache, key, mod)
    if exe is not None:
        return exe
    stats.misses += 1
    stats.compiles += 1
    exe = mod.compile(fn)
    save(cache, key, fn, mod, exe)
    return exe


def load(cache: DiskCache, key: Key, mod: Any) -> Any | None:
    """The stored executable for ``key``, or None (a bad entry is removed, with a warning)."""
    name = key.parts["ir"]["function"]
    try:
        entry = cache.read(key.hex)
    except (BadEntry, OSError) as e:
        _bad_entry(cache, key.hex, name, e)
        return None
    if entry is None:
        return None
    if entry.files["program.yir"] != key.ir_text.encode():
        _warn(f"entry {key.hex[:16]} holds another program than the one its key was "
              "computed from (a hash collision?); compiling without the cache")
        stats.errors += 1
        return None
    try:
        exe = mod.load(mod.Artifact(entry.files["object.o"], entry.meta["backend_meta"]))
    except Exception as e:  # whatever the backend's loader raises: never crash on an entry
        _bad_entry(cache, key.hex, name, e)
        return None
    cache.touch(key.hex)
    stats.hits += 1
    log.info("yota: cache hit %s (@%s)", key.hex[:16], name)
    return exe


def _bad_entry(cache: DiskCache, key: str, name: str, e: BaseException) -> None:
    stats.errors += 1
    cache.remove(key)
    why = str(e) if isinstance(e, BadEntry) else f"it failed to load ({type(e).__name__}: {e})"
    _warn(f"entry {key[:16]} (@{name}) in {cache.root} is unusable: {why}; removed it, "
          "recompiling")


def save(cache: DiskCache, key: Key, fn: Function, mod: Any, exe: Any) -> bool:
    """Store ``exe`` under ``key``; a failed write warns and leaves no entry behind."""
    art = getattr(exe, "artifact", None) or mod.Artifact.from_bytes(mod.save(exe))
    try:
        stored = cache.store(key, fn, art.meta, art.object_code)
    except (OSError, TypeError, ValueError) as e:
        stats.errors += 1
        why = e.strerror if isinstance(e, OSError) and e.strerror else f"{e}"
        _warn(f"could not write entry {key.hex[:16]} (@{fn.name}) to {cache.root}: "
              f"{why}; the result is correct, the program is just not cached")
        return False
    stats.stores += stored
    return stored
