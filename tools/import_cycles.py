"""Prints the import cycles among Yota's modules (``yota``, ``yota.ir``, ``yota.backends``).

Every ``import`` statement counts, at module level or inside a function (a function-level
import is a dependency too, only a late one). Cycles are the strongly connected
components of the import graph with more than one module.

    python tools/import_cycles.py               # every cycle under yota/, ir/, backends/
    python tools/import_cycles.py --only yota   # only cycles among yota/'s own modules
"""

from __future__ import annotations

import argparse
import ast
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PACKAGES = {"yota": ROOT / "yota", "yota.ir": ROOT / "ir", "yota.backends": ROOT / "backends"}


def module_files() -> dict[str, Path]:
    """Module name → source file, for every module of the three packages."""
    mods: dict[str, Path] = {}
    for pkg, base in PACKAGES.items():
        for path in sorted(base.rglob("*.py")):
            rel = path.relative_to(base).with_suffix("").parts
            if rel[-1] == "__init__":
                rel = rel[:-1]
            name = ".".join((pkg, *rel))
            if not any(name.startswith(p + ".") and p != pkg and len(p) > len(pkg)
                       for p in PACKAGES):  # yota/ir is not a thing; ir/ is yota.ir
                mods[name] = path
    return mods


def _absolute(mod: str, is_pkg: bool, level: int, target: str | None) -> str:
    if level == 0:
        return target or ""
    parts = mod.split(".")
    base = parts if is_pkg else parts[:-1]
    base = base[: len(base) - (level - 1)]
    return ".".join(base + ([target] if target else []))


def imports_of(mod: str, path: Path, known: set[str]) -> set[str]:
    """The known modules that ``mod`` imports anywhere in its source."""
    is_pkg = path.name == "__init__.py"
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            names = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = _absolute(mod, is_pkg, node.level, node.module)
            # `from pkg import name`: the submodule pkg.name if there is one, else pkg
            names = [f"{base}.{a.name}" if f"{base}.{a.name}" in known else base
                     for a in node.names]
        else:
            continue
        for name in names:
            while name and name not in known:  # `import yota.ir.core` → yota.ir.core
                name = name.rpartition(".")[0]
            if name and name != mod:
                found.add(name)
    return found


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components with more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on: set[str] = set()
    out: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on.add(v)
        for w in sorted(graph[v]):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                out.append(sorted(comp))

    sys.setrecursionlimit(10_000)
    for v in sorted(graph):
        if v not in index:
            visit(v)
    return sorted(out)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--only", help="keep only modules under this package (e.g. yota)")
    args = ap.parse_args()
    files = module_files()
    known = set(files)
    graph = {m: imports_of(m, p, known) for m, p in files.items()}
    if args.only:
        def keep(m: str) -> bool:
            inner = m == args.only or m.startswith(args.only + ".")
            return inner and not any(m == p or m.startswith(p + ".") for p in PACKAGES
                                     if p != args.only and p.startswith(args.only + "."))
        graph = {m: {d for d in ds if keep(d)} for m, ds in graph.items() if keep(m)}
    found = cycles(graph)
    for comp in found:
        print(f"cycle of {len(comp)}: " + ", ".join(comp))
        for m in comp:
            inside = sorted(d for d in graph[m] if d in comp)
            print(f"    {m} -> {', '.join(inside)}")
    print(f"{len(found)} cycle(s)")
    return 1 if found else 0


if __name__ == "__main__":
    sys.exit(main())
