"""Fast start: Yota's own loader of object code (backends/llvm/runtime/objload.py) runs what MCJIT
runs, declines what it does not handle, and the modules a start or a cache hit does
not need are not imported (checked in new processes; nothing here is timed)."""

from __future__ import annotations

import json
import os
import struct
import subprocess
import sys
import textwrap

import numpy as np
import pytest
from yota.backends import llvm as native
from yota.backends.llvm.runtime import jit, objload, target

import yota

pytestmark = pytest.mark.skipif(not objload.usable(), reason="objload: x86-64 Linux only")



def f(a, b, c):
    t = np.tanh(a @ b + c)
    return np.sum(np.exp(t)), t


def _args():
    rng = np.random.default_rng(0)
    return [rng.standard_normal(s).astype(np.float32) for s in ((64, 32), (32, 16), (16,))]


def _fn():
    return yota.to_ir(yota.trace(f, *_args())[1])


def test_objload_runs_the_code_mcjit_runs(monkeypatch):
    fn = _fn()
    exe = native.compile(fn)
    assert isinstance(exe._loaded.engine, objload.Image)
    monkeypatch.setenv("YOTA_OWN_LOADER", "0")
    other = native.load(native.save(exe))
    assert not isinstance(other._loaded.engine, objload.Image)  # MCJIT
    args = _args()
    got, want = exe(*args), other(*args)
    for a, b in zip(got, want, strict=True):
        assert np.array_equal(a, b)  # the same machine code: bit for bit
    ref = yota.ir.run(fn, *args)
    np.testing.assert_allclose(got[0], ref[0], rtol=1e-5)


def test_loaded_many_times_and_collected():
    exe = native.compile(_fn())
    data = native.save(exe)
    args = _args()
    want = exe(*args)
    for _ in range(50):
        again = native.load(data)
        assert all(np.array_equal(a, b) for a, b in zip(again(*args), want, strict=True))
        del again


def _object() -> bytes:
    return native.save(native.compile(_fn()))


def _elf(data: bytes) -> bytearray:
    art = native.Artifact.from_bytes(data)
    return bytearray(art.object_code)


def test_declines_what_it_does_not_handle():
    obj = _elf(_object())
    syms = ["yota_main"]
    assert objload.load(bytes(obj), syms, target.resolve) is not None
    assert objload.load(b"not an object file", syms, target.resolve) is None
    assert objload.load(bytes(obj), syms, lambda name: None) is None  # unresolved names
    assert objload.load(bytes(obj), ["no_such_symbol"], target.resolve) is None
    # every relocation of one section changed to a type it does not handle (GOTPCREL)
    shoff, = struct.unpack_from("<Q", obj, 40)
    shentsize, shnum = struct.unpack_from("<HH", obj, 58)
    for i in range(shnum):
        sh = struct.unpack_from("<IIQQQQIIQQ", obj, shoff + i * shentsize)
        if sh[1] == objload.SHT_RELA and sh[5]:
            for k in range(sh[5] // 24):
                at = sh[4] + k * 24 + 8
                info, = struct.unpack_from("<Q", obj, at)
                struct.pack_into("<Q", obj, at, (info >> 32 << 32) | 9)
            break
    assert objload.load(bytes(obj), syms, target.resolve) is None
    truncated = _elf(_object())[:200]
    assert objload.load(bytes(truncated), syms, target.resolve) is None


def test_turned_off_by_the_environment(monkeypatch):
    monkeypatch.setenv("YOTA_OWN_LOADER", "0")
    assert not objload.usable()
    exe = native.compile(_fn())
    assert not isinstance(exe._loaded.engine, objload.Image)


def test_the_host_description_kept_is_what_llvm_says(tmp_path, monkeypatch):
    monkeypatch.setattr(jit, "object_cache_dir", lambda: tmp_path)  # (not read by host())
    from yota.backends.llvm.runtime import objcache

    monkeypatch.setattr(objcache, "_object_dir", tmp_path / "objects")
    first = target._host_description()  # asked of LLVM, kept
    files = list((tmp_path / "objects").glob("host-*.json"))
    assert len(files) == 1 and json.loads(files[0].read_text()) == first
    assert first == target._ask_llvm()
    monkeypatch.setattr(target, "_ask_llvm", lambda: pytest.fail("LLVM asked again"))
    assert target._host_description() == first
    assert target.host().key()["cpu"] == first["cpu"]


def _run(code: str, tmp_path, cache: str) -> dict:
    script = tmp_path / "run.py"
    script.write_text(textwrap.dedent(code))
    env = {**os.environ, "YOTA_CACHE_DIR": str(tmp_path / cache)}
    env.pop("YOTA_CACHE", None)
    r = subprocess.run([sys.executable, str(script)], capture_output=True, text=True,
                       env=env, cwd=tmp_path, timeout=300)
    assert r.returncode == 0, r.stderr
    return json.loads(r.stdout.splitlines()[-1])


NOT_AT_START = ["llvmlite", "yota.backends.llvm", "yota.cache.key", "yota.cache.store",
                "yota.ir.passes", "yota.ir.autodiff", "yota.ir.parser", "numpy.random",
                "logging", "yota.profile", "cupy"]


def test_import_yota_imports_only_what_a_start_needs(tmp_path):
    out = _run(f"""\
        import json, sys
        import numpy as np
        import yota
        loaded = [m for m in {NOT_AT_START!r} if m in sys.modules]
        from yota import compile, diffrule, profile, cache  # lazy names resolve
        print(json.dumps({{"loaded": loaded, "dir": dir(yota)}}))
        """, tmp_path, "cache")
    assert out["loaded"] == []
    for name in ("grad", "compile", "diffrule", "profile", "Profile", "cache", "aot"):
        assert name in out["dir"]


def test_a_cache_hit_needs_no_llvm(tmp_path):
    code = """\
        import json, sys
        import numpy as np
        import yota

        def loss(w, x):
            return np.sum(np.tanh(x @ w) ** 2)

        w, x = np.ones((64, 512)) / 64, np.linspace(-1, 1, 512 * 64).reshape(512, 64)
        val, g = yota.grad(loss, w, x)
        print(json.dumps({"hits": yota.cache.stats.hits, "val": float(val),
                          "llvm": [m for m in ("llvmlite.binding", "llvmlite.ir",
                                               "yota.ir.autodiff", "yota.ir.passes",
                                               "yota.backends.llvm.module",
                                               "yota.backends.llvm.runtime.pool_ir")
                                   if m in sys.modules],
                          "backend": sorted(m for m in sys.modules
                                            if m.startswith("yota.backends.llvm"))}))
        """
    cold = _run(code, tmp_path, "cache")
    warm = _run(code, tmp_path, "cache")
    assert cold["hits"] == 0 and warm["hits"] == 1 and warm["val"] == cold["val"]
    assert warm["llvm"] == []
    # the llvm package's __init__ and abi, and its runtime: none of the code generator
    assert [m for m in warm["backend"] if m not in ("yota.backends.llvm", "yota.backends.llvm.abi")
            and not m.startswith("yota.backends.llvm.runtime")] == [], warm["backend"]
