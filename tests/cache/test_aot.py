"""Ahead-of-time compilation (yota.aot, `yota-ir aot`): into the cache and into a shippable
directory (a new process then loads instead of compiling), and into a shared library with
a C header, called from a compiled C program and from Python with ctypes alone (no
llvmlite), with the results of yota.grad. Also the `yota-ir cache` commands."""

from __future__ import annotations

import importlib
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from click.testing import CliRunner
from support import TESTS

import yota
from yota import cache as yc
from yota.cli import main as cli

EXAMPLES = TESTS / "cache_examples"
EXAMPLE_MODULES = ("model", "helpers", "rules_mod")
needs_cc = pytest.mark.skipif(shutil.which("gcc") is None, reason="needs gcc")


@pytest.fixture(autouse=True)
def isolated(tmp_path, monkeypatch):
    """A private cache; the example modules (their folder on the import path) are
    forgotten afterwards."""
    monkeypatch.setenv("YOTA_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.delenv("YOTA_CACHE", raising=False)
    monkeypatch.syspath_prepend(str(EXAMPLES))  # the examples import each other by name
    saved = {n: sys.modules.pop(n) for n in EXAMPLE_MODULES if n in sys.modules}
    yield
    for n in EXAMPLE_MODULES:
        sys.modules.pop(n, None)
    sys.modules.update(saved)


def load_model():
    return importlib.import_module("model")


def subprocess_env(cache: Path) -> dict[str, str]:
    env = {**os.environ, "YOTA_CACHE_DIR": str(cache), "PYTHONDONTWRITEBYTECODE": "1"}
    env.pop("YOTA_CACHE", None)
    return env


def run_grad(cache: Path) -> dict:
    proc = subprocess.run([sys.executable, str(EXAMPLES / "run_grad.py"), str(EXAMPLES)],
                          capture_output=True, text=True, env=subprocess_env(cache), timeout=120)
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout.strip().splitlines()[-1])


def reference(m):
    args = m.example()
    val, g = yota.grad(m.loss, *args, cache=False)
    return args, [np.asarray(val), g[0].W, g[0].b, g[1]]


# -- into a cache ---------------------------------------------------------------------------
def test_aot_into_the_cache_then_a_new_process_loads_it(tmp_path):
    m = load_model()
    r = yota.aot(m.loss, *m.example())
    assert r.compiled and r.path.parent == tmp_path / "cache" / "entries"
    assert not yota.aot(m.loss, *m.example()).compiled  # already there
    out = run_grad(tmp_path / "cache")
    assert out["cache"]["hits"] == 1 and out["llvm"]["compiles"] == 0


def test_aot_into_a_shippable_directory(tmp_path):
    m = load_model()
    ship = tmp_path / "shipped"
    r = yota.aot(m.loss, *m.example(), path=ship)
    manifest = json.loads((ship / "manifest.json").read_text())
    assert manifest["programs"][r.key]["function"] == "model.loss"
    assert manifest["programs"][r.key]["signature"].startswith("(model.Params(W=f64[6,4]")
    assert not (tmp_path / "cache").exists()  # the user's cache is untouched
    for d in (ship, ship / "entries", r.path):
        os.chmod(d, 0o500)  # installed read-only
    try:
        out = run_grad(ship)
    finally:
        for d in (ship, ship / "entries", r.path):
            os.chmod(d, 0o700)
    assert out["cache"]["hits"] == 1 and out["llvm"]["compiles"] == 0 and not out["warnings"]


def test_aot_refuses_an_unsafe_directory(tmp_path):
    m = load_model()
    bad = tmp_path / "open"
    bad.mkdir()
    os.chmod(bad, 0o777)
    with pytest.raises(yota.YotaError, match="writable by others"):
        yota.aot(m.loss, *m.example(), path=bad)


# -- shared libraries -----------------------------------------------------------------------
@pytest.fixture
def library(tmp_path):
    m = load_model()
    args, want = reference(m)
    r = yota.aot(m.loss, *args, path=tmp_path / "lib", shared_library=True, name="model_grad")
    return r.library, args, want


