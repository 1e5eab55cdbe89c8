"""The on-disk cache of compiled programs (yota.cache), in this process: keys, entries,
faults (each recovered from with a warning and a correct result), permissions, eviction,
explain. Cross-process behaviour is in test_cache_process.py."""

from __future__ import annotations

import errno
import importlib
import json
import os
import stat
import types
from pathlib import Path

import numpy as np
import pytest
from yota.backends import llvm

import yota
from yota import cache as yc
from yota import pipeline


@pytest.fixture
def cache_dir(tmp_path, monkeypatch):
    d = tmp_path / "cache"
    monkeypatch.setenv("YOTA_CACHE_DIR", str(d))
    monkeypatch.delenv("YOTA_CACHE", raising=False)
    monkeypatch.delenv("YOTA_CACHE_MAX_BYTES", raising=False)
    yc.stats.reset()
    return d


def loss(x, w):
    return np.sum(np.tanh(x @ w) ** 2)


X = np.linspace(-1.0, 1.0, 12).reshape(3, 4)
W = np.linspace(0.5, -0.5, 8).reshape(4, 2)


def fresh(f):
    """A new function object with ``f``'s code, the programs yota.grad keeps in memory for
    that code dropped: only the on-disk cache can answer for it (same name, parameters and
    source lines)."""
    importlib.import_module("yota.grad").forget(f)
    return types.FunctionType(f.__code__, f.__globals__, f.__name__, f.__defaults__,
                              f.__closure__)


def run(f=loss, *args, **kw):
    """yota.grad through a new function object, so the in-memory cache cannot answer."""
    val, grads = yota.grad(fresh(f), *(args or (X, W)), **kw)
    return [np.asarray(val)] + [np.asarray(v) for v in grads]


def same(a, b):
    return all(np.array_equal(x, y) for x, y in zip(a, b, strict=True))


def only_entry(d: Path) -> Path:
    entries = list((d / "entries").iterdir())
    assert len(entries) == 1, entries
    return entries[0]


def reference():
    return run(cache=False)


# -- hits and misses -----------------------------------------------------------------------
def test_miss_stores_then_hit_loads_without_compiling(cache_dir):
    compiles = llvm.stats["compiles"]
    first = run()
    assert (yc.stats.misses, yc.stats.stores, yc.stats.hits) == (1, 1, 0)
    assert llvm.stats["compiles"] == compiles + 1
    second = run()
    assert yc.stats.hits == 1 and llvm.stats["compiles"] == compiles + 1
    assert same(first, second)


def test_cache_false_and_yota_cache_0_leave_the_cache_alone(cache_dir, monkeypatch):
    run(cache=False)
    assert not cache_dir.exists()
    monkeypatch.setenv("YOTA_CACHE", "0")
    run()
    assert not cache_dir.exists() and yc.stats.misses == 0


def test_compile_forward_program_is_cached(cache_dir):
    f = lambda x, w: np.tanh(x @ w) * 2.0  # noqa: E731
    out = yota.compile(f, X, W)(X, W)
    assert yc.stats.stores == 1
    assert np.array_equal(yota.compile(fresh(f), X, W)(X, W), out)
    assert yc.stats.hits == 1
    assert json.loads((only_entry(cache_dir) / "meta.json").read_text())["parts"]["kind"] == \
        "forward"


def test_dynamic_graphs_use_the_cache(cache_dir):
    g = lambda x, w: loss(x, w)  # noqa: E731
    yota.grad(g, X, W, dynamic=True)
    assert yc.stats.stores == 1


def test_interpreter_is_not_cached(cache_dir):
    run(backend="interp")
    assert yc.stats.misses == 0 and not cache_dir.exists()


