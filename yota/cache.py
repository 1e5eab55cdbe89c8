"""The on-disk cache of compiled programs, keyed by what the code *is*.

``yota.grad`` and ``yota.compile`` consult it by default (``cache=False`` turns it off
for one call, ``YOTA_CACHE=0`` for the process). A new process still traces, differentiates
and optimizes (that is how guards, captured arrays and the signature are known, and it
gives the key); on a hit only the native compilation is skipped and the object code is
loaded (``stats.hits``; ``stats.compiles`` counts the compilations it did make).

    >>> import numpy as np, yota
    >>> val, g = yota.grad(lambda x: np.sum(np.tanh(x)), np.zeros(3))  # stored on a miss
    >>> print(yota.cache.explain(lambda x: np.sum(np.tanh(x)), np.zeros(3)))  # doctest: +SKIP

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
    tmp/                        entries being written

An entry is written into a fresh directory under ``tmp/`` and moved into place with one
``os.replace``: readers see a whole entry or none, and of two processes writing the same
key one wins and the other discards its copy. Entries are read through one directory
descriptor, checked (format, sizes, checksum, key, IR text) before any object code is
loaded, and a bad one is moved out of the way and rebuilt with a ``CacheWarning``. A
directory that another user owns or others can write is refused (loading object code
is running code). The least recently used entries are evicted beyond
``YOTA_CACHE_MAX_BYTES`` (default 1 GiB).
"""

from __future__ import annotations

import contextlib
import difflib
import errno
import hashlib
import json
import logging
import os
import re
import shutil
import stat
import sys
import tempfile
import threading
import time
import warnings
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from yota.backends import get_backend
from yota.ir.core import Function
from yota.ir.errors import YotaError
from yota.ir.printer import format_attr, print_function

log = logging.getLogger("yota")

FORMAT = 1  # bump when the layout, the metadata or the key's derivation changes
KEY_PARTS = ("format", "kind", "ir", "signature", "backend", "target", "llvm", "llvmlite",
             "yota")
FILES = ("object.o", "program.yir")
DEFAULT_MAX_BYTES = 1 << 30
TMP_MAX_AGE = 3600.0  # seconds after which a leftover temporary directory is removed
_RESCAN_EVERY = 32  # stores between two measurements of the cache's size


class CacheWarning(UserWarning):
    """A cache problem that Yota recovered from (the result is still correct)."""


class BadEntry(YotaError):
    """A stored entry that cannot be used: corrupt, truncated, stale or foreign."""


@dataclass
class CacheStats:
    """Counters of this process: ``hits`` entries loaded instead of compiled, ``misses``
    lookups that found nothing usable, ``compiles`` programs compiled by the cache
    layer, ``stores`` entries written, ``errors`` bad entries or failed writes
    recovered from, ``evictions`` entries removed for the size limit."""

    hits: int = 0
    misses: int = 0
    compiles: int = 0
    stores: int = 0
    errors: int = 0
    evictions: int = 0

    def reset(self) -> None:
        self.hits = self.misses = self.compiles = self.stores = self.errors = 0
        self.evictions = 0


stats = CacheStats()


# -- configuration ------------------------------------------------------------------------
def enabled() -> bool:
    """False when ``YOTA_CACHE`` is ``0``, ``off``, ``false`` or ``no``."""
    return os.environ.get("YOTA_CACHE", "1").strip().lower() not in ("0", "off", "false", "no")


def cache_dir() -> Path:
    """``$YOTA_CACHE_DIR``, else ``$XDG_CACHE_HOME/yota``, else ``~/.cache/yota``."""
    env = os.environ.get("YOTA_CACHE_DIR")
    if env:
        return Path(env).expanduser().absolute()
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base).absolute() / "yota"


def max_bytes() -> int:
    raw = os.environ.get("YOTA_CACHE_MAX_BYTES", "")
    try:
        return int(float(raw)) if raw.strip() else DEFAULT_MAX_BYTES
    except ValueError:
        _warn_once(f"YOTA_CACHE_MAX_BYTES={raw!r} is not a number; using "
                   f"{DEFAULT_MAX_BYTES} bytes")
        return DEFAULT_MAX_BYTES


_warned: set[str] = set()


def _warn_once(msg: str) -> None:
    if msg not in _warned:
        _warned.add(msg)
        _warn(msg)


