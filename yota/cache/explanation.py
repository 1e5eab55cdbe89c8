"""``explain_key``: a program's cache key, its parts, and why it misses (the nearest entry
and the parts that differ, with an IR diff). ``yota.explain`` traces a function first."""

from __future__ import annotations

import difflib
import json
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

from .config import BadEntry
from .key import KEY_PARTS, Key
from .store import DiskCache


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



def iter_parts(key: Key) -> Iterator[tuple[str, str, Any]]:
    """``(name, digest, value)`` for each part of ``key``, in ``KEY_PARTS`` order."""
    for name in KEY_PARTS:
        yield name, key.digests[name], key.parts[name]
