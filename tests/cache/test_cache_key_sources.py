"""The cache key covers every source that shapes generated code: an edit to any file of
the front end, the IR package, the shared backend modules or the backend's own package
changes the key; an edit to another backend's package does not.

The check runs in a new process on a temporary copy of the package laid out as the wheel
installs it (``yota/``, ``yota/ir/``, ``yota/backends/``), so it edits nothing of the
checkout."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from support.wheel_layout import wheel_layout

SCRIPT = r"""
import json, sys
from pathlib import Path
import yota, yota.cache as cache
from yota.backends import get_backend
from yota.ir import Builder, TensorType

b = Builder("f")
x = b.input(TensorType("f64", (3,)), "x")
fn = b.build([b.sum(b.tanh(x), axes=(0,))])
mod = get_backend("llvm")

def key():
    cache._source_hashes.clear()
    return cache.make_key(fn, "llvm", kind="grad").hex

base = key()
files = cache.source_files(mod)
changed, unchanged = [], []
for name, path in files:
    old = path.read_bytes()
    path.write_bytes(old + b"\n# an edit\n")
    (changed if key() != base else unchanged).append(name)
    path.write_bytes(old)
others = [p for p in Path(yota.backends.__file__).parent.glob("*/*.py")
          if Path(mod.__file__).parent not in p.parents]
for p in others:
    old = p.read_bytes()
    p.write_bytes(old + b"\n# an edit\n")
    if key() != base:
        unchanged.append("other backend changed the key: " + p.name)
    p.write_bytes(old)
print(json.dumps({"file": yota.__file__, "names": [n for n, _ in files],
                  "changed": changed, "unchanged": unchanged, "others": len(others),
                  "restored": key() == base}))
"""


def test_an_edit_to_any_code_shaping_source_changes_the_key(tmp_path: Path) -> None:
    site = wheel_layout(tmp_path / "site")
    env = {**os.environ, "PYTHONPATH": str(site), "YOTA_CACHE_DIR": str(tmp_path / "cache")}
    r = subprocess.run([sys.executable, "-c", SCRIPT], capture_output=True, text=True,
                       env=env, cwd=tmp_path, timeout=300)
    assert r.returncode == 0, r.stderr
    out = json.loads(r.stdout.strip().splitlines()[-1])
    assert out["file"].startswith(str(site)), out["file"]  # the copy was imported
    names = out["names"]
    # each group is covered: the front end that builds the IR, the IR package (ops,
    # rules, passes), the backend-neutral modules and the llvm backend's own package
    for must in ("yota/tracer.py", "yota/lowering.py", "ir/core.py", "ir/passes/__init__.py",
                 "ir/autodiff/__init__.py", "backends/__init__.py", "backends/llvm/__init__.py"):
        assert must in names, must
    shared = [n for n in names if n.count("/") == 1 and n.startswith("backends/")]
    assert len(shared) >= 2, shared  # backends/__init__.py and the shared modules
    assert not any(n.startswith("backends/cuda/") for n in names)
    assert out["unchanged"] == [], out["unchanged"]
    assert sorted(out["changed"]) == sorted(names)
    assert out["others"] > 0 and out["restored"]


def test_a_backend_built_on_another_hashes_that_ones_sources_too() -> None:
    """The mlir backend runs through the llvm backend's JIT, entry and LAPACK lowering
    (``BUILDS_ON``): an edit there must invalidate mlir objects; the llvm backend's key
    does not depend on the mlir package."""
    from yota.backends import get_backend

    import yota.cache as cache

    mlir = [n for n, _ in cache.source_files(get_backend("mlir"))]
    llvm = [n for n, _ in cache.source_files(get_backend("llvm"))]
    assert "backends/llvm/lapack.py" in mlir and "backends/mlir/__init__.py" in mlir
    assert set(llvm) < set(mlir)
    assert not any(n.startswith(("backends/mlir/", "backends/cuda/")) for n in llvm)
    assert not any(n.startswith("backends/cuda/") for n in mlir)