def _warn(msg: str) -> None:
    log.warning("yota cache: %s", msg)
    warnings.warn(f"yota cache: {msg}", CacheWarning, stacklevel=4)


# -- the key ------------------------------------------------------------------------------
@dataclass
class Key:
    """The key of one program: its parts, each part's digest, and the key itself."""

    parts: dict[str, Any]
    ir_text: str
    digests: dict[str, str] = field(init=False)
    hex: str = field(init=False)

    def __post_init__(self) -> None:
        self.digests = {k: _digest(v) for k, v in self.parts.items()}
        h = hashlib.sha256(f"yota-cache-key/{FORMAT}\n".encode())
        for name in sorted(self.digests):
            h.update(f"{name}={self.digests[name]}\n".encode())
        self.hex = h.hexdigest()


def _digest(value: Any) -> str:
    return hashlib.sha256(_canonical(value)).hexdigest()


def _canonical(value: Any) -> bytes:
    return json.dumps(value, sort_keys=True, separators=(",", ":"), default=str).encode()


def make_key(fn: Function, backend: str | None, *, kind: str,
             signature: Any = None) -> Key | None:
    """The key of compiling ``fn`` on ``backend``, or None if that backend's code cannot
    be saved (the interpreter; CUDA without a device, or on the CPU emulation: a backend's
    ``cacheable()`` says). Computing it compiles nothing."""
    mod = get_backend(backend)
    if not all(hasattr(mod, a) for a in ("save", "load", "target_key", "Artifact")):
        return None
    if callable(getattr(mod, "cacheable", None)) and not mod.cacheable():
        return None
    text = print_function(fn)
    target = dict(mod.target_key())
    llvm_version = target.pop("llvm", None)
    llvmlite_version = target.pop("llvmlite", None)
    opts = mod.options_key() if callable(getattr(mod, "options_key", None)) else {}
    parts = {
        "format": FORMAT,
        "kind": kind,
        "ir": {"function": fn.name, "sha256": hashlib.sha256(text.encode()).hexdigest(),
               "lines": text.count("\n") + 1},
        "signature": describe_signature(signature) if signature is not None else None,
        "backend": {"name": getattr(mod, "__name__", str(backend)).rsplit(".", 1)[-1],
                    "options": opts},
        "target": target,
        "llvm": llvm_version,
        "llvmlite": llvmlite_version,
        "yota": _yota_version(mod),
    }
    return Key(parts, text)


_source_hashes: dict[str, str] = {}


def source_files(backend_module: Any) -> list[tuple[str, Path]]:
    """Every source file that can change the code compiled for ``backend_module`` or its
    calling convention, as (name, path): the front end that builds the IR (``yota/``), the
    IR package (ops, rules, passes), the backend-neutral modules of ``yota.backends`` and
    the backend's own package. Other backends' packages are left out."""
    import yota
    from yota import backends as backends_pkg
    from yota import ir as ir_pkg

    groups = {"yota": Path(yota.__file__).parent, "ir": Path(ir_pkg.__file__).parent,
              "backends": Path(backends_pkg.__file__).parent}
    own = Path(backend_module.__file__).parent
    roots = {d.resolve() for d in groups.values()}
    out: dict[Path, str] = {}
    for group, root in groups.items():
        for p in sorted(root.rglob("*.py")):
            if any(root.resolve() in d.parents and d in p.resolve().parents for d in roots):
                continue  # a nested group (the wheel's yota/ir): hashed under its own name
            inner = p.parent.resolve()
            if group == "backends" and inner != root.resolve() and own.resolve() not in (
                    inner, *inner.parents):
                continue  # another backend's package
            out.setdefault(p.resolve(), f"{group}/{p.relative_to(root).as_posix()}")
    return sorted(((name, path) for path, name in out.items()), key=lambda t: t[0])


def _yota_version(backend_module: Any) -> dict[str, str]:
    """Yota's version and a hash of every source that shapes the generated code
    (``source_files``), so an edited checkout never reuses stale code."""
    key = str(Path(backend_module.__file__).resolve())
    if key not in _source_hashes:
        h = hashlib.sha256()
        for name, path in source_files(backend_module):
            with contextlib.suppress(OSError):
                h.update(name.encode() + b"\0" + path.read_bytes() + b"\0")
        _source_hashes[key] = h.hexdigest()[:16]
    version = getattr(sys.modules.get("yota"), "__version__", "unknown")
    return {"version": version, "sources": _source_hashes[key]}


