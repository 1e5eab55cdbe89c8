"""Packaging and layering: the wheel holds every module; layers import one way only."""

from __future__ import annotations

import ast
import os
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest
from support import ROOT

MAPPING = {"yota": "yota", "ir": "yota/ir", "backends": "yota/backends"}

# (layer directory, what its modules may import from yota)
LAYERS = {
    "ir": ("yota.ir",),
    "backends": ("yota.ir", "yota.backends"),
}


def _source_modules() -> set[str]:
    out = set()
    for top, target in MAPPING.items():
        for p in (ROOT / top).rglob("*.py"):
            out.add(f"{target}/{p.relative_to(ROOT / top).as_posix()}")
    return out


def _imports(path: Path) -> list[tuple[int, str]]:
    tree = ast.parse(path.read_text(), filename=str(path))
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found += [(node.lineno, a.name) for a in node.names]
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            found.append((node.lineno, node.module))
    return found


@pytest.mark.parametrize("layer", sorted(LAYERS))
def test_layers_import_one_way(layer: str) -> None:
    allowed = LAYERS[layer]
    bad = []
    for p in (ROOT / layer).rglob("*.py"):
        for line, mod in _imports(p):
            if (mod == "yota" or mod.startswith("yota.")) and not any(
                    mod == a or mod.startswith(a + ".") for a in allowed):
                bad.append(f"{p.relative_to(ROOT)}:{line} imports {mod}")
    assert not bad, "layers must import one way (yota -> backends -> ir):\n" + "\n".join(bad)


def test_relative_imports_stay_inside_layer() -> None:
    bad = []
    for layer in LAYERS:
        for p in (ROOT / layer).rglob("*.py"):
            depth = len(p.relative_to(ROOT / layer).parts) - 1
            for node in ast.walk(ast.parse(p.read_text())):
                if isinstance(node, ast.ImportFrom) and node.level > depth + 1:
                    bad.append(f"{p.relative_to(ROOT)}:{node.lineno}")
    assert not bad, f"relative imports that leave their layer: {bad}"


@pytest.fixture(scope="module")
def wheel(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("wheel")
    subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation",
                    "-q", "-w", str(out), str(ROOT)], check=True)
    (whl,) = out.glob("yota-*.whl")
    return whl


def test_wheel_holds_every_module(wheel: Path) -> None:
    names = set(zipfile.ZipFile(wheel).namelist())
    missing = sorted(_source_modules() - names)
    assert not missing, f"modules missing from the wheel (add their packages to pyproject): {missing}"
    tops = {n.split("/")[0] for n in names if not n.startswith("yota-")}
    assert tops == {"yota"}, f"only 'yota' may land at the top of site-packages, got {tops}"


def test_wheel_imports_in_fresh_venv(wheel: Path, tmp_path: Path) -> None:
    """The wheel alone, with the dependencies it declares, in a venv that sees nothing of
    the machine's or the test run's packages, imports and computes a gradient."""
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
    py = venv / "bin" / "python"
    env = {**os.environ, "PIP_DISABLE_PIP_VERSION_CHECK": "1"}
    for var in ("PYTHONPATH", "PYTHONHOME", "VIRTUAL_ENV"):
        env.pop(var, None)
    r = subprocess.run([str(py), "-c", "import sys; print(sys.prefix != sys.base_prefix)"],
                       capture_output=True, text=True, env=env, cwd=tmp_path, check=True)
    assert r.stdout.strip() == "True"
    # pip resolves what the wheel's metadata declares (numpy, llvmlite, click), from pip's
    # cache where the test run's own install left them
    r = subprocess.run([str(py), "-m", "pip", "install", "-q", str(wheel)],
                       capture_output=True, text=True, env=env, cwd=tmp_path, timeout=900)
    assert r.returncode == 0, r.stdout + r.stderr
    code = ("import yota, yota.ir, yota.backends, numpy as np, sys;"
            "assert 'site-packages' in yota.__file__ and str(sys.prefix) in yota.__file__, yota.__file__;"
            "foreign = [p for p in sys.path if 'packages' in p and not p.startswith(sys.prefix)];"
            "assert not foreign, foreign;"
            "v, g = yota.grad(lambda x: np.sum(x * x), np.arange(3.0));"
            "print(g[0].tolist())")
    r = subprocess.run([str(py), "-c", code], capture_output=True, text=True, env=env,
                       cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip() == "[0.0, 2.0, 4.0]"
