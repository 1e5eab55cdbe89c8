"""MkDocs hook: a view of the sources laid out as the installed package, for mkdocstrings.

``ir/`` and ``backends/`` are installed as ``yota.ir`` and ``yota.backends`` (a
``package-dir`` mapping), which griffe cannot follow in a checkout. This hook builds
``build/docs-src/yota/``: a link to every entry of ``yota/``, and ``ir`` and ``backends``
linked into it, so griffe reads ``yota.ir.errors`` where Python imports it from.
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path
from typing import Any

from mkdocs.plugins import event_priority

TREE = Path("build", "docs-src")


@event_priority(100)  # before mkdocstrings reads its paths
def on_config(config: Any) -> Any:
    root = Path(config["config_file_path"]).parent
    pkg = root / TREE / "yota"
    if pkg.exists() or pkg.is_symlink():
        shutil.rmtree(pkg)
    pkg.mkdir(parents=True)
    for entry in (root / "yota").iterdir():
        if entry.name != "__pycache__":
            os.symlink(entry, pkg / entry.name)
    for name, folder in (("ir", "ir"), ("backends", "backends")):
        os.symlink(root / folder, pkg / name)
    return config