def tape_signature(tape: Any) -> tuple[Any, ...]:
    """The argument signature a tape was traced with (structure, static values, leaves)."""
    from .program import signature

    return signature([e.value for e in tape.entries if e.kind == "input"])


_ADDRESS = re.compile(r" at 0x[0-9a-fA-F]+")


def describe_signature(sig: Sequence[Any]) -> str:
    """A stable, readable rendering of ``yota.program.signature(args)``: containers by
    qualified type name and keys, leaves as ``f32[3,4]``, static values by ``repr``
    (without memory addresses, which change from one process to the next)."""
    return "(" + ", ".join(_describe_tree(t) for t in sig) + ")"


def _describe_tree(t: Any) -> str:
    if isinstance(t, tuple) and len(t) == 2 and t[0] == "leaf":
        sig = t[1]
        return "float" if sig == ("float",) else f"{sig[0]}[{','.join(map(str, sig[1]))}]"
    if isinstance(t, tuple) and len(t) == 2 and t[0] == "static":
        k = t[1]
        return "<unhashable>" if k[0] == "id" else _stable_repr(k[1])
    if isinstance(t, tuple) and len(t) == 3 and isinstance(t[0], type):
        typ, keys, kids = t
        inner = ", ".join(f"{k}={_describe_tree(c)}" if typ not in (tuple, list)
                          else _describe_tree(c) for k, c in zip(keys, kids, strict=True))
        if typ is tuple:
            return f"({inner}{',' if len(kids) == 1 else ''})"
        return f"[{inner}]" if typ is list else f"{_qualname(typ)}({inner})"
    return _stable_repr(t)


def _qualname(t: type) -> str:
    return f"{t.__module__}.{t.__qualname__}"


def _stable_repr(x: Any) -> str:
    if isinstance(x, type):
        return _qualname(x)
    if x is None or isinstance(x, (bool, int, float, complex, str, bytes)):
        return repr(x)
    if callable(x) and hasattr(x, "__qualname__"):
        return f"<{type(x).__name__} {getattr(x, '__module__', '?')}.{x.__qualname__}>"
    return _ADDRESS.sub("", repr(x))


# -- entries ------------------------------------------------------------------------------
@dataclass
class StoredEntry:
    """A stored entry as read back: metadata and files (checked)."""

    key: str
    path: Path
    meta: dict[str, Any]
    files: dict[str, bytes]


def entry_meta(key: Key, fn: Function, artifact_meta: dict[str, Any],
               files: dict[str, bytes]) -> dict[str, Any]:
    """The JSON description of an entry (without its checksum)."""
    return {
        "format": FORMAT,
        "key": key.hex,
        "parts": key.parts,
        "part_digests": key.digests,
        "created": time.time(),
        "function": fn.name,
        "inputs": [{"label": lab, "type": str(v.type)}
                   for v, lab in zip(fn.inputs, fn.input_labels, strict=True)],
        "outputs": [{"label": lab, "type": str(v.type)}
                    for v, lab in zip(fn.outputs, fn.output_labels, strict=True)],
        "memory_plan": {k: _jsonable(v) for k, v in sorted(fn.attrs.items())
                        if k.startswith("mem_")},
        "guards": [{"attrs": {k: format_attr(v) for k, v in sorted(op.attrs.items())},
                    "loc": op.loc} for op in fn.ops if op.name == "guard"],
        "backend_meta": artifact_meta,
        "files": {name: {"bytes": len(data), "sha256": hashlib.sha256(data).hexdigest()}
                  for name, data in files.items()},
    }


def _jsonable(v: Any) -> Any:
    if isinstance(v, np.ndarray):
        return v.tolist()
    if isinstance(v, (list, tuple)):
        return [_jsonable(x) for x in v]
    if isinstance(v, np.generic):
        return v.item()
    return v


def checksum(meta: dict[str, Any], files: dict[str, bytes]) -> str:
    """SHA-256 over the metadata (without ``checksum``) and every file, sizes included."""
    h = hashlib.sha256(_canonical({k: v for k, v in meta.items() if k != "checksum"}))
    for name in sorted(files):
        data = files[name]
        h.update(name.encode() + b"\0" + len(data).to_bytes(8, "little"))
        h.update(data)
    return h.hexdigest()


