"""A copy of the sources laid out as the wheel installs them (``yota/``, ``yota/ir/``,
``yota/backends/``): for tools that read packages from the file system (mypy,
import-linter) and for tests that edit a copy of the package. The checkout maps ``ir/``
and ``backends/`` into ``yota`` only through the installed package."""

from __future__ import annotations

import shutil
from pathlib import Path

from support import ROOT


def wheel_layout(site: Path) -> Path:
    """Copy the package into ``site`` (created) in the wheel's layout; returns ``site``."""
    ignore = shutil.ignore_patterns("__pycache__", "*.pyc")
    shutil.copytree(ROOT / "yota", site / "yota", ignore=ignore)
    shutil.copytree(ROOT / "ir", site / "yota" / "ir", ignore=ignore)
    shutil.copytree(ROOT / "backends", site / "yota" / "backends", ignore=ignore)
    return site
