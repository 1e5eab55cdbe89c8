"""The llvm backend's object cache directory (the on-disk cache's ``objects/``, named by
``set_object_cache``): object code of runtime modules (``jit.cached_object``,
``jit.runtime_module``) and small JSON records (``target.host``'s description of the
host), each written atomically into an owner-only directory and read only from one that
others cannot write. Imports no LLVM.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import stat
import threading
from pathlib import Path
from typing import Any

OBJ_MAGIC = b"YOTARTO1"
_object_dir: Path | None = None
_object_lock = threading.Lock()


def set_object_cache(path: str | os.PathLike[str] | None) -> None:
    """Keep compiled runtime modules in ``path`` (created owner-only; None: keep none)."""
    global _object_dir
    _object_dir = None if path is None else Path(path)


def object_cache_dir() -> Path | None:
    """The directory ``set_object_cache`` named (None: none)."""
    return _object_dir


def _safe_dir(d: Path) -> bool:
    st = os.stat(d)
    return stat.S_ISDIR(st.st_mode) and st.st_uid in (os.getuid(), 0) \
        and not st.st_mode & 0o022


def _read_object(path: Path) -> bytes | None:
    try:
        if not _safe_dir(path.parent):
            return None
        raw = path.read_bytes()
    except OSError:
        return None
    head = len(OBJ_MAGIC) + 64
    obj = raw[head:]
    if raw[:len(OBJ_MAGIC)] != OBJ_MAGIC or \
            raw[len(OBJ_MAGIC):head].decode("ascii", "replace") != hashlib.sha256(obj).hexdigest():
        with contextlib.suppress(OSError):
            path.unlink()  # damaged: compiled again and rewritten
        return None
    return obj


def _atomic_write(path: Path, data: bytes) -> None:
    """Write ``data`` to ``path`` atomically (a temporary file renamed over it), into an
    owner-only directory made if missing; nothing is written into one others may write.
    Raises OSError (the callers ignore it: a cache that cannot be written is only slower)."""
    d = path.parent
    if not d.is_dir():
        d.mkdir(mode=0o700, parents=True, exist_ok=True)
        os.chmod(d, 0o700)
    if not _safe_dir(d):
        return
    import tempfile  # (imported on a write only)

    fd, tmp = tempfile.mkstemp(prefix=".tmp.", dir=d)
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
        os.replace(tmp, path)
    finally:
        with contextlib.suppress(OSError):
            os.unlink(tmp)


def _write_object(d: Path, key: str, obj: bytes) -> None:
    _atomic_write(d / f"{key}.o", OBJ_MAGIC + hashlib.sha256(obj).hexdigest().encode() + obj)


# -- JSON records in the object cache (the host description, ``target.host``) --------------
def read_record(path: Path) -> dict[str, Any] | None:
    """A JSON object written by ``write_record`` (None: none, unreadable, or in a
    directory others may write)."""
    try:
        if not _safe_dir(path.parent):
            return None
        rec = json.loads(path.read_bytes().decode())
    except (OSError, ValueError, UnicodeDecodeError):
        return None
    return rec if isinstance(rec, dict) else None


def write_record(path: Path, rec: dict[str, Any]) -> None:
    """Write ``rec`` as JSON, atomically, into an owner-only directory (failures ignored)."""
    with _object_lock, contextlib.suppress(OSError):
        _atomic_write(path, json.dumps(rec, sort_keys=True).encode())


def sources_digest(paths: list[str]) -> str:
    """The SHA-256 of the names and contents of ``paths``, kept in the object cache with
    each file's modification time (ns), size and inode and reused while they are all the
    same (the test Python applies to a ``.pyc``), so a process that finds its runtime
    modules cached does not read every source (one record per set of paths)."""
    stats: list[Any] = []
    for p in paths:
        st = os.stat(p)
        stats.append([p, st.st_mtime_ns, st.st_size, st.st_ino])
    d = _object_dir
    name = hashlib.sha256("\0".join(paths).encode()).hexdigest()[:32]
    memo = d / f"sources-{name}.json" if d is not None else None
    if memo is not None:
        rec = read_record(memo)
        if rec is not None and rec.get("stats") == stats and isinstance(rec.get("digest"), str):
            return str(rec["digest"])
    h = hashlib.sha256()
    for p in paths:
        h.update(os.path.basename(p).encode() + b"\0" + Path(p).read_bytes() + b"\n")
    digest = h.hexdigest()
    if memo is not None:
        write_record(memo, {"stats": stats, "digest": digest})
    return digest