def _write_file(path: str, data: bytes) -> None:
    """Write a new file (owner-only). Tests replace this to simulate a full disk."""
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    try:
        view = memoryview(data)
        while view:
            view = view[os.write(fd, view):]
    finally:
        os.close(fd)


class DiskCache:
    """A cache directory: ``entries/<key>/`` and ``tmp/`` (see the module docstring)."""

    def __init__(self, root: str | os.PathLike[str]) -> None:
        self.root = Path(root).absolute()
        self.entries_dir = self.root / "entries"
        self.tmp_dir = self.root / "tmp"
        self._stores = 0
        self._size_estimate: int | None = None
        self._lock = threading.Lock()

    # -- safety ---------------------------------------------------------------------
    def problem(self, create: bool = True) -> str | None:
        """Why this directory must not be used (None if it may), creating it owner-only."""
        for d in (self.root, self.entries_dir, self.tmp_dir):
            if create and not d.exists():
                try:
                    d.mkdir(mode=0o700, parents=True, exist_ok=True)
                    os.chmod(d, 0o700)
                except OSError as e:
                    return f"cannot create {d}: {e.strerror or e}"
            why = _unsafe(d)
            if why:
                return why
        return None

    def usable(self) -> bool:
        """Whether the cache may be used; warns (once per directory and reason) if not."""
        why = self.problem()
        if why:
            _warn_once(f"not using the cache directory {self.root}: {why}; compiling without "
                       "the cache (set YOTA_CACHE_DIR to a directory only you can write)")
        return why is None

    # -- reading --------------------------------------------------------------------
    def path(self, key: str) -> Path:
        return self.entries_dir / key

    def read(self, key: str) -> StoredEntry | None:
        """The entry stored under ``key``, checked; None if there is none. Raises
        ``BadEntry`` if it is corrupt, truncated or stale."""
        path = self.path(key)
        try:
            dfd = os.open(path, os.O_RDONLY | os.O_DIRECTORY)
        except (FileNotFoundError, NotADirectoryError):
            return None
        try:
            raw = {name: _read_at(dfd, name) for name in ("meta.json",) + FILES}
            if not _still_at(path, dfd):  # removed (moved away, then emptied) meanwhile
                return None
        finally:
            os.close(dfd)
        meta_raw = raw.pop("meta.json")
        if meta_raw is None:
            raise BadEntry("its metadata file is missing")
        meta = _parse_meta(meta_raw)
        _check_entry(meta, raw, key)
        return StoredEntry(key, path, meta, raw)  # type: ignore[arg-type]

    def touch(self, key: str) -> None:
        """Mark an entry as just used (its directory's modification time)."""
        with contextlib.suppress(OSError):
            os.utime(self.path(key))

    def keys(self) -> list[str]:
        try:
            return sorted(p.name for p in self.entries_dir.iterdir()
                          if re.fullmatch(r"[0-9a-f]{64}", p.name))
        except OSError:
            return []

    def resolve(self, prefix: str) -> str:
        """The full key of an entry named by a unique prefix."""
        found = [k for k in self.keys() if k.startswith(prefix.lower())]
        if len(found) != 1:
            what = "no entry" if not found else f"{len(found)} entries"
            raise YotaError(f"{what} in {self.entries_dir} with a key starting {prefix!r}")
        return found[0]

    def read_meta(self, key: str) -> dict[str, Any] | None:
        """An entry's metadata without checking its files (None if unreadable)."""
        try:
            return _parse_meta((self.path(key) / "meta.json").read_bytes())
        except (OSError, BadEntry):
            return None

    # -- writing --------------------------------------------------------------------
    def store(self, key: Key, fn: Function, artifact_meta: dict[str, Any],
              object_code: bytes) -> bool:
        """Write an entry atomically; False if another process stored it first."""
        if not self.tmp_dir.is_dir():  # first use, or removed meanwhile: (re)create
            why = self.problem()
            if why:
                raise OSError(errno.EACCES, why)
        files = {"object.o": object_code, "program.yir": key.ir_text.encode()}
        meta = entry_meta(key, fn, artifact_meta, files)
        meta["checksum"] = checksum(meta, files)
        tmp = tempfile.mkdtemp(prefix=f"{key.hex[:16]}.", dir=self.tmp_dir)
        try:
            for name, data in files.items():
                _write_file(os.path.join(tmp, name), data)
            meta_bytes = json.dumps(meta, sort_keys=True, indent=1, default=str).encode()
            _write_file(os.path.join(tmp, "meta.json"), meta_bytes)
            try:
                os.replace(tmp, self.path(key.hex))
            except OSError as e:
                if e.errno in (errno.ENOTEMPTY, errno.EEXIST):
                    return False  # another process stored this key first: keep theirs
                raise
        finally:
            shutil.rmtree(tmp, ignore_errors=True)
        self._stored(len(meta_bytes) + sum(map(len, files.values())))
        return True

    def remove(self, key: str) -> bool:
        """Move an entry out of the way (atomically), then delete it."""
        return self._discard(self.path(key))

    def _discard(self, path: Path) -> bool:
        trash = Path(tempfile.mkdtemp(prefix="trash.", dir=self.tmp_dir))
        try:
            os.replace(path, trash / "entry")
            return True
        except OSError:
            return False
        finally:
            shutil.rmtree(trash, ignore_errors=True)

    def clear(self) -> int:
        """Remove every entry (and leftover temporary files); returns how many."""
        n = sum(self.remove(k) for k in self.keys())
        for p in list(self.tmp_dir.glob("*")) if self.tmp_dir.exists() else []:
            shutil.rmtree(p, ignore_errors=True)
        self._size_estimate = 0
        return n

    # -- size limit -----------------------------------------------------------------
    def _stored(self, nbytes: int) -> None:
        with self._lock:
            self._stores += 1
            if self._size_estimate is not None:
                self._size_estimate += nbytes
            due = (self._size_estimate is None or self._stores % _RESCAN_EVERY == 0
                   or self._size_estimate > max_bytes())
        if due:
            self.evict(max_bytes())

    def usage(self) -> list[tuple[str, int, float]]:
        """``(key, bytes, last use)`` of every entry."""
        out = []
        for k in self.keys():
            p = self.path(k)
            try:
                size = sum(f.stat().st_size for f in p.iterdir())
                out.append((k, size, p.stat().st_mtime))
            except OSError:
                continue
        return out

    def evict(self, limit: int) -> int:
        """Remove least recently used entries until at most ``limit`` bytes remain (the
        most recent entry always stays); also removes stale temporary directories."""
        self._sweep_tmp()
        usage = sorted(self.usage(), key=lambda u: u[2])
        total = sum(u[1] for u in usage)
        removed = 0
        for k, size, _ in usage[:-1]:
            if total <= limit:
                break
            if self.remove(k):
                removed += 1
                total -= size
        stats.evictions += removed
        self._size_estimate = total
        return removed

    def _sweep_tmp(self) -> None:
        now = time.time()
        with contextlib.suppress(OSError):
            for p in self.tmp_dir.iterdir():
                with contextlib.suppress(OSError):
                    if now - p.stat().st_mtime > TMP_MAX_AGE:
                        shutil.rmtree(p, ignore_errors=True)

    # -- checking -------------------------------------------------------------------
    def verify(self, remove: bool = False) -> list[tuple[str, str]]:
        """``(key, problem)`` for every entry that would not load; with ``remove``, those
        entries are deleted."""
        bad = []
        for k in self.keys():
            try:
                if self.read(k) is None:
                    continue
            except BadEntry as e:
                bad.append((k, str(e)))
                if remove:
                    self.remove(k)
        return bad


