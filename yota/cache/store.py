"""A cache directory on disk: entries written atomically, read back checked, evicted
least recently used first (the layout is described in ``yota.cache``)."""

from __future__ import annotations

import contextlib
import errno
import hashlib
import json
import os
import re
import stat
import threading
import time
from pathlib import Path
from typing import Any

import numpy as np

from yota.ir.core import Function
from yota.ir.errors import YotaError
from yota.ir.printer import format_attr

from .config import BadEntry, _warn_once, cache_dir, max_bytes, stats
from .key import FORMAT, Key, _canonical

FILES = ("object.o", "program.yir")
TMP_MAX_AGE = 3600.0  # seconds after which a leftover temporary directory is removed
_RESCAN_EVERY = 32  # stores between two measurements of the cache's size


class StoredEntry:
    """A stored entry as read back: metadata and files (checked). (A plain class:
    creating a dataclass cost a cache hit's new process ~0.4 ms.)"""

    __slots__ = ("key", "path", "meta", "files")

    def __init__(self, key: str, path: Path, meta: dict[str, Any],
                 files: dict[str, bytes]) -> None:
        self.key, self.path, self.meta, self.files = key, path, meta, files

    def __repr__(self) -> str:
        return f"StoredEntry(key={self.key!r}, path={self.path!r}, files={sorted(self.files)})"


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
        import shutil
        import tempfile  # (imported on a write only)

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
        import shutil
        import tempfile

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
        import shutil

        n = sum(self.remove(k) for k in self.keys())
        # traced/: names of entries; objects/: runtime object code; sources/: digests
        for d in (self.tmp_dir, *(self.root / name for name in ("traced", "objects",
                                                                 "sources"))):
            for p in list(d.glob("*")) if d.exists() else []:
                if p.is_dir():
                    shutil.rmtree(p, ignore_errors=True)
                else:
                    with contextlib.suppress(OSError):
                        p.unlink()
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
        import shutil

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
