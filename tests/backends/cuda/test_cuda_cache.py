"""CUDA programs in the on-disk cache: the cubin for the device's ``sm_XX`` plus the lowered
module as JSON, stored and loaded through ``yota.cache`` without NVRTC.

Without a GPU, the device is the CPU emulation presenting itself as an ``sm_90`` device:
the cubin is compiled by NVRTC for sm_90 (no GPU needed) and checksummed in the entry,
and the loaded artifact runs on the emulation from the kernel sources it carries. The
test on a real device skips here with the reason.
"""

from __future__ import annotations

import hashlib
import json
from typing import Any

import numpy as np
import pytest
from yota.backends import cuda
from yota.backends.cuda.artifact import Artifact, pack, unpack
from yota.backends.cuda.emulate import emulation_available
from yota.ir.errors import YotaError

import yota.cache as yc
from yota import pipeline

EMU = emulation_available()
NVRTC = cuda.nvrtc_available()
GPU = cuda.unavailable() if NVRTC is None else NVRTC

W = np.linspace(-1.0, 1.0, 12).reshape(3, 4)


def f(x: Any) -> Any:
    return np.sum(np.tanh(x * W) ** 2, axis=1) + np.max(x)


def loss(x: Any) -> Any:
    return np.sum(f(x))


def program(kind: str = "forward") -> tuple[Any, Any]:
    return pipeline.program_ir(f if kind == "forward" else loss, (np.ones((3, 4)),), kind=kind)


def run(exe: Any, x: np.ndarray) -> list[np.ndarray]:
    return [np.asarray(o.get() if hasattr(o, "get") else o) for o in exe(x)]


def emu90() -> Any:
    """The CPU emulation, presented as an sm_90 device (so its programs are cacheable)."""
    from yota.backends.cuda.emulate import EmuDevice

    class Emu90(EmuDevice):
        arch = "sm_90"

        def key(self) -> dict[str, Any]:
            return {**super().key(), "arch": self.arch, "nvrtc": list(cuda.nvrtc_version())}

    return Emu90()


@pytest.fixture
def device() -> Any:
    if EMU:
        pytest.skip(EMU)
    if NVRTC:
        pytest.skip(f"NVRTC is needed to compile the sm_90 cubin: {NVRTC}")
    dev = emu90()
    cuda.use_device(dev)
    yield dev
    cuda.use_device(None)


@pytest.fixture
def cache(tmp_path: Any) -> yc.DiskCache:
    c = yc.DiskCache(tmp_path / "cache")
    assert c.usable()
    return c


def test_module_round_trips_through_json() -> None:
    """Everything the runtime launches from survives JSON (no device, no NVRTC)."""
    if EMU:
        pytest.skip(EMU)
    from yota.backends.cuda.emulate import EmuDevice

    fn, _ = program("grad")
    mod = cuda.lower(fn, config=EmuDevice().cfg)
    mod.failures.append({"kind": "guard", "attrs": {"kind": "shape", "expected": (3, 4)},
                         "loc": "x.py:1", "index": 0, "dtype": "<f8"})
    cubin = b"\x7fELF-not-really-a-cubin"
    art = pack(mod, cubin, {"arch": "sm_90"})
    art2 = Artifact.from_bytes(art.to_bytes())
    assert art2.meta == json.loads(json.dumps(art.meta)) and art2.cubin == cubin
    back = unpack(art2)
    assert back.source() == mod.source() and back.kernels == mod.kernels
    assert back.plans == mod.plans and back.failures == mod.failures
    assert back.failures[-1]["attrs"]["expected"] == (3, 4)  # a tuple stays a tuple
    assert [t for t in back.inputs] == list(mod.inputs) and back.labels == list(mod.labels)
    assert len(back.consts) == len(mod.consts)
    for a, b in zip(back.consts, mod.consts, strict=True):
        assert a.dtype == b.dtype and np.array_equal(a, b)
    assert mod.consts, "the captured W should be a constant of the module"
    bad = Artifact(b"?" + art.object_code[1:], art.meta)
    with pytest.raises(YotaError, match="altered"):
        bad.cubin  # noqa: B018