def _unsafe(d: Path) -> str | None:
    try:
        st = os.stat(d)
    except OSError as e:
        return f"cannot read {d}: {e.strerror or e}"
    if not stat.S_ISDIR(st.st_mode):
        return f"{d} is not a directory"
    if st.st_uid not in (os.getuid(), 0):
        return f"{d} belongs to another user (uid {st.st_uid})"
    if st.st_mode & 0o022:
        return f"{d} is writable by others (mode {stat.S_IMODE(st.st_mode):o})"
    return None


def _still_at(path: Path, dfd: int) -> bool:
    """Whether the directory open as ``dfd`` is still the one at ``path``."""
    try:
        st, here = os.stat(path), os.fstat(dfd)
    except OSError:
        return False
    return (st.st_dev, st.st_ino) == (here.st_dev, here.st_ino)


def _read_at(dfd: int, name: str) -> bytes | None:
    try:
        fd = os.open(name, os.O_RDONLY, dir_fd=dfd)
    except FileNotFoundError:
        return None
    with os.fdopen(fd, "rb") as f:
        return f.read()


def _parse_meta(raw: bytes) -> dict[str, Any]:
    try:
        meta = json.loads(raw.decode())
    except (UnicodeDecodeError, ValueError) as e:
        raise BadEntry(f"its metadata is not valid JSON ({e})") from None
    if not isinstance(meta, dict):
        raise BadEntry("its metadata is not a JSON object")
    return meta


