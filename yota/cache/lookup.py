"""Compiling through the cache: load a stored executable, or compile and store it.

The compile's phases (``yota.phases``) are timed here: ``cache`` (``key``, ``load``,
``store``), and the backend's ``lower`` (and ``codegen``, from where the backend marks it).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from yota.backends import BACKENDS, DEFAULT_BACKEND, get_backend
from yota.ir.core import Function

from ..phases import hook, importing, note, phase
from .config import BadEntry, _warn, _warn_once, enabled, log, stats
from .key import Key, cacheable_backend, make_key, make_traced_key
from .store import DiskCache, StoredEntry, default_cache
from .traced import matches, read_name, remove_name, write_name


def compile_cached(fn: Function, backend: str | None, *, kind: str, signature: Any = None,
                   use_cache: bool = True) -> Any:
    """``get_backend(backend).compile(fn)``, through the cache when it can be used."""
    return compile_cached_key(fn, backend, kind=kind, signature=signature,
                              use_cache=use_cache)[0]


def compile_cached_key(fn: Function, backend: str | None, *, kind: str,
                       signature: Any = None, use_cache: bool = True
                       ) -> tuple[Any, Key | None]:
    """``compile_cached``, and the key the executable is stored under (None when the
    cache was not used)."""
    mod = _backend(backend)  # an unknown or broken backend raises as it always did
    note(ops=len(fn.ops))
    cache = _usable_cache(mod) if use_cache and enabled() else None
    key = _key(lambda: make_key(fn, backend, kind=kind, signature=signature), fn.name) \
        if cache is not None else None
    if cache is None or key is None:
        return native(mod, fn), None
    return lookup_or_compile(cache, key, fn, backend), key


def _usable_cache(mod: Any) -> DiskCache | None:
    """The default cache if it can be used, with ``mod``'s runtime objects kept in it
    (first: the backend's description of the host may be kept there too)."""
    if not cacheable_backend(mod):
        return None
    cache = default_cache()
    if not cache.usable():
        return None
    runtime_objects(cache, mod)
    return cache


def runtime_objects(cache: DiskCache, mod: Any) -> None:
    """Let the backend keep its runtime modules' object code in ``objects/`` of the cache
    (the llvm backend's helper-thread pool: compiled once, not at every start)."""
    hook = getattr(mod, "set_object_cache", None)
    if callable(hook):
        hook(cache.root / "objects")


def _backend(name: str | None) -> Any:
    """``get_backend(name)``, its first import timed as phase ``import``."""
    with importing(BACKENDS.get(name or DEFAULT_BACKEND, "")):
        return get_backend(name)


def native(mod: Any, fn: Function) -> Any:
    """``mod.compile(fn)``, timed as phase ``lower`` (``codegen`` from where the backend
    marks it with its ``on_phase`` hook)."""
    hook(mod)
    with phase("lower"):
        return mod.compile(fn)


def _key(make: Callable[[], Key | None], name: str) -> Key | None:
    try:
        with phase("cache.key"):
            return make()
    except Exception as e:  # the cache must never be why a program does not run
        _warn_once(f"cannot compute a cache key for @{name} ({type(e).__name__}: "
                   f"{e}); compiling without the cache")
        return None


def compile_traced(traced: Function, build: Callable[[], Function], backend: str | None, *,
                   kind: str, signature: Any,
                   derivation: dict[str, Any] | Callable[[], dict[str, Any]],
                   use_cache: bool = True) -> tuple[Any, Function | str, dict[str, Any] | None]:
    """The executable of the program ``build()`` makes from the traced program ``traced``,
    through the cache: a hit by the traced key (``make_traced_key``) neither builds nor
    compiles; it returns the stored program's printed IR (``str``) and its ``facts``.
    Otherwise ``build()``'s program is compiled through the cache by its own key (a hit
    there skips the native compilation), recorded under the traced key, and returned
    with None. ``derivation``: the key's part, or a function making it (called once the
    cache directory exists: it may read what the directory remembers)."""
    note(cache=None)  # (what a compile nested in this one's trace found is not ours)
    cache = _usable_cache(_backend(backend)) if use_cache and enabled() else None
    tkey = _key(lambda: make_traced_key(traced, backend, kind=kind, signature=signature,
                                        derivation=derivation() if callable(derivation)
                                        else derivation), traced.name) \
        if cache is not None else None
    if cache is not None and tkey is not None:
        found = _load_traced(cache, tkey, get_backend(backend))
        if found is not None:
            return found
    fn = build()
    exe, key = compile_cached_key(fn, backend, kind=kind, signature=signature,
                                  use_cache=use_cache)
    if cache is not None and tkey is not None and key is not None \
            and cache.path(key.hex).is_dir():
        with phase("cache.store"):
            write_name(cache, tkey, key, facts_of(fn))
    return exe, fn, None


def facts_of(fn: Function) -> dict[str, Any]:
    """What a call of ``fn``'s program needs to know without its IR."""
    return {"grads": [int(i) for i in fn.attrs.get("grads", ())],
            "guards": sum(op.name == "guard" for op in fn.ops)}


def _load_traced(cache: DiskCache, tkey: Key, mod: Any
                 ) -> tuple[Any, str, dict[str, Any]] | None:
    rec = read_name(cache, tkey)
    if rec is None:
        return None
    name = tkey.parts["traced"]["function"]
    found = _load_entry(cache, rec["entry"], name, mod,
                        entry_ok=lambda e: matches(rec, e.meta, e.files["program.yir"]))
    if found is None:
        remove_name(cache, tkey)
        return None
    exe, entry = found
    facts = rec.get("facts")
    if not isinstance(facts, dict):
        facts = None
    note(cache="loaded")
    return exe, entry.files["program.yir"].decode(), facts  # type: ignore[return-value]


def lookup_or_compile(cache: DiskCache, key: Key, fn: Function, backend: str | None) -> Any:
    """The executable for ``key``: loaded from ``cache``, else compiled and stored."""
    mod = get_backend(backend)
    exe = load(cache, key, mod)
    if exe is not None:
        note(cache="object")
        return exe
    stats.misses += 1
    stats.compiles += 1
    exe = native(mod, fn)
    with phase("cache.store"):
        save(cache, key, fn, mod, exe)
    return exe


def load(cache: DiskCache, key: Key, mod: Any) -> Any | None:
    """The stored executable for ``key``, or None (a bad entry is removed, with a warning)."""
    def same_program(entry: StoredEntry) -> bool:
        if entry.files["program.yir"] == key.ir_text.encode():
            return True
        _warn(f"entry {key.hex[:16]} holds another program than the one its key was "
              "computed from (a hash collision?); compiling without the cache")
        stats.errors += 1
        return False

    found = _load_entry(cache, key.hex, key.parts["ir"]["function"], mod,
                        entry_ok=same_program)
    return None if found is None else found[0]


def _load_entry(cache: DiskCache, hexkey: str, name: str, mod: Any,
                entry_ok: Callable[[StoredEntry], bool]) -> tuple[Any, StoredEntry] | None:
    """The executable stored under ``hexkey`` and its entry, or None: no entry, a bad one
    (removed, with a warning), or one that ``entry_ok`` refuses."""
    with phase("cache.load"):
        return _read_entry(cache, hexkey, name, mod, entry_ok)


def _read_entry(cache: DiskCache, hexkey: str, name: str, mod: Any,
                entry_ok: Callable[[StoredEntry], bool]) -> tuple[Any, StoredEntry] | None:
    try:
        entry = cache.read(hexkey)
    except (BadEntry, OSError) as e:
        _bad_entry(cache, hexkey, name, e)
        return None
    if entry is None or not entry_ok(entry):
        return None
    try:
        exe = mod.load(mod.Artifact(entry.files["object.o"], entry.meta["backend_meta"]))
    except Exception as e:  # whatever the backend's loader raises: never crash on an entry
        _bad_entry(cache, hexkey, name, e)
        return None
    cache.touch(hexkey)
    stats.hits += 1
    log.info("yota: cache hit %s (@%s)", hexkey[:16], name)
    return exe, entry


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
