"""The key of a compiled program: the SHA-256 of named, versioned parts (``KEY_PARTS``).

The parts are the canonical printed IR of the program with its callees, the argument
signature, the backend and its options, the target, the LLVM and llvmlite versions,
Yota's version with a hash of every source that shapes the generated code
(``source_files``), and the cache format.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import re
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from yota.backends import get_backend
from yota.ir.core import Function
from yota.ir.printer import print_function

FORMAT = 1  # bump when the layout, the metadata or the key's derivation changes
KEY_PARTS = ("format", "kind", "ir", "signature", "backend", "target", "llvm", "llvmlite",
             "yota")
# The key of a program by what it was built from: the traced program (before
# differentiation and the passes) and how it is turned into the program that runs.
TRACED_KEY_PARTS = ("format", "kind", "traced", "derivation", "signature", "backend",
                    "target", "llvm", "llvmlite", "yota")


class Key:
    """The key of one program: its parts, each part's digest, and the key itself.

    (A plain class: a dataclass costs a cache hit's new process ~0.3 ms to create.)"""

    __slots__ = ("parts", "ir_text", "digests", "hex")

    def __init__(self, parts: dict[str, Any], ir_text: str) -> None:
        self.parts, self.ir_text = parts, ir_text
        self.digests = {k: _digest(v) for k, v in parts.items()}
        h = hashlib.sha256(f"yota-cache-key/{FORMAT}\n".encode())
        for name in sorted(self.digests):
            h.update(f"{name}={self.digests[name]}\n".encode())
        self.hex: str = h.hexdigest()

    def __eq__(self, other: object) -> bool:
        return type(other) is Key and (self.parts, self.ir_text) == (other.parts, other.ir_text)

    __hash__ = None  # type: ignore[assignment]  # (mutable parts, as the dataclass was)

    def __repr__(self) -> str:
        return f"Key(hex={self.hex!r}, parts={self.parts!r})"


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
    if not cacheable_backend(mod):
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


def cacheable_backend(mod: Any) -> bool:
    """Whether backend module ``mod``'s code can be saved and loaded (not the
    interpreter; not CUDA without a device or on the CPU emulation)."""
    if not all(hasattr(mod, a) for a in ("save", "load", "target_key", "Artifact")):
        return False
    return not (callable(getattr(mod, "cacheable", None)) and not mod.cacheable())


def make_traced_key(fn: Function, backend: str | None, *, kind: str, signature: Any,
                    derivation: dict[str, Any]) -> Key | None:
    """The key of the program built from the traced program ``fn`` (the tape as IR,
    before differentiation and optimization) as ``derivation`` says (differentiated or
    not, w.r.t. which arguments, which passes): ``make_key``'s parts with ``traced`` (the
    printed traced program) for ``ir``, and ``derivation``. Everything else that shapes
    the program that runs is code hashed in the ``yota`` part (autodiff rules, passes),
    so the key is exact, except for code that lives outside Yota's sources: a program
    that calls a user primitive (its ``diffrule``/``nodiff`` are user code) or a process
    whose rule or pass registries were changed at run time gets no traced key (None)
    and is keyed by its built program only (``make_key``)."""
    if not builtin_code_only(fn):
        return None
    base = make_key(fn, backend, kind=kind, signature=signature)
    if base is None:
        return None
    parts = {("traced" if k == "ir" else k): v for k, v in base.parts.items()}
    parts["derivation"] = derivation
    return Key({k: parts[k] for k in TRACED_KEY_PARTS}, base.ir_text)


def _registries() -> list[tuple[str, dict[str, Any]]]:
    """The derivative-rule and pass registries of the modules imported so far: one not
    imported yet cannot have been changed (building a program imports it)."""
    out: list[tuple[str, dict[str, Any]]] = []
    if "yota.ir.autodiff" in sys.modules:
        from yota.ir.autodiff import RULES

        out.append(("rules", RULES))
    if "yota.ir.passes" in sys.modules:
        from yota.ir import passes

        out.append(("passes", passes.PASSES))
    return out


_PRISTINE: dict[str, tuple[tuple[str, int], ...]] = {}


def builtin_code_only(fn: Function) -> bool:
    """Whether building ``fn``'s program runs only code of Yota's own sources: no call to
    a user primitive, and the derivative-rule and pass registries as Yota defines them
    (each as first seen, when it holds only Yota's code; unchanged since)."""
    if any("primitive" in c.attrs for c in fn.all_callees().values()):
        return False
    for name, registry in _registries():
        now = tuple(sorted((k, id(v)) for k, v in registry.items()))
        if name not in _PRISTINE:  # the first look: as imported, unless changed since
            code = [v if name == "rules" else getattr(v, "apply", v)
                    for v in registry.values()]
            if not all(getattr(c, "__module__", "").startswith("yota.") for c in code):
                return False
            _PRISTINE[name] = now
        if now != _PRISTINE[name]:
            return False
    return True


_source_hashes: dict[str, str] = {}


def source_files(backend_module: Any) -> list[tuple[str, Path]]:
    """Every source file that can change the code compiled for ``backend_module`` or its
    calling convention, as (name, path): the front end that builds the IR (``yota/``), the
    IR package (ops, rules, passes), the backend-neutral modules of ``yota.backends`` and
    the backend's own package, and the packages of the backends it builds on (its
    ``BUILDS_ON``: the mlir backend runs through the llvm backend's JIT, entry and LAPACK
    lowering). Other backends' packages are left out."""
    from yota import backends as backends_pkg
    from yota import ir as ir_pkg

    yota_dir = Path(__file__).parent.parent  # yota/cache/key.py: the yota package (no import)
    groups = {"yota": str(yota_dir), "ir": str(Path(ir_pkg.__file__).parent),
              "backends": str(Path(backends_pkg.__file__).parent)}
    real = {g: os.path.realpath(d) for g, d in groups.items()}
    own_dir = Path(backend_module.__file__).parent
    owns = [os.path.realpath(own_dir)] + [os.path.realpath(own_dir.parent / name)
                                          for name in getattr(backend_module, "BUILDS_ON", ())]
    out: dict[str, str] = {}
    for group, root in groups.items():
        nested = [d for d in real.values() if _inside(d, real[group])]  # the wheel's yota/ir
        todo = [(root, real[group], f"{group}/")]
        while todo:
            d, here, prefix = todo.pop()
            if any(here == n or _inside(here, n) for n in nested):
                continue  # a nested group: hashed under its own name
            files = here == real[group] or group != "backends" or \
                any(here == o or _inside(here, o) for o in owns)
            if not files and not any(_inside(o, here) for o in owns):
                continue  # another backend's package (not a way to one of ours)
            try:
                entries = sorted(os.scandir(d), key=lambda e: e.name)
            except OSError:
                continue
            for e in entries:
                if e.is_dir():
                    todo.append((e.path, os.path.realpath(e.path), f"{prefix}{e.name}/"))
                elif files and e.name.endswith(".py"):
                    path = os.path.realpath(e.path) if e.is_symlink() else \
                        os.path.join(here, e.name)
                    out.setdefault(path, prefix + e.name)
    return sorted(((name, Path(path)) for path, name in out.items()), key=lambda t: t[0])


def default_pipeline() -> list[str]:
    """The names of the default pass pipeline (``yota.ir.passes.PIPELINE``), for the
    traced key's derivation, without importing the passes on a cache hit.

    Once ``yota.ir.passes`` is imported the names are read from it (they may have been
    changed at run time). Before, they are what importing it would give, a function of
    its sources only (no environment is read there): kept in the cache directory's
    ``sources/`` under a digest of ``ir/passes``' sources (the stat-checked digest of
    ``_sources_digest``) by a process that imported it fresh, else imported now."""
    mod = sys.modules.get("yota.ir.passes")
    if mod is not None:
        return [n for n, _ in mod.PIPELINE]
    from yota import ir as ir_pkg

    root = Path(ir_pkg.__file__).parent / "passes"
    files = sorted((f"ir/passes/{rel}", Path(path)) for rel, path in _py_files(str(root)))
    memo = _memo_path(f"pipeline:{_sources_digest('yota.ir.passes', files)}")
    if memo is not None:
        with contextlib.suppress(OSError, ValueError, UnicodeDecodeError):
            rec = json.loads(memo.read_bytes().decode())
            names = rec.get("pipeline") if isinstance(rec, dict) else None
            if isinstance(names, list) and all(isinstance(n, str) for n in names):
                return names
    from yota.ir import passes  # imported fresh: nothing can have changed it yet

    names = [n for n, _ in passes.PIPELINE]
    if memo is not None:
        _write_memo(memo, {"pipeline": names})
    return names


def _py_files(root: str, rel: str = "") -> list[tuple[str, str]]:
    """The ``.py`` files under ``root`` as ``Path(root).rglob("*.py")`` finds them
    (subfolders, but not through links to folders), as (path relative to ``root``,
    path), by ``os.scandir``: Path.rglob compiles its pattern and builds a path object
    per entry (~0.4-1.5 ms on each cache hit)."""
    out: list[tuple[str, str]] = []
    try:
        entries = list(os.scandir(os.path.join(root, rel) if rel else root))
    except OSError:
        return out
    for e in entries:
        name = os.path.join(rel, e.name) if rel else e.name
        try:
            is_dir = e.is_dir()
        except OSError:
            is_dir = False
        if is_dir and not e.is_symlink():
            out.extend(_py_files(root, name))
        elif not is_dir and e.name.endswith(".py"):
            out.append((name, e.path))
    return out


def _inside(path: str, root: str) -> bool:
    """Whether ``path`` lies strictly inside directory ``root`` (both resolved)."""
    return path.startswith(root.rstrip(os.sep) + os.sep)


def _yota_version(backend_module: Any) -> dict[str, str]:
    """Yota's version and a hash of every source that shapes the generated code
    (``source_files``), so an edited checkout never reuses stale code."""
    key = str(Path(backend_module.__file__).resolve())
    if key not in _source_hashes:
        _source_hashes[key] = _remembered_digest(key) or \
            _sources_digest(key, source_files(backend_module))
    version = getattr(sys.modules.get("yota"), "__version__", "unknown")
    return {"version": version, "sources": _source_hashes[key]}


def _sources_digest(key: str, files: list[tuple[str, Path]]) -> str:
    """The SHA-256 (16 hex digits) of the names and contents of ``files``.

    Reading every source costs a new process more than anything else on a cache hit, so
    the digest is kept in the cache directory (``sources/``) with each file's path,
    modification time (ns), size and inode, and reused while all of them are the same:
    the test Python itself applies to decide that a module's ``.pyc`` is current (so the
    code that runs is the code that was hashed)."""
    stats = []
    for name, path in files:
        try:
            st = os.stat(path)
            stats.append([name, str(path), st.st_mtime_ns, st.st_size, st.st_ino])
        except OSError:
            stats.append([name, str(path), None, None, None])
    memo = _memo_path(key)
    if memo is not None:
        with contextlib.suppress(OSError, ValueError, UnicodeDecodeError):
            rec = json.loads(memo.read_bytes().decode())
            if isinstance(rec, dict) and rec.get("files") == stats \
                    and isinstance(rec.get("digest"), str):
                return str(rec["digest"])
    h = hashlib.sha256()
    for name, path in files:
        with contextlib.suppress(OSError):
            h.update(name.encode() + b"\0" + path.read_bytes() + b"\0")
    digest = h.hexdigest()[:16]
    if memo is not None:
        _write_memo(memo, {"module": key, "files": stats, "dirs": _dir_stats(files),
                           "digest": digest})
    return digest


def _dir_stats(files: list[tuple[str, Path]]) -> list[list[Any]]:
    """Modification time (ns) and inode of every folder holding one of ``files`` and of
    their ancestors up to the folder common to all: a file added, removed or renamed in
    any of them (a new module, a new subpackage) changes one of these."""
    parents = {os.path.dirname(str(p)) for _, p in files}
    if not parents:
        return []
    top = os.path.commonpath(sorted(parents))
    dirs = set()
    for d in parents:
        while d not in dirs and len(d) >= len(top):
            dirs.add(d)
            d = os.path.dirname(d)
    out: list[list[Any]] = []
    for d in sorted(dirs):
        try:
            st = os.stat(d)
            out.append([d, st.st_mtime_ns, st.st_ino])
        except OSError:
            out.append([d, None, None])
    return out


def _remembered_digest(key: str) -> str | None:
    """The digest kept for backend ``key`` when none of its files nor folders changed
    since (the files are the list ``source_files`` gave then: no folder changed, so
    walking them again would give the same list)."""
    memo = _memo_path(key)
    if memo is None:
        return None
    try:
        rec = json.loads(memo.read_bytes().decode())
    except (OSError, ValueError, UnicodeDecodeError):
        return None
    if not isinstance(rec, dict) or not isinstance(rec.get("digest"), str) or \
            not isinstance(rec.get("files"), list) or not isinstance(rec.get("dirs"), list):
        return None
    try:
        for d, mtime, ino in rec["dirs"]:
            st = os.stat(d)
            if [st.st_mtime_ns, st.st_ino] != [mtime, ino]:
                return None
        for _name, path, mtime, size, ino in rec["files"]:
            st = os.stat(path)
            if [st.st_mtime_ns, st.st_size, st.st_ino] != [mtime, size, ino]:
                return None
    except (OSError, TypeError, ValueError):
        return None
    return str(rec["digest"])


def _memo_path(key: str) -> Path | None:
    """Where the sources digest of backend ``key`` is kept: ``sources/`` of the cache
    directory, if that directory exists and only its owner may write it (else None)."""
    from .config import cache_dir

    root = cache_dir()
    try:
        st = os.stat(root)
    except OSError:
        return None
    if st.st_uid not in (os.getuid(), 0) or st.st_mode & 0o022:
        return None
    name = hashlib.sha256(f"{sys.executable}\0{key}".encode()).hexdigest()[:32]
    return root / "sources" / f"{name}.json"


def _write_memo(memo: Path, rec: dict[str, Any]) -> None:
    with contextlib.suppress(OSError):
        if not memo.parent.is_dir():
            memo.parent.mkdir(mode=0o700, exist_ok=True)
        import tempfile  # (imported on a write only)

        fd, tmp = tempfile.mkstemp(prefix=".tmp.", dir=memo.parent)
        try:
            with os.fdopen(fd, "w") as f:
                json.dump(rec, f)
            os.replace(tmp, memo)
        finally:
            with contextlib.suppress(OSError):
                os.unlink(tmp)


def tape_signature(tape: Any) -> tuple[Any, ...]:
    """The argument signature a tape was traced with (structure, static values, leaves)."""
    from ..program import signature

    return signature([e.value for e in tape.entries if e.kind == "input"])


_ADDRESS = r" at 0x[0-9a-fA-F]+"  # (compiled by re on first use: not on a cache hit)


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
    return re.sub(_ADDRESS, "", repr(x))