def _check_entry(meta: dict[str, Any], files: dict[str, bytes | None], key: str) -> None:
    if meta.get("format") != FORMAT:
        raise BadEntry(f"it was written in cache format {meta.get('format')!r}, this Yota "
                       f"reads format {FORMAT} (stale)")
    described = meta.get("files")
    if not isinstance(described, dict):
        raise BadEntry("its metadata does not describe its files")
    for name in FILES:
        data, want = files.get(name), described.get(name, {}).get("bytes")
        if data is None:
            raise BadEntry(f"{name} is missing")
        if len(data) != want:
            raise BadEntry(f"{name} is truncated or altered ({len(data)} bytes, the metadata "
                           f"says {want})")
    if meta.get("checksum") != checksum(meta, files):  # type: ignore[arg-type]
        raise BadEntry("its checksum does not match its contents (modified or corrupted)")
    if meta.get("key") != key:
        raise BadEntry(f"it is stored under {key[:16]} but its metadata says "
                       f"{str(meta.get('key'))[:16]}")


# -- the process-wide cache -----------------------------------------------------------------
_caches: dict[Path, DiskCache] = {}


def default_cache() -> DiskCache:
    """The cache in ``cache_dir()`` (one object per directory in this process)."""
    root = cache_dir()
    if root not in _caches:
        _caches[root] = DiskCache(root)
    return _caches[root]


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


# -- inspection -----------------------------------------------------------------------------
@dataclass
class Explanation:
    """What ``explain`` found: the key's parts, whether it hits, and on a miss the nearest
    stored entry and the parts in which it differs."""

    key: Key
    cache: DiskCache
    hit: bool
    problem: str | None = None
    nearest: str | None = None
    differing: list[str] = field(default_factory=list)
    nearest_meta: dict[str, Any] | None = None
    ir_diff: list[str] = field(default_factory=list)

    def __str__(self) -> str:
        k = self.key
        status = "HIT" if self.hit else "MISS"
        lines = [f"key {k.hex}  {status}", f"  cache {self.cache.root}"]
        if self.problem:
            lines.append(f"  the cache cannot be used: {self.problem}")
        lines.append("  parts:")
        for name in KEY_PARTS:
            lines.append(f"    {name:<10} {k.digests[name][:12]}  {_show(k.parts[name])}")
        if not self.hit:
            lines += self._nearest_lines()
        return "\n".join(lines)

    def _nearest_lines(self) -> list[str]:
        if self.nearest is None:
            return ["  no stored entry to compare with"]
        meta = self.nearest_meta or {}
        lines = [f"  nearest entry {self.nearest[:16]} (@{meta.get('function')}): "
                 f"{len(self.differing)} part(s) differ: {', '.join(self.differing)}"]
        old = meta.get("parts", {})
        for name in self.differing:
            lines.append(f"    {name}: stored {_show(old.get(name))}")
            lines.append(f"    {' ' * len(name)}  now    {_show(self.key.parts[name])}")
        lines += [f"    {d}" for d in self.ir_diff]
        return lines


def _show(v: Any, width: int = 200) -> str:
    s = v if isinstance(v, str) else json.dumps(v, sort_keys=True)
    return s if len(s) <= width else s[:width - 3] + "..."


def explain(f: Callable[..., Any], *args: Any, backend: str | None = None,
            optimize: bool = True, kind: str = "grad") -> Explanation:
    """Trace ``f`` at ``args`` as ``yota.grad`` would (``kind="forward"``: as
    ``yota.compile``), compute its cache key without compiling, and look it up.

    >>> import numpy as np, yota
    >>> e = yota.cache.explain(lambda x: np.sum(x * x), np.ones(3))
    >>> sorted(e.key.parts) == sorted(yota.cache.KEY_PARTS)
    True
    """
    fn, sig = program_ir(f, args, kind=kind, optimize=optimize)
    key = make_key(fn, backend, kind=kind, signature=sig)
    if key is None:
        raise YotaError(f"backend {backend!r} does not save compiled code; nothing is cached")
    return explain_key(key, default_cache())


