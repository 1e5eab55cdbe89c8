"""The manual: ``mkdocs build --strict`` passes, and every Python example in docs/ and the
README runs.

A ```` ```python ```` block whose first line starts with ``>>>`` is a doctest (its output
is checked); any other is run as a script. Blocks of one page share a namespace, in
order, as a reader would run them. A block right after a ``<!-- skip: reason -->`` line
is not run (it needs MPI, a GPU, or code the reader supplies). The docs extra (MkDocs,
Material, mkdocstrings, matplotlib) is part of the test extra, so CI builds the site.
"""

from __future__ import annotations

import doctest
import importlib.util
import re
import shlex
import subprocess
import sys
import time
import warnings
from pathlib import Path
from typing import Any

import pytest
from support import ROOT

PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]
FENCE = re.compile(r"^(?P<q>(?:> ?)?)```python[^\n]*\n(?P<code>.*?)^(?P=q)```\s*$", re.M | re.S)
SKIP = re.compile(r"<!-- skip: .+ -->")


def examples(text: str) -> list[tuple[int, str]]:
    """(line, code) of each Python block of a Markdown page that is to run."""
    out = []
    for m in FENCE.finditer(text):
        before = text[:m.start()].rstrip("\n").rsplit("\n", 1)[-1]
        if SKIP.fullmatch(re.sub(r"^> ?", "", before).strip()):
            continue
        code = m.group("code")
        if m.group("q"):  # a block inside a quote: drop the quote marks
            code = re.sub(r"^> ?", "", code, flags=re.M)
        out.append((text.count("\n", 0, m.start()) + 2, code))
    return out


def run_page(path: Path) -> None:
    ns: dict[str, Any] = {"__name__": f"docs_{path.stem.replace('-', '_')}"}
    flags = doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE
    for line, code in examples(path.read_text()):
        where = f"{path.relative_to(ROOT)}:{line}"
        if code.lstrip().startswith(">>>"):
            test = doctest.DocTestParser().get_doctest(code, ns, where, str(path), line)
            runner = doctest.DocTestRunner(optionflags=flags)
            runner.run(test, clear_globs=False)
            ns.update(test.globs)
            assert runner.failures == 0, f"{where}: {runner.failures} doctest failure(s)"
        else:
            exec(compile(code, where, "exec"), ns)


@pytest.mark.parametrize("page", PAGES, ids=[str(p.relative_to(ROOT)) for p in PAGES])
def test_examples_run(page: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)  # examples that write files write them here
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # RetraceWarnings the examples provoke on purpose
        run_page(page)


CONSOLE = re.compile(r"^```console\n\$ (yota-ir [^\n]*)\n(.*?)^```$", re.M | re.S)
SESSIONS = [(p, m.group(1), m.group(2)) for p in PAGES for m in CONSOLE.finditer(p.read_text())]


@pytest.mark.parametrize("page, command, shown", SESSIONS,
                         ids=[f"{p.name}:{c.split()[1]}" for p, c, _ in SESSIONS])
def test_console_sessions_show_real_output(page: Path, command: str, shown: str,
                                           monkeypatch: pytest.MonkeyPatch) -> None:
    """A ```` ```console ```` block: ``$ yota-ir ...`` (optionally ``| grep 'RE'``) and the
    exact output, run in-process from the repository's root."""
    from click.testing import CliRunner

    from yota import cli

    command, _, grep = command.partition(" | grep ")
    monkeypatch.chdir(ROOT)
    r = CliRunner().invoke(cli.main, shlex.split(command)[1:])
    assert r.exit_code == 0, r.output
    out = r.stdout.splitlines()
    if grep:
        pattern = shlex.split(grep)[0].replace(r"\|", "|")
        out = [ln for ln in out if re.search(pattern, ln)]
    assert out == shown.splitlines(), f"{page.name}: the output of `{command}` changed"


def test_skip_marker_and_quotes() -> None:
    text = ("```python\nx = 1\n```\n\n<!-- skip: needs MPI -->\n```python\nboom()\n```\n\n"
            "> ```python\n> >>> 1 + 1\n> 2\n> ```\n")
    assert [code for _, code in examples(text)] == ["x = 1\n", ">>> 1 + 1\n2\n"]


def test_docstring_fences() -> None:
    spec = importlib.util.spec_from_file_location("docstrings", ROOT / "docs/hooks/docstrings.py")
    assert spec is not None and spec.loader is not None
    hook = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(hook)
    fence_doctests = hook.fence_doctests
    text = "Example::\n\n    code\n\n>>> 1 + 1\n2\n\nafter"
    assert fence_doctests(text) == ("Example:\n\n    code\n\n```pycon\n>>> 1 + 1\n2\n```\n\n"
                                    "after")


def test_mkdocs_build_strict(tmp_path: Path) -> None:
    t0 = time.perf_counter()
    p = subprocess.run([sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir",
                        str(tmp_path / "site")], cwd=ROOT, capture_output=True, text=True,
                       timeout=300, check=False)
    assert p.returncode == 0, p.stderr[-4000:]
    assert (tmp_path / "site" / "performance" / "index.html").exists()
    assert time.perf_counter() - t0 < 120, "the manual should build in well under a minute"
