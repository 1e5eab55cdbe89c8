"""Fast start: what a new process remembers from the cache directory instead of
recomputing (the sources digest without walking the folders, the default pipeline's
names without importing the passes) stays exact: a new, edited or removed module is
seen. Run on a copy of the package laid out as the wheel installs it."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
import time

import pytest
from support.wheel_layout import wheel_layout

SCRIPT = textwrap.dedent("""\
    import json, sys
    from yota.cache import key
    from yota.backends import llvm
    remembered = key._remembered_digest(str(__import__("pathlib").Path(llvm.__file__).resolve()))
    version = key._yota_version(llvm)["sources"]
    names = key.default_pipeline()
    print(json.dumps({"remembered": remembered, "digest": version, "pipeline": names,
                      "passes imported": "yota.ir.passes" in sys.modules}))
    """)


def _run(site, cache, tmp_path) -> dict:
    script = tmp_path / "digest.py"
    script.write_text(SCRIPT)
    # no bytecode written into the copy: a new __pycache__ folder is a change of the
    # package's folders, which the remembered digest rightly sees (pip compiles at install)
    env = {**os.environ, "PYTHONPATH": str(site), "YOTA_CACHE_DIR": str(cache),
           "PYTHONDONTWRITEBYTECODE": "1"}
    r = subprocess.run([sys.executable, str(script)], capture_output=True, text=True,
                       env=env, cwd=tmp_path, timeout=120)
    assert r.returncode == 0, r.stderr
    return json.loads(r.stdout.splitlines()[-1])


def test_remembered_sources_digest_and_pipeline_stay_exact(tmp_path):
    site = wheel_layout(tmp_path / "site")
    cache = tmp_path / "cache"
    cache.mkdir(mode=0o700)
    first = _run(site, cache, tmp_path)
    assert first["remembered"] is None and first["passes imported"]
    again = _run(site, cache, tmp_path)
    assert again["remembered"] == again["digest"] == first["digest"]
    assert again["pipeline"] == first["pipeline"] and not again["passes imported"]

    time.sleep(0.01)  # (a new mtime on coarse clocks)
    new = site / "yota" / "backends" / "llvm" / "newmodule.py"
    new.write_text("X = 1\n")  # a new module in a folder of the backend
    added = _run(site, cache, tmp_path)
    assert added["remembered"] is None and added["digest"] != first["digest"]
    assert _run(site, cache, tmp_path)["remembered"] == added["digest"]

    time.sleep(0.01)
    new.write_text("X = 2\n")  # edited in place
    edited = _run(site, cache, tmp_path)
    assert edited["remembered"] is None and edited["digest"] != added["digest"]

    new.unlink()  # removed again: the first digest
    assert _run(site, cache, tmp_path)["digest"] == first["digest"]

    passes = site / "yota" / "ir" / "passes" / "__init__.py"
    text = passes.read_text()
    head = "PIPELINE: list[tuple[str, str]] = ["
    assert head in text
    passes.write_text(text.replace(head, head + '\n    ("dce", "first of all"),', 1))
    changed = _run(site, cache, tmp_path)  # the pipeline's sources changed: imported
    assert changed["passes imported"] and changed["pipeline"] != first["pipeline"]
    assert _run(site, cache, tmp_path)["pipeline"] == changed["pipeline"]


LAZY = textwrap.dedent("""\
    import json, sys
    import numpy as np
    import yota
    from yota.numpy import registry
    lazy = [f"yota.numpy.{m}" for m in registry.LAZY_FAMILIES]
    out = {"after import": [m for m in lazy if m in sys.modules]}
    x = np.array([[2.0, 1.0], [1.0, 3.0]])
    g = yota.grad(lambda a: np.sum(a * a), x, cache=False)[1][0]
    out["after a core program"] = [m for m in lazy if m in sys.modules]
    out["core grad"] = g.tolist()
    f = lambda a: np.sum(np.cumsum(np.concatenate([a, np.linalg.inv(a)]), axis=0))
    out["lazy value"] = float(f(x))
    out["lazy grad"] = yota.grad(f, x, cache=False)[1][0].tolist()
    out["after lazy"] = [m for m in lazy if m not in sys.modules]
    try:
        yota.grad(lambda a: np.sum(np.fft.fft(a).real), x, cache=False)
    except yota.ir.errors.UnsupportedError as e:
        out["unsupported"] = str(e)
    print(json.dumps(out))
    """)


def test_lazy_numpy_families_load_on_first_need(tmp_path):
    """``import yota`` leaves the rarely used NumPy families unimported; a program using
    only the core ones does not import them; the first function of one imports them all
    (traced and differentiated as before); an unsupported function still says so."""
    script = tmp_path / "lazy.py"
    script.write_text(LAZY)
    r = subprocess.run([sys.executable, str(script)], capture_output=True, text=True,
                       cwd=tmp_path, timeout=120)
    assert r.returncode == 0, r.stderr
    out = json.loads(r.stdout.splitlines()[-1])
    assert out["after import"] == [] and out["after a core program"] == []
    assert out["core grad"] == [[4.0, 2.0], [2.0, 6.0]]
    assert out["after lazy"] == []
    import numpy as np

    x = np.array([[2.0, 1.0], [1.0, 3.0]])
    f = lambda a: np.sum(np.cumsum(np.concatenate([a, np.linalg.inv(a)]), axis=0))  # noqa: E731
    assert abs(out["lazy value"] - float(f(x))) < 1e-12
    eps, num = 1e-6, np.zeros_like(x)
    for i in np.ndindex(x.shape):
        d = np.zeros_like(x)
        d[i] = eps
        num[i] = (f(x + d) - f(x - d)) / (2 * eps)
    assert np.allclose(out["lazy grad"], num, rtol=1e-6, atol=1e-7)
    assert "np.fft.fft is not supported on traced arrays" in out["unsupported"]


OWN_BLAS = textwrap.dedent("""\
    import ctypes, json, os, sys
    import numpy as np
    from yota.backends.llvm.runtime import blas
    tasks = set(os.listdir("/proc/self/task"))
    env = os.environ.get("OPENBLAS_NUM_THREADS")
    bundled = [p for p in blas._libraries()[1:] if "numpy" in p]
    numpy_threads = lambda: ctypes.CDLL(bundled[0]).scipy_openblas_get_num_threads64_() \\
        if bundled else None
    before = numpy_threads()
    path = blas.own_library()
    print(json.dumps({
        "loaded": path is not None,
        "new threads": len(set(os.listdir("/proc/self/task")) - tasks),
        "env kept": os.environ.get("OPENBLAS_NUM_THREADS") == env,
        "numpy threads kept": numpy_threads() == before,
        "own threads": ctypes.CDLL(path).scipy_openblas_get_num_threads64_() if path else None,
    }))
    """)


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc/self/task")
@pytest.mark.parametrize("setting", [None, "3"])
def test_own_blas_loads_without_worker_threads(tmp_path, setting):
    """Yota's own OpenBLAS instance starts no worker thread when it loads (a spinning one
    would share the cores with a new process's first gradient), and the environment and
    NumPy's OpenBLAS threading are as they were, whether or not the user set
    OPENBLAS_NUM_THREADS."""
    script = tmp_path / "own_blas.py"
    script.write_text(OWN_BLAS)
    env = {k: v for k, v in os.environ.items() if k != "OPENBLAS_NUM_THREADS"}
    if setting is not None:
        env["OPENBLAS_NUM_THREADS"] = setting
    r = subprocess.run([sys.executable, str(script)], capture_output=True, text=True,
                       cwd=tmp_path, env=env, timeout=120)
    assert r.returncode == 0, r.stderr
    out = json.loads(r.stdout.splitlines()[-1])
    if not out["loaded"]:
        pytest.skip("scipy-openblas64 not installed: no own instance")
    assert out == {"loaded": True, "new threads": 0, "env kept": True,
                   "numpy threads kept": True, "own threads": 1}