def program_ir(f: Callable[..., Any], args: Sequence[Any], *, kind: str = "grad",
               optimize: bool = True) -> tuple[Function, Any]:
    """The IR ``yota.grad`` (or, for ``kind="forward"``, ``yota.compile``) would compile
    for ``f`` at ``args``, and the argument signature."""
    from .grad import _trace, run_pipeline

    if kind == "forward":
        from .tracer import trace

        _, tape = trace(f, *args)
        fn = tape.to_ir()
        return (run_pipeline(fn) if optimize else fn), tape_signature(tape)
    from yota.ir.autodiff import vjp

    _, tape = _trace(f, args)
    fn = tape.to_ir()
    gfn = vjp(fn, [i for i in range(len(tape.leaf_vars)) if fn.inputs[i].dtype.kind == "f"])
    return (run_pipeline(gfn) if optimize else gfn), tape_signature(tape)


def explain_key(key: Key, cache: DiskCache) -> Explanation:
    problem = cache.problem(create=False) if cache.root.exists() else None
    try:
        hit = not problem and cache.read(key.hex) is not None
    except BadEntry as e:
        hit, problem = False, f"the entry exists but is unusable: {e}"
    ex = Explanation(key, cache, hit, problem)
    if not hit:
        _find_nearest(ex)
    return ex


def _find_nearest(ex: Explanation) -> None:
    best: tuple[int, int, str, dict[str, Any]] | None = None
    for k in ex.cache.keys():
        meta = ex.cache.read_meta(k)
        if meta is None or k == ex.key.hex:
            continue
        digests = meta.get("part_digests", {})
        diff = [n for n in KEY_PARTS if digests.get(n) != ex.key.digests[n]]
        other = meta.get("function") != ex.key.parts["ir"]["function"]
        rank = (len(diff) + 2 * other, -meta.get("created", 0), k, meta)
        if best is None or rank[:2] < best[:2]:
            best = rank
    if best is None:
        return
    ex.nearest, ex.nearest_meta = best[2], best[3]
    digests = best[3].get("part_digests", {})
    ex.differing = [n for n in KEY_PARTS if digests.get(n) != ex.key.digests[n]]
    if "ir" in ex.differing:
        ex.ir_diff = _ir_diff(ex.cache, best[2], ex.key.ir_text)


def _ir_diff(cache: DiskCache, key: str, now: str, limit: int = 40) -> list[str]:
    try:
        old = (cache.path(key) / "program.yir").read_text()
    except OSError:
        return []
    diff = list(difflib.unified_diff(old.splitlines(), now.splitlines(), "stored IR",
                                     "IR now", n=1, lineterm=""))
    return diff[:limit] + ([f"... ({len(diff) - limit} more diff lines)"]
                           if len(diff) > limit else [])


def entries() -> list[dict[str, Any]]:
    """A summary of every entry of the default cache, most recently used first."""
    cache = default_cache()
    out = []
    for k, size, used in sorted(cache.usage(), key=lambda u: -u[2]):
        meta = cache.read_meta(k) or {}
        out.append({"key": k, "bytes": size, "last_used": used,
                    "function": meta.get("function"), "kind": meta.get("parts", {}).get("kind"),
                    "signature": meta.get("parts", {}).get("signature")})
    return out


def info(key: str) -> dict[str, Any]:
    """The checked metadata of one entry of the default cache (a unique key prefix will do)."""
    cache = default_cache()
    full = cache.resolve(key)
    entry = cache.read(full)
    if entry is None:
        raise YotaError(f"no entry {full}")
    return entry.meta


def clear() -> int:
    """Remove every entry of the default cache; returns how many were removed.

    >>> import yota
    >>> yota.cache.clear() >= 0
    True
    """
    cache = default_cache()
    return cache.clear() if cache.root.exists() and cache.problem() is None else 0


def verify(remove: bool = False) -> list[tuple[str, str]]:
    """``(key, problem)`` for each entry of the default cache that would not load."""
    cache = default_cache()
    return cache.verify(remove) if cache.root.exists() else []


def iter_parts(key: Key) -> Iterator[tuple[str, str, Any]]:
    """``(name, digest, value)`` for each part of ``key``, in ``KEY_PARTS`` order."""
    for name in KEY_PARTS:
        yield name, key.digests[name], key.parts[name]
