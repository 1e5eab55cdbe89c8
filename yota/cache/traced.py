"""Finding a stored program by what it was built from: the traced program.

An entry is keyed by the program that runs (``make_key``: the printed IR after
differentiation and the passes), so finding it needs that program built first. A new
process that only wants the stored entry would differentiate and optimize for nothing:
``traced/<traced key>.json`` names the entry that the traced program (``make_traced_key``)
was last built into, with what a call needs to know without the IR (the differentiated
inputs, the number of guards). The name file holds the traced key's parts and a checksum
over itself; the entry it names is read and checked as any entry is, and its key parts
must equal the name's (the program kind, signature, backend, target, versions and source
hashes): a stale, damaged or mismatched name is removed and the program built as without
it. Eviction removes entries, never names: a name whose entry is gone is a miss.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
from pathlib import Path
from typing import Any

from .config import BadEntry
from .key import FORMAT, Key, _canonical
from .store import DiskCache, _unsafe, _write_file

DIR = "traced"
SHARED_PARTS = ("format", "kind", "signature", "backend", "target", "llvm", "llvmlite", "yota")


def name_path(cache: DiskCache, traced: Key) -> Path:
    return cache.root / DIR / f"{traced.hex}.json"


def _checksum(record: dict[str, Any]) -> str:
    return hashlib.sha256(_canonical({k: v for k, v in record.items()
                                      if k != "checksum"})).hexdigest()


def _is_hex64(s: str) -> bool:
    """Whether ``s`` is 64 lowercase hex digits (an entry's key), without a regex (a
    pattern compiled on every cache hit)."""
    return len(s) == 64 and not s.strip("0123456789abcdef")


def read_name(cache: DiskCache, traced: Key) -> dict[str, Any] | None:
    """The checked name record of ``traced`` (None if there is none or it is unusable:
    an unusable one is removed)."""
    path = name_path(cache, traced)
    if _unsafe(path.parent) is not None:  # like entries/: only the owner may write there
        return None
    try:
        raw = path.read_bytes()
    except OSError:
        return None
    try:
        rec = json.loads(raw.decode())
        ok = (isinstance(rec, dict) and rec.get("format") == FORMAT
              and rec.get("traced_key") == traced.hex and rec.get("checksum") == _checksum(rec)
              and rec.get("parts") == json.loads(_canonical(traced.parts))
              and isinstance(rec.get("entry"), str)
              and _is_hex64(rec["entry"]))
    except (UnicodeDecodeError, ValueError):
        ok = False
    if not ok:
        remove_name(cache, traced)
        return None
    return rec


def matches(rec: dict[str, Any], meta: dict[str, Any], program: bytes) -> bool:
    """Whether the entry (``meta``, and ``program``: its printed IR) is the one the name
    record expects: the same key parts, and the program its own key was computed from."""
    parts = meta.get("parts")
    if not isinstance(parts, dict) or not all(
            json.loads(_canonical(parts.get(p))) == rec["parts"].get(p) for p in SHARED_PARTS):
        return False
    ir = parts.get("ir")
    digest = hashlib.sha256(program).hexdigest()
    return isinstance(ir, dict) and ir.get("sha256") == digest == rec.get("program_sha256")


def write_name(cache: DiskCache, traced: Key, entry: Key, facts: dict[str, Any]) -> bool:
    """Record that ``traced`` builds the program stored under ``entry`` (atomically);
    False if it could not be written (the program is then found by its own key only)."""
    rec: dict[str, Any] = {"format": FORMAT, "traced_key": traced.hex, "entry": entry.hex,
                           "parts": json.loads(_canonical(traced.parts)), "facts": facts,
                           "program_sha256": entry.parts["ir"]["sha256"]}
    rec["checksum"] = _checksum(rec)
    data = json.dumps(rec, sort_keys=True, indent=1).encode()
    d = cache.root / DIR
    try:
        if not d.is_dir():
            d.mkdir(mode=0o700, exist_ok=True)
            os.chmod(d, 0o700)
        import tempfile  # (imported on a write only)

        fd, tmp = tempfile.mkstemp(prefix="name.", dir=cache.tmp_dir)
        os.close(fd)
        os.unlink(tmp)
        try:
            _write_file(tmp, data)
            os.replace(tmp, name_path(cache, traced))
        finally:
            with contextlib.suppress(OSError):
                os.unlink(tmp)
    except (OSError, BadEntry):
        return False
    return True


def remove_name(cache: DiskCache, traced: Key) -> None:
    with contextlib.suppress(OSError):
        os.unlink(name_path(cache, traced))


def clear_names(cache: DiskCache) -> None:
    """Remove every name record."""
    d = cache.root / DIR
    with contextlib.suppress(OSError):
        for p in d.iterdir():
            with contextlib.suppress(OSError):
                p.unlink()
