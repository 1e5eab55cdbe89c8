"""The repository's static checks, run with the tests (so `.ci/run`, which runs the
README's test command, runs them too): ruff (style, bugs, complexity at most 12), mypy
over ir/, backends/ and yota/ (zero errors; settings in pyproject.toml), and
import-linter's contracts (layers yota -> backends -> ir; in the llvm backend, the code
generator over its runtime; the mlir backend reaching llvm only through what llvm exports
for it; no import cycles among the modules of any package, the IR's core <-> printer pair
excepted)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from support import ROOT
from support.wheel_layout import wheel_layout


def _tool(name: str) -> str:
    exe = Path(sys.executable).parent / name
    if not exe.exists():  # the tools come with the test extra: pip install -e '.[test]'
        pytest.fail(f"{name} is not installed next to {sys.executable}; "
                    "install the test extra: pip install -e '.[test]'")
    return str(exe)


def _run(cmd: list[str], cwd: Path, **kw: object) -> subprocess.CompletedProcess[str]:
    return subprocess.run(cmd, cwd=cwd, capture_output=True, text=True, timeout=600,
                          **kw)  # type: ignore[call-overload]


def test_ruff_is_clean() -> None:
    r = _run([_tool("ruff"), "check", "--no-cache", "."], ROOT)
    assert r.returncode == 0, r.stdout + r.stderr


def test_mypy_reports_no_errors(tmp_path: Path) -> None:
    site = wheel_layout(tmp_path / "site")
    r = _run([sys.executable, "-m", "mypy", "--config-file", str(ROOT / "pyproject.toml"),
              "--cache-dir", str(tmp_path / "mypy"), "-p", "yota"], site)
    assert r.returncode == 0, r.stdout + r.stderr


def test_import_contracts_hold(tmp_path: Path) -> None:
    site = wheel_layout(tmp_path / "site")
    env = {"PYTHONPATH": str(site), "PATH": str(Path(sys.executable).parent)}
    r = _run([_tool("lint-imports"), "--config", str(ROOT / "pyproject.toml"), "--no-cache"],
             site, env=env)
    assert r.returncode == 0, r.stdout[-4000:] + r.stderr[-2000:]
    assert "BROKEN" not in r.stdout