def test_entry_layout_permissions_and_metadata(cache_dir):
    run()
    entry = only_entry(cache_dir)
    for d in (cache_dir, cache_dir / "entries", cache_dir / "tmp", entry):
        assert stat.S_IMODE(os.stat(d).st_mode) == 0o700, d
    assert sorted(p.name for p in entry.iterdir()) == ["meta.json", "object.o", "program.yir"]
    for p in entry.iterdir():
        assert stat.S_IMODE(p.stat().st_mode) == 0o600
    meta = json.loads((entry / "meta.json").read_text())  # JSON, never pickle
    assert meta["key"] == entry.name and meta["format"] == yc.FORMAT
    assert set(meta["parts"]) == set(yc.KEY_PARTS)
    assert [i["label"] for i in meta["inputs"]] == ["x", "w"]
    assert meta["outputs"][0] == {"label": "value", "type": "f64[]"}
    assert meta["memory_plan"]["mem_total_bytes"] >= 0
    assert meta["backend_meta"]["ws_bytes"] >= 0
    files = {n: (entry / n).read_bytes() for n in yc.FILES}
    assert meta["checksum"] == yc.checksum(meta, files)
    assert yc.verify() == []


def test_key_parts_and_signature_are_stable(cache_dir):
    fn, sig = pipeline.program_ir(loss, (X, W))
    key = yc.make_key(fn, None, kind="grad", signature=sig)
    assert tuple(key.parts) == yc.KEY_PARTS
    assert key.parts["signature"] == "(f64[3,4], f64[4,2])"
    assert key.parts["target"]["triple"] and key.parts["llvm"] and key.parts["llvmlite"]
    assert key.parts["backend"]["options"]["threads"] >= 1
    fn2, sig2 = pipeline.program_ir(loss, (X, W))  # traced again: the same key
    assert yc.make_key(fn2, None, kind="grad", signature=sig2).hex == key.hex
    # static values print without memory addresses (they change in every process)
    text = yc.describe_signature(yota.program.signature([X, loss, (3, "a"), None]))
    assert "0x" not in text and "test_cache.loss" in text and "(3, 'a')" in text


def test_every_part_changes_the_key(cache_dir, monkeypatch):
    fn, sig = pipeline.program_ir(loss, (X, W))
    base = yc.make_key(fn, None, kind="grad", signature=sig)
    keys = {base.hex}
    keys.add(yc.make_key(fn, None, kind="forward", signature=sig).hex)
    keys.add(yc.make_key(fn, None, kind="grad", signature=(1,)).hex)
    fn2, _ = pipeline.program_ir(lambda x, w: np.sum(np.tanh(x @ w) ** 3), (X, W))
    keys.add(yc.make_key(fn2, None, kind="grad", signature=sig).hex)
    target = llvm.target_key()
    for change in ({"cpu": "x86-64-v3"}, {"features": "+sse2"}, {"llvm": "99.0"},
                   {"llvmlite": "9.9"}):
        monkeypatch.setattr(llvm, "target_key", lambda c=change: {**target, **c})
        keys.add(yc.make_key(fn, None, kind="grad", signature=sig).hex)
    monkeypatch.undo()
    monkeypatch.setattr(llvm, "options_key", lambda: {"threads": 99})
    keys.add(yc.make_key(fn, None, kind="grad", signature=sig).hex)
    monkeypatch.undo()
    monkeypatch.setattr(yota, "__version__", "9.9.9")
    keys.add(yc.make_key(fn, None, kind="grad", signature=sig).hex)
    monkeypatch.setattr(yc.key, "FORMAT", 99)
    keys.add(yc.make_key(fn, None, kind="grad", signature=sig).hex)
    assert len(keys) == 11


def test_other_target_misses_and_explain_names_it(cache_dir, monkeypatch):
    run()
    target = llvm.target_key()
    monkeypatch.setattr(llvm, "target_key", lambda: {**target, "cpu": "some-other-cpu"})
    ex = yota.explain(loss, X, W)
    assert not ex.hit and ex.differing == ["target"]
    assert "some-other-cpu" in str(ex)


# -- explain --------------------------------------------------------------------------------
def test_explain_hit_and_nearest_entry_on_a_miss(cache_dir):
    compiles = llvm.stats["compiles"]
    ex = yota.explain(loss, X, W)
    assert not ex.hit and ex.nearest is None and "no stored entry" in str(ex)
    run()
    ex = yota.explain(loss, X, W)
    assert ex.hit and "HIT" in str(ex)
    for name in yc.KEY_PARTS:
        assert f"    {name} " in str(ex)
    ex = yota.explain(loss, X[:2], W)
    assert not ex.hit and ex.nearest == only_entry(cache_dir).name
    assert ex.differing == ["ir", "signature"]
    text = str(ex)
    assert "f64[3,4]" in text and "f64[2,4]" in text and "--- stored IR" in text
    assert llvm.stats["compiles"] == compiles + 1  # explain compiles nothing


