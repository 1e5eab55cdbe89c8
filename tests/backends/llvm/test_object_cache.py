"""The llvm backend's object cache of runtime modules (backends/llvm/runtime/jit.py
``cached_object``): the helper-thread pool is compiled once and loaded from the on-disk
cache's ``objects/`` afterwards; damaged or unsafe files are never used; and a new
process with a warm cache runs its first gradient without any LLVM optimization or code
generation."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap

import numpy as np
import pytest
from yota.backends.llvm.runtime import jit, pool, pool_ir
from yota.backends.llvm.runtime.target import host

import yota


@pytest.fixture
def objdir(tmp_path):
    d = tmp_path / "objects"
    jit.set_object_cache(d)
    yield d
    jit.set_object_cache(None)


def pool_text():
    t = host()
    return str(pool_ir.module(t.triple, t.blas, False))


def test_compiled_once_then_read_back(objdir, monkeypatch):
    text, t = pool_text(), host()
    obj = jit.cached_object(text, t)
    files = list(objdir.glob("*.o"))
    assert len(files) == 1 and files[0].stem == jit.object_key(text, t, 3)
    assert oct(objdir.stat().st_mode & 0o777) == "0o700"

    def boom(*a, **k):
        raise AssertionError("compiled again")
    monkeypatch.setattr(jit, "optimize", boom)
    assert jit.cached_object(text, t) == obj
    loaded = jit.load_object(obj, t, [pool.SYMBOL])
    assert loaded.addresses[pool.SYMBOL]


def test_other_text_or_level_is_another_object(objdir):
    text, t = pool_text(), host()
    jit.cached_object(text, t)
    jit.cached_object(text, t, 2)
    jit.cached_object(text.replace("yota_pool_helper", "yota_pool_helper2"), t)
    assert len(list(objdir.glob("*.o"))) == 3


def test_a_damaged_object_is_compiled_again(objdir):
    text, t = pool_text(), host()
    obj = jit.cached_object(text, t)
    f = next(objdir.glob("*.o"))
    raw = bytearray(f.read_bytes())
    raw[-10] ^= 0xFF
    f.write_bytes(bytes(raw))
    assert jit.cached_object(text, t) == obj  # recompiled (same code), rewritten
    assert f.read_bytes() != bytes(raw)
    f.write_bytes(raw[:20])  # truncated
    assert jit.cached_object(text, t) == obj


def test_a_directory_others_can_write_is_not_used(objdir, monkeypatch):
    text, t = pool_text(), host()
    jit.cached_object(text, t)
    os.chmod(objdir, 0o777)
    calls = []
    real = jit.optimize
    monkeypatch.setattr(jit, "optimize", lambda *a, **k: calls.append(1) or real(*a, **k))
    jit.cached_object(text, t)
    assert calls == [1]  # compiled, not read
    os.chmod(objdir, 0o700)


def test_without_a_directory_nothing_is_written(tmp_path):
    jit.set_object_cache(None)
    assert jit.cached_object(pool_text(), host())
    assert list(tmp_path.iterdir()) == []


def test_a_warm_process_runs_no_llvm_compilation(tmp_path):
    script = tmp_path / "run.py"
    script.write_text(textwrap.dedent("""\
        import sys
        import numpy as np, yota
        from yota.backends.llvm.runtime import jit

        def loss(w, x):
            return np.sum(np.tanh(x @ w) ** 2)

        # a product large enough to be tiled over the helper pool: the pool is loaded
        w, x = np.ones((64, 512)) / 64, np.linspace(-1, 1, 512 * 64).reshape(512, 64)
        if sys.argv[1] == "warm":
            def boom(*a, **k):
                raise AssertionError("LLVM ran in a warm process")
            jit.optimize = jit.emit_object = boom
        val, g = yota.grad(loss, w, x)
        print(float(val), yota.cache.stats.hits)
        """))
    env = {**os.environ, "YOTA_CACHE_DIR": str(tmp_path / "cache")}
    env.pop("YOTA_CACHE", None)
    outs = [subprocess.run([sys.executable, str(script), mode], capture_output=True,
                           text=True, env=env, cwd=tmp_path, timeout=300)
            for mode in ("cold", "warm")]
    for r in outs:
        assert r.returncode == 0, r.stderr
    (v0, h0), (v1, h1) = (r.stdout.split() for r in outs)
    assert v0 == v1 and (h0, h1) == ("0", "1")
    assert list((tmp_path / "cache" / "objects").glob("*.o"))
    w, x = np.ones((64, 512)) / 64, np.linspace(-1, 1, 512 * 64).reshape(512, 64)
    assert float(v0) == pytest.approx(float(yota.grad(
        lambda w, x: np.sum(np.tanh(x @ w) ** 2), w, x, backend="interp")[0]))