def inputs_of(args) -> list[np.ndarray]:
    p, X, labels, _ = args
    return [p.W, p.b, X, labels]


@needs_cc
def test_shared_library_called_from_c(library, tmp_path):
    lib, args, want = library
    assert lib.library.name == "libmodel_grad.so" and lib.header.name == "model_grad.h"
    exe = tmp_path / "call_grad"
    subprocess.run(["gcc", "-std=c11", "-Wall", "-Wextra", "-Werror", "-O1",
                    str(EXAMPLES / "call_grad.c"), f"-I{lib.header.parent}",
                    f"-L{lib.library.parent}", "-lmodel_grad",
                    f"-Wl,-rpath,{lib.library.parent}", "-o", str(exe)], check=True)
    data = tmp_path / "data"
    data.mkdir()
    ins = inputs_of(args)
    for i, a in enumerate(ins):
        (data / f"in{i}.bin").write_bytes(np.ascontiguousarray(a).tobytes())
    proc = subprocess.run([str(exe), str(data), *[str(a.size) for a in ins]],
                          capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    for j, w in enumerate(want):
        got = np.fromfile(data / f"out{j}.bin", np.float64).reshape(w.shape)
        np.testing.assert_allclose(got, w, rtol=1e-12, atol=1e-12)


@needs_cc
@pytest.mark.parametrize("blas", [False, True], ids=["portable-gemm", "numpy-openblas"])
def test_shared_library_from_python_without_llvmlite(library, tmp_path, blas):
    lib, args, want = library
    np.savez(tmp_path / "in.npz", *inputs_of(args))
    proc = subprocess.run([sys.executable, str(EXAMPLES / "call_so.py"), str(lib.library),
                           str(lib.manifest), str(tmp_path / "in.npz"), str(tmp_path / "out.npz"),
                           *(["--blas"] if blas else [])],
                          capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    status = json.loads(proc.stdout)
    assert status == {"rc": 0, "llvmlite": False, "yota": False}
    out = np.load(tmp_path / "out.npz")
    for j, w in enumerate(want):
        np.testing.assert_allclose(out[f"arr_{j}"], w, rtol=1e-12, atol=1e-12)


@needs_cc
def test_load_library_imports_no_compiler(library, tmp_path):
    lib, args, want = library
    np.savez(tmp_path / "in.npz", *inputs_of(args))
    code = (
        "import sys, numpy as np\n"
        "from yota.aot import load_library\n"
        f"fns = load_library({str(lib.library)!r})\n"
        f"d = np.load({str(tmp_path / 'in.npz')!r})\n"
        "outs = fns['model_grad'](*[d[f'arr_{i}'] for i in range(4)])\n"
        f"np.savez({str(tmp_path / 'out.npz')!r}, *outs)\n"
        "assert 'llvmlite' not in sys.modules, 'llvmlite was imported'\n")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          timeout=60)
    assert proc.returncode == 0, proc.stderr
    out = np.load(tmp_path / "out.npz")
    for j, w in enumerate(want):
        np.testing.assert_allclose(out[f"arr_{j}"], w, rtol=1e-12, atol=1e-12)


@needs_cc
def test_header_is_valid_c_and_documents_the_layout(library, tmp_path):
    lib, _, _ = library
    text = lib.header.read_text()
    assert "row-major" in text and "MODEL_GRAD_WORKSPACE_BYTES" in text
    assert 'const double *p_W,' in text and '/* in  f64[6,4] "p.W" */' in text
    assert 'const int64_t *labels,' in text and '/* out f64[5,6] "grad X" */' in text
    assert "returns 1: index out of range" in text
    src = tmp_path / "use.c"
    src.write_text(f'#include "{lib.header.name}"\nint main(void) {{ return 0; }}\n')
    subprocess.run(["gcc", "-std=c99", "-pedantic", "-Wall", "-Werror", "-fsyntax-only",
                    f"-I{lib.header.parent}", str(src)], check=True)


def branchy(x):
    if np.sum(x) > 0:
        return np.sum(x * x)
    return np.sum(-x)


@needs_cc
def test_guard_failure_is_a_return_code(tmp_path):
    from yota.aot import build_shared_library, load_library

    x = np.array([1.0, 2.0, 3.0])
    b = build_shared_library([(branchy, (x,)), (lambda x: np.sum(np.exp(x)), (x,))],
                             tmp_path, lib_name="two", names=["branchy_grad", "expsum"])
    text = b.header.read_text()
    assert "int branchy_grad(" in text and "int expsum(" in text
    assert "returns 1: guard at test_aot.py:" in text
    fns = load_library(b.library)
    val, g = fns["branchy_grad"](x)
    assert val == 14.0 and np.array_equal(g, 2 * x)
    with pytest.raises(RuntimeError, match="returned 1: guard"):
        fns["branchy_grad"](-x)
    np.testing.assert_allclose(fns["expsum"](x)[1], np.exp(x))


# -- the command line -----------------------------------------------------------------------
def invoke(*args: str) -> str:
    r = CliRunner().invoke(cli, list(args), catch_exceptions=False)
    assert r.exit_code == 0, r.output
    return r.output


TARGET = str(EXAMPLES / "model.py") + ":loss"


def test_cli_aot_and_cache_commands(tmp_path):
    d = str(tmp_path / "c")
    out = invoke("aot", TARGET, "--example", "example", "-o", d)
    assert "compiled and stored" in out
    key = out.split()[3]
    assert "already stored" in invoke("aot", TARGET, "--example", "example", "-o", d)
    listing = invoke("cache", "--dir", d, "list")
    assert "1 entries" in listing and key[:16] in listing and "@loss_vjp" in listing
    assert json.loads(invoke("cache", "--dir", d, "list", "--json"))[0]["key"] == key
    info = invoke("cache", "--dir", d, "info", key[:8])
    assert "checksum ok" in info and "X: f64[5,6]" in info and "memory plan" in info
    assert "func @loss_vjp" in invoke("cache", "--dir", d, "info", key[:8], "--ir")
    assert json.loads(invoke("cache", "--dir", d, "info", key, "--json"))["key"] == key
    assert "HIT" in invoke("cache", "--dir", d, "explain", TARGET, "--example", "example")
    assert "1 of 1 entries ok" in invoke("cache", "--dir", d, "verify")
    (Path(d) / "entries" / key / "object.o").write_bytes(b"broken")
    r = CliRunner().invoke(cli, ["cache", "--dir", d, "verify"])
    assert r.exit_code == 1 and "truncated" in r.output
    assert "removed:" in invoke("cache", "--dir", d, "verify", "--remove")
    miss = invoke("cache", "--dir", d, "explain", TARGET, "--example", "example")
    assert "MISS" in miss and "no stored entry" in miss
    invoke("aot", TARGET, "--example", "example", "-o", d)
    assert "removed 1 entries" in invoke("cache", "--dir", d, "clear")
    r = CliRunner().invoke(cli, ["cache", "--dir", d, "info", "abc"])
    assert r.exit_code == 1 and "no entry" in r.output


@needs_cc
def test_cli_aot_shared_library(tmp_path):
    out = invoke("aot", TARGET, "--example", "example", "-o", str(tmp_path), "--shared-library",
                 "--name", "mg")
    assert "libmg.so" in out and "int mg(4 inputs, 4 outputs)" in out
    assert (tmp_path / "mg.h").exists() and (tmp_path / "mg.json").exists()
    r = CliRunner().invoke(cli, ["aot", TARGET, "--example", "example", "--shared-library"])
    assert r.exit_code == 2 and "needs -o DIR" in r.output


def test_explain_names_the_parts_and_compiles_nothing(tmp_path):
    from yota.backends import llvm

    m = load_model()
    before = llvm.stats["compiles"]
    ex = yota.explain(m.loss, *m.example())
    assert not ex.hit and llvm.stats["compiles"] == before
    assert [line.split()[0] for line in str(ex).splitlines()[3:3 + len(yc.KEY_PARTS)]] == \
        list(yc.KEY_PARTS)