# -- faults: each warns, gives the right result, and leaves an intact entry -------------------
def _corrupt_and_rerun(cache_dir, damage, match):
    want = reference()
    run()
    entry = only_entry(cache_dir)
    damage(entry)
    with pytest.warns(yc.CacheWarning, match=match):
        got = run()
    assert same(got, want)
    assert yc.stats.errors == 1
    assert yc.verify() == [] and len(list((cache_dir / "entries").iterdir())) == 1
    assert list((cache_dir / "tmp").iterdir()) == []
    assert same(run(), want) and yc.stats.hits == 1  # the rebuilt entry loads


def _rewrite_meta(entry, change):
    meta = json.loads((entry / "meta.json").read_text())
    change(meta)
    files = {n: (entry / n).read_bytes() for n in yc.FILES}
    meta["checksum"] = yc.checksum(meta, files)
    (entry / "meta.json").write_text(json.dumps(meta))


def test_truncated_object(cache_dir):
    def damage(entry):
        obj = entry / "object.o"
        obj.write_bytes(obj.read_bytes()[:100])
    _corrupt_and_rerun(cache_dir, damage, r"object\.o is truncated")


def test_missing_object(cache_dir):
    _corrupt_and_rerun(cache_dir, lambda e: (e / "object.o").unlink(), r"object\.o is missing")


def test_corrupted_metadata(cache_dir):
    def damage(entry):
        (entry / "meta.json").write_bytes(b'{"format": 1, "key": \x00garbage')
    _corrupt_and_rerun(cache_dir, damage, "metadata is not valid JSON")


def test_wrong_checksum(cache_dir):
    def damage(entry):
        meta = json.loads((entry / "meta.json").read_text())
        meta["checksum"] = "0" * 64
        (entry / "meta.json").write_text(json.dumps(meta))
    _corrupt_and_rerun(cache_dir, damage, "checksum does not match")