def test_emulation_alone_is_not_cached() -> None:
    """The plain CPU emulation runs no cubin: the cache leaves its programs alone."""
    if EMU:
        pytest.skip(EMU)
    from yota.backends.cuda.emulate import EmuDevice

    cuda.use_device(EmuDevice())
    try:
        assert not cuda.cacheable()
        assert yc.make_key(program()[0], "cuda", kind="forward") is None
    finally:
        cuda.use_device(None)


def test_store_then_load_without_nvrtc(device: Any, cache: yc.DiskCache) -> None:
    fn, sig = program()
    key = yc.make_key(fn, "cuda", kind="forward", signature=sig)
    assert key is not None
    target = key.parts["target"]
    assert target["arch"] == "sm_90" and target["nvrtc"] == list(cuda.nvrtc_version())
    x = np.random.default_rng(0).standard_normal((3, 4))
    want = [np.sum(np.tanh(x * W) ** 2, axis=1) + np.max(x)]

    n0, hits0 = cuda.stats["nvrtc"], yc.stats.hits
    exe = yc.lookup_or_compile(cache, key, fn, "cuda")  # miss: compiled, saved
    assert cuda.stats["nvrtc"] == n0 + 1  # the sm_90 cubin for the entry
    np.testing.assert_allclose(run(exe, x)[0], want[0], rtol=1e-12)

    entry = cache.read(key.hex)
    assert entry is not None
    meta = entry.meta["backend_meta"]
    cubin = entry.files["object.o"][:meta["cubin"]["bytes"]]
    assert cubin[:4] == b"\x7fELF"
    assert hashlib.sha256(cubin).hexdigest() == meta["cubin"]["sha256"]
    assert meta["target"] == device.key()
    assert entry.meta["files"]["object.o"]["sha256"] == hashlib.sha256(
        entry.files["object.o"]).hexdigest()

    n1, loads = cuda.stats["nvrtc"], cuda.stats["loads"]
    exe2 = yc.lookup_or_compile(cache, key, fn, "cuda")  # hit: loaded, not compiled
    assert yc.stats.hits == hits0 + 1 and cuda.stats["loads"] == loads + 1
    assert cuda.stats["nvrtc"] == n1
    assert exe2 is not exe and exe2.fn is None
    np.testing.assert_array_equal(run(exe2, x)[0], run(exe, x)[0])


def test_entry_for_another_target_is_rebuilt(device: Any, cache: yc.DiskCache) -> None:
    fn, sig = program()
    key = yc.make_key(fn, "cuda", kind="forward", signature=sig)
    exe = yc.lookup_or_compile(cache, key, fn, "cuda")
    art = Artifact.from_bytes(cuda.save(exe))
    art.meta["target"] = {**art.meta["target"], "arch": "sm_80"}
    with pytest.raises(YotaError, match="another device"):
        cuda.load(art)
    cache.remove(key.hex)
    assert cache.store(key, fn, art.meta, art.object_code)
    with pytest.warns(yc.CacheWarning, match="unusable"):
        again = yc.lookup_or_compile(cache, key, fn, "cuda")
    x = np.ones((3, 4))
    np.testing.assert_array_equal(run(again, x)[0], run(exe, x)[0])


@pytest.mark.skipif(GPU is not None, reason=f"needs a CUDA device: {GPU}")
def test_gpu_cache_hit_loads_the_cubin(cache: yc.DiskCache) -> None:
    import cupy as cp

    fn, sig = program()
    key = yc.make_key(fn, "cuda", kind="forward", signature=sig)
    assert key is not None and key.parts["target"]["arch"].startswith("sm_")
    assert "driver" in key.parts["target"]
    x = np.random.default_rng(1).standard_normal((3, 4))
    exe = yc.lookup_or_compile(cache, key, fn, "cuda")
    n = cuda.stats["nvrtc"]
    exe2 = yc.lookup_or_compile(cache, key, fn, "cuda")
    assert cuda.stats["nvrtc"] == n
    np.testing.assert_array_equal(run(exe2, cp.asarray(x))[0], run(exe, cp.asarray(x))[0])