def test_flipped_byte_in_object_fails_the_checksum(cache_dir):
    def damage(entry):
        obj = entry / "object.o"
        data = bytearray(obj.read_bytes())
        data[len(data) // 2] ^= 0xFF
        obj.write_bytes(bytes(data))
    _corrupt_and_rerun(cache_dir, damage, "checksum does not match")


def test_stale_format_version(cache_dir):
    _corrupt_and_rerun(cache_dir, lambda e: _rewrite_meta(e, lambda m: m.update(format=0)),
                       r"cache format 0.*\(stale\)")


def test_object_the_backend_refuses(cache_dir):
    def damage(entry):
        _rewrite_meta(entry, lambda m: m["backend_meta"].update(target={"cpu": "elsewhere"}))
    _corrupt_and_rerun(cache_dir, damage, "failed to load .*another target")


def test_entry_holding_another_program_is_not_used(cache_dir):
    want = reference()
    run()
    entry = only_entry(cache_dir)
    (entry / "program.yir").write_text("func @other() -> () {\n  return\n}")
    _rewrite_meta(entry, lambda m: m["files"]["program.yir"].update(
        bytes=len((entry / "program.yir").read_bytes())))
    with pytest.warns(yc.CacheWarning, match="another program"):
        assert same(run(), want)


def test_full_disk_leaves_no_entry(cache_dir, monkeypatch):
    want = reference()

    def failing_write(path, data):
        with open(path, "wb") as f:
            f.write(data[: len(data) // 2])
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC), path)

    monkeypatch.setattr(yc.store, "_write_file", failing_write)
    with pytest.warns(yc.CacheWarning, match="No space left on device.*not cached"):
        got = run()
    assert same(got, want)
    assert list((cache_dir / "entries").iterdir()) == []
    assert list((cache_dir / "tmp").iterdir()) == []
    monkeypatch.undo()
    monkeypatch.setenv("YOTA_CACHE_DIR", str(cache_dir))
    assert same(run(), want) and yc.stats.stores == 1  # disk space again: stored


def test_directory_writable_by_others_is_refused(cache_dir):
    want = reference()
    cache_dir.mkdir(mode=0o700)
    os.chmod(cache_dir, 0o777)
    with pytest.warns(yc.CacheWarning, match="writable by others"):
        got = run()
    assert same(got, want)
    assert not (cache_dir / "entries").exists()  # nothing written, nothing read
    os.chmod(cache_dir, 0o700)


def test_subdirectory_writable_by_others_is_refused(cache_dir):
    run()
    os.chmod(cache_dir / "entries", 0o775)
    with pytest.warns(yc.CacheWarning, match="writable by others"):
        assert same(run(), reference())
    assert yc.stats.hits == 0


@pytest.mark.skipif(os.getuid() != 0, reason="needs root to give a directory away")
def test_directory_of_another_user_is_refused(cache_dir):
    cache_dir.mkdir(mode=0o700)
    os.chown(cache_dir, 65534, 65534)
    with pytest.warns(yc.CacheWarning, match="belongs to another user"):
        assert same(run(), reference())
    assert not (cache_dir / "entries").exists()


def test_unwritable_location_compiles_without_cache(tmp_path, monkeypatch):
    blocker = tmp_path / "file"
    blocker.write_text("not a directory")
    monkeypatch.setenv("YOTA_CACHE_DIR", str(blocker / "cache"))
    with pytest.warns(yc.CacheWarning, match="cannot create"):
        assert same(run(), run(cache=False))


# -- size limit, clear, verify --------------------------------------------------------------
def test_least_recently_used_entries_are_evicted(cache_dir, monkeypatch):
    fs = [lambda x, w, k=k: np.sum(np.tanh(x @ w) * k) for k in (1.0, 2.0, 3.0)]
    run(fs[0])
    run(fs[1])
    sizes = {k: s for k, s, _ in yc.default_cache().usage()}
    first, second = sorted(sizes, key=lambda k: os.stat(cache_dir / "entries" / k).st_mtime)
    os.utime(cache_dir / "entries" / first, (1.0e9, 1.0e9))
    os.utime(cache_dir / "entries" / second, (1.5e9, 1.5e9))
    run(fs[0])  # a hit makes the first entry the most recently used
    assert yc.stats.hits == 1
    monkeypatch.setenv("YOTA_CACHE_MAX_BYTES", str(int(max(sizes.values()) * 2.5)))
    run(fs[2])  # a third entry goes over the limit: the least recently used one goes
    left = {p.name for p in (cache_dir / "entries").iterdir()}
    assert len(left) == 2 and first in left and second not in left
    assert yc.stats.evictions == 1


def test_clear_and_verify(cache_dir):
    run()
    run(lambda x, w: np.sum(x @ w))
    entry = sorted((cache_dir / "entries").iterdir())[0]
    (entry / "object.o").write_bytes(b"\x7fELF")
    bad = yc.verify()
    assert [k for k, _ in bad] == [entry.name] and "truncated" in bad[0][1]
    assert yc.verify(remove=True) and yc.verify() == []
    assert yc.clear() == 1
    assert list((cache_dir / "entries").iterdir()) == []


def test_entries_and_info(cache_dir):
    run()
    [row] = yc.entries()
    assert row["function"] == "loss_vjp" and row["kind"] == "grad" and row["bytes"] > 0
    meta = yc.info(row["key"][:10])
    assert meta["key"] == row["key"]
    with pytest.raises(yota.YotaError, match="no entry"):
        yc.info("ffffffffff")


def test_docstring_examples(cache_dir):
    import doctest
    import importlib

    for name in ("yota.cache", "yota.cache.explanation", "yota.cache.store",
                 "yota.pipeline", "yota.aot"):  # yota.aot the attribute is the function
        assert doctest.testmod(importlib.import_module(name)).failed == 0, name


def test_a_key_that_cannot_be_computed_compiles_without_cache(cache_dir, monkeypatch):
    def broken(*a, **k):
        raise TypeError("cannot print attribute value <object>")

    monkeypatch.setattr(yc.lookup, "make_key", broken)
    with pytest.warns(yc.CacheWarning, match="cannot compute a cache key"):
        assert same(run(), reference())
